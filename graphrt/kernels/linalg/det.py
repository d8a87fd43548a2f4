"""Det (opset 11+): the determinant of each trailing n x n matrix of x (*, n, n).

LU elimination with partial pivoting, in the element type: at step k the pivot is the first
row i >= k with the largest |a[i, k]| (a NaN counts as largest, so it propagates); a row swap
flips the sign; det is the product of the pivots in step order, times the sign; rows below
the pivot get a[i, j] = a[i, j] - (a[i, k] / a[k, k]) * a[k, j] for j ascending. An exactly
zero pivot column gives det 0. Only + - * / and comparisons, one task per matrix: an
exact-mode kernel. float16 is computed in float32; the determinant of a 0 x 0 matrix is 1.
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN, put
from ..core.floats import FLOATS, compute_dtype, widen
from ..core.jit import Variants

EXACT = False



def _det(x, work, out, n, one, tasks):
    for t in prange(tasks):
        a = work[t * n * n:(t + 1) * n * n]
        for i in range(n * n):
            a[i] = x[t * n * n + i]
        det = one
        for k in range(n):
            p = k
            best = abs(a[k * n + k])
            for i in range(k + 1, n):
                v = abs(a[i * n + k])
                if v > best or (v != v and best == best):
                    p = i
                    best = v
            if best == 0:
                det = one - one
                break
            if p != k:
                det = -det
                for j in range(n):
                    tmp = a[k * n + j]
                    a[k * n + j] = a[p * n + j]
                    a[p * n + j] = tmp
            piv = a[k * n + k]
            det = det * piv
            for i in range(k + 1, n):
                f = a[i * n + k] / piv
                for j in range(k + 1, n):
                    g = f * a[k * n + j]
                    a[i * n + j] = a[i * n + j] - g
        put(out, t, det, EXACT)


_DET = Variants(_det, "det", parallel=True)


class Det(OpKernel):
    supports_exact = True

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.dtype(0)
        if dt not in FLOATS:
            ctx.fail(f"element type {dt} is not supported", ErrorKind.UNSUPPORTED)
        shape = tuple(ctx.shape(0))
        if len(shape) < 2 or shape[-1] != shape[-2]:
            ctx.fail(f"input of shape {list(shape)} is not a stack of square matrices")
        ctx.set_output(0, dt, shape[:-2])
        n = shape[-1]
        tasks = math.prod(shape[:-2])
        work = compute_dtype(dt)
        parallel = tasks > 1 and tasks * n ** 3 >= PARALLEL_MIN
        ctx.prepared = (n, tasks, work, _DET.get(ctx.exact, parallel))

    def run(self, ctx: RunContext) -> None:
        n, tasks, work, fn = ctx.prepared
        x, out = ctx.flat_in[0], ctx.flat_out[0]
        buf = scratch(ctx, work, (tasks * n * n,))
        if x.dtype == work:
            fn(x, buf, out, n, work.type(1), tasks)
            return
        xw = widen(ctx, x, work)
        ow = scratch(ctx, work, (tasks,))
        fn(xw, buf, ow, n, work.type(1), tasks)
        np.copyto(out, ow, casting="unsafe")
