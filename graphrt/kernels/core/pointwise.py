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
from .base import InferContext, OpKernel, RunContext
from .broadcast import Walk, broadcast_shape, element_strides, put, row_offset, task_span
from .floats import FLOATS, NARROW, compute_dtype, narrow, result_buffer, widen
from .jit import Variants

EXACT = False
OP = None


def _binary(a, b, out, shape, sa, sb, block, tasks):
    r = shape.size
    inner = shape[r - 1]
    per_row = (inner + block - 1) // block
    # unsigned indices: numba's wraparound of a negative signed index keeps loops scalar
    ia = np.uint64(sa[r - 1])
    ib = np.uint64(sb[r - 1])
    # in place (the output takes over a, of the same shape), a is read from out itself, as
    # in _unary
    same_a = a.size == out.size and a.ctypes.data == out.ctypes.data
    for t in prange(tasks):
        row, j0, j1 = task_span(t, per_row, block, inner)
        oa = np.uint64(row_offset(row, shape, sa))
        ob = np.uint64(row_offset(row, shape, sb))
        base = np.uint64(row * inner)
        if ia == 1 and ib == 1:             # the common cases get loops LLVM can vectorise
            if same_a:
                for j in range(np.uint64(j0), np.uint64(j1)):
                    put(out, base + j, OP(out[base + j], b[ob + j]), EXACT)
            else:
                for j in range(np.uint64(j0), np.uint64(j1)):
                    put(out, base + j, OP(a[oa + j], b[ob + j]), EXACT)
        elif ib == 0:
            y = b[ob]
            if same_a:
                for j in range(np.uint64(j0), np.uint64(j1)):
                    put(out, base + j, OP(out[base + j], y), EXACT)
            else:
                for j in range(np.uint64(j0), np.uint64(j1)):
                    put(out, base + j, OP(a[oa + j * ia], y), EXACT)
        elif ia == 0:
            x = a[oa]
            for j in range(np.uint64(j0), np.uint64(j1)):
                put(out, base + j, OP(x, b[ob + j * ib]), EXACT)
        else:
            for j in range(np.uint64(j0), np.uint64(j1)):
                put(out, base + j, OP(a[oa + j * ia], b[ob + j * ib]), EXACT)


# Inputs of at most SMALL elements of integer or boolean type (shape arithmetic, mostly
# folded when a session is made) go to the *_small templates: the same results (integer
# operations have no rounding to differ in), about a third of the compile time.
SMALL = 64


def small_ints(dtype, size: int) -> bool:
    return np.dtype(dtype).kind in "biu" and size <= SMALL


def _binary_small(a, b, out, shape, sa, sb, block, tasks):
    r = shape.size
    inner = shape[r - 1]
    ia = sa[r - 1]
    ib = sb[r - 1]
    for row in range(out.size // inner if inner > 0 else 0):
        oa = row_offset(row, shape, sa)
        ob = row_offset(row, shape, sb)
        for j in range(inner):
            put(out, row * inner + j, OP(a[oa + j * ia], b[ob + j * ib]), EXACT)


def _unary_small(x, out, block, tasks):
    for j in range(out.size):
        put(out, j, OP(x[j]), EXACT)


def _unary(x, out, block, tasks):
    n = out.size
    # in place, the loop reads and writes one array: with two names for the same memory
    # LLVM's overlap test fails at run time and it takes its scalar loop
    same = x.ctypes.data == out.ctypes.data
    for t in prange(tasks):
        j0 = np.int64(t) * block
        if same:
            for j in range(np.uint64(j0), np.uint64(min(n, j0 + block))):
                put(out, j, OP(out[j]), EXACT)
        else:
            for j in range(np.uint64(j0), np.uint64(min(n, j0 + block))):
                put(out, j, OP(x[j]), EXACT)


def binary_variants(op, name: str) -> Variants:
    return Variants(_binary, name, parallel=True, small=_binary_small, OP=op)


def unary_variants(op, name: str) -> Variants:
    return Variants(_unary, name, parallel=True, small=_unary_small, OP=op)


def scalar_op(fn):
    """njit for the scalar functions the templates call: never fast-math (a fast variant then
    computes them exactly as the exact one does), numpy's error model (1 / 0 gives inf).
    Not cached on its own: numba would key its cache on this function's file only, and keep
    code built from an older version of a function it calls in another module (vecmath,
    exactmath); the templates calling it are cached, named by a hash of its callees."""
    return njit(cache=False, nogil=True, fastmath=False, error_model="numpy")(fn)


@scalar_op
def relu_float(x):
    """max(x, 0) with NaN kept (Relu's float function; products apply it in their tiles)."""
    return x if not (x <= 0) else 0.0


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
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
    same = x.ctypes.data == out.ctypes.data     # see _unary
    for t in prange(tasks):
        j0 = np.int64(t) * block
        if same:
            for j in range(np.uint64(j0), np.uint64(min(n, j0 + block))):
                put(out, j, OP(out[j], p, q), EXACT)
        else:
            for j in range(np.uint64(j0), np.uint64(min(n, j0 + block))):
                put(out, j, OP(x[j], p, q), EXACT)


def unary_param_variants(op, name: str) -> Variants:
    return Variants(_unary_params, name, parallel=True, OP=op)


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
        fn = self.variants_for(dt).get(ctx.exact, walk.parallel, small_ints(dt, n))
        ctx.prepared = (block, tasks, fn) + tuple(self.params(ctx, compute_dtype(dt)))

    def _call(self, ctx: RunContext, x, out):
        block, tasks, fn, *params = ctx.prepared
        return fn, (x, out, *self.run_params(ctx, params), block, tasks)

    def jit_calls(self, ctx: RunContext):
        x, out = ctx.flat_in[0], ctx.flat_out[0]
        if type(self).run_params is not Unary.run_params or x.dtype in NARROW or \
                out.dtype in NARROW:
            return None
        return [self._call(ctx, x, out)]

    def run(self, ctx: RunContext) -> None:
        out = ctx.flat_out[0]
        buf = result_buffer(ctx, out)
        fn, args = self._call(ctx, widen(ctx, ctx.flat_in[0]), buf)
        fn(*args)
        narrow(out, buf)


class Binary(Pointwise):
    """Broadcasting binary operator."""

    ALLOWED = _dt.NUMERIC | FLOATS
    CHANNEL_SLOPE = False       # opset < 7 PRelu: a 1-D second operand runs along axis 1

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
        w, fn = ctx.prepared
        return fn, (a, b, out, w.shape, w.strides[0], w.strides[1], w.block, w.tasks)

    def jit_calls(self, ctx: RunContext):
        a, b = ctx.flat_in
        out = ctx.flat_out[0]
        if type(self).run is not Binary.run or NARROW.intersection((a.dtype, b.dtype, out.dtype)):
            return None
        return [self._call(ctx, a, b, out)]

    def run(self, ctx: RunContext) -> None:
        a, b = ctx.flat_in
        out = ctx.flat_out[0]
        buf = result_buffer(ctx, out)
        fn, args = self._call(ctx, widen(ctx, a), widen(ctx, b), buf)
        fn(*args)
        narrow(out, buf)


def prepare_binary(ctx: InferContext, out_dtype, variants: Variants, shapes=None) -> tuple:
    """States output 0 of a broadcasting binary kernel over ``shapes`` (the inputs' shapes
    by default) and leaves (walk, compiled function) in ctx.prepared; returns the output
    shape."""
    sa, sb = shapes if shapes is not None else (ctx.shape(0), ctx.shape(1))
    shape = broadcast_shape([sa, sb], ctx.fail)
    ctx.set_output(0, out_dtype, shape)
    walk = Walk(shape, [element_strides(sa, shape), element_strides(sb, shape)])
    small = small_ints(ctx.dtype(0), math.prod(shape))
    ctx.prepared = (walk, variants.get(ctx.exact, walk.parallel, small))
    return shape
