"""Control flow run from compiled blocks (kernels/control/drivers.py): a static If's branch
runs from its record once it has run in the state, a branch not yet run traps to Python, and
the bits are those of the step-by-step run."""
import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import graphrt
from graphrt.kernels.core import trampolines
from graphrt.plan import program

from ...models import F, const, make, tensor
from .test_control_flow import B, I64, graph, if_model, n, trading_loop


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


def _loop_armed(sess) -> bool:
    plan, state = _idle_state(sess)
    kernel = next(st.node.kernel for st in plan.steps if st.node.info.op_type == "Loop")
    prog = state.program.plain
    return bool(state.held[(kernel, "armed")][0]) and \
        all(isinstance(fn, program.Block) for fn, _a, _i in prog)


@pytest.mark.parametrize("kind", ["swap", "fibonacci"])
def test_a_loop_runs_its_iterations_from_a_block(kind):
    """Carried values that trade places (outputs in other carried inputs' blocks): the
    compiled iterations give the plain loop's values for every trip count, zero included."""
    sess = graphrt.Session(trading_loop(kind), graphrt.SessionOptions(intra_op_threads=1))
    a0, b0 = np.arange(4, dtype=np.float32), np.arange(10, 14, dtype=np.float32)
    for trips in (3, 1, 0, 5, 2, 7, 0):
        a, b = a0, b0
        for _ in range(trips):
            a, b = b, (a if kind == "swap" else a + b)
        got = sess.run(None, {"M": np.array(trips, np.int64), "a0": a0, "b0": b0})
        np.testing.assert_array_equal(got[0], a)
        np.testing.assert_array_equal(got[1], b)
    assert _loop_armed(sess)


def _while_model():
    """h = tanh(h @ w + x) while sum(h) < 1, at most 12 times; k sums the iteration numbers."""
    rng = np.random.default_rng(3)
    body = graph([n("Gemm", ["h", "w"], ["p"]), n("Add", ["p", "x"], ["q"]),
                  n("Tanh", ["q"], ["h2"]), n("ReduceSum", ["h2"], ["s"], keepdims=0),
                  n("Less", ["s", "three"], ["c"]), n("Cast", ["i"], ["fi"], to=F),
                  n("Add", ["k", "fi"], ["k2"])],
                 [tensor("i", I64, []), tensor("cond_in", B, []), tensor("h", F, [2, 4]),
                  tensor("k", F, [])],
                 [tensor("c", B, []), tensor("h2", F, [2, 4]), tensor("k2", F, [])])
    return make([n("Loop", ["m", "go", "h0", "k0"], ["h", "k"], body=body, name="while")],
                [tensor("go", B, []), tensor("h0", F, [2, 4]), tensor("k0", F, []),
                 tensor("x", F, [2, 4])],
                [tensor("h", F, [2, 4]), tensor("k", F, [])],
                [const("w", (rng.standard_normal((4, 4)) / 4).astype(np.float32)),
                 const("three", np.array(1, np.float32)), const("m", np.array(12, np.int64))])


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_a_while_loop_from_a_block_gives_the_checked_runs_bits(mode):
    model = _while_model()
    sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode, intra_op_threads=1))
    ref = ReferenceEvaluator(model)
    rng = np.random.default_rng(5)
    for go in (True, True, False, True, True):
        feeds = {"go": np.array(go), "h0": rng.standard_normal((2, 4)).astype(np.float32),
                 "k0": np.array(0.5, np.float32),
                 "x": (rng.standard_normal((2, 4)) / 2 + 0.2).astype(np.float32)}
        got = sess.run(None, feeds)
        want = ref.run(None, feeds)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        checked = sess.run(None, feeds, profile=graphrt.Profile())
        assert [g.tobytes() for g in got] == [c.tobytes() for c in checked]
    assert _loop_armed(sess)


def test_a_loop_whose_body_holds_an_if_runs_both_from_blocks():
    """The body's If switches branch from iteration to iteration; the Loop, its body and the
    If's branches all run compiled once each branch has run."""
    then = graph([n("Add", ["acc", "x"], ["t"])], [], [tensor("t", F, [3])], "t")
    other = graph([n("Sub", ["acc", "x"], ["e"])], [], [tensor("e", F, [3])], "e")
    body = graph([n("Cast", ["i"], ["fi"], to=F), n("Mod", ["i", "two"], ["r"]),
                  n("Equal", ["r", "zero"], ["even"]),
                  n("If", ["even"], ["acc2"], then_branch=then, else_branch=other),
                  n("Identity", ["cond_in"], ["c"])],
                 [tensor("i", I64, []), tensor("cond_in", B, []), tensor("acc", F, [3])],
                 [tensor("c", B, []), tensor("acc2", F, [3])])
    model = make([n("Loop", ["M", "", "a0"], ["acc"], body=body)],
                 [tensor("M", I64, []), tensor("a0", F, [3]), tensor("x", F, [3])],
                 [tensor("acc", F, [3])],
                 [const("two", np.array(2, np.int64)), const("zero", np.array(0, np.int64))])
    sess = graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=1))
    x = np.array([1, 2, 3], np.float32)
    for trips in (1, 4, 5, 0, 6):
        want = np.zeros(3, np.float32)
        for i in range(trips):
            want = want + x if i % 2 == 0 else want - x
        got = sess.run(None, {"M": np.array(trips, np.int64), "a0": np.zeros(3, np.float32),
                              "x": x})[0]
        np.testing.assert_array_equal(got, want)
    assert _loop_armed(sess)
