"""Cast's kernel (elementwise/cast.py) between numpy's types, driven directly through
InferContext and RunContext and compared with numpy."""
from __future__ import annotations

import numpy as np

from graphrt.errors import ErrorKind
from graphrt.kernels.elementwise.cast import Cast

from ...helpers import CANONICAL_NAN32, bits, expect_error, kernel_run, rand


# ----------------------------------------------------------------------------- Cast

CODE = {np.float32: 1, np.uint8: 2, np.int8: 3, np.int32: 6, np.int64: 7, np.bool_: 9,
        np.float16: 10, np.float64: 11}


def cast(x, to, exact=False):
    return kernel_run(Cast, [x], {"to": CODE[to]}, opset=13, exact=exact)


def test_cast_float_to_int_truncates_and_saturates():
    x = np.array([1.9, -1.9, 0.5, -0.5, 3e9, -3e9, np.inf, -np.inf, np.nan, 2147483520.0],
                 np.float32)
    expected = np.array([1, -1, 0, 0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 0, 2147483520],
                        np.int32)
    np.testing.assert_array_equal(cast(x, np.int32), expected)
    with np.errstate(over="ignore"):
        h = x.astype(np.float16)    # numpy path, same rules
    np.testing.assert_array_equal(cast(h, np.int8),
                                  np.array([1, -1, 0, 0, 127, -128, 127, -128, 0, 127], np.int8))
    np.testing.assert_array_equal(cast(np.array([-1.5, 300.0, 255.9]), np.uint8),
                                  np.array([0, 255, 255], np.uint8))


def test_cast_rounding_matches_numpy():
    x = rand(1000, np.float64, 23) * 1e3
    np.testing.assert_array_equal(bits(cast(x, np.float32)), bits(x.astype(np.float32)))
    big = np.random.default_rng(24).integers(-2**62, 2**62, 1000)
    np.testing.assert_array_equal(cast(big, np.float32), big.astype(np.float32))
    np.testing.assert_array_equal(cast(big, np.int32), big.astype(np.int32))   # wraps
    f = rand(100, np.float32, 25)
    np.testing.assert_array_equal(cast(f, np.float16), f.astype(np.float16))
    np.testing.assert_array_equal(cast(f.astype(np.float16), np.float32),
                                  f.astype(np.float16).astype(np.float32))


def test_cast_bool_and_same_type():
    x = np.array([0.0, -0.0, 2.0, np.nan, -1e-30], np.float32)
    np.testing.assert_array_equal(cast(x, np.bool_), np.array([0, 0, 1, 1, 1], bool))
    b = np.array([True, False, True])
    np.testing.assert_array_equal(cast(b, np.float32), np.array([1, 0, 1], np.float32))
    np.testing.assert_array_equal(cast(b, np.bool_), b)
    odd_nan = np.array([0x7FC00001, 5], np.uint32).view(np.float32)
    np.testing.assert_array_equal(bits(cast(odd_nan, np.float32, exact=True)), bits(odd_nan))
    empty = cast(np.zeros((0, 3), np.int64), np.float32)
    assert empty.shape == (0, 3) and empty.dtype == np.float32


def test_cast_exact_nan_is_canonical():
    x = np.array([0xFFF8000000000001, 0x7FF0000000000001, 0], np.uint64).view(np.float64)
    out = cast(x, np.float32, exact=True)
    np.testing.assert_array_equal(bits(out), np.array([CANONICAL_NAN32, CANONICAL_NAN32, 0], np.uint32))


def test_cast_unsupported():
    x = np.zeros(2, np.float32)
    expect_error(ErrorKind.UNSUPPORTED, kernel_run, Cast, [x], {"to": 8})       # STRING
    expect_error(ErrorKind.UNSUPPORTED, kernel_run, Cast, [x], {"to": 14})      # COMPLEX64
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Cast, [x], {"to": 0})
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Cast, [x], {})
    expect_error(ErrorKind.UNSUPPORTED, kernel_run, Cast, [np.array(["a"], object)], {"to": 1})
    assert Cast.supports_exact
