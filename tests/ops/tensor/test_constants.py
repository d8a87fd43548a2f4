"""The Constant and Shape kernels (tensor/constants.py) driven directly through InferContext
and RunContext and compared with numpy."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt.errors import ErrorKind
from graphrt.kernels.tensor.constants import Constant, Shape

from ...helpers import expect_error, kernel_infer, kernel_node, kernel_run


# ----------------------------------------------------------------------------- constants

@pytest.mark.parametrize("attr,value,expected", [
    ("value", np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(6, dtype=np.int32).reshape(2, 3)),
    ("sparse_value", np.array([0.0, 2.0], np.float64), np.array([0.0, 2.0])),
    ("value_float", 1.5, np.array(1.5, np.float32)),
    ("value_floats", [1.0, 2.5], np.array([1.0, 2.5], np.float32)),
    ("value_int", 7, np.array(7, np.int64)),
    ("value_ints", [3, -1], np.array([3, -1], np.int64)),
    ("value_ints", [], np.zeros(0, np.int64)),
    ("value_string", "hi", np.array("hi", object)),
    ("value_strings", ["a", "b"], np.array(["a", "b"], object)),
])
def test_constant(attr, value, expected):
    kernel, ctx = kernel_infer(Constant, [], {attr: value}, opset=13)
    out = ctx.constants[0]
    assert out.dtype == expected.dtype and out.shape == expected.shape
    assert ctx.out_dtypes[0] == expected.dtype and ctx.out_shapes[0] == expected.shape
    np.testing.assert_array_equal(out, expected)
    # writeable, as initializers are: a read-only array would be a numba type of its own
    assert out.flags.writeable and Constant.supports_exact


def test_constant_needs_one_value():
    expect_error(ErrorKind.INVALID_MODEL, Constant, kernel_node(Constant, 0, {}))
    expect_error(ErrorKind.INVALID_MODEL, Constant,
                 kernel_node(Constant, 0, {"value_int": 1, "value_float": 1.0}))


@pytest.mark.parametrize("attrs,opset,expected", [
    ({}, 13, [2, 3, 4, 5]),
    ({"start": 1}, 13, [2, 3, 4, 5]),           # start/end exist from opset 15
    ({"start": 1}, 15, [3, 4, 5]),
    ({"start": -2}, 15, [4, 5]),
    ({"end": -1}, 15, [2, 3, 4]),
    ({"start": -10, "end": 10}, 15, [2, 3, 4, 5]),  # clamped
    ({"start": 3, "end": 1}, 15, []),
])
def test_shape(attrs, opset, expected):
    x = np.zeros((2, 3, 4, 5), np.float32)
    out = kernel_run(Shape, [x], attrs, opset)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.array(expected, np.int64).reshape(-1))
    scalar = kernel_run(Shape, [np.zeros((), np.bool_)])
    assert scalar.shape == (0,) and scalar.dtype == np.int64
