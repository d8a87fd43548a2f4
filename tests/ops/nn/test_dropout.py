"""Dropout through graphrt.Session: inference (compared with onnx's reference evaluator),
seeded training (against numpy's generator) and opset 7's float mask."""
from __future__ import annotations

import numpy as np

from graphrt import ErrorKind

from ...helpers import check, fails, ours, same


RNG = np.random.default_rng(7)            # the inputs of tests/ops/tensor/test_indexing.py
X34 = RNG.standard_normal((3, 4)).astype(np.float32)
X234 = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def test_dropout_inference_and_seeded_training():
    y, mask = check("Dropout", [X234], opset=13, n_out=2)
    assert mask.dtype == np.bool_ and mask.all()
    check("Dropout", [X234, np.array(0.3, np.float32), np.array(False)], opset=13, n_out=2)
    ours_y, ours_m = ours("Dropout", [X234, np.array(0.5, np.float32), np.array(True)],
                          {"seed": 3}, opset=13, n_out=2)
    np.random.seed(3)
    keep = np.random.uniform(0, 1, X234.shape) >= 0.5
    same(ours_m, keep)
    same(ours_y, np.where(keep, X234 * np.float32(2), 0).astype(np.float32))
    fails(ErrorKind.UNSUPPORTED, "Dropout", [X234, np.array(0.5, np.float32), np.array(True)],
          opset=13)
    fails(ErrorKind.INVALID_INPUT, "Dropout", [X234, np.array(1.0, np.float32), np.array(True)],
          {"seed": 1}, opset=13)


def test_dropout_old_mask_type():
    _, mask = ours("Dropout", [X34], {"ratio": 0.2}, opset=7, n_out=2)
    same(mask, np.ones(X34.shape, np.float32))
