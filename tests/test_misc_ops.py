"""Losses, Einsum, Det, the quantization operators and RNN/GRU/LSTM through graphrt.Session,
compared with onnx's reference evaluator (onnxruntime where the reference ignores an
attribute: sequence_lens, activations, clip)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import graphrt
from graphrt import ErrorKind, SessionError, SessionOptions

from .models import make

NODE = "the_node"
EXACT = SessionOptions(mode="exact")


def _code(dtype):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def model_of(op, inputs, n_out=1, attrs=None, opset=18, out_types=None, skip=()):
    """One node; ``inputs`` are arrays (None: omitted); outputs y0.. (indices in ``skip``
    are left unnamed)."""
    names = ["" if x is None else f"x{i}" for i, x in enumerate(inputs)]
    outs = ["" if k in skip else f"y{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, name=NODE, **(attrs or {}))
    ins = [helper.make_tensor_value_info(n, _code(x.dtype), x.shape)
           for n, x in zip(names, inputs) if x is not None]
    types = out_types or [inputs[0].dtype] * n_out
    vi = [helper.make_tensor_value_info(o, _code(t), None)
          for o, t in zip(outs, types) if o]
    m = make([node], ins, vi, opset=opset)
    m.ir_version = 10 if opset >= 21 else 8
    return m


def feeds_of(inputs):
    return {f"x{i}": x for i, x in enumerate(inputs) if x is not None}


def run(op, inputs, attrs=None, opset=18, n_out=1, options=None, out_types=None, skip=()):
    model = model_of(op, inputs, n_out, attrs, opset, out_types, skip)
    return graphrt.Session(model, options).run(None, feeds_of(inputs))


def compare(op, inputs, attrs=None, opset=18, n_out=1, rtol=1e-5, atol=1e-6, options=None,
            skip=(), exact_values=False):
    """graphrt against the reference evaluator; returns graphrt's outputs."""
    model = model_of(op, inputs, n_out, attrs, opset, skip=skip)
    want = ReferenceEvaluator(model).run(None, feeds_of(inputs))
    model = model_of(op, inputs, n_out, attrs, opset, [np.asarray(w).dtype for w in want]
                     if not skip else None, skip)
    got = graphrt.Session(model, options).run(None, feeds_of(inputs))
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if exact_values or w.dtype.kind in "iub":
            if w.dtype.kind not in "iub":       # ml_dtypes types compare as float32
                g, w = g.astype(np.float32), w.astype(np.float32)
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                       atol=atol)
    return got


def error(kind, op, inputs, attrs=None, opset=18, n_out=1, out_types=None):
    with pytest.raises(SessionError) as info:
        run(op, inputs, attrs, opset, n_out, out_types=out_types)
    assert info.value.kind == kind, info.value
    assert info.value.node == NODE
    return str(info.value)


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def ints(shape, lo, hi, dtype, seed=0):
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


# ----------------------------------------------------------------------------- losses

LOSS_CASES = [
    # (x shape, reduction, weight, ignore_index)
    ((3, 5), "none", False, None),
    ((3, 5), "mean", True, None),
    ((3, 5, 2, 3), "sum", True, 2),
    ((3, 5, 4), "mean", False, 1),
    ((2, 4, 3), "mean", True, -1),
    ((2, 4, 3, 2), "none", False, -5),
    ((3, 5), "sum", True, 10),
]


def loss_inputs(shape, weight, ignore, dtype=np.float32, seed=0):
    x = rand(shape, dtype, seed)
    t = ints(shape[:1] + shape[2:], 0, shape[1], np.int64, seed + 1)
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    return [x, t] + ([rand(shape[1:2], dtype, seed + 2)] if weight else [])


@pytest.mark.parametrize("shape,reduction,weight,ignore", LOSS_CASES)
def test_nll_loss(shape, reduction, weight, ignore):
    attrs = {"reduction": reduction} | ({"ignore_index": ignore} if ignore is not None else {})
    inputs = loss_inputs(shape, weight, ignore)
    compare("NegativeLogLikelihoodLoss", inputs, attrs, opset=22)
    compare("NegativeLogLikelihoodLoss", inputs, attrs, opset=13, options=EXACT)


@pytest.mark.parametrize("shape,reduction,weight,ignore", LOSS_CASES)
def test_softmax_cross_entropy(shape, reduction, weight, ignore):
    attrs = {"reduction": reduction} | ({"ignore_index": ignore} if ignore is not None else {})
    inputs = loss_inputs(shape, weight, ignore, seed=3)
    compare("SoftmaxCrossEntropyLoss", inputs, attrs, opset=13, n_out=2)
    compare("SoftmaxCrossEntropyLoss", inputs, attrs, opset=13, n_out=1)


def test_losses_other_types():
    x, t, w = loss_inputs((4, 3, 5), True, None, np.float64)
    compare("SoftmaxCrossEntropyLoss", [x, t.astype(np.int32), w], {}, 13, n_out=2, rtol=1e-12)
    x, t, w = loss_inputs((4, 3), True, None, np.float16)
    compare("NegativeLogLikelihoodLoss", [x, t, w], {"reduction": "none"}, 22, rtol=1e-3)
    compare("SoftmaxCrossEntropyLoss", [x, t, w], {}, 13, n_out=2, rtol=2e-3, atol=2e-3)


def test_loss_all_ignored_mean_is_nan_and_errors():
    x = rand((2, 3))
    got = run("NegativeLogLikelihoodLoss", [x, np.array([1, 1])], {"ignore_index": 1})[0]
    assert got.shape == () and np.isnan(got)
    msg = error(ErrorKind.INVALID_INPUT, "NegativeLogLikelihoodLoss", [x, np.array([0, 3])])
    assert "target 3" in msg
    error(ErrorKind.INVALID_INPUT, "SoftmaxCrossEntropyLoss", [x, np.array([-1, 0])])
    error(ErrorKind.INVALID_MODEL, "NegativeLogLikelihoodLoss", [x, np.array([0, 1, 2])])
    error(ErrorKind.INVALID_MODEL, "NegativeLogLikelihoodLoss", [x, np.array([0, 1]), rand(2)])
    error(ErrorKind.INVALID_MODEL, "NegativeLogLikelihoodLoss", [x, np.array([0, 1])],
          {"reduction": "max"})
    model = model_of("SoftmaxCrossEntropyLoss", [x, np.array([0, 1])])
    with pytest.raises(SessionError) as info:
        graphrt.Session(model, EXACT)
    assert info.value.kind == ErrorKind.EXACT_MODE_UNAVAILABLE


# ----------------------------------------------------------------------------- Einsum

EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),             # B read transposed (packed)
    ("ji,jk", [(4, 3), (4, 5)]),                 # A read transposed, implicit output
    ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]),    # output reordered
    ("bhqd,bkhd->bhqk", [(2, 3, 4, 8), (2, 6, 3, 8)]),   # B copied into order
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),  # broadcast ellipsis: generic step
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->", [(3, 4)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ijk,jl,lm->im", [(2, 3, 4), (3, 5), (5, 6)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ("iij->ji", [(3, 3, 2)]),
    ("ij, ij -> ij", [(3, 4), (3, 4)]),
    ("ij,jk", [(0, 3), (3, 2)]),
    ("ij->ij", [(2, 3)]),
    ("->", [()]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES)
def test_einsum(eq, shapes):
    xs = [rand(s, seed=i) for i, s in enumerate(shapes)]
    compare("Einsum", xs, {"equation": eq}, opset=12, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int8, np.uint16, np.float16])
def test_einsum_types(dtype):
    for eq, shapes in (("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->j", [(3, 4)])):
        xs = [(rand(s, seed=i) * 4).astype(dtype) for i, s in enumerate(shapes)]
        tol = 2e-3 if dtype == np.float16 else 1e-6
        compare("Einsum", xs, {"equation": eq}, opset=12, rtol=tol, atol=tol)


def test_einsum_exact_is_sequential():
    a, b = rand((5, 70)), rand((70, 3), seed=1)
    got = run("Einsum", [a, b], {"equation": "ij,jk->ik"}, 12, options=EXACT)[0]
    acc = np.zeros((5, 3), np.float32)
    for k in range(70):
        acc = (acc + (a[:, k:k + 1] * b[k:k + 1, :]).astype(np.float32)).astype(np.float32)
    np.testing.assert_array_equal(got, acc)
    got = run("Einsum", [a], {"equation": "ij->i"}, 12, options=EXACT)[0]
    acc = np.zeros(5, np.float32)
    for k in range(70):
        acc = (acc + a[:, k]).astype(np.float32)
    np.testing.assert_array_equal(got, acc)


def test_einsum_errors():
    a, b = rand((2, 3)), rand((4, 5))
    error(ErrorKind.INVALID_MODEL, "Einsum", [a, b], {"equation": "ij,jk->ik"}, 12)
    error(ErrorKind.INVALID_MODEL, "Einsum", [a], {"equation": "ij,jk->ik"}, 12)
    error(ErrorKind.INVALID_MODEL, "Einsum", [a], {"equation": "ijk->i"}, 12)
    error(ErrorKind.INVALID_MODEL, "Einsum", [a], {"equation": "ij->k"}, 12)
    error(ErrorKind.INVALID_MODEL, "Einsum", [a], {"equation": "i1->i"}, 12)
    error(ErrorKind.INVALID_MODEL, "Einsum", [a, b.astype(np.float64)],
          {"equation": "ij,kl"}, 12)


# ----------------------------------------------------------------------------- Det

@pytest.mark.parametrize("shape,dtype", [((3, 3), np.float32), ((2, 4, 5, 5), np.float64),
                                         ((1, 1), np.float32), ((3, 0, 0), np.float32),
                                         ((0, 2, 2), np.float32), ((2, 2), np.float16)])
def test_det(shape, dtype):
    x = rand(shape, dtype)
    if dtype == np.float16:     # the reference evaluator has no float16 determinant
        got = run("Det", [x], opset=22)
        want = np.linalg.det(x.astype(np.float32)).astype(np.float16)
        np.testing.assert_allclose(got[0], want, rtol=2e-3, atol=1e-3)
    else:
        got = compare("Det", [x], opset=11, rtol=1e-4, atol=1e-5)
    ex = run("Det", [x], opset=22, options=EXACT)[0]
    np.testing.assert_allclose(ex.astype(np.float64), got[0].astype(np.float64), rtol=1e-3)


def test_det_singular_nan_and_errors():
    x = np.array([[[1, 2], [2, 4]], [[np.nan, 1], [1, 1]], [[0, 1], [1, 0]]], np.float32)
    got = run("Det", [x], opset=22)[0]
    assert got[0] == 0 and np.isnan(got[1]) and got[2] == -1
    error(ErrorKind.INVALID_MODEL, "Det", [rand((2, 3))], opset=22)
    error(ErrorKind.UNSUPPORTED, "Det", [np.eye(2, dtype=np.int32)], opset=22)


# ----------------------------------------------------------------------------- quantization

def q_scale(shape, dtype=np.float32, seed=0):
    return (np.random.default_rng(seed).random(shape) * 0.5 + 0.05).astype(dtype)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")     # the reference casts NaN to int
@pytest.mark.parametrize("out", [np.uint8, np.int8, np.uint16, np.int16])
def test_quantize_linear_per_tensor_rounding_saturation(out):
    info = np.iinfo(out)
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 3.49, 1e9, -1e9, np.nan], np.float32)
    x = np.concatenate([x, rand(30) * info.max / 4])
    zp = np.array(info.max // 3 if out in (np.int8, np.int16) else 7, out)
    got = compare("QuantizeLinear", [x, np.array(0.5, np.float32), zp], opset=21,
                  exact_values=True)[0]
    exact = run("QuantizeLinear", [x, np.array(0.5, np.float32), zp], opset=21,
                options=EXACT)[0]
    np.testing.assert_array_equal(got, exact)
    inf = run("QuantizeLinear", [np.array([np.inf, -np.inf], np.float32),
                                 np.array(0.5, np.float32), zp], opset=21)[0]
    np.testing.assert_array_equal(inf, [info.max, info.min])     # the reference wraps +inf


@pytest.mark.parametrize("opset,attrs,x_shape,s_shape", [
    (13, {"axis": 1}, (2, 3, 4), (3,)),
    (19, {"axis": -1}, (2, 3, 4), (4,)),
    (21, {"axis": 1, "block_size": 2}, (2, 5, 3), (2, 3, 3)),
    (21, {"axis": 0, "block_size": 3}, (4, 2), (2, 2)),
    (10, {}, (3, 4), ()),
])
def test_quantize_dequantize_axes_and_blocks(opset, attrs, x_shape, s_shape):
    x = rand(x_shape) * 20
    s = q_scale(s_shape)
    zp = ints(s_shape, -20, 20, np.int8)
    q = compare("QuantizeLinear", [x, s, zp], attrs, opset, exact_values=True)[0]
    # the reference evaluator has DequantizeLinear from opset 19 only (same semantics)
    compare("DequantizeLinear", [q, s, zp], attrs, max(opset, 19), exact_values=True)
    np.testing.assert_array_equal(run("DequantizeLinear", [q, s, zp], attrs, opset)[0],
                                  run("DequantizeLinear", [q, s, zp], attrs, max(opset, 19))[0])
    compare("QuantizeLinear", [x, s], attrs, opset, exact_values=True)


def test_quantize_float16_precision_and_output_dtype():
    x = rand(200, np.float16) * 30
    s = np.array(0.37, np.float16)
    compare("QuantizeLinear", [x, s, np.array(3, np.uint8)], opset=21, exact_values=True)
    # precision: the division in float16 for float32 input (x is rounded to float16 first)
    x32 = rand(500) * 30
    got = run("QuantizeLinear", [x32, np.array(0.37, np.float32)],
              {"precision": TensorProto.FLOAT16, "output_dtype": TensorProto.INT16}, 23,
              out_types=[np.int16])[0]
    q16 = x32.astype(np.float16) / np.float16(0.37)
    np.testing.assert_array_equal(got, np.rint(q16.astype(np.float32)).astype(np.int16))
    compare("QuantizeLinear", [x32, np.array(0.37, np.float32)],
            {"output_dtype": TensorProto.INT8}, 21, exact_values=True)
    error(ErrorKind.UNSUPPORTED, "QuantizeLinear", [x32, np.array(1, np.float32)],
          {"output_dtype": TensorProto.INT32}, 21)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")     # the reference casts NaN to int
@pytest.mark.parametrize("code", [TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2,
                                  TensorProto.UINT2, TensorProto.FLOAT8E4M3FN,
                                  TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E4M3FNUZ])
def test_quantize_dequantize_narrow_types(code):
    pytest.importorskip("ml_dtypes")
    x = np.concatenate([rand(40) * 6, [1e6, -1e6, np.nan, 0.25, 0.75]]).astype(np.float32)
    s = np.array(0.37, np.float32)
    zp_type = helper.tensor_dtype_to_np_dtype(code)
    q = compare("QuantizeLinear", [x, s, np.zeros((), zp_type)], {}, 21, exact_values=True)[0]
    compare("DequantizeLinear", [q, s], {}, 21, exact_values=True)
    if code in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2):
        compare("QuantizeLinear", [x, s, np.zeros((), zp_type)], {"saturate": 0}, 21,
                exact_values=True)
    elif code != TensorProto.FLOAT8E4M3FNUZ:
        compare("DequantizeLinear", [q, s, np.ones((), zp_type)], {}, 21, exact_values=True)


def test_dequantize_types():
    for dt in (np.uint8, np.int16, np.uint16, np.int32):
        x = ints((3, 4), np.iinfo(dt).min // 2, np.iinfo(dt).max // 2, dt)
        zp = ints((4,), -5 if dt in (np.int16, np.int32) else 0, 9, dt, 1)
        compare("DequantizeLinear", [x, q_scale(4), zp], {"axis": 1}, 21, exact_values=True)
    x = ints((6,), -100, 100, np.int8)
    compare("DequantizeLinear", [x, np.array(0.3, np.float16), np.array(2, np.int8)], {}, 21,
            exact_values=True)
    got = run("DequantizeLinear", [x, np.array(0.3, np.float32)],
              {"output_dtype": TensorProto.FLOAT16}, 23, out_types=[np.float16])[0]
    np.testing.assert_array_equal(got, (x.astype(np.float32) * np.float32(0.3)).astype(np.float16))


def test_quantize_errors():
    x = rand((2, 3))
    error(ErrorKind.INVALID_MODEL, "QuantizeLinear", [x, q_scale((2,))], {"axis": 1}, 13)
    error(ErrorKind.INVALID_MODEL, "QuantizeLinear", [x, q_scale((3,))], {"axis": 1}, 10)
    error(ErrorKind.INVALID_MODEL, "QuantizeLinear", [x, q_scale((2, 2))],
          {"axis": 1, "block_size": 1}, 21)
    error(ErrorKind.INVALID_MODEL, "DequantizeLinear",
          [ints(3, 0, 9, np.uint8), np.array(1, np.float32), np.array(1, np.int8)], {}, 21)
    error(ErrorKind.UNSUPPORTED, "DequantizeLinear",
          [rand(3), np.array(1, np.float32)], {}, 21)


@pytest.mark.parametrize("x", [
    np.array([0, 2, -3, -2.5, 1.34, 0.5], np.float32),
    np.array([1, 2.1, 3, 255, 1000], np.float32),
    np.array([-1, -2.1, -1.3, -2.5, -3.34, -4.0], np.float32),
    np.zeros(4, np.float32),
])
def test_dynamic_quantize_linear(x):
    compare("DynamicQuantizeLinear", [x], opset=11, n_out=3, exact_values=True)
    model = model_of("DynamicQuantizeLinear", [x], 3, opset=11,
                     out_types=[np.uint8, np.float32, np.uint8])
    graphrt.Session(model, EXACT).run(None, feeds_of([x]))


@pytest.mark.parametrize("sa,sb,za,zb", [
    ((4, 3), (3, 2), (), ()),
    ((2, 4, 3), (3, 5), (4,), (5,)),
    ((3,), (2, 3, 4), (1,), (4,)),
    ((2, 1, 2, 3), (3, 3, 2), None, ()),
])
def test_matmul_integer(sa, sb, za, zb):
    a, b = ints(sa, 0, 256, np.uint8), ints(sb, -128, 128, np.int8, 1)
    inputs = [a, b, None if za is None else ints(za, 0, 20, np.uint8, 2),
              ints(zb, -5, 5, np.int8, 3)]
    got = run("MatMulInteger", inputs, opset=10, out_types=[np.int32])[0]
    az = np.zeros(1) if za is None else inputs[2]
    if a.ndim > 1 and az.size > 1:
        az = az.reshape(-1, 1)                  # one zero point per row of A
    a32 = a.astype(np.int32) - az.astype(np.int32)
    want = np.matmul(a32, b.astype(np.int32) - inputs[3].astype(np.int32))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("ta,scale_t,per_col", [(np.uint8, np.float32, False),
                                                (np.int8, np.float16, False),
                                                (np.uint8, np.float32, True)])
def test_qlinear_matmul(ta, scale_t, per_col):
    lo, hi = np.iinfo(ta).min, np.iinfo(ta).max
    a, b = ints((2, 3, 4), lo, hi, ta), ints((4, 5), lo, hi, ta, 1)
    bs = q_scale((5,) if per_col else (1,), scale_t, 2)
    bz = ints(bs.shape, lo // 2, hi // 2, ta, 3)
    inputs = [a, np.array([0.02], scale_t), np.array([3], ta), b, bs, bz,
              np.array([0.3], scale_t), np.array([5], ta)]
    if per_col:     # the reference broadcasts the scales; check per column against numpy
        got = run("QLinearMatMul", inputs, opset=21, out_types=[ta])[0]
        acc = (a.astype(np.int32) - 3) @ (b.astype(np.int32) - bz.astype(np.int32))
        m = (np.float32(0.02) * bs / np.float32(0.3)).astype(np.float64)
        np.testing.assert_array_equal(got, np.clip(np.rint(acc * m + 5), lo, hi).astype(ta))
    else:
        compare("QLinearMatMul", inputs, opset=21, exact_values=True)
        compare("QLinearMatMul", inputs, opset=10, exact_values=True, options=EXACT)


CONV_CASES = [
    ((1, 1, 5, 5), (2, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 6, 5), (6, 2, 2, 3), {"group": 2, "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 2, 7), (3, 2, 3), {"auto_pad": "SAME_UPPER", "strides": [2]}),
    ((1, 2, 4, 4, 3), (2, 2, 2, 2, 2), {"auto_pad": "VALID"}),
    ((1, 3, 5, 5), (3, 1, 3, 3), {"group": 3, "auto_pad": "SAME_LOWER"}),
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
def test_conv_integer(xs, ws, attrs):
    x, w = ints(xs, 0, 256, np.uint8), ints(ws, 0, 256, np.uint8, 1)
    # per-channel w zero points only for 2-D: the reference evaluator assumes 4-D weights
    xz = np.array(17, np.uint8)
    wz = ints((ws[0],), 100, 150, np.uint8, 2) if len(ws) == 4 else np.array(120, np.uint8)
    got = compare("ConvInteger", [x, w, xz, wz], attrs, opset=10, exact_values=True)[0]
    assert got.dtype == np.int32
    compare("ConvInteger", [x, w], attrs, opset=10, exact_values=True)


@pytest.mark.parametrize("xs,ws,attrs", [c for c in CONV_CASES if len(c[1]) == 4])
def test_qlinear_conv(xs, ws, attrs):
    x, w = ints(xs, -128, 128, np.int8), ints(ws, -128, 128, np.int8, 1)
    m = ws[0]
    inputs = [x, np.array(0.05, np.float32), np.array(-3, np.int8), w, q_scale((m,), seed=2),
              np.zeros(m, np.int8), np.array(0.4, np.float32), np.array(4, np.int8),
              ints((m,), -500, 500, np.int32, 3)]
    compare("QLinearConv", inputs, attrs, opset=10, exact_values=True)
    compare("QLinearConv", inputs[:8], attrs, opset=10, exact_values=True, options=EXACT)


def test_integer_product_errors():
    a = ints((2, 3), 0, 9, np.uint8)
    error(ErrorKind.INVALID_MODEL, "MatMulInteger", [a, ints((2, 3), 0, 9, np.uint8)], opset=10,
          out_types=[np.int32])
    error(ErrorKind.INVALID_MODEL, "MatMulInteger", [a, a.T, ints((3,), 0, 9, np.uint8)],
          opset=10, out_types=[np.int32])
    error(ErrorKind.UNSUPPORTED, "MatMulInteger", [a.astype(np.int16), a.T], opset=10,
          out_types=[np.int32])
    error(ErrorKind.INVALID_MODEL, "ConvInteger",
          [ints((1, 2, 4, 4), 0, 9, np.uint8), ints((2, 3, 2, 2), 0, 9, np.uint8)], opset=10,
          out_types=[np.int32])


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
    compare(op, inputs, attrs, opset=14, n_out=min(n_out, 2), rtol=1e-5, atol=1e-6)


def ort_outputs(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


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
    model = model_of(op, inputs, n_out, dict(attrs, hidden_size=3), opset=14)
    want = ort_outputs(model, feeds_of(inputs))
    got = graphrt.Session(model).run(None, feeds_of(inputs))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert (got[0][3:, :, 1] == 0).all()        # past entry 1's two steps


def test_recurrent_float_types_and_skipped_outputs():
    inputs = [x.astype(np.float64) if x is not None else None
              for x in rnn_inputs("GRU", 3, 2, 3, 4, 1)]
    compare("GRU", inputs, {"hidden_size": 4}, 14, n_out=2, rtol=1e-12)
    inputs = [x.astype(np.float16) if x is not None else None
              for x in rnn_inputs("LSTM", 3, 2, 3, 4, 1)]
    compare("LSTM", inputs, {"hidden_size": 4}, 14, n_out=2, rtol=2e-3, atol=2e-3)
    inputs = rnn_inputs("RNN", 3, 2, 3, 4, 1)
    got = run("RNN", inputs, {"hidden_size": 4}, 14, n_out=2, skip=(0,))
    full = run("RNN", inputs, {"hidden_size": 4}, 14, n_out=2)
    np.testing.assert_array_equal(got[0], full[1])


def test_recurrent_errors():
    inputs = rnn_inputs("GRU", 3, 2, 3, 4, 1)
    error(ErrorKind.INVALID_MODEL, "GRU", inputs, {"hidden_size": 5}, 14)
    error(ErrorKind.INVALID_MODEL, "GRU", inputs, {"hidden_size": 4, "direction": "both"}, 14)
    error(ErrorKind.UNSUPPORTED, "GRU", inputs,
          {"hidden_size": 4, "activations": ["Sigmoid", "Gelu"]}, 14)
    error(ErrorKind.INVALID_MODEL, "GRU", inputs, {"hidden_size": 4, "activations": ["Tanh"]}, 14)
    bad = inputs[:4] + [np.array([3, 4], np.int32)]
    error(ErrorKind.INVALID_INPUT, "GRU", bad, {"hidden_size": 4}, 14)
    # exact mode: graphrt's own tanh/sigmoid; the same bits at 1 and 2 threads, close to fast
    feeds = rnn_inputs("LSTM", 6, 3, 5, 8, 1)
    model = model_of("LSTM", feeds, 1, {"hidden_size": 8}, 14)
    names = [i.name for i in model.graph.input]
    runs = [graphrt.Session(model, graphrt.SessionOptions(mode=m, intra_op_threads=t)).run(
        None, dict(zip(names, feeds)))[0] for m, t in (("exact", 1), ("exact", 2), ("fast", 1))]
    assert runs[0].tobytes() == runs[1].tobytes()
    np.testing.assert_allclose(runs[0], runs[2], rtol=1e-5, atol=1e-6)
