"""Kernel bases shared by the element-wise operator modules (unary_math, activations,
compare, arithmetic, variadic, select), built on elementwise.UnaryKernel/BinaryKernel.

Narrow floats (float16, and bfloat16 and the float8 types where ml_dtypes provides them):
numba cannot compute in them. Such an operand is widened to float32 scratch (exact), the
float32 kernel runs, and a narrow result is made in float32 scratch and rounded once at the
end. For + - * / and sqrt that is the correctly rounded result (float32 has at least 2p+2
bits for these p-bit formats, so the double rounding is innocuous); bool results need no
rounding at all.

Parametric unary operators: out[i] = OP(x[i], p, q), with scalars p and q that the node's
attributes (or, for Clip, its inputs) fix, given in the compute type so that the arithmetic
stays in that type.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .. import dtypes as _dt
from .base import InferContext, RunContext, scratch
from .broadcast import put
from .elementwise import BinaryKernel, UnaryKernel
from .jit import Variants

EXACT = False
OP = None

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
NARROW = frozenset({F16} | {dt for dt in _dt.EXOTIC if "float" in dt.name})
BF16 = frozenset(dt for dt in NARROW if dt.name == "bfloat16")
FLOATS = _dt.FLOATS | BF16          # ONNX's float types that graphrt can hold
FLOAT8 = frozenset(dt for dt in NARROW if dt.name in ("float8_e4m3fn", "float8_e4m3fnuz",
                                                     "float8_e5m2", "float8_e5m2fnuz"))


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


def compute_dtype(dtype) -> np.dtype:
    """The type a kernel computes in for inputs of ``dtype``."""
    return F32 if dtype in NARROW else np.dtype(dtype)



def widen(ctx: RunContext, a: np.ndarray) -> np.ndarray:
    """``a`` itself, or for a narrow float a float32 copy of it."""
    if a.dtype not in NARROW:
        return a
    w = scratch(ctx, F32, a.size)
    w[...] = a
    return w


def result_buffer(ctx: RunContext, out: np.ndarray) -> np.ndarray:
    """Where a kernel writes ``out``: ``out`` itself, or float32 scratch for a narrow float."""
    return scratch(ctx, F32, out.size) if out.dtype in NARROW else out


def narrow(out: np.ndarray, buf: np.ndarray) -> None:
    """Round ``buf`` into ``out`` when the kernel wrote scratch."""
    if buf is not out:
        out[...] = buf


def _unary_params(x, out, p, q, block, tasks):
    n = out.size
    same = x.ctypes.data == out.ctypes.data     # see elementwise._unary
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


class Unary(UnaryKernel):
    """A unary operator with the narrow-float path. Subclasses set ``VARIANTS`` (or override
    ``variants_for``); parametric ones use unary_param_variants and define ``params``."""

    VARIANTS: Variants | None = None

    def variants_for(self, dtype) -> Variants:
        return self.VARIANTS

    def params(self, ctx: InferContext, dtype: np.dtype) -> tuple:
        """The scalars p, q for inputs computed in ``dtype`` (none for plain operators)."""
        return ()

    def run_params(self, ctx: RunContext, params: tuple) -> tuple:
        """The scalars p, q for this run (the planned ones unless overridden)."""
        return params

    def infer(self, ctx: InferContext) -> None:
        super().infer(ctx)
        ctx.prepared = ctx.prepared + tuple(self.params(ctx, compute_dtype(ctx.dtype(0))))

    def jit_call(self, ctx: RunContext):
        x, out = ctx.flat_in[0], ctx.flat_out[0]
        if type(self).run_params is not Unary.run_params or x.dtype in NARROW or \
                out.dtype in NARROW:
            return None
        block, tasks, fn, *params = ctx.prepared
        return fn, (x, out, *params, block, tasks)

    def run(self, ctx: RunContext) -> None:
        block, tasks, fn, *params = ctx.prepared
        params = self.run_params(ctx, params)
        out = ctx.flat_out[0]
        buf = result_buffer(ctx, out)
        fn(widen(ctx, ctx.flat_in[0]), buf, *params, block, tasks)
        narrow(out, buf)


class Binary(BinaryKernel):
    """A broadcasting binary operator with the narrow-float path."""

    ALLOWED = _dt.NUMERIC | FLOATS

    VARIANTS: Variants | None = None

    def variants_for(self, dtype) -> Variants:
        return self.VARIANTS

    def jit_call(self, ctx: RunContext):
        w, fn = ctx.prepared
        a, b = ctx.flat_in
        out = ctx.flat_out[0]
        if type(self).run is not Binary.run or NARROW.intersection((a.dtype, b.dtype, out.dtype)):
            return None
        return fn, (a, b, out, w.shape, w.strides[0], w.strides[1], w.block, w.tasks)

    def run(self, ctx: RunContext) -> None:
        w, fn = ctx.prepared
        a, b = ctx.flat_in
        out = ctx.flat_out[0]
        buf = result_buffer(ctx, out)
        fn(widen(ctx, a), widen(ctx, b), buf, w.shape, w.strides[0], w.strides[1], w.block,
           w.tasks)
        narrow(out, buf)
