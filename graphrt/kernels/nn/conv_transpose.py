"""ConvTranspose: the gradient of Conv with respect to its input, as a GEMM plus col2im.

    y[n, m, o] = sum_{k, i : o = i * s + k * d - pb}
                     (sum_c w[g * C/G + c, m', k] * x[n, g * C/G + c, i])  (+ b[m])

with g the group of output channel m and m' its index inside the group. The inner sums form
col[(m, k), i] = W_g^T X_g through matmul's kernel (c ascending); col2im then adds, for each
output plane, the kernel positions in row-major order ascending onto zeros (one input
position per kernel position reaches a given output), and the bias last. One task per
(image, output channel) plane, so the bits do not depend on the thread count; the exact
variant has no FMA and writes NaN results as the canonical NaN.

Output extents: ``output_shape`` when given, else s * (in - 1) + output_padding +
(k - 1) * d + 1 - pads (in * s for SAME_*). With SAME_* the total padding
s * (in - 1) + output_padding + (k - 1) * d + 1 - out is split with the odd one at the end
(SAME_UPPER) or the beginning (SAME_LOWER); otherwise the explicit pads are used.
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..core.base import InferContext, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN
from ..core.floats import compute_dtype, narrow
from ..core.jit import Variants
from ..gemm.product import Product
from .conv import ConvPlan, GroupedConv, image_chunk
from .window import (D, DD, DH, DW, H, KD, KH, KW, OD, OH, OW, PD, PH, PW, SD, SH, SW, W, Axes,
                     check_float, check_rank, geometry)

EXACT = False


def _col2im(col, y, b, g, planes, m, has_b):
    """Plane t = (image, channel) of y: zeros, plus col[(t, k), i] at o = i * s + k * d - p
    for each kernel position k ascending, plus the bias."""
    id_, ih_, iw_ = g[D], g[H], g[W]
    od_, oh_, ow_ = g[OD], g[OH], g[OW]
    kd_, kh_, kw_ = g[KD], g[KH], g[KW]
    sw = g[SW]
    ip = id_ * ih_ * iw_
    op = od_ * oh_ * ow_
    for t in prange(planes):
        plane = y[t * op:(t + 1) * op]
        for j in range(op):
            plane[j] = 0
        for kd in range(kd_):
            for kh in range(kh_):
                for kw in range(kw_):
                    src0 = (((t * kd_ + kd) * kh_ + kh) * kw_ + kw) * ip
                    w0 = kw * g[DW] - g[PW]
                    lo = min(iw_, max(0, -(w0 // sw)))
                    hi = min(iw_, max(lo, (ow_ - 1 - w0) // sw + 1))
                    for di in range(id_):
                        od = di * g[SD] + kd * g[DD] - g[PD]
                        if od < 0 or od >= od_:
                            continue
                        for hi_ in range(ih_):
                            oh = hi_ * g[SH] + kh * g[DH] - g[PH]
                            if oh < 0 or oh >= oh_:
                                continue
                            s0 = src0 + (di * ih_ + hi_) * iw_
                            src = col[s0:s0 + iw_]
                            dst = (od * oh_ + oh) * ow_ + w0
                            for j in range(lo, hi):
                                plane[dst + j * sw] += src[j]
        if has_b:
            bv = b[t % m]
            for j in range(op):
                plane[j] = plane[j] + bv
        if EXACT:
            for j in range(op):
                v = plane[j]
                if v != v:
                    plane[j] = np.nan


COL2IM = Variants(_col2im, "convtranspose_col2im", parallel=True)


class ConvTranspose(GroupedConv):
    """X (N, C, D...), W (C, M/group, K...), optional B (M): Y (N, M, O...)."""

    def __init__(self, node):
        super().__init__(node)
        op = node.attr("output_padding")
        self.output_padding = None if op is None else [int(v) for v in op]
        shape = node.attr("output_shape")
        self.output_shape = None if shape is None else [int(v) for v in shape]
        if self.output_padding is not None and any(v < 0 for v in self.output_padding):
            node.fail(f"output_padding {self.output_padding} has a negative value")

    def _axes(self, ctx, spatial, kernel) -> Axes:
        r = len(spatial)
        kernel, strides, dilations, pads = self.window.lists(ctx.fail, r, kernel)
        outpad = self.output_padding or [0] * r
        if len(outpad) != r:
            ctx.fail(f"output_padding {outpad} should have {r} values")
        for i in range(r):
            if outpad[i] >= max(strides[i], dilations[i]):
                ctx.fail(f"output_padding {outpad} must be smaller than the stride or the "
                         f"dilation on each axis")
        shape = self.output_shape
        if shape is not None:
            if len(shape) == r + 2:
                shape = shape[2:]
            if len(shape) != r:
                ctx.fail(f"output_shape {self.output_shape} should have {r} values")
        same = self.window.auto_pad in ("SAME_UPPER", "SAME_LOWER")
        out, begin, end = [], [], []
        for i, n in enumerate(spatial):
            full = strides[i] * (n - 1) + outpad[i] + (kernel[i] - 1) * dilations[i] + 1
            if same:
                o = shape[i] if shape is not None else n * strides[i]
                total = full - o
                pb = total // 2 if self.window.auto_pad == "SAME_UPPER" else total - total // 2
                pe = total - pb
            else:
                pb, pe = (0, 0) if self.window.auto_pad == "VALID" else (pads[i], pads[i + r])
                o = shape[i] if shape is not None else full - pb - pe
            if o <= 0:
                ctx.fail(f"the output extent {o} on spatial axis {i} is not positive "
                         f"(input {n}, kernel {kernel[i]}, stride {strides[i]}, pads {pb}+{pe})")
            out.append(o)
            begin.append(pb)
            end.append(pe)
        return Axes(out, begin, end, kernel, strides, dilations)

    def infer(self, ctx: InferContext) -> None:
        has_b = ctx.has_input(2)
        dt = ctx.same_dtype(0, 1, 2) if has_b else ctx.same_dtype(0, 1)
        check_float(ctx)
        xs, ws = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        check_rank(ctx, xs)
        g = self.group
        if len(ws) != len(xs) or ws[0] != xs[1] or xs[1] % g:
            ctx.fail(f"X {list(xs)} and W {list(ws)} do not fit group {g}: W needs the rank of "
                     f"X and W.shape[0] = X.shape[1], divisible by group")
        n, c = xs[:2]
        mg = ws[1]
        m = mg * g
        if has_b and tuple(ctx.shape(2)) != (m,):
            ctx.fail(f"B of shape {list(ctx.shape(2))} should be [{m}]")
        ax = self._axes(ctx, xs[2:], ws[2:])
        ctx.set_output(0, dt, (n, m, *ax.out))
        p = ConvPlan()
        p.geo = geometry(c, xs[2:], ax)
        k = math.prod(ax.kernel)
        p.n, p.c, p.m = n, c, m
        p.in_size, p.out_size = math.prod(xs[2:]), math.prod(ax.out)
        p.wdt = compute_dtype(dt)
        p.col_size = m * k * p.in_size
        p.chunk = image_chunk(n, p.col_size, p.wdt.itemsize)
        cg = c // g
        batches = np.arange(p.chunk * g, dtype=np.int64)
        p.gemm = Product(p.wdt, mg * k, p.in_size, cg, (1, mg * k), (p.in_size, 1),
                         (batches % g) * (cg * mg * k), batches * (cg * p.in_size),
                         exact=ctx.exact)
        ctx.prepared = p

    def run(self, ctx: RunContext) -> None:
        p = ctx.prepared
        x, w, b, y = self.operands(ctx)
        col = scratch(ctx, p.wdt, (p.chunk * p.col_size,))
        for n0 in range(0, p.n, p.chunk):
            k = min(p.chunk, p.n - n0)
            xs = x[n0 * p.c * p.in_size:(n0 + k) * p.c * p.in_size]
            ys = y[n0 * p.m * p.out_size:(n0 + k) * p.m * p.out_size]
            p.gemm(w, xs, col, batches=k * self.group)
            fn = COL2IM.get(ctx.exact, ys.size >= PARALLEL_MIN and k * p.m > 1)
            fn(col, ys, b if b is not None else ys, p.geo, k * p.m, p.m, b is not None)
        narrow(ctx.flat_out[0], y)
