"""The element-wise operators (unary_math, activations, compare, arithmetic's Pow/Mod/PRelu/
BitShift, variadic, select) through graphrt.Session, compared with onnx's reference
evaluator (or numpy where the reference leaves a case open)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphrt
from graphrt import ErrorKind, SessionError

from ...helpers import (EXACT, bits, both, close, counter_sum, fails, model_of, one_node, ours,
                        same)
from ...models import make


BF16 = np.dtype(ml_dtypes.bfloat16)


SPECIAL = np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.7, -3.7, 1e-3, 20.0, -20.0,
                    np.inf, -np.inf, np.nan], dtype=np.float32)
UNIT = np.array([-0.99, -0.5, -0.0, 0.0, 0.3, 0.99, np.nan], dtype=np.float32)


# ----------------------------------------------------------------------------- unary


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round",
                                "Sign", "IsNaN", "Softsign", "Relu"])
def test_exact_unary_matches_reference(op):
    x = SPECIAL.reshape(3, 5)
    with np.errstate(all="ignore"):
        got, want = both(op, [x], opset=22)
    same(got, want)
    if got.dtype.kind == "f" and op != "Sign":      # numpy's sign(-0) is +0, graphrt's -0
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("op,x", [
    ("Exp", SPECIAL), ("Log", np.abs(SPECIAL)), ("Sin", SPECIAL), ("Cos", SPECIAL),
    ("Tan", SPECIAL), ("Asin", UNIT), ("Acos", UNIT), ("Atan", SPECIAL), ("Sinh", SPECIAL),
    ("Cosh", SPECIAL), ("Asinh", SPECIAL), ("Acosh", np.abs(SPECIAL) + 1), ("Atanh", UNIT),
    ("Tanh", SPECIAL), ("Erf", SPECIAL), ("Sigmoid", SPECIAL), ("Softplus", SPECIAL),
    ("Mish", SPECIAL), ("HardSwish", SPECIAL)])
def test_libm_unary_matches_reference(op, x):
    with np.errstate(all="ignore"):
        got, want = both(op, [x], opset=22)
    close(got, want, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("op,attrs,opset", [
    ("Elu", {"alpha": 0.7}, 22), ("Selu", {}, 22), ("Selu", {"alpha": 2.0, "gamma": 0.5}, 22),
    ("Celu", {"alpha": 2.0}, 12), ("LeakyRelu", {"alpha": 0.1}, 16), ("LeakyRelu", {}, 6),
    ("ThresholdedRelu", {"alpha": 0.4}, 22), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 22),
    ("Swish", {"alpha": 0.5}, 24), ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20),
    ("Shrink", {"lambd": 1.0, "bias": 0.25}, 9), ("IsInf", {}, 20),
    ("IsInf", {"detect_negative": 0}, 20), ("IsInf", {"detect_positive": 0}, 20)])
def test_unary_with_attributes(op, attrs, opset):
    with np.errstate(all="ignore"):
        got, want = both(op, [SPECIAL], attrs, opset)
    if got.dtype.kind == "f":
        close(got, want, rtol=2e-6, atol=1e-7)
    else:
        same(got, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
@pytest.mark.parametrize("op,attrs", [("Sqrt", {}), ("Sigmoid", {}), ("HardSigmoid", {}),
                                      ("Round", {}), ("IsNaN", {})])
def test_unary_float16_and_float64(op, attrs, dtype):
    x = np.abs(SPECIAL).astype(dtype) if op == "Sqrt" else SPECIAL.astype(dtype)
    with np.errstate(all="ignore"):
        got, want = both(op, [x], attrs, opset=22)
    close(got, want, rtol=1e-3 if dtype == np.float16 else 1e-12, atol=1e-7)


@pytest.mark.parametrize("op,dtype", [("Abs", np.int8), ("Abs", np.uint16), ("Neg", np.int8),
                                      ("Neg", np.int64), ("Sign", np.int32), ("Sign", np.uint8),
                                      ("BitwiseNot", np.uint8), ("BitwiseNot", np.int16),
                                      ("Shrink", np.int32)])
def test_integer_unary(op, dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, -3 if info.min else 3, 0, 1, 7, info.max], dtype=dtype)
    with np.errstate(all="ignore"):
        got, want = both(op, [x], {"lambd": 2.0, "bias": 1.0} if op == "Shrink" else None)
    same(got, want)


def test_not_and_empty_and_scalar():
    x = np.array([[True, False, True]])
    same(*both("Not", [x], opset=1))
    for shape in [(0,), (2, 0, 3), ()]:
        x = np.full(shape, 2.25, np.float32)
        got, want = both("Sqrt", [x])
        same(got, want)


def test_large_unary_runs_in_parallel_blocks():
    x = np.linspace(-30, 30, 70001, dtype=np.float32)
    got, want = both("HardSigmoid", [x], {"alpha": 0.1, "beta": 0.3})
    same(got, want)


@pytest.mark.parametrize("opset", [6, 11, 13])
def test_clip_bounds_from_attributes_or_inputs(opset):
    x = SPECIAL
    lo, hi = np.array(-1.0, np.float32), np.array(2.0, np.float32)
    if opset < 11:
        got, want = both("Clip", [x], {"min": -1.0, "max": 2.0}, opset)
        same(got, want)
        got, want = both("Clip", [x], {"max": 2.0}, opset)
    else:
        same(*both("Clip", [x, lo, hi], opset=opset))
        same(*both("Clip", [x, None, hi], opset=opset))
        got, want = both("Clip", [x, lo], opset=opset)
    same(got, want)


def test_clip_integers_and_min_above_max():
    x = np.array([-128, -5, 0, 5, 127], np.int8)
    same(*both("Clip", [x, np.array(-3, np.int8), np.array(4, np.int8)], opset=13))
    same(*both("Clip", [x, None, np.array(4, np.int8)], opset=13))
    got, _ = both("Clip", [SPECIAL, np.array(3.0, np.float32), np.array(1.0, np.float32)], opset=13)
    np.testing.assert_array_equal(got, np.where(np.isnan(SPECIAL), np.nan, 1.0).astype(np.float32))


# ----------------------------------------------------------------------------- binary

A = np.array([[0.0, -0.0, 1.5, -2.5, np.inf, np.nan], [3.0, -7.0, 7.0, -1.0, 2.0, 5.5]],
             np.float32)
B = np.array([0.0, 0.0, 1.5, 2.0, np.inf, 1.0], np.float32)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint64])
def test_comparisons_broadcast(op, dtype):
    with np.errstate(all="ignore"):
        a = A.astype(dtype) if dtype not in (np.uint64,) else np.abs(np.nan_to_num(A)).astype(dtype)
        b = B.astype(dtype) if dtype not in (np.uint64,) else np.nan_to_num(B).astype(dtype)
    same(*both(op, [a, b[None, :]], opset=16))
    same(*both(op, [b.reshape(6, 1), a[0]], opset=16))


def test_equal_bool_and_strings():
    a = np.array([True, False, True])
    same(*both("Equal", [a, np.array([True])], opset=19))
    s = np.array([["a", "bc"], ["", "x"]], dtype=object)
    same(*both("Equal", [s, np.array(["bc"], dtype=object)], opset=19, outs=[np.bool_]))


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op):
    rng = np.random.default_rng(1)
    a, b = rng.random((3, 4, 5)) > 0.5, rng.random((4, 1)) > 0.5
    same(*both(op, [a, b], opset=7))


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", [np.int16, np.uint64])
def test_bitwise(op, dtype):
    a = np.arange(24, dtype=dtype).reshape(2, 3, 4) * dtype(37)
    same(*both(op, [a, np.array([5, 12, 255, 1], dtype=dtype)]))


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64, np.uint64])
def test_bitshift_in_and_out_of_range(direction, dtype):
    info = np.iinfo(dtype)
    x = np.array([1, 3, info.max, info.min, -5 if info.min else 5, 100], dtype=dtype)
    y = np.array([0, 1, 2, info.bits - 1, info.bits, 3], dtype=dtype)
    if info.min:
        y[-1] = -1
    same(*both("BitShift", [x, y], {"direction": direction}, opset=28))


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int8, np.uint32,
                                   np.int64])
def test_mod(fmod, dtype):
    if np.dtype(dtype).kind == "f":
        a = np.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 3.0, np.inf, 2.0, -2.0, np.nan, 7.0], dtype)
        b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, -3.0, 0.0, 2.0, np.inf, np.inf, 1.0, 3.5], dtype)
    else:
        info = np.iinfo(dtype)
        a = np.array([7, -7, 7, -7, 0, info.min, info.max, 9], dtype=dtype) if info.min else \
            np.array([7, 8, 0, info.max, 3], dtype=dtype)
        b = np.array([3, 3, -3, -3, 5, -1, 7, 9], dtype=dtype) if info.min else \
            np.array([3, 3, 5, 7, 9], dtype=dtype)
    with np.errstate(all="ignore"):
        got, want = both("Mod", [a, b], {"fmod": fmod}, opset=28)
    same(got, want)
    if np.dtype(dtype).kind == "f":       # signed zeros as the spec says
        zero = (got == 0)
        np.testing.assert_array_equal(np.signbit(got[zero]),
                                      np.signbit(b[zero]) if fmod == 0 else np.signbit(a[zero]))


def test_integer_mod_by_zero_is_zero():
    got = ours("Mod", [np.array([5, -5], np.int32), np.array([0, 0], np.int32)], opset=13)
    np.testing.assert_array_equal(got, [0, 0])


@pytest.mark.parametrize("base,exponent", [
    (np.float32, np.float32), (np.float32, np.int64), (np.float32, np.uint32),
    (np.float64, np.int8), (np.float16, np.float16), (np.int64, np.int64),
    (np.int32, np.float32), (np.int64, np.uint8)])
def test_pow_mixed_types(base, exponent):
    x = np.array([[1, 2, 3], [-2, 0, 5]], dtype=base)
    y = np.array([2, 3, 0], dtype=exponent)
    got, want = both("Pow", [x, y], opset=15)
    close(got, want, rtol=1e-3 if base == np.float16 else 1e-6, atol=1e-7)


def test_pow_integer_wraps_and_negative_exponents():
    x = np.array([3, 2, -1, -1, 1, 5, 0], np.int64)
    y = np.array([41, 70, 3, -3, -4, -1, -2], np.int64)
    got = ours("Pow", [x, y], opset=15)
    want = [pow(3, 41, 1 << 64), 0, -1, -1, 1, 0, 0]
    want[0] = want[0] - (1 << 64) if want[0] >= 1 << 63 else want[0]
    np.testing.assert_array_equal(got, np.array(want, np.int64))


@pytest.mark.parametrize("exponent", [2.0, 3.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_pow_by_a_constant_two_or_three(exponent, dtype):
    """A constant exponent 2 or 3 takes products: fast mode within a few ulps, exact mode the
    bits of graphrt's own pow (the exponent fed as an input) over awkward arguments."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(20000) * 10, rng.standard_normal(5000) * 1e-13,
                        rng.standard_normal(5000) * 1e12, rng.integers(1, 2 ** 9, 5000),
                        rng.integers(1, 2 ** 9, 500) + 0.5,
                        [0, -0.0, np.inf, -np.inf, np.nan, 6.98e12, 1.1754944e-38, 1e-45]])
    x = x.astype(dtype)
    e = np.array(exponent, dtype)
    constant = model_of("Pow", {"X": x, "E": e}, [("Y", dtype)], opset=15,
                        inits=[numpy_helper.from_array(e, "E")])
    fed = model_of("Pow", {"X": x, "E": e}, [("Y", dtype)], opset=15)
    fast = graphrt.Session(constant).run(None, {"X": x})[0]
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), exponent).astype(dtype)
        close(fast, want, rtol={np.float32: 4e-7, np.float16: 1e-3, np.float64: 1e-15}[dtype],
              atol=1e-7)
    a = graphrt.Session(constant, EXACT).run(None, {"X": x})[0]
    b = graphrt.Session(fed, EXACT).run(None, {"X": x, "E": e})[0]
    assert a.tobytes() == b.tobytes()


def test_prelu_unidirectional():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    same(*both("PRelu", [x, np.array([0.1, 0.2, 0.3, 0.4], np.float32)], opset=16))
    same(*both("PRelu", [x, np.array([[0.1], [0.2], [-0.3]], np.float32)], opset=9))
    same(*both("PRelu", [np.arange(-3, 3, dtype=np.int64), np.array([2], np.int64)], opset=16))
    msg = fails(ErrorKind.INVALID_MODEL, "PRelu", [x[:, :1], np.ones((3, 4), np.float32)])
    assert "broadcast" in msg


# ----------------------------------------------------------------------------- variadic


FOLD = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add, "Mean": np.add}


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_variadic_broadcast_folds(op):
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal(s).astype(np.float32) for s in [(3, 1), (2, 1, 4), (4,), (1,)]]
    xs += [rng.standard_normal(s).astype(np.float32) for s in [(2, 3, 4), (1, 4), (3, 4)]]
    for k in (1, 2, 3, 4, 7):
        want = counter_sum(xs[:k], FOLD[op])
        if op == "Mean":
            want = want / np.float32(k)
        same(ours(op, xs[:k], opset=13), want)
    if op == "Sum":                 # the counter's order, not the input order, from 4 inputs
        assert counter_sum(xs[:4], np.add).tobytes() != \
            np.add(np.add(np.add(xs[0], xs[1]), xs[2]), xs[3]).tobytes()


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int8, np.uint64])
def test_max_min_types(dtype):
    a = np.array([1, 5, 3, 0], dtype=dtype)
    b = np.array([[2, 4, 3, 1]], dtype=dtype)
    for op in ("Max", "Min"):
        same(*both(op, [a, b, a[::-1].copy()], opset=13))


def test_max_min_nan_and_signed_zero():
    a = np.array([0.0, -0.0, -0.0, np.nan, 1.0, np.nan], np.float32)
    b = np.array([-0.0, 0.0, -0.0, 1.0, np.nan, np.nan], np.float32)
    for options in (None, EXACT):
        for x, y in ((a, b), (b, a)):
            hi, _ = both("Max", [x, y], opset=13, options=options)
            lo, _ = both("Min", [x, y], opset=13, options=options)
            np.testing.assert_array_equal(np.signbit(hi[:3]), [False, False, True])
            np.testing.assert_array_equal(np.signbit(lo[:3]), [True, True, True])
            assert np.isnan(hi[3:]).all() and np.isnan(lo[3:]).all()
            if options is EXACT:
                assert (bits(hi[3:]) == 0x7FC00000).all()


def test_sum_mean_float16_round_once():
    xs = [np.array([1000.0, 0.1, -3.0], np.float16), np.array([0.3, 0.2, 1.0], np.float16),
          np.array([0.3], np.float16)]
    got, _ = both("Sum", xs, opset=13)
    want = sum(x.astype(np.float32) for x in xs).astype(np.float16)
    same(got, want)
    got, _ = both("Mean", xs, opset=13)
    same(got, (sum(x.astype(np.float32) for x in xs) / np.float32(3)).astype(np.float16))


# ----------------------------------------------------------------------------- Where


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.bool_, np.uint8])
def test_where_broadcasts_three_ways(dtype):
    rng = np.random.default_rng(3)
    c = rng.random((2, 1, 4)) > 0.5
    x = (rng.standard_normal((3, 1)) * 10).astype(dtype)
    y = (rng.standard_normal((4,)) * 10).astype(dtype)
    same(*both("Where", [c, x, y], opset=16))


def test_where_strings_large_and_nan_bits():
    c = np.array([True, False])
    s = np.array(["a", "b"], dtype=object)
    same(*both("Where", [c, s, np.array(["z"], dtype=object)], opset=16))
    big = np.arange(200000, dtype=np.float32).reshape(2, 100000)
    cond = (np.arange(100000) % 3 == 0)
    same(*both("Where", [cond, big, np.float32(-1) * big[:1]], opset=16))
    payload = np.array([0x7FC00123], np.uint32).view(np.float32)
    got, _ = both("Where", [np.array([True]), payload, np.zeros(1, np.float32)], opset=16,
                  options=EXACT)
    assert bits(got)[0] == 0x7FC00123      # data movement keeps the bits


# ----------------------------------------------------------------------------- modes, plans


def test_exact_mode_matches_fast_mode_and_canonicalises_nan():
    x = np.concatenate([SPECIAL, -np.abs(SPECIAL)]).reshape(2, 15)
    for op, attrs in [("Sqrt", {}), ("Reciprocal", {}), ("Round", {}), ("HardSigmoid", {}),
                      ("LeakyRelu", {}), ("Softsign", {})]:
        model = one_node(op, [x], attrs, outs=[x.dtype])
        with np.errstate(all="ignore"):
            fast = graphrt.Session(model).run(None, {"x0": x})[0]
        exact = graphrt.Session(model, EXACT).run(None, {"x0": x})[0]
        np.testing.assert_array_equal(fast, exact)
        assert (bits(exact[np.isnan(exact)]) == 0x7FC00000).all()


_TRIG = {"Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos,
         "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh,
         "Acosh": np.arccosh, "Atanh": np.arctanh}


def _ulps(got, want):
    """|got - want| in ulps of want's type, NaN against NaN and equal infinities 0."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    same_special = (np.isnan(g) & np.isnan(w)) | (g == w)
    with np.errstate(all="ignore"):
        d = np.abs(g - w) / np.spacing(np.abs(want)).astype(np.float64)
    return np.where(same_special, 0.0, d)


@pytest.mark.parametrize("op", sorted(_TRIG))
def test_exact_trigonometric_and_hyperbolic_operators(op):
    """Exact mode takes exactmath's functions (within 0.51 ulp: tests/ops/math): float64
    within 1 ulp of numpy's libm (itself within about 0.5 ulp on these ordinary arguments);
    float32 and float16 the float64 value rounded (within 1 ulp: it is rounded twice); the
    exact functions' own bits."""
    from graphrt.kernels.math import exactmath as xm
    rng = np.random.default_rng(sorted(_TRIG).index(op))
    if op in ("Asin", "Acos", "Atanh"):
        x = np.concatenate([rng.uniform(-1, 1, 3000), [1.0, -1.0, 0.0, -0.0, 1.5, np.nan]])
    elif op == "Acosh":
        x = np.concatenate([1 + 10.0 ** rng.uniform(-12, 3, 3000), [1.0, 0.5, np.inf]])
    else:
        lim = 700.0 if op in ("Sinh", "Cosh") else 1e4
        x = np.concatenate([rng.uniform(-lim, lim, 1500), rng.uniform(-3, 3, 1500),
                            [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310]])
    fn = getattr(xm, op.lower())
    for dtype in (np.float64, np.float32, np.float16):
        xs = x.astype(dtype)
        model = one_node(op, [xs], opset=22, outs=[dtype])
        with np.errstate(all="ignore"):
            got = graphrt.Session(model, EXACT).run(None, {"x0": xs})[0]
            want = _TRIG[op](xs.astype(np.float64)).astype(dtype)
        assert got.dtype == dtype and _ulps(got, want).max() <= 1, (op, dtype)
        if dtype != np.float16:
            own = np.array([fn(v) for v in xs], dtype)
            own[np.isnan(own)] = np.nan
            assert np.array_equal(got.view(f"u{got.itemsize}"), own.view(f"u{got.itemsize}"))


def test_exact_mode_refuses_operators_without_exact_kernel():
    model = one_node("RandomUniformLike", [SPECIAL], outs=[np.float32])
    with pytest.raises(SessionError) as info:
        graphrt.Session(model, EXACT)
    assert info.value.kind == ErrorKind.EXACT_MODE_UNAVAILABLE
    assert "RandomUniformLike" in info.value.operators


def test_chain_in_place_and_constant_folding():
    """Intermediates die at their consumer (in-place candidates); a float16 Neg of a constant
    is folded at plan time (no arena there)."""
    n = helper.make_node
    c16 = helper.make_tensor("c16", TensorProto.FLOAT16, [3], np.array([1, -2, 3], np.float16)
                             .view(np.uint16).tolist(), raw=False)
    nodes = [n("Constant", [], ["c"], value=c16), n("Neg", ["c"], ["nc"]),
             n("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
             n("Abs", ["h"], ["a"]), n("Max", ["a", "nc", "h"], ["m"]),
             n("Sqrt", ["m"], ["s"]), n("Mod", ["s", "nc"], ["y"], fmod=1)]
    model = make(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 3])], opset=18)
    x = np.array([[4.0, -9.0, 0.25], [-16.0, 1.0, 2.0]], np.float32)
    got = graphrt.Session(model).run(None, {"x": x})[0]
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    close(got, want, rtol=1e-3, atol=1e-7)


# ----------------------------------------------------------------------------- errors


def test_errors_name_the_node():
    x = SPECIAL
    fails(ErrorKind.UNSUPPORTED, "Exp", [np.arange(3, dtype=np.int32)])
    fails(ErrorKind.UNSUPPORTED, "And", [x, x], outs=[np.bool_])
    fails(ErrorKind.INVALID_MODEL, "Add", [x, np.ones(4, np.float32)])   # shapes
    fails(ErrorKind.INVALID_MODEL, "Max", [x, np.ones(15, np.float64)], opset=13)
    fails(ErrorKind.INVALID_MODEL, "Gelu", [x], {"approximate": "fast"}, opset=20)
    fails(ErrorKind.INVALID_MODEL, "Mod", [x, x], {"fmod": 2})
    fails(ErrorKind.INVALID_MODEL, "BitShift", [np.ones(2, np.uint8)] * 2, {"direction": "UP"})
    fails(ErrorKind.INVALID_MODEL, "Clip", [x, np.ones(2, np.float32)], opset=13)
    fails(ErrorKind.INVALID_MODEL, "Where", [np.ones(2, np.int32), x[:2], x[:2]], opset=16,
          outs=[np.float32])
    fails(ErrorKind.INVALID_MODEL, "Pow", [x, np.ones(2, np.float32)])


def test_in_place_steps_give_the_reference_result():
    """Each intermediate dies at its consumer, so the planner lets outputs take over input 0."""
    n = helper.make_node
    f = TensorProto.FLOAT
    nodes = [n("Neg", ["x"], ["a"]), n("Max", ["a", "b"], ["m"]), n("Sum", ["m", "b", "x"], ["s"]),
             n("Mod", ["s", "b"], ["r"], fmod=1), n("HardSigmoid", ["r"], ["h"]),
             n("Clip", ["h", "lo"], ["c"]), n("PRelu", ["c", "b"], ["y"])]
    model = make(nodes, [helper.make_tensor_value_info("x", f, [2, 3, 4]),
                         helper.make_tensor_value_info("b", f, [4]),
                         helper.make_tensor_value_info("lo", f, [])],
                 [helper.make_tensor_value_info("y", f, [2, 3, 4])], opset=18)
    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32),
             "b": np.array([0.5, -1.5, 2.0, 3.0], np.float32), "lo": np.array(0.25, np.float32)}
    sess = graphrt.Session(model)
    got = sess.run(None, feeds)[0]
    close(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-6, atol=1e-7)
    plan = sess._plans._entries[0][1].plan
    assert len(plan.in_place) >= 5


def test_large_inputs_use_the_parallel_kernels():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((300, 250)).astype(np.float32)
    b = rng.standard_normal((250,)).astype(np.float32)
    same(*both("GreaterOrEqual", [a, b], opset=16))
    got = ours("Mean", [a, b, a[:1]], opset=13)
    same(got, (a + b + a[:1]) / np.float32(3))
    same(*both("Mod", [a, b], {"fmod": 1}))


def test_empty_tensors():
    e = np.zeros((0, 3), np.float32)
    same(*both("Less", [e, np.ones(3, np.float32)], opset=13))
    same(*both("Max", [np.ones((2, 0), np.float32), np.ones(1, np.float32)], opset=13))
    same(*both("Where", [np.zeros((0, 1), bool), e, np.ones(3, np.float32)], opset=16))
    same(*both("Clip", [e, np.array(0.0, np.float32)], opset=13))
    same(*both("Pow", [e, np.ones(3, np.int64)], opset=15))


def test_bfloat16_and_float8_go_through_float32():
    x = SPECIAL.astype(BF16)
    got = ours("Celu", [x], {"alpha": 2.0}, opset=12)
    want = np.where(SPECIAL > 0, SPECIAL, 2 * np.expm1(SPECIAL / 2)).astype(BF16)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2)
    got = ours("Max", [x, np.zeros(1, BF16)], opset=13)
    same(got, np.maximum(x.astype(np.float32), 0).astype(BF16))
    got = ours("Where", [SPECIAL > 0, x, x[::-1].copy()], opset=16)
    assert bits(got).tolist() == bits(np.where(SPECIAL > 0, x, x[::-1])).tolist()
    f8 = np.array([1.0, np.nan, -2.0], ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(ours("IsNaN", [f8], opset=20, outs=[np.bool_]),
                                  [False, True, False])


@pytest.mark.parametrize("shapes", [((2, 3), (3,)), ((4, 1, 2), (1, 3, 1)), ((), (5,)),
                                    ((3, 1), (3, 4)), ((2, 0), (1,))])
@pytest.mark.parametrize("op,fn", [("Mul", np.multiply), ("Sub", np.subtract),
                                   ("Equal", np.equal), ("Greater", np.greater)])
def test_tiny_integer_operands_broadcast(shapes, op, fn):
    """Integer operands of at most pointwise.SMALL elements (shape arithmetic) take the tiny
    path, one plain loop whatever the layout: numpy's results for every broadcast."""
    rng = np.random.default_rng(len(shapes[0]))
    a, b = (rng.integers(-50, 50, s).astype(np.int64) for s in shapes)
    got = ours(op, [a, b])
    np.testing.assert_array_equal(got, fn(a, b))
    assert got.dtype == fn(a, b).dtype and got.shape == fn(a, b).shape
