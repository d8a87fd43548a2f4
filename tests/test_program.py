"""A run state's program (graphrt/plan/program.py) and the two loops that run it
(plan/execute.py): the plain loop gives the checked loop's bits, a cancel token stops a run
between two steps, and an error in a step names its node."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import graphrt
from graphrt.plan import program

from . import models
from .models import F, make, tensor

n = helper.make_node


class _Cancels(graphrt.OpKernel):
    """com.example Cancels(x) = x, cancelling the token its run was given (a Python step)."""

    runs = 0

    def infer(self, ctx):
        ctx.set_output(0, ctx.dtype(0), ctx.shape(0))

    def run(self, ctx):
        type(self).runs += 1
        ctx.flat_out[0][:] = ctx.flat_in[0]
        if ctx.cancel is not None:
            ctx.cancel.cancel()


class _Counts(_Cancels):
    """com.example Counts(x) = x, counting its runs."""

    runs = 0

    def run(self, ctx):
        type(self).runs += 1
        ctx.flat_out[0][:] = ctx.flat_in[0]


OPS = graphrt.custom_operators(graphrt.OpDef("com.example", "Cancels", 1, None, _Cancels),
                               graphrt.OpDef("com.example", "Counts", 1, None, _Counts))


def _cancel_model():
    nodes = [n("Relu", ["x"], ["a"]), n("Cancels", ["a"], ["b"], domain="com.example"),
             n("Neg", ["b"], ["c"]), n("Counts", ["c"], ["y"], domain="com.example")]
    model = make(nodes, [tensor("x", F, [3])], [tensor("y", F, None)])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    return model


def test_a_cancel_token_stops_the_run_between_two_steps():
    """The token cancelled by a step's run (as another thread would, mid-run): the next
    step is not run, and the error names it; the session runs on without a token."""
    sess = graphrt.Session(_cancel_model(), operators=OPS)
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], -np.maximum(x, 0))
    before = _Counts.runs
    token = graphrt.CancelToken()
    with pytest.raises(graphrt.SessionError) as info:
        sess.run(None, {"x": x}, cancel=token)
    assert info.value.kind is graphrt.ErrorKind.CANCELLED and info.value.node == "Neg_2"
    assert _Counts.runs == before
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], -np.maximum(x, 0))
    assert _Counts.runs == before + 1
    (key, entry), = sess._plans._entries
    state = entry.take()
    entry.give(state)
    assert all(c is None or c.cancel is None for c in state.contexts)  # (the run's only)


def test_a_data_error_in_a_step_names_its_node():
    """A Gather index out of range, in the first run (checked loop) and in a later one
    (plain loop): a SessionError naming the Gather."""
    nodes = [n("Relu", ["x"], ["a"]), n("Gather", ["a", "i"], ["g"]), n("Neg", ["g"], ["y"])]
    model = make(nodes, [tensor("x", F, [4]), tensor("i", 7, [2])], [tensor("y", F, None)])
    sess = graphrt.Session(model)
    x = np.arange(4, dtype=np.float32)
    good, bad = np.array([0, 3], np.int64), np.array([0, 9], np.int64)
    for _ in range(4):
        np.testing.assert_array_equal(sess.run(None, {"x": x, "i": good})[0], -x[[0, 3]])
        with pytest.raises(graphrt.SessionError) as info:
            sess.run(None, {"x": x, "i": bad})
        assert info.value.kind is graphrt.ErrorKind.INVALID_INPUT
        assert info.value.node == "Gather_1"


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_the_plain_loop_gives_the_checked_loops_bits(mode):
    """The same run state's program by steps (a profile's run: the checked loop) and in its
    blocked form (the plain loop)."""
    sess = graphrt.Session(models.transformer_block(),
                           graphrt.SessionOptions(mode=mode, intra_op_threads=1))
    x = np.random.default_rng(0).standard_normal((2, 5, 32)).astype(np.float32)
    want = sess.run(None, {"x": x}, profile=graphrt.Profile())[0]
    for _ in range(5):
        assert sess.run(None, {"x": x})[0].tobytes() == want.tobytes()
        assert sess.run(None, {"x": x}, profile=graphrt.Profile())[0].tobytes() == \
            want.tobytes()


def test_the_second_run_finds_its_blocked_program_made(monkeypatch):
    """The plan's first run leaves the run state's blocked program made (its kernels all
    loaded by then): the second run, which takes it, makes nothing (making it cost a small
    model's second run 3-5 ms in a new process), and gives the first run's bits."""
    sess = graphrt.Session(models.transformer_block(), graphrt.SessionOptions(intra_op_threads=1))
    x = np.random.default_rng(1).standard_normal((2, 5, 32)).astype(np.float32)
    first = sess.run(None, {"x": x})[0]

    def made_late(*args):
        raise AssertionError("the blocked program was made at the second run")
    monkeypatch.setattr(program, "blocked", made_late)
    assert sess.run(None, {"x": x})[0].tobytes() == first.tobytes()
