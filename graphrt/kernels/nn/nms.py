"""NonMaxSuppression: greedy selection of boxes per batch and class.

For each batch b and class c, the boxes whose score is above score_threshold (all boxes
when that input is absent) are visited best first (higher score first, lower index first
among equal scores; NaN scores last); a box is selected unless its IoU with an already
selected box of (b, c) is strictly greater than iou_threshold, until
max_output_boxes_per_class are selected (absent, empty or negative: 0). The output is
[selected, 3] int64 rows (b, c, box), b then c ascending, best first within (b, c).

Boxes are [y1, x1, y2, x2] with any two opposite corners (center_point_box=0) or
[x_centre, y_centre, width, height] (center_point_box=1). IoU = intersection / (area1 +
area2 - intersection), in float32 like the boxes, each operation rounded on its own (no
FMA in either variant); an empty intersection, or a box of no area, suppresses nothing.
Only compares and IEEE operations: exact.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...errors import ErrorKind
from ..core.base import OpKernel, RunContext, scratch
from ..core.jit import Variants

EXACT = False
F32 = np.dtype(np.float32)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _corners(boxes, p, centre):
    """(x_min, x_max, y_min, y_max) of the box at boxes[p:p+4]."""
    if centre:
        hw = boxes[p + 2] / np.float32(2.0)
        hh = boxes[p + 3] / np.float32(2.0)
        return boxes[p] - hw, boxes[p] + hw, boxes[p + 1] - hh, boxes[p + 1] + hh
    y1, x1, y2, x2 = boxes[p], boxes[p + 1], boxes[p + 2], boxes[p + 3]
    return min(x1, x2), max(x1, x2), min(y1, y2), max(y1, y2)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _suppresses(boxes, p, q, centre, iou_max):
    """Whether the boxes at p and q overlap with an IoU above iou_max."""
    ax0, ax1, ay0, ay1 = _corners(boxes, p, centre)
    bx0, bx1, by0, by1 = _corners(boxes, q, centre)
    ix = min(ax1, bx1) - max(ax0, bx0)
    iy = min(ay1, by1) - max(ay0, by0)
    if not (ix > 0 and iy > 0):
        return False
    inter = ix * iy
    area_a = (ax1 - ax0) * (ay1 - ay0)
    area_b = (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b
    union = union - inter
    if not (inter > 0 and area_a > 0 and area_b > 0 and union > 0):
        return False
    return inter / union > iou_max


def _select(boxes, order, n_boxes, n_classes, scores, cut, use_cut, iou_max, keep, centre,
            picked, out):
    """order: per (b, c) row the box indices best first; picked: scratch of keep entries.
    Writes the (b, c, box) rows to out and returns their count."""
    count = 0
    for row in range(order.size // n_boxes if n_boxes else 0):
        b = row // n_classes
        base = row * n_boxes
        got = 0
        for r in range(n_boxes):
            if got >= keep:
                break
            k = order[base + r]
            if use_cut and not scores[base + k] > cut:
                continue
            p = (b * n_boxes + k) * 4
            ok = True
            for s in range(got):
                if _suppresses(boxes, p, (b * n_boxes + picked[s]) * 4, centre, iou_max):
                    ok = False
                    break
            if ok:
                picked[got] = k
                got += 1
                out[3 * count] = b
                out[3 * count + 1] = row - b * n_classes
                out[3 * count + 2] = k
                count += 1
    return count


_SELECT = Variants(_select, "nms_select")


class NonMaxSuppression(OpKernel):
    supports_exact = True
    outputs_data_dependent = True

    def __init__(self, node):
        super().__init__(node)
        self.centre = int(node.attr("center_point_box", 0))
        if self.centre not in (0, 1):
            node.fail(f"center_point_box must be 0 or 1, got {self.centre}")

    def run(self, ctx: RunContext) -> None:
        boxes, scores = ctx.inputs[0], ctx.inputs[1]
        _check(ctx, boxes, scores)
        keep = _optional_scalar(ctx, 2, np.int64, 0)
        iou_max = _optional_scalar(ctx, 3, F32, 0.0)
        cut = _optional_scalar(ctx, 4, F32, None)
        if not 0.0 <= iou_max <= 1.0:
            ctx.node.fail(f"iou_threshold {iou_max} is not in [0, 1]", ErrorKind.INVALID_INPUT)
        batches, n_classes, n_boxes = scores.shape
        keep = max(0, min(int(keep), n_boxes))
        # best first, stable: lower index first among equal scores; NaN last
        rows = scores.reshape(-1, max(n_boxes, 1))
        order = np.argsort(-rows, axis=-1, kind="stable").astype(np.int64).reshape(-1)
        found = scratch(ctx, np.int64, (batches * n_classes * keep * 3,))
        picked = scratch(ctx, np.int64, (max(keep, 1),))
        count = _SELECT.get(ctx.exact)(
            ctx.flat_in[0], order, n_boxes, n_classes, ctx.flat_in[1],
            F32.type(0.0 if cut is None else cut), cut is not None, F32.type(iou_max), keep,
            bool(self.centre), picked, found)
        out = ctx.allocate_output(0, np.int64, (count, 3))
        out.reshape(-1)[...] = found[:3 * count]


def _check(ctx: RunContext, boxes, scores) -> None:
    for i, a in enumerate((boxes, scores)):
        if a.dtype != F32:
            ctx.node.fail(f"input {i} must be float32, got {a.dtype}", ErrorKind.UNSUPPORTED)
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 \
            or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        ctx.node.fail(f"boxes {list(boxes.shape)} and scores {list(scores.shape)} are not "
                      "[batches, boxes, 4] and [batches, classes, boxes]",
                      ErrorKind.INVALID_INPUT)


def _optional_scalar(ctx: RunContext, i: int, dtype, default):
    """Input i's single value (absent or empty: ``default``)."""
    a = ctx.inputs[i] if i < len(ctx.inputs) else None
    if a is None or a.size == 0:
        return default
    if a.dtype != dtype:
        ctx.node.fail(f"input {i} must be {np.dtype(dtype).name}, got {a.dtype}")
    if a.size != 1:
        ctx.node.fail(f"input {i} must be a scalar, got shape {list(a.shape)}",
                      ErrorKind.INVALID_INPUT)
    return a.reshape(-1)[0]
