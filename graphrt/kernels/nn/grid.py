"""GridSample and AffineGrid: sampling an image at normalised coordinates, and making them.

GridSample: X (N, C, D1..Dr), Grid (N, O1..Or, r) with r = 1 to 3 spatial axes, the last
Grid axis listing the coordinates innermost axis first (x for the width). Each coordinate
u in [-1, 1] is denormalised to a position p on its axis of length L:
p = (u + 1) / 2 * (L - 1) with align_corners, else ((u + 1) * L - 1) / 2. A position
outside [lo, hi] (= [0, L - 1] with align_corners, else [-0.5, L - 0.5]) is clamped to
[0, L - 1] by padding_mode=border and reflected at lo and hi (repeatedly) by reflection.
Taps per axis: nearest the position rounded half to even (before the padding rule),
linear floor(p) and floor(p) + 1 with weights 1 - f and f (f = p - floor(p)), cubic
floor(p) - 1 .. floor(p) + 2 with Keys' coefficients (a = -0.75) of f. A tap outside the
input reads 0 (zeros), the edge (border) or its reflection (reflection). The value is the
nested weighted sum, innermost axis first: for each outer tap acc = acc + w * (the inner
sum), every sum starting at 0 and taking its taps in ascending order, as onnx's reference
nests it; positions, weights and sums are float64, rounded once to the output type. A NaN
coordinate gives NaN. Opset 16 names the modes bilinear / bicubic and takes 2-d inputs only.

AffineGrid: theta (N, 2, 3) or (N, 3, 4), size = (N, C, H, W) or (N, C, D, H, W): the grid
(N, H, W, 2) or (N, D, H, W, 3) of theta @ (x, y[, z], 1) over the base coordinates
-1 + i * 2 / (L - 1) (align_corners; -1 when L = 1) or -1 + (2 i + 1) / L, computed in
float64 (terms in that order, no FMA) and rounded once.

One task per output point (all channels), so the bits do not depend on the thread count;
both kernels use only IEEE-exact operations (floor, round, +, -, *, /) and are exact-mode
kernels.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext
from ..core.broadcast import PARALLEL_MIN, put
from ..core.floats import narrow, result_buffer, widen
from ..core.jit import Variants

EXACT = False
NEAREST, LINEAR, CUBIC = 0, 1, 2
ZEROS, BORDER, REFLECTION = 0, 1, 2
_MODES = {"nearest": NEAREST, "linear": LINEAR, "bilinear": LINEAR, "cubic": CUBIC,
          "bicubic": CUBIC}
_PADS = {"zeros": ZEROS, "border": BORDER, "reflection": REFLECTION}
_FAR = 2.0 ** 40            # positions are clamped here so that integer conversion is defined


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _reflect(p, lo, hi):
    span = hi - lo
    if span <= 0:
        return lo
    if p < lo:
        d = lo - p
        k = int(d / span)
        r = d - k * span
        return lo + r if k % 2 == 0 else hi - r
    if p > hi:
        d = p - hi
        k = int(d / span)
        r = d - k * span
        return hi - r if k % 2 == 0 else lo + r
    return p


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _keys(f, k):
    """Keys' cubic coefficient (a = -0.75) of tap k = 0..3 at fraction f."""
    a = -0.75
    if k == 0:
        t = f + 1
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    if k == 1:
        return ((a + 2) * f - (a + 3)) * f * f + 1
    if k == 2:
        t = 1 - f
        return ((a + 2) * t - (a + 3)) * t * t + 1
    t = 2 - f
    return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _fetch(i, n, pad, lo, hi):
    """The input index tap i reads on an axis of length n, or -1 for a zero."""
    if pad == ZEROS:
        return i if 0 <= i < n else -1
    if pad == BORDER:
        return min(max(i, 0), n - 1)
    return min(max(int(_reflect(np.float64(i), lo, hi)), 0), n - 1)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _axis_taps(u, n, align, pad, mode):
    """(tap count, 4 indices, 4 weights) of one axis; tap count -1 for a NaN coordinate."""
    if u != u:
        return -1, (0, 0, 0, 0), (0.0, 0.0, 0.0, 0.0)
    p = (u + 1) / 2 * (n - 1) if align else ((u + 1) * n - 1) / 2
    p = min(max(np.float64(p), -_FAR), _FAR)
    lo, hi = (0.0, n - 1.0) if align else (-0.5, n - 0.5)
    if mode == NEAREST:
        p = np.rint(p)
    if p < lo or p > hi:
        if pad == BORDER:
            p = min(max(p, 0.0), n - 1.0)
        elif pad == REFLECTION:
            p = _reflect(p, lo, hi)
    if mode == NEAREST:
        return 1, (_fetch(int(p), n, pad, lo, hi), 0, 0, 0), (1.0, 0.0, 0.0, 0.0)
    b = np.floor(p)
    f = p - b
    i = int(b)
    if mode == LINEAR:
        return 2, (_fetch(i, n, pad, lo, hi), _fetch(i + 1, n, pad, lo, hi), 0, 0), \
            (1 - f, f, 0.0, 0.0)
    return 4, (_fetch(i - 1, n, pad, lo, hi), _fetch(i, n, pad, lo, hi),
               _fetch(i + 1, n, pad, lo, hi), _fetch(i + 2, n, pad, lo, hi)), \
        (_keys(f, 0), _keys(f, 1), _keys(f, 2), _keys(f, 3))


def _grid_sample(x, grid, y, dims, c_, nd, npts, align, pad, mode, tasks):
    """dims = (D, H, W) of X (leading 1s below 3 spatial axes); npts points per image."""
    d_, h_, w_ = dims[0], dims[1], dims[2]
    plane = d_ * h_ * w_
    for t in prange(tasks):
        n = t // npts
        q = t - n * npts
        g = t * nd
        # an axis the input lacks: one tap at 0 of weight 1
        if nd < 3:
            kd, idd, wdd = _axis_taps(0.0, 1, align, BORDER, NEAREST)
        else:
            kd, idd, wdd = _axis_taps(np.float64(grid[g + 2]), d_, align, pad, mode)
        if nd < 2:
            kh, ih, wh = _axis_taps(0.0, 1, align, BORDER, NEAREST)
        else:
            kh, ih, wh = _axis_taps(np.float64(grid[g + 1]), h_, align, pad, mode)
        kw, iw, ww = _axis_taps(np.float64(grid[g]), w_, align, pad, mode)
        for c in range(c_):
            o = (n * c_ + c) * npts + q
            if kd < 0 or kh < 0 or kw < 0:
                y[o] = np.nan
                continue
            xo = (n * c_ + c) * plane
            acc = 0.0
            for a in range(kd):
                if idd[a] < 0:
                    continue
                acc_h = 0.0
                for b in range(kh):
                    if ih[b] < 0:
                        continue
                    acc_w = 0.0
                    base = xo + (idd[a] * h_ + ih[b]) * w_
                    for k in range(kw):
                        if iw[k] >= 0:
                            acc_w = acc_w + ww[k] * x[base + iw[k]]
                    acc_h = acc_h + wh[b] * acc_w
                acc = acc + wdd[a] * acc_h
            put(y, o, acc, EXACT)


_GRID_SAMPLE = Variants(_grid_sample, "gridsample", parallel=True)


class GridSample(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        mode = node.attr("mode", "bilinear" if node.opset < 20 else "linear")
        names = (("bilinear", "nearest", "bicubic") if node.opset < 20
                 else ("linear", "nearest", "cubic"))
        if mode not in names:
            node.fail(f"mode {mode!r} is not one of {', '.join(names)}")
        self.mode = _MODES[mode]
        pad = node.attr("padding_mode", "zeros")
        if pad not in _PADS:
            node.fail(f"padding_mode {pad!r} is not one of {', '.join(_PADS)}")
        self.pad = _PADS[pad]
        self.align = int(node.attr("align_corners", 0)) != 0

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _dt.FLOATS)
        ctx.check_dtype(1, _dt.FLOATS, " (Grid)")
        xs, gs = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        r = len(xs) - 2
        if not 1 <= r <= 3 or (self.node.opset < 20 and r != 2):
            ctx.fail(f"X of shape {list(xs)} is not supported (2 spatial axes before opset 20, "
                     f"1 to 3 from it)", ErrorKind.UNSUPPORTED)
        if len(gs) != r + 2 or gs[0] != xs[0] or gs[-1] != r:
            ctx.fail(f"Grid of shape {list(gs)} should be [{xs[0]}, ...{r} extents..., {r}] "
                     f"for X {list(xs)}")
        if self.mode == CUBIC and r != 2:
            ctx.fail("cubic sampling needs 2 spatial axes", ErrorKind.UNSUPPORTED)
        if 0 in xs[2:] and math.prod(gs[1:-1]) and xs[1]:
            ctx.fail(f"cannot sample from an empty image {list(xs)}")
        out = (xs[0], xs[1], *gs[1:-1])
        ctx.set_output(0, dt, out)
        npts = math.prod(gs[1:-1])
        tasks = xs[0] * npts
        dims = np.array([1] * (3 - r) + list(xs[2:]), dtype=np.int64)
        fn = _GRID_SAMPLE.get(ctx.exact, math.prod(out) >= PARALLEL_MIN // 4 and tasks > 1)
        ctx.prepared = (dims, xs[1], r, npts, tasks, fn)

    def run(self, ctx: RunContext) -> None:
        dims, c, r, npts, tasks, fn = ctx.prepared
        if tasks == 0 or c == 0:
            return
        x = widen(ctx, ctx.flat_in[0])
        grid = widen(ctx, ctx.flat_in[1])
        y = result_buffer(ctx, ctx.flat_out[0])
        fn(x, grid, y, dims, c, r, npts, self.align, self.pad, self.mode, tasks)
        narrow(ctx.flat_out[0], y)


# ----------------------------------------------------------------------------- AffineGrid

def _affine(theta, base, out, n, pts, nd, tasks):
    """out[b, q, r] = theta[b, r, 0] * base[q, 0] + ... + theta[b, r, nd] (float64)."""
    for t in prange(tasks):
        b = t // pts
        q = t - b * pts
        for r in range(nd):
            row = (b * nd + r) * (nd + 1)
            acc = np.float64(theta[row]) * base[q * nd]
            for k in range(1, nd):
                acc = acc + np.float64(theta[row + k]) * base[q * nd + k]
            acc = acc + np.float64(theta[row + nd])
            put(out, t * nd + r, acc, EXACT)


_AFFINE = Variants(_affine, "affinegrid", parallel=True)


def base_coordinates(n, align):
    i = np.arange(n, dtype=np.float64)
    if align:
        return np.full(n, -1.0) if n == 1 else -1 + i * (2.0 / (n - 1))
    return -1 + (2 * i + 1) / n


class AffineGrid(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.align = int(node.attr("align_corners", 0)) != 0

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _dt.FLOATS)
        ts = tuple(ctx.shape(0))
        size = ctx.int_list(1)
        if size is None:
            ctx.require_run_time_values()
            return
        if len(size) not in (4, 5) or any(s < 0 for s in size):
            ctx.bad_input(f"size {size} should be [N, C, H, W] or [N, C, D, H, W]")
        nd = len(size) - 2
        if ts != (size[0], nd, nd + 1):
            ctx.fail(f"theta of shape {list(ts)} should be [{size[0]}, {nd}, {nd + 1}]")
        spatial = size[2:]
        out = (size[0], *spatial, nd)
        ctx.set_output(0, dt, out)
        # base[q] = (x, y[, z]) of point q in row-major order over (D,) H, W
        axes = [base_coordinates(s, self.align) for s in spatial]
        mesh = np.meshgrid(*axes, indexing="ij")
        base = np.stack(mesh[::-1], axis=-1).reshape(-1).astype(np.float64)
        pts = math.prod(spatial)
        tasks = size[0] * pts
        ctx.prepared = (base, pts, nd, tasks, _AFFINE.get(ctx.exact, tasks * nd >= PARALLEL_MIN))

    def run(self, ctx: RunContext) -> None:
        base, pts, nd, tasks, fn = ctx.prepared
        if tasks == 0:
            return
        theta = widen(ctx, ctx.flat_in[0])
        y = result_buffer(ctx, ctx.flat_out[0])
        fn(theta, base, y, tasks // max(pts, 1), pts, nd, tasks)
        narrow(ctx.flat_out[0], y)
