"""Concurrent runs, bounded memory, close during runs, and bad models or inputs that end in a
SessionError (never a crash, a hang or a wrong answer)."""
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import graphrt
from graphrt import ErrorKind, SessionError

from . import models
from .models import F, const, exact_model, make, tensor


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def hammer(sess, inputs, threads=8, rounds=6):
    """Every thread runs every input ``rounds`` times (in a shifted order); returns results
    keyed by input index, each a list of all results seen."""
    seen = {k: [] for k in range(len(inputs))}
    errors = []
    lock = threading.Lock()

    def work(t):
        try:
            for r in range(rounds):
                for j in range(len(inputs)):
                    k = (j + t + r) % len(inputs)
                    (y,) = sess.run(None, {"x": inputs[k]})
                    with lock:
                        seen[k].append(y)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    return seen


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_many_threads_many_shapes_same_results_no_leak(mode):
    model = models.transformer_block() if mode == "fast" else exact_model()
    rng = np.random.default_rng(0)
    shapes = [(b, s, 32) for b, s in [(1, 3), (2, 5), (1, 8), (3, 2), (2, 7), (1, 1)]] if mode == "fast" \
        else [(b, 96) for b in (1, 3, 17, 40, 64, 130)]
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    opts = graphrt.SessionOptions(mode=mode, max_cached_plans=4)     # fewer plans than shapes
    single = graphrt.Session(model, graphrt.SessionOptions(mode=mode, intra_op_threads=1))
    expected = [single.run(None, {"x": x})[0] for x in inputs]
    sess = graphrt.Session(model, opts)
    hammer(sess, inputs, rounds=2)                                   # warm-up
    before = rss_bytes()
    seen = hammer(sess, inputs, rounds=6)
    grown = rss_bytes() - before
    for k, ys in seen.items():
        for y in ys:
            assert np.array_equal(y.view(np.uint32), expected[k].view(np.uint32)), k
    assert sess.plans_built > 4                  # plans were evicted and rebuilt meanwhile
    assert grown < 64 << 20, f"resident memory grew by {grown >> 20} MiB"


def test_close_during_runs():
    sess = graphrt.Session(models.transformer_block())
    x = np.ones((2, 16, 32), np.float32)
    expected = sess.run(None, {"x": x})[0]
    outcomes = []
    started = threading.Barrier(5)

    def work():
        started.wait()
        for _ in range(50):
            try:
                y = sess.run(None, {"x": x})[0]
                outcomes.append("ok" if np.array_equal(y, expected) else "wrong")
            except SessionError as e:
                outcomes.append(str(e.kind))
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    started.wait()
    sess.close()
    for t in ts:
        t.join()
    assert "wrong" not in outcomes and set(outcomes) <= {"ok", "Disposed"}
    assert outcomes.count("Disposed") > 0
    with pytest.raises(SessionError) as e:
        sess.run(None, {"x": x})
    assert e.value.kind is ErrorKind.DISPOSED


def test_arena_limit_is_enforced():
    n = helper.make_node
    model = make([n("Reshape", ["x", "s"], ["r"], name="reshape"), n("Add", ["r", "r"], ["y"], name="double")],
                 [tensor("x", F, [1024]), tensor("s", TensorProto.INT64, [2])], [tensor("y", F, None)])
    feeds = {"x": np.ones(1024, np.float32), "s": np.array([32, 32])}
    assert graphrt.Session(model).run(None, feeds)[0].shape == (32, 32)
    small = graphrt.Session(model, graphrt.SessionOptions(max_arena_bytes=1000))
    with pytest.raises(SessionError) as e:
        small.run(None, feeds)
    assert e.value.kind is ErrorKind.INVALID_INPUT and e.value.node == "double"


# -- fuzzing ----------------------------------------------------------------------------

SEEDS = [models.mlp().SerializeToString(), models.transformer_block().SerializeToString(),
         models.shapes_model().SerializeToString()]
FEEDS = [{"x": np.ones((2, 16), np.float32)}, {"x": np.ones((1, 3, 32), np.float32)},
         {"x": np.ones((2, 3, 4), np.float32)}]


def outcome(src, feeds) -> str:
    """'ok', 'bad model', 'bad input' ... or an exception that is not a SessionError."""
    try:
        sess = graphrt.Session(src)
    except SessionError as e:
        return str(e.kind)
    try:
        names = {i.name for i in sess.inputs}
        ys = sess.run(None, {k: v for k, v in feeds.items() if k in names})
        assert all(isinstance(y, np.ndarray) for y in ys)
        return "ok"
    except SessionError as e:
        return str(e.kind)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(which=st.integers(0, 2), data=st.data())
def test_mutated_and_truncated_model_bytes(which, data):
    raw = bytearray(SEEDS[which])
    kind = data.draw(st.sampled_from(["flip", "truncate", "splice"]))
    if kind == "truncate":
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    elif kind == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
    else:
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i:i] = data.draw(st.binary(min_size=1, max_size=16))
    outcome(bytes(raw), FEEDS[which])           # anything but a SessionError fails the test


BAD_NODES = [
    helper.make_node("Concat", ["x", "x"], ["y"], axis=7),
    helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0]),
    helper.make_node("Softmax", ["x"], ["y"], axis=-9),
    helper.make_node("Flatten", ["x"], ["y"], axis=12),
    helper.make_node("Cast", ["x"], ["y"], to=999),
    helper.make_node("Squeeze", ["x", "ax"], ["y"]),
    helper.make_node("Unsqueeze", ["x", "ax"], ["y"]),
    helper.make_node("Reshape", ["x", "huge"], ["y"]),
    helper.make_node("Reshape", ["x", "neg"], ["y"]),
    helper.make_node("Gemm", ["x", "x"], ["y"], alpha=2.0),            # [2,3] x [2,3]
    helper.make_node("MatMul", ["x", "w3"], ["y"]),
    helper.make_node("Add", ["x", "w3"], ["y"]),
    helper.make_node("Softmax", ["x"], ["y"], axis="not an int"),
    helper.make_node("Concat", ["x", "x"], ["y"], axis="0"),
    helper.make_node("Transpose", ["x"], ["y"], perm="01"),
    helper.make_node("Add", ["x", "missing_initializer"], ["y"]),
    helper.make_node("Add", ["x", "y"], ["y"]),                      # a cycle through itself
]


@pytest.mark.parametrize("k", range(len(BAD_NODES)))
def test_malformed_nodes_end_in_session_errors(k):
    inits = [const("ax", np.array([5], np.int64)), const("huge", np.array([1 << 40, 1 << 40], np.int64)),
             const("neg", np.array([-3, -4], np.int64)), const("w3", np.ones((7, 3), np.float32))]
    model = make([BAD_NODES[k]], [tensor("x", F, [2, 3])], [tensor("y", F, None)], inits)
    assert outcome(model, {"x": np.ones((2, 3), np.float32)}) in {"InvalidModel", "InvalidInput", "Unsupported"}


def test_cyclic_graph_is_invalid():
    n = helper.make_node
    model = make([n("Add", ["x", "b"], ["a"], name="first"), n("Relu", ["a"], ["b"], name="second")],
                 [tensor("x", F, [2])], [tensor("b", F, [2])])
    with pytest.raises(SessionError) as e:
        graphrt.Session(model)
    assert e.value.kind is ErrorKind.INVALID_MODEL and e.value.node == "first"


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_odd_inputs_end_in_results_or_session_errors(data):
    sess = graphrt.Session(models.mlp())
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.int64, np.bool_]))
    shape = tuple(data.draw(st.lists(st.integers(0, 20), min_size=0, max_size=3)))
    with np.errstate(invalid="ignore"):
        x = np.full(shape, data.draw(st.sampled_from([0.0, np.nan, np.inf, -1e38, 1.0]))).astype(dtype)
    try:
        (y,) = sess.run(None, {"x": x})
    except SessionError as e:
        assert e.kind is ErrorKind.INVALID_INPUT
        return
    assert x.dtype == np.float32 and x.ndim == 2 and x.shape[1] == 16 and y.shape == (x.shape[0], 4)
