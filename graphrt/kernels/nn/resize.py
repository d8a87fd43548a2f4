"""Resize (opsets 10 to 19+) and Upsample (7 to 9): nearest, N-linear and N-cubic resampling.

Per resized axis, output index y maps to a source coordinate x (plain IEEE float64
arithmetic, done once per plan, so the same on every machine); with the output length
L = scale * in (fractional when it comes from a scale) and L_int the actual length:

    half_pixel            x = (y + 0.5) / scale - 0.5
    half_pixel_symmetric  x = in / 2 * (1 - L_int / L) + (y + 0.5) / scale - 0.5
    pytorch_half_pixel    x = (y + 0.5) / scale - 0.5, or -0.5 when L = 1
    align_corners         x = y * (in - 1) / (L - 1), or 0 when L = 1
    asymmetric            x = y / scale
    tf_crop_and_resize    x = start * (in - 1) + y * (end - start) * (in - 1) / (L - 1)
                          (L = 1: (end - start) * (in - 1) / 2 + start * (in - 1));
                          outside [0, in - 1] the output is extrapolation_value

as onnx's reference defines them. nearest picks floor(x) or floor(x) + 1 by nearest_mode
(an integer x picks itself), clamped to the input, and moves the element unchanged: one
gather over all axes, for every element type. linear and cubic take n consecutive taps
around x: the two neighbours (linear, weights 1 - r and r for r = x - left tap) or four
(cubic, Keys' kernel with cubic_coeff_a); with antialias, when downscaling by s < 1 the
kernel is stretched by 1 / s, covering more taps, and its weights are normalised.
exclude_outside drops taps outside the input and renormalises; other taps outside the input
read the edge. Resampling is separable: the resized axes are processed one at a time in
ascending order, each output acc = 0, then acc = acc + w_k * x_k over the taps in ascending
order, in float32 for float32 and float16 data, float64 for float64 and integer data
(integers are then rounded half to even and saturated). Exact variant: no FMA, NaN results
canonical. Tasks are output rows, so the bits do not depend on the thread count.

Output lengths: sizes (with keep_aspect_ratio_policy not_larger / not_smaller one common
scale, lengths round(scale * in) half up), or floor(scale * in) from scales. An axis with
scale 1, an unchanged length and the whole roi is left as it is. Opset 10 and Upsample use
asymmetric coordinates and pick floor(x) (ceil(x) when shrinking, opset 10).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from numba import prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, make_calls, scratch
from ..core.broadcast import PARALLEL_MIN
from ..core.jit import Variants
from ..core.runs import copy_run
from ..core.words import numeric_word
from ..tensor.views import unique_axes

EXACT = False

MODES = ("nearest", "linear", "cubic")
TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
POLICIES = ("stretch", "not_larger", "not_smaller")


# ----------------------------------------------------------------------------- kernels

def _gather(x, y, tab, starts, oshape, rows):
    """y (C order over oshape) [i] = x[sum_d tab[starts[d] + i_d]] (element offsets, uint64:
    numba then knows no index is negative and leaves out its wrap-around test, which kept
    the row's loop scalar)."""
    r = oshape.size
    w = oshape[r - 1]
    last = tab[starts[r - 1]:starts[r - 1] + w]
    for row in prange(rows):
        rem = row // 1              # (a copy: parfors forbids reassigning the loop index)
        base = np.uint64(0)
        for d in range(r - 2, -1, -1):
            q = rem // oshape[d]
            base += tab[starts[d] + rem - q * oshape[d]]
            rem = q
        dst = y[row * w:(row + 1) * w]
        for j in range(w):
            dst[j] = x[base + last[j]]


def _repeat(x, y, h, w, kh, kw, planes):
    """Nearest upsampling of planes by whole factors: y's plane p (h * kh rows of w * kw) =
    x's plane p (h x w) with each element kw times along its row and each row kh times
    (the gather's values, written without its index table: a row's repeats with unsigned
    indices, which vectorise, then copies of that row)."""
    ow = w * kw
    uw, ukw, two = np.uint64(w), np.uint64(kw), np.uint64(2)
    for p in prange(planes):
        for i in range(h):
            s0 = np.uint64((p * h + i) * w)
            o0 = (p * h + i) * kh * ow
            u0 = np.uint64(o0)
            if kw == 2:
                for j in range(uw):
                    v = x[s0 + j]
                    y[u0 + two * j] = v
                    y[u0 + two * j + np.uint64(1)] = v
            else:
                for j in range(uw):
                    v = x[s0 + j]
                    for t in range(ukw):
                        y[u0 + j * ukw + t] = v
            for r in range(1, kh):
                copy_run(y, o0 + r * ow, y, o0, ow, 1)


def _resample(x, y, idx, wt, taps, n_in, n_out, inner, tasks):
    """One axis: y[o, j, :] = sum_k wt[j, k] * x[o, idx[j, k], :] (k ascending, from 0)."""
    for t in prange(tasks):
        o = t // n_out
        j = t - o * n_out
        dst = y[t * inner:(t + 1) * inner]
        for i in range(inner):
            dst[i] = 0
        for k in range(taps):
            wk = wt[j * taps + k]
            s0 = (o * n_in + idx[j * taps + k]) * inner
            src = x[s0:s0 + inner]
            for i in range(inner):
                dst[i] = dst[i] + wk * src[i]
        if EXACT:
            for i in range(inner):
                v = dst[i]
                if v != v:
                    dst[i] = np.nan


def _fill(y, outer, n, inner, rows, value):
    """y[o, j, :] = value for the listed j (the extrapolated rows of one axis)."""
    for o in prange(outer):
        for r in range(rows.size):
            s0 = (o * n + rows[r]) * inner
            dst = y[s0:s0 + inner]
            for i in range(inner):
                dst[i] = value


# Moving data only: the fast variants serve both modes.
_GATHER = Variants(_gather, "resize_gather", parallel=True)
_REPEAT = Variants(_repeat, "resize_repeat", parallel=True, COPY=copy_run)
_FILL = Variants(_fill, "resize_fill", parallel=True)
_RESAMPLE = Variants(_resample, "resize_resample", parallel=True)


# ----------------------------------------------------------------------------- coordinates

def source_coords(transform, n_out, scale, n_in, roi):
    """Source coordinate of each output index along one axis, and the extrapolated mask."""
    y = np.arange(n_out, dtype=np.float64)
    length = scale * n_in
    if transform == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if transform == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / length)
        return offset + (y + 0.5) / scale - 0.5, None
    if transform == "pytorch_half_pixel":
        if length == 1:
            return np.full(n_out, -0.5), None
        return (y + 0.5) / scale - 0.5, None
    if transform == "align_corners":
        if length == 1:
            return np.zeros(n_out), None
        return y * (n_in - 1) / (length - 1), None
    if transform == "asymmetric":
        return y / scale, None
    start, end = roi
    if length == 1:
        x = np.full(n_out, (end - start) * (n_in - 1) / 2)
    else:
        x = y * (end - start) * (n_in - 1) / (length - 1)
    x = x + start * (n_in - 1)
    return x, (x < 0) | (x > n_in - 1)


def nearest_index(x, nearest_mode, scale, n_in):
    """floor(x) or floor(x) + 1 by the rounding mode ('simple': floor, or ceil when
    shrinking), clamped to the input."""
    fl = np.floor(x)
    frac = x - fl
    up = {"round_prefer_floor": frac > 0.5, "round_prefer_ceil": frac >= 0.5,
          "floor": np.zeros_like(frac, dtype=bool), "ceil": frac > 0,
          "simple": frac > 0 if scale < 1 else np.zeros_like(frac, dtype=bool)}[nearest_mode]
    return np.clip(fl + up, 0, n_in - 1).astype(np.int64)


def _row_sum(w):
    """Sum of each row, columns added left to right (a fixed order on every machine)."""
    s = w[:, 0].copy()
    for k in range(1, w.shape[1]):
        s = s + w[:, k]
    return s


def _cubic(t, a):
    """Keys' cubic kernel at |t|."""
    t = np.abs(t)
    t2 = t * t
    t3 = t2 * t
    near = (a + 2) * t3 - (a + 3) * t2 + 1
    far = a * t3 - 5 * a * t2 + 8 * a * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def taps(x, mode, scale, n_in, a, antialias, exclude):
    """Tap indices (clamped to the input) and weights, both (n_out, n)."""
    fl = np.floor(x)
    left = np.where(x == fl, x - 1, fl)            # the ratio r = x - left is in (0, 1]
    r = (x - left)[:, None]
    reach = 1 if mode == "linear" else 2
    sf = min(scale, 1.0) if antialias else 1.0
    start = math.floor(-reach / sf) + 1
    k = np.arange(2 - 2 * start)[None, :]
    idx = left[:, None].astype(np.int64) + start + k
    if antialias:
        t = (start + k - r) * sf
        w = np.clip(1 - np.abs(t), 0, 1) if mode == "linear" else _cubic(t, a)
        w = w / _row_sum(w)[:, None]
    elif mode == "linear":
        w = np.concatenate([1 - r, r], axis=1)
    else:
        s = 1 - r
        w = np.concatenate([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                            ((a + 2) * r - (a + 3)) * r * r + 1,
                            ((a + 2) * s - (a + 3)) * s * s + 1,
                            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a],
                           axis=1)
    if exclude:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        total = _row_sum(w)
        w = w / np.where(total == 0, 1.0, total)[:, None]
    return np.clip(idx, 0, n_in - 1), w


def _whole_factors(shape, out, picks):
    """(h, w, kh, kw, planes) where the nearest picks repeat each element of the last two
    axes a whole number of times (pick j = j // k: an upsampling by whole factors, the
    other axes unchanged), else None."""
    if len(shape) < 2 or any(out[d] != shape[d] or
                             not np.array_equal(picks[d], np.arange(out[d]))
                             for d in range(len(shape) - 2)):
        return None
    factors = []
    for d in (-2, -1):
        k, rem = divmod(out[d], shape[d])
        if rem or k < 1 or not np.array_equal(picks[d], np.arange(out[d]) // k):
            return None
        factors.append(k)
    return (shape[-2], shape[-1], factors[0], factors[1], math.prod(shape[:-2]))


# ----------------------------------------------------------------------------- kernel class

class _Plan:
    __slots__ = ("gather", "passes", "fills", "wide", "fill_value", "dtype")


class Resize(OpKernel):
    """X resized to the lengths the scales or sizes input gives (module docstring)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        opset = node.opset
        self.mode = node.attr("mode", "nearest")
        if self.mode not in MODES or (opset < 11 and self.mode == "cubic"):
            node.fail(f"mode {self.mode!r} is not supported at opset {opset}")
        if opset >= 11:
            self.transform = node.attr("coordinate_transformation_mode", "half_pixel")
            self.nearest_mode = node.attr("nearest_mode", "round_prefer_floor")
        else:
            self.transform, self.nearest_mode = "asymmetric", "simple"
        if self.transform not in TRANSFORMS:
            node.fail(f"coordinate_transformation_mode {self.transform!r} is not one of "
                      f"{', '.join(TRANSFORMS)}")
        if opset >= 11 and self.nearest_mode not in NEAREST_MODES:
            node.fail(f"nearest_mode {self.nearest_mode!r} is not one of "
                      f"{', '.join(NEAREST_MODES)}")
        self.cubic_a = float(node.attr("cubic_coeff_a", -0.75))
        self.exclude_outside = int(node.attr("exclude_outside", 0)) != 0
        self.extrapolation_value = float(node.attr("extrapolation_value", 0.0))
        self.antialias = int(node.attr("antialias", 0)) != 0
        axes = node.attr("axes")
        self.axes = None if axes is None else [int(v) for v in axes]
        self.policy = node.attr("keep_aspect_ratio_policy", "stretch")
        if self.policy not in POLICIES:
            node.fail(f"keep_aspect_ratio_policy {self.policy!r} is not one of "
                      f"{', '.join(POLICIES)}")

    # -- inputs ---------------------------------------------------------------------------

    def operands(self, ctx):
        """(roi, scales, sizes) as lists or None when absent; False when a value is not
        known yet."""
        if self.node.opset < 11:
            return None, self._floats(ctx, 1), None
        roi = self._floats(ctx, 1) if self.transform == "tf_crop_and_resize" else None
        return roi, self._floats(ctx, 2), self._sizes(ctx, 3)

    def _floats(self, ctx, i):
        if not ctx.has_input(i):
            return None
        ctx.check_dtype(i, _dt.FLOATS, " (scales or roi)")
        v = ctx.value(i)
        if v is None:
            return False
        v = [float(t) for t in np.asarray(v).reshape(-1)]
        return v or None

    def _sizes(self, ctx, i):
        if not ctx.has_input(i):
            return None
        v = ctx.int_list(i)
        if v is None:
            return False
        return v or None

    # -- shapes -----------------------------------------------------------------------------

    def _lengths(self, ctx, shape, scales, sizes):
        """Output lengths and scales of every axis, and the list of resized axes."""
        r = len(shape)
        norm = unique_axes(ctx, list(range(r)) if self.axes is None else self.axes, r)
        if (scales is None) == (sizes is None):
            ctx.bad_input("exactly one of the scales and sizes inputs must be given (non-empty)")
        given = scales if scales is not None else sizes
        if len(given) != len(norm):
            ctx.bad_input(f"{'scales' if scales is not None else 'sizes'} {given} should have "
                          f"{len(norm)} values (rank {r}, axes {self.axes})")
        out, scale = list(shape), [1.0] * r
        if scales is not None:
            for a, s in zip(norm, scales):
                if not s > 0 or math.isinf(s):
                    ctx.bad_input(f"scale {s} must be positive and finite")
                scale[a] = s
                out[a] = int(math.floor(s * shape[a]))
        else:
            if any(s < 0 for s in sizes):
                ctx.bad_input(f"sizes {sizes} has a negative value")
            if any(shape[a] == 0 for a in norm):
                ctx.bad_input(f"cannot resize the empty axis of {list(shape)} to sizes {sizes}")
            ratios = [s / shape[a] for a, s in zip(norm, sizes)]
            if self.policy != "stretch":
                common = min(ratios) if self.policy == "not_larger" else max(ratios)
                ratios = [common] * len(norm)
                sizes = [int(common * shape[a] + 0.5) for a in norm]
            for a, s, q in zip(norm, sizes, ratios):
                out[a], scale[a] = s, q
        return out, scale, norm

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.dtype(0)
        shape = tuple(ctx.shape(0))
        if not shape:
            ctx.fail("X must have rank 1 or more")
        roi, scales, sizes = self.operands(ctx)
        if roi is False or scales is False or sizes is False:
            ctx.require_run_time_values()
            return
        out, scale, axes = self._lengths(ctx, shape, scales, sizes)
        rois = {}
        if self.transform == "tf_crop_and_resize":
            if roi is None or len(roi) != 2 * len(axes):
                ctx.bad_input(f"roi {roi} should have {2 * len(axes)} values for "
                              f"tf_crop_and_resize")
            rois = {a: (roi[i], roi[i + len(axes)]) for i, a in enumerate(axes)}
        if self.mode != "nearest" and dt not in _dt.NUMERIC:
            ctx.fail(f"{self.mode} resizing of {_dt.name_of(dt)} is not supported",
                     ErrorKind.UNSUPPORTED)
        ctx.set_output(0, dt, out)
        plan = _Plan()
        plan.dtype = dt
        plan.passes, plan.fills = [], []
        plan.gather = None
        changed = []
        for a in axes:
            start, end = rois.get(a, (0.0, 1.0))
            if not (math.isclose(scale[a], 1.0) and out[a] == shape[a]
                    and math.isclose(start, 0.0) and math.isclose(end, 1.0)):
                changed.append(a)
        if 0 in out or not changed:
            ctx.prepared = plan
            return
        wide = np.dtype(np.float32) if dt in (np.float16, np.float32) else np.dtype(np.float64)
        plan.wide = wide
        fill_dt = dt if self.mode == "nearest" else wide
        plan.fill_value = np.array(self.extrapolation_value).astype(fill_dt)
        coords = {a: source_coords(self.transform, out[a], scale[a], shape[a], rois.get(a))
                  for a in changed}
        for a in changed:
            flags = coords[a][1]
            if flags is not None and flags.any():
                plan.fills.append((math.prod(out[:a]), out[a], math.prod(out[a + 1:]),
                                   np.flatnonzero(flags).astype(np.int64)))
        if self.mode == "nearest":
            plan.gather = self._gather_plan(shape, out, scale, coords, not plan.fills)
        else:
            plan.passes = self._passes(shape, out, scale, coords, changed, wide)
        ctx.prepared = plan

    def _gather_plan(self, shape, out, scale, coords, repeat: bool):
        """The gather's tables and function, the picks per axis, and the whole factors of an
        upsampling that repeats elements (``repeat``: no extrapolated rows to fill), or None."""
        strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
        picks = [nearest_index(coords[d][0], self.nearest_mode, scale[d], shape[d])
                 if d in coords else np.arange(n, dtype=np.int64) for d, n in enumerate(out)]
        tabs = [idx * stride for idx, stride in zip(picks, strides)]
        starts = np.cumsum([0] + [len(t) for t in tabs[:-1]]).astype(np.int64)
        rows = math.prod(out[:-1])
        fn = _GATHER.get(False, math.prod(out) >= PARALLEL_MIN and rows > 1)
        return (np.concatenate(tabs).astype(np.uint64), starts, np.array(out, np.int64), rows, fn,
                picks, _whole_factors(shape, out, picks) if repeat else None)

    def _passes(self, shape, out, scale, coords, changed, wide):
        cur = list(shape)
        passes = []
        for a in changed:
            idx, w = taps(coords[a][0], self.mode, scale[a], shape[a], self.cubic_a,
                          self.antialias, self.exclude_outside)
            outer, inner = math.prod(cur[:a]), math.prod(cur[a + 1:])
            cur[a] = out[a]
            tasks = outer * out[a]
            size = tasks * inner * idx.shape[1]
            passes.append((idx.reshape(-1).astype(np.int64), w.reshape(-1).astype(wide),
                           idx.shape[1], shape[a], out[a], inner, tasks, math.prod(cur),
                           size >= PARALLEL_MIN and tasks > 1))
        return passes

    # -- run --------------------------------------------------------------------------------

    def jit_calls(self, ctx: RunContext):
        """Nearest resizing of numbers (a gather, then the extrapolated rows' fills) as
        compiled calls; None for the other modes and for strings."""
        return self._nearest_calls(ctx)

    @staticmethod
    def _nearest_calls(ctx: RunContext):
        p = ctx.prepared
        word = numeric_word(ctx.flat_in[0].dtype)
        if p.gather is None or word is None or ctx.flat_out[0].size == 0:
            return None
        tab, starts, oshape, rows, fn, _picks, factors = p.gather
        y = ctx.flat_out[0].view(word)
        if factors is not None:
            h, w, kh, kw, planes = factors
            return [(_REPEAT.get(False, y.size >= PARALLEL_MIN and planes > 1),
                     (ctx.flat_in[0].view(word), y, h, w, kh, kw, planes))]
        calls = [(fn, (ctx.flat_in[0].view(word), y, tab, starts, oshape, rows))]
        for outer, n, inner, fill_rows in p.fills:
            value = p.fill_value.reshape(1).view(word)[0]
            calls.append((_FILL.get(False, outer * inner * fill_rows.size >= PARALLEL_MIN),
                          (y, outer, n, inner, fill_rows, value)))
        return calls

    def run(self, ctx: RunContext) -> None:
        p = ctx.prepared
        x, y = ctx.inputs[0], ctx.outputs[0]
        if y.size == 0:
            return
        if p.gather is None and not p.passes:
            np.copyto(y, x)
            return
        if p.gather is not None:
            calls = self._nearest_calls(ctx)
            if calls is None:           # strings, complex128: numpy moves them
                y[...] = x[np.ix_(*p.gather[5])]
                self._extrapolate(ctx.flat_out[0], p)
            else:
                make_calls(calls)
            return
        src = ctx.flat_in[0]
        if src.dtype != p.wide:
            w = scratch(ctx, p.wide, src.shape)
            np.copyto(w, src, casting="unsafe")
            src = w
        final = ctx.flat_out[0]
        for k, (idx, wt, n_taps, n_in, n_out, inner, tasks, size, par) in enumerate(p.passes):
            last = k == len(p.passes) - 1
            dst = final if last and final.dtype == p.wide else scratch(ctx, p.wide, (size,))
            _RESAMPLE.get(ctx.exact, par)(src, dst, idx, wt, n_taps, n_in, n_out, inner, tasks)
            src = dst
        self._extrapolate(src, p)
        if src is not final:
            if p.dtype.kind in "iu":
                info = np.iinfo(p.dtype)
                np.rint(src, out=src)
                np.clip(src, info.min, info.max, out=src)
            np.copyto(final, src, casting="unsafe")

    @staticmethod
    def _extrapolate(y, p):
        for outer, n, inner, rows in p.fills:
            word = numeric_word(y.dtype)
            if word is None:
                y.reshape(outer, n, inner)[:, rows, :] = p.fill_value.item()
                continue
            value = p.fill_value.reshape(1).view(word)[0]
            _FILL.get(False, outer * inner * rows.size >= PARALLEL_MIN)(
                y.view(word), outer, n, inner, rows, value)


class Upsample(Resize):
    """Upsample (opsets 7 to 9): Resize with asymmetric coordinates and floor for nearest;
    scales is an attribute at opset 7 and an input from opset 9."""

    def __init__(self, node):
        mode = node.attr("mode", "nearest")
        if mode == "bilinear":
            mode = "linear"
        super().__init__(dataclasses.replace(node, opset=10, attrs={"mode": mode}))
        self.node = node
        self.nearest_mode = "floor"
        scales = node.attr("scales")
        self.scales = None if scales is None else [float(s) for s in scales]
        if node.opset < 9 and self.scales is None:
            node.fail("attribute 'scales' is required")

    def operands(self, ctx):
        if self.node.opset < 9:
            return None, self.scales, None
        return None, self._floats(ctx, 1), None
