"""RoiAlign: X (N, C, H, W), rois (R, 4) = (x1, y1, x2, y2), batch_indices (R,) ->
Y (R, C, output_height, output_width).

Per roi: start = roi * spatial_scale - o and end likewise, with o = 0.5
(half_pixel, the default from opset 16) or 0 (output_half_pixel, where the roi extents are
at least 1); bin = extent / output length; each bin has g_h x g_w samples (sampling_ratio,
or ceil(extent / output length) when it is 0) at start + p * bin + (i + 0.5) * bin / g.
A sample beyond [-1, H] x [-1, W] is 0; else its coordinates are clamped at 0 and it is the
bilinear interpolation of its four neighbours (the last row/column repeat at the edge),
positions and sums in float64. avg: acc = 0, acc = acc + (w1 v1 + w2 v2 + w3 v3 + w4 v4) per
sample in row-major order, divided by max(g_h g_w, 1); max: the largest of the weighted
neighbours w_k v_k over all samples (as onnx's reference and onnxruntime define it). One
task per (roi, channel): the bits do not depend on the thread count, and only IEEE
operations are used (exact-mode kernel).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext
from ..core.broadcast import PARALLEL_MIN, put
from ..core.floats import compute_dtype, narrow, result_buffer, widen
from ..core.jit import Variants

EXACT = False
MAX_EXTENT = float(1 << 24)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _cell(p, n, zero):
    """(i0, i1, weight of i1) of the two neighbours of sample position p (taken as 0 below
    0) on an axis of n elements; from the last element on both are the last, weight 0."""
    p = max(p, zero)
    i0 = int(p)
    if i0 >= n - 1:
        i0 = n - 1
        i1 = i0
        p = zero + i0
    else:
        i1 = i0 + 1
    return i0, i1, p - i0


def _roi_align(x, rois, batch, y, c_, h_, w_, oh, ow, ratio, scale, offset, clamp, is_max,
               tasks):
    one = scale / scale
    zero = scale - scale
    for t in prange(tasks):
        r = t // c_
        c = t - r * c_
        xo = (batch[r] * c_ + c) * h_ * w_
        sw = rois[r * 4] * scale - offset
        sh = rois[r * 4 + 1] * scale - offset
        ew = rois[r * 4 + 2] * scale - offset
        eh = rois[r * 4 + 3] * scale - offset
        rw = ew - sw
        rh = eh - sh
        if clamp:
            rw = max(rw, one)
            rh = max(rh, one)
        bh = rh / oh
        bw = rw / ow
        gh = ratio if ratio > 0 else int(math.ceil(rh / oh))
        gw = ratio if ratio > 0 else int(math.ceil(rw / ow))
        count = max(gh * gw, 1)
        for ph in range(oh):
            for pw in range(ow):
                acc = zero
                first = True
                for iy in range(gh):
                    yy = sh + ph * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        xx = sw + pw * bw + (ix + 0.5) * bw / gw
                        if yy < -1.0 or yy > h_ or xx < -1.0 or xx > w_:
                            v = zero
                        else:
                            y0, y1, ly = _cell(yy, h_, zero)
                            x0, x1, lx = _cell(xx, w_, zero)
                            hy = one - ly
                            hx = one - lx
                            v1 = hy * hx * x[xo + y0 * w_ + x0]
                            v2 = hy * lx * x[xo + y0 * w_ + x1]
                            v3 = ly * hx * x[xo + y1 * w_ + x0]
                            v4 = ly * lx * x[xo + y1 * w_ + x1]
                            if is_max:
                                v = max(max(v1, v2), max(v3, v4))
                            else:
                                v = v1 + v2 + v3 + v4
                        if not is_max:
                            acc = acc + v
                        elif first or v > acc:
                            acc = v
                        first = False
                if not is_max:
                    acc = acc / count
                o = (t * oh + ph) * ow + pw
                put(y, o, acc, EXACT)


_ROI_ALIGN = Variants(_roi_align, "roialign", parallel=True)


class RoiAlign(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.mode = node.attr("mode", "avg")
        if self.mode not in ("avg", "max"):
            node.fail(f"mode {self.mode!r} is not avg or max")
        default = "half_pixel" if node.opset >= 16 else "output_half_pixel"
        self.transform = node.attr("coordinate_transformation_mode", default)
        if self.transform not in ("half_pixel", "output_half_pixel"):
            node.fail(f"coordinate_transformation_mode {self.transform!r} is not half_pixel or "
                      f"output_half_pixel")
        self.oh = int(node.attr("output_height", 1))
        self.ow = int(node.attr("output_width", 1))
        self.ratio = int(node.attr("sampling_ratio", 0))
        self.scale = float(node.attr("spatial_scale", 1.0))
        if self.oh < 1 or self.ow < 1 or self.ratio < 0:
            node.fail(f"output_height {self.oh} and output_width {self.ow} must be positive "
                      f"and sampling_ratio {self.ratio} not negative")

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _dt.FLOATS)
        ctx.same_dtype(0, 1)
        ctx.check_dtype(2, frozenset({np.dtype(np.int64)}), " (batch_indices)")
        xs, rs, bs = tuple(ctx.shape(0)), tuple(ctx.shape(1)), tuple(ctx.shape(2))
        if len(xs) != 4:
            ctx.fail(f"X of shape {list(xs)} must have rank 4")
        if len(rs) != 2 or rs[1] != 4 or bs != (rs[0],):
            ctx.fail(f"rois {list(rs)} must be [R, 4] and batch_indices {list(bs)} [R]")
        out = (rs[0], xs[1], self.oh, self.ow)
        ctx.set_output(0, dt, out)
        wide = compute_dtype(dt)
        tasks = rs[0] * xs[1]
        fn = _ROI_ALIGN.get(ctx.exact, math.prod(out) * max(self.ratio, 2) ** 2 >= PARALLEL_MIN
                            and tasks > 1)
        half = self.transform == "half_pixel"
        ctx.prepared = (xs, tasks, wide.type(self.scale), wide.type(0.5 if half else 0.0),
                        not half, fn)

    def run(self, ctx: RunContext) -> None:
        xs, tasks, scale, offset, clamp, fn = ctx.prepared
        if tasks == 0:
            return
        batch = ctx.flat_in[2]
        if batch.min() < 0 or batch.max() >= xs[0]:
            self.node.fail(f"batch_indices must be in [0, {xs[0]})", ErrorKind.INVALID_INPUT)
        if xs[2] * xs[3] == 0:
            self.node.fail(f"cannot align rois on an empty image {list(xs)}",
                           ErrorKind.INVALID_INPUT)
        x = widen(ctx, ctx.flat_in[0])
        rois = widen(ctx, ctx.flat_in[1])
        if not np.isfinite(rois).all():
            self.node.fail("rois must be finite", ErrorKind.INVALID_INPUT)
        if self.ratio == 0 and rois.size:
            # the samples per bin follow the roi size: refuse sizes that would never finish
            extent = float(np.abs(rois).max()) * abs(float(scale))
            if extent > MAX_EXTENT:
                self.node.fail(f"a roi coordinate of {extent:g} (after spatial_scale) is too "
                               f"large for adaptive sampling", ErrorKind.INVALID_INPUT)
        y = result_buffer(ctx, ctx.flat_out[0])
        fn(x, rois, batch, y, xs[1], xs[2], xs[3], self.oh, self.ow, self.ratio, scale, offset,
           clamp, self.mode == "max", tasks)
        narrow(ctx.flat_out[0], y)
