"""NonMaxSuppression, BitCast, the random generators and the training optimisers through
graphrt.Session, compared with onnx's reference evaluator and numpy."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import graphrt
from graphrt import ErrorKind, SessionError, SessionOptions

from .test_signal_ops import error, model_of, rand, reference, run

EXACT = SessionOptions(mode="exact")
TRAINING = "ai.onnx.preview.training"


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
    got = run("NonMaxSuppression", inputs, {"center_point_box": centre}, opset=11)[0]
    if keep < 0:                        # as 0 (the reference evaluator fails on it)
        assert got.shape == (0, 3)
        return
    want = reference("NonMaxSuppression", inputs, {"center_point_box": centre}, opset=11)[0]
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want.reshape(-1, 3))
    exact = run("NonMaxSuppression", inputs, {"center_point_box": centre}, opset=11,
                options=EXACT)[0]
    np.testing.assert_array_equal(exact, got)


def test_nms_optional_inputs_and_empty():
    boxes = random_boxes(1, 6, 0, 0)
    scores = rand((1, 1, 6))
    assert run("NonMaxSuppression", [boxes, scores], opset=10)[0].shape == (0, 3)
    every = run("NonMaxSuppression", [boxes, scores, np.array([6], np.int64),
                                      np.array([1.0], np.float32)], opset=10)[0]
    np.testing.assert_array_equal(every[:, 2], np.argsort(-scores[0, 0], kind="stable"))
    none = run("NonMaxSuppression", [np.zeros((2, 0, 4), np.float32),
                                     np.zeros((2, 3, 0), np.float32), np.array([5], np.int64)])
    assert none[0].shape == (0, 3)


def test_nms_errors():
    boxes, scores = random_boxes(1, 6, 0, 0), rand((1, 1, 6))
    keep = np.array([3], np.int64)
    error(ErrorKind.INVALID_INPUT, "NonMaxSuppression", [boxes, rand((1, 1, 5)), keep])
    error(ErrorKind.INVALID_INPUT, "NonMaxSuppression", [boxes[..., :3], scores, keep])
    error(ErrorKind.INVALID_INPUT, "NonMaxSuppression",
          [boxes, scores, keep, np.array([1.5], np.float32)])
    error(ErrorKind.INVALID_INPUT, "NonMaxSuppression", [boxes, scores,
                                                         np.array([3, 4], np.int64)])
    error(ErrorKind.UNSUPPORTED, "NonMaxSuppression", [boxes.astype(np.float64),
                                                       scores.astype(np.float64), keep])
    error(ErrorKind.INVALID_MODEL, "NonMaxSuppression", [boxes, scores],
          {"center_point_box": 2})


# ----------------------------------------------------------------------------- BitCast

def _width(dt):
    return {"int4": 4, "uint4": 4, "float4_e2m1fn": 4, "int2": 2, "uint2": 2}.get(
        np.dtype(dt).name, np.dtype(dt).itemsize * 8)


TYPES = [np.int8, np.uint8, np.bool_, ml_dtypes.float8_e4m3fn, np.int16, np.uint16,
         np.float16, ml_dtypes.bfloat16, np.int32, np.uint32, np.float32, np.int64, np.uint64,
         np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("src", TYPES, ids=lambda t: np.dtype(t).name)
def test_bitcast_keeps_every_bit(src):
    from onnx import helper
    raw = np.random.default_rng(3).integers(0, 256, 24 * np.dtype(src).itemsize, np.uint8)
    if np.dtype(src) == np.bool_:
        raw &= 1
    x = raw.view(src).reshape(2, 3, -1)
    for dst in TYPES:
        if _width(dst) != _width(src):
            continue
        got = run("BitCast", [x], {"to": helper.np_dtype_to_tensor_dtype(np.dtype(dst))},
                  opset=26, options=EXACT)[0]
        assert got.dtype == np.dtype(dst) and got.shape == x.shape
        assert got.tobytes() == x.tobytes()


def test_bitcast_narrow_scalar_and_errors():
    from onnx import TensorProto
    x = np.array([-8, -1, 0, 7], ml_dtypes.int4)
    got = run("BitCast", [x], {"to": TensorProto.UINT4}, opset=26)[0]
    np.testing.assert_array_equal(got.astype(np.int64), [8, 15, 0, 7])
    s = run("BitCast", [np.array(1.0, np.float32)], {"to": TensorProto.INT32}, opset=26)[0]
    assert s.shape == () and s == 0x3F800000
    assert run("BitCast", [np.zeros((0, 3), np.int64)], {"to": TensorProto.DOUBLE},
               opset=26)[0].shape == (0, 3)
    assert "width" in error(ErrorKind.INVALID_MODEL, "BitCast", [np.zeros(3, np.float32)],
                            {"to": TensorProto.INT64}, opset=26)
    error(ErrorKind.INVALID_MODEL, "BitCast", [np.zeros(3, np.float32)],
          {"to": TensorProto.STRING}, opset=26)
    with pytest.raises(SessionError) as info:
        graphrt.Session(model_of("BitCast", [np.zeros(2, np.int8)], {"to": 2}, opset=25))
    assert info.value.kind == ErrorKind.UNSUPPORTED_OPERATOR


# ----------------------------------------------------------------------------- random

@pytest.mark.parametrize("op,attrs", [
    ("RandomUniform", {"shape": [3, 4], "low": -2.0, "high": 5.0}),
    ("RandomUniform", {"shape": [5], "dtype": 11}),
    ("RandomNormal", {"shape": [2, 3], "mean": 1.0, "scale": 3.0}),
    ("RandomNormal", {"shape": [7], "dtype": 11})])
def test_seeded_generators_match_reference(op, attrs):
    attrs = dict(attrs, seed=5.0)
    got = run(op, [], attrs)[0]
    want = reference(op, [], attrs)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)            # the same stream, the same rounding


@pytest.mark.parametrize("op", ["RandomUniformLike", "RandomNormalLike"])
def test_seeded_like_generators(op):
    x = rand((3, 5))
    for attrs in ({"seed": 2.0}, {"seed": 2.0, "dtype": 11}):
        got = run(op, [x], attrs)[0]
        np.testing.assert_array_equal(got, reference(op, [x], attrs)[0])
    half = run(op, [x.astype(np.float16)], {"seed": 1.0})[0]
    assert half.dtype == np.float16 and half.shape == (3, 5)
    error(ErrorKind.UNSUPPORTED, op, [x.astype(np.int32)])
    error(ErrorKind.UNSUPPORTED, op, [x], {"dtype": 6})


def test_unseeded_generators_draw_anew_every_run():
    x = rand((200,))
    model = model_of("RandomUniformLike", [x], {"low": 1.0, "high": 2.0}, consts=(0,))
    sess = graphrt.Session(model)               # a constant input: still not folded
    a, b = sess.run(None, {})[0], sess.run(None, {})[0]
    assert a.shape == (200,) and a.dtype == np.float32
    assert ((a >= 1) & (a < 2)).all() and not np.array_equal(a, b)
    seeded = graphrt.Session(model_of("RandomNormal", [], {"shape": [50], "seed": 9.0}))
    np.testing.assert_array_equal(seeded.run(None, {})[0], seeded.run(None, {})[0])
    with pytest.raises(SessionError) as info:
        graphrt.Session(model_of("RandomNormal", [], {"shape": [3]}), EXACT)
    assert info.value.kind == ErrorKind.EXACT_MODE_UNAVAILABLE


def test_bernoulli():
    p = np.random.default_rng(0).uniform(0, 1, (4, 25)).astype(np.float32)
    for attrs in ({"seed": 3.0}, {"seed": 3.0, "dtype": 11}, {"seed": 4.0, "dtype": 9}):
        got = run("Bernoulli", [p], attrs, opset=15)[0]
        want = reference("Bernoulli", [p], attrs, opset=15)[0]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    edges = run("Bernoulli", [np.array([0.0, 1.0, 1.0, 0.0])], opset=15)[0]
    np.testing.assert_array_equal(edges, [0, 1, 1, 0])
    error(ErrorKind.INVALID_INPUT, "Bernoulli", [np.array([0.5, 1.5], np.float32)], opset=15)
    error(ErrorKind.INVALID_INPUT, "Bernoulli", [np.array([np.nan], np.float32)], opset=15)
    error(ErrorKind.UNSUPPORTED, "Bernoulli", [np.ones(2, np.int32)], opset=15)


def test_multinomial():
    with np.errstate(divide="ignore"):
        logits = np.log(np.array([[0.2, 0.0, 0.5, 0.3], [1.0, 0.0, 0.0, 0.0]], np.float32))
    got = run("Multinomial", [logits], {"sample_size": 4000, "seed": 1.0}, opset=7)[0]
    assert got.dtype == np.int32 and got.shape == (2, 4000)
    freq = np.bincount(got[0], minlength=4) / 4000
    np.testing.assert_allclose(freq, [0.2, 0.0, 0.5, 0.3], atol=0.03)
    assert (got[1] == 0).all()
    again = run("Multinomial", [logits], {"sample_size": 4000, "seed": 1.0}, opset=7)[0]
    np.testing.assert_array_equal(got, again)
    wide = run("Multinomial", [logits.astype(np.float16)], {"dtype": 7, "sample_size": 3},
               opset=7)[0]
    assert wide.dtype == np.int64 and wide.shape == (2, 3) and (wide[:, :] != 1).all()
    assert run("Multinomial", [np.zeros((0, 3), np.float32)], opset=7)[0].shape == (0, 1)
    bad = np.array([[0.0, np.nan]], np.float32)
    error(ErrorKind.INVALID_INPUT, "Multinomial", [bad], opset=7)
    error(ErrorKind.INVALID_INPUT, "Multinomial", [np.full((1, 2), -np.inf, np.float32)],
          opset=7)
    error(ErrorKind.INVALID_MODEL, "Multinomial", [np.zeros(3, np.float32)], opset=7)
    error(ErrorKind.UNSUPPORTED, "Multinomial", [logits], {"dtype": 1}, opset=7)


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
    got = run(op, inputs, attrs, n_out=n_out, domain=TRAINING)
    want = reference(op, inputs, attrs, n_out=n_out, domain=TRAINING)
    exact = run(op, inputs, attrs, n_out=n_out, domain=TRAINING, options=EXACT)
    for g, w, e in zip(got, want, exact):
        assert g.dtype == np.float32 and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(e, g, rtol=1e-6, atol=1e-7)


def test_optimiser_float64_nan_and_errors():
    attrs = {"alpha": 0.9, "beta": 0.99}
    inputs = optimiser("Adam", 1, 4, 5, np.float64)
    got = run("Adam", inputs, attrs, n_out=3, domain=TRAINING)
    want = reference("Adam", inputs, attrs, n_out=3, domain=TRAINING)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    inputs[2] = np.array([np.nan, 1.0, 2.0])
    x_new = run("Adam", inputs, attrs, n_out=3, domain=TRAINING, options=EXACT)[0]
    assert x_new[:1].view(np.uint64)[0] == np.array([np.nan]).view(np.uint64)[0]
    momentum = {"alpha": 0.9, "beta": 0.3, "mode": "standard", "norm_coefficient": 0.0}
    bad = optimiser("Momentum", 1, 3, 1)
    bad[4] = np.ones(4, np.float32)
    error(ErrorKind.INVALID_MODEL, "Momentum", bad, momentum, domain=TRAINING)
    with pytest.raises(SessionError) as info:       # R, T and 2 groups is not 3 groups
        graphrt.Session(model_of("Adagrad", optimiser("Adagrad", 1, 2, 0), {}, n_out=1,
                                 domain=TRAINING))
    assert info.value.kind == ErrorKind.INVALID_MODEL
    with pytest.raises(SessionError):
        graphrt.Session(model_of("Momentum", optimiser("Momentum", 1, 3, 0),
                                 dict(momentum, mode="heavy"), n_out=2, domain=TRAINING))
