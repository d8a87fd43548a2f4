"""Models as users get them from onnxruntime's own tools: exporter fixtures of
tests/exporters/models (torch, tf2onnx, paddle2onnx) quantized by onnxruntime.quantization
(dynamic; static QDQ and QOperator; per tensor and per channel) and rewritten by
onnxruntime.transformers.optimizer, then run by graphrt and by onnxruntime on the fixture's
inputs.

Tolerances, as a fraction of the largest output magnitude:
- optimised models, dynamically quantized ones (with reduce_range: 7-bit weights, so
  onnxruntime's uint8 x int8 kernel cannot saturate) and QOperator ones: 2e-6, the float
  tolerance of test_exporters.py (both runtimes compute the same exact integer products and
  the same float steps around them; measured: 0 on every quantized case);
- dynamically quantized LSTMs (DynamicQuantizeLSTM): onnxruntime quantizes the input and
  the hidden state to uint8 at every step, graphrt runs the LSTM of the dequantized weights
  in float: 1e-2, the cost of the quantization itself on these fixtures (onnxruntime's
  quantized model against its float one: up to 9.8e-3 measured; graphrt against it: 6.4e-3);
- QDQ models: onnxruntime runs each QDQ group as an integer convolution with one
  requantization, graphrt dequantizes and convolves in float32, so a quantized activation
  may land one step apart: 5e-3 (one step of these fixtures' quantized softmax outputs is
  1/255 ~ 3.9e-3, the largest difference measured).
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

import graphrt

ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "exporters",
                      "models")


def fixture(stem):
    path = os.path.join(MODELS, stem + ".onnx")
    if not os.path.exists(path):
        pytest.skip(f"fixture {stem} is not in tests/exporters/models")
    return path, dict(np.load(os.path.join(MODELS, stem + ".npz")))


def compare(path, feeds, scale_tol, ops=()):
    """graphrt's outputs against onnxruntime's within ``scale_tol`` of the largest output
    magnitude; the model must contain each of ``ops``."""
    model = onnx.load(path)
    have = {n.op_type for n in model.graph.node}
    assert set(ops) <= have, (set(ops) - have, sorted(have))
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = graphrt.Session(path).run(None, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        scale = max(1.0, float(np.abs(w).max()))
        err = float(np.abs(g.astype(np.float64) - w).max())
        assert err <= scale_tol * scale, (err, scale)
    return have


class Calibration(quantization.CalibrationDataReader):
    """The fixture's input and a few noisy copies of it."""

    def __init__(self, feeds, n=4):
        rng = np.random.default_rng(0)
        self.data = iter([{k: (v + rng.normal(0, 0.1, v.shape)).astype(v.dtype)
                           if v.dtype.kind == "f" else v for k, v in feeds.items()}
                          for _ in range(n)])

    def get_next(self):
        return next(self.data, None)


_PRODUCTS = (2e-6, ["DynamicQuantizeLinear", "MatMulInteger"])
_LSTM = (1e-2, ["DynamicQuantizeLSTM"])


@pytest.mark.parametrize("stem,expected", [
    ("torch_attention_opset13", _PRODUCTS), ("torch_transformer_opset14", _PRODUCTS),
    ("paddle_transformer", _PRODUCTS), ("torch_lstm_opset13", _LSTM), ("tf2onnx_rnn", _LSTM)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_dynamically_quantized(tmp_path, stem, expected, per_channel):
    src, feeds = fixture(stem)
    out = str(tmp_path / "q.onnx")
    quantization.quantize_dynamic(src, out, weight_type=quantization.QuantType.QInt8,
                                  per_channel=per_channel, reduce_range=True)
    tol, ops = expected
    compare(out, feeds, tol, ops=ops)


@pytest.mark.parametrize("stem", ["torch_cnn_opset13", "tf2onnx_cnn"])
@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_statically_quantized(tmp_path, stem, fmt, per_channel):
    src, feeds = fixture(stem)
    out = str(tmp_path / "q.onnx")
    try:
        quantization.quantize_static(src, out, Calibration(feeds),
                                     quant_format=getattr(quantization.QuantFormat, fmt),
                                     per_channel=per_channel, reduce_range=True)
    except Exception as e:  # noqa: BLE001 - the quantizer's own failure is not graphrt's
        pytest.skip(f"onnxruntime's quantizer failed on {stem}: {type(e).__name__}")
    ops = ["QuantizeLinear", "DequantizeLinear"] if fmt == "QDQ" else ["QLinearConv"]
    compare(out, feeds, 5e-3 if fmt == "QDQ" else 2e-6, ops=ops)


@pytest.mark.parametrize("stem,fused", [
    ("torch_attention_opset13", ("com.microsoft", "SkipLayerNormalization")),
    # at opset 14 the optimizer writes onnxruntime's own LayerNormalization (opset 17's)
    ("torch_transformer_opset14", ("", "LayerNormalization")),
])
def test_transformer_optimizer(tmp_path, stem, fused):
    from onnxruntime.transformers.optimizer import optimize_model
    src, feeds = fixture(stem)
    out = str(tmp_path / "opt.onnx")
    optimize_model(src, model_type="bert", num_heads=4, hidden_size=32,
                   opt_level=0).save_model_to_file(out)
    compare(out, feeds, 2e-6)
    assert fused in {(n.domain, n.op_type) for n in onnx.load(out).graph.node}
