"""ConvInteger and QLinearConv: integer convolutions.

    acc[n, m, o] = sum over c, k of (w[m, c, k] - w_zp[m])
                                    * (xpad[n, g * C/G + c, o * s - pb + k * d] - x_zp)   int32
    ConvInteger  y = acc
    QLinearConv  y = saturate(rint(float64(acc + bias[m]) * mult[m] + y_zp)),
                 mult = x_scale * w_scale[m] / y_scale (quantize.py's requantization)

with the window attributes of conv.py (g the group of output channel m) and xpad = x_zp
outside the input, so that the shifted padding is 0. Every term is an integer of at most
9 x 9 bits and every sum is exact, so the result does not depend on the path, the mode or
the thread count. Two paths:

- Integer tiles (x86, constant weights and zero points, at least 16 output channels a
  group, K = C/G * kernel positions <= micro_int.MAX_K): gemm/micro_int.py's product with
  A = a group's weights minus their zero points (int16 rows, packed once per plan) and
  B = the image's shifted taps, row k = (c, kernel position), column = output position, laid
  out as micro_int's pairs of rows (``_pairs``); C's rows are output channels, i.e. NCHW.
- Otherwise conv.py's float convolution of the shifted operands: float32 where every partial
  sum stays below 2**24 (its bound: the largest |x - x_zp| times the largest sum of
  |w - w_zp| over one output channel's window, from the values where the weights are
  constant), else float64.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ...errors import ErrorKind
from ..core.base import InferContext, NodeInfo, OpKernel, RunContext, scratch
from ..core.floats import F32, F64, widen
from ..core.jit import Variants
from ..gemm import micro_int
from ..gemm.product import PARALLEL_WORK
from ..nn.conv import Conv
from ..nn.window import D, DD, DH, DW, H, KD, KH, KW, OD, OH, OW, PD, PH, PW, SD, SH, SW, W, tap_of
from .quantize import I32, Requantized, shift_bound, shifted, zero_point_check

MIN_CHANNELS = 16       # output channels a group needs for the integer tiles (MR-row tiles)


@njit(cache=True, nogil=True, inline="always")
def _tap(g, r, k):
    """Tap r's (channel, input depth offset, height offset, first valid ow, end of the valid
    ow, input column of ow = 0); r >= k: no valid column."""
    c, kd, kh, kw = tap_of(r, g[KD], g[KH], g[KW])
    w0 = kw * g[DW] - g[PW]
    ow_, sw = g[OW], g[SW]
    lo = min(ow_, max(0, -(w0 // sw)))
    hi = min(ow_, max(lo, (g[W] - 1 - w0) // sw + 1))
    if r >= k:
        lo, hi = 0, 0
    return c, kd * g[DD] - g[PD], kh * g[DH] - g[PH], lo, hi, w0


@njit(cache=True, nogil=True, inline="always")
def _row_start(g, x0, c, dd, dh, od, oh, valid):
    """Where tap (c, dd, dh)'s input row for output row (od, oh) starts in x (its column 0),
    or -1 where that row is padding."""
    di = od * g[SD] + dd
    hi_ = oh * g[SH] + dh
    if not valid or di < 0 or di >= g[D] or hi_ < 0 or hi_ >= g[H]:
        return -1
    return x0 + ((c * g[D] + di) * g[H] + hi_) * g[W]


def _pairs(x, zp, g, x0, k, kp, p_, np_, out):
    """out[q * np_ + j] = the int32 word of micro_int's B pair (taps 2q, 2q + 1) at output
    position j: low half x at tap 2q minus zp[0], high half tap 2q + 1's (each 0 in the
    padding, for taps >= k and for j >= p_), for the channels of one image and group
    starting at x[x0]. Taps r = (c, kd, kh, kw) in row-major order."""
    od_, oh_, ow_ = g[OD], g[OH], g[OW]
    sw = g[SW]
    z = np.int32(zp[0])
    for q in prange(kp // 2):
        c0, dd0, dh0, lo0, hi0, w00 = _tap(g, 2 * q, k)
        c1, dd1, dh1, lo1, hi1, w01 = _tap(g, 2 * q + 1, k)
        base = q * np_
        for od in range(od_):
            for oh in range(oh_):
                o = base + (od * oh_ + oh) * ow_
                s0 = _row_start(g, x0, c0, dd0, dh0, od, oh, lo0 < hi0)
                s1 = _row_start(g, x0, c1, dd1, dh1, od, oh, lo1 < hi1)
                a0, b0 = (lo0, hi0) if s0 >= 0 else (0, 0)
                a1, b1 = (lo1, hi1) if s1 >= 0 else (0, 0)
                s0 += w00
                s1 += w01
                lo, hi = max(a0, a1), min(b0, b1)
                if lo >= hi:
                    lo, hi = 0, 0
                for ow in range(lo):
                    v0 = np.int32(x[s0 + ow * sw]) - z if a0 <= ow < b0 else np.int32(0)
                    v1 = np.int32(x[s1 + ow * sw]) - z if a1 <= ow < b1 else np.int32(0)
                    out[o + ow] = (v0 & 0xFFFF) | (v1 << 16)
                # unsigned indices: numba's wraparound of negative ones would keep it scalar
                u0, u1, uo, us = np.uint64(s0), np.uint64(s1), np.uint64(o), np.uint64(sw)
                for ow in range(np.uint64(lo), np.uint64(hi)):
                    v0 = np.int32(x[u0 + ow * us]) - z
                    v1 = np.int32(x[u1 + ow * us]) - z
                    out[uo + ow] = (v0 & 0xFFFF) | (v1 << 16)
                for ow in range(max(lo, hi), ow_):
                    v0 = np.int32(x[s0 + ow * sw]) - z if a0 <= ow < b0 else np.int32(0)
                    v1 = np.int32(x[s1 + ow * sw]) - z if a1 <= ow < b1 else np.int32(0)
                    out[o + ow] = (v0 & 0xFFFF) | (v1 << 16)
        for j in range(p_, np_):
            out[base + j] = 0


PAIRS = Variants(_pairs, "conv_integer_pairs", parallel=True)


@njit(cache=True, nogil=True)
def _store(c, np_, rows, cols, bias, m0, out, o0):
    """out[o0 + i * cols + j] = c[i * np_ + j] (+ bias[m0 + i] where bias is not empty)."""
    has_b = bias.size > 0
    for i in range(rows):
        b = bias[m0 + i] if has_b else np.int32(0)
        src, dst = np.uint64(i * np_), np.uint64(o0 + i * cols)
        for j in range(np.uint64(cols)):
            out[dst + j] = c[src + j] + b


class _Tiles:
    """The integer-tile plan: packed weights per group and the product's extents."""

    __slots__ = ("a", "images", "groups", "c", "m", "mg", "k", "kp", "mp", "p", "np_",
                 "in_size", "geo", "pairs", "product")


def _pack_weights(w, wzp, groups) -> list:
    """Each group's weights minus their zero points as micro_int's A: int16 rows of K
    rounded up to even, MR-row tiles (zeros pad)."""
    m, k = w.shape[0], w[0].size
    mg = m // groups
    mp = -(-mg // micro_int.MR) * micro_int.MR
    rows = w.reshape(m, k).astype(np.int16) - np.asarray(wzp, np.int16).reshape(-1, 1)
    out = []
    for gi in range(groups):
        a = np.zeros((mp, k + (k & 1)), np.int16)
        a[:mg, :k] = rows[gi * mg:(gi + 1) * mg]
        out.append(a.reshape(-1))
    return out


def _tile_plan(conv_plan, a, k, groups) -> _Tiles:
    t = _Tiles()
    t.geo, t.images, t.c, t.m = conv_plan.geo, conv_plan.n, conv_plan.c, conv_plan.m
    t.in_size, t.p, t.groups, t.a, t.k = conv_plan.in_size, conv_plan.out_size, groups, a, k
    t.mg = t.m // groups
    t.kp = k + (k & 1)
    t.mp = -(-t.mg // micro_int.MR) * micro_int.MR
    t.np_ = -(-t.p // micro_int.NR) * micro_int.NR
    t.pairs = PAIRS.get(False, k * t.p >= (1 << 16))
    t.product = micro_int.PRODUCT.get(False, t.mg * t.p * k >= PARALLEL_WORK)
    return t


class ConvInteger(OpKernel):
    """See the module docstring. Inputs X, W, their zero points (and QLinearConv's bias) at
    the positions the subclass names."""

    supports_exact = True
    X, W, XZP, WZP, BIAS = 0, 1, 2, 3, None
    WINDOW = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")

    def __init__(self, node):
        super().__init__(node)
        attrs = {k: v for k, v in node.attrs.items() if k in self.WINDOW}
        self.conv = Conv(NodeInfo(node.name, "Conv", "", 11, attrs, 3, 1))
        self._packed = None     # (constant W, its zero point, _pack_weights' result)

    def conv_plan(self, ctx: InferContext):
        for i in (self.X, self.W):
            if ctx.dtype(i) not in (np.uint8, np.int8):
                ctx.fail(f"input {i} of element type {ctx.dtype(i)} is not supported "
                         "(uint8 and int8 are)", ErrorKind.UNSUPPORTED)
        xs, ws = tuple(ctx.shape(self.X)), tuple(ctx.shape(self.W))
        if len(xs) < 3 or len(ws) != len(xs):
            ctx.fail(f"x {list(xs)} and w {list(ws)} must have the same rank, 3 or more")
        m_out = ws[0]
        zero_point_check(ctx, self.XZP, 1, "x's")
        zero_point_check(ctx, self.WZP, m_out, "w's")
        has_b = self.BIAS is not None and ctx.has_input(self.BIAS)
        bound = _weight_sum_bound(ctx, self.W, self.WZP) * shift_bound(ctx, self.X, self.XZP)
        bias = None
        if has_b:
            if ctx.dtype(self.BIAS) != I32 or tuple(ctx.shape(self.BIAS)) != (m_out,):
                ctx.fail(f"B must be int32 of shape [{m_out}]")
            bias = ctx.value(self.BIAS)
            bound += (1 << 31) if bias is None else int(np.abs(bias.astype(np.int64)).max())
        wd = F32 if bound < (1 << 24) else F64
        w = ctx.value(self.W)
        wzp = ctx.value(self.WZP) if ctx.has_input(self.WZP) else np.zeros(1, I32)
        tiles = w is not None and wzp is not None and micro_int.AVAILABLE and \
            math.prod(ws[1:]) <= micro_int.MAX_K and m_out // self.conv.group >= MIN_CHANNELS
        wide_w = None if w is None or wzp is None or tiles else \
            (w.astype(wd) - np.asarray(wzp, wd).reshape((-1,) + (1,) * (len(ws) - 1)))
        wide_b = None if bias is None else bias.astype(wd)
        fc = InferContext(self.conv.node, ctx.exact, [wd, wd, wd if has_b else None],
                          [xs, ws, (m_out,) if has_b else None],
                          [None, None if tiles else wide_w, wide_b], 1)
        self.conv.infer(fc)
        shape = fc.out_shapes[0]
        if tiles:
            return shape, self._tiles(fc.prepared, w, wzp)
        return shape, (wd, xs, ws, fc.prepared, wide_w, wide_b, has_b)

    def _tiles(self, conv_plan, w, wzp) -> _Tiles:
        groups = self.conv.group
        cached = self._packed
        if cached is None or cached[0] is not w or cached[1] is not wzp:
            cached = self._packed = (w, wzp, _pack_weights(w, wzp, groups))
        return _tile_plan(conv_plan, cached[2], w[0].size, groups)

    def _tile_product(self, ctx: RunContext, t: _Tiles, out):
        """out (int32, NCHW) = the integer-tile convolution (+ the int32 bias, if any)."""
        flat = ctx.flat_in
        x = flat[self.X]
        xzp = flat[self.XZP] if len(flat) > self.XZP and flat[self.XZP] is not None else \
            np.zeros(1, x.dtype)
        bias = flat[self.BIAS] if self.BIAS is not None and len(flat) > self.BIAS and \
            flat[self.BIAS] is not None else np.zeros(0, I32)
        b32 = scratch(ctx, I32, (t.kp // 2 * t.np_,))
        b = b32.view(np.int16)
        c = scratch(ctx, I32, (t.mp * t.np_,))
        addr = micro_int.address()
        cg = t.c // t.groups
        tiles_n = t.np_ // micro_int.NR
        for n in range(t.images):
            for gi in range(t.groups):
                t.pairs(x, xzp, t.geo, (n * t.c + gi * cg) * t.in_size, t.k, t.kp, t.p, t.np_,
                        b32)
                t.product(addr, t.a[gi], b, c, t.mp, t.kp, t.np_, tiles_n, True)
                _store(c, t.np_, t.mg, t.p, bias, gi * t.mg, out, (n * t.m + gi * t.mg) * t.p)

    def convolve(self, ctx: RunContext, plan, out=None):
        """The exact integer sums: into ``out`` (int32) on the integer-tile path, else as
        float32 or float64 scratch (returned flat)."""
        if isinstance(plan, _Tiles):
            acc = out if out is not None else scratch(ctx, I32, ctx.outputs[0].shape).reshape(-1)
            self._tile_product(ctx, plan, acc)
            return acc
        wd, xs, ws, prepared, wide_w, wide_b, has_b = plan
        flat = ctx.flat_in
        xzp = flat[self.XZP] if len(flat) > self.XZP else None
        wzp = flat[self.WZP] if len(flat) > self.WZP else None
        x = shifted(ctx, flat[self.X], xzp, 1, 1, wd).reshape(xs)
        w = wide_w if wide_w is not None else \
            shifted(ctx, flat[self.W], wzp, math.prod(ws[1:]), ws[0], wd).reshape(ws)
        b = None
        if has_b:
            b = wide_b if wide_b is not None else widen(ctx, flat[self.BIAS], wd)
        acc = scratch(ctx, wd, ctx.outputs[0].shape)
        self.conv.run(RunContext(self.conv.node, [x, w, b] if has_b else [x, w], [acc],
                                 prepared, ctx.exact, ctx.arena, ctx.cancel))
        return acc.reshape(-1)

    def infer(self, ctx: InferContext) -> None:
        shape, plan = self.conv_plan(ctx)
        ctx.set_output(0, I32, shape)
        ctx.prepared = plan

    def run(self, ctx: RunContext) -> None:
        out = ctx.flat_out[0]
        acc = self.convolve(ctx, ctx.prepared, out)
        if acc is not out:
            np.copyto(out, acc, casting="unsafe")


class QLinearConv(ConvInteger, Requantized):
    X, W, XZP, WZP, BIAS = 0, 3, 2, 5, 8

    def infer(self, ctx: InferContext) -> None:
        shape, plan = self.conv_plan(ctx)
        out, mult = self.requant_plan(ctx, shape[1], "output channel")
        ctx.set_output(0, out, shape)
        ctx.prepared = (plan, mult, math.prod(shape[2:]), shape[1])

    def run(self, ctx: RunContext) -> None:
        plan, mult, inner, channels = ctx.prepared
        self.requantize(ctx, self.convolve(ctx, plan), mult, inner, channels)


def _weight_sum_bound(ctx, w, zp) -> int:
    """The largest sum over one output channel's window of |w - zero point|: from the values
    where the weights and zero points are constant, else window size * the type's bound."""
    ws = tuple(ctx.shape(w))
    v = ctx.value(w)
    z = ctx.value(zp) if ctx.has_input(zp) else np.zeros(1, np.int64)
    if v is None or z is None or v.size == 0:
        return math.prod(ws[1:]) * shift_bound(ctx, w, zp)
    shifted_w = v.reshape(ws[0], -1).astype(np.int64) - np.asarray(z, np.int64).reshape(-1, 1)
    return int(np.abs(shifted_w).sum(axis=1).max())
