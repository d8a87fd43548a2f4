"""The Transpose and Concat kernels (tensor/layout.py) driven directly through InferContext
and RunContext and compared with numpy."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt.errors import ErrorKind
from graphrt.kernels.tensor.layout import Concat, Transpose

from ...helpers import bits, expect_error, kernel_node, kernel_run, rand


# ----------------------------------------------------------------------------- Transpose

@pytest.mark.parametrize("shape,perm", [
    ((), None),
    ((5,), None),
    ((3, 4), None),
    ((2, 3, 4), [1, 0, 2]),
    ((2, 3, 4), [2, 0, 1]),
    ((2, 1, 3, 4), [3, 1, 2, 0]),
    ((2, 0, 3), [2, 1, 0]),
    ((1, 1), None),
    ((1, 3, 1, 2), [3, 0, 2, 1]),
    ((300, 301), [1, 0]),               # parallel size
])
@pytest.mark.parametrize("dtype", [np.float32, np.bool_])
def test_transpose(shape, perm, dtype):
    x = (np.random.default_rng(1).standard_normal(shape) > 0).astype(dtype) if dtype == np.bool_ \
        else rand(shape, dtype, 22)
    attrs = {} if perm is None else {"perm": perm}
    for exact in (False, True):
        out = kernel_run(Transpose, [x], attrs, exact=exact)
        ref = np.transpose(x, perm)
        assert out.dtype == x.dtype and out.shape == ref.shape
        np.testing.assert_array_equal(out, ref)


def test_transpose_keeps_nan_bits_and_strings():
    x = np.array([[0x7FC00001, 0xFFC00000], [1, 2]], np.uint32).view(np.float32)
    np.testing.assert_array_equal(bits(kernel_run(Transpose, [x], exact=True)), bits(x.T))
    s = np.array([["a", "bb"], ["c", "d"]], object)
    np.testing.assert_array_equal(kernel_run(Transpose, [s]), s.T)


def test_transpose_errors():
    x = np.zeros((2, 3), np.float32)
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Transpose, [x], {"perm": [0, 0]},
                 match="perm")
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Transpose, [x], {"perm": [0, 1, 2]})


# ----------------------------------------------------------------------------- Concat

@pytest.mark.parametrize("shapes,axis", [
    ([(2, 3), (2, 5)], 1),
    ([(2, 3), (4, 3), (1, 3)], 0),
    ([(2, 3, 4), (2, 1, 4)], -2),
    ([(2, 3), (2, 0), (2, 2)], -1),     # a zero-size input
    ([(0, 3), (0, 2)], 1),              # an empty output
    ([(3,)], 0),
    ([(200, 300), (200, 100)], 1),      # parallel size
])
def test_concat(shapes, axis):
    xs = [rand(s, seed=i) for i, s in enumerate(shapes)]
    out = kernel_run(Concat, xs, {"axis": axis})
    np.testing.assert_array_equal(out, np.concatenate(xs, axis=axis))
    bs = [x > 0 for x in xs]
    np.testing.assert_array_equal(kernel_run(Concat, bs, {"axis": axis}, exact=True),
                                  np.concatenate(bs, axis=axis))


def test_concat_strings_and_errors():
    s = [np.array([["a"]], object), np.array([["b", "c"]], object)]
    np.testing.assert_array_equal(kernel_run(Concat, s, {"axis": 1}),
                                  np.array([["a", "b", "c"]], object))
    a, b = np.zeros((2, 3), np.float32), np.zeros((3, 3), np.float32)
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Concat, [a, b], {"axis": 1},
                 match="[2, 3], [3, 3]")
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Concat, [a, a], {"axis": 2},
                 match="out of range")
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Concat, [a, a[0]], {"axis": 0})
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Concat, [a, a.astype(np.float64)],
                 {"axis": 0})
    expect_error(ErrorKind.INVALID_MODEL, Concat, kernel_node(Concat, 2, {}, opset=13))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [7, 4800])
def test_moves_of_short_rows(threads, rows):
    """Rows of a few elements (a detector head: Split 2 + 2 + 21 along the last axis, Concat
    back, Transpose of a 4-D head), a task moving many whole rows: serial, and parallel
    once the tensor passes PARALLEL_MIN; every element where numpy puts it, NaN payloads
    included."""
    import graphrt
    from ...helpers import one_node
    x = rand((1, rows, 25), np.float32, seed=rows)
    x.view(np.uint32)[0, :3, 4] = 0x7FC00123                     # NaNs with a payload
    opts = graphrt.SessionOptions(intra_op_threads=threads)
    parts = graphrt.Session(one_node("Split", [x, np.array([2, 2, 21], np.int64)], {"axis": 2},
                                     13, n_out=3, consts=[1]), opts).run(None, {"x0": x})
    for got, want in zip(parts, np.split(x, [2, 4], axis=2)):
        assert np.array_equal(bits(got), bits(want))
    joined = graphrt.Session(one_node("Concat", parts, {"axis": 2}, 13), opts).run(
        None, {f"x{i}": p for i, p in enumerate(parts)})[0]
    assert np.array_equal(bits(joined), bits(x))
    # a head's transpose (its axes merge into two), and one whose rows step over two outer
    # axes (a task's rows carry from one to the next)
    for y, perm in ((x.reshape(1, 25, rows), [0, 2, 1]), (x.reshape(1, 5, 5, rows), [0, 2, 1, 3])):
        t = graphrt.Session(one_node("Transpose", [y], {"perm": perm}, 13), opts).run(
            None, {"x0": y})[0]
        assert np.array_equal(bits(t), bits(np.transpose(y, perm)))
