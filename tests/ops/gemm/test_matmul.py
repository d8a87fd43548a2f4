"""The MatMul and Gemm kernels (gemm/matmul.py) driven directly through InferContext and
RunContext: fast mode against numpy, exact mode bit for bit against a sequential float32
product."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from graphrt.errors import ErrorKind
from graphrt.kernels.gemm.matmul import Gemm, MatMul

from graphrt.kernels.core.base import RunContext

from ...helpers import (CANONICAL_NAN32, bits, expect_error, kernel_infer, kernel_run,
                       numba_threads, rand)


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
    out = kernel_run(MatMul, [a, b])
    ref = np.matmul(a, b)
    assert out.shape == ref.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES + [((30, 70), (70, 120))])
def test_matmul_exact_is_sequential_float32(sa, sb):
    a, b = rand(sa, seed=3), rand(sb, seed=4)
    assert_exact_bits(kernel_run(MatMul, [a, b], exact=True), sequential_matmul(a, b))


def test_matmul_exact_block_edges_and_threads():
    # N > JB (1024) and K > KB (64), M not a multiple of the row block; parallel work size
    a, b = rand((11, 70), seed=5), rand((70, 1030), seed=6)
    for exact in (True, False):
        with numba_threads(1):
            one = kernel_run(MatMul, [a, b], exact=exact)
        with numba_threads(2):
            two = kernel_run(MatMul, [a, b], exact=exact)
        np.testing.assert_array_equal(bits(one), bits(two))
        if exact:
            assert_exact_bits(two, sequential_matmul(a, b))


def test_matmul_exact_nan_is_canonical():
    a = np.array([[np.inf, 1.0], [1.0, 2.0]], np.float32)
    b = np.array([[0.0, 1.0], [1.0, 1.0]], np.float32)
    with np.errstate(invalid="ignore"):
        out = kernel_run(MatMul, [a, b], exact=True)
    assert np.isnan(out[0, 0]) and bits(out)[0, 0] == CANONICAL_NAN32
    assert out[1, 0] == 2.0 and out[1, 1] == 3.0


def test_matmul_integers_wrap_and_double():
    rng = np.random.default_rng(7)
    a = rng.integers(-2**31, 2**31, (3, 5, 4)).astype(np.int32)
    b = rng.integers(-2**31, 2**31, (4, 2)).astype(np.int32)
    np.testing.assert_array_equal(kernel_run(MatMul, [a, b]), np.matmul(a, b))
    x, y = rand((3, 7), np.float64, 8), rand((7, 2), np.float64, 9)
    np.testing.assert_allclose(kernel_run(MatMul, [x, y]), x @ y, rtol=1e-12)


def test_matmul_errors():
    f = np.ones((2, 3), np.float32)
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, MatMul, [f, np.ones((4, 2), np.float32)],
                 match="[2, 3] and [4, 2]")
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, MatMul,
                 [np.ones((2, 2, 3), np.float32), np.ones((3, 3, 1), np.float32)])
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, MatMul, [np.ones((), np.float32), f])
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, MatMul, [f, np.ones((3, 2), np.float64)])
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
    fast = kernel_run(Gemm, inputs, attrs, opset=13)
    ref = gemm_reference(a, b, c, ta, tb, 0.75, -1.5)
    np.testing.assert_allclose(fast, ref, rtol=1e-5, atol=1e-5)
    assert_exact_bits(kernel_run(Gemm, inputs, attrs, opset=13, exact=True), ref)


@pytest.mark.parametrize("tb", [0, 1])
def test_gemm_exact_large_blocks_and_threads(tb):
    # M > 32 rows per packed task, N > 256 packed columns, K > 64: parallel
    m, k, n = 40, 70, 300
    a, c = rand((m, k), seed=13), rand((n,), seed=15)
    b = rand((n, k) if tb else (k, n), seed=14)
    ref = gemm_reference(a, b, c, 0, tb, 1.25, 0.5)
    outs = []
    for t in (1, 2):
        with numba_threads(t):
            outs.append(kernel_run(Gemm, [a, b, c], dict(transB=tb, alpha=1.25, beta=0.5),
                                   exact=True))
    np.testing.assert_array_equal(bits(outs[0]), bits(outs[1]))
    assert_exact_bits(outs[0], ref)


@pytest.mark.parametrize("m", [1, 3, 5])
@pytest.mark.parametrize("exact", [False, True])
def test_gemm_constant_transposed_b_gives_the_bits_of_a_run_time_b(m, exact):
    """A constant B with transB=1 is laid out k-major once per plan (few rows: every
    column's chain advanced together); a B known at run time only is read as it is."""
    k, n = 300, 70
    a, b, c = rand((m, k), seed=21), rand((n, k), seed=22), rand((n,), seed=23)
    outs = []
    for unknown in ((), (1,)):
        kernel, ctx = kernel_infer(Gemm, [a, b, c], dict(transB=1), exact=exact,
                                   unknown=unknown)
        out = np.empty((m, n), np.float32)
        kernel.run(RunContext(kernel.node, [a, b, c], [out], ctx.prepared, exact))
        outs.append(out)
    np.testing.assert_array_equal(bits(outs[0]), bits(outs[1]))
    if exact:
        assert_exact_bits(outs[0], gemm_reference(a, b, c, 0, 1, 1.0, 1.0))
    else:
        np.testing.assert_allclose(outs[0], a @ b.T + c, rtol=1e-5, atol=1e-5)


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
    out = kernel_run(Gemm, [a, b, c], dict(alpha=float(alpha), beta=float(beta)))
    np.testing.assert_array_equal(bits(out), bits(unfused))


def test_gemm_exact_nan_and_double():
    a = np.array([[np.inf]], np.float32)
    b = np.array([[1.0]], np.float32)
    c = np.array([[-np.inf]], np.float32)
    with np.errstate(invalid="ignore"):
        out = kernel_run(Gemm, [a, b, c], exact=True)
    assert bits(out)[0, 0] == CANONICAL_NAN32
    x, y, z = rand((3, 2), np.float64, 19), rand((2, 4), np.float64, 20), rand((1, 4), np.float64, 21)
    np.testing.assert_allclose(kernel_run(Gemm, [x, y, z], dict(alpha=2.0, beta=3.0)),
                               2.0 * (x @ y) + 3.0 * z, rtol=1e-12)


def test_gemm_errors():
    a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Gemm, [a, b], opset=9, match="C is required")
    np.testing.assert_array_equal(kernel_run(Gemm, [a, b, None], opset=11),
                                  np.full((3, 5), 4, np.float32))
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Gemm, [a, b, np.ones((2, 5), np.float32)],
                 match="does not broadcast")
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Gemm, [a, b, np.ones((1, 3, 5), np.float32)])
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Gemm, [a, b], dict(transB=1))
    expect_error(ErrorKind.INVALID_MODEL, kernel_run, Gemm, [a[None], b])
    expect_error(ErrorKind.UNSUPPORTED, kernel_run, Gemm, [a.astype(np.int32), b.astype(np.int32)])


@pytest.mark.parametrize("half", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("unknown", [(), (1,)])
def test_gemm_half_is_float32_rounded_once(half, unknown):
    """float16/bfloat16 Gemm (what float16 converters leave of a Linear layer): the float32
    product and epilogue of the exactly widened operands, rounded once; a constant
    transposed B (laid out k-major in float32) gives the bits of one known at run time."""
    m, k, n = 5, 40, 24
    a, b, c = (rand(s, seed=30 + i).astype(half) for i, s in enumerate([(m, k), (n, k), (n,)]))
    wide = [x.astype(np.float32) for x in (a, b, c)]
    want = gemm_reference(*wide, 0, 1, 0.5, 2.0).astype(half)
    attrs = dict(transB=1, alpha=0.5, beta=2.0)
    kernel, ctx = kernel_infer(Gemm, [a, b, c], attrs, exact=True, unknown=unknown)
    out = np.empty((m, n), half)
    kernel.run(RunContext(kernel.node, [a, b, c], [out], ctx.prepared, True))
    np.testing.assert_array_equal(bits(out), bits(want))
    fast = kernel_run(Gemm, [a, b, c], attrs)
    assert fast.dtype == half
    # fast mode may contract the float32 chain: one rounding step of the half type apart
    w32 = want.astype(np.float32)
    eps = float(ml_dtypes.finfo(half).eps)
    np.testing.assert_allclose(fast.astype(np.float32), w32, rtol=eps,
                               atol=eps * float(np.abs(w32).max()))
