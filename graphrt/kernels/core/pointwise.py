"""The element-wise layer: kernel templates over 1-D views, and the operator bases built on
them, shared by the element-wise families (elementwise/, and others' element-wise steps).

Binary: out[i] = OP(a[offset_a(i)], b[offset_b(i)]) along a merged broadcast walk (see
broadcast.Walk). Unary: out[i] = OP(x[i]); parametric unary: out[i] = OP(x[i], p, q), with
scalars p and q that the node's attributes (or, for Clip, its inputs) fix, given in the
compute type so that the arithmetic stays in that type. In exact variants a NaN result is
written as the canonical quiet NaN (0x7FC00000 for float32).

Narrow floats (floats.py) are widened to float32 scratch, computed in float32 and the
result rounded once.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from .base import InferContext, OpKernel, RunContext, folding
from .broadcast import Walk, broadcast_shape, element_strides, put, row_offset, task_span
from .floats import FLOATS, compute_dtype, narrow, result_buffer, wide_calls, widen
from .jit import Variants, ask

EXACT = False
OP = None


# Each template below is one loop: the path (contiguous, broadcast, strided; in place or
# not) is chosen in Python when the plan is made (Forms.pick), never by branches inside the
# compiled function, which numba would type, optimise and vectorise whether used or not.
# Binary templates walk a broadcast.Walk: task t covers a part [j0, j1) of one row of the
# inner axis. The operands' inner strides are the constants IA and IB where a path binds
# them (1: contiguous, 0: one value per row; LLVM folds them, so each path is a loop of its
# own) or read from sa and sb (-1: any stride). Indices are unsigned (numba's wraparound of
# a negative signed index keeps loops scalar). An in-place form (the output takes over
# operand a, of the same size) reads out itself: with two names for the same memory LLVM's
# overlap test fails at run time and it takes its scalar loop.
IA = IB = -1


def _binary(a, b, out, shape, sa, sb, block, tasks):
    r = shape.size
    inner = shape[r - 1]
    per_row = (inner + block - 1) // block
    ia = np.uint64(sa[r - 1] if IA < 0 else IA)
    ib = np.uint64(sb[r - 1] if IB < 0 else IB)
    for t in prange(tasks):
        row, j0, j1 = task_span(t, per_row, block, inner)
        oa = np.uint64(row_offset(row, shape, sa))
        ob = np.uint64(row_offset(row, shape, sb))
        base = np.uint64(row * inner)
        for j in range(np.uint64(j0), np.uint64(j1)):
            put(out, base + j, OP(a[oa + j * ia], b[ob + j * ib]), EXACT)


def _binary_in(a, b, out, shape, sa, sb, block, tasks):
    """_binary with the output over a."""
    r = shape.size
    inner = shape[r - 1]
    per_row = (inner + block - 1) // block
    ib = np.uint64(sb[r - 1] if IB < 0 else IB)
    for t in prange(tasks):
        row, j0, j1 = task_span(t, per_row, block, inner)
        ob = np.uint64(row_offset(row, shape, sb))
        base = np.uint64(row * inner)
        for j in range(np.uint64(j0), np.uint64(j1)):
            put(out, base + j, OP(out[base + j], b[ob + j * ib]), EXACT)


def _binary_tiny(a, b, out, shape, sa, sb, block, tasks):
    """The general walk as one plain loop, serial, for tiny operands: element k's index
    from ``shape``, its operands' offsets from their strides."""
    r = shape.size
    for k in range(out.size):
        q = k
        oa = 0
        ob = 0
        for d in range(r - 1, -1, -1):
            e = shape[d]
            i = q % e
            q = q // e
            oa += i * sa[d]
            ob += i * sb[d]
        put(out, k, OP(a[oa], b[ob]), EXACT)


# Inputs of at most SMALL elements of integer or boolean type (shape arithmetic, mostly
# folded when a session is made) take the tiny path whatever their layout: one function per
# operation and type instead of one per path, compiled in about half the general path's time.
SMALL = 64


def small_ints(dtype, size: int) -> bool:
    return np.dtype(dtype).kind in "biu" and size <= SMALL


def _unary(x, out, block, tasks):
    n = out.size
    for t in prange(tasks):
        j0 = np.int64(t) * block
        for j in range(np.uint64(j0), np.uint64(min(n, j0 + block))):
            put(out, j, OP(x[j]), EXACT)


def _unary_in(x, out, block, tasks):
    """_unary with the output over x."""
    n = out.size
    for t in prange(tasks):
        j0 = np.int64(t) * block
        for j in range(np.uint64(j0), np.uint64(min(n, j0 + block))):
            put(out, j, OP(out[j]), EXACT)


class Forms:
    """The kernels of one element-wise operation, one template per path, each compiled per
    mode and serial/parallel variant when first used (jit.Variants). ``get`` gives the
    general path (callers that bring their own walk); ``pick`` the plan's pair of functions
    (not in place, in place) for a path."""

    __slots__ = ("_paths", "_in_place", "general")

    def __init__(self, name: str, general: str, templates: dict, in_place: dict, **consts):
        """``templates``: path -> (template, the constants it binds for that path)."""
        self._paths = {path: Variants(t, name if path == general else f"{name}_{path}",
                                      parallel=True, **consts, **bound)
                       for path, (t, bound) in templates.items()}
        self._in_place = in_place       # path -> the path of its in-place form
        self.general = general

    def get(self, exact: bool, parallel: bool = False, small: bool = False):
        return self._paths[self.general].get(exact, parallel)

    def pick(self, path: str, exact: bool, parallel: bool) -> tuple:
        """(fn, in-place fn or None) of ``path``."""
        twin = self._in_place.get(path)
        forms = (self._paths[path],) if twin is None else (self._paths[path], self._paths[twin])
        if parallel:
            ask(forms, exact)
        return (forms[0].get(exact, parallel, record=False),
                None if twin is None else forms[1].get(exact, parallel, record=False))


def in_place_form(pair: tuple, x, out):
    """The function of ``pair`` (from Forms.pick) for these buffers: the in-place one where
    out lies over x (the plan gives an output its input's whole block or nothing of it)."""
    fn, twin = pair
    if twin is not None and x.size == out.size and np.may_share_memory(x, out):
        return twin
    return fn


def pick(forms, path: str, exact: bool, parallel: bool) -> tuple:
    """forms.pick, or for kernels of one template (jit.Variants) that template alone."""
    if hasattr(forms, "pick"):
        return forms.pick(path, exact, parallel)
    return forms.get(exact, parallel), None


def binary_variants(op, name: str) -> Forms:
    return Forms(name, "general",
                 {"general": (_binary, {}), "tiny": (_binary_tiny, {}),
                  "rows": (_binary, dict(IA=1, IB=1)),
                  "b_fixed": (_binary, dict(IA=1, IB=0)), "a_fixed": (_binary, dict(IA=0, IB=1)),
                  "rows_in": (_binary_in, dict(IB=1)), "b_fixed_in": (_binary_in, dict(IB=0))},
                 {"rows": "rows_in", "b_fixed": "b_fixed_in"}, OP=op)


def binary_path(walk: Walk, small: bool) -> str:
    """The template a binary kernel takes over ``walk``."""
    ia, ib = walk.strides[0][-1], walk.strides[1][-1]
    if small:
        return "tiny"
    if ia == 1:
        return "rows" if ib == 1 else "b_fixed" if ib == 0 else "general"
    return "a_fixed" if ia == 0 and ib == 1 else "general"


def unary_variants(op, name: str) -> Forms:
    return Forms(name, "plain", {"plain": (_unary, {}), "in": (_unary_in, {})}, {"plain": "in"},
                 OP=op)


def scalar_op(fn=None, *, inline: bool = False):
    """njit for the scalar functions the templates call: never fast-math (a fast variant then
    computes them exactly as the exact one does), numpy's error model (1 / 0 gives inf).
    Not cached on its own: numba would key its cache on this function's file only, and keep
    code built from an older version of a function it calls in another module (vecmath,
    exactmath); the templates calling it are cached, named by a hash of its callees.
    ``inline`` (``@scalar_op(inline=True)``): written into its callers at numba's IR level,
    as vecmath's functions are, so that their loops vectorise through it (the callers'
    fastmath flags then apply to it)."""
    def make(f):
        return njit(cache=False, nogil=True, no_cfunc_wrapper=True, fastmath=False,
                    error_model="numpy", inline="always" if inline else "never")(f)
    return make if fn is None else make(fn)


@scalar_op
def relu_float(x):
    """max(x, 0) with NaN kept (Relu's float function; products apply it in their tiles)."""
    return x if not (x <= 0) else 0.0


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", inline="always")
def scale_shift_relu(v, s, b, scaled, shifted, relu):
    """v * s (scaled), + b (shifted), then Relu's function (relu): the per-element epilogue of
    Conv's bias pass and of the normalisations."""
    if scaled:
        v = v * s
    if shifted:
        v = v + b
    if relu:
        v = relu_float(v)
    return v


def _unary_params(x, out, p, q, block, tasks):
    n = out.size
    for t in prange(tasks):
        j0 = np.int64(t) * block
        for j in range(np.uint64(j0), np.uint64(min(n, j0 + block))):
            put(out, j, OP(x[j], p, q), EXACT)


def _unary_params_in(x, out, p, q, block, tasks):
    """_unary_params with the output over x."""
    n = out.size
    for t in prange(tasks):
        j0 = np.int64(t) * block
        for j in range(np.uint64(j0), np.uint64(min(n, j0 + block))):
            put(out, j, OP(out[j], p, q), EXACT)


def unary_param_variants(op, name: str) -> Forms:
    return Forms(name, "plain", {"plain": (_unary_params, {}), "in": (_unary_params_in, {})},
                 {"plain": "in"}, OP=op)


class Pointwise(OpKernel):
    """What the element-wise bases share: subclasses set ``ALLOWED`` (input dtypes) and
    ``VARIANTS`` (or override ``variants_for``) and optionally ``out_dtype``; output 0 may
    take over input 0's storage."""

    ALLOWED = _dt.NUMERIC
    in_place_input = True
    VARIANTS: Variants | None = None

    def variants_for(self, dtype) -> Variants:
        return self.VARIANTS

    def out_dtype(self, dtype):
        return dtype


class Unary(Pointwise):
    """Element-wise unary operator; parametric ones use unary_param_variants and define
    ``params``."""

    UFUNC = None    # numpy's ufunc of the same operation on integers (as Binary.UFUNC)

    def params(self, ctx: InferContext, dtype: np.dtype) -> tuple:
        """The scalars p, q for inputs computed in ``dtype`` (none for plain operators)."""
        return ()

    def run_params(self, ctx: RunContext, params: tuple) -> tuple:
        """The scalars p, q for this run (the planned ones unless overridden)."""
        return params

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, self.ALLOWED)
        shape = ctx.shape(0)
        ctx.set_output(0, self.out_dtype(dt), shape)
        n = int(np.prod(shape)) if shape else 1
        walk = Walk((n,), [[1]])
        block = walk.block if walk.parallel else max(n, 1)
        tasks = -(-n // block)
        pair = pick(self.variants_for(dt), "plain", ctx.exact, walk.parallel)
        ctx.prepared = (block, tasks, pair) + tuple(self.params(ctx, compute_dtype(dt)))

    def _call(self, ctx: RunContext, x, out):
        block, tasks, pair, *params = ctx.prepared
        return in_place_form(pair, x, out), (x, out, *self.run_params(ctx, params), block,
                                             tasks)

    def jit_calls(self, ctx: RunContext):
        if type(self).run_params is not Unary.run_params:
            return None
        return wide_calls(ctx, lambda ins, outs: [self._call(ctx, ins[0], outs[0])])

    def run(self, ctx: RunContext) -> None:
        out = ctx.flat_out[0]
        if numpy_folds(self.UFUNC, out.dtype):
            self.UFUNC(ctx.flat_in[0], out=out)
            return
        buf = result_buffer(ctx, out)
        fn, args = self._call(ctx, widen(ctx, ctx.flat_in[0]), buf)
        fn(*args)
        narrow(out, buf)


def numpy_folds(ufunc, dtype: np.dtype, kinds: str = "iu") -> bool:
    """Whether a constant fold (base.folding) computes an operator with numpy's ``ufunc``
    (None: never) on operands of ``dtype``: integers (and bools, ``kinds`` "biu"), where
    numpy's wrapping arithmetic and exact comparisons give the kernel's bits."""
    return ufunc is not None and dtype.kind in kinds and folding()


class Binary(Pointwise):
    """Broadcasting binary operator."""

    ALLOWED = _dt.NUMERIC | FLOATS
    CHANNEL_SLOPE = False       # opset < 7 PRelu: a 1-D second operand runs along axis 1
    # numpy's ufunc of the same operation on integers and bools (the same bits: wrapping
    # integer arithmetic, exact comparisons), which a constant fold of such operands uses
    UFUNC = None

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 1)
        ctx.check_dtype(0, self.ALLOWED)
        prepare_binary(ctx, self.out_dtype(dt), self.variants_for(dt), self.operand_shapes(ctx))

    def operand_shapes(self, ctx: InferContext) -> tuple:
        """The shapes to broadcast. Before opset 7 the second operand broadcasts only when
        the node says ``broadcast=1``, its extents starting at ``axis`` (default: aligned to
        the end); otherwise the two shapes must be equal."""
        sa, sb = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        node = ctx.node
        if node.domain != "" or node.opset >= 7:
            return sa, sb
        if self.CHANNEL_SLOPE and len(sb) == 1 and len(sa) >= 2 and sb[0] == sa[1] != sa[-1]:
            return sa, (1, sb[0]) + (1,) * (len(sa) - 2)
        if node.attr("broadcast", 0):
            axis = node.attr("axis", len(sa) - len(sb))
            axis = axis + len(sa) if axis < 0 else axis
            if not 0 <= axis <= len(sa) - len(sb):
                ctx.fail(f"axis {axis} does not place a shape {list(sb)} inside {list(sa)}")
            return sa, (1,) * axis + sb + (1,) * (len(sa) - axis - len(sb))
        if sa != sb and len(sb) and not self.CHANNEL_SLOPE:
            ctx.fail(f"shapes {list(sa)} and {list(sb)} differ and broadcast=1 is not set (opset < 7)")
        return sa, sb

    @staticmethod
    def _call(ctx: RunContext, a, b, out):
        w, pair = ctx.prepared
        return in_place_form(pair, a, out), (a, b, out, w.shape, w.strides[0], w.strides[1],
                                             w.block, w.tasks)

    def jit_calls(self, ctx: RunContext):
        if type(self).run is not Binary.run:
            return None
        return wide_calls(ctx, lambda ins, outs: [self._call(ctx, ins[0], ins[1], outs[0])])

    def run(self, ctx: RunContext) -> None:
        a, b = ctx.flat_in
        out = ctx.flat_out[0]
        if numpy_folds(self.UFUNC, a.dtype, "biu") and \
                (self.node.domain != "" or self.node.opset >= 7):
            self.UFUNC(ctx.inputs[0], ctx.inputs[1], out=ctx.outputs[0])
            return
        buf = result_buffer(ctx, out)
        fn, args = self._call(ctx, widen(ctx, a), widen(ctx, b), buf)
        fn(*args)
        narrow(out, buf)


def prepare_binary(ctx: InferContext, out_dtype, variants: Forms, shapes=None) -> tuple:
    """States output 0 of a broadcasting binary kernel over ``shapes`` (the inputs' shapes
    by default) and leaves (walk, (fn, in-place fn or None)) in ctx.prepared for the walk's
    path; returns the output shape."""
    sa, sb = shapes if shapes is not None else (ctx.shape(0), ctx.shape(1))
    shape = broadcast_shape([sa, sb], ctx.fail)
    ctx.set_output(0, out_dtype, shape)
    walk = Walk(shape, [element_strides(sa, shape), element_strides(sb, shape)])
    path = binary_path(walk, small_ints(ctx.dtype(0), math.prod(shape)))
    ctx.prepared = (walk, pick(variants, path, ctx.exact, walk.parallel))
    return shape
