"""DeformConv (opset 19): a 2-d convolution whose taps are moved by learned offsets.

    y[n, m, o] = sum_{c, k} w[m, c, k] * (mask[n, g', k, o] * X~[n, c](p(o, k) + off[n, g', k, o]))
                 (+ b[m])

with p(o, k) = o * s - pb + k * d the plain Conv tap, g' = c // (C / offset_group) the
offset group, offset holding (dy, dx) per kernel position, mask 1 when absent, and X~ the
bilinear interpolation of the image with zeros outside it (the row pair is interpolated
along the width first, then the two rows; sums from 0, positions and weights in float64).
The sampled, masked taps fill a column matrix and the product follows Conv exactly
(conv.py: matmul's kernel, c then kernel positions ascending, bias last, no FMA in the
exact variant), so the bits do not depend on the thread count.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN
from ..core.floats import compute_dtype, narrow, result_buffer, widen
from ..core.jit import Variants
from ..gemm.product import Product
from .conv import ADD_BIAS, image_chunk
from .window import C, DH, DW, H, KH, KW, OH, OW, PH, PW, SH, SW, W, Window, check_float, geometry

EXACT = False
_FAR = 2.0 ** 40


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _bilinear(x, base, h_, w_, py, px):
    """X~ at (py, px) of the plane starting at x[base]; NaN for a NaN position."""
    if py != py or px != px:
        return np.nan
    py = min(max(py, -_FAR), _FAR)
    px = min(max(px, -_FAR), _FAR)
    fy = np.floor(py)
    fx = np.floor(px)
    y0 = int(fy)
    x0 = int(fx)
    ly = py - fy
    lx = px - fx
    acc = 0.0
    for b in range(2):
        yy = y0 + b
        if yy < 0 or yy >= h_:
            continue
        row = 0.0
        for k in range(2):
            xx = x0 + k
            if 0 <= xx < w_:
                row = row + (lx if k else 1 - lx) * x[base + yy * w_ + xx]
        acc = acc + (ly if b else 1 - ly) * row
    return acc


def _deform_im2col(x, off, mask, col, g, per_group, groups, rows, has_mask):
    """col[(image, c, kh, kw), (oh, ow)] = mask * X~ at the moved tap."""
    c_, h_, w_ = g[C], g[H], g[W]
    kh_, kw_ = g[KH], g[KW]
    oh_, ow_ = g[OH], g[OW]
    k_ = kh_ * kw_
    p_ = oh_ * ow_
    for r in prange(rows):
        kw = r % kw_
        q = r // kw_
        kh = q % kh_
        q = q // kh_
        c = q % c_
        img = q // c_
        plane = ((img * groups + c // per_group) * k_ + kh * kw_ + kw)
        ob = plane * 2 * p_
        mb = plane * p_
        xo = (img * c_ + c) * h_ * w_
        for oh in range(oh_):
            for ow in range(ow_):
                p = oh * ow_ + ow
                py = oh * g[SH] - g[PH] + kh * g[DH] + np.float64(off[ob + p])
                px = ow * g[SW] - g[PW] + kw * g[DW] + np.float64(off[ob + p_ + p])
                v = _bilinear(x, xo, h_, w_, py, px)
                if has_mask:
                    v = v * mask[mb + p]
                col[r * p_ + p] = v


# Only data movement and exact operations: the fast variant serves both modes.
_IM2COL = Variants(_deform_im2col, "deformconv_im2col", parallel=True)


class _Plan:
    __slots__ = ("geo", "gemm", "n", "c", "m", "in_size", "out_size", "col_size", "chunk",
                 "groups", "wdt")


class DeformConv(OpKernel):
    """X (N, C, H, W), W (M, C/group, kH, kW), offset (N, 2 G' kH kW, oH, oW), optional B (M)
    and mask (N, G' kH kW, oH, oW): Y (N, M, oH, oW)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.window = Window(node, need_kernel=False)
        if self.window.auto_pad != "NOTSET":
            node.fail("DeformConv has no auto_pad")
        self.group = int(node.attr("group", 1))
        self.offset_group = int(node.attr("offset_group", 1))
        if self.group < 1 or self.offset_group < 1:
            node.fail(f"group {self.group} and offset_group {self.offset_group} must be positive")

    def infer(self, ctx: InferContext) -> None:
        has_b, has_mask = ctx.has_input(3), ctx.has_input(4)
        dt = ctx.same_dtype(*[i for i in range(5) if i < 3 or ctx.has_input(i)])
        check_float(ctx)
        xs, ws, os_ = (tuple(ctx.shape(i)) for i in range(3))
        if len(xs) != 4:
            ctx.fail(f"X of shape {list(xs)} is not supported (2 spatial axes are)",
                     ErrorKind.UNSUPPORTED)
        n, c = xs[:2]
        m, cg = ws[:2] if len(ws) == 4 else (0, 0)
        g, og = self.group, self.offset_group
        if len(ws) != 4 or c != cg * g or m % g or c % og:
            ctx.fail(f"X {list(xs)} and W {list(ws)} do not fit group {g} and offset_group {og}")
        ax = self.window.resolve(ctx.fail, xs[2:], ws[2:])
        k = math.prod(ax.kernel)
        if os_ != (n, 2 * og * k, *ax.out):
            ctx.fail(f"offset of shape {list(os_)} should be {[n, 2 * og * k, *ax.out]}")
        if has_b and tuple(ctx.shape(3)) != (m,):
            ctx.fail(f"B of shape {list(ctx.shape(3))} should be [{m}]")
        if has_mask and tuple(ctx.shape(4)) != (n, og * k, *ax.out):
            ctx.fail(f"mask of shape {list(ctx.shape(4))} should be {[n, og * k, *ax.out]}")
        ctx.set_output(0, dt, (n, m, *ax.out))
        p = _Plan()
        p.geo = geometry(c, xs[2:], ax)
        p.n, p.c, p.m, p.groups = n, c, m, og
        p.in_size, p.out_size = math.prod(xs[2:]), math.prod(ax.out)
        p.wdt = compute_dtype(dt)
        p.col_size = c * k * p.out_size
        p.chunk = image_chunk(n, p.col_size, p.wdt.itemsize)
        mg = m // g
        batches = np.arange(p.chunk * g, dtype=np.int64)
        p.gemm = Product(p.wdt, mg, p.out_size, cg * k, (cg * k, 1), (p.out_size, 1),
                         (batches % g) * (mg * cg * k), batches * (cg * k * p.out_size),
                         exact=ctx.exact)
        ctx.prepared = p

    def run(self, ctx: RunContext) -> None:
        p = ctx.prepared
        flat = list(ctx.flat_in) + [None] * (5 - len(ctx.flat_in))
        x, w, off, b, mask = (widen(ctx, a) for a in flat)
        y = result_buffer(ctx, ctx.flat_out[0])
        col = scratch(ctx, p.wdt, (p.chunk * p.col_size,))
        k_out = p.col_size // max(1, p.out_size)       # rows per image
        for n0 in range(0, p.n, p.chunk):
            k = min(p.chunk, p.n - n0)
            xs = x[n0 * p.c * p.in_size:]
            offs = off[n0 * (off.size // max(1, p.n)):]
            masks = mask[n0 * (mask.size // max(1, p.n)):] if mask is not None else off
            ys = y[n0 * p.m * p.out_size:(n0 + k) * p.m * p.out_size]
            _IM2COL.get(False, k * p.col_size >= PARALLEL_MIN)(
                xs, offs, masks, col, p.geo, p.c // p.groups, p.groups, k * k_out,
                mask is not None)
            p.gemm(w, col, ys, batches=k * self.group)
            if b is not None and ys.size:
                ADD_BIAS.get(ctx.exact, ys.size >= PARALLEL_MIN)(ys, ys, b, k * p.m, p.m,
                                                                 p.out_size, ys, p.out_size,
                                                                 p.out_size, 0)
        narrow(ctx.flat_out[0], y)
