"""The quantization operators (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv) through graphrt.Session, compared
with onnx's reference evaluator (numpy where the reference departs from the specification)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphrt
from graphrt import ErrorKind

from graphrt.kernels.core.base import RunContext
from graphrt.kernels.gemm import micro_int
from graphrt.kernels.quant import convolution
from graphrt.kernels.quant.quantize import MatMulInteger

from ...helpers import (EXACT, check, fails, feeds, ints, kernel_infer, numba_threads, one_node,
                        rand, run)


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
    got = check("QuantizeLinear", [x, np.array(0.5, np.float32), zp], opset=21)
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
    q = check("QuantizeLinear", [x, s, zp], attrs, opset)
    # the reference evaluator has DequantizeLinear from opset 19 only (same semantics)
    check("DequantizeLinear", [q, s, zp], attrs, max(opset, 19))
    np.testing.assert_array_equal(run("DequantizeLinear", [q, s, zp], attrs, opset)[0],
                                  run("DequantizeLinear", [q, s, zp], attrs, max(opset, 19))[0])
    check("QuantizeLinear", [x, s], attrs, opset)


def test_quantize_float16_precision_and_output_dtype():
    x = rand(200, np.float16) * 30
    s = np.array(0.37, np.float16)
    check("QuantizeLinear", [x, s, np.array(3, np.uint8)], opset=21)
    # precision: the division in float16 for float32 input (x is rounded to float16 first)
    x32 = rand(500) * 30
    got = run("QuantizeLinear", [x32, np.array(0.37, np.float32)],
              {"precision": TensorProto.FLOAT16, "output_dtype": TensorProto.INT16}, 23,
              outs=[np.int16])[0]
    q16 = x32.astype(np.float16) / np.float16(0.37)
    np.testing.assert_array_equal(got, np.rint(q16.astype(np.float32)).astype(np.int16))
    check("QuantizeLinear", [x32, np.array(0.37, np.float32)],
          {"output_dtype": TensorProto.INT8}, 21)
    fails(ErrorKind.UNSUPPORTED, "QuantizeLinear", [x32, np.array(1, np.float32)],
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
    q = check("QuantizeLinear", [x, s, np.zeros((), zp_type)], {}, 21)
    check("DequantizeLinear", [q, s], {}, 21)
    if code in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2):
        check("QuantizeLinear", [x, s, np.zeros((), zp_type)], {"saturate": 0}, 21)
    elif code != TensorProto.FLOAT8E4M3FNUZ:
        check("DequantizeLinear", [q, s, np.ones((), zp_type)], {}, 21)


def test_dequantize_types():
    for dt in (np.uint8, np.int16, np.uint16, np.int32):
        x = ints((3, 4), np.iinfo(dt).min // 2, np.iinfo(dt).max // 2, dt)
        zp = ints((4,), -5 if dt in (np.int16, np.int32) else 0, 9, dt, 1)
        check("DequantizeLinear", [x, q_scale(4), zp], {"axis": 1}, 21)
    x = ints((6,), -100, 100, np.int8)
    check("DequantizeLinear", [x, np.array(0.3, np.float16), np.array(2, np.int8)], {}, 21)
    got = run("DequantizeLinear", [x, np.array(0.3, np.float32)],
              {"output_dtype": TensorProto.FLOAT16}, 23, outs=[np.float16])[0]
    np.testing.assert_array_equal(got, (x.astype(np.float32) * np.float32(0.3)).astype(np.float16))


def test_quantize_errors():
    x = rand((2, 3))
    fails(ErrorKind.INVALID_MODEL, "QuantizeLinear", [x, q_scale((2,))], {"axis": 1}, 13)
    fails(ErrorKind.INVALID_MODEL, "QuantizeLinear", [x, q_scale((3,))], {"axis": 1}, 10)
    fails(ErrorKind.INVALID_MODEL, "QuantizeLinear", [x, q_scale((2, 2))],
          {"axis": 1, "block_size": 1}, 21)
    fails(ErrorKind.INVALID_MODEL, "DequantizeLinear",
          [ints(3, 0, 9, np.uint8), np.array(1, np.float32), np.array(1, np.int8)], {}, 21)
    fails(ErrorKind.UNSUPPORTED, "DequantizeLinear",
          [rand(3), np.array(1, np.float32)], {}, 21)


@pytest.mark.parametrize("x", [
    np.array([0, 2, -3, -2.5, 1.34, 0.5], np.float32),
    np.array([1, 2.1, 3, 255, 1000], np.float32),
    np.array([-1, -2.1, -1.3, -2.5, -3.34, -4.0], np.float32),
    np.zeros(4, np.float32),
    np.array([-0.0, 0.0, -0.0], np.float32),
    np.array([-0.0, 7.5, 3.25], np.float32),
    (np.random.default_rng(3).standard_normal(70_001) * 4).astype(np.float32),
])
def test_dynamic_quantize_linear(x):
    check("DynamicQuantizeLinear", [x], opset=11, n_out=3)
    model = one_node("DynamicQuantizeLinear", [x], opset=11, outs=[np.uint8, np.float32, np.uint8])
    graphrt.Session(model, EXACT).run(None, feeds([x]))


@pytest.mark.parametrize("sa,sb,za,zb", [
    ((4, 3), (3, 2), (), ()),
    ((2, 4, 3), (3, 5), (4,), (5,)),
    ((3,), (2, 3, 4), (1,), (4,)),
    ((2, 1, 2, 3), (3, 3, 2), None, ()),
    ((3, 13, 37), (37, 41), (13,), (41,)),      # odd K, edges of every tile
    ((13,), (13, 70), None, None),
])
@pytest.mark.parametrize("consts", [(), (1, 3)])
def test_matmul_integer(sa, sb, za, zb, consts):
    """Constant weights take the integer tile kernel (gemm/micro_int.py) on x86, B known at
    run time the float32 runs; both give the int64 reference."""
    a, b = ints(sa, 0, 256, np.uint8), ints(sb, -128, 128, np.int8, 1)
    inputs = [a, b, None if za is None else ints(za, 0, 20, np.uint8, 2),
              None if zb is None else ints(zb, -5, 5, np.int8, 3)]
    consts = tuple(i for i in consts if inputs[i] is not None)
    got = run("MatMulInteger", inputs, opset=10, outs=[np.int32], consts=consts, trim=True)[0]
    az = np.zeros(1) if za is None else inputs[2]
    if a.ndim > 1 and az.size > 1:
        az = az.reshape(-1, 1)                  # one zero point per row of A
    a32 = a.astype(np.int32) - az.astype(np.int32)
    bz = np.zeros(1, np.int8) if zb is None else inputs[3]
    want = np.matmul(a32, b.astype(np.int32) - bz.astype(np.int32))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("consts", [(), (1, 3)])
@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_matmul_integer_long_k_in_exact_float32_runs(consts, mode):
    """K = 1100 needs several float32 runs (258 when B is known only at run time, 514 for
    constant int8 weights): the extreme operands (every A - a_zp = -255 or 255, every
    B - b_zp = +-128) give the int32 product exactly, at 1 and 2 threads."""
    k = 1100
    a = np.where(ints((2, 5, k), 0, 2, np.uint8, 4) > 0, 255, 0).astype(np.uint8)
    a[:, 0], a[:, 1] = 255, 0           # rows of one sign, columns too: sums of one sign
    b = np.where(ints((k, 7), 0, 2, np.uint8, 5) > 0, 127, -128).astype(np.int8)
    b[:, 0], b[:, 1] = 127, -128
    inputs = [a, b, np.array(0 if mode == "fast" else 255, np.uint8), np.array(-1, np.int8)]
    want = (a.astype(np.int64) - inputs[2]) @ (b.astype(np.int64) + 1)
    assert np.abs(want).max() > 1 << 24         # past what one float32 run could hold
    model = one_node("MatMulInteger", inputs, opset=10, outs=[np.int32], consts=consts)
    for threads in (1, 2):
        sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode, intra_op_threads=threads))
        got = sess.run(None, feeds(inputs, consts))[0]
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
        got = run("QLinearMatMul", inputs, opset=21, outs=[ta])[0]
        acc = (a.astype(np.int32) - 3) @ (b.astype(np.int32) - bz.astype(np.int32))
        m = (np.float32(0.02) * bs / np.float32(0.3)).astype(np.float64)
        np.testing.assert_array_equal(got, np.clip(np.rint(acc * m + 5), lo, hi).astype(ta))
    else:
        check("QLinearMatMul", inputs, opset=21)
        check("QLinearMatMul", inputs, opset=10, options=EXACT)


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
    got = check("ConvInteger", [x, w, xz, wz], attrs, opset=10)
    assert got.dtype == np.int32
    check("ConvInteger", [x, w], attrs, opset=10)


@pytest.mark.parametrize("xs,ws,attrs", [c for c in CONV_CASES if len(c[1]) == 4])
def test_qlinear_conv(xs, ws, attrs):
    x, w = ints(xs, -128, 128, np.int8), ints(ws, -128, 128, np.int8, 1)
    m = ws[0]
    inputs = [x, np.array(0.05, np.float32), np.array(-3, np.int8), w, q_scale((m,), seed=2),
              np.zeros(m, np.int8), np.array(0.4, np.float32), np.array(4, np.int8),
              ints((m,), -500, 500, np.int32, 3)]
    check("QLinearConv", inputs, attrs, opset=10)
    check("QLinearConv", inputs[:8], attrs, opset=10, options=EXACT)


# geometries for the integer-tile convolution (16 or more output channels a group): padding
# on every side, strides, dilations, groups, odd and even window sizes, 1-D and 3-D
TILE_CASES = [
    ((1, 8, 9, 9), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 6, 7, 8), (32, 3, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [1, 2],
                                    "pads": [2, 0, 1, 3]}),
    ((1, 1, 12, 10), (20, 1, 3, 3), {"strides": [2, 3], "pads": [0, 2, 2, 0]}),
    ((1, 5, 11), (17, 5, 3), {"auto_pad": "SAME_UPPER", "strides": [2]}),
    ((1, 3, 4, 5, 4), (16, 3, 3, 2, 1), {"pads": [1, 0, 0, 1, 1, 0]}),
    ((1, 64, 6, 6), (24, 64, 1, 1), {}),
    ((1, 6, 9, 8), (32, 3, 3, 2), {"group": 2, "dilations": [2, 1], "pads": [2, 1, 0, 2]}),
    ((2, 5, 13), (16, 5, 3), {"pads": [1, 0]}),
]


def _conv_int64(x, w, xz, wz, attrs):
    """The ConvInteger reference in int64 (numpy): the shifted padding is 0."""
    r = x.ndim - 2
    pads = attrs.get("pads", [0] * 2 * r)
    strides = attrs.get("strides", [1] * r)
    dil = attrs.get("dilations", [1] * r)
    g = attrs.get("group", 1)
    if attrs.get("auto_pad") == "SAME_UPPER":
        pads = [0] * 2 * r
        for a in range(r):
            out = -(-x.shape[2 + a] // strides[a])
            total = max(0, (out - 1) * strides[a] + (w.shape[2 + a] - 1) * dil[a] + 1
                        - x.shape[2 + a])
            pads[a], pads[r + a] = total // 2, total - total // 2
    xs = np.pad(x.astype(np.int64) - np.int64(xz),
                [(0, 0), (0, 0)] + [(pads[a], pads[r + a]) for a in range(r)])
    ws = w.astype(np.int64) - np.asarray(wz, np.int64).reshape((-1,) + (1,) * (r + 1))
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = [(xs.shape[2 + a] - (ks[a] - 1) * dil[a] - 1) // strides[a] + 1 for a in range(r)]
    y = np.zeros((n, m) + tuple(outs), np.int64)
    for o in np.ndindex(*outs):
        for kpos in np.ndindex(*ks):
            idx = tuple(o[a] * strides[a] + kpos[a] * dil[a] for a in range(r))
            patch = xs[(slice(None), slice(None)) + idx]                   # (n, c)
            for gi in range(g):
                mg = slice(gi * (m // g), (gi + 1) * (m // g))
                wk = ws[(mg, slice(None)) + kpos]                           # (mg, cg)
                y[(slice(None), mg) + o] += patch[:, gi * cg:(gi + 1) * cg] @ wk.T
    return y


@pytest.fixture(params=["pairs", "bytes"])
def tile_form(request, monkeypatch):
    """The integer tiles' form: int16 pairs (forced), or bytes (VNNI CPUs only)."""
    if not micro_int.AVAILABLE:
        pytest.skip("the integer tile kernel is x86 code")
    if request.param == "pairs":
        monkeypatch.setattr(micro_int, "vnni", lambda: False)
    elif not micro_int.vnni():
        pytest.skip("the byte tiles need AVX512-VNNI")
    return request.param


@pytest.mark.parametrize("xdt", [np.uint8, np.int8])
@pytest.mark.parametrize("xs,ws,attrs", TILE_CASES)
def test_conv_integer_tiles(xs, ws, attrs, xdt, tile_form):
    """Constant weights take the integer tiles (x86; bytes read from planes of the input for
    1-d and 2-d convolutions where the weights minus their zero points fit int8 on VNNI
    CPUs), whose result is the int64 reference's in both modes at 1
    and 2 threads, for uint8 and int8 inputs, per-channel zero points; QLinearConv's
    requantization of it (with a bias) is the reference evaluator's."""
    lo = 0 if xdt == np.uint8 else -128
    x, w = ints(xs, lo, lo + 256, xdt, 4), ints(ws, -124, 124, np.int8, 5)
    xz, wz = np.array(lo + 131, xdt), ints((ws[0],), -4, 4, np.int8, 6)
    inputs = [x, w, xz, wz]
    kernel, ctx = kernel_infer(convolution.ConvInteger, inputs, attrs, opset=10)
    assert isinstance(ctx.prepared, convolution._Tiles)
    flat = len(xs) <= 4             # (3-d convolutions take the pairs)
    assert ctx.prepared.form == ("direct" if flat and tile_form == "bytes" else "pairs")
    want = _conv_int64(x, w, lo + 131, wz, attrs)
    model = one_node("ConvInteger", inputs, attrs, opset=10, outs=[np.int32], consts=(1, 2, 3))
    for mode in ("fast", "exact"):
        for threads in (1, 2):
            sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode,
                                                                 intra_op_threads=threads))
            np.testing.assert_array_equal(sess.run(None, feeds(inputs, (1, 2, 3)))[0], want)
    if len(ws) == 4:
        m = ws[0]
        q = [x, np.array(0.05, np.float32), xz, w, q_scale((m,), seed=2), np.zeros(m, np.int8),
             np.array(3.0, np.float32), np.array(7, np.uint8), ints((m,), -900, 900, np.int32, 3)]
        for options in (None, EXACT):
            check("QLinearConv", q, attrs, opset=10, options=options, consts=(1, 2, 3, 4, 5, 6, 7, 8))


def test_conv_integer_paths_agree():
    """The integer tiles (constant weights) and the float convolution of the shifted operands
    (weights fed at run time) give the same int32 result."""
    x, w = ints((2, 16, 10, 10), 0, 256, np.uint8, 7), ints((32, 16, 3, 3), 0, 256, np.uint8, 8)
    inputs = [x, w, np.array(3, np.uint8), np.array(250, np.uint8)]
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 2]}
    got = [run("ConvInteger", inputs, attrs, opset=10, outs=[np.int32], consts=c)[0]
           for c in ((), (1, 3))]
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[1], _conv_int64(x, w, 3, 250, attrs))


def test_integer_product_errors():
    a = ints((2, 3), 0, 9, np.uint8)
    fails(ErrorKind.INVALID_MODEL, "MatMulInteger", [a, ints((2, 3), 0, 9, np.uint8)], opset=10,
          outs=[np.int32])
    fails(ErrorKind.INVALID_MODEL, "MatMulInteger", [a, a.T, ints((3,), 0, 9, np.uint8)],
          opset=10, outs=[np.int32])
    fails(ErrorKind.UNSUPPORTED, "MatMulInteger", [a.astype(np.int16), a.T], opset=10,
          outs=[np.int32])
    fails(ErrorKind.INVALID_MODEL, "ConvInteger",
          [ints((1, 2, 4, 4), 0, 9, np.uint8), ints((2, 3, 2, 2), 0, 9, np.uint8)], opset=10,
          outs=[np.int32])


@pytest.mark.parametrize("adt,zb_range", [(np.uint8, (-3, 3)), (np.int8, (-3, 3)),
                                          (np.uint8, (-100, 100))])
def test_constant_weights_take_the_integer_kernel(adt, zb_range, tile_form):
    """The path test_matmul_integer's constant cases run (x86: micro_int.AVAILABLE; bytes on
    VNNI CPUs where B minus its zero points fits int8), bit for bit the float32 runs'
    result, at 1 and 2 threads, for one zero point of A and one a row."""
    lo = 0 if adt == np.uint8 else -128
    a, b = ints((70, 300), lo, lo + 256, adt, 5), ints((300, 130), -125, 125, np.int8, 6)
    zb = ints((130,), *zb_range, np.int8, 7)
    fits = bool(np.abs(b.astype(np.int64) - zb).max() <= 127)
    for za in (np.array(lo + 128, adt), ints((70,), lo, lo + 256, adt, 8)):
        outs = []
        for unknown in ((), (1,)):
            kernel, ctx = kernel_infer(MatMulInteger, [a, b, za, zb], opset=10, unknown=unknown)
            assert (ctx.prepared[0] == "tiles") == (not unknown)
            if not unknown:
                assert (ctx.prepared[-1] is not None) == (tile_form == "bytes" and fits)
            for threads in (1, 2):
                with numba_threads(threads):
                    out = np.empty((70, 130), np.int32)
                    kernel.run(RunContext(kernel.node, [a, b, za, zb], [out], ctx.prepared,
                                          False))
                    outs.append(out)
        want = (a.astype(np.int64) - za.astype(np.int64).reshape(-1, 1)) @ \
            (b.astype(np.int64) - zb)
        for out in outs:
            np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("consts", [(), (1, 3)])
@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_conv_integer_sums_past_float32(consts, mode):
    """64 channels of 3 x 3 with every shifted value at +-255: sums up to 147 million, past
    float32's exact integers, so the float64 convolution runs; its result is the int64
    reference's, with weights known at run time or constant, at 1 and 2 threads."""
    x = np.where(ints((1, 64, 6, 6), 0, 2, np.uint8, 8) > 0, 255, 0).astype(np.uint8)
    x[0, :, 2, 2] = 255
    w = np.full((5, 64, 3, 3), 255, np.uint8)
    w[1] = 0
    inputs = [x, w, np.array(0, np.uint8), np.array(0, np.uint8)]
    xi = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 5, 6, 6), np.int64)
    for i in range(6):
        for j in range(6):
            want[0, :, i, j] = np.tensordot(w.astype(np.int64), xi[0, :, i:i + 3, j:j + 3],
                                            axes=3)
    assert want.max() > 1 << 24
    model = one_node("ConvInteger", inputs, {"pads": [1, 1, 1, 1]}, opset=10, outs=[np.int32],
                     consts=consts)
    for threads in (1, 2):
        sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode, intra_op_threads=threads))
        np.testing.assert_array_equal(sess.run(None, feeds(inputs, consts))[0], want)


def test_conv_integer_tiles_zero_point_fed_each_run(tile_form):
    """x's zero point fed at run time (dynamic quantization) and changed between runs: each
    run pads with its own (the compiled calls are made once and replayed)."""
    x, w = ints((1, 8, 9, 9), 0, 256, np.uint8, 4), ints((16, 8, 3, 3), -124, 124, np.int8, 5)
    wz = ints((16,), -4, 4, np.int8, 6)
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 1]}
    inputs = [x, w, np.array(0, np.uint8), wz]
    model = one_node("ConvInteger", inputs, attrs, opset=10, outs=[np.int32], consts=(1, 3))
    sess = graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=1))
    for z in (7, 200, 7, 131):
        inputs[2] = np.array(z, np.uint8)
        got = sess.run(None, feeds(inputs, (1, 3)))[0]
        np.testing.assert_array_equal(got, _conv_int64(x, w, z, wz, attrs))
