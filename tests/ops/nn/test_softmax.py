"""Softmax, LogSoftmax and Hardmax (nn/softmax.py): Softmax's kernel driven directly through
InferContext and RunContext and compared with numpy; LogSoftmax and Hardmax through
graphrt.Session, compared with onnx's reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind
from graphrt.kernels.nn.softmax import Softmax

from ...helpers import (EXACT, bits, close, expect_error, kernel_run, numba_threads, ours, rand,
                        reference)


# ----------------------------------------------------------------------------- Softmax

def softmax_reference(x, axis, coerce_2d):
    x = x.astype(np.float64)
    if x.size == 0:
        return x
    if coerce_2d:
        shape = x.shape
        x = x.reshape(int(np.prod(shape[:axis])), -1)
        axis = 1
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    y = e / e.sum(axis=axis, keepdims=True)
    return y.reshape(shape) if coerce_2d else y


@pytest.mark.parametrize("shape,attrs,opset", [
    ((2, 3, 4), {}, 13),
    ((2, 3, 4), {"axis": 1}, 13),
    ((2, 3, 4), {"axis": 0}, 13),
    ((2, 3, 4), {"axis": -2}, 13),
    ((2, 3, 4), {}, 11),                # coerced at axis 1: rows of 12
    ((2, 3, 4), {"axis": 0}, 11),
    ((2, 3, 4), {"axis": -1}, 11),
    ((5,), {}, 13),
    ((2, 0, 3), {"axis": 1}, 13),
    ((300, 257), {}, 13),               # parallel size
    ((257, 300), {"axis": 0}, 13),      # parallel, strided rows
])
def test_softmax(shape, attrs, opset):
    x = rand(shape, seed=26) * 4
    axis = attrs.get("axis", 1 if opset < 13 else -1)
    out = kernel_run(Softmax, [x], attrs, opset)
    assert out.dtype == np.float32 and out.shape == x.shape
    np.testing.assert_allclose(out, softmax_reference(x, axis % len(shape), opset < 13),
                               rtol=2e-6, atol=1e-7)


def test_softmax_threads_double_and_nan():
    x = rand((300, 257), seed=27)
    with numba_threads(1):
        one = kernel_run(Softmax, [x], {"axis": 0})
    with numba_threads(2):
        two = kernel_run(Softmax, [x], {"axis": 0})
    np.testing.assert_array_equal(bits(one), bits(two))
    d = rand((3, 4), np.float64, 28)
    np.testing.assert_allclose(kernel_run(Softmax, [d]), softmax_reference(d, 1, False), rtol=1e-14)
    y = kernel_run(Softmax, [np.array([[1.0, np.nan, 2.0], [1.0, 1.0, 1.0]], np.float32)])
    assert np.isnan(y[0]).all() and np.allclose(y[1], 1 / 3)


@pytest.mark.parametrize("exact", [False, True])
def test_softmax_long_rows_nan_infinities_and_zeros(exact):
    """Rows long enough for the vectorised maximum (197: vectors and a tail): a NaN in the
    vectors or the tail makes the whole row NaN, an infinite maximum too (inf - inf), and a
    row whose maximum is both +0 and -0 gives the reference, as does one whose maximum is its
    last element."""
    x = rand((8, 197), seed=29) * 4
    x[0, 3], x[1, 150], x[2, 196] = np.nan, np.nan, np.nan
    x[3, 90] = np.inf
    x[4] = -np.inf
    x[5, :] = -3.0
    x[5, 17], x[5, 196] = -0.0, 0.0
    x[6, 40], x[6, 41] = 0.0, -0.0
    x[6] = np.minimum(x[6], 0.0)
    x[7, 196] = 500.0       # the maximum in the tail: missed, exp(500 - m) overflows
    out = kernel_run(Softmax, [x], exact=exact)
    assert np.isnan(out[:5]).all()
    np.testing.assert_allclose(out[5:], softmax_reference(x[5:], 1, False), rtol=2e-6, atol=1e-7)
    d = x.astype(np.float64)
    assert np.isnan(kernel_run(Softmax, [d], exact=exact)[:5]).all()


def test_softmax_errors():
    assert Softmax.supports_exact            # with graphrt's own exp (exactmath.py)
    expect_error(ErrorKind.UNSUPPORTED, kernel_run, Softmax, [np.zeros((2, 3), np.int32)])
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Softmax, [np.zeros((2, 3), np.float32)],
                 {"axis": 2}, match="out of range")
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Softmax, [np.zeros((2, 3), np.float32)],
                 {"axis": -3}, opset=11)


# ----------------------------------------------------------------------------- LogSoftmax, Hardmax

@pytest.mark.parametrize("op", ["LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("attrs,opset", [({}, 13), ({"axis": 0}, 13), ({"axis": 1}, 13),
                                         ({}, 11), ({"axis": 2}, 11), ({"axis": 0}, 11)])
def test_log_softmax_hardmax(op, attrs, opset):
    x = np.random.default_rng(14).integers(0, 5, (3, 4, 5)).astype(np.float32)
    x = x + (rand((3, 4, 5), seed=15) * 0.1 if op == "LogSoftmax" else 0)
    axis = attrs.get("axis", -1 if opset >= 13 else 1)
    if opset < 13:      # the input is seen as a matrix split at axis
        want = reference(op, [x.reshape(int(np.prod(x.shape[:axis])), -1)], {"axis": 1}, 13)
        want = want.reshape(x.shape)
    else:
        want = reference(op, [x], attrs, opset)
    close(ours(op, [x], attrs, opset), want, rtol=1e-5)


def test_log_softmax_hardmax_extremes():
    x = np.array([[1000.0, 0.0, -1000.0], [1, np.nan, 2]], np.float32)
    ls = ours("LogSoftmax", [x], opset=13)
    np.testing.assert_allclose(ls[0], [0, -1000, -2000])
    assert np.isnan(ls[1]).all()
    np.testing.assert_array_equal(ours("Hardmax", [x], opset=13), [[1, 0, 0], [0, 1, 0]])
    h = np.array([[1, 3, 3]], np.float16)
    np.testing.assert_array_equal(ours("Hardmax", [h], opset=13, options=EXACT), [[0, 1, 0]])
    d = rand((4, 7), np.float64, seed=16)
    close(ours("LogSoftmax", [d], opset=13), reference("LogSoftmax", [d], opset=13), 1e-12)
    expect_error(ErrorKind.UNSUPPORTED, ours, "Hardmax", [np.ones((2, 2), np.int32)])
