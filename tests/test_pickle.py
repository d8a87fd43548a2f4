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


def test_a_session_keeps_no_copy_of_its_model_and_pickles_from_its_source(tmp_path):
    """Made from bytes, a session holds the caller's object; made from a file, only its path,
    read again when pickled (a file changed since then is refused, naming it)."""
    data = models.mlp().SerializeToString()
    x = x_rows()
    by_bytes = graphrt.Session(data)
    assert by_bytes._source.data() is data
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    by_path = graphrt.Session(str(path))
    blob = pickle.dumps(by_path)
    assert np.array_equal(pickle.loads(blob).run(None, {"x": x})[0], by_path.run(None, {"x": x})[0])
    path.write_bytes(data + b"\n")          # (still the same model, but not the same file)
    with pytest.raises(graphrt.SessionError, match="m.onnx") as e:
        pickle.dumps(by_path)
    assert e.value.kind is graphrt.ErrorKind.INVALID_MODEL


def test_a_session_of_a_model_with_external_data_pickles_its_weights_in_line(tmp_path):
    from onnx import helper

    from .test_errors import external_tensor
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 8 + w.tobytes())
    f = 1   # FLOAT
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", f, [2, 3])],
                          [helper.make_tensor_value_info("y", f, [2, 3])],
                          [external_tensor("w", [2, 3], "weights.bin", 8)])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    blob = pickle.dumps(graphrt.Session(str(path)))
    (tmp_path / "weights.bin").unlink()
    got = pickle.loads(blob).run(None, {"x": np.ones((2, 3), np.float32)})[0]
    assert np.array_equal(got, w + 1)
