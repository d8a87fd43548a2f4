"""SwiGLU, Col2Im, CausalConvWithState, LinearAttention and FlexAttention through
graphrt.Session, compared with onnx's reference evaluator (numpy where the reference cannot
run the model, e.g. a FlexAttention modifier reading an outer value)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphrt
from graphrt import ErrorKind, SessionError, SessionOptions

from .helpers import EXACT, compare, error, feeds_of, model_of
from .models import const, make, tensor

F32 = np.float32
PREVIEW = "ai.onnx.preview"


def rand(shape, dtype=F32, seed=0, low=-1.0):
    r = np.random.default_rng(seed).random(shape)
    return (low + (1 - low) * r).astype(dtype)


# ----------------------------------------------------------------------------- SwiGLU

@pytest.mark.parametrize("dtype,alpha,rtol", [(F32, None, 1e-5), (np.float64, 0.5, 1e-12),
                                              (np.float16, 1.7, 2e-3)])
def test_swiglu_matches_reference(dtype, alpha, rtol):
    inputs = {"A": rand((3, 5), dtype, 1, -4), "B": rand((3, 5), dtype, 2, -4)}
    attrs = {} if alpha is None else {"alpha": alpha}
    compare("SwiGLU", inputs, [("Y", dtype)], attrs, opset=28, rtol=rtol)


def test_swiglu_empty_and_no_broadcast():
    compare("SwiGLU", {"A": np.zeros((2, 0), F32), "B": np.zeros((2, 0), F32)}, [("Y", F32)],
            opset=28)
    msg = error(ErrorKind.INVALID_MODEL, "SwiGLU", {"A": rand((2, 3)), "B": rand((1, 3))},
                [("Y", F32)], opset=28)
    assert "broadcast" in msg


def test_swiglu_is_not_exact():
    model = model_of("SwiGLU", {"A": rand((2,)), "B": rand((2,))}, [("Y", F32)], opset=28)
    with pytest.raises(SessionError) as info:
        graphrt.Session(model, EXACT)
    assert info.value.kind == ErrorKind.EXACT_MODE_UNAVAILABLE


# ----------------------------------------------------------------------------- Col2Im

# name: (input shape, image_shape, block_shape, attributes)
COL2IM = {
    "plain": ((1, 5, 5), [5, 5], [1, 5], {}),
    "strides_batch_channels": ((2, 18, 4), [5, 5], [3, 3], {"strides": [2, 2]}),
    "pads_dilations": ((1, 8, 25), [4, 5], [2, 2], {"pads": [1, 0, 2, 1],
                                                   "dilations": [2, 1]}),
    "three_d": ((1, 24, 12), [3, 4, 5], [2, 2, 3], {"strides": [1, 2, 1]}),
    "one_d": ((2, 6, 4), [6], [3], {}),
}


@pytest.mark.parametrize("name", sorted(COL2IM))
def test_col2im_matches_reference(name):
    shape, image, block, attrs = COL2IM[name]
    inputs = {"x": rand(shape), "image_shape": np.array(image, np.int64),
              "block_shape": np.array(block, np.int64)}
    compare("Col2Im", inputs, [("y", F32)], attrs, opset=18)


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.bool_])
def test_col2im_types_and_constant_shapes(dtype):
    x = rand((2, 8, 6), F32, 3, -3)
    x = x > 0.4 if dtype == np.bool_ else (x * 10).astype(dtype)
    inputs = {"x": x, "image_shape": np.array([3, 4], np.int64),
              "block_shape": np.array([2, 2], np.int64)}
    inits = [const(n, inputs[n]) for n in ("image_shape", "block_shape")]
    compare("Col2Im", inputs, [("y", dtype)], {}, opset=18, inits=inits, rtol=1e-3)


def test_col2im_exact_matches_fast_and_empty():
    inputs = {"x": rand((2, 9, 9)), "image_shape": np.array([6, 6], np.int64),
              "block_shape": np.array([3, 3], np.int64)}
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 2]}
    model = model_of("Col2Im", inputs, [("y", F32)], attrs, opset=18)
    fast = graphrt.Session(model).run(None, inputs)[0]
    exact = graphrt.Session(model, EXACT).run(None, inputs)[0]
    np.testing.assert_array_equal(fast, exact)
    inputs["x"] = np.zeros((0, 9, 9), F32)
    model = model_of("Col2Im", inputs, [("y", F32)], attrs, opset=18)
    assert graphrt.Session(model).run(None, inputs)[0].shape == (0, 1, 6, 6)


def test_col2im_errors():
    inputs = {"x": rand((1, 9, 5)), "image_shape": np.array([5, 5], np.int64),
              "block_shape": np.array([3, 3], np.int64)}
    msg = error(ErrorKind.INVALID_INPUT, "Col2Im", inputs, [("y", F32)], opset=18)
    assert "9 blocks" in msg
    inputs["x"] = np.array([["a"] * 9], dtype=object).reshape(1, 9, 1)
    inputs["image_shape"] = np.array([3, 3], np.int64)
    error(ErrorKind.UNSUPPORTED, "Col2Im", inputs, [("y", object)], opset=18)
    error(ErrorKind.INVALID_MODEL, "Col2Im", inputs, [("y", object)], {"strides": [0, 1]},
          opset=18)


# ----------------------------------------------------------------------------- CausalConvWithState

def causal_inputs(batch=2, ch=3, n=7, k=4, bias=False, past=False, dtype=F32):
    return {"input": rand((batch, ch, n), dtype, 1), "weight": rand((ch, 1, k), dtype, 2),
            "bias": rand((ch,), dtype, 3) if bias else None,
            "past_state": rand((batch, ch, k - 1), dtype, 4) if past else None}


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
    inputs["weight"] = rand((2, 1, 4))
    assert "weight" in error(ErrorKind.INVALID_MODEL, "CausalConvWithState", inputs, [("y", F32)])
    inputs = causal_inputs(past=True)
    inputs["past_state"] = rand((2, 3, 2))
    assert "past_state" in error(ErrorKind.INVALID_MODEL, "CausalConvWithState", inputs,
                                 [("y", F32)])


# ----------------------------------------------------------------------------- LinearAttention

def linear_inputs(rule, b=2, t=3, hq=4, hkv=2, dk=3, dv=5, past=False, decay_per_head=False,
                  beta_scalar=False, dtype=F32):
    inputs = {"query": rand((b, t, hq * dk), dtype, 1), "key": rand((b, t, hkv * dk), dtype, 2),
              "value": rand((b, t, hkv * dv), dtype, 3),
              "past_state": rand((b, hkv, dk, dv), dtype, 4) if past else None}
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    decay = rand((b, t, hkv if decay_per_head else hkv * dk), dtype, 5, -0.5) * 0.5
    inputs["decay"] = decay if gated else None
    inputs["beta"] = rand((b, t, 1 if beta_scalar else hkv), dtype, 6, 0) if delta else None
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
    inputs["beta"] = rand((2, 3, 3))
    assert "beta" in error(ErrorKind.INVALID_MODEL, "LinearAttention", inputs, [("y", F32)],
                           attrs)


# ----------------------------------------------------------------------------- FlexAttention

def flex_inputs(q=(2, 4, 3, 8), k=(2, 2, 5, 8), ev=6, dtype=F32):
    return {"Q": rand(q, dtype, 1, 0), "K": rand(k, dtype, 2, 0),
            "V": rand(k[:3] + (ev,), dtype, 3, 0)}


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
    inputs["K"] = rand((2, 3, 5, 8))
    error(ErrorKind.INVALID_MODEL, "FlexAttention", inputs, [("Y", F32)], opset=26,
          domain=PREVIEW)
    model = model_of("FlexAttention", flex_inputs(), [("Y", F32)], opset=26, domain=PREVIEW)
    with pytest.raises(SessionError) as info:
        graphrt.Session(model, EXACT)
    assert info.value.kind == ErrorKind.EXACT_MODE_UNAVAILABLE


# ----------------------------------------------------------------------------- planner finding

def test_dynamic_view_keeps_its_source_alive():
    # k2 = Unsqueeze(k, axes) with axes a graph input is a dynamic view of k's slab block;
    # k's block must not be reused (here by a) while k2 is still read.
    n = helper.make_node
    nodes = [n("Neg", ["x"], ["k"]), n("Unsqueeze", ["k", "axes"], ["k2"]),
             n("Add", ["x", "x"], ["a"]), n("Mul", ["a", "k2"], ["y"])]
    model = make(nodes, [tensor("x", TensorProto.FLOAT, [64]),
                         tensor("axes", TensorProto.INT64, [1])],
                 [tensor("y", TensorProto.FLOAT, None)], opset=17)
    x = rand((64,))
    got = graphrt.Session(model, SessionOptions(optimization_level="none")).run(
        None, {"x": x, "axes": np.array([0], np.int64)})[0]
    np.testing.assert_allclose(got, ((x + x) * -x)[None], rtol=1e-6)
