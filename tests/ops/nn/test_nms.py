"""NonMaxSuppression through graphrt.Session, compared with onnx's reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind

from ...helpers import EXACT, fails, rand, reference, run


# ----------------------------------------------------------------------------- NonMaxSuppression

def random_boxes(batches, n, centre, seed):
    rng = np.random.default_rng(seed)
    if centre:
        xy = rng.uniform(0, 10, (batches, n, 2))
        wh = rng.uniform(0.5, 4, (batches, n, 2))
        return np.concatenate([xy, wh], -1).astype(np.float32)
    a = rng.uniform(0, 10, (batches, n, 2))
    b = a + rng.uniform(-4, 4, (batches, n, 2))     # any two opposite corners
    return np.concatenate([a, b], -1).astype(np.float32)


@pytest.mark.parametrize("centre", [0, 1])
@pytest.mark.parametrize("keep,iou,cut", [(3, 0.5, None), (100, 0.3, 0.2), (0, 0.5, None),
                                          (-2, 0.5, 0.0), (5, 0.0, 0.7), (40, 1.0, None)])
def test_nms_matches_reference(centre, keep, iou, cut):
    boxes = random_boxes(2, 40, centre, seed=keep + 7)
    scores = np.random.default_rng(1).uniform(0, 1, (2, 3, 40)).astype(np.float32)
    scores[0, 0, :4] = 0.5                          # ties: lower index first
    inputs = [boxes, scores, np.array([keep], np.int64), np.array([iou], np.float32),
              None if cut is None else np.array([cut], np.float32)]
    got = run("NonMaxSuppression", inputs, {"center_point_box": centre}, opset=11, trim=True)[0]
    if keep < 0:                        # as 0 (the reference evaluator fails on it)
        assert got.shape == (0, 3)
        return
    want = reference("NonMaxSuppression", inputs, {"center_point_box": centre}, opset=11,
                     trim=True)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want.reshape(-1, 3))
    exact = run("NonMaxSuppression", inputs, {"center_point_box": centre}, opset=11,
                options=EXACT, trim=True)[0]
    np.testing.assert_array_equal(exact, got)


def test_nms_optional_inputs_and_empty():
    boxes = random_boxes(1, 6, 0, 0)
    scores = rand((1, 1, 6))
    assert run("NonMaxSuppression", [boxes, scores], opset=10)[0].shape == (0, 3)
    every = run("NonMaxSuppression", [boxes, scores, np.array([6], np.int64),
                                      np.array([1.0], np.float32)], opset=10)[0]
    np.testing.assert_array_equal(every[:, 2], np.argsort(-scores[0, 0], kind="stable"))
    none = run("NonMaxSuppression", [np.zeros((2, 0, 4), np.float32),
                                     np.zeros((2, 3, 0), np.float32), np.array([5], np.int64)],
               opset=20)
    assert none[0].shape == (0, 3)


def test_nms_errors():
    boxes, scores = random_boxes(1, 6, 0, 0), rand((1, 1, 6))
    keep = np.array([3], np.int64)
    fails(ErrorKind.INVALID_INPUT, "NonMaxSuppression", [boxes, rand((1, 1, 5)), keep], opset=20)
    fails(ErrorKind.INVALID_INPUT, "NonMaxSuppression", [boxes[..., :3], scores, keep], opset=20)
    fails(ErrorKind.INVALID_INPUT, "NonMaxSuppression",
          [boxes, scores, keep, np.array([1.5], np.float32)], opset=20)
    fails(ErrorKind.INVALID_INPUT, "NonMaxSuppression", [boxes, scores,
                                                         np.array([3, 4], np.int64)], opset=20)
    fails(ErrorKind.UNSUPPORTED, "NonMaxSuppression", [boxes.astype(np.float64),
                                                       scores.astype(np.float64), keep], opset=20)
    fails(ErrorKind.INVALID_MODEL, "NonMaxSuppression", [boxes, scores],
          {"center_point_box": 2}, opset=20)
