"""Softmax: y_k = exp(x_k - max x) / sum_k exp(x_k - max x) over each row.

A row is the ``n`` elements along the softmax axis, ``inner`` apart in memory: for opset 13
and later the single ``axis`` (default -1); before opset 13 the input is seen as a matrix
split at ``axis`` (default 1) and a row is the whole trailing part. Each row is computed by
one task (max, then exp and a k-ascending sum, then the division), so the result does not
depend on the thread count. Uses libm's exp: not an exact-mode kernel.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..errors import ErrorKind
from .base import InferContext, OpKernel, RunContext
from .broadcast import PARALLEL_MIN
from .jit import FAST_MATH, Variants

EXACT = False


@njit(cache=True, nogil=True, error_model="numpy", fastmath=set(FAST_MATH))
def _row(x, out):
    """Softmax of one row (x and out may be the same memory)."""
    m = x[0]
    for k in range(1, x.size):
        v = x[k]
        if v > m or v != v:     # a NaN anywhere makes the maximum NaN (and the row)
            m = v
    s = np.exp(x[0] - m)
    out[0] = s
    for k in range(1, x.size):
        e = np.exp(x[k] - m)
        out[k] = e
        s = s + e
    for k in range(x.size):
        out[k] = out[k] / s


def _softmax(x, out, n, inner, tasks):
    for t in prange(tasks):
        o = t // inner
        base = o * n * inner + (t - o * inner)
        if inner == 1:
            _row(x[base:base + n], out[base:base + n])
        else:
            last = base + (n - 1) * inner + 1
            _row(x[base:last:inner], out[base:last:inner])


_SOFTMAX = Variants(_softmax, "softmax", parallel=True)

_FLOATS = frozenset(np.dtype(t) for t in (np.float32, np.float64))


class Softmax(OpKernel):
    supports_exact = False
    in_place_input = True

    def __init__(self, node):
        super().__init__(node)
        self.coerce_2d = node.opset < 13
        self.axis = int(node.attr("axis", 1 if self.coerce_2d else -1))

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.dtype(0)
        if dt not in _FLOATS:
            ctx.fail(f"element type {dt} is not supported (float32 and float64 are)",
                     ErrorKind.UNSUPPORTED)
        shape = tuple(ctx.shape(0))
        r = len(shape)
        if not -r <= self.axis < r:
            ctx.fail(f"axis {self.axis} is out of range for rank {r}")
        axis = self.axis + r if self.axis < 0 else self.axis
        ctx.set_output(0, dt, shape)
        outer = math.prod(shape[:axis])
        if self.coerce_2d:
            n, inner = math.prod(shape[axis:]), 1
        else:
            n, inner = shape[axis], math.prod(shape[axis + 1:])
        tasks = outer * inner if n else 0
        parallel = outer * n * inner >= PARALLEL_MIN and tasks > 1
        ctx.prepared = (n, inner, tasks, _SOFTMAX.get(ctx.exact, parallel))

    def run(self, ctx: RunContext) -> None:
        n, inner, tasks, fn = ctx.prepared
        fn(ctx.flat_in[0], ctx.flat_out[0], n, inner, tasks)
