"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss through graphrt.Session, compared
with onnx's reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind

from ...helpers import EXACT, bits, check, fails, ints, rand, run, threads


# ----------------------------------------------------------------------------- losses

LOSS_CASES = [
    # (x shape, reduction, weight, ignore_index)
    ((3, 5), "none", False, None),
    ((3, 5), "mean", True, None),
    ((3, 5, 2, 3), "sum", True, 2),
    ((3, 5, 4), "mean", False, 1),
    ((2, 4, 3), "mean", True, -1),
    ((2, 4, 3, 2), "none", False, -5),
    ((3, 5), "sum", True, 10),
]


def loss_inputs(shape, weight, ignore, dtype=np.float32, seed=0):
    x = rand(shape, dtype, seed)
    t = ints(shape[:1] + shape[2:], 0, shape[1], np.int64, seed + 1)
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    return [x, t] + ([rand(shape[1:2], dtype, seed + 2)] if weight else [])


@pytest.mark.parametrize("shape,reduction,weight,ignore", LOSS_CASES)
def test_nll_loss(shape, reduction, weight, ignore):
    attrs = {"reduction": reduction} | ({"ignore_index": ignore} if ignore is not None else {})
    inputs = loss_inputs(shape, weight, ignore)
    check("NegativeLogLikelihoodLoss", inputs, attrs, opset=22, rtol=1e-5, atol=1e-6)
    check("NegativeLogLikelihoodLoss", inputs, attrs, opset=13, options=EXACT, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,reduction,weight,ignore", LOSS_CASES)
def test_softmax_cross_entropy(shape, reduction, weight, ignore):
    attrs = {"reduction": reduction} | ({"ignore_index": ignore} if ignore is not None else {})
    inputs = loss_inputs(shape, weight, ignore, seed=3)
    check("SoftmaxCrossEntropyLoss", inputs, attrs, opset=13, n_out=2, rtol=1e-5, atol=1e-6)
    check("SoftmaxCrossEntropyLoss", inputs, attrs, opset=13, n_out=1, rtol=1e-5, atol=1e-6)
    check("SoftmaxCrossEntropyLoss", inputs, attrs, opset=13, n_out=2, options=EXACT, rtol=1e-5,
          atol=1e-6)


def test_losses_other_types():
    x, t, w = loss_inputs((4, 3, 5), True, None, np.float64)
    check("SoftmaxCrossEntropyLoss", [x, t.astype(np.int32), w], {}, 13, n_out=2, rtol=1e-12,
          atol=1e-6)
    x, t, w = loss_inputs((4, 3), True, None, np.float16)
    check("NegativeLogLikelihoodLoss", [x, t, w], {"reduction": "none"}, 22, rtol=1e-3, atol=1e-6)
    check("SoftmaxCrossEntropyLoss", [x, t, w], {}, 13, n_out=2, rtol=2e-3, atol=2e-3)


def test_loss_all_ignored_mean_is_nan_and_errors():
    x = rand((2, 3))
    got = run("NegativeLogLikelihoodLoss", [x, np.array([1, 1])], {"ignore_index": 1})[0]
    assert got.shape == () and np.isnan(got)
    msg = fails(ErrorKind.INVALID_INPUT, "NegativeLogLikelihoodLoss", [x, np.array([0, 3])])
    assert "target 3" in msg
    fails(ErrorKind.INVALID_INPUT, "SoftmaxCrossEntropyLoss", [x, np.array([-1, 0])])
    fails(ErrorKind.INVALID_MODEL, "NegativeLogLikelihoodLoss", [x, np.array([0, 1, 2])])
    fails(ErrorKind.INVALID_MODEL, "NegativeLogLikelihoodLoss", [x, np.array([0, 1]), rand(2)])
    fails(ErrorKind.INVALID_MODEL, "NegativeLogLikelihoodLoss", [x, np.array([0, 1])],
          {"reduction": "max"})


def test_softmax_cross_entropy_exact_bits_do_not_depend_on_threads():
    inputs = loss_inputs((64, 300, 5), True, None, seed=7)       # parallel, 300 classes
    got = [run("SoftmaxCrossEntropyLoss", inputs, {"reduction": "none"}, 13, n_out=2,
               options=threads(n)) for n in (1, 2)]
    for a, b in zip(*got):
        np.testing.assert_array_equal(bits(a), bits(b))
