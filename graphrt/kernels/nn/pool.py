"""Pooling: MaxPool (with Indices), AveragePool, LpPool, their Global forms, and MaxUnpool.

For output position o on each spatial axis the window taps are i = o * s - pb + k * d,
k = 0..K-1 (the geometry of conv.Window, ceil_mode included); taps outside the input are
skipped. Per window, taps are visited in row-major order of k:

- max: the first tap, then any larger one (a NaN tap wins once and stays), so ties keep the
  first index. Indices are flat positions in X: (n * C + c) * prod(spatial) + the position
  in row-major order (storage_order=0) or column-major order over the spatial axes (1).
  A window with no tap inside the input gives 0 and index -1.
- average: acc = 0, acc = acc + x per tap, then acc / count, where count is the number of
  taps inside the input, or with count_include_pad=1 the taps inside the padded input
  (those a ceil_mode window reaches past the trailing pad are never counted).
- Lp: (sum |x|^p)^(1/p), the sum in float64; p = 1 and p = 2 (a square root) are IEEE-exact,
  other p use pow and are not exact-mode kernels.

Each (image, channel) plane is one task, so the bits do not depend on the thread count.
GlobalAveragePool is ReduceMean over the spatial axes (its plane sums blocked pairwise, as
every long float sum; docs/exact-mode.md, "Summation").
MaxUnpool: Y is zero except Y[I[j]] = X[j], the indices being flat positions in the shape
MaxPool's input had (the inferred shape); with output_shape that shape is placed at the
origin of a larger output. Indices are checked before the copy; later duplicates win.
"""
from __future__ import annotations

import math

import numpy as np
import numba
from numba import njit, prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ...threads import ensure_layer
from ..core.base import InferContext, OpKernel, RunContext, make_calls, scratch
from ..core.broadcast import PARALLEL_MIN

from ..core.floats import compute_dtype, narrow, result_buffer, wide_calls, widen
from ..core.frozen import frozen
from ..core.held import held_buffer
from ..core.jit import Variants
from ..core.runs import copy_run
from ..core.words import numeric_word
from ..reduce.reduce import ReduceMean
from .window import (D, DD, DH, DW, H, OD, OH, OW, PD, PH, PW, SD, SH, SW, W, Axes, Window,
                     check_rank, copy_phases, geometry, layout_of, phase_layout, phase_rows,
                     taps_of)

EXACT = False
KIND = 0
MAX, AVG, LP = 0, 1, 2

# aux vector: index strides of the spatial axes, flags
_ID, _IH, _IW, _HAS_IND, _CIP = range(5)


def _pool(x, y, ind, g, lim, aux, planes, zero, p):
    """lim holds per axis and output position (k0, k1, n): the window taps k0..k1-1 inside
    the input, and the number of taps inside the padded input (count_include_pad)."""
    d_, h_, w_ = g[D], g[H], g[W]
    od_, oh_, ow_ = g[OD], g[OH], g[OW]
    dd, dh, dw = g[DD], g[DH], g[DW]
    lh = 3 * od_
    lw = 3 * (od_ + oh_)
    sid, sih, siw = aux[_ID], aux[_IH], aux[_IW]
    ip = d_ * h_ * w_
    for t in prange(planes):
        xo = t * ip
        yo = t * od_ * oh_ * ow_
        for od in range(od_):
            d0 = od * g[SD] - g[PD]
            kd0, kd1, nd = lim[3 * od], lim[3 * od + 1], lim[3 * od + 2]
            for oh in range(oh_):
                h0 = oh * g[SH] - g[PH]
                kh0, kh1, nh = lim[lh + 3 * oh], lim[lh + 3 * oh + 1], lim[lh + 3 * oh + 2]
                for ow in range(ow_):
                    w0 = ow * g[SW] - g[PW]
                    kw0, kw1 = lim[lw + 3 * ow], lim[lw + 3 * ow + 1]
                    o = yo + (od * oh_ + oh) * ow_ + ow
                    if KIND == MAX:
                        best = zero
                        at = -1
                        if kd0 < kd1 and kh0 < kh1 and kw0 < kw1:
                            # start from the first tap; selects, not branches, keep it fast
                            di, hi, wi = d0 + kd0 * dd, h0 + kh0 * dh, w0 + kw0 * dw
                            best = x[xo + (di * h_ + hi) * w_ + wi]
                            at = di * sid + hi * sih + wi * siw
                        for kd in range(kd0, kd1):
                            di = d0 + kd * dd
                            for kh in range(kh0, kh1):
                                hi = h0 + kh * dh
                                base = xo + (di * h_ + hi) * w_
                                for kw in range(kw0, kw1):
                                    wi = w0 + kw * dw
                                    v = x[base + wi]
                                    take = ((v > best) | (v != v)) & (best == best)
                                    best = v if take else best
                                    at = di * sid + hi * sih + wi * siw if take else at
                        y[o] = best
                        if aux[_HAS_IND] != 0:
                            ind[o] = xo + at if at >= 0 else -1
                    elif KIND == AVG:
                        s = zero
                        for kd in range(kd0, kd1):
                            for kh in range(kh0, kh1):
                                base = xo + ((d0 + kd * dd) * h_ + h0 + kh * dh) * w_ + w0
                                for kw in range(kw0, kw1):
                                    s = s + x[base + kw * dw]
                        if aux[_CIP] != 0:
                            cnt = nd * nh * lim[lw + 3 * ow + 2]
                        else:
                            cnt = (kd1 - kd0) * (kh1 - kh0) * (kw1 - kw0)
                        v = s / cnt
                        if EXACT and v != v:
                            y[o] = np.nan
                        else:
                            y[o] = v
                    else:
                        acc = 0.0
                        for kd in range(kd0, kd1):
                            for kh in range(kh0, kh1):
                                base = xo + ((d0 + kd * dd) * h_ + h0 + kh * dh) * w_ + w0
                                for kw in range(kw0, kw1):
                                    a = abs(np.float64(x[base + kw * dw]))
                                    if p == 1.0:
                                        acc = acc + a
                                    elif p == 2.0:
                                        acc = acc + a * a
                                    else:
                                        acc = acc + a ** p
                        if p == 1.0:
                            v = acc
                        elif p == 2.0:
                            v = np.sqrt(acc)
                        else:
                            v = acc ** (1.0 / p)
                        if EXACT and v != v:
                            y[o] = np.nan
                        else:
                            y[o] = v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")
def _tap(acc, v, kind):
    """One tap of a window: max keeps the first largest (a NaN tap wins once and stays);
    average adds."""
    if kind == MAX:
        return v if ((v > acc) | (v != v)) & (acc == acc) else acc
    return acc + v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")
def nan_free(x, s0, n):
    """No NaN among x[s0:s0 + n] (n >= 0)."""
    bad = 0
    s = np.uint64(s0)
    for j in range(np.uint64(n)):
        bad |= np.int32(x[s + j] != x[s + j])
    return bad == 0


def _pool_plane(x, y, g, planes, group, rows, taps, count, lowest, pad, work, tasks):
    """Max (KIND MAX) or sum-then-divide (AVG) pooling of two-dimensional windows (one
    output depth) that all hold a tap, without Indices, ``group`` planes at a time, each
    window's taps in the order of ``_pool`` (kh, then kw ascending). The planes are split
    by stride phase (conv.phase_rows) into one buffer, phase by phase (a phase holds the
    group's planes back to back, hq * wq elements each), bordered with ``pad`` (-inf or the
    type's minimum for max, -0.0 for average: taps that change nothing, x + -0.0 being x),
    so that every tap is one unit-stride pass over the whole group's output grids (output
    (oh, ow) of plane i at i * hq * wq + oh * wq + ow; the rest is dropped), with unsigned
    indices (runs.py): one long pass that LLVM vectorises, where a plane's own would be
    short. Max starts from ``lowest`` (the same result as starting from the first tap: -inf
    or the type's minimum is never taken over itself, and a NaN tap is taken either way);
    over NaN-free planes a tap is taken iff it is larger, whatever the accumulator holds, so
    max is then a plain compare-and-select. Average divides by ``count`` (per grid position,
    the taps _pool counts). The groups depend on the shapes only: ``tasks`` of them, the
    last one short; ``work``: per-thread scratch rows of pool_work elements."""
    oh_, ow_ = g[OH], g[OW]
    dp, hq, wq, nph, n = phase_layout(g)
    pq = hq * wq
    size = nph * group * pq
    ip = g[H] * g[W]
    for t in prange(tasks):
        t0 = np.int64(t) * group
        gg = min(group, planes - t0)
        row = work[numba.get_thread_id()]
        xp = row[:size]
        acc = row[size:size + (group - 1) * pq + n]
        for q in range(np.uint64(size)):
            xp[q] = pad
        plain = True
        for i in range(gg):
            copy_phases(xp, i * pq, x, (t0 + i) * ip, rows)
            if KIND == MAX:
                plain = plain and nan_free(x, (t0 + i) * ip, ip)
        span = np.uint64((gg - 1) * pq + n)
        for q in range(span):
            acc[q] = lowest
        for k in range(taps.size):
            s0 = np.uint64(taps[k])
            if KIND == AVG:
                for q in range(span):
                    acc[q] = acc[q] + xp[s0 + q]
            elif plain:
                for q in range(span):
                    v = xp[s0 + q]
                    acc[q] = frozen(v if v > acc[q] else acc[q])
            else:
                for q in range(span):
                    acc[q] = frozen(_tap(acc[q], xp[s0 + q], KIND))
        if KIND == AVG:
            for q in range(span):
                v = acc[q] / count[q]
                acc[q] = np.nan if EXACT and v != v else v
        for i in range(gg):
            for oh in range(oh_):
                copy_run(y, ((t0 + i) * oh_ + oh) * ow_, acc, i * pq + oh * wq, ow_, 1)


GROUP_ELEMENTS = 2048       # a group's split planes (and its accumulators) stay in L1


def _plane_plan(geo, lim, planes, count_include_pad, dtype):
    """The group size, copies, tap offsets, divisors and per-thread scratch of _pool_plane
    for a plan."""
    dp, hq, wq, nph, n = layout_of(geo)
    pq = hq * wq
    group = max(1, min(planes, GROUP_ELEMENTS // max(1, nph * pq)))
    t = taps_of(geo)
    taps = t // pq * (group * pq) + t % pq
    oh_, ow_ = int(geo[OH]), int(geo[OW])
    lim = lim.reshape(-1, 3)[1:]            # (the one output depth's row first)
    rows_h, cols_w = lim[:oh_], lim[oh_:oh_ + ow_]
    pick = 2 if count_include_pad else None
    ch = rows_h[:, 2] if pick else rows_h[:, 1] - rows_h[:, 0]
    cw = cols_w[:, 2] if pick else cols_w[:, 1] - cols_w[:, 0]
    grid = np.ones((hq, wq), dtype=dtype)
    grid[:oh_, :ow_] = np.outer(ch, cw)
    count = np.tile(grid.reshape(-1), group)[:(group - 1) * pq + n].copy()
    work = nph * group * pq + (group - 1) * pq + n
    return group, phase_rows(geo, group * pq), taps, count, work


def window_limits(ax, spatial) -> np.ndarray:
    """(k0, k1, n) per canonical axis and output position, for ``_pool``."""
    rows = []
    r = len(spatial)
    for a in range(3):
        if a < 3 - r:
            rows.append((0, 1, 1))
            continue
        i = a - (3 - r)
        k, s, d, pb, pe, n = (ax.kernel[i], ax.strides[i], ax.dilations[i], ax.begin[i],
                              ax.end[i], spatial[i])
        for o in range(ax.out[i]):
            start = o * s - pb
            k0 = min(k, max(0, -(start // d)))
            rows.append((k0, min(k, max(k0, (n - 1 - start) // d + 1)),
                         max(0, min(k, (n + pe - 1 - start) // d + 1))))
    return np.array(rows, dtype=np.int64).reshape(-1)


# Comparisons only: max pooling's fast variant serves both modes.
_MAX = Variants(_pool, "maxpool", parallel=True, KIND=MAX)
_MAX_PLANE = Variants(_pool_plane, "maxpool_plane", parallel=True, KIND=MAX)
_AVG_PLANE = Variants(_pool_plane, "averagepool_plane", parallel=True, KIND=AVG)
_AVG = Variants(_pool, "averagepool", parallel=True, KIND=AVG)
_LP = Variants(_pool, "lppool", parallel=True, KIND=LP)

_NO_INDICES = np.zeros(1, dtype=np.int64)


class _Plan:
    __slots__ = ("geo", "lim", "aux", "aux_ind", "planes", "fn", "zero", "rows", "lowest", "pad",
                 "work", "plane")


class _Pool(OpKernel):
    """The shared shape logic; subclasses set the variants, the allowed types and how the
    window is found (attributes, or the whole input for the Global forms)."""

    supports_exact = True
    ALLOWED = _dt.FLOATS
    GLOBAL = False
    VARIANTS = None

    def __init__(self, node):
        super().__init__(node)
        if not self.GLOBAL:
            self.window = Window(node, need_kernel=True)
        self.ceil_mode = int(node.attr("ceil_mode", 0)) != 0
        self.count_include_pad = int(node.attr("count_include_pad", 0)) != 0
        self.storage_order = int(node.attr("storage_order", 0))
        if self.storage_order not in (0, 1):
            node.fail(f"storage_order {self.storage_order} must be 0 or 1")
        self.p = 2.0

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, self.ALLOWED)
        xs = tuple(ctx.shape(0))
        check_rank(ctx, xs)
        spatial = xs[2:]
        r = len(spatial)
        if self.GLOBAL:
            ax = Axes([1] * r, [0] * r, [0] * r, list(spatial), [1] * r, [1] * r)
            if 0 in spatial:
                ctx.fail(f"cannot pool over an empty input of shape {list(xs)}")
        else:
            ax = self.window.resolve(ctx.fail, spatial, ceil_mode=self.ceil_mode)
        out = (*xs[:2], *ax.out)
        ctx.set_output(0, dt, out)
        if self.node.n_outputs > 1:
            ctx.set_output(1, np.int64, out)
        p = _Plan()
        p.geo = geometry(xs[1], spatial, ax)
        p.lim = window_limits(ax, spatial)
        d3 = [1] * (3 - r) + list(spatial)
        strides = ([d3[1] * d3[2], d3[2], 1] if self.storage_order == 0
                   else [1, d3[0], d3[0] * d3[1]])
        p.aux = np.array(strides + [0, int(self.count_include_pad)], dtype=np.int64)
        p.aux_ind = p.aux.copy()
        p.aux_ind[_HAS_IND] = 1
        p.planes = xs[0] * xs[1]
        size = math.prod(out) * math.prod(ax.kernel)
        wide = compute_dtype(dt)
        p.zero = wide.type(0)
        p.fn = self.VARIANTS.get(ctx.exact and self.VARIANTS is not _MAX,
                                 size >= PARALLEL_MIN and p.planes > 1)
        p.rows = None
        lim = p.lim.reshape(-1, 3)
        # the plane path pays where a window's taps are reused across outputs (one output a
        # plane, as in a global pool written as a window, is a plain reduction: _pool)
        if self.node.n_outputs == 1 and (lim[:, 0] < lim[:, 1]).all() and \
                self.VARIANTS in (_MAX, _AVG) and not self.GLOBAL and r < 3 and \
                math.prod(ax.out) > 1:
            is_max = self.VARIANTS is _MAX
            plane = _MAX_PLANE if is_max else _AVG_PLANE
            p.rows = plane.get(ctx.exact and not is_max, size >= PARALLEL_MIN and p.planes > 1)
            p.plane = _plane_plan(p.geo, p.lim, p.planes, self.count_include_pad,
                                  np.float64 if is_max else wide)
            p.work = p.plane[-1]
            ensure_layer()      # numba.get_thread_id needs the threading layer running
            if is_max:
                p.lowest = wide.type(-np.inf) if wide.kind == "f" else np.iinfo(wide).min
                p.pad = p.lowest
            else:
                p.lowest, p.pad = p.zero, wide.type(-0.0)
        ctx.prepared = p

    def jit_calls(self, ctx: RunContext):
        """The pooling kernel's one call, its scratch held by the run state (float16
        operands converted by calls too)."""
        return wide_calls(ctx, lambda ins, outs: [self._call(
            ctx, ins[0], outs[0], lambda dt, n: held_buffer(dt, n, ctx.held, "pool"))])

    def run(self, ctx: RunContext) -> None:
        y = result_buffer(ctx, ctx.flat_out[0])
        make_calls([self._call(ctx, widen(ctx, ctx.flat_in[0]), y,
                               lambda dt, n: scratch(ctx, dt, n))])
        narrow(ctx.flat_out[0], y)

    def _call(self, ctx: RunContext, x, y, buffer):
        """The pooling of x (in the type computed in) into y as one call; scratch from
        ``buffer(dtype, shape)``."""
        p = ctx.prepared
        if p.rows is not None:
            work = buffer(y.dtype, (numba.config.NUMBA_NUM_THREADS, p.work))
            return p.rows, (x, y, p.geo, p.planes, *p.plane[:-1], p.lowest, p.pad, work,
                            -(-p.planes // p.plane[0]))
        ind = ctx.flat_out[1] if len(ctx.flat_out) > 1 else None
        return p.fn, (x, y, _NO_INDICES if ind is None else ind, p.geo, p.lim,
                      p.aux if ind is None else p.aux_ind, p.planes, p.zero, self.p)


class MaxPool(_Pool):
    """Y = the maximum of each window; optional Indices (see the module docstring)."""

    ALLOWED = _dt.FLOATS | frozenset(np.dtype(t) for t in (np.int8, np.uint8))
    VARIANTS = _MAX

    def __init__(self, node):
        super().__init__(node)
        if node.n_outputs > 1 and node.opset < 8:
            node.fail("the Indices output exists from opset 8")


class AveragePool(_Pool):
    """Y = the mean of each window (count_include_pad decides what the padding counts)."""

    VARIANTS = _AVG


class LpPool(_Pool):
    """Y = the p-norm of each window."""

    VARIANTS = _LP

    def __init__(self, node):
        super().__init__(node)
        self.p = float(node.attr("p", 2))
        if self.p <= 0:
            node.fail(f"p {self.p} must be positive")
        # pow is libm's: only p = 1 and p = 2 are built from correctly rounded operations
        self.supports_exact = self.p in (1.0, 2.0)


class GlobalMaxPool(MaxPool):
    GLOBAL = True


class GlobalAveragePool(ReduceMean):
    """The mean of each (image, channel) plane, extents 1 left in its place: ReduceMean over
    the spatial axes, so the plane's sum is blocked pairwise (core/summation.py) like every
    long float sum; an empty plane is refused as by the other pools."""

    ALLOWED = _dt.FLOATS

    def __init__(self, node):
        OpKernel.__init__(self, node)       # none of the Reduce attributes
        self.keepdims, self.axes_input, self.noop, self.axes = True, False, False, None

    def all_axes(self, ctx, rank):
        shape = tuple(ctx.shape(0))
        check_rank(ctx, shape)
        if 0 in shape[2:]:
            ctx.fail(f"cannot pool over an empty input of shape {list(shape)}")
        return list(range(2, rank))


class GlobalLpPool(LpPool):
    GLOBAL = True


# ----------------------------------------------------------------------------- MaxUnpool

def _unpool(x, ind, y, inner, dims, ydims):
    """y = 0, then y[place(ind[j])] = x[j] in order; place re-reads a flat index of the
    inferred shape ``dims`` in the output shape ``ydims``."""
    for j in range(y.size):
        y[j] = 0
    r = dims.size
    for j in range(x.size):
        q = ind[j]
        if inner:
            y[q] = x[j]
            continue
        o = 0
        step = 1
        for a in range(r - 1, -1, -1):
            o += (q % dims[a]) * step
            q = q // dims[a]
            step *= ydims[a]
        y[o] = x[j]


_UNPOOL = Variants(_unpool, "maxunpool")


class MaxUnpool(OpKernel):
    """X and I (N, C, D...) from MaxPool; optional output_shape (input 2)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.window = Window(node, need_kernel=True, dilations=False)

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _dt.NUMERIC)
        ctx.check_dtype(1, frozenset({np.dtype(np.int64)}))
        xs, js = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        check_rank(ctx, xs)
        if xs != js:
            ctx.fail(f"X {list(xs)} and I {list(js)} must have the same shape")
        kernel, strides, _, pads = self.window.lists(ctx.fail, len(xs) - 2)
        r = len(kernel)
        inferred = list(xs[:2]) + [(n - 1) * s - (pads[i] + pads[i + r]) + k for i, (n, s, k)
                                   in enumerate(zip(xs[2:], strides, kernel))]
        if any(d < 0 for d in inferred):
            ctx.fail(f"the unpooled shape {inferred} has a negative extent")
        shape = inferred
        if ctx.has_input(2):
            given = ctx.int_list(2)
            if given is None:
                ctx.require_run_time_values()
                return
            if len(given) != len(xs) or any(g < d for g, d in zip(given, inferred)):
                ctx.bad_input(f"output_shape {given} must have rank {len(xs)} and hold the "
                              f"unpooled shape {inferred}")
            shape = given
        ctx.set_output(0, dt, shape)
        ctx.prepared = (math.prod(inferred), shape == inferred, np.array(inferred, np.int64),
                        np.array(shape, np.int64))

    def run(self, ctx: RunContext) -> None:
        size, inner, dims, ydims = ctx.prepared
        x, ind = ctx.flat_in[0], ctx.flat_in[1]
        if ind.size and (ind.min() < 0 or ind.max() >= size):
            ctx.node.fail(f"an index is outside [0, {size}) (the unpooled shape "
                          f"{dims.tolist()})", ErrorKind.INVALID_INPUT)
        word = numeric_word(x.dtype)
        _UNPOOL.get(False)(x.view(word), ind, ctx.flat_out[0].view(word), inner, dims, ydims)
