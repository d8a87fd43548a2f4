"""CausalConvWithState, LinearAttention and FlexAttention (attention/preview.py) through
graphrt.Session, compared with onnx's reference evaluator (numpy where the reference cannot
run the model, e.g. a FlexAttention modifier reading an outer value)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphrt
from graphrt import ErrorKind, SessionError

from ...helpers import EXACT, bits, compare, error, feeds_of, model_of, threads, uniform
from ...models import const


F32 = np.float32
PREVIEW = "ai.onnx.preview"


# ----------------------------------------------------------------------------- CausalConvWithState

def causal_inputs(batch=2, ch=3, n=7, k=4, bias=False, past=False, dtype=F32):
    return {"input": uniform((batch, ch, n), dtype, 1), "weight": uniform((ch, 1, k), dtype, 2),
            "bias": uniform((ch,), dtype, 3) if bias else None,
            "past_state": uniform((batch, ch, k - 1), dtype, 4) if past else None}


@pytest.mark.parametrize("kw,act", [({}, None), ({"bias": True, "past": True}, "silu"),
                                    ({"past": True, "n": 2, "k": 5}, None),
                                    ({"n": 2, "k": 5}, "swish"), ({"k": 1, "bias": True}, None)])
def test_causal_conv_matches_reference(kw, act):
    attrs = {} if act is None else {"activation": act}
    inputs = causal_inputs(**kw)
    inputs = {n: x for n, x in inputs.items() if x is not None or n == "bias"}
    if inputs["bias"] is None and "past_state" not in inputs:
        del inputs["bias"]
    compare("CausalConvWithState", inputs, [("y", F32), ("state", F32)], attrs)


def test_causal_conv_float16_and_output_only():
    inputs = causal_inputs(bias=True, past=True, dtype=np.float16)
    compare("CausalConvWithState", inputs, [("y", np.float16), ("state", np.float16)],
            {"activation": "silu"}, rtol=2e-3, atol=2e-3)
    compare("CausalConvWithState", causal_inputs(), [("y", F32)])


def test_causal_conv_exact_only_without_activation():
    inputs = causal_inputs(bias=True, past=True)
    model = model_of("CausalConvWithState", inputs, [("y", F32), ("state", F32)])
    fast = graphrt.Session(model).run(None, inputs)
    exact = graphrt.Session(model, EXACT).run(None, inputs)
    for f, e in zip(fast, exact):
        np.testing.assert_allclose(e, f, rtol=1e-6, atol=1e-7)
    silu = model_of("CausalConvWithState", inputs, [("y", F32)], {"activation": "silu"})
    with pytest.raises(SessionError) as info:
        graphrt.Session(silu, EXACT)
    assert info.value.kind == ErrorKind.EXACT_MODE_UNAVAILABLE


def test_causal_conv_errors():
    inputs = causal_inputs()
    error(ErrorKind.INVALID_MODEL, "CausalConvWithState", inputs, [("y", F32)],
          {"activation": "relu"})
    inputs["weight"] = uniform((2, 1, 4))
    assert "weight" in error(ErrorKind.INVALID_MODEL, "CausalConvWithState", inputs, [("y", F32)])
    inputs = causal_inputs(past=True)
    inputs["past_state"] = uniform((2, 3, 2))
    assert "past_state" in error(ErrorKind.INVALID_MODEL, "CausalConvWithState", inputs,
                                 [("y", F32)])


# ----------------------------------------------------------------------------- LinearAttention

def linear_inputs(rule, b=2, t=3, hq=4, hkv=2, dk=3, dv=5, past=False, decay_per_head=False,
                  beta_scalar=False, dtype=F32):
    inputs = {"query": uniform((b, t, hq * dk), dtype, 1),
              "key": uniform((b, t, hkv * dk), dtype, 2),
              "value": uniform((b, t, hkv * dv), dtype, 3),
              "past_state": uniform((b, hkv, dk, dv), dtype, 4) if past else None}
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    decay = uniform((b, t, hkv if decay_per_head else hkv * dk), dtype, 5, -0.5) * 0.5
    inputs["decay"] = decay if gated else None
    inputs["beta"] = uniform((b, t, 1 if beta_scalar else hkv), dtype, 6, 0) if delta else None
    while inputs and list(inputs.values())[-1] is None:
        inputs.popitem()
    return inputs, {"q_num_heads": hq, "kv_num_heads": hkv, "update_rule": rule}


@pytest.mark.parametrize("rule,kw", [
    ("linear", {}), ("gated", {"decay_per_head": True, "past": True}),
    ("delta", {"beta_scalar": True}), ("gated_delta", {"past": True}),
    ("gated_delta", {"hq": 6, "hkv": 1, "t": 1}), ("linear", {"t": 0, "past": True})])
def test_linear_attention_matches_reference(rule, kw):
    inputs, attrs = linear_inputs(rule, **kw)
    compare("LinearAttention", inputs, [("y", F32), ("state", F32)], attrs, rtol=1e-5,
            atol=1e-6)


def test_linear_attention_float16_scale_and_output_only():
    inputs, attrs = linear_inputs("gated_delta", dtype=np.float16)
    compare("LinearAttention", inputs, [("y", np.float16), ("state", np.float16)],
            dict(attrs, scale=0.25), rtol=3e-3, atol=3e-3)
    inputs, attrs = linear_inputs("delta", past=True)
    inputs["past_state"] = inputs["past_state"].astype(np.float16)   # S differs from T
    compare("LinearAttention", inputs, [("y", F32), ("state", np.float16)], attrs, rtol=2e-3,
            atol=2e-3)
    inputs, attrs = linear_inputs("linear")
    compare("LinearAttention", inputs, [("y", F32)], attrs)


def test_linear_attention_exact_for_ungated_rules():
    inputs, attrs = linear_inputs("delta", past=True)
    model = model_of("LinearAttention", inputs, [("y", F32), ("state", F32)], attrs)
    feeds = feeds_of(model, inputs)
    fast = graphrt.Session(model).run(None, feeds)
    exact = graphrt.Session(model, EXACT).run(None, feeds)
    for f, e in zip(fast, exact):
        np.testing.assert_allclose(e, f, rtol=1e-5, atol=1e-6)
    inputs, attrs = linear_inputs("gated")
    with pytest.raises(SessionError) as info:
        graphrt.Session(model_of("LinearAttention", inputs, [("y", F32)], attrs), EXACT)
    assert info.value.kind == ErrorKind.EXACT_MODE_UNAVAILABLE


def test_linear_attention_errors():
    inputs, attrs = linear_inputs("linear")
    assert "decay" in error(ErrorKind.INVALID_MODEL, "LinearAttention", inputs, [("y", F32)],
                            dict(attrs, update_rule="gated"))
    error(ErrorKind.INVALID_MODEL, "LinearAttention", inputs, [("y", F32)],
          dict(attrs, q_num_heads=3))
    error(ErrorKind.INVALID_MODEL, "LinearAttention", inputs, [("y", F32)],
          dict(attrs, update_rule="fast"))
    inputs, attrs = linear_inputs("delta")
    inputs["beta"] = uniform((2, 3, 3))
    assert "beta" in error(ErrorKind.INVALID_MODEL, "LinearAttention", inputs, [("y", F32)],
                           attrs)


# ----------------------------------------------------------------------------- FlexAttention

def flex_inputs(q=(2, 4, 3, 8), k=(2, 2, 5, 8), ev=6, dtype=F32):
    return {"Q": uniform(q, dtype, 1, 0), "K": uniform(k, dtype, 2, 0),
            "V": uniform(k[:3] + (ev,), dtype, 3, 0)}


def mod_graph(name, op, operand, dtype=TensorProto.FLOAT, outer=False):
    """(x) -> op(x, operand); ``operand`` is an initializer of the body, or with ``outer`` an
    outer-scope value the body reads."""
    x = helper.make_tensor_value_info("x", dtype, None)
    y = helper.make_tensor_value_info("y", dtype, None)
    inits = [] if outer else [helper.make_tensor(operand, dtype, [], [0.5])]
    return helper.make_graph([helper.make_node(op, ["x", operand], ["y"])], name, [x], [y],
                             inits)


def numpy_flex(q, k, v, scale=None, score=lambda s: s, prob=lambda p: p):
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = (q @ k.swapaxes(-1, -2)) * (scale or 1 / np.sqrt(q.shape[-1]))
    s = score(s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return prob(p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("dtype,attrs,rtol", [(F32, {}, 1e-5), (F32, {"scale": 0.3}, 1e-5),
                                              (np.float64, {}, 1e-12),
                                              (np.float16, {}, 2e-3),
                                              (F32, {"softmax_precision": 11}, 1e-5)])
def test_flex_attention_matches_reference(dtype, attrs, rtol):
    compare("FlexAttention", flex_inputs(dtype=dtype), [("Y", dtype)], attrs, opset=26,
            domain=PREVIEW, rtol=rtol, atol=rtol)


def test_flex_attention_modifiers():
    inputs = flex_inputs()
    attrs = {"score_mod": mod_graph("s", "Add", "bias"), "prob_mod": mod_graph("p", "Mul", "c")}
    got = compare("FlexAttention", inputs, [("Y", F32)], attrs, opset=26, domain=PREVIEW)[0]
    want = numpy_flex(*inputs.values(), score=lambda s: s + 0.5, prob=lambda p: p * 0.5)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_flex_attention_modifier_reads_an_outer_value():
    inputs = flex_inputs(q=(1, 2, 3, 4), k=(1, 2, 3, 4), ev=4)
    mask = np.array([[0, -np.inf, -np.inf], [0, 0, -np.inf], [0, 0, 0]], F32)
    model = model_of("FlexAttention", inputs, [("Y", F32)],
                     {"score_mod": mod_graph("s", "Add", "mask", outer=True)}, opset=26,
                     inits=[const("mask", mask)], domain=PREVIEW)
    got = graphrt.Session(model).run(None, inputs)[0]
    np.testing.assert_allclose(got, numpy_flex(*inputs.values(), score=lambda s: s + mask),
                               rtol=1e-5)


def test_flex_attention_errors():
    inputs = flex_inputs()
    bad = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=1)], "b",
                            [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    assert "score_mod" in error(ErrorKind.INVALID_MODEL, "FlexAttention", inputs, [("Y", F32)],
                                {"score_mod": bad}, opset=26, domain=PREVIEW)
    inputs["K"] = uniform((2, 3, 5, 8))
    error(ErrorKind.INVALID_MODEL, "FlexAttention", inputs, [("Y", F32)], opset=26,
          domain=PREVIEW)


@pytest.mark.parametrize("dtype,attrs,rtol", [(F32, {}, 1e-5), (np.float16, {}, 2e-3),
                                              (F32, {"softmax_precision": 10}, 2e-3)])
def test_flex_attention_exact_matches_reference(dtype, attrs, rtol):
    compare("FlexAttention", flex_inputs(dtype=dtype), [("Y", dtype)], attrs, opset=26,
            domain=PREVIEW, rtol=rtol, atol=rtol, options=EXACT)


def test_flex_attention_exact_modifiers_and_threads():
    inputs = flex_inputs()
    attrs = {"score_mod": mod_graph("s", "Add", "bias"), "prob_mod": mod_graph("p", "Mul", "c")}
    compare("FlexAttention", inputs, [("Y", F32)], attrs, opset=26, domain=PREVIEW,
            options=EXACT)
    big = flex_inputs((2, 4, 64, 16), (2, 2, 160, 16), 8)          # parallel softmax rows
    model = model_of("FlexAttention", big, [("Y", F32)], attrs, opset=26, domain=PREVIEW)
    one, two = (graphrt.Session(model, threads(n)).run(None, big)[0] for n in (1, 2))
    assert (bits(one) == bits(two)).all()
    fast = graphrt.Session(model).run(None, big)[0]
    np.testing.assert_allclose(one, fast, rtol=1e-5, atol=1e-6)
    # a modifier body is compiled with the session's options: its operators must be exact
    noisy = helper.make_graph(
        [helper.make_node("RandomUniformLike", ["x"], ["y"], dtype=TensorProto.FLOAT)], "n",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = model_of("FlexAttention", inputs, [("Y", F32)], {"prob_mod": noisy}, opset=26,
                     domain=PREVIEW)
    graphrt.Session(model)
    with pytest.raises(SessionError) as info:
        graphrt.Session(model, EXACT)
    assert info.value.kind == ErrorKind.EXACT_MODE_UNAVAILABLE
    assert "RandomUniformLike" in str(info.value)
