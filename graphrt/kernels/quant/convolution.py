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
from ..nn.window import D, DD, DH, DW, H, KD, KH, KW, OD, OH, OW, PD, PH, PW, SD, SH, SW, W, tap_of
from .quantize import (I32, Requantized, requantized, shift_bound, shifted,
                       zero_point_check)

MIN_CHANNELS = 16       # output channels a group needs for the integer tiles (MR-row tiles)
BLOCK_BYTES = 1 << 17   # a block's pairs stay in the core's cache
MR, NR = micro_int.MR, micro_int.NR


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


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")
def _quads(x, shift, pad, g, taps, x0, kq, r0, r1, ld, out):
    """out[q * ld + j] = the int32 word of micro_int's unsigned quad of taps 4q ... 4q + 3
    (``tap_table``) at output position r0 * OW + j, for the output rows r0 <= r < r1: byte t
    x + shift at tap 4q + t, ``pad`` in the padding (x's zero point + shift); columns
    (r1 - r0) * OW <= j < ld are 0. x's channels of one image and group start at x[x0]."""
    oh_, ow_ = g[OH], g[OW]
    sw = g[SW]
    n = (r1 - r0) * ow_
    for q in range(kq // 4):
        base = q * ld
        t0 = (taps[4 * q, 0], taps[4 * q, 1], taps[4 * q, 2], taps[4 * q, 3], taps[4 * q, 4],
              taps[4 * q, 5])
        t1 = (taps[4 * q + 1, 0], taps[4 * q + 1, 1], taps[4 * q + 1, 2], taps[4 * q + 1, 3],
              taps[4 * q + 1, 4], taps[4 * q + 1, 5])
        t2 = (taps[4 * q + 2, 0], taps[4 * q + 2, 1], taps[4 * q + 2, 2], taps[4 * q + 2, 3],
              taps[4 * q + 2, 4], taps[4 * q + 2, 5])
        t3 = (taps[4 * q + 3, 0], taps[4 * q + 3, 1], taps[4 * q + 3, 2], taps[4 * q + 3, 3],
              taps[4 * q + 3, 4], taps[4 * q + 3, 5])
        od, oh = r0 // oh_, r0 % oh_
        for r in range(r0, r1):
            s0, a0, b0 = _row_start(g, x0, t0, od, oh)
            s1, a1, b1 = _row_start(g, x0, t1, od, oh)
            s2, a2, b2 = _row_start(g, x0, t2, od, oh)
            s3, a3, b3 = _row_start(g, x0, t3, od, oh)
            oh += 1
            if oh == oh_:
                od, oh = od + 1, 0
            o = base + (r - r0) * ow_
            lo, hi = max(max(a0, a1), max(a2, a3)), min(min(b0, b1), min(b2, b3))
            if lo >= hi:
                lo, hi = 0, 0
            for i in range(lo):
                out[o + i] = _quad_at(x, shift, pad, sw, i, s0, a0, b0, s1, a1, b1, s2, a2, b2,
                                      s3, a3, b3)
            # unsigned indices: numba's wraparound of negative ones would keep it scalar
            u0, u1, u2, u3 = np.uint64(s0), np.uint64(s1), np.uint64(s2), np.uint64(s3)
            uo, us = np.uint64(o), np.uint64(sw)
            for i in range(np.uint64(lo), np.uint64(hi)):
                out[uo + i] = ((np.int32(x[u0 + i * us]) + shift)
                               | ((np.int32(x[u1 + i * us]) + shift) << 8)
                               | ((np.int32(x[u2 + i * us]) + shift) << 16)
                               | ((np.int32(x[u3 + i * us]) + shift) << 24))
            for i in range(max(lo, hi), ow_):
                out[o + i] = _quad_at(x, shift, pad, sw, i, s0, a0, b0, s1, a1, b1, s2, a2, b2,
                                      s3, a3, b3)
        for j in range(n, ld):
            out[base + j] = 0


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _quad_at(x, shift, pad, sw, i, s0, a0, b0, s1, a1, b1, s2, a2, b2, s3, a3, b3):
    """_quads' word at column i where some of its taps may be padding."""
    v0 = np.int32(x[s0 + i * sw]) + shift if a0 <= i < b0 else pad
    v1 = np.int32(x[s1 + i * sw]) + shift if a1 <= i < b1 else pad
    v2 = np.int32(x[s2 + i * sw]) + shift if a2 <= i < b2 else pad
    v3 = np.int32(x[s3 + i * sw]) + shift if a3 <= i < b3 else pad
    return v0 | (v1 << 8) | (v2 << 16) | (v3 << 24)


def _blocks(addr, x, zp, shift, g, taps, x0, kp, p_, pb, ldmax, a, sums, mp, mg, bias, m0,
            out, o0, mult, off, yzp, lo, hi, work, blocks):
    """One image and group of the convolution: the ``blocks`` blocks of pb output rows (at
    most ldmax positions, rounded up to NR) in parallel;
    each builds its words of taps (``_pairs``, or ``_quads`` with QUADS; cache-resident),
    runs micro_int's tiles over every output channel of the group, and writes
    out[o0 + i * p_ + j] = acc + bias[m0 + i] (int32), or with REQUANT that requantized
    (quantize.requantized: mult, off per channel m0 + i or one value, yzp one value, clamped
    to [lo, hi]). With QUADS, acc is taken from the unsigned taps (x + shift) and corrected
    by (x's zero point + shift) * sums[i] (row i's sum of a)."""
    z, sh = np.int32(zp[0]), np.int32(shift)
    pad = z + sh
    has_b = bias.size > 0
    nm, no = mult.size > 1, off.size > 1
    has_off = off.size > 0
    tm = mp // MR
    rows = p_ // g[OW]
    step = 4 if QUADS else 2
    for blk in prange(blocks):
        r0 = blk * pb
        r1 = min(rows, r0 + pb)
        j0, j1 = r0 * g[OW], r1 * g[OW]
        ld = (j1 - j0 + NR - 1) // NR * NR
        row = work[numba.get_thread_id()]
        cb = kp // step * ldmax             # where C starts in the row (after B)
        if QUADS:
            _quads(x, sh, pad, g, taps, x0, kp, r0, r1, ld, row)
            taps8 = row.view(np.uint8)
            for t in range(tm * (ld // NR)):
                i0, jj = (t % tm) * MR, (t // tm) * NR
                micro_int.tile(addr, a, i0 * kp, kp, taps8, 4 * jj, 4 * ld, row,
                               cb + i0 * ld + jj, ld, kp // 4)
        else:
            _pairs(x, z, g, taps, x0, kp, r0, r1, ld, row)
            taps16 = row.view(np.int16)
            for t in range(tm * (ld // NR)):
                i0, jj = (t % tm) * MR, (t // tm) * NR
                micro_int.tile(addr, a, i0 * kp, kp, taps16, 2 * jj, 2 * ld, row,
                               cb + i0 * ld + jj, ld, kp // 2)
        for i in range(mg):
            bv = bias[m0 + i] if has_b else np.int32(0)
            if QUADS:
                bv -= pad * sums[i]
            # unsigned indices, as in _pairs
            dst, src = np.uint64(o0 + i * p_ + j0), np.uint64(cb + i * ld)
            if REQUANT:
                m = mult[m0 + i if nm else 0]
                tv = np.float64(yzp[0])
                if has_off:
                    tv = off[m0 + i if no else 0] + tv
                for j in range(np.uint64(j1 - j0)):
                    out[dst + j] = requantized(row[src + j] + bv, m, tv, lo, hi)
            else:
                for j in range(np.uint64(j1 - j0)):
                    out[dst + j] = row[src + j] + bv


REQUANT = QUADS = False
_NO_REQUANT = (np.zeros(1), np.zeros(0), np.zeros(1, np.int32), 0, 0)
# (requantized, quads): the compiled forms
BLOCKS = {(r, q): Variants(_blocks, "conv_integer_blocks" + "_requant" * r + "_quads" * q,
                           parallel=True, REQUANT=r, QUADS=q)
          for r in (False, True) for q in (False, True)}


class _Tiles:
    """The integer-tile plan: packed weights per group and the blocks' extents."""

    __slots__ = ("a", "sums", "quads", "images", "groups", "c", "m", "mg", "k", "kp", "mp",
                 "p", "pb", "ld", "in_size", "geo", "taps", "parallel", "work")


def _pack_weights(w, wzp, groups, quads: bool) -> tuple[list, list]:
    """Each group's weights minus their zero points as micro_int's A, MR-row tiles (zeros
    pad): int16 rows of K rounded up to even, or with ``quads`` int8 rows of K rounded up
    to 4; and with quads each group's row sums (int32), else empty arrays."""
    m, k = w.shape[0], w[0].size
    mg = m // groups
    mp = -(-mg // MR) * MR
    kp = -(-k // 4) * 4 if quads else k + (k & 1)
    rows = w.reshape(m, k)
    z = np.broadcast_to(np.asarray(wzp, np.int16).reshape(-1, 1), (m, 1))
    out, sums = [], []
    for gi in range(groups):
        a = np.zeros((mp, kp), np.int16)
        part = slice(gi * mg, (gi + 1) * mg)
        np.subtract(rows[part], z[part], out=a[:mg, :k], dtype=np.int16)
        out.append(aligned_copy(a.astype(np.int8) if quads else a).reshape(-1))
        sums.append(a.sum(axis=1, dtype=np.int32) if quads else np.zeros(0, np.int32))
    return out, sums


def fits_int8(w, wzp) -> bool:
    """Whether every weight minus its zero point fits int8 (the byte tiles' signed
    operand)."""
    shifted = np.subtract(w.reshape(w.shape[0], -1), np.asarray(wzp, np.int16).reshape(-1, 1),
                          dtype=np.int16)
    return shifted.size == 0 or (int(shifted.min()) >= -128 and int(shifted.max()) <= 127)


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


def _tile_plan(conv_plan, packed, k, groups, quads) -> _Tiles:
    """Blocks of rows_per_block whole output rows."""
    t = _Tiles()
    t.geo, t.images, t.c, t.m = conv_plan.geo, conv_plan.n, conv_plan.c, conv_plan.m
    t.in_size, t.p, t.groups, t.k = conv_plan.in_size, conv_plan.out_size, groups, k
    (t.a, t.sums), t.quads = packed, quads
    t.mg = t.m // groups
    t.kp = -(-k // 4) * 4 if quads else k + (k & 1)
    t.mp = -(-t.mg // MR) * MR
    t.taps = tap_table(t.geo, k, t.kp)
    ow_ = int(t.geo[OW])
    rows = t.p // max(1, ow_)
    words = t.kp // (4 if quads else 2)                     # int32 words of taps a column
    t.pb = rows_per_block(rows, ow_, 4 * words)             # output rows a block
    t.ld = -(-t.pb * ow_ // NR) * NR
    t.parallel = t.mg * t.p * k >= PARALLEL_WORK
    t.work = words * t.ld + t.mp * t.ld
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
            quads = micro_int.vnni() and fits_int8(w, wzp)
            cached = self._packed = (w, wzp, _pack_weights(w, wzp, groups, quads), quads)
        return _tile_plan(conv_plan, cached[2], w[0].size, groups, cached[3])

    def _tile_product(self, ctx: RunContext, t: _Tiles, out, requant=None):
        """out (NCHW) = the integer-tile convolution (+ the int32 bias, if any): int32, or
        requantized with ``requant`` = Requantized.requant_args' values."""
        work = scratch(ctx, I32, (numba.config.NUMBA_NUM_THREADS, t.work))
        make_calls(self.tile_calls(ctx, t, out, work, requant))

    def jit_calls(self, ctx: RunContext):
        """The integer-tile path's calls (one per image and group), their scratch the run
        state's; None on the float path."""
        t = ctx.prepared
        if not isinstance(t, _Tiles):
            return None
        work = held_buffer(I32, (numba.config.NUMBA_NUM_THREADS, t.work), ctx.held,
                           "conv integer")
        return self.tile_calls(ctx, t, ctx.flat_out[0], work)

    def tile_calls(self, ctx: RunContext, t: _Tiles, out, work, requant=None) -> list:
        """_tile_product's calls, with ``work`` its per-thread scratch."""
        flat = ctx.flat_in
        x = flat[self.X]
        xzp = flat[self.XZP] if len(flat) > self.XZP and flat[self.XZP] is not None else \
            np.zeros(1, x.dtype)
        bias = flat[self.BIAS] if self.BIAS is not None and len(flat) > self.BIAS and \
            flat[self.BIAS] is not None else np.zeros(0, I32)
        fn = BLOCKS[requant is not None, t.quads].get(False, t.parallel)
        mult, off, yzp, lo, hi = _NO_REQUANT if requant is None else requant
        addr = micro_int.address(micro_int.SIGNED_ROWS if t.quads else micro_int.PAIRS)
        shift = 128 if x.dtype == np.int8 else 0
        cg = t.c // t.groups
        blocks = -(-(t.p // int(t.geo[OW])) // t.pb)
        return [(fn, (addr, x, xzp, shift, t.geo, t.taps, (n * t.c + gi * cg) * t.in_size,
                      t.kp, t.p, t.pb, t.ld, t.a[gi], t.sums[gi], t.mp, t.mg, bias, gi * t.mg,
                      out, (n * t.m + gi * t.mg) * t.p, mult, off, yzp, lo, hi, work, blocks))
                for n in range(t.images) for gi in range(t.groups)]

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
        work = held_buffer(I32, (numba.config.NUMBA_NUM_THREADS, plan.work), ctx.held,
                           "conv integer")
        return self.tile_calls(ctx, plan, ctx.flat_out[0], work, self.requant_args(ctx, mult))

    def run(self, ctx: RunContext) -> None:
        plan, mult, inner, channels, _fixed_zp = ctx.prepared
        if isinstance(plan, _Tiles):
            self._tile_product(ctx, plan, ctx.flat_out[0], self.requant_args(ctx, mult))
            return
        self.requantize(ctx, self.convolve(ctx, plan), mult, inner, channels)


def _weight_sum_bound(ctx, w, zp) -> int:
    """The largest sum over one output channel's window of |w - zero point|: from the values
    where the weights and zero points are constant, else window size * the type's bound."""
    ws = tuple(ctx.shape(w))
    v = ctx.value(w)
    z = ctx.value(zp) if ctx.has_input(zp) else np.zeros(1, np.int64)
    if v is None or z is None or v.size == 0:
        return math.prod(ws[1:]) * shift_bound(ctx, w, zp)
    # |w - z| <= 255 fits int16: one temporary of the weights' size, summed in int64
    shifted_w = np.subtract(v.reshape(ws[0], -1), np.asarray(z, np.int16).reshape(-1, 1),
                            dtype=np.int16)
    np.abs(shifted_w, out=shifted_w)
    return int(shifted_w.sum(axis=1, dtype=np.int64).max())
