"""Where: out = x where cond else y, with numpy broadcasting of all three.

Pure selection: the chosen element's bits are copied (NaN payloads too, as in the other
data-movement kernels), so it is exact. float16, bfloat16 and the other types numba lacks
are moved as unsigned integers of their size; strings by numpy.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, folding, make_calls
from ..core.broadcast import Walk, broadcast_shape, element_strides, row_offset, task_span
from ..core.jit import Variants

EXACT = False

_BOOL = np.dtype(np.bool_)
_STRING = np.dtype(object)
_AS_BITS = {dt: np.dtype(f"u{dt.itemsize}") for dt in _dt.EXOTIC | {np.dtype(np.float16)}}


def _ternary(c, a, b, out, shape, sc, sa, sb, block, tasks):
    """out[i] = a[oa(i)] if c[oc(i)] else b[ob(i)] along a merged broadcast walk."""
    r = shape.size
    inner = shape[r - 1]
    per_row = (inner + block - 1) // block
    ic = sc[r - 1]
    ia = sa[r - 1]
    ib = sb[r - 1]
    for t in prange(tasks):
        row, j0, j1 = task_span(t, per_row, block, inner)
        oc = row_offset(row, shape, sc)
        oa = row_offset(row, shape, sa)
        ob = row_offset(row, shape, sb)
        base = row * inner
        for j in range(j0, j1):
            out[base + j] = a[oa + j * ia] if c[oc + j * ic] else b[ob + j * ib]


_WHERE = Variants(_ternary, "where", parallel=True)


class Where(OpKernel):
    supports_exact = True
    in_place_input = False      # input 0 is the bool condition

    def infer(self, ctx: InferContext) -> None:
        if ctx.dtype(0) != _BOOL:
            ctx.fail(f"the condition must be bool, got {_dt.name_of(ctx.dtype(0))}")
        dt = ctx.same_dtype(1, 2)
        if dt not in _dt.ALL_TENSOR and dt not in _AS_BITS and dt != _STRING:
            ctx.fail(f"element type {_dt.name_of(dt)} is not supported", ErrorKind.UNSUPPORTED)
        shapes = [ctx.shape(i) for i in range(3)]
        shape = broadcast_shape(shapes, ctx.fail)
        ctx.set_output(0, dt, shape)
        if dt == _STRING:
            ctx.prepared = None
            return
        walk = Walk(shape, [element_strides(s, shape) for s in shapes])
        ctx.prepared = (walk, _WHERE.get(ctx.exact, walk.parallel))

    def jit_calls(self, ctx: RunContext):
        if ctx.prepared is None:
            return None
        w, fn = ctx.prepared
        c, a, b = ctx.flat_in
        out = ctx.flat_out[0]
        bits = _AS_BITS.get(out.dtype)
        if bits is not None:
            a, b, out = a.view(bits), b.view(bits), out.view(bits)
        return [(fn, (c, a, b, out, w.shape, w.strides[0], w.strides[1], w.strides[2], w.block,
                      w.tasks))]

    def run(self, ctx: RunContext) -> None:
        calls = None if folding() else self.jit_calls(ctx)
        if calls is None:
            ctx.outputs[0][...] = np.where(*ctx.inputs)
            return
        make_calls(calls)
