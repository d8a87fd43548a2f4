"""Blocks of compiled calls (graphrt/plan/program.py) made by the one interpreter of
graphrt/kernels/core/trampolines.py: they give the step-by-step loop's bits, name the step
whose kernel raised, stop at a set cancel flag, and pass arrays with the numba types the
steps' own calls had."""
from __future__ import annotations

import types
import warnings

import numba
import numpy as np
import pytest
from numba import njit
from onnx import helper

import graphrt
from graphrt.kernels.core import trampolines
from graphrt.plan import program

from . import models
from .models import F, const, make, tensor

n = helper.make_node


def chain_model():
    """Element-wise and reduction steps, a Reshape view among them, a MatMul and a CumSum
    (a Python step: it splits the blocks), then more steps."""
    rng = np.random.default_rng(0)
    nodes = [n("Add", ["x", "b"], ["a"]), n("Mul", ["a", "s"], ["m"]), n("Relu", ["m"], ["r"]),
             n("Tanh", ["r"], ["t"]), n("Reshape", ["t", "shape"], ["v"]),
             n("Sub", ["v", "b2"], ["d"]), n("MatMul", ["d", "w"], ["p0"]),
             n("CumSum", ["p0", "axis"], ["p"]), n("Sigmoid", ["p"], ["g"]),
             n("Neg", ["g"], ["q"]), n("Exp", ["q"], ["e"]),
             n("ReduceSum", ["e", "axes"], ["y"], keepdims=0)]
    inits = [const("b", rng.standard_normal(24).astype(np.float32)),
             const("s", np.float32(0.75)), const("shape", np.array([-1, 24], np.int64)),
             const("b2", rng.standard_normal(24).astype(np.float32)),
             const("w", rng.standard_normal((24, 8)).astype(np.float32)),
             const("axes", np.array([1], np.int64)), const("axis", np.array(1, np.int64))]
    return make(nodes, [tensor("x", F, ["n", 24])], [tensor("y", F, None)], inits)


def plain_program(sess):
    """The plain-loop program of the session's only plan's idle run state."""
    (_key, entry), = sess._plans._entries
    state = entry.pool._idle[0]
    assert state.program is not None and state.program.plain is not None
    return entry.plan, state.program.plain


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("threads", [1, 2])
def test_blocks_give_the_step_by_step_bits(mode, threads):
    x = np.random.default_rng(1).standard_normal((70000, 24)).astype(np.float32)
    x[3, 5] = np.nan
    opts = graphrt.SessionOptions(mode=mode, intra_op_threads=threads, optimization_level="basic")
    sess = graphrt.Session(chain_model(), opts)
    want = sess.run(None, {"x": x})[0]          # the first run: step by step
    for _ in range(3):
        got = sess.run(None, {"x": x})[0]
        assert got.tobytes() == want.tobytes()
    plan, prog = plain_program(sess)
    kinds = [plan.steps[i].node.info.op_type if fn is None else
             "block" if isinstance(fn, program.Block) else "call" for fn, _a, i in prog]
    assert "CumSum" in kinds and kinds.count("block") >= 2, kinds
    assert kinds[kinds.index("CumSum") + 1] == "block"


def test_model_outputs_and_run_into_through_blocks():
    model = graphrt.load(models.transformer_block(), intra_op_threads=1)
    x = np.random.default_rng(2).standard_normal((8, 32, 32)).astype(np.float32)
    want = model(x)
    out = np.empty_like(want)
    for _ in range(3):
        model.run_into(x, out)
        assert out.tobytes() == want.tobytes() == model(x).tobytes()
    _plan, prog = plain_program(model.session)
    assert any(isinstance(fn, program.Block) for fn, _a, _i in prog)


EXPORTED = ["torch_transformer_opset14", "torch_attention_opset13", "paddle_transformer",
            "tf2onnx_byte_classifier", "tf2onnx_cnn", "torch_lstm_opset13"]


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("stem", EXPORTED)
def test_exported_models_give_the_step_by_step_bits(stem, mode):
    """Real exporters' models (tests/exporters): runs through blocks give the bits of the
    step-by-step loop, and normalisations, softmax and data movement run inside blocks."""
    from .test_exporters import _feeds, _path
    try:
        sess = graphrt.Session(_path(stem), graphrt.SessionOptions(mode=mode, intra_op_threads=1))
    except graphrt.SessionError as e:
        if e.kind is graphrt.ErrorKind.EXACT_MODE_UNAVAILABLE:
            pytest.skip(f"no exact kernel for {', '.join(e.operators)}")
        raise
    feeds = _feeds(stem + ".npz")
    want = sess.run(None, feeds)
    for _ in range(3):
        got = sess.run(None, feeds)
        assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    plan, prog = plain_program(sess)
    blocked = {plan.steps[i].node.info.op_type for fn, _a, _i in prog
               if isinstance(fn, program.Block) for i in fn.steps}
    python = {plan.steps[i].node.info.op_type for fn, _a, i in prog if fn is None}
    assert blocked and not python & {"Softmax", "LayerNormalization", "Transpose", "Concat",
                                     "Where", "Split", "Slice"}, python


def test_product_calls_replayed_by_any_thread_hold_their_run_states_scratch():
    """A Gemm step gives its tile call once per run state, and whichever thread runs that
    state next replays it: the tile scratch in the call is the run state's, one per state,
    never a thread's."""
    from graphrt.kernels.gemm import microkernel
    from graphrt.plan.execute import execute

    sess = graphrt.Session(models.mlp())
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    want = sess.run(None, {"x": x})[0]
    entry = sess._plans._entries[0][1]
    plan = entry.plan
    states = [entry.take(), entry.take()]
    for st in states:
        for _ in range(2):          # step by step, then blocked
            execute(plan, st, [x], None, False)
            np.testing.assert_array_equal(st.values[plan.graph.output_ids[0]], want)
    gemm = [i for i, s in enumerate(plan.steps) if s.node.info.op_type == "Gemm"]
    assert gemm and all(states[0].calls[i] is not None for i in gemm)
    mine = microkernel.work_for(np.float32)
    for i in gemm:
        scratch = [[a for a in st.calls[i][0][1] if isinstance(a, np.ndarray) and a.ndim == 2
                    and a.shape[0] == mine.shape[0] and a.shape[1] == mine.shape[1]]
                   for st in states]
        assert scratch[0] and scratch[1]
        assert scratch[0][0] is not scratch[1][0] and scratch[0][0] is not mine
        assert any(v is scratch[0][0] for v in states[0].held.values())


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_a_small_cnn_runs_as_one_block(mode):
    """Convolutions, a pool and a normalisation with weights, plan data and held scratch
    outside the slab: one block, the step-by-step bits, in every run state of the plan."""
    rng = np.random.default_rng(4)
    c = 4
    nodes = [n("Conv", ["x", "w", "b"], ["a"], pads=[1, 1, 1, 1]), n("Relu", ["a"], ["r"]),
             n("MaxPool", ["r"], ["m"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Conv", ["m", "w"], ["d"], pads=[1, 1, 1, 1]),
             n("LayerNormalization", ["d", "g", "beta"], ["y"], axis=-1)]
    inits = [const("w", (rng.standard_normal((c, c, 3, 3)) / 9).astype(np.float32)),
             const("b", rng.standard_normal(c).astype(np.float32)),
             const("g", rng.standard_normal(6).astype(np.float32)),
             const("beta", rng.standard_normal(6).astype(np.float32))]
    model = make(nodes, [tensor("x", F, [2, c, 6, 6])], [tensor("y", F, None)], inits)
    x = rng.standard_normal((2, c, 6, 6)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode))
    want = sess.run(None, {"x": x})[0]
    for _ in range(3):
        assert sess.run(None, {"x": x})[0].tobytes() == want.tobytes()
    _plan, prog = plain_program(sess)
    assert len(prog) == 1 and isinstance(prog[0][0], program.Block)
    (key, entry), = sess._plans._entries
    states = [entry.take(), entry.take()]          # a second run state: its own block
    try:
        from graphrt.plan.execute import execute
        for state in states:
            for _ in range(2):
                execute(entry.plan, state, [x], None, False)
                out = state.values[entry.plan.graph.output_ids[0]]
                assert out.tobytes() == want.tobytes()
        rows = [s.program.plain[0][0].row for s in states]
        assert rows[0].tobytes() != rows[1].tobytes()   # (each state's own slab and scratch)
    finally:
        for state in states:
            entry.give(state)


@njit(cache=False)
def _kernel_of_kinds(ro, grid, flags, out, k, scale, on, nothing):
    out[0] = ro.sum() + grid[1, 2] + flags.sum() + k * scale + (1 if on else 0)
    grid[0, 0] = ro[1]


@njit(cache=False)
def _raises(out):
    out[0] = 1
    if out.size > 1:
        raise ValueError("too long")


def _block(calls, names):
    """A Block of ``calls`` with a stand-in plan whose steps are named ``names``."""
    steps = [types.SimpleNamespace(node=types.SimpleNamespace(
        info=types.SimpleNamespace(name=nm, op_type="Op"), kernel=graphrt.OpKernel(None)))
        for nm in names]
    plan = types.SimpleNamespace(steps=steps)
    pending = [(i, fn, args, trampolines.signature(fn, args))
               for i, (fn, args) in enumerate(calls)]
    assert all(p[3] is not None for p in pending)
    return program.Block(plan, pending, np.zeros(1, np.int64))


def test_trampolines_rebuild_the_arguments_a_call_from_python_gives():
    """Read-only and 2-D arrays, bools, an integer, a float32 scalar and None: the kernel
    sees its step call's types (no second specialisation) and their values."""
    ro = np.arange(4, dtype=np.float64)
    ro.flags.writeable = False
    grid = np.zeros((2, 3), np.float32)
    grid[1, 2] = 7
    flags = np.array([True, False, True])
    out = np.zeros(1, np.float32)
    args = (ro, grid, flags, out, 3, np.float32(0.5), True, None)
    _kernel_of_kinds(ro, grid.copy(), flags, out.copy(), 3, np.float32(0.5), True, None)
    assert trampolines.signature(_kernel_of_kinds, args[:2] + (np.zeros(4)[::2],) + args[3:]) \
        is None                                         # (a strided array: not by address)
    block = _block([(_kernel_of_kinds, args)], ["k"])
    block()
    assert out[0] == 6 + 7 + 2 + 1.5 + 1 and grid[0, 0] == 1
    assert _kernel_of_kinds.signatures == [tuple(map(numba.typeof, args))]


def test_a_kernel_that_raises_in_a_block_is_named():
    ok, bad = np.zeros(1, np.float32), np.zeros(2, np.float32)
    _raises(ok)
    _raises.compile((numba.typeof(bad),))
    block = _block([(_raises, (ok,)), (_raises, (bad,)), (_raises, (ok,))], ["a", "b", "c"])
    with pytest.raises(graphrt.SessionError) as info:
        block()
    assert info.value.node == "b" and "too long" in str(info.value)
    assert bad[0] == 1


def test_a_set_flag_stops_a_block_before_its_next_call():
    outs = [np.zeros(1, np.float32) for _ in range(3)]
    _raises(np.zeros(1, np.float32))
    block = _block([(_raises, (o,)) for o in outs], ["a", "b", "c"])
    block.flag[0] = 1
    with pytest.raises(graphrt.SessionError) as info:
        block()
    assert info.value.kind is graphrt.ErrorKind.CANCELLED and info.value.node == "a"
    assert not any(o[0] for o in outs)
