"""Half-precision models as users get them: exporter fixtures (tests/exporters/models)
converted by onnxconverter-common's convert_float_to_float16 (float32 inputs and outputs
kept), and the same float16 graphs retyped to bfloat16 (every float16 tensor, initializer,
constant and Cast target; there is no bfloat16 converter), run by graphrt and compared with
onnxruntime.

Tolerances, as a fraction of the largest output magnitude:
- float16 against onnxruntime's run of the same float16 model: 2e-3, four float16 steps
  (2^-11 each) -- graphrt rounds each node's result to float16 as the model says, where
  onnxruntime's CPU keeps float32 inside some kernels, so either may be a few steps off the
  other (measured: up to 8.3e-4);
- bfloat16 against onnxruntime's float32 run of the original model (onnxruntime's CPU has
  few bfloat16 kernels): 1.6e-2, four bfloat16 steps (2^-8 each), what the conversion to 8
  significant bits costs (measured: up to 6.0e-3).
The attention fixtures are left out: the converter leaves float32 and float16 operands meeting
at a Div in them, a model onnxruntime refuses too.
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphrt

ort = pytest.importorskip("onnxruntime")
float16 = pytest.importorskip("onnxconverter_common.float16")

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exporters", "models")
F16_TOL, BF16_TOL = 2e-3, 1.6e-2


def fixture(stem):
    path = os.path.join(MODELS, stem + ".onnx")
    if not os.path.exists(path):
        pytest.skip(f"fixture {stem} is not in tests/exporters/models")
    return onnx.load(path), dict(np.load(os.path.join(MODELS, stem + ".npz")))


def onnxruntime_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def as_bfloat16(model):
    """``model`` (a float16 graph) with every float16 tensor retyped to bfloat16."""
    m = onnx.ModelProto.FromString(model.SerializeToString())

    def retype(t):
        if t.data_type == TensorProto.FLOAT16:
            v = numpy_helper.to_array(t).astype(np.float32)
            t.CopyFrom(helper.make_tensor(t.name, TensorProto.BFLOAT16, v.shape, v.ravel()))

    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT16:
            vi.type.tensor_type.elem_type = TensorProto.BFLOAT16
    for t in m.graph.initializer:
        retype(t)
    for n in m.graph.node:
        for a in n.attribute:
            if a.name == "to" and a.i == TensorProto.FLOAT16:
                a.i = TensorProto.BFLOAT16
            if a.type == onnx.AttributeProto.TENSOR:
                retype(a.t)
    return m


def assert_within(got, want, tol):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        scale = max(float(np.abs(w).max()), 1e-6)
        err = float(np.abs(g.astype(np.float64) - w).max())
        assert err <= tol * scale, (err / scale, tol)


@pytest.mark.parametrize("stem", ["torch_cnn_opset13", "tf2onnx_cnn", "torch_lstm_opset13",
                                  "paddle_transformer"])
def test_float16_conversion(stem):
    model, feeds = fixture(stem)
    half = float16.convert_float_to_float16(model, keep_io_types=True)
    assert any(t.data_type == TensorProto.FLOAT16 for t in half.graph.initializer)
    got = graphrt.Session(half).run(None, feeds)
    assert_within(got, onnxruntime_run(half, feeds), F16_TOL)


@pytest.mark.parametrize("stem", ["torch_lstm_opset13", "paddle_transformer"])
def test_bfloat16_retyped(stem):
    model, feeds = fixture(stem)
    b16 = as_bfloat16(float16.convert_float_to_float16(model, keep_io_types=True))
    assert any(t.data_type == TensorProto.BFLOAT16 for t in b16.graph.initializer)
    got = graphrt.Session(b16).run(None, feeds)
    assert_within(got, onnxruntime_run(model, feeds), BF16_TOL)


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_bfloat16_steps_run_as_compiled_calls_with_the_first_runs_bits(mode):
    """bfloat16 operands are widened and results rounded by compiled conversions, and moved
    as 16-bit words, so the products, softmaxes and transposes of a bfloat16 transformer run
    inside blocks, with the bits of its first (step-by-step) run."""
    from graphrt.plan import program

    from .test_blocks import plain_program
    model, feeds = fixture("paddle_transformer")
    b16 = as_bfloat16(float16.convert_float_to_float16(model, keep_io_types=True))
    sess = graphrt.Session(b16, graphrt.SessionOptions(mode=mode, intra_op_threads=1))
    want = sess.run(None, feeds)
    for _ in range(3):
        assert [g.tobytes() for g in sess.run(None, feeds)] == [w.tobytes() for w in want]
    plan, prog = plain_program(sess)
    blocked = {plan.steps[i].node.info.op_type for fn, _a, _i in prog
               if isinstance(fn, program.Block) for i in fn.steps}
    assert {"MatMul", "Softmax", "Transpose"} <= blocked, blocked
