"""Attention and RotaryEmbedding through graphrt.Session, compared with onnx's reference
evaluator (numpy where the reference departs from the specification)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import graphrt
from graphrt import ErrorKind, SessionOptions

from graphrt.kernels.math.exactmath import exp as own_exp

from ...helpers import (CANONICAL_NAN32, EXACT, bits, compare, error, feeds_of, model_of, threads,
                        tree_sum, uniform)


def qkv(q, k, v, dtype=np.float32, seed=0):
    return {"Q": uniform(q, dtype, seed, low=0.0), "K": uniform(k, dtype, seed + 1, low=0.0),
            "V": uniform(v, dtype, seed + 2, low=0.0)}


F32 = np.float32

# ----------------------------------------------------------------------------- Attention

# name: (Q, K, V shapes, attributes, extra inputs (name -> (shape, dtype)), opset)
CASES = {
    "4d": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), {}, {}, 23),
    "4d_gqa_causal_scaled": ((1, 6, 5, 4), (1, 2, 7, 4), (1, 2, 7, 3),
                             {"is_causal": 1, "scale": 0.3}, {}, 23),
    "3d_mqa": ((2, 4, 12), (2, 5, 3), (2, 5, 6), {"q_num_heads": 4, "kv_num_heads": 1}, {}, 23),
    "float_mask_broadcast": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), {},
                             {"attn_mask": ((2, 1, 1, 5), F32)}, 23),
    "short_bool_mask_causal": ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), {"is_causal": 1},
                               {"attn_mask": ((3, 4), np.bool_)}, 24),
    "rank1_mask": ((2, 1, 3, 4), (2, 1, 4, 4), (2, 1, 4, 4), {}, {"attn_mask": ((4,), F32)}, 23),
    "past_causal_softcap": ((2, 2, 3, 4), (2, 2, 3, 4), (2, 2, 3, 6),
                            {"is_causal": 1, "softcap": 1.5},
                            {"past_key": ((2, 2, 4, 4), F32), "past_value": ((2, 2, 4, 6), F32)},
                            23),
    "3d_past": ((1, 3, 8), (1, 3, 8), (1, 3, 8), {"q_num_heads": 2, "kv_num_heads": 2},
                {"attn_mask": ((3, 5), F32), "past_key": ((1, 2, 2, 4), F32),
                 "past_value": ((1, 2, 2, 4), F32)}, 23),
    "window_both": ((1, 2, 6, 4), (1, 2, 6, 4), (1, 2, 6, 4),
                    {"left_window_size": 1, "right_window_size": 2}, {}, 25),
    "window_causal_nonpad": ((2, 2, 3, 4), (2, 2, 8, 4), (2, 2, 8, 4),
                             {"is_causal": 1, "left_window_size": 2}, {"nonpad_kv_seqlen": None},
                             25),
    "double": ((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), {"is_causal": 1}, {}, 23),
    "empty_query": ((1, 2, 0, 4), (1, 2, 3, 4), (1, 2, 3, 4), {}, {}, 23),
}


def attention_inputs(name):
    q, k, v, attrs, extra, opset = CASES[name]
    dtype = np.float64 if name == "double" else F32
    inputs = qkv(q, k, v, dtype)
    order = ["attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]
    for i, key in enumerate(order):
        if key in extra:
            if key == "nonpad_kv_seqlen":
                inputs[key] = np.array([8, 5], np.int64)
            else:
                shape, dt = extra[key]
                inputs[key] = uniform(shape, dt, 10 + i, low=0.0) if dt != np.bool_ else \
                    np.random.default_rng(3).random(shape) > 0.3
        elif any(o in extra for o in order[i + 1:]):
            inputs[key] = None
    return inputs, attrs, opset


@pytest.mark.parametrize("name", sorted(CASES))
def test_attention_matches_reference(name):
    inputs, attrs, opset = attention_inputs(name)
    dtype = inputs["Q"].dtype
    outputs = [("Y", dtype)]
    if "past_key" in inputs:
        outputs += [("present_key", dtype), ("present_value", dtype)]
    compare("Attention", inputs, outputs, attrs, opset, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_attention_qk_output_modes(mode):
    inputs = qkv((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4))
    inputs["attn_mask"] = np.array([[True, True, False, True, False]] * 2 + [[False] * 5])
    outputs = [("Y", F32), ("", F32), ("", F32), ("qk", F32)]
    got = compare("Attention", inputs, outputs,
                  {"qk_matmul_output_mode": mode, "softcap": 2.0, "is_causal": 1}, 24)
    assert not np.isnan(got[0]).any() and (got[0][:, :, 2] == 0).all()   # fully masked row


def test_attention_mode0_is_the_raw_product():
    # The specification's mode 0 is Q K^T * scale before softcap (the reference evaluator
    # returns the softcapped value): check against numpy.
    inputs = qkv((1, 1, 2, 4), (1, 1, 3, 4), (1, 1, 3, 4))
    model = model_of("Attention", inputs, [("Y", F32), ("", F32), ("", F32), ("qk", F32)],
                     {"softcap": 0.5, "scale": 0.25}, 23)
    y, qk = graphrt.Session(model).run(None, inputs)
    raw = inputs["Q"] @ inputs["K"].transpose(0, 1, 3, 2) * 0.25
    np.testing.assert_allclose(qk, raw, rtol=1e-6)
    capped = 0.5 * np.tanh(raw / 0.5)
    p = np.exp(capped - capped.max(-1, keepdims=True))
    np.testing.assert_allclose(y, (p / p.sum(-1, keepdims=True)) @ inputs["V"], rtol=1e-5)


def test_attention_float16_and_softmax_precision():
    inputs = qkv((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8), np.float16)
    inputs["attn_mask"] = uniform((3, 5), np.float16, 9, low=0.0)
    compare("Attention", inputs, [("Y", np.float16)], {"softmax_precision": 1}, 23,
            rtol=2e-3, atol=2e-3)
    inputs = qkv((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4))
    compare("Attention", inputs, [("Y", F32), ("", F32), ("", F32), ("qk", F32)],
            {"softmax_precision": 11, "qk_matmul_output_mode": 3}, 23)


def test_attention_bfloat16_rounds_like_its_function_body():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    inputs = {k: v.astype(bf16) for k, v in qkv((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8)).items()}
    inputs["attn_mask"] = (uniform((3, 5), F32, 9, low=0.0) - 0.5).astype(bf16)
    # (not softcap: the reference evaluator divides by it in float32, numpy's promotion)
    for attrs in ({"is_causal": 1}, {}, {"softmax_precision": 1}):
        compare("Attention", inputs, [("Y", bf16)], attrs, 23, rtol=1e-3, atol=1e-7)


def test_attention_large_runs_parallel_and_in_steps():
    # big enough for parallel products and row steps; two runs reuse the plan and arena
    inputs = qkv((2, 4, 64, 32), (2, 2, 80, 32), (2, 2, 80, 16), seed=4)
    inputs["attn_mask"] = uniform((64, 80), F32, 5, low=0.0) - 0.5
    model = model_of("Attention", inputs, [("Y", F32)], {"is_causal": 1}, 23)
    want = ReferenceEvaluator(model).run(None, inputs)[0]
    sess = graphrt.Session(model)
    for _ in range(2):
        np.testing.assert_allclose(sess.run(None, inputs)[0], want, rtol=1e-4, atol=1e-6)


def test_attention_errors():
    base = qkv((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4))
    y = [("Y", F32)]
    three = qkv((1, 3, 8), (1, 3, 8), (1, 3, 8))
    assert "q_num_heads" in error(ErrorKind.INVALID_MODEL, "Attention", three, y, opset=23)
    error(ErrorKind.INVALID_MODEL, "Attention", three, y, {"q_num_heads": 3, "kv_num_heads": 2},
          opset=23)
    error(ErrorKind.INVALID_MODEL, "Attention", qkv((1, 3, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)), y,
          opset=23)
    error(ErrorKind.INVALID_MODEL, "Attention", base, y, {"q_num_heads": 2, "kv_num_heads": 2},
          opset=25)
    error(ErrorKind.INVALID_MODEL, "Attention", dict(base, attn_mask=uniform((3, 5), low=0.0)), y,
          opset=23)
    error(ErrorKind.INVALID_MODEL, "Attention", dict(base, attn_mask=uniform((3, 3, 3), low=0.0)),
          y, opset=23)
    error(ErrorKind.INVALID_MODEL, "Attention",
          dict(base, attn_mask=None, past_key=uniform((1, 2, 2, 4), low=0.0)), y, opset=23)
    error(ErrorKind.INVALID_MODEL, "Attention", base, y, {"qk_matmul_output_mode": 4}, opset=23)
    mixed = dict(base, V=base["V"].astype(np.float64))
    error(ErrorKind.INVALID_MODEL, "Attention", mixed, y, opset=23)


# ----------------------------------------------------------------------------- exact mode

def gqa_past_inputs(q=(2, 4, 3, 8), kv=(2, 2, 3, 8), past=4, dv=6, dtype=F32, seed=0):
    """Causal GQA with a past cache (Hq = 2 Hkv)."""
    inputs = qkv(q, kv, kv[:3] + (dv,), dtype, seed)
    inputs["attn_mask"] = None
    inputs["past_key"] = uniform(kv[:2] + (past, kv[3]), dtype, seed + 5, low=0.0)
    inputs["past_value"] = uniform(kv[:2] + (past, dv), dtype, seed + 6, low=0.0)
    return inputs


def with_present(dtype):
    return [("Y", dtype), ("present_key", dtype), ("present_value", dtype)]


def test_attention_exact_matches_reference():
    causal_gqa = {"is_causal": 1, "softcap": 1.5}
    compare("Attention", gqa_past_inputs(), with_present(F32), causal_gqa, 23, rtol=1e-5,
            atol=1e-6, options=EXACT)
    compare("Attention", gqa_past_inputs(dtype=np.float64), with_present(np.float64),
            causal_gqa, 23, rtol=1e-12, atol=1e-12, options=EXACT)
    # fp16 through float32, a float16 mask broadcast over heads
    inputs = qkv((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8), np.float16)
    inputs["attn_mask"] = uniform((3, 5), np.float16, 9, low=0.0)
    compare("Attention", inputs, [("Y", np.float16)], {"is_causal": 1}, 23, rtol=2e-3,
            atol=2e-3, options=EXACT)
    # 3-D MQA with a bool mask and the probabilities as the fourth output
    inputs = qkv((2, 4, 12), (2, 5, 3), (2, 5, 6))
    inputs["attn_mask"] = np.random.default_rng(3).random((4, 5)) > 0.3
    compare("Attention", inputs, [("Y", F32), ("", F32), ("", F32), ("qk", F32)],
            {"q_num_heads": 4, "kv_num_heads": 1, "qk_matmul_output_mode": 3}, 23,
            options=EXACT)


def test_attention_exact_bfloat16_and_wide_softmax():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    inputs = {k: v.astype(bf16) for k, v in qkv((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8)).items()}
    inputs["attn_mask"] = (uniform((3, 5), F32, 9, low=0.0) - 0.5).astype(bf16)
    for attrs in ({"is_causal": 1}, {"softmax_precision": 1}):
        compare("Attention", inputs, [("Y", bf16)], attrs, 23, rtol=1e-3, atol=1e-7,
                options=EXACT)
    big = {k: v.astype(bf16) for k, v in qkv((1, 4, 64, 16), (1, 2, 256, 16), (1, 2, 256, 8),
                                              seed=2).items()}
    model = model_of("Attention", big, [("Y", bf16)], {"is_causal": 1, "softcap": 3.0}, 23)
    one, two = (graphrt.Session(model, threads(n)).run(None, big)[0] for n in (1, 2))
    assert (bits(one) == bits(two)).all()
    # float32 with a float64 softmax: the exponentials and their sum in float64
    compare("Attention", qkv((1, 2, 3, 4), (1, 2, 70, 4), (1, 2, 70, 4)),
            [("Y", F32), ("", F32), ("", F32), ("qk", F32)],
            {"softmax_precision": 11, "qk_matmul_output_mode": 3}, 23, options=EXACT)


def test_attention_exact_probabilities_follow_the_documented_order():
    # mode 2 gives the biased scores x; mode 3 must be exp(x - m) (graphrt's exp) over
    # their sum in the blocked pairwise order (T = 150: three blocks of 64)
    inputs = qkv((1, 2, 4, 8), (1, 2, 150, 8), (1, 2, 150, 4), seed=7)
    inputs["attn_mask"] = uniform((4, 150), F32, 8) * 3
    outs = {}
    for mode in (2, 3):
        model = model_of("Attention", inputs, [("Y", F32), ("", F32), ("", F32), ("qk", F32)],
                         {"softcap": 4.0, "qk_matmul_output_mode": mode}, 23)
        outs[mode] = graphrt.Session(model, EXACT).run(None, feeds_of(model, inputs))[1]
    x = outs[2]
    d = (x - x.max(-1, keepdims=True)).astype(F32)
    e = np.vectorize(lambda v: own_exp(np.float32(v)), otypes=[F32])(d)
    assert (bits(outs[3]) == bits(e / tree_sum(e)[..., None])).all()


def test_attention_exact_threads_and_canonical_nan():
    # big enough for parallel products and row steps: causal GQA, softcap, past KV, a mask
    # and the probabilities out
    inputs = gqa_past_inputs((2, 4, 64, 32), (2, 2, 64, 32), 64, 16, seed=4)
    inputs["attn_mask"] = uniform((64, 128), F32, 5) * 2
    inputs["attn_mask"][5, 100] = np.inf      # + the causal -inf: a NaN row (made, not read)
    inputs["Q"][1, 3, 7, 2] = np.nan
    outputs = with_present(F32) + [("qk", F32)]
    attrs = {"is_causal": 1, "softcap": 2.0, "qk_matmul_output_mode": 2}
    model = model_of("Attention", inputs, outputs, attrs, 23)
    feeds = feeds_of(model, inputs)
    one = graphrt.Session(model, threads(1)).run(None, feeds)
    two = graphrt.Session(model, threads(2)).run(None, feeds)
    for a, b in zip(one, two):
        assert (bits(a) == bits(b)).all()
    y, qk = one[0], one[3]
    for out in (y, qk):
        nan = np.isnan(out)
        assert nan.any() and (bits(out)[nan] == CANONICAL_NAN32).all()
    assert np.isnan(y[:, :, 5]).all() and np.isnan(y[1, 3, 7]).all()
    assert np.isnan(y).sum() == (2 * 4 + 1) * 16           # those rows only
    # fast mode: the same values within float32 tolerance (no NaN here)
    inputs["attn_mask"][5, 100] = 0.0
    inputs["Q"][1, 3, 7, 2] = 0.5
    feeds = feeds_of(model, inputs)
    exact = graphrt.Session(model, threads(2)).run(None, feeds)
    fast = graphrt.Session(model, threads(2, exact=False)).run(None, feeds)
    for e, f in zip(exact, fast):
        np.testing.assert_allclose(e, f, rtol=1e-5, atol=1e-6)
    want = ReferenceEvaluator(model_of("Attention", inputs, with_present(F32), attrs, 23)).run(
        None, feeds)
    for e, w in zip(exact, want):
        np.testing.assert_allclose(e, w, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- RotaryEmbedding

def rotary_inputs(shape, half, positions=True, dtype=F32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    batch, seq = shape[0], shape[2] if len(shape) == 4 else shape[1]
    if positions:
        theta = rng.random((20, half))
        pos = rng.integers(0, 20, (batch, seq)).astype(np.int64)
    else:
        theta = rng.random((batch, seq, half))
        pos = None
    return {"x": x, "cos": np.cos(theta).astype(dtype), "sin": np.sin(theta).astype(dtype),
            "pos": pos}


@pytest.mark.parametrize("shape,attrs,half,positions", [
    ((2, 3, 4, 8), {}, 4, True),
    ((2, 3, 4, 8), {"interleaved": 1}, 4, False),
    ((2, 3, 4, 8), {"rotary_embedding_dim": 4}, 2, True),
    ((2, 4, 12), {"num_heads": 2, "interleaved": 1, "rotary_embedding_dim": 4}, 2, False),
    ((2, 4, 12), {"num_heads": 3}, 2, True),
    ((1, 2, 0, 8), {}, 4, True),
])
def test_rotary_matches_reference(shape, attrs, half, positions):
    inputs = rotary_inputs(shape, half, positions)
    compare("RotaryEmbedding", inputs, [("y", F32)], attrs, 23, rtol=1e-6, atol=1e-6)


def test_rotary_float16_exact_and_threads():
    inputs = rotary_inputs((2, 3, 4, 8), 4, dtype=np.float16)
    compare("RotaryEmbedding", inputs, [("y", np.float16)], {}, 23, rtol=2e-3, atol=2e-3)
    inputs = rotary_inputs((4, 8, 64, 64), 32, seed=3)        # parallel
    model = model_of("RotaryEmbedding", inputs, [("y", F32)], {}, 23)
    one = graphrt.Session(model, SessionOptions(mode="exact", intra_op_threads=1))
    two = graphrt.Session(model, SessionOptions(mode="exact", intra_op_threads=2))
    a, b = one.run(None, inputs)[0], two.run(None, inputs)[0]
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    x, c, s = inputs["x"], inputs["cos"][inputs["pos"]], inputs["sin"][inputs["pos"]]
    c, s = c[:, None], s[:, None]
    x1, x2 = x[..., :32], x[..., 32:]
    want = np.concatenate([(c * x1).astype(F32) - (s * x2).astype(F32),
                           (s * x1).astype(F32) + (c * x2).astype(F32)], -1)
    np.testing.assert_array_equal(a, want)     # two rounded products, one add: no FMA


def test_rotary_errors():
    inputs = rotary_inputs((1, 2, 3, 8), 4)
    y = [("y", F32)]
    bad = dict(inputs, pos=np.array([[0, 1, 25]], np.int64))
    assert "position_ids" in error(ErrorKind.INVALID_INPUT, "RotaryEmbedding", bad, y, opset=23)
    error(ErrorKind.INVALID_MODEL, "RotaryEmbedding", inputs, y, {"rotary_embedding_dim": 3},
          opset=23)
    error(ErrorKind.INVALID_MODEL, "RotaryEmbedding", rotary_inputs((1, 3, 8), 4), y, opset=23)
    error(ErrorKind.INVALID_MODEL, "RotaryEmbedding", dict(inputs, sin=inputs["sin"][:, :2]), y,
          opset=23)
