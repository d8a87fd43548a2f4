"""RoiAlign through graphrt.Session, compared with onnx's reference evaluator."""
from __future__ import annotations

import itertools

import numpy as np

from graphrt import ErrorKind

from ...helpers import EXACT, close, expect_error, i64, ours, rand, reference


F32 = np.float32


# ----------------------------------------------------------------------------- RoiAlign

def test_roi_align():
    x = rand((2, 3, 10, 12), seed=16)
    rois = np.array([[0, 0, 9, 9], [1.5, 2.2, 7.7, 5.1], [-3, -2, 15, 14], [4, 4, 4.2, 4.1],
                     [11, 9, 13, 12]], F32)
    batch = i64(0, 1, 0, 1, 1)
    for mode, transform, ratio, scale in itertools.product(
            ["avg", "max"], ["half_pixel", "output_half_pixel"], [0, 2], [1.0, 0.5]):
        attrs = {"mode": mode, "coordinate_transformation_mode": transform,
                 "sampling_ratio": ratio, "spatial_scale": scale, "output_height": 3,
                 "output_width": 4}
        close(ours("RoiAlign", [x, rois, batch], attrs, opset=16),
              reference("RoiAlign", [x, rois, batch], attrs, opset=16), 1e-5, 1e-6)
    # opset 10 has output_half_pixel coordinates; exact mode gives the same values
    attrs = {"output_height": 2, "output_width": 2, "sampling_ratio": 2}
    want = reference("RoiAlign", [x, rois, batch],
                     dict(attrs, coordinate_transformation_mode="output_half_pixel"), opset=16)
    close(ours("RoiAlign", [x, rois, batch], attrs, opset=10), want, 1e-5, 1e-6)
    close(ours("RoiAlign", [x, rois, batch], attrs, opset=10, options=EXACT), want, 1e-5, 1e-6)
    expect_error(ErrorKind.INVALID_INPUT, ours, "RoiAlign", [x, rois, i64(0, 1, 2, 0, 0)],
                 opset=16, match="batch_indices")
    expect_error(ErrorKind.INVALID_MODEL, ours, "RoiAlign", [x, rois[:, :3], batch], opset=16)
    expect_error(ErrorKind.INVALID_MODEL, ours, "RoiAlign", [x, rois, batch],
                 {"mode": "sum"}, opset=16)
