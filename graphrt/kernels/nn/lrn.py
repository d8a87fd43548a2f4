"""LRN: local response normalisation across channels.

    y[n, c, p] = x[n, c, p] / (bias + alpha / size * sum_{c'} x[n, c', p]^2) ^ beta

over c' from c - floor((size - 1) / 2) to c + ceil((size - 1) / 2), clipped to the channels,
summed in ascending order in the element type. One task per (image, channel) plane. The
exact variant uses graphrt's own pow (exactmath) and no FMA; the fast one libm's pow, or for
beta = 0.75 (AlexNet's, GoogLeNet's) sqrt(z) * sqrt(sqrt(z)); float16 is computed in float32.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ..core.base import InferContext, OpKernel, RunContext
from ..core.broadcast import PARALLEL_MIN, put
from ..core.floats import compute_dtype, narrow, result_buffer, widen
from ..core.jit import Variants
from ..math import exactmath

EXACT = False
POW = None


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _libm_pow(a, b):
    return a ** b


def _lrn(x, y, channels, inner, before, after, scale, bias, beta, planes):
    """The sums of squares wait in the output row (channel by channel, so the loops over
    positions are the vectorised ones), then become the result in place."""
    for t in prange(planes):
        n = t // channels
        c = t - n * channels
        c0 = max(0, c - before)
        c1 = min(channels, c + after + 1)
        out = y[t * inner:(t + 1) * inner]
        for j in range(inner):
            out[j] = 0
        for k in range(c0, c1):
            src = x[(n * channels + k) * inner:(n * channels + k + 1) * inner]
            for j in range(inner):
                v = src[j]
                out[j] = out[j] + v * v
        xs = x[t * inner:(t + 1) * inner]
        for j in range(inner):
            put(out, j, xs[j] / POW(bias + scale * out[j], beta), EXACT)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _pow_three_quarters(a, b):
    """a ** 0.75 as sqrt(a) * sqrt(sqrt(a)) (b is 0.75): three roundings instead of one, but
    instructions that vectorise (libm's pow is a call per element); fast mode only."""
    r = np.sqrt(a)
    return r * np.sqrt(r)


_LRN = exactmath.FastExact(Variants(_lrn, "lrn", parallel=True, POW=_libm_pow),
                           Variants(_lrn, "lrn_exact", parallel=True, POW=exactmath.pow))
_LRN_075 = Variants(_lrn, "lrn_075", parallel=True, POW=_pow_three_quarters)


class LRN(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        size = node.attr("size")
        if size is None or int(size) < 1:
            node.fail(f"attribute 'size' must be a positive integer, got {size}")
        self.size = int(size)
        self.alpha = float(node.attr("alpha", 1e-4))
        self.beta = float(node.attr("beta", 0.75))
        self.bias = float(node.attr("bias", 1.0))

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _dt.FLOATS)
        xs = tuple(ctx.shape(0))
        if len(xs) < 2:
            ctx.fail(f"X of shape {list(xs)} needs a batch and a channel axis")
        ctx.set_output(0, dt, xs)
        planes = xs[0] * xs[1]
        wide = compute_dtype(dt)
        parallel = math.prod(xs) * self.size >= PARALLEL_MIN and planes > 1
        variants = _LRN_075 if self.beta == 0.75 and not ctx.exact else _LRN
        ctx.prepared = (xs[1], math.prod(xs[2:]), planes, wide, variants.get(ctx.exact, parallel))

    def run(self, ctx: RunContext) -> None:
        channels, inner, planes, wide, fn = ctx.prepared
        if planes * inner == 0:
            return
        x = widen(ctx, ctx.flat_in[0])
        y = result_buffer(ctx, ctx.flat_out[0])
        fn(x, y, channels, inner, (self.size - 1) // 2, self.size // 2,
           wide.type(self.alpha / self.size), wide.type(self.bias), wide.type(self.beta), planes)
        narrow(ctx.flat_out[0], y)
