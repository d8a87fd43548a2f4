"""The view kernels (tensor/views.py: Reshape, Identity, Flatten, Squeeze, Unsqueeze) driven
directly through InferContext: the shapes they state, checked with numpy."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt.errors import ErrorKind
from graphrt.kernels.tensor.views import Flatten, Identity, Reshape, Squeeze, Unsqueeze

from ...helpers import expect_error, i64, kernel_infer


def view_shape(cls, x, extra=(), attrs=None, opset=13, unknown=()):
    """The shape a view kernel states; checks the flags and that numpy can make the view."""
    kernel, ctx = kernel_infer(cls, [x, *extra], attrs, opset, unknown=unknown)
    assert cls.view_of_input and cls.supports_exact
    if ctx.needs_values:
        return None
    assert ctx.out_dtypes[0] == x.dtype
    shape = ctx.out_shapes[0]
    np.testing.assert_array_equal(x.reshape(shape).reshape(-1), x.reshape(-1))
    return shape


# ----------------------------------------------------------------------------- views

@pytest.mark.parametrize("shape,target,attrs,opset,expected", [
    ((2, 3, 4), [6, 4], {}, 13, (6, 4)),
    ((2, 3, 4), [-1], {}, 13, (24,)),
    ((2, 3, 4), [0, -1], {}, 13, (2, 12)),      # 0 copies the input extent
    ((2, 3, 4), [4, 0, 2], {}, 13, (4, 3, 2)),
    ((2, 3, 4), [2, 3, 4, 1], {}, 5, (2, 3, 4, 1)),
    ((0, 3), [-1, 0], {}, 13, (0, 3)),
    ((0, 3), [0, 3], {"allowzero": 1}, 14, (0, 3)),
    ((0, 3), [3, 0], {"allowzero": 1}, 14, (3, 0)),  # 0 is an extent under allowzero
    ((2, 3), [0, 3], {"allowzero": 1}, 13, (2, 3)),  # allowzero does not exist before 14
    ((), [1, 1], {}, 13, (1, 1)),
    ((1, 1), [], {}, 13, ()),
])
def test_reshape(shape, target, attrs, opset, expected):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    assert view_shape(Reshape, x, [np.array(target, np.int64)], attrs, opset) == expected


def test_reshape_needs_values_and_errors():
    x = np.zeros((2, 3), np.float32)
    assert view_shape(Reshape, x, [i64(3, 2)], unknown=(1,)) is None
    for target in ([4, -1], [5], [-1, -1], [0, -1, 0, 0], [-2, -3]):
        expect_error(ErrorKind.INVALID_INPUT, view_shape, Reshape, x, [np.array(target, np.int64)],
                     match="[2, 3]")
    expect_error(ErrorKind.INVALID_INPUT, view_shape, Reshape, np.zeros((0, 3), np.float32),
                 [i64(0, -1)])
    expect_error(ErrorKind.INVALID_INPUT, view_shape, Reshape, np.zeros((0, 3), np.float32),
                 [i64(0, -1)], {"allowzero": 1}, 14)
    expect_error(ErrorKind.INVALID_MODEL, view_shape, Reshape, x, [np.array([2.0, 3.0])])


def test_identity():
    x = np.zeros((2, 0, 3), np.bool_)
    assert view_shape(Identity, x) == (2, 0, 3)


@pytest.mark.parametrize("axis,expected", [(0, (1, 24)), (1, (2, 12)), (2, (6, 4)), (3, (24, 1)),
                                           (-1, (6, 4)), (-3, (1, 24))])
def test_flatten(axis, expected):
    x = np.zeros((2, 3, 4), np.int64)
    assert view_shape(Flatten, x, attrs={"axis": axis}, opset=11) == expected
    assert view_shape(Flatten, x, opset=1) == (2, 12)
    expect_error(ErrorKind.INVALID_MODEL, view_shape, Flatten, x, attrs={"axis": 4})
    expect_error(ErrorKind.INVALID_MODEL, view_shape, Flatten, x, attrs={"axis": -4})


def test_squeeze():
    x = np.zeros((1, 3, 1, 2), np.float32)
    assert view_shape(Squeeze, x, opset=11) == (3, 2)
    assert view_shape(Squeeze, x, opset=13) == (3, 2)
    assert view_shape(Squeeze, x, attrs={"axes": [0]}, opset=11) == (3, 1, 2)
    assert view_shape(Squeeze, x, attrs={"axes": [-2]}, opset=11) == (1, 3, 2)
    assert view_shape(Squeeze, x, [i64(2, 0)], opset=13) == (3, 2)
    assert view_shape(Squeeze, x, [i64()], opset=13) == (3, 2)
    assert view_shape(Squeeze, x, [i64(2)], opset=13, unknown=(1,)) is None
    # the attribute is not read from opset 13 on
    assert view_shape(Squeeze, x, attrs={"axes": [0]}, opset=13) == (3, 2)
    expect_error(ErrorKind.INVALID_MODEL, view_shape, Squeeze, x, [i64(1)], match="extent 3")
    expect_error(ErrorKind.INVALID_MODEL, view_shape, Squeeze, x, [i64(4)], match="out of range")
    expect_error(ErrorKind.INVALID_MODEL, view_shape, Squeeze, x, [i64(0, -4)], match="twice")


def test_unsqueeze():
    x = np.zeros((2, 3), np.float32)
    assert view_shape(Unsqueeze, x, attrs={"axes": [0]}, opset=11) == (1, 2, 3)
    assert view_shape(Unsqueeze, x, [i64(0, 3)], opset=13) == (1, 2, 3, 1)
    assert view_shape(Unsqueeze, x, [i64(-1)], opset=13) == (2, 3, 1)   # of the output rank
    assert view_shape(Unsqueeze, x, [i64(1, -2)], opset=13) == (2, 1, 1, 3)
    assert view_shape(Unsqueeze, np.zeros((), np.float32), [i64(0)], opset=13) == (1,)
    assert view_shape(Unsqueeze, x, [i64(0)], opset=13, unknown=(1,)) is None
    expect_error(ErrorKind.INVALID_MODEL, view_shape, Unsqueeze, x, [i64(3)], match="out of range")
    expect_error(ErrorKind.INVALID_MODEL, view_shape, Unsqueeze, x, [i64(-4)])
    expect_error(ErrorKind.INVALID_MODEL, view_shape, Unsqueeze, x, [i64(1, -3)], match="twice")
    expect_error(ErrorKind.INVALID_MODEL, view_shape, Unsqueeze, x, opset=11)
    expect_error(ErrorKind.INVALID_MODEL, view_shape, Unsqueeze, x, opset=13)
