"""The random generators (RandomUniform, RandomNormal and their Like forms, Bernoulli,
Multinomial) through graphrt.Session: seeded draws against onnx's reference evaluator (the
same stream), unseeded ones drawn anew, frequencies against the probabilities."""
from __future__ import annotations

import numpy as np
import pytest

import graphrt
from graphrt import ErrorKind, SessionError

from ...helpers import EXACT, fails, one_node, rand, reference, run


# ----------------------------------------------------------------------------- random

@pytest.mark.parametrize("op,attrs", [
    ("RandomUniform", {"shape": [3, 4], "low": -2.0, "high": 5.0}),
    ("RandomUniform", {"shape": [5], "dtype": 11}),
    ("RandomNormal", {"shape": [2, 3], "mean": 1.0, "scale": 3.0}),
    ("RandomNormal", {"shape": [7], "dtype": 11})])
def test_seeded_generators_match_reference(op, attrs):
    attrs = dict(attrs, seed=5.0)
    got = run(op, [], attrs, opset=20)[0]
    want = reference(op, [], attrs, opset=20)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)            # the same stream, the same rounding


@pytest.mark.parametrize("op", ["RandomUniformLike", "RandomNormalLike"])
def test_seeded_like_generators(op):
    x = rand((3, 5))
    for attrs in ({"seed": 2.0}, {"seed": 2.0, "dtype": 11}):
        got = run(op, [x], attrs, opset=20)[0]
        np.testing.assert_array_equal(got, reference(op, [x], attrs, opset=20))
    half = run(op, [x.astype(np.float16)], {"seed": 1.0}, opset=20)[0]
    assert half.dtype == np.float16 and half.shape == (3, 5)
    fails(ErrorKind.UNSUPPORTED, op, [x.astype(np.int32)], opset=20)
    fails(ErrorKind.UNSUPPORTED, op, [x], {"dtype": 6}, opset=20)


def test_unseeded_generators_draw_anew_every_run():
    x = rand((200,))
    model = one_node("RandomUniformLike", [x], {"low": 1.0, "high": 2.0}, opset=20, consts=(0,))
    sess = graphrt.Session(model)               # a constant input: still not folded
    a, b = sess.run(None, {})[0], sess.run(None, {})[0]
    assert a.shape == (200,) and a.dtype == np.float32
    assert ((a >= 1) & (a < 2)).all() and not np.array_equal(a, b)
    seeded = graphrt.Session(one_node("RandomNormal", [], {"shape": [50], "seed": 9.0}, opset=20))
    np.testing.assert_array_equal(seeded.run(None, {})[0], seeded.run(None, {})[0])
    with pytest.raises(SessionError) as info:
        graphrt.Session(one_node("RandomNormal", [], {"shape": [3]}, opset=20), EXACT)
    assert info.value.kind == ErrorKind.EXACT_MODE_UNAVAILABLE


def test_bernoulli():
    p = np.random.default_rng(0).uniform(0, 1, (4, 25)).astype(np.float32)
    for attrs in ({"seed": 3.0}, {"seed": 3.0, "dtype": 11}, {"seed": 4.0, "dtype": 9}):
        got = run("Bernoulli", [p], attrs, opset=15)[0]
        want = reference("Bernoulli", [p], attrs, opset=15)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    edges = run("Bernoulli", [np.array([0.0, 1.0, 1.0, 0.0])], opset=15)[0]
    np.testing.assert_array_equal(edges, [0, 1, 1, 0])
    fails(ErrorKind.INVALID_INPUT, "Bernoulli", [np.array([0.5, 1.5], np.float32)], opset=15)
    fails(ErrorKind.INVALID_INPUT, "Bernoulli", [np.array([np.nan], np.float32)], opset=15)
    fails(ErrorKind.UNSUPPORTED, "Bernoulli", [np.ones(2, np.int32)], opset=15)


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
    fails(ErrorKind.INVALID_INPUT, "Multinomial", [bad], opset=7)
    fails(ErrorKind.INVALID_INPUT, "Multinomial", [np.full((1, 2), -np.inf, np.float32)],
          opset=7)
    fails(ErrorKind.INVALID_MODEL, "Multinomial", [np.zeros(3, np.float32)], opset=7)
    fails(ErrorKind.UNSUPPORTED, "Multinomial", [logits], {"dtype": 1}, opset=7)
