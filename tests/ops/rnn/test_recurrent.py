"""RNN, GRU and LSTM through graphrt.Session, compared with onnx's reference evaluator
(onnxruntime where the reference ignores an attribute: sequence_lens, activations, clip)."""
from __future__ import annotations

import numpy as np
import pytest

import graphrt
from graphrt import ErrorKind

from ...helpers import SKIP, check, fails, feeds, one_node, onnxruntime_outputs, rand, run


# ----------------------------------------------------------------------------- RNN / GRU / LSTM

def rnn_inputs(op, seq, batch, isz, hs, dirs, layout=0, bias=True, init=False, peep=False,
               seed=0):
    g = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    x = rand((batch, seq, isz) if layout else (seq, batch, isz), seed=seed)
    inputs = [x, rand((dirs, g * hs, isz), seed=seed + 1) * 0.5,
              rand((dirs, g * hs, hs), seed=seed + 2) * 0.5,
              rand((dirs, 2 * g * hs), seed=seed + 3) * 0.2 if bias else None, None]
    state = (batch, dirs, hs) if layout else (dirs, batch, hs)
    if init or peep:
        inputs.append(rand(state, seed=seed + 4) if init else None)
        if op == "LSTM":
            inputs.append(rand(state, seed=seed + 5) if init else None)
            if peep:
                inputs.append(rand((dirs, 3 * hs), seed=seed + 6) * 0.3)
    while inputs[-1] is None:
        inputs.pop()
    return inputs


RNN_CASES = [
    ("RNN", {"direction": "forward"}, dict(layout=0)),
    ("RNN", {"direction": "bidirectional"}, dict(layout=1, init=True)),
    ("GRU", {"direction": "reverse"}, dict(layout=0, init=True)),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 1}, dict(layout=1)),
    ("LSTM", {"direction": "forward"}, dict(layout=0, init=True, peep=True)),
    ("LSTM", {"direction": "bidirectional"}, dict(layout=1, bias=False)),
]


@pytest.mark.parametrize("op,attrs,kw", RNN_CASES)
def test_recurrent_matches_reference(op, attrs, kw):
    hs = 5
    inputs = rnn_inputs(op, 4, 3, 2, hs, 2 if attrs["direction"] == "bidirectional" else 1, **kw)
    attrs = dict(attrs, hidden_size=hs, layout=kw["layout"])
    n_out = 3 if op == "LSTM" else 2
    # the reference evaluator returns LSTM's Y_c only when asked through Y_h's position
    check(op, inputs, attrs, opset=14, n_out=min(n_out, 2), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,attrs", [
    ("RNN", {"activations": ["Relu", "LeakyRelu"], "activation_alpha": [0.3],
             "direction": "bidirectional", "clip": 1.5}),
    ("GRU", {"activations": ["HardSigmoid", "Softsign"], "activation_alpha": [0.3],
             "activation_beta": [0.4], "direction": "reverse"}),
    ("LSTM", {"direction": "bidirectional", "clip": 0.8}),
    ("LSTM", {"activations": ["Sigmoid", "Affine", "Tanh"], "activation_alpha": [0.7],
              "activation_beta": [0.1], "input_forget": 1}),
])
def test_recurrent_sequence_lens_and_activations_match_onnxruntime(op, attrs):
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    inputs = rnn_inputs(op, 5, 3, 4, 3, dirs, init=True, seed=7)
    inputs[4] = np.array([5, 2, 3], np.int32)
    n_out = 3 if op == "LSTM" else 2
    model = one_node(op, inputs, dict(attrs, hidden_size=3), 14, outs=[inputs[0].dtype] * n_out)
    want = onnxruntime_outputs(model, feeds(inputs))
    got = graphrt.Session(model).run(None, feeds(inputs))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert (got[0][3:, :, 1] == 0).all()        # past entry 1's two steps


def test_recurrent_float_types_and_skipped_outputs():
    inputs = [x.astype(np.float64) if x is not None else None
              for x in rnn_inputs("GRU", 3, 2, 3, 4, 1)]
    check("GRU", inputs, {"hidden_size": 4}, 14, n_out=2, rtol=1e-12, atol=1e-6)
    inputs = [x.astype(np.float16) if x is not None else None
              for x in rnn_inputs("LSTM", 3, 2, 3, 4, 1)]
    check("LSTM", inputs, {"hidden_size": 4}, 14, n_out=2, rtol=2e-3, atol=2e-3)
    inputs = rnn_inputs("RNN", 3, 2, 3, 4, 1)
    got = run("RNN", inputs, {"hidden_size": 4}, 14, outs=[SKIP, None])
    full = run("RNN", inputs, {"hidden_size": 4}, 14, n_out=2)
    np.testing.assert_array_equal(got[0], full[1])


def test_recurrent_errors():
    inputs = rnn_inputs("GRU", 3, 2, 3, 4, 1)
    fails(ErrorKind.INVALID_MODEL, "GRU", inputs, {"hidden_size": 5}, 14)
    fails(ErrorKind.INVALID_MODEL, "GRU", inputs, {"hidden_size": 4, "direction": "both"}, 14)
    fails(ErrorKind.UNSUPPORTED, "GRU", inputs,
          {"hidden_size": 4, "activations": ["Sigmoid", "Gelu"]}, 14)
    fails(ErrorKind.INVALID_MODEL, "GRU", inputs, {"hidden_size": 4, "activations": ["Tanh"]}, 14)
    bad = inputs[:4] + [np.array([3, 4], np.int32)]
    fails(ErrorKind.INVALID_INPUT, "GRU", bad, {"hidden_size": 4}, 14)
    # exact mode: graphrt's own tanh/sigmoid; the same bits at 1 and 2 threads, close to fast
    feeds = rnn_inputs("LSTM", 6, 3, 5, 8, 1)
    model = one_node("LSTM", feeds, {"hidden_size": 8}, 14)
    names = [i.name for i in model.graph.input]
    runs = [graphrt.Session(model, graphrt.SessionOptions(mode=m, intra_op_threads=t)).run(
        None, dict(zip(names, feeds)))[0] for m, t in (("exact", 1), ("exact", 2), ("fast", 1))]
    assert runs[0].tobytes() == runs[1].tobytes()
    np.testing.assert_allclose(runs[0], runs[2], rtol=1e-5, atol=1e-6)


PATH_CASES = [
    ("RNN", {"direction": "bidirectional", "clip": 1.5}, 1),
    ("GRU", {"direction": "reverse"}, 2),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 1}, 1),
    ("LSTM", {"direction": "forward", "activations": ["Sigmoid", "Affine", "Tanh"],
              "activation_alpha": [0.7], "activation_beta": [0.1]}, 2),
    ("LSTM", {"direction": "bidirectional", "clip": 0.8}, 1),
]


@pytest.mark.parametrize("op,attrs,batch", PATH_CASES)
@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_recurrent_paths_give_the_same_bits(op, attrs, batch, mode, monkeypatch):
    """A fused recurrence (one call per sequence, x W^T made inside for few rows) and the
    per-step products of the large-shape path make every element with the same operations."""
    from graphrt.kernels.rnn import recurrent
    dirs = 2 if attrs["direction"] == "bidirectional" else 1
    got = {}
    for seq in (1, 6):
        inputs = rnn_inputs(op, seq, batch, 7, 9, dirs, init=True, peep=op == "LSTM", seed=3)
        inputs[4] = None if batch == 1 else np.array([seq, max(1, seq - 2)], np.int32)
        n_out = 3 if op == "LSTM" else 2
        model = one_node(op, inputs, dict(attrs, hidden_size=9), 14, outs=[np.float32] * n_out,
                         consts=(1, 2, 3, 7))
        x = feeds(inputs, consts=(1, 2, 3, 7))
        for path, fused in (("fused", (4, 1 << 18)), ("steps", (0, 0))):
            monkeypatch.setattr(recurrent, "FUSED_BATCH", fused[0])
            monkeypatch.setattr(recurrent, "FUSED_WEIGHTS", fused[1])
            sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode))
            got[seq, path] = [a.tobytes() for a in sess.run(None, x)]
        assert got[seq, "fused"] == got[seq, "steps"]


@pytest.mark.parametrize("op,attrs,batch", PATH_CASES)
@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_constant_weights_give_the_bits_of_weights_fed_at_run_time(op, attrs, batch, mode):
    """A constant W is laid out once per plan as the tiles' panels; W fed as an input is
    read transposed and packed each run: x W^T's elements are made the same way."""
    dirs = 2 if attrs["direction"] == "bidirectional" else 1
    inputs = rnn_inputs(op, 7, batch, 11, 9, dirs, init=True, peep=op == "LSTM", seed=5)
    inputs[4] = None
    n_out = 3 if op == "LSTM" else 2
    got = []
    for consts in ((1, 2, 3, 7), (2, 3, 7)):
        model = one_node(op, inputs, dict(attrs, hidden_size=9), 14, outs=[np.float32] * n_out,
                         consts=consts)
        sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode))
        got.append([a.tobytes() for a in sess.run(None, feeds(inputs, consts=consts))])
    assert got[0] == got[1]
