"""Control flow run from compiled blocks (kernels/control/drivers.py): a static If's branch
runs from its record once it has run in the state, a branch not yet run traps to Python, and
the bits are those of the step-by-step run."""
import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import graphrt
from graphrt.kernels.core import trampolines
from graphrt.plan import program

from .test_control_flow import if_model


def _idle_state(sess):
    (_key, entry), = sess._plans._entries
    return entry.plan, entry.pool._idle[0]


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_a_static_if_runs_its_branches_from_the_parents_block(mode):
    model = if_model()
    sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode, intra_op_threads=1))
    ref = ReferenceEvaluator(model)
    x = np.array([-1, 0.5, 2], np.float32)
    for cond in (True, False, True, False, True, False):
        feeds = {"x0": x, "c": np.array(cond)}
        got = sess.run(None, feeds)[0]
        np.testing.assert_allclose(got, ref.run(None, feeds)[0], rtol=1e-6)
        checked = sess.run(None, feeds, profile=graphrt.Profile())[0]   # step by step
        assert got.tobytes() == checked.tobytes()
    plan, state = _idle_state(sess)
    prog = state.program.plain
    assert len(prog) == 1 and isinstance(prog[0][0], program.Block)
    if_step = next(i for i, st in enumerate(plan.steps) if st.node.info.op_type == "If")
    records = state.held[(plan.steps[if_step].node.kernel, "records")]
    assert records[0] and records[1]


def test_a_branch_not_yet_run_traps_to_python_then_is_armed():
    sess = graphrt.Session(if_model(), graphrt.SessionOptions(intra_op_threads=1))
    x = np.array([-1, 0.5, 2], np.float32)
    for _ in range(3):
        sess.run(None, {"x0": x, "c": np.array(True)})
    plan, state = _idle_state(sess)
    kernel = next(st.node.kernel for st in plan.steps if st.node.info.op_type == "If")
    records = state.held[(kernel, "records")]
    assert records[1] and not records[0]
    got = sess.run(None, {"x0": x, "c": np.array(False)})[0]      # the trap
    np.testing.assert_array_equal(got, np.maximum(x, 0) - [1, 2, 3])
    assert records[0]
    got = sess.run(None, {"x0": x, "c": np.array(False)})[0]      # the record
    np.testing.assert_array_equal(got, np.maximum(x, 0) - [1, 2, 3])


def test_a_record_copies_in_runs_its_block_and_stops_at_a_set_flag():
    from ...test_blocks import _block, _raises
    src, dst = np.arange(3, dtype=np.float32), np.zeros(3, np.float32)
    out = np.zeros(1, np.float32)
    _raises(np.zeros(1, np.float32))
    block = _block([(_raises, (out,))], ["a"])
    rec = trampolines.record(block, [(dst, src)], [])
    flag = np.ones(1, np.int64)
    assert trampolines.run_record(rec.ctypes.data, flag) == 0 and out[0] == 0
    flag[0] = 0
    assert trampolines.run_record(rec.ctypes.data, flag) == -1 and out[0] == 1
    assert dst.tolist() == [0, 1, 2]
