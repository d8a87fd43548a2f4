"""SwiGLU (opset 28): y = Swish_alpha(a) * b = a * sigmoid(alpha * a) * b, element-wise.

A and B must have the same shape (no broadcasting). alpha is rounded to the compute type
first; float16 and bfloat16 are computed in float32 and rounded once. Swish_alpha(a) is
activations.Swish's: libm's exp in fast mode, graphrt's own swish (exactmath, one rounding)
in exact mode, then one rounded product with b.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ..core.base import InferContext, OpKernel, RunContext
from ..core.broadcast import BLOCK, PARALLEL_MIN, put
from ..core.floats import FLOATS, compute_dtype, narrow, result_buffer, widen
from ..core.jit import Variants
from ..math.exactmath import FastExact
from .activations import swish_exact, swish_scalar

EXACT = False
OP = None


def _gated(a, b, out, alpha, block, tasks):
    n = out.size
    for t in prange(tasks):
        j0 = t * block
        for j in range(j0, min(n, j0 + block)):
            put(out, j, OP(a[j], alpha, alpha) * b[j], EXACT)


_SWIGLU = FastExact(Variants(_gated, "swiglu", parallel=True, OP=swish_scalar),
                    Variants(_gated, "swiglu_exact", parallel=True, OP=swish_exact))


class SwiGLU(OpKernel):
    supports_exact = True
    in_place_input = True

    def __init__(self, node):
        super().__init__(node)
        self.alpha = float(np.float32(node.attr("alpha", 1.0)))

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 1)
        ctx.check_dtype(0, FLOATS)
        shape = tuple(ctx.shape(0))
        if tuple(ctx.shape(1)) != shape:
            ctx.fail(f"A {list(shape)} and B {list(ctx.shape(1))} must have the same shape "
                     "(SwiGLU does not broadcast)")
        ctx.set_output(0, dt, shape)
        n = int(np.prod(shape, dtype=np.int64))
        parallel = n >= PARALLEL_MIN
        block = BLOCK if parallel else max(n, 1)
        alpha = compute_dtype(dt).type(self.alpha)
        ctx.prepared = (alpha, block, -(-n // block), _SWIGLU.get(ctx.exact, parallel))

    def run(self, ctx: RunContext) -> None:
        alpha, block, tasks, fn = ctx.prepared
        out = ctx.flat_out[0]
        buf = result_buffer(ctx, out)
        fn(widen(ctx, ctx.flat_in[0]), widen(ctx, ctx.flat_in[1]), buf, alpha, block, tasks)
        narrow(out, buf)
