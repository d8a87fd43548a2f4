"""Window geometry of convolutions and pools, and the stride-phase layout of their planes.

A geometry vector (int64, GEO_SIZE entries, indices C .. PW below) describes one window
operator on one input shape in canonical 3-d form: 1-d and 2-d inputs get leading spatial
axes of extent 1. ``Window`` reads the attributes (kernel shape, strides, dilations, pads,
auto_pad, ceil_mode) and states the output extents.

Stride-phase layout: a padded plane split by stride phase (``split_phases``), so that every
window tap of every output is a plain offset into one buffer (``phase_taps``); the copies
that make it are planned once per plan (``phase_rows``).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.runs import copy_run, deal_run

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")

# canonical 3-d geometry vector (int64): 1-d and 2-d inputs get leading axes of extent 1
(C, D, H, W, OD, OH, OW, KD, KH, KW, SD, SH, SW, DD, DH, DW, PD, PH,
 PW) = range(19)
GEO_SIZE = 19
PLANE_LIMIT = 1 << 31       # input positions an output plane's windows may reach (a stride-phase plane)


# ----------------------------------------------------------------------------- geometry

def _ints(node, key):
    v = node.attr(key)
    return None if v is None else [int(x) for x in v]


class Axes:
    """Resolved window geometry of one plan: per spatial axis the output extent, leading and
    trailing pads, kernel extent, stride and dilation."""

    __slots__ = ("out", "begin", "end", "kernel", "strides", "dilations")

    def __init__(self, out, begin, end, kernel, strides, dilations):
        self.out, self.begin, self.end = out, begin, end
        self.kernel, self.strides, self.dilations = kernel, strides, dilations


class Window:
    """The kernel_shape, strides, dilations, pads and auto_pad attributes of a sliding-window
    node, validated at load time; ``resolve`` fits them to an input's spatial extents."""

    def __init__(self, node, need_kernel: bool, dilations: bool = True):
        self.kernel = _ints(node, "kernel_shape")
        if need_kernel and self.kernel is None:
            node.fail("attribute 'kernel_shape' is required")
        self.strides = _ints(node, "strides")
        self.dilations = _ints(node, "dilations") if dilations else None
        self.pads = _ints(node, "pads")
        auto = node.attr("auto_pad", "NOTSET") or "NOTSET"
        if auto not in AUTO_PADS:
            node.fail(f"auto_pad {auto!r} is not one of {', '.join(AUTO_PADS)}")
        self.auto_pad = auto
        for key, vals, low in (("kernel_shape", self.kernel, 1), ("strides", self.strides, 1),
                               ("dilations", self.dilations, 1), ("pads", self.pads, 0)):
            if vals is not None and any(v < low for v in vals):
                node.fail(f"{key} {vals} has a value below {low}")
        if self.pads is not None and len(self.pads) % 2:
            node.fail(f"pads {self.pads} must have an even length (begins, then ends)")

    def lists(self, fail, r: int, kernel=None):
        """Kernel, strides, dilations and explicit pads for ``r`` spatial axes."""
        kernel = self.kernel if kernel is None else list(kernel)
        if self.kernel is not None and list(self.kernel) != list(kernel):
            fail(f"kernel_shape {self.kernel} does not match the weights' kernel {list(kernel)}")
        strides = self.strides or [1] * r
        dilations = self.dilations or [1] * r
        pads = self.pads or [0] * (2 * r)
        for key, vals, n in (("kernel_shape", kernel, r), ("strides", strides, r),
                             ("dilations", dilations, r), ("pads", pads, 2 * r)):
            if len(vals) != n:
                fail(f"{key} {list(vals)} should have {n} values for {r} spatial axes")
        return list(kernel), list(strides), list(dilations), list(pads)

    def resolve(self, fail, spatial, kernel=None, ceil_mode: bool = False) -> Axes:
        """Output extents and pads: SAME_* pads so that out = ceil(in / stride) (the odd pad
        at the end for SAME_UPPER, at the beginning for SAME_LOWER); otherwise
        out = floor((in + pads - (k - 1) * d - 1) / s) + 1, or ceil with ``ceil_mode``, where a
        last window starting in the trailing padding is dropped."""
        r = len(spatial)
        kernel, strides, dilations, pads = self.lists(fail, r, kernel)
        out, begin, end = [], [], []
        for i, n in enumerate(spatial):
            s, ek = strides[i], (kernel[i] - 1) * dilations[i] + 1
            if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                o = -(-n // s)
                total = max(0, (o - 1) * s + ek - n)
                pb = total // 2 if self.auto_pad == "SAME_UPPER" else total - total // 2
                out.append(o)
                begin.append(pb)
                end.append(total - pb)
                continue
            pb, pe = (0, 0) if self.auto_pad == "VALID" else (pads[i], pads[i + r])
            span = n + pb + pe - ek
            if span < 0:
                fail(f"the kernel extent {ek} (kernel {kernel[i]}, dilation {dilations[i]}) is "
                     f"larger than the padded input extent {n + pb + pe} on spatial axis {i}")
            o = (-(-span // s) if ceil_mode else span // s) + 1
            if ceil_mode and (o - 1) * s >= n + pb:
                o -= 1
            out.append(o)
            begin.append(pb)
            end.append(pe)
        # one output position: its window starts at -pad whatever the stride, and a stride
        # of 1 keeps the stride-phase planes (split_phases) one phase large
        strides = [1 if o == 1 else s for o, s in zip(out, strides)]
        plane = 1
        for o, k, s, d in zip(out, kernel, strides, dilations):
            plane *= s * (o + (k - 1) * d // s)     # Python ints: no overflow
        if plane > PLANE_LIMIT:
            fail(f"strides {strides}, kernel {kernel} and dilations {dilations} make output "
                 f"planes of {out} reach over {plane} input positions, more than graphrt "
                 f"lays out ({PLANE_LIMIT})", ErrorKind.UNSUPPORTED)
        return Axes(out, begin, end, kernel, strides, dilations)


def spatial_3d(values, fill=1) -> list:
    """``values`` of 1 to 3 spatial axes as three, the missing leading axes set to ``fill``."""
    return [fill] * (3 - len(values)) + list(values)


def geometry(channels, spatial, ax: Axes) -> np.ndarray:
    """The canonical 3-d geometry vector of a window operation."""
    g = np.zeros(GEO_SIZE, dtype=np.int64)
    g[C] = channels
    g[D:W + 1] = spatial_3d(spatial)
    g[OD:OW + 1] = spatial_3d(ax.out)
    g[KD:KW + 1] = spatial_3d(ax.kernel)
    g[SD:SW + 1] = spatial_3d(ax.strides)
    g[DD:DW + 1] = spatial_3d(ax.dilations)
    g[PD:PW + 1] = spatial_3d(ax.begin, 0)
    return g


def check_rank(ctx, shape, what="X"):
    if not 3 <= len(shape) <= 5:
        ctx.fail(f"{what} of shape {list(shape)} must have 1 to 3 spatial axes "
                 f"(rank 3 to 5)", ErrorKind.UNSUPPORTED if len(shape) > 5 else
                 ErrorKind.INVALID_MODEL)


def check_float(ctx, i=0):
    return ctx.check_dtype(i, _dt.FLOATS)



def ceil_div(a, b):
    return -(-a // b)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")
def tap_of(r, kd_, kh_, kw_):
    """Row r of a column matrix as (channel, kd, kh, kw), kernel positions row-major."""
    kw = r % kw_
    q = r // kw_
    kh = q % kh_
    q = q // kh_
    return q // kd_, q % kd_, kh, kw


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")
def phase_layout(g):
    """The stride-phase layout of a padded plane (see split_phases): the padded depth the
    windows reach, a phase's rows and columns, the phase count, and n = the span of the
    output plane on a grid a phase's width wide."""
    dp = (g[OD] - 1) * g[SD] + (g[KD] - 1) * g[DD] + 1
    hq = g[OH] + (g[KH] - 1) * g[DH] // g[SH]
    wq = g[OW] + (g[KW] - 1) * g[DW] // g[SW]
    return dp, hq, wq, g[SH] * g[SW], (g[OH] - 1) * wq + g[OW]


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")
def phase_taps(g, layout):
    """Where each window tap (kd, kh, kw), in row-major order, starts in split_phases'
    buffer for output (od, oh, ow) = (0, 0, 0); output (od, oh, ow) adds
    od * sd * nph * hq * wq + oh * wq + ow. ``layout``: phase_layout(g)."""
    dp, hq, wq, nph, n = layout
    kd_, kh_, kw_ = g[KD], g[KH], g[KW]
    sh, sw = g[SH], g[SW]
    out = np.empty(kd_ * kh_ * kw_, dtype=np.int64)
    for kd in range(kd_):
        for kh in range(kh_):
            rh, qh = (kh * g[DH]) % sh, (kh * g[DH]) // sh
            for kw in range(kw_):
                rw, qw = (kw * g[DW]) % sw, (kw * g[DW]) // sw
                out[(kd * kh_ + kh) * kw_ + kw] = \
                    ((kd * g[DD] * nph + rh * sw + rw) * hq + qh) * wq + qw
    return out


def layout_of(g) -> tuple:
    """phase_layout when a plan is made, as Python ints: run as Python, so that a model
    compiles it only where a kernel calls it."""
    return tuple(int(v) for v in phase_layout.py_func(g))


def taps_of(g) -> np.ndarray:
    """phase_taps when a plan is made, run as Python (compiled, it cost about 0.4 s for a
    few dozen integers)."""
    return phase_taps.py_func(g, layout_of(g))


def phase_work(g) -> int:
    """Elements of per-thread scratch a plane needs: its phases, then the output grid."""
    dp, hq, wq, nph, n = layout_of(g)
    return dp * nph * hq * wq + n


def phase_rows(g, pstride=None) -> np.ndarray:
    """How split_phases copies one plane, made once per plan: rows (dst, src, n, step, dst2),
    n input elements from src, step apart, to dst onward, or with step 0 the n elements
    from src on dealt alternately to dst and dst2 onward (runs.deal_run: a stride-2 row's
    two phases in one pass, where they interleave exactly). Phase (rh, rw) of padded depth dpi
    holds padded rows i * sh + rh and columns k * sw + rw (the rest is padding), and starts
    at (dpi * nph + rh * sw + rw) * pstride: hq * wq for one plane's buffer, more where the
    buffers of several planes are interleaved phase by phase."""
    d_, h_, w_ = (int(v) for v in g[D:W + 1])
    sh, sw = int(g[SH]), int(g[SW])
    pd, ph, pw = (int(v) for v in g[PD:PW + 1])
    dp, hq, wq, nph, _ = layout_of(g)
    pstride = hq * wq if pstride is None else pstride
    rows = []
    for dpi in range(dp):
        di = dpi - pd
        if not 0 <= di < d_:
            continue
        for rh in range(sh):
            for i in range(hq):
                hi_ = i * sh + rh - ph
                if not 0 <= hi_ < h_:
                    continue
                runs = []
                for rw in range(sw):
                    # columns k with 0 <= k * sw + rw - pw < w_
                    c0 = min(wq, max(0, -((rw - pw) // sw)))
                    c1 = min(wq, max(c0, (w_ - 1 - rw + pw) // sw + 1))
                    if c1 > c0:
                        runs.append([(dpi * nph + rh * sw + rw) * pstride + i * wq + c0,
                                     (di * h_ + hi_) * w_ + c0 * sw + rw - pw, c1 - c0, sw, 0])
                if sw == 2 and len(runs) == 2:
                    a, b = sorted(runs, key=lambda run: run[1])
                    if b[1] == a[1] + 1 and a[2] - b[2] in (0, 1):
                        runs = [[a[0], a[1], a[2] + b[2], 0, b[0]]]
                rows.extend(runs)
    return np.array(rows, dtype=np.int64).reshape(-1, 5)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _deal_row(xp, d0, d1, x, s0, n):
    """runs.deal_run out of line: inlined beside copy_run in copy_phases' loop, it made the
    whole split about 10 times slower, even for planes without a stride-2 row (576 planes
    of 7 x 7 at stride 1: 180 against 15 us)."""
    deal_run(xp, d0, d1, x, s0, n)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")
def copy_phases(xp, base, x, xo, rows):
    """The copies of phase_rows: the plane at x[xo] into the buffer at xp[base]."""
    for r in range(rows.shape[0]):
        if rows[r, 3] == 0:
            _deal_row(xp, base + rows[r, 0], base + rows[r, 4], x, xo + rows[r, 1], rows[r, 2])
        else:
            copy_run(xp, base + rows[r, 0], x, xo + rows[r, 1], rows[r, 2], rows[r, 3])


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")
def split_phases(xp, x, xo, rows, size, pad):
    """xp[:size] = the plane at x[xo] split by stride phase (phase_rows(g) made ``rows``),
    ``pad`` outside the input, so that window tap (kd, kh, kw) of output (od, oh, ow) is
    xp[((od * sd + kd * dd) * nph + phase) * hq * wq + (oh + qh) * wq + ow + qw] with phase
    ((kh * dh) % sh, (kw * dw) % sw) and (qh, qw) = ((kh * dh) // sh, (kw * dw) // sw)."""
    for q in range(np.uint64(size)):
        xp[q] = pad
    copy_phases(xp, 0, x, xo, rows)
