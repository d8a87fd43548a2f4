"""Conv: N-d convolution (1, 2 or 3 spatial axes) as im2col plus the shared GEMM kernel.

    y[n, m, o] = sum_{c, k} w[m, c, k] * xpad[n, g * C/G + c, o * s - pb + k * d] (+ b[m])

with g = m // (M/G) the group of output channel m, k the kernel positions, s the strides, d the
dilations, pb the leading pads, and xpad zero outside the input. Each image is unfolded into a
column matrix col[(c, k), o] (arena scratch, a few images at a time) and multiplied by the
weights with matmul's kernel: for every output element acc = 0, then for c ascending and,
inside, the kernel positions in row-major order ascending, acc = acc + w * col (padding taps
included, as products with 0); the bias is added last. That order is the same in both
variants; the exact variant has no FMA and writes NaN results as the canonical NaN. Work is
split over images, groups and blocks of output channels, never over the sum, so the bits do
not depend on the thread count. float16 is computed in float32 and rounded once at the end.

The window geometry and the stride-phase layout (window.py) are shared with the pooling,
ConvTranspose and DeformConv kernels; the products go through gemm/product.py.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from ...threads import ensure_layer
from ..core.base import Calls, InferContext, OpKernel, RunContext, make_calls, scratch
from ..core.broadcast import PARALLEL_MIN, put
from ..core.floats import (compute_dtype, narrow, result_buffer, wide_calls, wide_constants,
                           widen_input)
from ..core.held import shared_buffer
from ..core.jit import Variants
from ..core.pointwise import scale_shift_relu
from ..core.runs import copy_run, zero_run
from ..gemm import microkernel
from ..gemm.product import PARALLEL_WORK, ConstantB, Product
from . import depthwise_rows
from .normalization import channel_affine
from .window import (C, D, DD, DH, DW, H, KD, KH, KW, OD, OH, OW, PD, PH, PW, SD, SH, SW, W,
                     Window, ceil_div, check_float, check_rank, geometry, layout_of, phase_layout,
                     phase_rows, phase_work, split_phases, tap_of, taps_of)

EXACT = False
BIAS = True
RELU = False
AFFINE = False
NINE = False        # the depthwise kernel's path for 3 x 3 windows (bound per family)

COL_BYTES = 1 << 25         # im2col scratch per chunk of images (at least one image)


# ----------------------------------------------------------------------------- kernels

def _add_bias(y, src, b, planes, m, p, sc, ow_, wq, sp):
    """y[plane, :] = src's plane + b[plane % m] (BIAS), or src * sc[c] + b[c] (AFFINE, fast
    mode: folded scale-and-shift stages), then Relu (RELU: a FusedEpilogue's Relu stage
    absorbed, the same scalar function as Relu's kernel), or a copy (none of them); exact
    variant: NaN canonical. src's planes are sp apart and hold the p elements of y's plane
    as rows of ow_ on a grid wq wide (an implicit-GEMM product's output grid), or src is y
    itself (sp = 0), updated in place: one array, so that the loop vectorises."""
    for t in prange(planes):
        bv = b[t % m]       # (b and sc are y itself where there is no bias or scale)
        sv = sc[t % m]
        inplace = sp == 0
        for r in range(1 if inplace else p // ow_):
            out = y[t * p:(t + 1) * p] if inplace else y[t * p + r * ow_:t * p + (r + 1) * ow_]
            if inplace:
                row = out
            else:
                row = src[t * sp + r * wq:t * sp + r * wq + ow_]
            for j in range(out.size):
                put(out, j, scale_shift_relu(row[j], sv, bv, AFFINE, BIAS, RELU), EXACT)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")
def _im2col_block(x, col, g, rows, p0, p1, xo):
    """col[r * (p1 - p0) + p - p0] = _im2col's col[r, p] for output positions p0 <= p < p1
    of the image whose channel 0 starts at x[xo] (one task's block, sequential)."""
    d_, h_, w_ = g[D], g[H], g[W]
    oh_, ow_ = g[OH], g[OW]
    kd_, kh_, kw_ = g[KD], g[KH], g[KW]
    sw = g[SW]
    pb = p1 - p0
    for r in range(rows):
        c, kd, kh, kw = tap_of(r, kd_, kh_, kw_)
        xc = xo + c * d_ * h_ * w_
        w0 = kw * g[DW] - g[PW]
        lo = min(ow_, max(0, -(w0 // sw)))
        hi = min(ow_, max(lo, (w_ - 1 - w0) // sw + 1))
        p = p0
        while p < p1:
            ow = p % ow_
            t = p // ow_
            oh = t % oh_
            od = t // oh_
            end = min(p1, p + ow_ - ow)
            o = r * pb + p - p0 - ow        # col index of this output row's ow = 0
            di = od * g[SD] - g[PD] + kd * g[DD]
            hi_ = oh * g[SH] - g[PH] + kh * g[DH]
            if di < 0 or di >= d_ or hi_ < 0 or hi_ >= h_:
                zero_run(col, o + ow, end - p)
            else:
                src = xc + (di * h_ + hi_) * w_ + w0
                a = min(max(lo, ow), ow + end - p)
                b = min(max(hi, a), ow + end - p)
                zero_run(col, o + ow, a - ow)
                copy_run(col, o + a, x, src + a * sw, b - a, sw)
                zero_run(col, o + b, ow + end - p - b)
            p = end


def _conv_tiles(x, w, y, g, images, groups, mg, kk, pb, mb, tasks, cols, work, kt):
    """Fast-mode Conv without a whole-image column matrix: task t takes an image, a group,
    a block of pb output positions and a block of mb output channels, unfolds just that
    block (it stays in cache) and multiplies it by the weights with the micro-kernel (every
    output element one FMA chain over (c, k) ascending). The blocks depend on the shapes
    only, so the bits do not depend on the thread count."""
    p_ = g[OD] * g[OH] * g[OW]
    in_size = g[D] * g[H] * g[W]
    cg = g[C] // groups
    nblk = (p_ + pb - 1) // pb
    mblk = (mg + mb - 1) // mb
    per_image = groups * nblk * mblk
    zero = np.int64(0)
    one = np.int64(1)
    for t in prange(tasks):
        img = t // per_image
        r = t - img * per_image
        gi = r // (nblk * mblk)
        r = r - gi * (nblk * mblk)
        blk = r // mblk
        m0 = (r - blk * mblk) * mb
        rows = min(mg, m0 + mb) - m0
        p0 = blk * pb
        p1 = min(p_, p0 + pb)
        slot = numba.get_thread_id()
        col = cols[slot, :kk * (p1 - p0)]
        _im2col_block(x, col, g, kk, p0, p1, (img * g[C] + gi * cg) * in_size)
        microkernel.call_tile(kt, (w, (gi * mg + m0) * kk, kk, one, col, zero, p1 - p0, one, y,
                                   (img * groups * mg + gi * mg + m0) * p_ + p0, p_, rows,
                                   p1 - p0, kk, work[slot], False, microkernel.NO_TABLE, False,
                                   y, zero, zero, zero, kt))


def _depthwise(x, w, y, g, planes, mg, kk, rows, taps, work):
    """Conv with one input channel per group (depthwise, any multiplier mg): plane t =
    (image, output channel m) reads input channel m // mg. Each output element is the
    micro-kernel's chain over the kernel taps in row-major order (fast: one FMA a step;
    exact: a rounded multiply then a rounded add, NaN canonical: the exact GEMM path's bits),
    padding taps included as products with 0 (so an infinite weight still gives NaN there,
    as in the GEMM path). The plane is split by stride phase into a zero-bordered buffer (split_phases), so every
    tap is one unit-stride pass over the whole output plane (output (oh, ow) at oh * wq + ow;
    the columns past ow_ are dropped), with unsigned indices (see runs.py): passes that
    vectorise. ``taps``: where each tap starts (window.taps_of, made with the plan: compiled
    here, phase_taps cost 0.4 s); ``work``: per-thread scratch rows of phase_work elements.
    NINE (bound per family, chosen when the plan is made): windows of nine taps in one pass,
    else five taps a pass and then one; each element's chain is the same either way."""
    od_, oh_, ow_ = g[OD], g[OH], g[OW]
    dp, hq, wq, nph, n = phase_layout(g)
    size = dp * nph * hq * wq
    m_all = g[C] * mg
    p_ = od_ * oh_ * ow_
    for t in prange(planes):
        tt = np.int64(t)
        img = tt // m_all
        m = tt - img * m_all
        wo = m * kk
        row = work[numba.get_thread_id()]
        xp = row[:size]
        acc = row[size:size + n]
        split_phases(xp, x, (img * g[C] + m // mg) * g[D] * g[H] * g[W], rows, size, 0)
        for od in range(od_):
            zero_run(acc, 0, n)
            d0 = od * g[SD] * nph * hq * wq
            if NINE:
                # 3 x 3 windows: the nine steps of an element in registers, one pass
                z = acc[0]
                w0, w1, w2, w3, w4 = w[wo], w[wo + 1], w[wo + 2], w[wo + 3], w[wo + 4]
                w5, w6, w7, w8 = w[wo + 5], w[wo + 6], w[wo + 7], w[wo + 8]
                t0, t1, t2 = np.uint64(d0 + taps[0]), np.uint64(d0 + taps[1]), \
                    np.uint64(d0 + taps[2])
                t3, t4, t5 = np.uint64(d0 + taps[3]), np.uint64(d0 + taps[4]), \
                    np.uint64(d0 + taps[5])
                t6, t7, t8 = np.uint64(d0 + taps[6]), np.uint64(d0 + taps[7]), \
                    np.uint64(d0 + taps[8])
                for q in range(np.uint64(n)):
                    v = microkernel.step(EXACT, w0, xp[t0 + q], z)
                    v = microkernel.step(EXACT, w1, xp[t1 + q], v)
                    v = microkernel.step(EXACT, w2, xp[t2 + q], v)
                    v = microkernel.step(EXACT, w3, xp[t3 + q], v)
                    v = microkernel.step(EXACT, w4, xp[t4 + q], v)
                    v = microkernel.step(EXACT, w5, xp[t5 + q], v)
                    v = microkernel.step(EXACT, w6, xp[t6 + q], v)
                    v = microkernel.step(EXACT, w7, xp[t7 + q], v)
                    acc[q] = microkernel.step(EXACT, w8, xp[t8 + q], v)
            else:
                # five taps a pass (an element's chain advanced five steps per load and
                # store of acc): a pass per tap cost more in loop overhead than in FMAs on
                # small planes (576 planes of 7 x 7 with 5 x 5 taps)
                k = 0
                while k + 5 <= kk:
                    wa, wb, wc, wd, we = w[wo + k], w[wo + k + 1], w[wo + k + 2], \
                        w[wo + k + 3], w[wo + k + 4]
                    sa, sb = np.uint64(d0 + taps[k]), np.uint64(d0 + taps[k + 1])
                    sc, sd = np.uint64(d0 + taps[k + 2]), np.uint64(d0 + taps[k + 3])
                    se = np.uint64(d0 + taps[k + 4])
                    for q in range(np.uint64(n)):
                        v = microkernel.step(EXACT, wa, xp[sa + q], acc[q])
                        v = microkernel.step(EXACT, wb, xp[sb + q], v)
                        v = microkernel.step(EXACT, wc, xp[sc + q], v)
                        v = microkernel.step(EXACT, wd, xp[sd + q], v)
                        acc[q] = microkernel.step(EXACT, we, xp[se + q], v)
                    k += 5
                while k < kk:
                    wv = w[wo + k]
                    s0 = np.uint64(d0 + taps[k])
                    for q in range(np.uint64(n)):
                        acc[q] = microkernel.step(EXACT, wv, xp[s0 + q], acc[q])
                    k += 1
            if EXACT:           # NaN canonical, as the exact product writes it
                for q in range(np.uint64(n)):
                    v = acc[q]
                    acc[q] = v if v == v else np.nan
            for oh in range(oh_):
                copy_run(y, tt * p_ + (od * oh_ + oh) * ow_, acc, oh * wq, ow_, 1)


@intrinsic
def _window_lanes(typingctx, ob, o, wb, xb, xs, step, taps, exact, count):
    """The window sums of V channels at once (V = one vector register of the element type)
    at ``count`` output positions j < count (a literal), their inputs ``step`` elements
    apart: ob[o + jV:][:V] = from 0, for each tap k in order, acc_j + wb[kV:(k + 1)V] *
    xb[xs + j step + taps[k]:][:V] (exact: a rounded multiply, then a rounded add; else one
    FMA), each lane its channel's chain, the accumulators in registers (the positions'
    chains interleaved: one chain waits on its FMA's latency). numba does not vectorise
    straight-line code across lanes (its SLP pass is off), so this is written as vector IR."""
    if not (ob.dtype == wb.dtype == xb.dtype and isinstance(exact, types.BooleanLiteral)
            and isinstance(count, types.IntegerLiteral)):
        return None
    sig = types.none(ob, types.uint64, wb, xb, types.uint64, types.uint64, taps, exact, count)

    def codegen(context, builder, sig, args):
        ob_a, o_, wb_a, xb_a, xs_, step_, taps_a = args[:7]
        ety = context.get_data_type(sig.args[0].dtype)
        lanes = max(1, microkernel.VBYTES // context.get_abi_sizeof(ety))
        vty = ir.VectorType(ety, lanes)
        i64 = ir.IntType(64)
        align = context.get_abi_sizeof(ety)
        n = sig.args[8].literal_value

        def data(i, arr):
            return context.make_array(sig.args[i])(context, builder, arr).data

        def vector_at(base, at):
            return builder.bitcast(builder.gep(base, [at]), vty.as_pointer())

        xd, wd, td = data(3, xb_a), data(2, wb_a), data(6, taps_a)
        kk = context.make_array(sig.args[6])(context, builder, taps_a).nitems
        fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vty, [vty, vty, vty]),
            f"llvm.fma.v{lanes}f{align * 8}")
        accs = [cgutils.alloca_once_value(builder, ir.Constant(vty, None)) for _ in range(n)]
        with cgutils.for_range(builder, kk) as loop:
            k = loop.index
            at = builder.add(xs_, builder.load(builder.gep(td, [k])))
            wv = builder.load(vector_at(wd, builder.mul(k, ir.Constant(i64, lanes))),
                              align=align)
            for j, acc in enumerate(accs):
                xv = builder.load(vector_at(xd, builder.add(
                    at, builder.mul(step_, ir.Constant(i64, j)))), align=align)
                a = builder.load(acc)
                if sig.args[7].literal_value:
                    v = builder.fadd(a, builder.fmul(wv, xv))
                else:
                    v = builder.call(fma, [wv, xv, a])
                builder.store(v, acc)
        od = data(0, ob_a)
        for j, acc in enumerate(accs):
            builder.store(builder.load(acc),
                          vector_at(od, builder.add(o_, ir.Constant(i64, j * lanes))),
                          align=align)
        return context.get_dummy_value()

    return sig, codegen


def _depthwise_lanes(x, w, y, g, mg, hp, wp, taps, work, tasks):
    """Depthwise Conv of small planes (2-d or 1-d), a vector register of output channels at
    a time (V of them: 16 float32 with AVX-512): task t = (image, block of V output channels
    m, each reading input channel m // mg) copies its planes interleaved into a
    zero-bordered buffer (padded row r, column c of plane l at (r * wp + c) * V + l; hp x wp
    covers every position a window reads) and its weights likewise, then makes each output
    position's V sums with _window_lanes. On planes of a few rows the plane kernel
    (_depthwise) spends its time per plane, in short copies and loops (576 planes of 7 x 7,
    5 x 5 windows: 77 us, of which 38 with a 1 x 1 window). Each output element's chain is
    the plane kernel's: from 0, the window's taps in row-major order (``taps``: their
    offsets in the buffer), padding taps as products with 0, one micro-kernel step each
    (exact: NaN canonical), so the bits are the same."""
    lanes = microkernel.VBYTES // x.itemsize
    h_, w_ = g[H], g[W]
    oh_, ow_ = g[OH], g[OW]
    kk = taps.size
    m_all = g[C] * mg
    nblk = (m_all + lanes - 1) // lanes
    p_ = oh_ * ow_
    plane = h_ * w_
    nx = hp * wp * lanes
    for t in prange(tasks):
        tt = np.int64(t)
        img = tt // nblk
        m0 = (tt - img * nblk) * lanes
        row = work[numba.get_thread_id()]
        xb = row[:nx]
        wb = row[nx:nx + kk * lanes]
        ob = row[nx + kk * lanes:nx + (kk + p_) * lanes]
        zero_run(xb, 0, nx)
        zero_run(wb, 0, kk * lanes)
        ul = np.uint64(lanes)
        for l in range(min(lanes, m_all - m0)):
            src = np.uint64((img * g[C] + (m0 + l) // mg) * plane)
            wo = np.uint64((m0 + l) * kk)
            for k in range(np.uint64(kk)):
                wb[k * ul + np.uint64(l)] = w[wo + k]
            for r in range(min(h_, hp - g[PH])):
                d = np.uint64(((r + g[PH]) * wp + g[PW]) * lanes + l)
                s0 = src + np.uint64(r * w_)
                for c in range(np.uint64(min(w_, wp - g[PW]))):
                    xb[d + c * ul] = x[s0 + c]
        step = np.uint64(g[SW] * lanes)
        for oh in range(oh_):
            ow = 0
            while ow < ow_:
                # the row's positions in one call where it has 7 or 8 (a 7 x 7 map: seven
                # chains in flight; as 4 + 2 + 1 the last calls waited on their FMAs'
                # latency), else four a call, then two, then one
                o = np.uint64((oh * ow_ + ow) * lanes)
                xs = np.uint64((oh * g[SH] * wp + ow * g[SW]) * lanes)
                if ow + 8 <= ow_:
                    _window_lanes(ob, o, wb, xb, xs, step, taps, EXACT, 8)
                    ow += 8
                elif ow + 7 == ow_:
                    _window_lanes(ob, o, wb, xb, xs, step, taps, EXACT, 7)
                    ow += 7
                elif ow + 4 <= ow_:
                    _window_lanes(ob, o, wb, xb, xs, step, taps, EXACT, 4)
                    ow += 4
                elif ow + 2 <= ow_:
                    _window_lanes(ob, o, wb, xb, xs, step, taps, EXACT, 2)
                    ow += 2
                else:
                    _window_lanes(ob, o, wb, xb, xs, step, taps, EXACT, 1)
                    ow += 1
        for l in range(min(lanes, m_all - m0)):
            yo = np.uint64((img * m_all + m0 + l) * p_)
            for q in range(np.uint64(p_)):
                v = ob[q * ul + np.uint64(l)]
                y[yo + q] = np.nan if EXACT and v != v else v


def lanes_plan(g, itemsize: int, images: int, m: int) -> tuple:
    """(tasks, hp, wp, the window's tap offsets, per-thread scratch elements) of
    _depthwise_lanes over ``images`` images of ``m`` output channels."""
    lanes = microkernel.VBYTES // itemsize
    hp = (g[OH] - 1) * g[SH] + (g[KH] - 1) * g[DH] + 1
    wp = (g[OW] - 1) * g[SW] + (g[KW] - 1) * g[DW] + 1
    taps = np.array([(kh * g[DH] * wp + kw * g[DW]) * lanes
                     for kh in range(g[KH]) for kw in range(g[KW])], dtype=np.uint64)
    return (images * ceil_div(m, lanes), int(hp), int(wp), taps,
            int((hp * wp + taps.size + g[OH] * g[OW]) * lanes))


def _split_planes(x, xp, g, planes, ps, rows):
    """xp[t * ps:(t + 1) * ps] = input plane t split by stride phase (split_phases)."""
    ip = g[D] * g[H] * g[W]
    for t in prange(planes):
        tt = np.int64(t)
        split_phases(xp[tt * ps:(tt + 1) * ps], x, tt * ip, rows, ps, 0)


def _im2col(xp, col, g, rows, ps, taps):
    """col[r, p] = the input element that kernel tap r = (image, channel, kd, kh, kw) reads
    at output position p = (od, oh, ow), or 0 in the padding, from the planes _split_planes
    made (ps elements each): there every output row of a tap is one contiguous run."""
    od_, oh_, ow_ = g[OD], g[OH], g[OW]
    dp, hq, wq, nph, n = phase_layout(g)
    kt = taps.size
    p_ = od_ * oh_ * ow_
    for r in prange(rows):
        rr = np.int64(r)
        c = rr // kt
        base = c * ps + taps[rr - c * kt]
        for od in range(od_):
            for oh in range(oh_):
                copy_run(col, rr * p_ + (od * oh_ + oh) * ow_, xp,
                         base + (od * g[SD] * nph * hq + oh) * wq, ow_, 1)


# by NINE: windows of nine taps or any other
DEPTHWISE = {nine: Variants(_depthwise, "conv_depthwise" + ("_3x3" if nine else ""),
                            parallel=True, MK=microkernel.SOURCE_TAG, COPY=copy_run,
                            ZERO=zero_run, SPLIT=split_phases, NINE=nine)
             for nine in (False, True)}
DEPTHWISE_LANES = Variants(_depthwise_lanes, "conv_depthwise_lanes", parallel=True,
                           MK=microkernel.SOURCE_TAG)
DEPTHWISE_ROWS = True       # False: depthwise convs take the GEMM path (tests compare the two)
BY_ROWS = True              # False: no depthwise conv takes depthwise_rows (tests compare)
# depthwise convs (2-d, 1-d) of at most this many output elements a plane take
# _depthwise_lanes (0: none do; tests compare the two): measured against the plane kernel
# (1 thread, 2 threads), 7 x 7 outputs took 0.56-0.8 of its time, 14 x 14 0.85-1.6 (the
# interleaving copies grow with the plane, the plane kernel's fixed cost does not)
LANES_PLANE = 64
IMPLICIT = True             # False: 2-d convs unfold a column matrix (tests compare the two)
GEMV = True                 # False: 1 x 1 outputs take the tiles too (tests compare the two)
STORE_EPILOGUE = True       # False: 1 x 1 windows' products leave the bias and Relu to the
                            # bias pass (tests compare the two)
CONV_TILES = Variants(_conv_tiles, "conv_tiles", parallel=True, MK=microkernel.SOURCE_TAG,
                      IM2COL_BLOCK=_im2col_block)
COL_BLOCK_BYTES = 1 << 21   # a task's column block (K x pb) stays in cache
MIN_COLS = 384              # ... but has enough columns to pay for reading the weights
WHOLE_COL_BYTES = 1 << 28   # up to this, one image's whole column matrix is made once instead
MIN_TASKS = 4               # channel blocks are cut until a product has this many tasks


# im2col only moves data: its fast variant serves both modes.
SPLIT_PLANES = Variants(_split_planes, "conv_split_planes", parallel=True, SPLIT=split_phases)
IM2COL = Variants(_im2col, "conv_im2col", parallel=True, COPY=copy_run, LAYOUT=phase_layout)
ADD_BIAS = Variants(_add_bias, "conv_bias", parallel=True, BIAS=True, RELU=False, AFFINE=False)
BIAS_RELU = Variants(_add_bias, "conv_bias_relu", parallel=True, BIAS=True, RELU=True,
                     AFFINE=False)
ONLY_RELU = Variants(_add_bias, "conv_relu", parallel=True, BIAS=False, RELU=True,
                     AFFINE=False)
SCALE_SHIFT = {relu: Variants(_add_bias, f"conv_affine_{int(relu)}", parallel=True, BIAS=True,
                              RELU=relu, AFFINE=True) for relu in (False, True)}
FROM_GRID = Variants(_add_bias, "conv_from_grid", parallel=True, BIAS=False, RELU=False,
                     AFFINE=False)


def _tile_plan(images, groups, mg, kk, p_, dtype):
    """The CONV_TILES entry point, its block arguments (shapes only, see _conv_tiles) and
    the table of micro-kernels and tile entry its tiles take (microkernel.table: filled
    before the first run's steps, or by microkernel.ready)."""
    pb = max(MIN_COLS, COL_BLOCK_BYTES // max(1, kk * dtype.itemsize) // 32 * 32)
    pb = min(pb, p_)
    base = images * groups * ceil_div(p_, max(1, pb))
    mb = mg
    if base < MIN_TASKS:
        mb = max(microkernel.MR, ceil_div(ceil_div(mg, ceil_div(MIN_TASKS, base)),
                                          microkernel.MR) * microkernel.MR)
    tasks = base * ceil_div(mg, max(1, mb))
    fn = CONV_TILES.get(False, tasks > 1 and tasks * mb * pb * kk >= PARALLEL_WORK)
    ensure_layer()          # numba.get_thread_id needs the threading layer running
    return fn, (images, groups, mg, kk, max(1, pb), max(1, mb), tasks), \
        microkernel.table(dtype, False)


def image_chunk(n_images, col_per_image, itemsize):
    return max(1, min(n_images, COL_BYTES // max(1, col_per_image * itemsize)))


# ----------------------------------------------------------------------------- Conv

class ConvPlan:
    """What infer leaves for run in Conv and ConvTranspose."""

    __slots__ = ("geo", "gemm", "n", "c", "m", "in_size", "out_size", "col_size", "chunk",
                 "direct", "wdt", "tiles", "relu", "depthwise", "affine", "bias", "phases",
                 "grid", "wide", "lanes", "gemv", "gemv_b", "rows")


def _finish(exact, p, y, b, images, grid=None):
    """The call that applies the bias, or absorbed scale-and-shift stages, and an absorbed
    Relu, over ``images`` images of the product in y, or in ``grid`` (the implicit-GEMM
    path's output grid, p.grid elements a plane, its rows phase_layout's wq wide), written
    into y; None where nothing is left to do."""
    if not y.size:
        return None
    src, ow_, wq, sp = y, p.out_size, p.out_size, 0
    if grid is not None:
        src, ow_, wq, sp = grid, int(p.geo[OW]), layout_of(p.geo)[2], p.grid
    elif b is None and not p.relu and p.affine is None:
        return None
    big = y.size >= PARALLEL_MIN
    if p.affine is not None:
        sc, sh = p.affine[:2]
        return SCALE_SHIFT[p.relu].get(exact, big), (y, src, sh, images * p.m, p.m, p.out_size,
                                                     sc, ow_, wq, sp)
    if b is None and not p.relu:
        variants = FROM_GRID
    else:
        variants = (BIAS_RELU if b is not None else ONLY_RELU) if p.relu else ADD_BIAS
    return variants.get(exact, big), (y, src, y if b is None else b, images * p.m, p.m,
                                      p.out_size, y, ow_, wq, sp)


def _stores_epilogue(p, groups: int, b) -> bool:
    """Whether the direct product (1 x 1 windows, stride 1, no padding) adds the bias and
    applies an absorbed Relu itself, as its tiles store (product.absorb_row_values), instead
    of the bias pass after it: the same adds and Relu, so the same bits. One group, no
    folded scale-and-shift stages, graphrt's tiles."""
    tiles = p.gemm.tiles
    if not (STORE_EPILOGUE and p.direct and p.gemv is None and groups == 1) or \
            p.affine is not None or tiles is None or not tiles.own or (b is None and not p.relu):
        return False
    if b is not None:
        p.gemm.absorb_row_values()
    if p.relu:
        p.gemm.absorb_relu()
    return True


def _implicit(p, g, k, exact):
    """Plan the implicit-GEMM form where graphrt's micro-kernel runs the product: B's row
    (c, tap) is read in place from the stride-phase planes (split_phases) at c * ps +
    phase_taps[tap], its columns being the output grid wq wide (phase_layout), so no column
    matrix is made; the same chains, k ascending, as the product over im2col's matrix, so the
    same bits. Two-dimensional windows only (one output depth)."""
    ps, taps = p.phases[:2]
    n_grid = layout_of(p.geo)[4]
    cg, mg = p.c // g, p.m // g
    rows = np.arange(cg * k, dtype=np.int64)
    tab = rows // k * ps + taps[rows % k]
    chunk = max(1, min(p.n, COL_BYTES // max(1, (p.c * ps + p.m * n_grid) * p.wdt.itemsize)))
    batches = np.arange(chunk * g, dtype=np.int64)
    gemm = Product(p.wdt, mg, n_grid, cg * k, (cg * k, 1), (n_grid, 1), batches % g * (mg * cg * k),
                   batches * (cg * ps), exact=exact, btab=tab)
    if gemm.tiles is not None:
        p.gemm, p.grid, p.chunk = gemm, n_grid, chunk


class GroupedConv(OpKernel):
    """The window attributes and ``group`` shared by Conv and ConvTranspose."""

    tile_products = True
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.window = Window(node, need_kernel=False)
        self.group = int(node.attr("group", 1))
        if self.group < 1:
            node.fail(f"group {self.group} must be positive")

    @staticmethod
    def operands(ctx: RunContext) -> tuple:
        """X, W and the optional B in the type computed in, and where Y is written
        (core/floats.py: float16 widened, the result rounded once by ``narrow``)."""
        wide = getattr(ctx.prepared, "wide", None) or {}
        return (widen_input(ctx, 0, wide), widen_input(ctx, 1, wide), widen_input(ctx, 2, wide),
                result_buffer(ctx, ctx.flat_out[0]))


class Conv(GroupedConv):
    """X (N, C, D...), W (M, C/group, K...), optional B (M): Y (N, M, O...)."""

    def __init__(self, node):
        super().__init__(node)
        self._w = ConstantB()       # 1 x 1 outputs: constant weights as a product's B

    def absorb_relu(self, prepared) -> bool:
        """Apply a following Relu in the bias pass (FusedEpilogue): one pass, same bits."""
        prepared.relu = True
        return True

    def absorb_affine(self, prepared, stage, pos, values, shape) -> bool:
        """Fold a following per-channel scale or shift (BatchNormalization in inference, or
        Mul, Add, Sub, Div by one value per channel) into the bias pass: y = y * s + t per
        output channel, s and t composed in float64 and rounded once (fast mode only,
        FusedEpilogue; the constant bias, if any, starts t)."""
        p = prepared
        if p.bias is None or p.relu:
            return False
        st = channel_affine(stage, pos, values, shape, p.wdt)
        if st is None:
            return False
        s0, t0 = p.affine[2:] if p.affine is not None else \
            (np.ones(p.m), np.asarray(p.bias, dtype=np.float64).reshape(-1))
        s1, t1 = st
        s, t = s0 * s1, t0 * s1 + t1
        p.affine = (s.astype(p.wdt), t.astype(p.wdt), s, t)
        return True

    def infer(self, ctx: InferContext) -> None:
        has_b = ctx.has_input(2)
        dt = ctx.same_dtype(0, 1, 2) if has_b else ctx.same_dtype(0, 1)
        check_float(ctx)
        xs, ws = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        check_rank(ctx, xs)
        if len(ws) != len(xs):
            ctx.fail(f"W of shape {list(ws)} must have the rank of X {list(xs)}")
        n, c = xs[:2]
        m, cg = ws[:2]
        g = self.group
        if c != cg * g or m % g:
            ctx.fail(f"X {list(xs)} and W {list(ws)} do not fit group {g}: X needs "
                     f"W.shape[1] * group channels and W.shape[0] must divide by group")
        if has_b and tuple(ctx.shape(2)) != (m,):
            ctx.fail(f"B of shape {list(ctx.shape(2))} should be [{m}]")
        ax = self.window.resolve(ctx.fail, xs[2:], ws[2:])
        ctx.set_output(0, dt, (n, m, *ax.out))
        p = ConvPlan()
        p.wide = wide_constants(ctx, 1, 2)      # float16 weights widened once per plan
        p.geo = geometry(c, xs[2:], ax)
        k = math.prod(ax.kernel)
        out_size = math.prod(ax.out)
        p.n, p.c, p.m = n, c, m
        p.in_size, p.out_size = math.prod(xs[2:]), out_size
        p.wdt = compute_dtype(dt)
        p.direct = k == 1 and all(s == 1 for s in ax.strides) and not any(ax.begin + ax.end)
        p.col_size = c * k * out_size
        p.chunk = image_chunk(n, 0 if p.direct else p.col_size, p.wdt.itemsize)
        mg = m // g
        batches = p.chunk * g
        offb = np.arange(batches, dtype=np.int64) * (cg * k * out_size)
        offa = (np.arange(batches, dtype=np.int64) % g) * (mg * cg * k)
        p.gemm = Product(p.wdt, mg, out_size, cg * k, (cg * k, 1), (out_size, 1), offa, offb,
                         exact=ctx.exact)
        p.gemv = p.gemv_b = None
        wv = p.wide.get(1, ctx.value(1))       # (float16 weights: their float32 copy)
        if GEMV and p.direct and out_size == 1 and g == 1 and wv is not None and \
                wv.dtype == p.wdt and n * m > 0:
            # one output position an image (1 x 1 maps: squeeze-and-excite blocks): y^T =
            # x^T W^T, the images' rows against the constant weights laid out once as the
            # product's B (ConstantB: the micro-kernel's panels; the tiles of W x spent most
            # of their work on 31 empty columns of 32); each output the same chain of
            # multiply-adds over c ascending, so the same bits
            p.gemv_b = self._w.of(wv.reshape(m, cg), True, p.wdt, ctx.exact)
            p.gemv = Product(p.wdt, 1, m, cg, (cg, 1), self._w.strides, offb,
                             np.zeros(batches, dtype=np.int64), exact=ctx.exact, fold=True,
                             panels=self._w.panels)
        p.tiles = None
        p.grid = None
        p.relu = False
        p.depthwise = p.lanes = p.rows = None
        p.affine = None
        p.bias = ctx.value(2) if has_b else np.zeros(m)      # None: a bias known in run only
        # the stride-phase planes (split_phases): a plane's size, where each tap starts, the
        # per-thread scratch of the depthwise kernel and the copies that make a plane
        work = phase_work(p.geo)
        p.phases = (work - layout_of(p.geo)[4], taps_of(p.geo), work,
                    phase_rows(p.geo))
        if DEPTHWISE_ROWS and cg == 1 and g > 1 and p.gemm.tiles is not None \
                and p.gemm.tiles.own \
                and n * m * out_size > 0:
            large = n * m * out_size * k >= PARALLEL_MIN
            if BY_ROWS and depthwise_rows.fits(p.geo) and out_size > LANES_PLANE:
                # (the zeros: the rows of the padding, read only)
                p.rows = (depthwise_rows.variants(p.geo).get(ctx.exact, large and n * m > 1),
                          np.zeros(int(p.geo[W]), p.wdt))
            elif out_size <= LANES_PLANE and p.geo[D] == 1 and p.geo[KD] == 1:
                plan = lanes_plan(p.geo, p.wdt.itemsize, n, m)
                p.lanes = (DEPTHWISE_LANES.get(ctx.exact, large and plan[0] > 1),) + plan
            else:
                p.depthwise = DEPTHWISE[k == 9].get(ctx.exact, large)
            ensure_layer()      # numba.get_thread_id needs the threading layer running
        elif not ctx.exact and not p.direct and p.gemm.tiles is not None and p.gemm.tiles.own \
                and p.col_size * p.wdt.itemsize > WHOLE_COL_BYTES and n * m > 0:
            p.tiles = _tile_plan(n, g, mg, cg * k, out_size, p.wdt)
        elif IMPLICIT and not p.direct and p.geo[OD] == 1 and n * m > 0:
            _implicit(p, g, k, ctx.exact)
        ctx.prepared = p

    def jit_calls(self, ctx: RunContext):
        """The run's calls, its scratch held by the run state (float16 operands converted
        by calls too); None where the BLAS computes the products (Python around it)."""
        return wide_calls(ctx, lambda ins, outs: self._calls(
            ctx, ins[0], ins[1], ins[2] if len(ins) > 2 else None, outs[0],
            lambda dt, n: shared_buffer(dt, n, ctx.held, "conv"), ctx.held).jit(),
            getattr(ctx.prepared, "wide", None))

    def run(self, ctx: RunContext) -> None:
        x, w, b, y = self.operands(ctx)
        make_calls(self._calls(ctx, x, w, b, y, lambda dt, n: scratch(ctx, dt, n), None))
        narrow(ctx.flat_out[0], y)

    def _calls(self, ctx: RunContext, x, w, b, y, buffer, holder):
        """The convolution of the 1-D operands (in the type computed in) as Calls (a product
        the BLAS computes is a Python call of the Product itself); scratch from
        ``buffer(dtype, shape)``, the products' own kept in ``holder``."""
        p = ctx.prepared
        g = self.group
        calls = Calls()

        def finish(ys, bias, images, grid=None):
            call = _finish(ctx.exact, p, ys, bias, images, grid)
            if call is not None:
                calls.append(call)

        def product(a, bmat, out, batches, row_values=None):
            gemm = p.gemm
            if p.gemv is not None:
                gemm, a, bmat = p.gemv, bmat, p.gemv_b
            call = gemm.call_of(a, bmat, out, row_values, batches=batches, holder=holder)
            if call is not None:
                calls.append(call)
            elif gemm.tiles is not None:       # the BLAS
                calls.python(gemm, a, bmat, out, row_values, batches)

        if p.rows is not None:
            # the bias and an absorbed Relu on each plane as it is made; folded scale-and-shift
            # stages (fast mode) by the bias pass after
            fused = p.affine is None
            fn, zeros = p.rows
            calls.append((fn, (x, w, y, b if fused and b is not None else y[:0], zeros,
                               p.geo, p.m // g, fused and p.relu, p.n * p.m)))
            if not fused:
                finish(y, b, p.n)
            return calls
        if p.lanes is not None:
            fn, tasks, hp, wp, taps, size = p.lanes
            work = buffer(p.wdt, (numba.config.NUMBA_NUM_THREADS, size))
            calls.append((fn, (x, w, y, p.geo, p.m // g, hp, wp, taps, work, tasks)))
            finish(y, b, p.n)
            return calls
        if p.depthwise is not None:
            work = buffer(p.wdt, (numba.config.NUMBA_NUM_THREADS, p.phases[2]))
            calls.append((p.depthwise, (x, w, y, p.geo, p.n * p.m, p.m // g,
                                        math.prod(p.geo[KD:KW + 1]), p.phases[3], p.phases[1],
                                        work)))
            finish(y, b, p.n)
            return calls
        if p.tiles is not None:
            fn, args, kt = p.tiles
            cols = buffer(p.wdt, (numba.config.NUMBA_NUM_THREADS, args[3] * args[4]))
            calls.append((fn, (x, w, y, p.geo, *args, cols, microkernel.work_for(p.wdt, holder),
                               microkernel.passed(kt))))
            finish(y, b, p.n)
            return calls
        if p.grid is not None:
            ps = p.phases[0]
            nx = p.chunk * p.c * ps
            buf = buffer(p.wdt, (nx + p.chunk * p.m * p.grid,))
            xp, grid = buf[:nx], buf[nx:]
            # the parallel form even for a few planes: numba compiles a parallel loop's body
            # with its arrays marked non-aliasing, and it ran 2-3 times as fast as the serial
            # form on one thread (16 planes of 55 x 55: 22 -> 9 us)
            split = SPLIT_PLANES.get(False, True)
            for n0 in range(0, p.n, p.chunk):
                k = min(p.chunk, p.n - n0)
                calls.append((split, (x[n0 * p.c * p.in_size:(n0 + k) * p.c * p.in_size], xp,
                                      p.geo, k * p.c, ps, p.phases[3])))
                product(w, xp, grid, k * g)
                finish(y[n0 * p.m * p.out_size:(n0 + k) * p.m * p.out_size], b, k, grid)
            return calls
        if not p.direct:
            ps, taps = p.phases[:2]
            nx = p.chunk * p.c * ps
            buf = buffer(p.wdt, (nx + p.chunk * p.col_size,))
            xp, col = buf[:nx], buf[nx:]
        stored = _stores_epilogue(p, g, b)
        for n0 in range(0, p.n, p.chunk):
            k = min(p.chunk, p.n - n0)
            xs = x[n0 * p.c * p.in_size:(n0 + k) * p.c * p.in_size]
            ys = y[n0 * p.m * p.out_size:(n0 + k) * p.m * p.out_size]
            if not p.direct:
                rows = k * p.col_size // max(1, p.out_size)
                big = k * p.col_size >= PARALLEL_MIN
                calls.append((SPLIT_PLANES.get(False, big), (xs, xp, p.geo, k * p.c, ps,
                                                             p.phases[3])))
                calls.append((IM2COL.get(False, big), (xp, col, p.geo, rows, ps, taps)))
                xs = col
            if stored:
                product(w, xs, ys, k * g, b)
            else:
                product(w, xs, ys, k * g)
                finish(ys, b, k)
        return calls
