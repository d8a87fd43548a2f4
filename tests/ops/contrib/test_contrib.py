"""The com.microsoft operators (graphrt/kernels/contrib), each against onnxruntime's own
kernel on the same node, in fast and exact mode; and their refusals."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from onnx import numpy_helper

import graphrt
from graphrt.errors import ErrorKind

from ...helpers import expect_error, feeds_of, ints, model_of, onnxruntime_outputs, rand

MS = "com.microsoft"


def against_onnxruntime(op, inputs, outputs, attrs=None, domain=MS, inits=(), atol=1e-5,
                        steps=0):
    """graphrt's outputs (fast and exact) have onnxruntime's types and shapes, float values
    within ``atol`` (and 1e-5 relative), integer ones within ``steps``; returns graphrt's
    fast outputs. ``outputs``: names ("" for one not asked for), or (name, element type)
    where it is not that of the first input."""
    inits = [numpy_helper.from_array(inputs[n], n) for n in inits]
    first = next(x for x in inputs.values() if x is not None).dtype
    outs = [o if isinstance(o, tuple) else (o, first) for o in outputs]
    model = model_of(op, inputs, outs, attrs, 17, inits, domain)
    feeds = feeds_of(model, inputs)
    want = onnxruntime_outputs(model, feeds)
    fast = None
    for mode in ("fast", "exact"):
        got = graphrt.Session(model, graphrt.SessionOptions(mode=mode)).run(None, feeds)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g.astype(np.float64), w, rtol=1e-5, atol=atol)
            else:
                assert np.abs(g.astype(np.int64) - w).max(initial=0) <= steps
        fast = fast or got
    return fast


# ----------------------------------------------------------------------------- activations

@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gelu_family(dtype):
    x, bias = rand((2, 5, 16), dtype, seed=1) * 3, rand((16,), dtype, seed=2)
    atol = 1e-5 if dtype == np.float32 else 4e-3
    for op, ins in [("Gelu", {"x": x}), ("BiasGelu", {"x": x, "bias": bias}),
                    ("FastGelu", {"x": x}), ("FastGelu", {"x": x, "bias": bias})]:
        against_onnxruntime(op, ins, ["y"], atol=atol)
    against_onnxruntime("QuickGelu", {"x": x}, ["y"], dict(alpha=1.5), atol=atol)


def _softmax_rows(x, axis):
    rows = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
    e = np.exp(rows - rows.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)


@pytest.mark.parametrize("inner,axis,bias_shape,want_shape", [
    (1, 3, (2, 1, 1, 6), (2, 1, 1, 6)),       # a key mask per batch over the heads' scores
    (1, 3, (2, 6), (2, 1, 1, 6)),             # the same rows given flat
    (0, 3, (5, 6), (1, 1, 5, 6)),             # one bias for every batch and head
    (0, 2, (3, 5, 6), (1, 3, 5, 6)),          # softmax over the last two axes together
    (1, 2, (2, 5, 6), (2, 1, 5, 6)),
])
def test_bias_softmax(inner, axis, bias_shape, want_shape):
    """onnxruntime has no CPU kernel for BiasSoftmax: against numpy, with its CUDA kernel's
    broadcasting (bias rows repeated over the axes before ``axis`` or over the leading
    ones)."""
    x, bias = rand((2, 3, 5, 6), seed=1) * 3, rand(bias_shape, seed=2)
    want = _softmax_rows(x + bias.reshape(want_shape), axis)
    model = model_of("BiasSoftmax", {"x": x, "bias": bias}, [("y", np.float32)],
                     dict(axis=axis, is_inner_broadcast=inner), 17, (), MS)
    for mode in ("fast", "exact"):
        got = graphrt.Session(model, graphrt.SessionOptions(mode=mode)).run(
            None, {"x": x, "bias": bias})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    bad = model_of("BiasSoftmax", {"x": x, "bias": rand((4, 6), seed=3)}, [("y", np.float32)],
                   dict(axis=axis, is_inner_broadcast=inner), 17, (), MS)
    err = expect_error(ErrorKind.INVALID_MODEL,
                       lambda: graphrt.Session(bad).run(None, {"x": x, "bias": rand((4, 6))}),
                       match="whole rows")
    assert err.node == "the_node"


# ----------------------------------------------------------------------------- normalisations

@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("beta", [False, True])
def test_skip_layer_normalization_and_its_outputs(bias, beta):
    h = 32
    ins = {"x": rand((2, 7, h), seed=3), "skip": rand((2, 7, h), seed=4),
           "gamma": rand((h,), seed=5), "beta": rand((h,), seed=6) if beta else None,
           "bias": rand((h,), seed=7) if bias else None}
    stats = [("mean", np.float32), ("inv", np.float32)]
    against_onnxruntime("SkipLayerNormalization", ins, ["y", *stats, "sum"],
                        dict(epsilon=1e-5), inits=[n for n in ("gamma", "beta", "bias") if ins[n]
                                                   is not None])
    got = against_onnxruntime("SkipLayerNormalization", ins, ["y"])
    assert got[0].shape == (2, 7, h)


def test_simplified_layer_normalizations():
    h = 24
    x, skip, gamma, bias = (rand(s, seed=10 + i) for i, s in
                            enumerate([(3, 4, h), (3, 4, h), (h,), (h,)]))
    against_onnxruntime("SkipSimplifiedLayerNormalization",
                        {"x": x, "skip": skip, "gamma": gamma, "bias": bias}, ["y", "", "", "sum"],
                        dict(epsilon=1e-6))
    against_onnxruntime("SimplifiedLayerNormalization", {"x": x, "scale": gamma}, ["y"],
                        dict(axis=-1, epsilon=1e-6), domain="")


def test_simplified_statistics_outputs_are_refused():
    x, g = rand((2, 8)), rand((8,))
    model = model_of("SimplifiedLayerNormalization", {"x": x, "g": g}, [("y", None), ("inv", None)],
                     opset=17)
    err = expect_error(ErrorKind.UNSUPPORTED, graphrt.Session, model, match="inv_std_var")
    assert err.node


# ----------------------------------------------------------------------------- quantized

@pytest.mark.parametrize("b_type", [np.int8, np.uint8])
@pytest.mark.parametrize("per_column", [False, True])
def test_matmul_integer_to_float(b_type, per_column):
    """The exact int32 product, converted, times a_scale * b_scale, plus the bias. On AVX2
    without VNNI, onnxruntime's uint8 x int8 kernel adds pairs of products in saturating
    int16 (a known limitation of its own): it is compared where A < 128 cannot saturate,
    numpy's exact product everywhere."""
    m, k, n = 6, 40, 12
    lo, hi = (-128, 128) if b_type == np.int8 else (0, 256)
    b = ints((k, n), lo, hi, b_type, seed=2)
    shape = (n,) if per_column else ()
    ins = {"a": ints((2, m, k), 0, 256, np.uint8, seed=1), "b": b,
           "a_scale": np.array(0.02, np.float32),
           "b_scale": np.asarray(rand(shape, seed=3) * 0.01 + 0.02, np.float32),
           "a_zp": np.array(131, np.uint8), "b_zp": ints(shape, lo, hi, b_type, seed=4),
           "bias": rand((n,), seed=5)}
    acc = (ins["a"].astype(np.int64) - 131) @ (b.astype(np.int64) - ins["b_zp"])
    want = acc.astype(np.float32) * (ins["a_scale"] * ins["b_scale"]) + ins["bias"]
    y = [("y", np.float32)]
    model = model_of("MatMulIntegerToFloat", ins, y, None, 17, (), MS)
    for mode in ("fast", "exact"):
        got = graphrt.Session(model, graphrt.SessionOptions(mode=mode)).run(None, ins)[0]
        np.testing.assert_array_equal(got, want)
    if b_type == np.int8:
        ins["a"] = ints((2, m, k), 0, 128, np.uint8, seed=1)
    against_onnxruntime("MatMulIntegerToFloat", ins, y, inits=["b", "b_scale", "b_zp", "bias"])
    del ins["bias"]
    against_onnxruntime("MatMulIntegerToFloat", ins, y)


def test_dynamic_quantize_matmul():
    """|B| < 64: no saturation in onnxruntime's kernel (see above)."""
    k, n = 64, 20
    ins = {"a": rand((3, 5, k), seed=6) * 4, "b": ints((k, n), -64, 64, np.int8, seed=7),
           "b_scale": np.array(0.03, np.float32), "b_zp": np.array(0, np.int8),
           "bias": rand((n,), seed=8)}
    against_onnxruntime("DynamicQuantizeMatMul", ins, ["y"], inits=["b", "b_scale", "b_zp"])


@pytest.mark.parametrize("directions,per_column", [(1, False), (2, False), (2, True)])
@pytest.mark.parametrize("constant", [False, True])
def test_dynamic_quantize_lstm_is_the_lstm_of_its_dequantized_weights(directions, per_column,
                                                                      constant):
    """Bit for bit, in both modes, with weights as initializers (folded) or as inputs.
    (Against onnxruntime, which also quantizes the activations at every step, on quantized
    exporter models: test_onnxruntime_tools.py.)"""
    d, t, b, i, h = directions, 5, 3, 12, 8
    zs = (d, 4 * h) if per_column else (d,)
    ins = {"x": rand((t, b, i), seed=1), "w": ints((d, i, 4 * h), -128, 128, np.int8, seed=2),
           "r": ints((d, h, 4 * h), -128, 128, np.int8, seed=3), "bias": rand((d, 8 * h), seed=4),
           "w_scale": np.asarray(rand(zs, seed=5) * 0.01 + 0.02, np.float32),
           "w_zp": ints(zs, -5, 5, np.int8, seed=6),
           "r_scale": np.asarray(rand(zs, seed=7) * 0.01 + 0.02, np.float32),
           "r_zp": ints(zs, -5, 5, np.int8, seed=8)}
    names = ["x", "w", "r", "bias", "", "", "", "", "w_scale", "w_zp", "r_scale", "r_zp"]
    attrs = dict(hidden_size=h, direction="bidirectional" if d == 2 else "forward")
    outs = [("y", np.float32), ("yh", np.float32), ("yc", np.float32)]
    weights = ["w", "r", "w_scale", "w_zp", "r_scale", "r_zp"]
    inits = [numpy_helper.from_array(ins[n], n) for n in weights] if constant else []
    q = model_of("DynamicQuantizeLSTM", {n or f"none{k}": ins.get(n) for k, n in
                                         enumerate(names)}, outs, attrs, 17, inits, MS)

    def dequantized(v, scale, zp):
        shape = (d, 1, -1)
        wide = (v.astype(np.float32) - zp.reshape(shape).astype(np.float32)) * \
            scale.reshape(shape)
        return np.ascontiguousarray(wide.transpose(0, 2, 1))
    f = {"x": ins["x"], "w": dequantized(ins["w"], ins["w_scale"], ins["w_zp"]),
         "r": dequantized(ins["r"], ins["r_scale"], ins["r_zp"]), "bias": ins["bias"]}
    ref = model_of("LSTM", f, outs, attrs, 17)
    for mode in ("fast", "exact"):
        opts = graphrt.SessionOptions(mode=mode)
        got = graphrt.Session(q, opts).run(None, feeds_of(q, ins))
        want = graphrt.Session(ref, opts).run(None, f)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def _nbits_model(k, n, bits, block, symmetric, bias):
    """A MatMul (+ Add) of random float weights turned into MatMulNBits by onnxruntime's
    own MatMulNBitsQuantizer, as users make them."""
    nbits = pytest.importorskip("onnxruntime.quantization.matmul_nbits_quantizer")
    from onnx import TensorProto, helper
    from ...models import make
    w = rand((k, n), seed=40) * 2
    nodes = [helper.make_node("MatMul", ["a", "w"], ["p" if bias else "y"])]
    inits = [numpy_helper.from_array(w, "w")]
    if bias:
        nodes.append(helper.make_node("Add", ["p", "b"], ["y"]))
        inits.append(numpy_helper.from_array(rand((n,), seed=41), "b"))
    model = make(nodes, [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["m", k])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits,
                 opset=17)
    q = nbits.MatMulNBitsQuantizer(model, bits=bits, block_size=block,
                                   is_symmetric=symmetric)
    q.process()
    return q.model.model


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("k,n,block", [(256, 40, 32), (200, 24, 64)])
def test_matmul_nbits_from_the_quantizer(bits, symmetric, k, n, block):
    """Against onnxruntime on one row (the one-pass kernel) and on several (dequantized
    weights and the matrix product), in both modes; K = 200 has a partial last block."""
    model = _nbits_model(k, n, bits, block, symmetric, bias=False)
    assert [nd.op_type for nd in model.graph.node] == ["MatMulNBits"]
    ort = pytest.importorskip("onnxruntime")
    want_sess = ort.InferenceSession(model.SerializeToString(),
                                     providers=["CPUExecutionProvider"])
    for mode in ("fast", "exact"):
        sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode))
        for rows in (1, 3, 17):
            a = {"a": rand((rows, k), seed=rows)}
            got, want = sess.run(None, a)[0], want_sess.run(None, a)[0]
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("k,n,block", [(256, 40, 32), (200, 24, 64)])
def test_matmul_nbits_constant_weights_repacked_give_the_bits_of_weights_fed(symmetric, k, n,
                                                                             block):
    """Constant 4-bit weights decode from their repacked layout; fed at run time, from the
    quantizer's: the same bits, in both modes, at the first run (Python) and after it
    (compiled calls)."""
    from onnx import helper
    model = _nbits_model(k, n, 4, block, symmetric, bias=False)
    node = model.graph.node[0]
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    fed = copy.deepcopy(model)
    del fed.graph.initializer[:]
    for name in node.input[1:]:
        fed.graph.input.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(weights[name].dtype), weights[name].shape))
    for mode in ("fast", "exact"):
        opts = graphrt.SessionOptions(mode=mode)
        const, run_time = graphrt.Session(model, opts), graphrt.Session(fed, opts)
        for rows in (3, 17):
            a = {"a": rand((rows, k), seed=rows)}
            want = run_time.run(None, dict(a, **weights))[0]
            for _ in range(3):
                np.testing.assert_array_equal(const.run(None, a)[0], want)


def test_matmul_nbits_bias_batch_axes_and_refusals():
    k, n = 64, 16
    model = _nbits_model(k, n, 4, 32, False, bias=False)
    node = model.graph.node[0]
    ins = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    b, scales, zp = (ins[node.input[i]] for i in range(1, 4))
    bias = rand((n,), seed=3)
    a = rand((2, 3, k), seed=4)
    full = {"a": a, "b": b, "scales": scales, "zp": zp, "g_idx": None, "bias": bias}
    attrs = dict(K=k, N=n, bits=4, block_size=32)
    got = against_onnxruntime("MatMulNBits", full, ["y"], attrs,
                              inits=["b", "scales", "zp", "bias"], atol=1e-4)[0]
    assert got.shape == (2, 3, n)
    full["zp"] = scales.copy()          # float zero points
    m = model_of("MatMulNBits", full, [("y", np.float32)], attrs, 17, (), MS)
    err = expect_error(ErrorKind.UNSUPPORTED,
                       lambda: graphrt.Session(m).run(None, feeds_of(m, full)), match="zero_points")
    assert err.node == "the_node"
    bad = model_of("MatMulNBits", {"a": a, "b": b, "scales": scales}, [("y", np.float32)],
                   dict(attrs, bits=3), 17, (), MS)
    expect_error(ErrorKind.UNSUPPORTED, graphrt.Session, bad, match="bits=3")


def _q(shape, dtype, seed):
    info = np.iinfo(dtype)
    return ints(shape, info.min, info.max + 1, dtype, seed=seed)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary(op, dtype):
    s = np.float32
    ins = {"a": _q((4, 1, 9), dtype, 1), "sa": np.array(0.05, s), "za": _q((), dtype, 2),
           "b": _q((3, 9), dtype, 3), "sb": np.array(0.03, s), "zb": _q((), dtype, 4),
           "sc": np.array(0.08 if op == "QLinearAdd" else 0.4, s), "zc": _q((), dtype, 5)}
    # onnxruntime's QLinearAdd scales each operand by its ratio to C's scale before adding:
    # another rounding order, one step apart where a sum falls next to a boundary
    against_onnxruntime(op, ins, ["c"], steps=1 if op == "QLinearAdd" else 0)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_unary_pools_and_concat(dtype):
    s = np.float32
    x = _q((2, 3, 6, 6), dtype, 6)
    q = {"x": x, "sx": np.array(0.07, s), "zx": _q((), dtype, 7), "sy": np.array(0.004, s),
         "zy": _q((), dtype, 8)}
    against_onnxruntime("QLinearSigmoid", q, ["y"])
    against_onnxruntime("QLinearLeakyRelu", dict(q, sy=np.array(0.05, s)), ["y"],
                        dict(alpha=0.2))
    pooled = dict(q, sy=np.array(0.06, s))
    against_onnxruntime("QLinearGlobalAveragePool", pooled, ["y"])
    against_onnxruntime("QLinearAveragePool", pooled, ["y"],
                        dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    cat = {"sy": np.array(0.09, s), "zy": _q((), dtype, 9), "x0": x, "s0": np.array(0.07, s),
           "z0": _q((), dtype, 10), "x1": _q((2, 2, 6, 6), dtype, 11), "s1": np.array(0.11, s),
           "z1": _q((), dtype, 12)}
    against_onnxruntime("QLinearConcat", cat, [("y", dtype)], dict(axis=1))


def test_channels_last_pool_is_refused_naming_the_node():
    s = np.float32
    q = {"x": _q((1, 4, 4, 3), np.uint8, 1), "sx": np.array(0.1, s), "zx": np.array(3, np.uint8),
         "sy": np.array(0.1, s), "zy": np.array(3, np.uint8)}
    model = model_of("QLinearGlobalAveragePool", q, [("y", None)], dict(channels_last=1), 17,
                     domain=MS)
    err = expect_error(ErrorKind.UNSUPPORTED, graphrt.Session, model, match="channels_last")
    assert err.node


@pytest.mark.parametrize("activation,params", [("", []), ("Relu", []), ("LeakyRelu", [0.2]),
                                               ("Clip", [-0.5, 0.7]), ("HardSigmoid", [0.3, 0.4]),
                                               ("Sigmoid", []), ("Tanh", [])])
@pytest.mark.parametrize("with_z", [False, True])
def test_fused_conv(activation, params, with_z):
    ins = {"x": rand((1, 4, 9, 9), seed=1), "w": rand((6, 2, 3, 3), seed=2),
           "b": rand((6,), seed=3), "z": rand((1, 6, 5, 5), seed=4) if with_z else None}
    attrs = dict(group=2, strides=[2, 2], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    if activation:
        attrs["activation"] = activation
    if params:
        attrs["activation_params"] = params
    against_onnxruntime("FusedConv", ins, ["y"], attrs, inits=["w", "b"])


def test_errors_in_an_expansion_name_the_node():
    h = 8
    ins = {"x": rand((2, 3, h)), "skip": rand((2, 3, h)), "gamma": rand((h + 1,))}
    model = model_of("SkipLayerNormalization", ins, [("y", np.float32)], None, 17, (), MS)
    err = expect_error(ErrorKind.INVALID_MODEL, lambda: graphrt.Session(model).run(None, ins))
    assert err.node == "the_node"
    bad = model_of("FusedConv", {"x": rand((1, 1, 3, 3)), "w": rand((1, 1, 1, 1))},
                   [("y", np.float32)], dict(activation="Swish"), 17, (), MS)
    expect_error(ErrorKind.UNSUPPORTED, graphrt.Session, bad, match="Swish")


# ----------------------------------------------------------------------------- attention

def _attention_inputs(batch=2, seq=6, hidden=16, sizes=None, seed=20):
    q, k, v = sizes or (hidden, hidden, hidden)
    return {"x": rand((batch, seq, hidden), seed=seed),
            "w": rand((hidden, q + k + v), seed=seed + 1) * 0.5,
            "bias": rand((q + k + v,), seed=seed + 2)}


@pytest.mark.parametrize("mask", [None, "lengths", "spans", "keys", "query_keys"])
def test_attention_masks(mask):
    batch, seq = 2, 6
    ins = _attention_inputs(batch, seq)
    masks = {"lengths": np.array([4, 6], np.int32), "spans": np.array([5, 6, 1, 0], np.int32),
             "keys": (ints((batch, seq), 0, 2, np.int32, seed=3) | np.eye(1, seq, 0, np.int32)),
             "query_keys": ints((batch, seq, seq), 0, 2, np.int32, seed=4)}
    ins["mask"] = None if mask is None else masks[mask]
    against_onnxruntime("Attention", ins, ["y"], dict(num_heads=2), inits=["w", "bias"])


def test_attention_causal_sizes_scale_and_bias():
    ins = _attention_inputs(sizes=(16, 16, 8))
    ins["mask"] = np.array([6, 3], np.int32)
    ins["past"] = None
    ins["attention_bias"] = rand((1, 2, 6, 6), seed=9)
    attrs = dict(num_heads=2, unidirectional=1, qkv_hidden_sizes=[16, 16, 8], scale=0.3,
                 mask_filter_value=-1000.0)
    against_onnxruntime("Attention", ins, ["y"], attrs, inits=["w", "bias"])


def test_attention_refusals_name_the_node():
    ins = _attention_inputs()
    ins["mask"] = np.zeros(3 * 2 + 2, np.int32)
    model = model_of("Attention", ins, [("y", np.float32)], dict(num_heads=2), 17, (), MS)
    err = expect_error(ErrorKind.UNSUPPORTED, lambda: graphrt.Session(model).run(None, ins),
                       match="mask_index of shape")
    assert err.node == "the_node"
    del ins["mask"]
    model = model_of("Attention", ins, [("y", np.float32), ("present", np.float32)],
                     dict(num_heads=2), 17, (), MS)
    expect_error(ErrorKind.UNSUPPORTED, graphrt.Session, model, match="key-value cache")


@pytest.mark.parametrize("per_column,zero_points", [(False, False), (False, True), (True, True)])
@pytest.mark.parametrize("mask", [False, True])
def test_qattention(per_column, zero_points, mask):
    """The quantized projection as MatMulIntegerToFloat computes it, then the heads; weights
    below 64 in magnitude (no saturation in onnxruntime's uint8 x int8 kernel, see above)."""
    batch, seq, hidden = 2, 5, 16
    cols = 3 * hidden
    ins = {"x": ints((batch, seq, hidden), 0, 256, np.uint8, seed=1),
           "w": ints((hidden, cols), -64, 64, np.int8, seed=2), "bias": rand((cols,), seed=3),
           "x_scale": np.array(0.01, np.float32),
           "w_scale": np.asarray(rand((cols,) if per_column else (), seed=4) * 0.002 + 0.01,
                                 np.float32),
           "mask": np.array([5, 3], np.int32) if mask else None,
           "x_zp": np.array(128, np.uint8) if zero_points else None,
           "w_zp": (np.zeros(cols if per_column else (), np.int8) + 2) if zero_points else None}
    against_onnxruntime("QAttention", ins, [("y", np.float32)], dict(num_heads=2),
                        inits=["w", "bias", "w_scale"] + (["w_zp"] if zero_points else []))


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("bias,mask", [(False, None), (True, None), (True, "keys"),
                                       (False, "lengths")])
def test_multi_head_attention(cross, bias, mask):
    batch, seq, keys, hidden = 2, 4, 6 if cross else 4, 16
    ins = {"q": rand((batch, seq, hidden), seed=1), "k": rand((batch, keys, hidden), seed=2),
           "v": rand((batch, keys, hidden), seed=3),
           "bias": rand((3 * hidden,), seed=4) if bias else None}
    ins["mask"] = {None: None, "lengths": np.array([keys, 2], np.int32),
                   "keys": ints((batch, keys), 0, 2, np.int32, seed=5) |
                   np.eye(1, keys, 0, np.int32)}[mask]
    against_onnxruntime("MultiHeadAttention", ins, ["y"], dict(num_heads=4))


def test_multi_head_attention_refuses_packed_and_cached_forms():
    ins = {"q": rand((1, 4, 2, 3, 8), seed=1)}
    model = model_of("MultiHeadAttention", ins, [("y", np.float32)], dict(num_heads=2), 17, (), MS)
    err = expect_error(ErrorKind.UNSUPPORTED, graphrt.Session, model, match="packed")
    assert err.node == "the_node"


@pytest.mark.parametrize("batch,seq,past", [(2, 5, 0), (2, 1, 3), (1, 3, 4)])
@pytest.mark.parametrize("softcap", [0.0, 2.0])
def test_group_query_attention(batch, seq, past, softcap):
    """A first prompt, a decoding step of two sequences and a continued prompt (onnxruntime
    takes a past with several new tokens for one sequence only)."""
    heads, kv, size = 4, 2, 8
    ins = {"q": rand((batch, seq, heads * size), seed=1),
           "k": rand((batch, seq, kv * size), seed=2),
           "v": rand((batch, seq, kv * size), seed=3),
           "pk": rand((batch, kv, past, size), seed=4) if past else None,
           "pv": rand((batch, kv, past, size), seed=5) if past else None,
           "seqlens": np.full(batch, past + seq - 1, np.int32),
           "total": np.array(past + seq, np.int32)}
    attrs = dict(num_heads=heads, kv_num_heads=kv)
    if softcap:
        attrs["softcap"] = softcap
    against_onnxruntime("GroupQueryAttention", ins, ["y", "present_k", "present_v"], attrs)


def test_group_query_attention_refuses_what_it_cannot_keep():
    heads, kv, size = 2, 1, 8
    ins = {"q": rand((2, 1, heads * size), seed=1), "k": rand((2, 1, kv * size), seed=2),
           "v": rand((2, 1, kv * size), seed=3), "pk": rand((2, kv, 3, size), seed=4),
           "pv": rand((2, kv, 3, size), seed=5), "seqlens": np.array([3, 1], np.int32),
           "total": np.array(4, np.int32)}
    model = model_of("GroupQueryAttention", ins, [("y", np.float32)],
                     dict(num_heads=heads, kv_num_heads=kv), 17, (), MS)
    err = expect_error(ErrorKind.UNSUPPORTED,
                       lambda: graphrt.Session(model).run(None, feeds_of(model, ins)),
                       match="padded batch")
    assert err.node == "the_node"
    rotary = model_of("GroupQueryAttention", ins, [("y", np.float32)],
                      dict(num_heads=heads, kv_num_heads=kv, do_rotary=1), 17, (), MS)
    expect_error(ErrorKind.UNSUPPORTED, graphrt.Session, rotary, match="do_rotary")


@pytest.mark.parametrize("layout", ["bsh", "bnsh"])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("positions", ["offset", "tokens"])
@pytest.mark.parametrize("partial", [False, True])
def test_rotary_embedding(layout, interleaved, positions, partial):
    batch, heads, seq, size, max_pos = 2, 2, 5, 8, 16
    rot = 4 if partial else size
    shape = (batch, seq, heads * size) if layout == "bsh" else (batch, heads, seq, size)
    ins = {"x": rand(shape, seed=1),
           "pos": np.array([3], np.int64) if positions == "offset" else
           ints((batch, seq), 0, max_pos, np.int64, seed=2),
           "cos": rand((max_pos, rot // 2), seed=3), "sin": rand((max_pos, rot // 2), seed=4)}
    attrs = dict(interleaved=interleaved)
    if layout == "bsh":
        attrs["num_heads"] = heads
    if partial:
        attrs["rotary_embedding_dim"] = rot
        attrs["num_heads"] = heads
    against_onnxruntime("RotaryEmbedding", ins, ["y"], attrs)


# ----------------------------------------------------------------------------- products

@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("sa,sb", [((2, 3, 5, 7), (7, 4)), ((3, 5, 7), (3, 7, 4)), ((5, 7), (7,))])
def test_fused_matmul(ta, tb, sa, sb):
    """Y = alpha * A' @ B' (A' and B' with their last two axes swapped when asked), against
    numpy, and against onnxruntime where both operands are matrices (onnxruntime 1.32 gives
    other values for a transposed A times a vector)."""
    def stored(shape, t):
        return shape[:-2] + (shape[-1], shape[-2]) if t and len(shape) > 1 else shape
    a, b = rand(stored(sa, ta), seed=1), rand(stored(sb, tb), seed=2)
    attrs = dict(alpha=0.125, transA=ta, transB=tb)
    if len(sb) > 1:
        got = against_onnxruntime("FusedMatMul", {"a": a, "b": b}, ["y"], attrs)[0]
    else:
        model = model_of("FusedMatMul", {"a": a, "b": b}, [("y", np.float32)], attrs, 17, (), MS)
        got = graphrt.Session(model).run(None, {"a": a, "b": b})[0]

    def used(x, t):
        return np.swapaxes(x, -1, -2) if t and x.ndim > 1 else x
    np.testing.assert_allclose(got, 0.125 * np.matmul(used(a, ta), used(b, tb)), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("segments", [False, True])
@pytest.mark.parametrize("positions", [None, "row", "batch"])
@pytest.mark.parametrize("mask", [False, True])
def test_embed_layer_normalization(segments, positions, mask):
    batch, seq, h = 2, 5, 16
    i32 = np.int32
    ins = {"ids": ints((batch, seq), 0, 30, i32, seed=1),
           "seg": ints((batch, seq), 0, 2, i32, seed=2) if segments else None,
           "word": rand((30, h), seed=3), "pos": rand((8, h), seed=4),
           "seg_table": rand((2, h), seed=5) if segments else None,
           "gamma": rand((h,), seed=6), "beta": rand((h,), seed=7),
           "mask": ints((batch, seq), 0, 3, i32, seed=8) if mask else None,
           "pos_ids": {None: None, "row": ints((1, seq), 0, 8, i32, seed=9),
                       "batch": ints((batch, seq), 0, 8, i32, seed=10)}[positions]}
    tables = [n for n in ("word", "pos", "seg_table", "gamma", "beta") if ins[n] is not None]
    against_onnxruntime("EmbedLayerNormalization", ins,
                        [("y", np.float32), ("mask_index", i32), ("sum", np.float32)],
                        dict(epsilon=1e-5), inits=tables)


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("bias,quantize", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm(ta, tb, bias, quantize, per_column):
    """QGemm's float and quantized outputs against onnxruntime (A < 128: no saturation in
    onnxruntime's uint8 x int8 kernel)."""
    m, k, n = 5, 24, 9
    s = np.float32
    a = ints((k, m) if ta else (m, k), 0, 128, np.uint8, seed=1)
    b = ints((n, k) if tb else (k, n), -128, 128, np.int8, seed=2)
    shape = (n,) if per_column else ()
    ins = {"a": a, "sa": np.array(0.02, s), "za": np.array(37, np.uint8), "b": b,
           "sb": np.asarray(rand(shape, seed=3) * 0.01 + 0.02, s),
           "zb": np.zeros(shape, np.int8),
           "c": ints((n,), -500, 500, np.int32, seed=4) if bias else None,
           "sy": np.array(0.05, s) if quantize else None,
           "zy": np.array(120, np.uint8) if quantize else None}
    out = [("y", np.uint8 if quantize else np.float32)]
    against_onnxruntime("QGemm", ins, out, dict(alpha=0.75, transA=ta, transB=tb),
                        inits=["b", "sb", "zb"] + (["c"] if bias else []))


def test_every_composition_refuses_missing_inputs_naming_the_node():
    """A node of each Lowered operator of the table with no inputs: a SessionError naming
    the node (never an exception of the expansion itself)."""
    from graphrt.kernels.core.lowering import Lowered
    from graphrt.kernels.table import ALL
    ops = [d for d in ALL if isinstance(d.resolve(), type) and issubclass(d.resolve(), Lowered)]
    assert len(ops) >= 20
    for d in ops:
        model = model_of(d.op_type, {}, [("y", np.float32)], None, 17, (), d.domain)
        with pytest.raises(graphrt.SessionError) as e:
            graphrt.Session(model).run(None, {})
        assert e.value.node == "the_node", (d.op_type, e.value)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("axis,opset", [(-1, 13), (1, 13), (1, 11)])
def test_qlinear_softmax(dtype, axis, opset):
    """Softmax of the dequantized input, quantized: onnxruntime computes it from a table of
    exponentials of the 256 input steps, so results may sit one output step apart."""
    s = np.float32
    q = {"x": _q((2, 3, 5), dtype, 3), "sx": np.array(0.08, s), "zx": _q((), dtype, 4),
         "sy": np.array(1 / 256, s), "zy": np.array(0 if dtype == np.uint8 else -128, dtype)}
    against_onnxruntime("QLinearSoftmax", q, ["y"], dict(axis=axis, opset=opset), steps=1)
