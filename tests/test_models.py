"""End to end: models built with onnx.helper against onnx's reference evaluator, through
load()(x), Session.run and run_into."""
import io

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import graphrt

from . import models


def reference(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


@pytest.mark.parametrize("build", [models.mlp, lambda: models.mlp(gemm=False), models.transformer_block,
                                   models.shapes_model], ids=["mlp-gemm", "mlp-matmul", "block", "shapes"])
def test_three_entry_points_match_reference(build):
    model = build()
    rng = np.random.default_rng(0)
    shape = {"mlp": (5, 16), "block": (2, 7, 32), "shapes": (3, 3, 4)}[model.graph.name]
    x = rng.standard_normal(shape).astype(np.float32)
    (expected,) = reference(model, {"x": x})

    m = graphrt.load(model)
    np.testing.assert_allclose(m(x), expected, rtol=1e-5, atol=1e-5)

    sess = graphrt.Session(model.SerializeToString())
    (got,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert np.array_equal(got, m(x))

    out = np.full(expected.size + 3, -1, np.float32)
    assert m.run_into(x, out) == expected.shape
    assert np.array_equal(out[:expected.size].reshape(expected.shape), got)
    assert np.all(out[expected.size:] == -1)


def test_sources_path_bytes_file_and_proto(tmp_path):
    model = models.mlp()
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    x = np.ones((2, 16), np.float32)
    results = [graphrt.load(src)(x) for src in
               (str(path), path, model.SerializeToString(), io.BytesIO(model.SerializeToString()), model)]
    for r in results[1:]:
        assert np.array_equal(r, results[0])


def test_batch_sizes_make_plans_and_reuse_them():
    sess = graphrt.Session(models.transformer_block())
    rng = np.random.default_rng(1)
    for shape in [(1, 4, 32), (3, 5, 32), (1, 4, 32), (3, 5, 32)]:
        x = rng.standard_normal(shape).astype(np.float32)
        (expected,) = reference(models.transformer_block(), {"x": x})
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-5)
    assert sess.plans_built == 2


def test_plan_cache_drops_oldest():
    sess = graphrt.Session(models.mlp(), graphrt.SessionOptions(max_cached_plans=2))
    for b in (1, 2, 3, 1):
        sess.run(None, {"x": np.ones((b, 16), np.float32)})
    assert sess.plans_built == 4        # batch 1 was evicted by batch 3 and rebuilt
    assert len(sess._plans) == 2


def test_session_describes_inputs_and_outputs():
    sess = graphrt.Session(models.transformer_block())
    (i,), (o,) = sess.inputs, sess.outputs
    assert (i.name, i.dtype, i.dims, i.kind) == ("x", np.dtype(np.float32), ("batch", "seq", 32), "tensor")
    assert (o.name, o.dims) == ("y", ("batch", "seq", 32))


def test_caller_out_buffers_are_overwritten():
    sess = graphrt.Session(models.mlp())
    x = np.ones((4, 16), np.float32)
    out = np.zeros((4, 4), np.float32)
    (got,) = sess.run(["y"], {"x": x}, out={"y": out})
    assert got is out and np.array_equal(out, sess.run(None, {"x": x})[0])


def test_inputs_are_not_modified():
    sess = graphrt.Session(models.mlp())
    x = np.random.default_rng(2).standard_normal((6, 16)).astype(np.float32)
    keep = x.copy()
    sess.run(None, {"x": x})
    assert np.array_equal(x, keep)


def test_non_contiguous_input_is_copied():
    sess = graphrt.Session(models.mlp())
    x = np.random.default_rng(3).standard_normal((16, 6)).astype(np.float32).T
    assert np.array_equal(sess.run(None, {"x": x})[0], sess.run(None, {"x": np.ascontiguousarray(x)})[0])


def test_dead_nodes_are_dropped():
    from onnx import helper
    model = models.mlp()
    model.graph.node.append(helper.make_node("NoSuchOp", ["x"], ["dead"], name="unused"))
    sess = graphrt.Session(model)           # would fail if the dead node were resolved
    assert all(n.info.name != "unused" for n in sess._graph.nodes)


def test_pickled_session_rebuilds():
    import pickle
    sess = graphrt.Session(models.mlp())
    x = np.ones((2, 16), np.float32)
    clone = pickle.loads(pickle.dumps(sess))
    assert np.array_equal(clone.run(None, {"x": x})[0], sess.run(None, {"x": x})[0])
