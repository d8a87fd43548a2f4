"""Einsum through graphrt.Session, compared with onnx's reference evaluator; exact mode
against a sequential float32 sum."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind, SessionOptions

from ...helpers import EXACT, check, counter_sum, fails, rand, run


# ----------------------------------------------------------------------------- Einsum

EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),             # B read transposed (packed)
    ("ji,jk", [(4, 3), (4, 5)]),                 # A read transposed, implicit output
    ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]),    # output reordered
    ("bhqd,bkhd->bhqk", [(2, 3, 4, 8), (2, 6, 3, 8)]),   # B copied into order
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),  # broadcast ellipsis: generic step
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->", [(3, 4)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ijk,jl,lm->im", [(2, 3, 4), (3, 5), (5, 6)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ("iij->ji", [(3, 3, 2)]),
    ("ij, ij -> ij", [(3, 4), (3, 4)]),
    ("ij,jk", [(0, 3), (3, 2)]),
    ("ij->ij", [(2, 3)]),
    ("->", [()]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES)
def test_einsum(eq, shapes):
    xs = [rand(s, seed=i) for i, s in enumerate(shapes)]
    check("Einsum", xs, {"equation": eq}, opset=12, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int8, np.uint16, np.float16])
def test_einsum_types(dtype):
    for eq, shapes in (("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->j", [(3, 4)])):
        xs = [(rand(s, seed=i) * 4).astype(dtype) for i, s in enumerate(shapes)]
        tol = 2e-3 if dtype == np.float16 else 1e-6
        check("Einsum", xs, {"equation": eq}, opset=12, rtol=tol, atol=tol)


def test_einsum_exact_orders():
    """A matrix product: k ascending (the product kernel's order); a generic contraction:
    blocks of 8 terms left to right, block sums by the binary counter."""
    a, b = rand((5, 70)), rand((70, 3), seed=1)
    got = run("Einsum", [a, b], {"equation": "ij,jk->ik"}, 12, options=EXACT)[0]
    acc = np.zeros((5, 3), np.float32)
    for k in range(70):
        acc = (acc + (a[:, k:k + 1] * b[k:k + 1, :]).astype(np.float32)).astype(np.float32)
    np.testing.assert_array_equal(got, acc)
    got = run("Einsum", [a], {"equation": "ij->i"}, 12, options=EXACT)[0]
    blocks = []
    for k0 in range(0, 70, 8):
        part = a[:, k0]
        for k in range(k0 + 1, min(70, k0 + 8)):
            part = (part + a[:, k]).astype(np.float32)
        blocks.append(part)
    np.testing.assert_array_equal(got, counter_sum(blocks))


def test_einsum_errors():
    a, b = rand((2, 3)), rand((4, 5))
    fails(ErrorKind.INVALID_MODEL, "Einsum", [a, b], {"equation": "ij,jk->ik"}, 12)
    fails(ErrorKind.INVALID_MODEL, "Einsum", [a], {"equation": "ij,jk->ik"}, 12)
    fails(ErrorKind.INVALID_MODEL, "Einsum", [a], {"equation": "ijk->i"}, 12)
    fails(ErrorKind.INVALID_MODEL, "Einsum", [a], {"equation": "ij->k"}, 12)
    fails(ErrorKind.INVALID_MODEL, "Einsum", [a], {"equation": "i1->i"}, 12)
    fails(ErrorKind.INVALID_MODEL, "Einsum", [a, b.astype(np.float64)],
          {"equation": "ij,kl"}, 12)


def test_einsum_generic_contraction_in_parallel_same_bits():
    """Large enough for the parallel variant (its prange loop index was reassigned, which
    numba's parfor pass refuses): the same bits at 1 and 2 threads, in both modes."""
    a = rand((300, 40, 50), seed=4)
    got = [run("Einsum", [a], {"equation": "ijk->i"}, 12, options=SessionOptions(
        mode=mode, intra_op_threads=n))[0] for mode in ("exact", "fast") for n in (1, 2)]
    for g in got[1:]:
        np.testing.assert_array_equal(g.view(np.int32), got[0].view(np.int32))
    want = a.astype(np.float64).sum(axis=(1, 2))
    scale = np.abs(a.astype(np.float64)).sum(axis=(1, 2))     # the summation bound's sum |v|
    assert (np.abs(got[0] - want) <= 1e-6 * scale).all()
