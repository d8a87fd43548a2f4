"""Element-wise kernel templates over 1-D views, and the kernel bases built on them.

Binary: out[i] = OP(a[offset_a(i)], b[offset_b(i)]) along a merged broadcast walk (see
broadcast.Walk). Unary: out[i] = OP(x[i]). In exact variants a NaN result is written as the
canonical quiet NaN (0x7FC00000 for float32).
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .. import dtypes as _dt
from .base import InferContext, OpKernel, RunContext
from .broadcast import Walk, broadcast_shape, element_strides
from .jit import Variants

EXACT = False
OP = None


def _binary(a, b, out, shape, sa, sb, block, tasks):
    r = shape.size
    inner = shape[r - 1]
    per_row = (inner + block - 1) // block
    ia = sa[r - 1]
    ib = sb[r - 1]
    for t in prange(tasks):
        row = t // per_row
        j0 = (t - row * per_row) * block
        j1 = min(inner, j0 + block)
        oa = 0
        ob = 0
        rem = row
        for d in range(r - 2, -1, -1):
            q = rem // shape[d]
            idx = rem - q * shape[d]
            rem = q
            oa += idx * sa[d]
            ob += idx * sb[d]
        base = row * inner
        if ia == 1 and ib == 1:
            for j in range(j0, j1):
                v = OP(a[oa + j], b[ob + j])
                if EXACT and v != v:
                    out[base + j] = np.nan
                else:
                    out[base + j] = v
        elif ib == 0:
            y = b[ob]
            for j in range(j0, j1):
                v = OP(a[oa + j * ia], y)
                if EXACT and v != v:
                    out[base + j] = np.nan
                else:
                    out[base + j] = v
        elif ia == 0:
            x = a[oa]
            for j in range(j0, j1):
                v = OP(x, b[ob + j * ib])
                if EXACT and v != v:
                    out[base + j] = np.nan
                else:
                    out[base + j] = v
        else:
            for j in range(j0, j1):
                v = OP(a[oa + j * ia], b[ob + j * ib])
                if EXACT and v != v:
                    out[base + j] = np.nan
                else:
                    out[base + j] = v


def _unary(x, out, block, tasks):
    n = out.size
    for t in prange(tasks):
        j0 = t * block
        j1 = min(n, j0 + block)
        for j in range(j0, j1):
            v = OP(x[j])
            if EXACT and v != v:
                out[j] = np.nan
            else:
                out[j] = v


def binary_variants(op, name: str) -> Variants:
    return Variants(_binary, name, parallel=True, OP=op)


def unary_variants(op, name: str) -> Variants:
    return Variants(_unary, name, parallel=True, OP=op)


class BinaryKernel(OpKernel):
    """Broadcasting binary operator. Subclasses set ``ALLOWED`` (input dtypes),
    ``variants_for(dtype) -> Variants`` and optionally ``out_dtype``."""

    ALLOWED = _dt.NUMERIC
    in_place_input = True

    def variants_for(self, dtype) -> Variants:
        raise NotImplementedError

    def out_dtype(self, dtype):
        return dtype

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 1)
        ctx.check_dtype(0, self.ALLOWED)
        sa, sb = ctx.shape(0), ctx.shape(1)
        shape = broadcast_shape([sa, sb], ctx.fail)
        ctx.set_output(0, self.out_dtype(dt), shape)
        walk = Walk(shape, [element_strides(sa, shape), element_strides(sb, shape)])
        ctx.prepared = (walk, self.variants_for(dt).get(ctx.exact, walk.parallel))

    def run(self, ctx: RunContext) -> None:
        w, fn = ctx.prepared
        a, b = ctx.flat_in
        fn(a, b, ctx.flat_out[0], w.shape, w.strides[0], w.strides[1], w.block, w.tasks)


class UnaryKernel(OpKernel):
    """Element-wise unary operator; subclasses set ``ALLOWED`` and ``variants_for``."""

    ALLOWED = _dt.NUMERIC
    in_place_input = True

    def variants_for(self, dtype) -> Variants:
        raise NotImplementedError

    def out_dtype(self, dtype):
        return dtype

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, self.ALLOWED)
        shape = ctx.shape(0)
        ctx.set_output(0, self.out_dtype(dt), shape)
        n = int(np.prod(shape)) if shape else 1
        walk = Walk((n,), [[1]])
        block = walk.block if walk.parallel else max(n, 1)
        tasks = -(-n // block)
        ctx.prepared = (block, tasks, self.variants_for(dt).get(ctx.exact, walk.parallel))

    def run(self, ctx: RunContext) -> None:
        block, tasks, fn = ctx.prepared
        fn(ctx.flat_in[0], ctx.flat_out[0], block, tasks)
