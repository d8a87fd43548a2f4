"""Max, Min, Sum, Mean over any number of inputs with numpy broadcasting.

The inputs are folded pairwise into the output in input order with the broadcasting binary
kernel: out = OP(x0, x1), then out = OP(out, xk) for k = 2, 3, ... (Mean: the sum, then one
division by the input count). A single input is copied. Output 0 may be input 0's memory:
each step reads element i of both operands before writing element i.

- Max/Min: a NaN in any input gives NaN; max(-0, +0) = +0 and min(-0, +0) = -0 whatever the
  order (IEEE 754-2019 maximum/minimum). Exact.
- Sum: additions in input order, each correctly rounded; Mean adds then divides. Exact.
  float16 inputs are accumulated in float32 and rounded to float16 once at the end.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ... import dtypes as _dt
from ..core.base import InferContext, OpKernel, RunContext
from ..core.broadcast import Walk, broadcast_shape, element_strides
from ..core.floats import FLOATS, compute_dtype, narrow, result_buffer, widen
from ..core.pointwise import binary_variants
from .arithmetic import ADD_VARIANTS, FDIV_VARIANTS


@njit(cache=True, nogil=True, fastmath=False)
def maximum(x, y):
    """max with NaN propagation and max(-0, +0) = +0."""
    if x > y:
        return x
    if y > x:
        return y
    if x == y and x != 0:
        return x
    return x + y        # zeros: +0 unless both are -0; a NaN propagates


@njit(cache=True, nogil=True, fastmath=False)
def minimum(x, y):
    """min with NaN propagation and min(-0, +0) = -0."""
    if x < y:
        return x
    if y < x:
        return y
    if x == y and x != 0:
        return x
    return -(-x - y)    # zeros: -0 unless both are +0; a NaN propagates


_MAX = binary_variants(maximum, "maximum")
_MIN = binary_variants(minimum, "minimum")


class _Variadic(OpKernel):
    supports_exact = True
    in_place_input = True
    ALLOWED = _dt.NUMERIC | FLOATS
    VARIANTS = None
    MEAN = False

    def infer(self, ctx: InferContext) -> None:
        n = ctx.n_inputs
        if n < 1:
            ctx.fail("at least one input is required")
        dt = ctx.same_dtype(*range(n))
        ctx.check_dtype(0, self.ALLOWED)
        shapes = [ctx.shape(i) for i in range(n)]
        shape = broadcast_shape(shapes, ctx.fail)
        ctx.set_output(0, dt, shape)
        full = element_strides(shape, shape)
        walks = [Walk(shape, [element_strides(shapes[0], shape) if k == 1 else full,
                              element_strides(shapes[k], shape)]) for k in range(1, n)]
        parallel = Walk(shape, [full]).parallel
        fn = self.VARIANTS.get(ctx.exact, parallel)
        mean = None
        if self.MEAN:
            count = np.array([n], dtype=compute_dtype(dt))
            mean = (Walk(shape, [full, [0] * len(shape)]), FDIV_VARIANTS.get(ctx.exact, parallel), count)
        ctx.prepared = (walks, fn, mean)

    def run(self, ctx: RunContext) -> None:
        walks, fn, mean = ctx.prepared
        out = ctx.flat_out[0]
        buf = result_buffer(ctx, out)
        ins = ctx.flat_in
        if not walks:
            buf[...] = ins[0]
        for k, w in enumerate(walks, start=1):
            a = widen(ctx, ins[0]) if k == 1 else buf
            fn(a, widen(ctx, ins[k]), buf, w.shape, w.strides[0], w.strides[1], w.block, w.tasks)
        if mean is not None:
            w, div, count = mean
            div(buf, count, buf, w.shape, w.strides[0], w.strides[1], w.block, w.tasks)
        narrow(out, buf)


class Max(_Variadic):
    """Element-wise maximum. A NaN in any input gives NaN (canonical in exact mode);
    max(-0, +0) = +0 in either order."""

    VARIANTS = _MAX


class Min(_Variadic):
    """Element-wise minimum. A NaN in any input gives NaN (canonical in exact mode);
    min(-0, +0) = -0 in either order."""

    VARIANTS = _MIN


class Sum(_Variadic):
    """x0 + x1 + ... added in input order."""

    ALLOWED = FLOATS
    VARIANTS = ADD_VARIANTS


class Mean(Sum):
    """(x0 + x1 + ...) / n: the sum in input order, then one division."""

    MEAN = True
