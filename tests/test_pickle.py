"""Model and Session pickle as (model bytes, options) and rebuild to give the same results."""
import multiprocessing
import pickle

import numpy as np
import pytest

import graphrt

from . import models
from .helpers import OPS
from .models import custom_model


def x_rows(n=9):
    return np.random.default_rng(0).standard_normal((n, 16)).astype(np.float32)


def test_session_round_trip_keeps_options_and_bits():
    opts = graphrt.SessionOptions(intra_op_threads=1, max_cached_plans=3, optimization_level="basic")
    sess = graphrt.Session(models.transformer_block(), opts)
    x = np.random.default_rng(1).standard_normal((2, 5, 32)).astype(np.float32)
    (y,) = sess.run(None, {"x": x})
    copy = pickle.loads(pickle.dumps(sess))
    assert copy is not sess and copy.options == opts
    assert [i.name for i in copy.inputs] == ["x"] and copy.inputs[0].dims == ("batch", "seq", 32)
    (y2,) = copy.run(None, {"x": x})
    assert np.array_equal(y.view(np.uint32), y2.view(np.uint32))
    assert np.array_equal(copy.run(["p"], {"x": x})[0], sess.run(["p"], {"x": x})[0])


def test_exact_session_round_trip_gives_the_same_bits():
    sess = graphrt.Session(models.mlp(gemm=False), graphrt.SessionOptions(mode="exact"))
    x = x_rows(17)
    (y,) = sess.run(None, {"x": x})
    copy = pickle.loads(pickle.dumps(sess))
    assert copy.options.exact
    (y2,) = copy.run(None, {"x": x})
    assert np.array_equal(y.view(np.uint32), y2.view(np.uint32))


def test_model_round_trip_and_independence():
    model = graphrt.load(models.mlp(), mode="exact")
    x = x_rows()
    blob = pickle.dumps(model)
    copy = pickle.loads(blob)
    assert isinstance(copy, graphrt.Model) and copy.session.options.mode is graphrt.Mode.EXACT
    assert np.array_equal(copy(x), model(x))
    model.close()                                  # the copy is a session of its own
    assert np.array_equal(pickle.loads(blob)(x), copy(x))
    with pytest.raises(graphrt.SessionError):
        model.session.run(None, {"x": x})


def _score_in_child(blob, x):
    return pickle.loads(blob)(x)


def test_a_pickled_model_runs_in_another_process():
    model = graphrt.load(models.mlp(), mode="exact", intra_op_threads=1)
    x = x_rows(33)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        y = pool.apply(_score_in_child, (pickle.dumps(model), x))
    assert np.array_equal(y.view(np.uint32), model(x).view(np.uint32))


def test_a_custom_operator_session_pickles_with_its_table():
    sess = graphrt.Session(custom_model(), operators=OPS)
    x = np.ones((2, 5), np.float32)
    copy = pickle.loads(pickle.dumps(sess))
    assert np.array_equal(copy.run(None, {"x": x})[0], sess.run(None, {"x": x})[0])
