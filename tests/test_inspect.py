"""Intermediate values by name and per-node profiles."""
import json

import numpy as np
import pytest

import graphrt

from . import models


def test_intermediate_values_by_name_in_fast_and_exact_mode():
    model = models.mlp()
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    for mode in ("fast", "exact"):
        sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode, optimization_level="basic"))
        y, h0, r0 = sess.run(["y", "h0", "r0"], {"x": x})
        w0 = dict((i.name, i) for i in model.graph.initializer)
        from onnx import numpy_helper
        W0, B0 = numpy_helper.to_array(w0["W0"]), numpy_helper.to_array(w0["B0"])
        np.testing.assert_allclose(h0, x @ W0 + B0, rtol=1e-5, atol=1e-6)
        assert np.array_equal(r0, np.maximum(h0, 0))
        assert np.array_equal(y, sess.run(None, {"x": x})[0])


def test_captured_value_survives_block_reuse(monkeypatch):
    """Without the capture, r0's block is reused by later values; with it, it is kept."""
    monkeypatch.setenv("GRAPHRT_CHECKED", "1")
    sess = graphrt.Session(models.mlp(sizes=(16, 64, 64, 64, 4)), graphrt.SessionOptions(optimization_level="none"))
    x = np.ones((2, 16), np.float32)
    r0, y = sess.run(["r0", "y"], {"x": x})
    h0 = sess.run(["h0"], {"x": x})[0]
    assert np.array_equal(r0, np.maximum(h0, 0)) and not np.isnan(r0).any()


def test_fused_away_value_is_named_in_the_error():
    sess = graphrt.Session(models.mlp())              # level all: Gemm and Relu fused
    with pytest.raises(graphrt.SessionError) as e:
        sess.run(["h0"], {"x": np.ones((1, 16), np.float32)})
    assert e.value.kind is graphrt.ErrorKind.INVALID_INPUT and "fused it away" in str(e.value)


def test_unknown_value_name():
    sess = graphrt.Session(models.mlp())
    with pytest.raises(graphrt.SessionError) as e:
        sess.run(["nope"], {"x": np.ones((1, 16), np.float32)})
    assert e.value.kind is graphrt.ErrorKind.INVALID_INPUT


def test_profile_table_and_trace(tmp_path):
    # level basic: the attention pattern stays spelled out (at all it becomes one Attention)
    sess = graphrt.Session(models.transformer_block(), graphrt.SessionOptions(optimization_level="basic"))
    prof = graphrt.Profile()
    x = np.ones((2, 5, 32), np.float32)
    for _ in range(2):
        sess.run(None, {"x": x}, profile=prof)
    run_steps = [s for s in prof.steps if s.run == 0]
    assert {s.op_type for s in run_steps} >= {"MatMul", "Softmax", "Transpose", "Add"}
    mm = next(s for s in run_steps if s.op_type == "Softmax")
    assert mm.output_shapes == ((2, 4, 5, 5),) and mm.output_bytes == 2 * 4 * 5 * 5 * 4 and mm.seconds >= 0
    assert "steps over 2 run(s)" in prof.table()
    path = tmp_path / "trace.json"
    prof.save_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    assert len(events) == len(prof.steps) and all(e["ph"] == "X" for e in events)
    assert [o for o, _, _ in prof.by_operator()][0] in {s.op_type for s in prof.steps}
