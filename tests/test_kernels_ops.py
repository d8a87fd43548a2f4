"""Kernels of MatMul, Gemm, the views, Constant, Shape, Transpose, Concat, Cast and Softmax,
driven directly through InferContext and RunContext and compared with numpy."""
from __future__ import annotations

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numba  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from graphrt.errors import ErrorKind  # noqa: E402
from graphrt.kernels.core.base import InferContext, NodeInfo, RunContext  # noqa: E402
from graphrt.kernels.elementwise.cast import Cast  # noqa: E402
from graphrt.kernels.tensor.constants import Constant, Shape  # noqa: E402
from graphrt.kernels.tensor.layout import Concat, Transpose  # noqa: E402
from graphrt.kernels.gemm.matmul import Gemm, MatMul  # noqa: E402
from graphrt.kernels.nn.softmax import Softmax  # noqa: E402
from graphrt.kernels.tensor.views import Flatten, Identity, Reshape, Squeeze, Unsqueeze  # noqa: E402

from .helpers import NODE, expect_error, i64, rand  # noqa: E402

CANONICAL_NAN32 = 0x7FC00000


# ----------------------------------------------------------------------------- helpers

def node_of(cls, n_in, attrs=None, opset=13, n_out=1):
    return NodeInfo(NODE, cls.__name__, "", opset, dict(attrs or {}), n_in, n_out)


def infer(cls, inputs, attrs=None, opset=13, exact=False, unknown=()):
    """Build the kernel and infer; ``inputs`` are arrays (or None for an absent optional
    input); the indices in ``unknown`` have no known value."""
    node = node_of(cls, len(inputs), attrs, opset)
    kernel = cls(node)
    ctx = InferContext(node, exact,
                       [None if x is None else x.dtype for x in inputs],
                       [None if x is None else x.shape for x in inputs],
                       [None if x is None or i in unknown else x for i, x in enumerate(inputs)],
                       node.n_outputs)
    kernel.infer(ctx)
    return kernel, ctx


def run(cls, inputs, attrs=None, opset=13, exact=False):
    kernel, ctx = infer(cls, inputs, attrs, opset, exact)
    if ctx.constants[0] is not None:
        return ctx.constants[0]
    outs = [np.empty(s, d) for d, s in zip(ctx.out_dtypes, ctx.out_shapes)]
    kernel.run(RunContext(kernel.node, list(inputs), outs, ctx.prepared, exact))
    return outs[0]


def view_shape(cls, x, extra=(), attrs=None, opset=13, unknown=()):
    """The shape a view kernel states; checks the flags and that numpy can make the view."""
    kernel, ctx = infer(cls, [x, *extra], attrs, opset, unknown=unknown)
    assert cls.view_of_input and cls.supports_exact
    if ctx.needs_values:
        return None
    assert ctx.out_dtypes[0] == x.dtype
    shape = ctx.out_shapes[0]
    np.testing.assert_array_equal(x.reshape(shape).reshape(-1), x.reshape(-1))
    return shape


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


@contextlib.contextmanager
def threads(n):
    old = numba.get_num_threads()
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(old)


def sequential_matmul(a, b):
    """float32 reference, k ascending, each product and sum rounded on its own (no FMA)."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    a2 = np.broadcast_to(a2, batch + a2.shape[-2:])
    b2 = np.broadcast_to(b2, batch + b2.shape[-2:])
    acc = np.zeros(batch + (a2.shape[-2], b2.shape[-1]), np.float32)
    for k in range(a2.shape[-1]):
        acc = (acc + (a2[..., :, k:k + 1] * b2[..., k:k + 1, :]).astype(np.float32)).astype(np.float32)
    if a.ndim == 1:
        acc = acc[..., 0, :]
    if b.ndim == 1:
        acc = acc[..., 0]
    return acc


def assert_exact_bits(out, ref):
    """Bit equality, with every NaN of the reference the canonical quiet NaN in ``out``."""
    assert out.shape == ref.shape
    nan = np.isnan(ref)
    assert (bits(out)[nan] == CANONICAL_NAN32).all()
    np.testing.assert_array_equal(bits(out)[~nan], bits(ref)[~nan])


# ----------------------------------------------------------------------------- MatMul

MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((4,), (4, 5)),             # 1-D A: a row, its axis dropped
    ((3, 4), (4,)),             # 1-D B: a column, its axis dropped
    ((4,), (4,)),               # a dot product: a scalar
    ((2, 1, 3, 4), (5, 4, 6)),  # batch broadcasting
    ((4,), (2, 4, 3)),
    ((0, 3), (3, 2)),           # empty output
    ((2, 0), (0, 3)),           # K = 0: zeros
    ((2, 0, 3), (3, 4)),        # empty batch
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_fast_matches_numpy(sa, sb):
    a, b = rand(sa, seed=1), rand(sb, seed=2)
    out = run(MatMul, [a, b])
    ref = np.matmul(a, b)
    assert out.shape == ref.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES + [((30, 70), (70, 120))])
def test_matmul_exact_is_sequential_float32(sa, sb):
    a, b = rand(sa, seed=3), rand(sb, seed=4)
    assert_exact_bits(run(MatMul, [a, b], exact=True), sequential_matmul(a, b))


def test_matmul_exact_block_edges_and_threads():
    # N > JB (1024) and K > KB (64), M not a multiple of the row block; parallel work size
    a, b = rand((11, 70), seed=5), rand((70, 1030), seed=6)
    for exact in (True, False):
        with threads(1):
            one = run(MatMul, [a, b], exact=exact)
        with threads(2):
            two = run(MatMul, [a, b], exact=exact)
        np.testing.assert_array_equal(bits(one), bits(two))
        if exact:
            assert_exact_bits(two, sequential_matmul(a, b))


def test_matmul_exact_nan_is_canonical():
    a = np.array([[np.inf, 1.0], [1.0, 2.0]], np.float32)
    b = np.array([[0.0, 1.0], [1.0, 1.0]], np.float32)
    with np.errstate(invalid="ignore"):
        out = run(MatMul, [a, b], exact=True)
    assert np.isnan(out[0, 0]) and bits(out)[0, 0] == CANONICAL_NAN32
    assert out[1, 0] == 2.0 and out[1, 1] == 3.0


def test_matmul_integers_wrap_and_double():
    rng = np.random.default_rng(7)
    a = rng.integers(-2**31, 2**31, (3, 5, 4)).astype(np.int32)
    b = rng.integers(-2**31, 2**31, (4, 2)).astype(np.int32)
    np.testing.assert_array_equal(run(MatMul, [a, b]), np.matmul(a, b))
    x, y = rand((3, 7), np.float64, 8), rand((7, 2), np.float64, 9)
    np.testing.assert_allclose(run(MatMul, [x, y]), x @ y, rtol=1e-12)


def test_matmul_errors():
    f = np.ones((2, 3), np.float32)
    expect_error(ErrorKind.INVALID_MODEL, run, MatMul, [f, np.ones((4, 2), np.float32)],
                 match="[2, 3] and [4, 2]")
    expect_error(ErrorKind.INVALID_MODEL, run, MatMul,
                 [np.ones((2, 2, 3), np.float32), np.ones((3, 3, 1), np.float32)])
    expect_error(ErrorKind.INVALID_MODEL, run, MatMul, [np.ones((), np.float32), f])
    expect_error(ErrorKind.INVALID_MODEL, run, MatMul, [f, np.ones((3, 2), np.float64)])
    assert MatMul.supports_exact and not MatMul.view_of_input


# ----------------------------------------------------------------------------- Gemm

def gemm_reference(a, b, c, ta, tb, alpha, beta):
    acc = sequential_matmul(a.T if ta else a, b.T if tb else b)
    y = np.float32(alpha) * acc
    if c is not None:
        y = y + np.float32(beta) * c          # numpy: two roundings, never fused
    return y.astype(np.float32)


@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c_shape", [None, (), (5,), (3, 1), (3, 5)])
def test_gemm_matches_numpy(ta, tb, c_shape):
    m, k, n = 3, 4, 5
    a = rand((k, m) if ta else (m, k), seed=10)
    b = rand((n, k) if tb else (k, n), seed=11)
    c = None if c_shape is None else rand(c_shape, seed=12)
    attrs = dict(transA=ta, transB=tb, alpha=0.75, beta=-1.5)
    inputs = [a, b] if c is None else [a, b, c]
    fast = run(Gemm, inputs, attrs, opset=13)
    ref = gemm_reference(a, b, c, ta, tb, 0.75, -1.5)
    np.testing.assert_allclose(fast, ref, rtol=1e-5, atol=1e-5)
    assert_exact_bits(run(Gemm, inputs, attrs, opset=13, exact=True), ref)


@pytest.mark.parametrize("tb", [0, 1])
def test_gemm_exact_large_blocks_and_threads(tb):
    # M > 32 rows per packed task, N > 256 packed columns, K > 64: parallel
    m, k, n = 40, 70, 300
    a, c = rand((m, k), seed=13), rand((n,), seed=15)
    b = rand((n, k) if tb else (k, n), seed=14)
    ref = gemm_reference(a, b, c, 0, tb, 1.25, 0.5)
    outs = []
    for t in (1, 2):
        with threads(t):
            outs.append(run(Gemm, [a, b, c], dict(transB=tb, alpha=1.25, beta=0.5), exact=True))
    np.testing.assert_array_equal(bits(outs[0]), bits(outs[1]))
    assert_exact_bits(outs[0], ref)


def test_gemm_epilogue_is_not_fused_in_fast_mode():
    # K = 1, so acc = a * b rounded once whether or not the product is an FMA; then
    # y = alpha * acc + beta * c must be rounded three times, as numpy does it.
    m, n = 64, 64
    a, b, c = rand((m, 1), seed=16), rand((1, n), seed=17), rand((m, n), seed=18)
    alpha, beta = np.float32(1.1), np.float32(0.7)
    acc = (a * b).astype(np.float32)
    unfused = alpha * acc + beta * c
    fused = (alpha.astype(np.float64) * acc + (beta * c).astype(np.float64)).astype(np.float32)
    assert (bits(fused) != bits(unfused)).any()     # the test can tell the difference
    out = run(Gemm, [a, b, c], dict(alpha=float(alpha), beta=float(beta)))
    np.testing.assert_array_equal(bits(out), bits(unfused))


def test_gemm_exact_nan_and_double():
    a = np.array([[np.inf]], np.float32)
    b = np.array([[1.0]], np.float32)
    c = np.array([[-np.inf]], np.float32)
    with np.errstate(invalid="ignore"):
        out = run(Gemm, [a, b, c], exact=True)
    assert bits(out)[0, 0] == CANONICAL_NAN32
    x, y, z = rand((3, 2), np.float64, 19), rand((2, 4), np.float64, 20), rand((1, 4), np.float64, 21)
    np.testing.assert_allclose(run(Gemm, [x, y, z], dict(alpha=2.0, beta=3.0)),
                               2.0 * (x @ y) + 3.0 * z, rtol=1e-12)


def test_gemm_errors():
    a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    expect_error(ErrorKind.INVALID_MODEL, run, Gemm, [a, b], opset=9, match="C is required")
    np.testing.assert_array_equal(run(Gemm, [a, b, None], opset=11), np.full((3, 5), 4, np.float32))
    expect_error(ErrorKind.INVALID_MODEL, run, Gemm, [a, b, np.ones((2, 5), np.float32)],
                 match="does not broadcast")
    expect_error(ErrorKind.INVALID_MODEL, run, Gemm, [a, b, np.ones((1, 3, 5), np.float32)])
    expect_error(ErrorKind.INVALID_MODEL, run, Gemm, [a, b], dict(transB=1))
    expect_error(ErrorKind.INVALID_MODEL, run, Gemm, [a[None], b])
    expect_error(ErrorKind.UNSUPPORTED, run, Gemm, [a.astype(np.int32), b.astype(np.int32)])


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
    kernel, ctx = infer(Constant, [], {attr: value}, opset=13)
    out = ctx.constants[0]
    assert out.dtype == expected.dtype and out.shape == expected.shape
    assert ctx.out_dtypes[0] == expected.dtype and ctx.out_shapes[0] == expected.shape
    np.testing.assert_array_equal(out, expected)
    assert not out.flags.writeable and Constant.supports_exact


def test_constant_needs_one_value():
    expect_error(ErrorKind.INVALID_MODEL, Constant, node_of(Constant, 0, {}))
    expect_error(ErrorKind.INVALID_MODEL, Constant,
                 node_of(Constant, 0, {"value_int": 1, "value_float": 1.0}))


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
    out = run(Shape, [x], attrs, opset)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.array(expected, np.int64).reshape(-1))
    scalar = run(Shape, [np.zeros((), np.bool_)])
    assert scalar.shape == (0,) and scalar.dtype == np.int64


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
        out = run(Transpose, [x], attrs, exact=exact)
        ref = np.transpose(x, perm)
        assert out.dtype == x.dtype and out.shape == ref.shape
        np.testing.assert_array_equal(out, ref)


def test_transpose_keeps_nan_bits_and_strings():
    x = np.array([[0x7FC00001, 0xFFC00000], [1, 2]], np.uint32).view(np.float32)
    np.testing.assert_array_equal(bits(run(Transpose, [x], exact=True)), bits(x.T))
    s = np.array([["a", "bb"], ["c", "d"]], object)
    np.testing.assert_array_equal(run(Transpose, [s]), s.T)


def test_transpose_errors():
    x = np.zeros((2, 3), np.float32)
    expect_error(ErrorKind.INVALID_MODEL, run, Transpose, [x], {"perm": [0, 0]}, match="perm")
    expect_error(ErrorKind.INVALID_MODEL, run, Transpose, [x], {"perm": [0, 1, 2]})


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
    out = run(Concat, xs, {"axis": axis})
    np.testing.assert_array_equal(out, np.concatenate(xs, axis=axis))
    bs = [x > 0 for x in xs]
    np.testing.assert_array_equal(run(Concat, bs, {"axis": axis}, exact=True),
                                  np.concatenate(bs, axis=axis))


def test_concat_strings_and_errors():
    s = [np.array([["a"]], object), np.array([["b", "c"]], object)]
    np.testing.assert_array_equal(run(Concat, s, {"axis": 1}), np.array([["a", "b", "c"]], object))
    a, b = np.zeros((2, 3), np.float32), np.zeros((3, 3), np.float32)
    expect_error(ErrorKind.INVALID_MODEL, run, Concat, [a, b], {"axis": 1}, match="[2, 3], [3, 3]")
    expect_error(ErrorKind.INVALID_MODEL, run, Concat, [a, a], {"axis": 2}, match="out of range")
    expect_error(ErrorKind.INVALID_MODEL, run, Concat, [a, a[0]], {"axis": 0})
    expect_error(ErrorKind.INVALID_MODEL, run, Concat, [a, a.astype(np.float64)], {"axis": 0})
    expect_error(ErrorKind.INVALID_MODEL, Concat, node_of(Concat, 2, {}, opset=13))


# ----------------------------------------------------------------------------- Cast

CODE = {np.float32: 1, np.uint8: 2, np.int8: 3, np.int32: 6, np.int64: 7, np.bool_: 9,
        np.float16: 10, np.float64: 11}


def cast(x, to, exact=False):
    return run(Cast, [x], {"to": CODE[to]}, opset=13, exact=exact)


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
    expect_error(ErrorKind.UNSUPPORTED, run, Cast, [x], {"to": 8})       # STRING
    expect_error(ErrorKind.UNSUPPORTED, run, Cast, [x], {"to": 14})      # COMPLEX64
    expect_error(ErrorKind.INVALID_MODEL, run, Cast, [x], {"to": 0})
    expect_error(ErrorKind.INVALID_MODEL, run, Cast, [x], {})
    expect_error(ErrorKind.UNSUPPORTED, run, Cast, [np.array(["a"], object)], {"to": 1})
    assert Cast.supports_exact


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
    out = run(Softmax, [x], attrs, opset)
    assert out.dtype == np.float32 and out.shape == x.shape
    np.testing.assert_allclose(out, softmax_reference(x, axis % len(shape), opset < 13),
                               rtol=2e-6, atol=1e-7)


def test_softmax_threads_double_and_nan():
    x = rand((300, 257), seed=27)
    with threads(1):
        one = run(Softmax, [x], {"axis": 0})
    with threads(2):
        two = run(Softmax, [x], {"axis": 0})
    np.testing.assert_array_equal(bits(one), bits(two))
    d = rand((3, 4), np.float64, 28)
    np.testing.assert_allclose(run(Softmax, [d]), softmax_reference(d, 1, False), rtol=1e-14)
    y = run(Softmax, [np.array([[1.0, np.nan, 2.0], [1.0, 1.0, 1.0]], np.float32)])
    assert np.isnan(y[0]).all() and np.allclose(y[1], 1 / 3)


def test_softmax_errors():
    assert Softmax.supports_exact            # with graphrt's own exp (exactmath.py)
    expect_error(ErrorKind.UNSUPPORTED, run, Softmax, [np.zeros((2, 3), np.int32)])
    expect_error(ErrorKind.INVALID_MODEL, run, Softmax, [np.zeros((2, 3), np.float32)],
                 {"axis": 2}, match="out of range")
    expect_error(ErrorKind.INVALID_MODEL, run, Softmax, [np.zeros((2, 3), np.float32)],
                 {"axis": -3}, opset=11)
