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
  On VNNI CPUs, 1-d and 2-d convolutions whose weights minus their zero points fit int8
  take micro_int's byte tiles instead, reading B without a column matrix: the input is laid
  out once per image and group as planes of words (``_plane``: four channels' bytes
  x + 128*(x is int8), one plane per phase of the strides, the zero point outside the
  input), in which the quad of taps (channels 4c'..4c'+3, kernel position (kh, kw)) of
  output position (oh, ow) is word (oh + kh*DH // SH, ow + kw*DW // SW) of plane
  (c', kh*DH % SH, kw*DW % SW); numbering positions oh * wp + ow (wp the planes' width,
  wp - OW of every wp computed and dropped) makes each of B's rows a contiguous run of a
  plane. The unsigned input's zero point is taken out with the weights' row sums.
- Otherwise conv.py's float convolution of the shifted operands: float32 where every partial
  sum stays below 2**24 (its bound: the largest |x - x_zp| times the largest sum of
  |w - w_zp| over one output channel's window, from the values where the weights are
  constant), else float64.
"""
from __future__ import annotations

import math

import numpy as np
import numba
from numba import njit, prange

from ...aligned import aligned_copy
from ...errors import ErrorKind
from ..core.base import InferContext, NodeInfo, OpKernel, RunContext, make_calls, scratch
from ..core.held import held_buffer
from ..core.floats import F32, F64, widen
from ..core.jit import Variants
from ..gemm import micro_int
from ..gemm.product import PARALLEL_WORK
from ..nn.conv import Conv
from ..nn.window import D, DD, DH, DW, H, KD, KH, KW, OH, OW, PD, PH, PW, SD, SH, SW, W, tap_of
from .quantize import (I32, Requantized, requantized, shift_bound, shifted,
                       zero_point_check)

MIN_CHANNELS = 16       # output channels a group needs for the integer tiles (8 or 12-row tiles)
BLOCK_BYTES = 1 << 17   # a block's pairs stay in the core's cache
NR = micro_int.NR


def tap_table(g, k, kp) -> np.ndarray:
    """Row r < kp: tap r's (input row offset: channel * D * H * W, depth offset, height
    offset, first valid ow, end of the valid ow, input column of ow = 0); rows r >= k (the
    padding tap of an odd K) have no valid column. Taps r = (c, kd, kh, kw) row-major."""
    out = np.zeros((kp, 6), np.int64)
    for r in range(k):
        c, kd, kh, kw = tap_of(r, int(g[KD]), int(g[KH]), int(g[KW]))
        w0 = kw * int(g[DW]) - int(g[PW])
        ow_, sw = int(g[OW]), int(g[SW])
        lo = min(ow_, max(0, -(w0 // sw)))
        hi = min(ow_, max(lo, (int(g[W]) - 1 - w0) // sw + 1))
        out[r] = (c * int(g[D] * g[H] * g[W]), kd * int(g[DD]) - int(g[PD]),
                  kh * int(g[DH]) - int(g[PH]), lo, hi, w0)
    return out


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _row_start(g, x0, tap, od, oh):
    """Where a tap (a row of ``tap_table``)'s input row for output row (od, oh) starts in x
    (at its ow = 0 column), and its valid columns [lo, hi) (empty where that row is
    padding)."""
    di = od * g[SD] + tap[1]
    hi_ = oh * g[SH] + tap[2]
    if tap[3] >= tap[4] or di < 0 or di >= g[D] or hi_ < 0 or hi_ >= g[H]:
        return 0, 0, 0
    return x0 + tap[0] + (di * g[H] + hi_) * g[W] + tap[5], tap[3], tap[4]


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")
def _pairs(x, z, g, taps, x0, kp, r0, r1, ld, out):
    """out[q * ld + j] = the int32 word of micro_int's B pair of taps 2q, 2q + 1
    (``tap_table``) at output position r0 * OW + j, for the output rows r0 <= r < r1 (rows
    over od, oh): low half x at tap 2q minus z, high half tap 2q + 1's (each 0 in the
    padding); columns (r1 - r0) * OW <= j < ld are 0. x's channels of one image and group
    start at x[x0]."""
    oh_, ow_ = g[OH], g[OW]
    sw = g[SW]
    n = (r1 - r0) * ow_
    for q in range(kp // 2):
        base = q * ld
        t0 = (taps[2 * q, 0], taps[2 * q, 1], taps[2 * q, 2], taps[2 * q, 3], taps[2 * q, 4],
              taps[2 * q, 5])
        t1 = (taps[2 * q + 1, 0], taps[2 * q + 1, 1], taps[2 * q + 1, 2], taps[2 * q + 1, 3],
              taps[2 * q + 1, 4], taps[2 * q + 1, 5])
        od, oh = r0 // oh_, r0 % oh_
        for r in range(r0, r1):
            s0, a0, b0 = _row_start(g, x0, t0, od, oh)
            s1, a1, b1 = _row_start(g, x0, t1, od, oh)
            oh += 1
            if oh == oh_:
                od, oh = od + 1, 0
            o = base + (r - r0) * ow_
            lo, hi = max(a0, a1), min(b0, b1)
            if lo >= hi:
                lo, hi = 0, 0
            for i in range(lo):
                v0 = np.int32(x[s0 + i * sw]) - z if a0 <= i < b0 else np.int32(0)
                v1 = np.int32(x[s1 + i * sw]) - z if a1 <= i < b1 else np.int32(0)
                out[o + i] = (v0 & 0xFFFF) | (v1 << 16)
            # unsigned indices: numba's wraparound of negative ones would keep it scalar
            u0, u1, uo, us = np.uint64(s0), np.uint64(s1), np.uint64(o), np.uint64(sw)
            for i in range(np.uint64(lo), np.uint64(hi)):
                v0 = np.int32(x[u0 + i * us]) - z
                v1 = np.int32(x[u1 + i * us]) - z
                out[uo + i] = (v0 & 0xFFFF) | (v1 << 16)
            for i in range(max(lo, hi), ow_):
                v0 = np.int32(x[s0 + i * sw]) - z if a0 <= i < b0 else np.int32(0)
                v1 = np.int32(x[s1 + i * sw]) - z if a1 <= i < b1 else np.int32(0)
                out[o + i] = (v0 & 0xFFFF) | (v1 << 16)
        for j in range(n, ld):
            out[base + j] = 0


def _plane(x, x0, shift, zp, g, cg, hp, wp, out, planes):
    """The direct path's input, in ``planes`` planes of hp x wp words, plane
    (cq * SH + ph) * SW + pw of x's strides' phase (ph, pw) and quad of channels cq: its
    word (i, j) = the bytes x + shift of channels 4cq ... 4cq + 3 at input row
    i * SH + ph - PH, column j * SW + pw - PW (the pad byte zp[0] + shift outside the input
    and for channels >= cg); the words after the planes also the pad (the last blocks'
    discarded columns read them). x's channels of one image and group start at x[x0]."""
    h_, w_, ph0, pw0, sh_, sw_ = g[H], g[W], g[PH], g[PW], g[SH], g[SW]
    size = hp * wp
    pad = np.int32(zp[0]) + shift       # (the zero point may change from run to run)
    pad4 = pad | (pad << 8) | (pad << 16) | (pad << 24)
    for pl in prange(planes):
        cq, phase = pl // (sh_ * sw_), pl % (sh_ * sw_)
        ph, pw = phase // sw_, phase % sw_
        # the columns j inside the input: 0 <= j * SW + pw - PW < W
        lo = min(wp, max(0, (pw0 - pw + sw_ - 1) // sw_))
        hi = min(wp, max(lo, (w_ + pw0 - pw + sw_ - 1) // sw_))
        base = pl * size
        for i in range(hp):
            o = base + i * wp
            ih = i * sh_ + ph - ph0
            if ih < 0 or ih >= h_ or 4 * cq + 3 >= cg:
                for j in range(wp):
                    out[o + j] = pad4
                if 0 <= ih < h_:            # the last quad of channels, cg % 4 != 0
                    for t in range(cg - 4 * cq):
                        s = x0 + ((4 * cq + t) * h_ + ih) * w_ + pw - pw0
                        for j in range(lo, hi):
                            out[o + j] = (out[o + j] & ~(0xFF << (8 * t))) | \
                                ((np.int32(x[s + j * sw_]) + shift) << (8 * t))
                continue
            for j in range(lo):
                out[o + j] = pad4
            # unsigned indices: numba's wraparound of negative ones would keep it scalar
            s0 = np.uint64(x0 + (4 * cq * h_ + ih) * w_ + pw - pw0)
            hw, uo, us = np.uint64(h_ * w_), np.uint64(o), np.uint64(sw_)
            for j in range(np.uint64(lo), np.uint64(hi)):
                at = s0 + j * us
                out[uo + j] = ((np.int32(x[at]) + shift)
                               | ((np.int32(x[at + hw]) + shift) << 8)
                               | ((np.int32(x[at + 2 * hw]) + shift) << 16)
                               | ((np.int32(x[at + 3 * hw]) + shift) << 24))
            for j in range(hi, wp):
                out[o + j] = pad4
        if pl == planes - 1:
            for j in range(planes * size, out.size):
                out[j] = pad4


PLANE = Variants(_plane, "conv_integer_plane", parallel=True)


def _blocks(addr, x, zp, shift, g, taps, x0, kp, p_, pb, ldmax, a, sums, mr, mp, mg, bias, m0,
            out, o0, mult, off, yzp, lo, hi, plane, wp, work, blocks):
    """One image and group of the convolution: the ``blocks`` blocks of pb output rows (at
    most ldmax positions, rounded up to NR; with DIRECT of ldmax positions oh * wp + ow) in
    parallel, tiles of mr rows (micro_int.ROWS); each builds its words of taps (``_pairs``;
    cache-resident; with DIRECT copies of ``plane``'s words from taps[q, 0] on for quad q),
    runs micro_int's tiles over every output channel of the
    group, and writes out[o0 + i * p_ + j] = acc + bias[m0 + i] (int32), or with REQUANT
    that requantized (quantize.requantized: mult, off per channel m0 + i or one value, yzp
    one value, clamped to [lo, hi]). With DIRECT, acc is taken from the unsigned taps
    (x + shift) and corrected by (x's zero point + shift) * sums[i] (row i's sum of a)."""
    z = np.int32(zp[0])
    pad = z + np.int32(shift)
    has_b = bias.size > 0
    nm, no = mult.size > 1, off.size > 1
    has_off = off.size > 0
    tm = mp // mr
    ow_ = g[OW]
    rows = p_ // ow_
    step = 2 if PAIRS else 4
    for blk in prange(blocks):
        # the block's positions [c0, c1): output positions, or oh * wp + ow with DIRECT
        if DIRECT:
            c0 = blk * ldmax
            c1 = min(c0 + ldmax, (rows - 1) * wp + ow_)
        else:
            r0 = blk * pb
            r1 = min(rows, r0 + pb)
            c0, c1 = r0 * ow_, r1 * ow_
        ld = (c1 - c0 + NR - 1) // NR * NR
        row = work[numba.get_thread_id()]
        cb = kp // step * ldmax             # where C starts in the row (after B)
        if PAIRS:
            _pairs(x, z, g, taps, x0, kp, r0, r1, ld, row)
            taps16 = row.view(np.int16)
            for t in range(tm * (ld // NR)):
                i0, jj = (t % tm) * mr, (t // tm) * NR
                micro_int.tile(addr, a, i0 * kp, kp, taps16, 2 * jj, 2 * ld, row,
                               cb + i0 * ld + jj, ld, kp // 2)
        else:
            for q in range(kp // 4):
                # unsigned indices, as in _pairs
                src, dst = np.uint64(taps[q, 0] + c0), np.uint64(q * ld)
                for j in range(np.uint64(ld)):
                    row[dst + j] = plane[src + j]
            taps8 = row.view(np.uint8)
            # A's tiles once each (the last layers' weights are megabytes), the block's B
            # from cache again
            tn = ld // NR
            for t in range(tm * tn):
                i0, jj = (t // tn) * mr, (t % tn) * NR
                micro_int.tile(addr, a, i0 * kp, kp, taps8, 4 * jj, 4 * ld, row,
                               cb + i0 * ld + jj, ld, kp // 4)
        for i in range(mg):
            bv = bias[m0 + i] if has_b else np.int32(0)
            if not PAIRS:
                bv -= pad * sums[i]
            m = mult[m0 + i if nm else 0]
            tv = np.float64(yzp[0])
            if has_off:
                tv = off[m0 + i if no else 0] + tv
            # runs of C's positions that are output positions: the block's, or with DIRECT
            # each row's columns ow < OW
            c = c0
            while c < c1:
                if DIRECT:
                    oh, ow = c // wp, c % wp
                    n = min(wp - ow, c1 - c)
                    count, at = max(0, min(n, ow_ - ow)), oh * ow_ + ow
                else:
                    n, count, at = c1 - c0, c1 - c0, c0
                # unsigned indices, as in _pairs
                dst, src = np.uint64(o0 + i * p_ + at), np.uint64(cb + i * ld + c - c0)
                if REQUANT:
                    for j in range(np.uint64(count)):
                        out[dst + j] = requantized(row[src + j] + bv, m, tv, lo, hi)
                else:
                    for j in range(np.uint64(count)):
                        out[dst + j] = row[src + j] + bv
                c += n


REQUANT = DIRECT = False
PAIRS = True
_NO_REQUANT = (np.zeros(1), np.zeros(0), np.zeros(1, np.int32), 0, 0)
TAPS = ("pairs", "direct")      # the forms of the tiles' B (see _blocks)
# (requantized, form): the compiled forms
BLOCKS = {(r, f): Variants(_blocks, "conv_integer_blocks" + "_requant" * r + "_" + f,
                           parallel=True, REQUANT=r, PAIRS=f == "pairs", DIRECT=f == "direct")
          for r in (False, True) for f in TAPS}
_NO_PLANE = np.zeros(0, np.int32)


class _Tiles:
    """The integer-tile plan: packed weights per group and the blocks' extents."""

    __slots__ = ("a", "sums", "form", "images", "groups", "c", "m", "mg", "k", "kp", "mp",
                 "p", "pb", "ld", "in_size", "geo", "taps", "parallel", "work", "hp", "wp",
                 "planes", "plane", "mr")


def _pack_weights(shifted, cg, groups, form: str) -> tuple[list, list]:
    """Each group's weights minus their zero points (``shifted``: int16 rows of K = (channel,
    kernel position) row-major) as micro_int's A, tiles of micro_int.ROWS rows (zeros pad):
    int16 rows of K rounded up to even ("pairs"), or int8 rows ordered (quad of channels,
    kernel position, channel in the quad), channels rounded up to 4 ("direct"), with each
    group's row sums (int32; empty arrays for pairs)."""
    m, k = shifted.shape
    mg = m // groups
    positions = k // max(1, cg)
    mr = micro_int.ROWS[tile_form(form)]
    mp = -(-mg // mr) * mr
    kp = k + (k & 1) if form == "pairs" else -(-cg // 4) * 4 * positions
    out, sums = [], []
    for gi in range(groups):
        a = np.zeros((mp, kp), np.int16)
        part = shifted[gi * mg:(gi + 1) * mg]
        if form == "direct":
            quads = np.zeros((mg, kp // (4 * positions), 4, positions), np.int16)
            quads.reshape(mg, -1, positions)[:, :cg] = part.reshape(mg, cg, positions)
            a[:mg] = quads.transpose(0, 1, 3, 2).reshape(mg, kp)
        else:
            a[:mg, :k] = part
        out.append(aligned_copy(a if form == "pairs" else a.astype(np.int8)).reshape(-1))
        sums.append(np.zeros(0, np.int32) if form == "pairs" else a.sum(axis=1, dtype=np.int32))
    return out, sums


def tile_form(form: str) -> str:
    """micro_int's tile form for a form of the taps."""
    return micro_int.PAIRS if form == "pairs" else micro_int.SIGNED_ROWS


def taps_form(geo, shifted) -> str:
    """The tiles' B: "direct" (bytes from planes of the interleaved input, no column
    matrix) for 1-d and 2-d convolutions on VNNI CPUs where every weight minus its zero
    point (``shifted``) fits int8; else "pairs" (int16 taps of a column matrix)."""
    flat = int(geo[D]) == 1 and int(geo[KD]) == 1
    return "direct" if flat and micro_int.vnni() and micro_int.fits_int8(shifted) else "pairs"


def rows_per_block(rows: int, ow: int, column_bytes: int) -> int:
    """Output rows a block: the fewest tile columns in all (each block's positions are
    rounded up to NR columns: a 7 x 7 plane in blocks of two rows computed 128 columns for
    49 positions, in blocks of four 64), then the most blocks (threads share them), among
    the blocks whose taps (``column_bytes`` a column) take at most 4 BLOCK_BYTES (one row
    at least) that leave two blocks or more an image where the rows allow."""
    best, fewest = 1, None
    for pb in range(1, rows + 1):
        ld = -(-pb * ow // NR) * NR
        if pb > 1 and (column_bytes * ld > 4 * BLOCK_BYTES or -(-rows // pb) < 2):
            break
        full, rest = divmod(rows, pb)
        columns = full * ld + -(-rest * ow // NR) * NR
        if fewest is None or columns < fewest:
            best, fewest = pb, columns
    return best


def direct_block(positions: int, column_bytes: int) -> int:
    """The direct path's positions a block (a multiple of NR): the fewest blocks whose taps
    (``column_bytes`` a column) take at most 4 BLOCK_BYTES, two at least (threads share
    them) where there are two tiles of columns, their tiles dealt evenly."""
    tiles = max(1, -(-positions // NR))
    blocks = max(min(2, tiles), -(-tiles * NR * column_bytes // (4 * BLOCK_BYTES)))
    return -(-tiles // blocks) * NR


def _tile_plan(conv_plan, packed, k, groups, form) -> _Tiles:
    """Blocks of rows_per_block whole output rows."""
    t = _Tiles()
    g = t.geo = conv_plan.geo
    t.images, t.c, t.m = conv_plan.n, conv_plan.c, conv_plan.m
    t.in_size, t.p, t.groups, t.k = conv_plan.in_size, conv_plan.out_size, groups, k
    (t.a, t.sums), t.form = packed, form
    t.mg, cg = t.m // groups, t.c // groups
    t.mr = micro_int.ROWS[tile_form(form)]
    t.mp = -(-t.mg // t.mr) * t.mr
    ow_ = int(g[OW])
    rows = t.p // max(1, ow_)
    t.hp = t.wp = t.planes = t.plane = 0
    if form == "direct":
        # positions oh * wp + ow over the planes' columns (wp - OW of every wp computed and
        # dropped); quad q = (c // 4, kernel position (kh, kw)) reads the words of plane
        # (c // 4, kh * DH % SH, kw * DW % SW) from row kh * DH // SH, column kw * DW // SW
        # on (see _plane)
        sh_, sw_, dh, dw = int(g[SH]), int(g[SW]), int(g[DH]), int(g[DW])
        t.hp = int(g[OH]) + (int(g[KH] - 1) * dh) // sh_
        t.wp = int(g[OW]) + (int(g[KW] - 1) * dw) // sw_
        t.planes = -(-cg // 4) * sh_ * sw_
        kh, kw = np.divmod(np.arange(int(g[KH] * g[KW])), int(g[KW]))
        phase = (kh * dh % sh_) * sw_ + kw * dw % sw_
        at = phase * (t.hp * t.wp) + (kh * dh // sh_) * t.wp + kw * dw // sw_
        t.taps = (np.arange(-(-cg // 4)).reshape(-1, 1) * (sh_ * sw_ * t.hp * t.wp)
                  + at).reshape(-1, 1)
        t.kp = 4 * t.taps.shape[0]
        words = t.kp // 4                                   # int32 words of taps a column
        t.pb = t.ld = direct_block((rows - 1) * t.wp + ow_, 4 * words)
        t.plane = t.planes * t.hp * t.wp + t.ld + NR
    else:
        t.kp = k + (k & 1)
        t.taps = tap_table(g, k, t.kp)
        words = t.kp // 2
        t.pb = rows_per_block(rows, ow_, 4 * words)         # output rows a block
        t.ld = -(-t.pb * ow_ // NR) * NR
    t.parallel = t.mg * t.p * k >= PARALLEL_WORK
    t.work = words * t.ld + t.mp * t.ld
    return t


def held_buffers(ctx: RunContext):
    """tile_calls' scratch kept by the run state."""
    return lambda dt, shape, use: held_buffer(dt, shape, ctx.held, use)


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
        w = ctx.value(self.W)
        wzp = ctx.value(self.WZP) if ctx.has_input(self.WZP) else np.zeros(1, I32)
        tiles = w is not None and wzp is not None and micro_int.AVAILABLE and \
            math.prod(ws[1:]) <= micro_int.MAX_K and m_out // self.conv.group >= MIN_CHANNELS
        # (the float plan only gives the geometry on the tile path)
        wd = F32 if tiles or bound < (1 << 24) else F64
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
            shifted = shifted_weights(w, wzp)
            form = taps_form(conv_plan.geo, shifted)
            cached = self._packed = (w, wzp, _pack_weights(shifted, w.shape[1], groups, form),
                                     form)
        return _tile_plan(conv_plan, cached[2], w[0].size, groups, cached[3])

    def _tile_product(self, ctx: RunContext, t: _Tiles, out, requant=None):
        """out (NCHW) = the integer-tile convolution (+ the int32 bias, if any): int32, or
        requantized with ``requant`` = Requantized.requant_args' values."""
        make_calls(self.tile_calls(ctx, t, out, lambda dt, shape, use: scratch(ctx, dt, shape),
                                   requant))

    def jit_calls(self, ctx: RunContext):
        """The integer-tile path's calls (one per image and group), their scratch the run
        state's; None on the float path."""
        t = ctx.prepared
        if not isinstance(t, _Tiles):
            return None
        return self.tile_calls(ctx, t, ctx.flat_out[0], held_buffers(ctx))

    def tile_calls(self, ctx: RunContext, t: _Tiles, out, buffer, requant=None) -> list:
        """_tile_product's calls, their scratch from ``buffer(dtype, shape, use)``."""
        flat = ctx.flat_in
        x = flat[self.X]
        xzp = flat[self.XZP] if len(flat) > self.XZP and flat[self.XZP] is not None else \
            np.zeros(1, x.dtype)
        bias = flat[self.BIAS] if self.BIAS is not None and len(flat) > self.BIAS and \
            flat[self.BIAS] is not None else np.zeros(0, I32)
        fn = BLOCKS[requant is not None, t.form].get(False, t.parallel)
        mult, off, yzp, lo, hi = _NO_REQUANT if requant is None else requant
        addr = micro_int.address(tile_form(t.form))
        shift = 128 if x.dtype == np.int8 else 0
        cg = t.c // t.groups
        rows = t.p // int(t.geo[OW])
        blocks = -(-((rows - 1) * t.wp + int(t.geo[OW])) // t.pb) if t.form == "direct" else \
            -(-rows // t.pb)
        work = buffer(I32, (numba.config.NUMBA_NUM_THREADS, t.work), "conv integer")
        plane = _NO_PLANE
        if t.form == "direct":
            plane = buffer(I32, (t.plane,), "conv integer plane")
            make_plane = PLANE.get(False, t.parallel)
        calls = []
        for n in range(t.images):
            for gi in range(t.groups):
                x0 = (n * t.c + gi * cg) * t.in_size
                if t.form == "direct":
                    calls.append((make_plane, (x, x0, shift, xzp, t.geo, cg, t.hp, t.wp, plane,
                                               t.planes)))
                calls.append((fn, (addr, x, xzp, shift, t.geo, t.taps, x0, t.kp, t.p, t.pb,
                                   t.ld, t.a[gi], t.sums[gi], t.mr, t.mp, t.mg, bias, gi * t.mg,
                                   out, (n * t.m + gi * t.mg) * t.p, mult, off, yzp, lo, hi,
                                   plane, t.wp, work, blocks)))
        return calls

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
                                 prepared, ctx.exact, ctx.arena, ctx.cancel, ctx.held))
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
        fixed_zp = not ctx.has_input(self.Y_ZP) or ctx.value(self.Y_ZP) is not None
        ctx.prepared = (plan, mult, math.prod(shape[2:]), shape[1], fixed_zp)

    def jit_calls(self, ctx: RunContext):
        """The integer-tile path's calls with the requantization in their epilogue, where
        the scales and the output's zero point are constants (the requantization's values
        made once); None otherwise."""
        plan, mult, _inner, _channels, fixed_zp = ctx.prepared
        if not isinstance(plan, _Tiles) or mult is None or not fixed_zp:
            return None
        return self.tile_calls(ctx, plan, ctx.flat_out[0], held_buffers(ctx),
                               self.requant_args(ctx, mult))

    def run(self, ctx: RunContext) -> None:
        plan, mult, inner, channels, _fixed_zp = ctx.prepared
        if isinstance(plan, _Tiles):
            self._tile_product(ctx, plan, ctx.flat_out[0], self.requant_args(ctx, mult))
            return
        self.requantize(ctx, self.convolve(ctx, plan), mult, inner, channels)


def shifted_weights(w, zp) -> np.ndarray:
    """Rows of each output channel's weights minus its (or the one) zero point, int16
    (|w - z| <= 255: one temporary of the weights' size)."""
    return np.subtract(w.reshape(w.shape[0], -1), np.asarray(zp, np.int16).reshape(-1, 1),
                       dtype=np.int16)


def _weight_sum_bound(ctx, w, zp) -> int:
    """The largest sum over one output channel's window of |w - zero point|: from the values
    where the weights and zero points are constant, else window size * the type's bound."""
    ws = tuple(ctx.shape(w))
    v = ctx.value(w)
    z = ctx.value(zp) if ctx.has_input(zp) else np.zeros(1, np.int64)
    if v is None or z is None or v.size == 0:
        return math.prod(ws[1:]) * shift_bound(ctx, w, zp)
    shifted_w = shifted_weights(v, z)
    np.abs(shifted_w, out=shifted_w)
    return int(shifted_w.sum(axis=1, dtype=np.int64).max())
