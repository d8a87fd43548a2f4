"""ArgMax and ArgMin: the int64 index along ``axis`` of the largest (smallest) element.

Each output walks its axis from index 0 up and keeps the first extreme element, or the
last one with select_last_index (opset 12). A NaN counts as more extreme than any number,
and the first NaN (the last, with select_last_index) wins, as numpy's argmax does.
Comparisons only: exact by construction. float16 is compared in float32 (every float16
is exactly a float32).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ..core.base import InferContext, OpKernel, RunContext, make_calls, scratch
from ..core.broadcast import BLOCK, PARALLEL_MIN, task_span
from ..core.floats import compute_dtype, run_wide, wide_calls
from ..core.held import held_buffer
from ..core.jit import Variants
from ..tensor.gather import normalize_axis
from .reduce import COLUMN_BLOCK

EXACT = False
MAX = True


# Rows run in a helper rather than inline in the prange loop: numba's parallel loop
# bodies turn these well-predicted branches on loop-carried values into slow code.
@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _arg_rows(x, out, i0, i1, n, last, largest):
    """Rows i0..i1 of n elements."""
    for i in range(i0, i1):
        p = i * n
        b = x[p]
        at = 0
        for k in range(1, n):
            v = x[p + k]
            if (v > b if largest else v < b) or (v != v and (last or b == b)) or (
                    last and v == b):
                b = v
                at = k
        out[i] = at


def _arg_lines(x, out, best, n, inner, last, block, tasks):
    """out[o] = the extreme k of x[o * n + k] (inner = 1): a task takes ``block`` whole
    lines (``best`` is unused)."""
    nout = out.size
    for t in prange(tasks):
        _arg_rows(x, out, t * block, min(nout, t * block + block), n, last, MAX)


def _arg_cols(x, out, best, n, inner, last, block, tasks):
    """out[o * inner + j] = the extreme k of x[(o * n + k) * inner + j]: a task takes a
    block of neighbouring j, walked together (k outer) with their extremes so far in
    ``best``."""
    per_row = (inner + block - 1) // block
    for t in prange(tasks):
        o, j0, j1 = task_span(t, per_row, block, inner)
        w = j1 - j0
        base = o * n * inner + j0
        bs = best[o * inner + j0:o * inner + j0 + w]
        at = out[o * inner + j0:o * inner + j0 + w]
        src = x[base:base + w]
        for j in range(w):
            bs[j] = src[j]
            at[j] = 0
        for k in range(1, n):
            src = x[base + k * inner:base + k * inner + w]
            for j in range(w):
                v = src[j]
                b = bs[j]
                better = (v > b) if MAX else (v < b)
                take = better | ((v != v) & (b == b)) | (
                    last & ((v == b) | ((v != v) & (b != b))))
                bs[j] = v if take else b
                at[j] = k if take else at[j]


def line_blocks(outer: int, n: int, inner: int, size: int) -> tuple:
    """(block, tasks, parallel) for a kernel over ``outer * inner`` lines of ``n`` elements
    ``inner`` apart, ``size`` elements in all: when inner = 1 a task takes ``block`` whole
    lines (about BLOCK elements when parallel), else ``block`` neighbouring lines (at most
    COLUMN_BLOCK) walked together."""
    parallel = size >= PARALLEL_MIN
    if inner == 1:
        block = max(1, BLOCK // max(n, 1)) if parallel else max(outer, 1)
        tasks = -(-outer // block)
    else:
        block = max(1, min(inner, COLUMN_BLOCK))       # inner = 0: no lines, no tasks
        tasks = outer * -(-inner // block)
    return block, tasks, parallel and tasks > 1


# by whether the lines are contiguous (inner = 1)
_ARGMAX = {True: Variants(_arg_lines, "argmax_lines", parallel=True, MAX=True),
           False: Variants(_arg_cols, "argmax_cols", parallel=True, MAX=True)}
_ARGMIN = {True: Variants(_arg_lines, "argmin_lines", parallel=True, MAX=False),
           False: Variants(_arg_cols, "argmin_cols", parallel=True, MAX=False)}


class _ArgReduce(OpKernel):
    supports_exact = True
    VARIANTS: dict

    def __init__(self, node):
        super().__init__(node)
        self.axis = int(node.attr("axis", 0))
        self.keepdims = int(node.attr("keepdims", 1)) != 0
        self.last = int(node.attr("select_last_index", 0)) != 0

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _dt.NUMERIC)
        shape = tuple(ctx.shape(0))
        axis = normalize_axis(ctx, self.axis, len(shape))
        n = shape[axis]
        out_shape = list(shape)
        if self.keepdims:
            out_shape[axis] = 1
        else:
            del out_shape[axis]
        if n == 0 and math.prod(out_shape):
            ctx.bad_input(f"axis {axis} of the input shape {list(shape)} is empty: "
                          "it has no extreme element")
        ctx.set_output(0, np.int64, out_shape)
        inner = math.prod(shape[axis + 1:])
        block, tasks, parallel = line_blocks(math.prod(shape[:axis]), n, inner,
                                             math.prod(shape))
        ctx.prepared = (n, inner, block, tasks, compute_dtype(dt),
                        self.VARIANTS[inner == 1].get(ctx.exact, parallel))

    def _calls(self, ctx: RunContext, ins, outs, buffer) -> list:
        n, inner, block, tasks, cdt, fn = ctx.prepared
        best = outs[0] if inner == 1 else buffer(cdt, outs[0].shape)
        return [(fn, (ins[0], outs[0], best, n, inner, self.last, block, tasks))]

    def jit_calls(self, ctx: RunContext):
        return wide_calls(ctx, lambda ins, outs: self._calls(
            ctx, ins, outs, lambda dt, shape: held_buffer(dt, shape, ctx.held, "arg best")))

    def run(self, ctx: RunContext) -> None:
        def body(ins, outs):
            make_calls(self._calls(ctx, ins, outs,
                                   lambda dt, shape: scratch(ctx, dt, shape)))

        run_wide(ctx, body)


class ArgMax(_ArgReduce):
    VARIANTS = _ARGMAX


class ArgMin(_ArgReduce):
    VARIANTS = _ARGMIN
