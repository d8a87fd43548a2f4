"""Plan cache eviction never takes memory from a run in progress."""
import numpy as np

import graphrt

from . import models


def test_an_evicted_plan_serves_its_run_in_progress_and_drops_the_state_after():
    sess = graphrt.Session(models.mlp(), graphrt.SessionOptions(max_cached_plans=1))
    x1 = np.ones((1, 16), np.float32)
    sess.run(None, {"x": x1})
    cache = sess._plans
    entry = cache.acquire(((np.dtype(np.float32), (1, 16)),))
    state = entry.take()                      # a run in progress holds entry and state
    spare = entry.take()
    entry.give(spare)
    assert entry.pool.idle == 1
    sess.run(None, {"x": np.ones((2, 16), np.float32)})      # evicts the batch-1 plan
    assert len(cache) == 1 and cache._entries[0][1] is not entry
    assert entry.pool.idle == 0               # evicted: its idle states are dropped
    # the in-progress run can still use its state, and its results are right
    from graphrt.plan.execute import execute
    execute(entry.plan, state, [x1], None, False)
    got = state.values[sess._graph.output_ids[0]].copy()
    assert np.array_equal(got, sess.run(None, {"x": x1})[0])
    entry.give(state)
    assert entry.pool.idle == 0               # a give-back after eviction is dropped


def test_run_states_pool_keeps_at_most_eight():
    sess = graphrt.Session(models.mlp())
    x = np.ones((1, 16), np.float32)
    sess.run(None, {"x": x})
    (_, entry), = sess._plans._entries
    states = [entry.take() for _ in range(12)]
    for s in states:
        entry.give(s)
    assert entry.pool.idle == 8


def test_threading_layer_is_thread_safe():
    import numba
    graphrt.Session(models.mlp())
    assert numba.threading_layer() in ("omp", "tbb")


def test_a_one_thread_session_plans_serial_kernels_with_the_same_bits():
    """A session of one thread never takes (or compiles) a parallel variant, in its own plans
    and where its graph passes fold constants; its results are the bits of a two-thread
    session's, which takes the parallel one for the same large Add."""
    from onnx import TensorProto, helper

    from graphrt.kernels.elementwise.arithmetic import ADD_VARIANTS
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [512, 256])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [512, 256])
    g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "g", [x], [y])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    data = np.random.default_rng(0).standard_normal((512, 256)).astype(np.float32)
    outs, fns = [], []
    for threads in (1, 2):
        sess = graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=threads))
        outs.append(sess.run(None, {"x": data})[0])
        (_, entry), = sess._plans._entries
        (step,) = [s for s in entry.plan.steps if s.node.info.op_type == "Add"]
        fns.append(step.prepared[1])
    assert outs[0].tobytes() == outs[1].tobytes()
    assert fns[0] == ADD_VARIANTS.pick("rows", False, False)
    if graphrt.threads.available() > 1:
        assert fns[1] == ADD_VARIANTS.pick("rows", False, True)
