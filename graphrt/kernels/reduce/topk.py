"""TopK: the k largest (or smallest) elements along ``axis`` and their int64 indices.

Order: a before b when a's value is larger (smaller, with largest=0), or the values are
equal and a's index is lower; NaN counts as larger than every number. That order is total,
so the result is unique whatever the algorithm: per line, a heap of the k best indices
(the worst at the root) kept in the Indices output itself, then heap-sorted best first.
Results are always sorted (sorted=0 allows any order). Comparisons only: exact.

k is the attribute before opset 10, then a 1-element int64 input; it must lie in
[0, extent of axis].
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN
from ..core.floats import run_wide
from ..core.jit import Variants
from ..tensor.gather import normalize_axis

EXACT = False


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _before(x, p, inner, i, j, largest):
    """Whether index i comes before index j (indices along the line at x[p::inner])."""
    a = x[p + i * inner]
    b = x[p + j * inner]
    if a != a or b != b:                # NaN is the largest value
        if a != a and b != b:
            return i < j
        return (a != a) == largest
    if a == b:
        return i < j
    return (a > b) == largest


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _sift(x, p, inner, ind, q, size, start, largest):
    """Restore the heap (worst at the root) of ind[q + h * inner], h < size, from h=start."""
    h = start
    while True:
        c = 2 * h + 1
        if c >= size:
            return
        if c + 1 < size and _before(x, p, inner, ind[q + c * inner], ind[q + (c + 1) * inner],
                                    largest):
            c += 1                      # the worse child
        hv = ind[q + h * inner]
        cv = ind[q + c * inner]
        if not _before(x, p, inner, hv, cv, largest):
            return
        ind[q + h * inner] = cv
        ind[q + c * inner] = hv
        h = c


def _topk(x, vals, ind, n, k, inner, largest, tasks):
    for t in prange(tasks):
        o = t // inner
        j = t - o * inner
        p = o * n * inner + j           # the line in x
        q = o * k * inner + j           # the line in the outputs
        for i in range(k):
            ind[q + i * inner] = i
        for h in range(k // 2 - 1, -1, -1):
            _sift(x, p, inner, ind, q, k, h, largest)
        for i in range(k, n):
            if _before(x, p, inner, i, ind[q], largest):
                ind[q] = i
                _sift(x, p, inner, ind, q, k, 0, largest)
        for size in range(k - 1, 0, -1):    # the worst goes last
            top = ind[q]
            ind[q] = ind[q + size * inner]
            ind[q + size * inner] = top
            _sift(x, p, inner, ind, q, size, 0, largest)
        for i in range(k):
            vals[q + i * inner] = x[p + ind[q + i * inner] * inner]


_TOPK = Variants(_topk, "topk", parallel=True)


class TopK(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.axis = int(node.attr("axis", -1))
        self.largest = int(node.attr("largest", 1)) != 0
        self.k = int(node.attr("k")) if node.opset < 10 and node.attr("k") is not None else None
        if node.opset < 10 and self.k is None:
            node.fail("attribute 'k' is required before opset 10")

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _dt.NUMERIC)
        shape = tuple(ctx.shape(0))
        axis = normalize_axis(ctx, self.axis, len(shape))
        k = self.k
        if k is None:
            if ctx.dtype(1) != np.dtype(np.int64) or math.prod(ctx.shape(1)) != 1:
                ctx.fail(f"K must be an int64 tensor of one element, got "
                         f"{_dt.name_of(ctx.dtype(1))} of shape {list(ctx.shape(1))}")
            ks = ctx.int_list(1)
            if ks is None:
                ctx.require_run_time_values()
                return
            k = ks[0]
        n = shape[axis]
        if not 0 <= k <= n:
            ctx.bad_input(f"k = {k} is not in [0, {n}] (the extent of axis {axis})")
        out_shape = shape[:axis] + (k,) + shape[axis + 1:]
        ctx.set_output(0, dt, out_shape)
        ctx.set_output(1, np.int64, out_shape)
        inner = math.prod(shape[axis + 1:])
        tasks = math.prod(shape[:axis]) * inner if k else 0
        parallel = math.prod(shape) >= PARALLEL_MIN and tasks > 1
        ctx.prepared = (n, k, inner, tasks, out_shape, _TOPK.get(ctx.exact, parallel))

    def run(self, ctx: RunContext) -> None:
        n, k, inner, tasks, out_shape, fn = ctx.prepared

        def body(ins, outs):
            ind = outs[1] if len(outs) > 1 and outs[1] is not None else \
                scratch(ctx, np.int64, (math.prod(out_shape),))
            vals = outs[0] if outs[0] is not None else scratch(ctx, ins[0].dtype, ind.shape)
            fn(ins[0], vals, ind, n, k, inner, self.largest, tasks)

        run_wide(ctx, body)
