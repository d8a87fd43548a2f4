"""Max, Min, Sum, Mean over any number of inputs with numpy broadcasting.

The inputs are combined with the broadcasting binary kernel in the order of a binary
counter (core/summation.py's order for sums, with the inputs in the place of block sums):
after input k (k = 1, 2, ... in input order) the two newest partial results p, q become
OP(p, q) once for each trailing zero bit of k, and at the end the partials left are combined
newest first, OP(p_0, OP(p_1, ...)). For two or three inputs that is OP(OP(x0, x1), x2), the
input order; for four, OP(OP(x0, x1), OP(x2, x3)). Partial results wait in scratch of the
output's shape (at most log2(n) + 1 of them); the last step writes the output. Mean: the
sum, then one division by the input count. A single input is copied. Output 0 may be input
0's memory: each step reads element i of both operands before writing element i.

- Max/Min: a NaN in any input gives NaN; max(-0, +0) = +0 and min(-0, +0) = -0 whatever the
  order (IEEE 754-2019 maximum/minimum). Exact.
- Sum: each addition correctly rounded, in the order above (an error bound that grows like
  log2 of the input count); Mean adds then divides. Exact. float16 inputs are accumulated
  in float32 and rounded to float16 once at the end.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ... import dtypes as _dt
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import Walk, broadcast_shape, element_strides
from ..core.floats import FLOATS, compute_dtype, narrow, result_buffer, widen
from ..core.pointwise import (binary_path, binary_variants, in_place_form, numpy_folds, pick,
                              small_ints)
from .arithmetic import ADD_VARIANTS, FDIV_VARIANTS


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def maximum(x, y):
    """max with NaN propagation and max(-0, +0) = +0."""
    if x > y:
        return x
    if y > x:
        return y
    if x == y and x != 0:
        return x
    return x + y        # zeros: +0 unless both are -0; a NaN propagates


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
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
    UFUNC = None    # numpy's ufunc of the same operation on integers (as Binary.UFUNC)

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
        steps, temps = counter_steps(n)
        walks = [Walk(shape, [full if a[0] != "in" else element_strides(shapes[a[1]], shape)
                              for a in (left, right)]) for left, right, _ in steps]
        parallel = Walk(shape, [full]).parallel
        small = small_ints(dt, math.prod(shape))
        pairs = [pick(self.VARIANTS, binary_path(w, small), ctx.exact, parallel) for w in walks]
        mean = None
        if self.MEAN:
            count = np.array([n], dtype=compute_dtype(dt))
            w = Walk(shape, [full, [0] * len(shape)])
            mean = (w, pick(FDIV_VARIANTS, binary_path(w, False), ctx.exact, parallel), count)
        ctx.prepared = (steps, temps, walks, pairs, mean)

    def run(self, ctx: RunContext) -> None:
        steps, temps, walks, pairs, mean = ctx.prepared
        out = ctx.flat_out[0]
        if numpy_folds(self.UFUNC, out.dtype):
            # (Binary.UFUNC's reason; in any order: integer min and max are exact)
            got = ctx.outputs[0]
            got[...] = ctx.inputs[0]
            for x in ctx.inputs[1:]:
                self.UFUNC(got, x, out=got)
            return
        buf = result_buffer(ctx, out)
        ins = ctx.flat_in
        if not steps:
            buf[...] = ins[0]
        work = [scratch(ctx, compute_dtype(out.dtype), out.shape) for _ in range(temps)]

        def operand(a):
            return widen(ctx, ins[a[1]]) if a[0] == "in" else buf if a[0] == "out" else work[a[1]]

        for (left, right, dst), w, pair in zip(steps, walks, pairs):
            a, d = operand(left), operand(dst)
            in_place_form(pair, a, d)(a, operand(right), d, w.shape, w.strides[0],
                                      w.strides[1], w.block, w.tasks)
        if mean is not None:
            w, pair, count = mean
            in_place_form(pair, buf, buf)(buf, count, buf, w.shape, w.strides[0],
                                          w.strides[1], w.block, w.tasks)
        narrow(out, buf)


def counter_steps(n: int) -> tuple[list, int]:
    """The binary-counter order over n operands as steps (left, right, dst), operands being
    ("in", k), ("tmp", j) or ("out",) (the last step's destination); and the number of
    scratch partials it needs."""
    stack, steps, free = [], [], []
    temps = 0

    def into(left, right):
        nonlocal temps
        if left[0] == "tmp":
            dst = left
        elif right[0] == "tmp":
            dst = right
        elif free:
            dst = ("tmp", free.pop())
        else:
            dst, temps = ("tmp", temps), temps + 1      # (the last step's is the output)
        for a in (left, right):
            if a[0] == "tmp" and a != dst:
                free.append(a[1])
        steps.append((left, right, dst))
        return dst

    for k in range(n):
        stack.append(("in", k))
        b = k + 1
        while b % 2 == 0:
            right = stack.pop()
            stack.append(into(stack.pop(), right))
            b //= 2
    t = stack.pop()
    while stack:
        t = into(stack.pop(), t)
    if steps:
        left, right, _ = steps[-1]
        steps[-1] = (left, right, ("out",))
    used = [a[1] for step in steps for a in step if a[0] == "tmp"]
    return steps, max(used) + 1 if used else 0


class Max(_Variadic):
    """Element-wise maximum. A NaN in any input gives NaN (canonical in exact mode);
    max(-0, +0) = +0 in either order."""

    VARIANTS = _MAX
    UFUNC = np.maximum


class Min(_Variadic):
    """Element-wise minimum. A NaN in any input gives NaN (canonical in exact mode);
    min(-0, +0) = -0 in either order."""

    VARIANTS = _MIN
    UFUNC = np.minimum


class Sum(_Variadic):
    """x0 + x1 + ... added in the binary-counter order (the input order for up to three)."""

    ALLOWED = FLOATS
    VARIANTS = ADD_VARIANTS


class Mean(Sum):
    """(x0 + x1 + ...) / n: the sum in the order above, then one division."""

    MEAN = True
