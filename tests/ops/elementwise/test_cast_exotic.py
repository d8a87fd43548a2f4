"""Cast and CastLike to and from the types numpy lacks (ml_dtypes: bfloat16, float8, float4,
float8e8m0, int4/uint4, int2/uint2), through graphrt.Session, compared with onnx's reference
evaluator, onnx's numpy helpers, and an exact (rational) rounding oracle."""
from __future__ import annotations

import bisect
import functools
from fractions import Fraction

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphrt
from graphrt import ErrorKind, SessionError
from graphrt import dtypes as _dt

from ...helpers import EXACT, NODE, bits, model_of
from ...models import make


BF16, E4M3, E4M3UZ = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz
E5M2, E5M2UZ, F4 = ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz, ml_dtypes.float4_e2m1fn
E8M0 = ml_dtypes.float8_e8m0fnu
FLOAT8 = [E4M3, E4M3UZ, E5M2, E5M2UZ]
SMALL_INTS = {ml_dtypes.int4: (4, True), ml_dtypes.uint4: (4, False),
              ml_dtypes.int2: (2, True), ml_dtypes.uint2: (2, False)}
SPECIAL = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e6, -1e6, 1e-7, -1e-7,
                    0.47892547, 0.7229038, 3.0, -2.75, 300.0, 464.0, 465.0, 61440.0], np.float32)


def code(dt):
    return _dt.to_code(np.dtype(dt))


def cast_model(x, attrs, op="Cast", like=None, opset=25):
    """x -> y by one Cast (or CastLike, ``like`` the target type, fed as t)."""
    inputs = {"x": x} if like is None else {"x": x, "t": np.zeros(1, like)}
    return model_of(op, inputs, [("y", None)], attrs, opset)


def cast(x, to, opset=25, options=None, **attrs):
    m = cast_model(x, dict(attrs, to=code(to)), opset=opset)
    return graphrt.Session(m, options).run(None, {"x": x})[0]


def cast_like(x, to, opset=25, options=None, **attrs):
    m = cast_model(x, attrs, op="CastLike", like=to, opset=opset)
    return graphrt.Session(m, options).run(None, {"x": x, "t": np.zeros(1, to)})[0]


def cast_reference(x, to, opset=25, **attrs):
    m = cast_model(x, dict(attrs, to=code(to)), opset=opset)
    return ReferenceEvaluator(m).run(None, {"x": x})[0]


def same_values(got, want):
    assert got.dtype == np.dtype(want.dtype) and got.shape == want.shape
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


# ------------------------------------------------------------------ an exact rounding oracle

@functools.lru_cache(maxsize=None)
def finite_values(dt):
    """The finite values of a float type, sorted, each with its 'even' flag (last code bit
    0) for ties; -0 left out."""
    n = 16 if dt == F4 else 1 << (8 * np.dtype(dt).itemsize)
    word = np.uint16 if np.dtype(dt).itemsize == 2 else np.uint8
    codes = np.arange(n, dtype=word)
    with np.errstate(invalid="ignore"):             # signalling NaN codes
        vals = codes.view(dt).astype(np.float64)
    keep = np.isfinite(vals) & ~((vals == 0) & np.signbit(vals))
    table = sorted(zip(vals[keep].tolist(), (codes[keep] & 1).tolist()))
    return [Fraction(v) for v, _ in table], [odd == 0 for _, odd in table]


def rne(values, dt):
    """Exact round-to-nearest-even of Python ints / floats to ``dt`` (in range)."""
    vals, even = finite_values(dt)
    out = []
    for v in values:
        q = Fraction(v)
        i = bisect.bisect_left(vals, q)
        if i < len(vals) and vals[i] == q:
            out.append(float(q))
            continue
        lo, hi = i - 1, i
        mid = (vals[lo] + vals[hi]) / 2
        pick = lo if q < mid or (q == mid and even[lo]) else hi
        out.append(float(vals[pick]))
    return np.array(out)


def near_midpoints(dt, rng, count, scale):
    """Source values at, just above and just below midpoints of ``dt``, in [-scale, scale]."""
    vals, _ = finite_values(dt)
    vals = [v for v in vals if abs(v) <= scale]
    picks = rng.integers(0, len(vals) - 1, count)
    return [(vals[i] + vals[i + 1]) / 2 for i in picks]


# ------------------------------------------------------------------ to the float types

@pytest.mark.parametrize("dt", FLOAT8)
@pytest.mark.parametrize("saturate", [0, 1])
def test_float8_from_float32_matches_reference(dt, saturate):
    rng = np.random.default_rng(1)
    x = np.concatenate([SPECIAL, (rng.standard_normal(300) * 100).astype(np.float32)])
    got = cast(x, dt, saturate=saturate)
    np.testing.assert_array_equal(bits(got), bits(cast_reference(x, dt, saturate=saturate)))


def test_float8_saturation_rules_of_the_spec():
    x = np.array([np.inf, -np.inf, 1e6, -1e6, np.nan, -0.0], np.float32)
    for dt in FLOAT8:
        m = float(ml_dtypes.finfo(dt).max)
        same_values(cast(x, dt), np.array([m, -m, m, -m, np.nan, 0.0], dt))
    nan = np.nan
    same_values(cast(x, E4M3, saturate=0), np.array([nan, nan, nan, nan, nan, -0.0], E4M3))
    same_values(cast(x, E5M2, saturate=0),
                np.array([np.inf, -np.inf, np.inf, -np.inf, nan, -0.0], E5M2))
    for dt in (E4M3UZ, E5M2UZ):
        got = cast(x, dt, saturate=0)
        assert np.isnan(got.astype(np.float32)[:5]).all() and bits(got)[5] == 0   # no -0
    # before opset 19 there is no saturate attribute: always saturating
    same_values(cast(x[:2], E5M2, opset=13), np.array([57344, -57344], E5M2))


def test_bfloat16_and_float4_from_float32():
    rng = np.random.default_rng(2)
    x = np.concatenate([SPECIAL, rng.standard_normal(200).astype(np.float32) * 4])
    np.testing.assert_array_equal(bits(cast(x, BF16)), bits(cast_reference(x, BF16)))
    got = cast(x, F4)
    want = cast_reference(x, F4).astype(np.float64)
    want[np.isnan(x)] = 0.0           # float4 has no NaN: 0 (the reference's sign is arbitrary)
    np.testing.assert_array_equal(got.astype(np.float64), want)
    assert (bits(got)[np.isnan(x)] == 0).all()
    assert got.astype(np.float32)[4] == 6 and got.astype(np.float32)[5] == -6


@pytest.mark.parametrize("dt", [BF16, E4M3, E5M2, F4])
def test_wide_sources_round_once(dt):
    """float64 and 32/64-bit integers are rounded once, to nearest even (ml_dtypes alone
    would go through float32 and round twice)."""
    rng = np.random.default_rng(3)
    big = float(ml_dtypes.finfo(dt).max)
    mids = near_midpoints(dt, rng, 200, big)
    f64 = [float(m) for m in mids] + [float(m) + e for m in mids[:100] for e in (-1e-12, 1e-12)
                                       if abs(float(m) + e) <= big]
    f64 += [1.0 + 2.0 ** -8 + 2.0 ** -40, 1.0 + 2.0 ** -4 + 2.0 ** -40]
    x = np.array(f64)
    same_values(cast(x, dt, saturate=0), rne(x.tolist(), dt).astype(dt))
    ints = [int(m) for m in mids if m.denominator == 1]
    ints += [int(m) + d for m in mids if m.denominator == 1 and abs(m) > 1 for d in (-1, 1)]
    if dt == BF16:      # beyond float32's 24 bits: a rounding to float32 first would tie
        ints += [2**60 + 2**52 + 1, -(2**60 + 2**52 + 1), 2**24 + 2**16 + 1, 2**62 + 2**54 - 1]
    for itype in (np.int32, np.int64):
        info = np.iinfo(itype)
        xs = np.array([v for v in ints if info.min <= v <= info.max], itype)
        same_values(cast(xs, dt, saturate=0), rne(xs.tolist(), dt).astype(dt))
    if dt == BF16:
        xs = np.array([2**63 + 2**55 + 1, 2**64 - 1, 2**63 + 2**55, 2**56 + 2**48 + 1], np.uint64)
        same_values(cast(xs, dt), rne(xs.tolist(), dt).astype(dt))


def test_float64_and_int_overflow():
    x = np.array([1e300, -1e300, 1e-300, -1e-300, 3.39e38], np.float64)
    same_values(cast(x, BF16), np.array([np.inf, -np.inf, 0.0, -0.0, 3.3895314e38], BF16))
    same_values(cast(np.array([3.4e38]), BF16), np.array([np.inf], BF16))   # past max + ulp/2
    assert np.signbit(cast(x, BF16).astype(np.float32)[3])
    same_values(cast(x, E4M3), np.array([448, -448, 0, -0.0, 448], E4M3))
    same_values(cast(x, E5M2, saturate=0), np.array([np.inf, -np.inf, 0, -0.0, np.inf], E5M2))
    i = np.array([2**63 - 1, -2**63, 100000], np.int64)
    same_values(cast(i, E4M3UZ), np.array([240, -240, 240], E4M3UZ))
    same_values(cast(i, E5M2, saturate=0), np.array([np.inf, -np.inf, np.inf], E5M2))


def test_float16_and_bool_sources():
    h = np.array([0.5, -3.0, np.nan, np.inf, 65504, 1e-7], np.float16)
    np.testing.assert_array_equal(bits(cast(h, E5M2)), bits(cast_reference(h, E5M2)))
    np.testing.assert_array_equal(bits(cast(h, BF16)), bits(cast_reference(h, BF16)))
    b = np.array([True, False, True])
    same_values(cast(b, E4M3), np.array([1, 0, 1], E4M3))
    same_values(cast(b, ml_dtypes.int4), np.array([1, 0, 1], ml_dtypes.int4))


# ------------------------------------------------------------------ float8e8m0

@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_e8m0_matches_onnx_helper_on_normal_floats(mode, saturate):
    rng = np.random.default_rng(4)
    x = np.concatenate([np.exp2(rng.uniform(-125, 126, 400)), [0.124, 0.25, 1.1, 1.5, 1.4999999,
                                                              3.0, 2.0 ** 127 * 1.7]])
    x = x.astype(np.float32)
    want = numpy_helper.to_float8e8m0(x, bool(saturate), mode)
    got = cast(x, E8M0, opset=24, saturate=saturate, round_mode=mode)
    np.testing.assert_array_equal(bits(got), bits(want))


def test_e8m0_special_values_follow_the_spec():
    x = np.array([0.0, -0.0, np.nan, np.inf, 2.0 ** -127, 2.0 ** -130, 3 * 2.0 ** -129, -4.0,
                  2.0 ** 127 * 1.5, 1e300], np.float64)
    up = bits(cast(x, E8M0, opset=24))
    np.testing.assert_array_equal(up, [0, 0, 255, 254, 0, 0, 0, 129, 254, 254])
    down = bits(cast(x, E8M0, opset=24, round_mode="down", saturate=0))
    np.testing.assert_array_equal(down, [255, 255, 255, 255, 0, 255, 255, 129, 254, 255])
    near = bits(cast(x, E8M0, opset=24, round_mode="nearest", saturate=0))
    np.testing.assert_array_equal(near, [255, 255, 255, 255, 0, 255, 0, 129, 255, 255])
    h = np.array([0.25, 3.0, 6e-8], np.float16)          # float16 and int sources
    np.testing.assert_array_equal(bits(cast(h, E8M0, opset=24)), [125, 129, 103])  # 2**-24
    i = np.array([2**62 + 1, 2**62, 3], np.int64)          # 2**62 + 1 is no power of two
    np.testing.assert_array_equal(bits(cast(i, E8M0, opset=24)), [190, 189, 129])


# ------------------------------------------------------------------ int4, uint4, int2, uint2

def low_bits_oracle(values, nbits, signed):
    out = []
    for v in values:
        if isinstance(v, float):
            if not np.isfinite(v):
                out.append(0)
                continue
            v = round(v)          # Python's round: ties to even
        low = int(v) % (1 << nbits)
        out.append(low - (1 << nbits) if signed and low >= 1 << (nbits - 1) else low)
    return np.array(out)


@pytest.mark.parametrize("dt", list(SMALL_INTS))
def test_small_ints(dt):
    nbits, signed = SMALL_INTS[dt]
    f = np.concatenate([np.arange(-20, 20, 0.5), [np.nan, np.inf, -np.inf, 1e30, -3e9, 2.0**60]])
    for src in (np.float32, np.float64):
        x = f.astype(src)
        got = cast(x, dt)
        assert got.dtype == dt
        np.testing.assert_array_equal(got.astype(np.int64),
                                      low_bits_oracle(x.astype(np.float64).tolist(), nbits, signed))
    i = np.array([-9, -8, 7, 8, 15, 16, 255, -129, 2**62 + 5, -2**63], np.int64)
    np.testing.assert_array_equal(cast(i, dt).astype(np.int64), low_bits_oracle(i.tolist(), nbits, signed))
    u = np.array([2**64 - 1, 2**63 + 6, 3], np.uint64)
    np.testing.assert_array_equal(cast(u, dt).astype(np.int64), low_bits_oracle(u.tolist(), nbits, signed))
    # from them: exact, then the usual rules (int to int wraps)
    vals = np.arange(-(1 << (nbits - 1)), 1 << (nbits - 1)) if signed else np.arange(1 << nbits)
    x = vals.astype(dt)
    for to in (np.float32, np.float16, np.int8, np.uint8, np.int64, np.bool_):
        np.testing.assert_array_equal(cast(x, to), vals.astype(to))


def test_small_int_from_exotic_floats_rounds_to_even():
    x = np.array([2.5, 3.5, -1.5, 7.5, np.nan], BF16)
    np.testing.assert_array_equal(cast(x, ml_dtypes.int4).astype(np.int64), [2, 4, -2, -8, 0])
    np.testing.assert_array_equal(cast(x, ml_dtypes.uint2).astype(np.int64), [2, 0, 2, 0, 0])


# ------------------------------------------------------------------ from the exotic types

@pytest.mark.parametrize("dt", [BF16, E4M3, E4M3UZ, E5M2, E5M2UZ, F4, E8M0])
def test_from_exotic_floats_is_exact_widening(dt):
    n = 16 if dt == F4 else 1 << (8 * np.dtype(dt).itemsize)
    word = np.uint16 if np.dtype(dt).itemsize == 2 else np.uint8
    x = np.arange(n, dtype=word).view(dt) if dt != F4 else np.arange(16, dtype=np.uint8).view(dt)
    wide = x.astype(np.float32)
    np.testing.assert_array_equal(bits(cast(x, np.float32)), bits(wide))
    for to in (np.float64, np.float16, np.int32, np.uint8, np.bool_):
        np.testing.assert_array_equal(cast(x, to), cast(wide, to))
    np.testing.assert_array_equal(cast(x, np.float16), cast_reference(x, np.float16))  # NaN payloads differ


def test_exotic_to_exotic():
    x = np.array([1.0625, 3.75, -300.0, np.inf, np.nan], BF16)
    want = cast_reference(x.astype(np.float32), E4M3)
    np.testing.assert_array_equal(bits(cast(x, E4M3)), bits(want))
    i4 = np.array([-8, 7, 3], ml_dtypes.int4)
    same_values(cast(i4, F4), np.array([-6, 6, 3], F4))
    same_values(cast(i4, ml_dtypes.uint2), np.array([0, 3, 3], ml_dtypes.uint2))
    same_values(cast(x[:3], BF16), x[:3])


# ------------------------------------------------------------------ modes, CastLike, shapes

def test_exact_mode_nan_is_canonical():
    neg_nan = np.array([0xFFC1, 0x3F80], np.uint16).view(BF16)
    np.testing.assert_array_equal(bits(cast(neg_nan, np.float32, options=EXACT)),
                                  [0x7FC00000, 0x3F800000])
    x = np.array([-np.nan, 1.0], np.float32)
    np.testing.assert_array_equal(bits(cast(x, E4M3, saturate=0, options=EXACT)), [0x7F, 0x38])
    np.testing.assert_array_equal(bits(cast(x, E4M3, saturate=0)), [0xFF, 0x38])   # fast: sign kept
    np.testing.assert_array_equal(bits(cast(x, BF16, options=EXACT)), [0x7FC0, 0x3F80])


def test_castlike():
    x = np.array([1e6, -np.inf, 0.3, np.nan], np.float32)
    np.testing.assert_array_equal(bits(cast_like(x, E4M3, opset=19)), bits(cast(x, E4M3)))
    np.testing.assert_array_equal(bits(cast_like(x, E4M3, opset=19, saturate=0)),
                                  bits(cast(x, E4M3, saturate=0)))
    np.testing.assert_array_equal(bits(cast_like(x, E8M0, opset=25, round_mode="down")),
                                  bits(cast(x, E8M0, opset=25, round_mode="down")))
    b = np.array([1.5, -2.0], BF16)
    np.testing.assert_array_equal(cast_like(b, np.int32, opset=19), [1, -2])
    same_values(cast_like(np.array([5, -3], np.int8), ml_dtypes.int4, opset=21),
                np.array([5, -3], ml_dtypes.int4))


def test_large_parallel_and_empty():
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(70001) * 300).astype(np.float32)
    for dt in (E4M3, BF16):
        np.testing.assert_array_equal(bits(cast(x, dt)), bits(cast_reference(x, dt)))
    got = cast(x.astype(np.float64), E8M0, opset=24)
    np.testing.assert_array_equal(bits(got), bits(numpy_helper.to_float8e8m0(np.abs(x))))
    np.testing.assert_array_equal(cast(x, ml_dtypes.int2).astype(np.int64),
                                  low_bits_oracle(x.astype(np.float64).tolist()[:70001], 2, True))
    y = cast(cast(x, E5M2), np.float32)
    np.testing.assert_array_equal(y, x.astype(E5M2).astype(np.float32))
    for dt in (E4M3, ml_dtypes.uint4, E8M0):
        e = cast(np.zeros((0, 3), np.float32), dt, opset=24)
        assert e.shape == (0, 3) and e.dtype == dt
        e = cast(np.zeros((2, 0), dt), np.float32, opset=24)
        assert e.shape == (2, 0) and e.dtype == np.float32


def test_errors():
    x = np.zeros(2, np.float32)
    with pytest.raises(SessionError) as info:
        cast(x, E8M0, opset=24, round_mode="sideways")
    assert info.value.kind == ErrorKind.INVALID_MODEL and info.value.node == NODE
    with pytest.raises(SessionError) as info:
        graphrt.Session(cast_model(x, {"to": TP.COMPLEX64})).run(None, {"x": x})
    assert info.value.kind == ErrorKind.UNSUPPORTED and info.value.node == NODE


def test_constant_and_initializers_of_exotic_types():
    """The importer reads these through onnx (packed 4- and 2-bit data unpacked)."""
    w4 = np.array([[-8, 7, 3], [1, -1, 0]], ml_dtypes.int4)
    u2 = np.array([3, 0, 1, 2, 3], ml_dtypes.uint2)
    f8 = np.array([0.5, -448, 3], E4M3)
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(f8)),
             helper.make_node("Cast", ["c"], ["y0"], to=TP.FLOAT),
             helper.make_node("Cast", ["w"], ["y1"], to=TP.FLOAT),
             helper.make_node("Cast", ["u"], ["y2"], to=TP.INT32)]
    outs = [helper.make_tensor_value_info("y0", TP.FLOAT, [3]),
            helper.make_tensor_value_info("y1", TP.FLOAT, [2, 3]),
            helper.make_tensor_value_info("y2", TP.INT32, [5])]
    m = make(nodes, [], outs, [numpy_helper.from_array(w4, "w"), numpy_helper.from_array(u2, "u")],
             opset=21)
    m.ir_version = 10
    onnx.checker.check_model(m)
    y0, y1, y2 = graphrt.Session(m).run(None, {})
    np.testing.assert_array_equal(y0, f8.astype(np.float32))
    np.testing.assert_array_equal(y1, w4.astype(np.float32))
    np.testing.assert_array_equal(y2, u2.astype(np.int32))


def test_compiled_half_conversion_is_numpy_bit_for_bit():
    """floats.convert (the widening and rounding of every float16 kernel): all 65536 float16
    patterns to float32, and float32 patterns (NaN payloads, subnormals, overflow, ties)
    back, with numpy's bits."""
    from graphrt.kernels.core.floats import convert
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    wide = np.empty(halves.shape, np.float32)
    convert(wide, halves)
    np.testing.assert_array_equal(wide.view(np.uint32), halves.astype(np.float32).view(np.uint32))
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    ties = (np.arange(1 << 12, dtype=np.uint32) << 13) | 0x1000 | 0x38000000  # halfway cases
    f = np.concatenate([bits, ties, wide.view(np.uint32)]).view(np.float32)
    got = np.empty(f.shape, np.float16)
    convert(got, f)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got.view(np.uint16), f.astype(np.float16).view(np.uint16))


def test_compiled_bfloat16_conversion_is_ml_dtypes_bit_for_bit():
    """floats.convert for bfloat16 (every bfloat16 kernel's widening and rounding, compiled
    calls): all 65536 bfloat16 patterns to float32, and float32 patterns (NaNs of both
    signs, subnormals, overflow to infinity, ties) back, with ml_dtypes' bits."""
    from graphrt.kernels.core.floats import BF16, convert, convert_call
    if BF16 is None:
        pytest.skip("ml_dtypes is not installed")
    halves = np.arange(1 << 16, dtype=np.uint16).view(BF16)
    wide = np.empty(halves.shape, np.float32)
    assert convert_call(wide, halves) is not None
    convert(wide, halves)
    np.testing.assert_array_equal(wide.view(np.uint32), halves.astype(np.float32).view(np.uint32))
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    ties = (np.arange(1 << 14, dtype=np.uint32) << 16) | 0x8000          # halfway cases
    edges = np.array([0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x00008000, 0x80018000, 0x7F800001,
                      0xFFC00001, 0x7FFFFFFF], np.uint32)
    f = np.concatenate([bits, ties, edges, wide.view(np.uint32)]).view(np.float32)
    got = np.empty(f.shape, BF16)
    assert convert_call(got, f) is not None
    convert(got, f)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got.view(np.uint16), f.astype(BF16).view(np.uint16))
