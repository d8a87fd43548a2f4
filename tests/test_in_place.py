"""Kernels that write their output over their first input (the planner's in-place steps) read
that input from the output array itself, so that their loops vectorise: the bits must be
those of the same step writing a separate output."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphrt

from .models import make, tensor

F = TensorProto.FLOAT
SHAPE = [2, 6, 5, 40]     # (the last axis: runs long enough for vector loops and their tails)


def _model(node, extra_inputs, keep):
    """t = Abs(x), then ``node`` over t (and the extra inputs) into y; ``keep``: t is also an
    output, so it outlives the step and the step cannot take its memory over."""
    first = helper.make_node("Abs", ["x"], ["t"])
    outs = [tensor("y", F, None)] + ([tensor("t", F, None)] if keep else [])
    ins = [tensor("x", F, SHAPE)] + [tensor(name, F, list(v.shape)) for name, v in extra_inputs]
    return make([first, node], ins, outs, opset=18)


def _plan(sess):
    return sess._plans._entries[0][1].plan


CASES = {
    "Add": (helper.make_node("Add", ["t", "u"], ["y"]), [("u", SHAPE)]),
    "Add bias row": (helper.make_node("Add", ["t", "u"], ["y"]), [("u", SHAPE[-1:])]),
    "Mul scalar": (helper.make_node("Mul", ["t", "u"], ["y"]), [("u", [])]),
    "Sum": (helper.make_node("Sum", ["t", "u", "v"], ["y"]), [("u", SHAPE), ("v", SHAPE[-1:])]),
    "Softmax": (helper.make_node("Softmax", ["t"], ["y"], axis=-1), []),
    "BatchNormalization": (helper.make_node("BatchNormalization", ["t", "s", "b", "m", "v"],
                                            ["y"]), [(n, SHAPE[1:2]) for n in "sbmv"]),
    "LayerNormalization": (helper.make_node("LayerNormalization", ["t", "s", "b"], ["y"],
                                            axis=-1), [("s", SHAPE[-1:]), ("b", SHAPE[-1:])]),
}


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_in_place_steps_give_the_bits_of_a_separate_output(case, mode):
    node, extra = CASES[case]
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal(SHAPE).astype(np.float32)}
    feeds["x"][0, 0, 0, :3] = [np.nan, np.inf, -0.0]
    for name, shape in extra:
        feeds[name] = rng.standard_normal(shape).astype(np.float32)
    if case == "BatchNormalization":
        feeds["v"] = np.abs(feeds["v"]) + 0.5
    ys = []
    for keep in (False, True):
        sess = graphrt.Session(_model(node, [(n, feeds[n]) for n, _ in extra], keep),
                               graphrt.SessionOptions(mode=mode, intra_op_threads=1))
        ys.append(sess.run(["y"], feeds)[0])
        # the step took t's memory over only where t dies at it
        plan = _plan(sess)
        names = plan.graph.value_names
        took = {names[out]: names[src] for out, src in plan.in_place.items()}
        assert (took.get("y") == "t") != keep
    assert ys[0].tobytes() == ys[1].tobytes()
