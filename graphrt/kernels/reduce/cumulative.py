"""CumSum and CumProd: running sums (products) along the ``axis`` input.

With reverse the walk goes from the last index down; with exclusive each output omits its
own element (the first output is then 0, or 1 for a product). Every running value is one
correctly rounded add (multiply) of the previous output and the next element, in walk
order and in the element type: exact by construction (float16 runs in float32, rounded
once per output). Integers wrap around.
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..core.base import InferContext, OpKernel, RunContext
from ..core.broadcast import put, task_span
from ..core.floats import compute_dtype, run_wide
from ..core.jit import Variants
from ..elementwise.arithmetic import add_scalar, mul_scalar
from .argreduce import line_blocks

EXACT = False
OP = None

_ALLOWED = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int32,
                                          np.int64, np.uint32, np.uint64))
_AXIS_TYPES = frozenset(np.dtype(t) for t in (np.int32, np.int64))


def _scan_lines(x, out, ident, n, inner, exclusive, reverse, block, tasks):
    """Contiguous lines of ``n`` elements (inner = 1): a task takes ``block`` lines, each
    with one running value."""
    lines = x.size // n if n else 0
    step = -1 if reverse else 1
    for t in prange(tasks):
        for o in range(t * block, min(lines, t * block + block)):
            k = o * n + (n - 1 if reverse else 0)
            acc = ident if exclusive else x[k]
            for s in range(n):
                v = x[k]
                if s > 0 and not exclusive:
                    acc = OP(acc, v)
                put(out, k, acc, EXACT)
                if exclusive:
                    acc = OP(acc, v)
                k += step


def _scan_cols(x, out, ident, n, inner, exclusive, reverse, block, tasks):
    """Lines of ``n`` elements ``inner`` apart: a task takes ``block`` neighbouring lines
    and walks them together, so reads and writes stay contiguous."""
    per_row = (inner + block - 1) // block
    for t in prange(tasks):
        o, j0, j1 = task_span(t, per_row, block, inner)
        w = j1 - j0
        base = o * n * inner + j0
        prev = 0
        for s in range(n):
            k = n - 1 - s if reverse else s
            dst = out[base + k * inner:base + k * inner + w]
            if s == 0:
                if exclusive:
                    for j in range(w):
                        dst[j] = ident
                else:
                    src = x[base + k * inner:base + k * inner + w]
                    for j in range(w):
                        put(dst, j, src[j], EXACT)
            else:
                before = out[base + prev * inner:base + prev * inner + w]
                kk = prev if exclusive else k
                src = x[base + kk * inner:base + kk * inner + w]
                for j in range(w):
                    put(dst, j, OP(before[j], src[j]), EXACT)
            prev = k


# by whether the lines are contiguous (inner = 1)
_CUMSUM = {True: Variants(_scan_lines, "cumsum_lines", parallel=True, OP=add_scalar),
           False: Variants(_scan_cols, "cumsum_cols", parallel=True, OP=add_scalar)}
_CUMPROD = {True: Variants(_scan_lines, "cumprod_lines", parallel=True, OP=mul_scalar),
            False: Variants(_scan_cols, "cumprod_cols", parallel=True, OP=mul_scalar)}


class _Scan(OpKernel):
    supports_exact = True
    VARIANTS: dict
    IDENTITY = 0

    def __init__(self, node):
        super().__init__(node)
        self.exclusive = int(node.attr("exclusive", 0)) != 0
        self.reverse = int(node.attr("reverse", 0)) != 0

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _ALLOWED)
        shape = tuple(ctx.shape(0))
        r = len(shape)
        ctx.check_dtype(1, _AXIS_TYPES, " (axis)")
        if len(ctx.shape(1)) > 1 or math.prod(ctx.shape(1)) != 1:
            ctx.fail(f"axis must be a scalar, got shape {list(ctx.shape(1))}")
        axis = ctx.int_list(1)
        if axis is None:
            ctx.require_run_time_values()
            return
        axis = axis[0]
        if not -r <= axis < r:
            ctx.bad_input(f"axis {axis} is out of range for rank {r}")
        axis = axis + r if axis < 0 else axis
        ctx.set_output(0, dt, shape)
        n, inner = shape[axis], math.prod(shape[axis + 1:])
        block, tasks, parallel = line_blocks(math.prod(shape[:axis]), n, inner,
                                             math.prod(shape))
        if not n:
            tasks, parallel = 0, False
        ident = compute_dtype(dt).type(self.IDENTITY)
        ctx.prepared = (ident, n, inner, block, tasks,
                        self.VARIANTS[inner == 1].get(ctx.exact, parallel))

    def run(self, ctx: RunContext) -> None:
        ident, n, inner, block, tasks, fn = ctx.prepared
        run_wide(ctx, lambda ins, outs: fn(ins[0], outs[0], ident, n, inner, self.exclusive,
                                           self.reverse, block, tasks))


class CumSum(_Scan):
    VARIANTS = _CUMSUM


class CumProd(_Scan):
    VARIANTS = _CUMPROD
    IDENTITY = 1
