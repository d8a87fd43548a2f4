"""Plan cache reference counting: eviction never takes memory from a run in progress."""
import numpy as np

import graphrt

from . import models


def test_evicted_plan_keeps_its_state_until_the_last_run_leaves():
    sess = graphrt.Session(models.mlp(), graphrt.SessionOptions(max_cached_plans=1))
    x1 = np.ones((1, 16), np.float32)
    sess.run(None, {"x": x1})
    cache = sess._plans
    entry = cache.acquire(((np.dtype(np.float32), (1, 16)),))
    state = entry.take()                      # a run in progress holds entry and state
    sess.run(None, {"x": np.ones((2, 16), np.float32)})      # evicts the batch-1 plan
    assert len(cache) == 1 and cache._entries[0][1] is not entry
    # the in-progress run can still use its state, and its results are right
    from graphrt.plan.execute import execute
    execute(entry.plan, state, [x1], None, False)
    got = state.values[sess._graph.output_ids[0]].copy()
    assert np.array_equal(got, sess.run(None, {"x": x1})[0])
    entry.give(state)
    assert entry.pool.idle == 1               # still referenced by the run: pooled
    entry.release()
    assert entry.pool.idle == 0               # last reference gone: states dropped
    entry.give(state)
    assert entry.pool.idle == 0               # a late give-back after that is dropped too


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
