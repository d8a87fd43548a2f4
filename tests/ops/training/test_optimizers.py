"""The training optimisers (Momentum, Adagrad and Adam of ai.onnx.preview.training) through
graphrt.Session, compared with onnx's reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

import graphrt
from graphrt import ErrorKind, SessionError

from ...helpers import EXACT, fails, one_node, reference, run


TRAINING = "ai.onnx.preview.training"


# ----------------------------------------------------------------------------- training

def optimiser(op, n, groups, t, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(3,), (2, 4)][:n]
    tensors = []
    for g in range(groups):
        for s in shapes:
            v = rng.standard_normal(s)
            tensors.append(np.abs(v).astype(dtype) if op != "Momentum" and g == groups - 1
                           else v.astype(dtype))
    return [np.array(0.1, dtype), np.array(t, np.int64)] + tensors


@pytest.mark.parametrize("op,attrs,groups", [
    ("Momentum", {"alpha": 0.9, "beta": 0.3, "mode": "standard", "norm_coefficient": 0.01}, 3),
    ("Momentum", {"alpha": 0.9, "beta": 0.3, "mode": "nesterov", "norm_coefficient": 0.01}, 3),
    ("Adagrad", {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.01}, 3),
    ("Adam", {"alpha": 0.9, "beta": 0.99, "epsilon": 1e-3, "norm_coefficient": 0.01,
              "norm_coefficient_post": 0.05}, 4)])
@pytest.mark.parametrize("t", [0, 3])
@pytest.mark.parametrize("n", [1, 2])
def test_optimisers_match_reference(op, attrs, groups, t, n):
    inputs = optimiser(op, n, groups, t)
    n_out = (groups - 1) * n
    got = run(op, inputs, attrs, opset=20, n_out=n_out, domain=TRAINING)
    want = reference(op, inputs, attrs, opset=20, n_out=n_out, domain=TRAINING)
    exact = run(op, inputs, attrs, opset=20, n_out=n_out, domain=TRAINING, options=EXACT)
    for g, w, e in zip(got, want, exact):
        assert g.dtype == np.float32 and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(e, g, rtol=1e-6, atol=1e-7)


def test_optimiser_float64_nan_and_errors():
    attrs = {"alpha": 0.9, "beta": 0.99}
    inputs = optimiser("Adam", 1, 4, 5, np.float64)
    got = run("Adam", inputs, attrs, opset=20, n_out=3, domain=TRAINING)
    want = reference("Adam", inputs, attrs, opset=20, n_out=3, domain=TRAINING)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    inputs[2] = np.array([np.nan, 1.0, 2.0])
    x_new = run("Adam", inputs, attrs, opset=20, n_out=3, domain=TRAINING, options=EXACT)[0]
    assert x_new[:1].view(np.uint64)[0] == np.array([np.nan]).view(np.uint64)[0]
    momentum = {"alpha": 0.9, "beta": 0.3, "mode": "standard", "norm_coefficient": 0.0}
    bad = optimiser("Momentum", 1, 3, 1)
    bad[4] = np.ones(4, np.float32)
    fails(ErrorKind.INVALID_MODEL, "Momentum", bad, momentum, opset=20, domain=TRAINING)
    with pytest.raises(SessionError) as info:       # R, T and 2 groups is not 3 groups
        graphrt.Session(one_node("Adagrad", optimiser("Adagrad", 1, 2, 0), {}, opset=20,
                                 n_out=1, domain=TRAINING))
    assert info.value.kind == ErrorKind.INVALID_MODEL
    with pytest.raises(SessionError):
        graphrt.Session(one_node("Momentum", optimiser("Momentum", 1, 3, 0),
                                 dict(momentum, mode="heavy"), opset=20, n_out=2, domain=TRAINING))
