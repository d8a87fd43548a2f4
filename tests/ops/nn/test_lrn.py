"""LRN through graphrt.Session, compared with a float64 numpy oracle."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind

from ...helpers import EXACT, close, expect_error, ours, rand


# ----------------------------------------------------------------------------- LRN

def lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    x64 = x.astype(np.float64)
    sq = np.zeros_like(x64)
    c = x.shape[1]
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c, i + size // 2 + 1)
        sq[:, i] = (x64[:, lo:hi] ** 2).sum(axis=1)
    return (x64 / (bias + alpha / size * sq) ** beta).astype(x.dtype)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_lrn(size):
    x = rand((2, 6, 5, 4), seed=30)
    attrs = {"size": size, "alpha": 0.3, "beta": 0.7, "bias": 1.5}
    close(ours("LRN", [x], attrs), lrn(x, size, 0.3, 0.7, 1.5), 1e-5, 1e-6)


def test_lrn_types_and_errors():
    x = rand((2, 5, 3), np.float64, 31)
    close(ours("LRN", [x], {"size": 3}), lrn(x, 3), 1e-12, 1e-12)
    close(ours("LRN", [x.astype(np.float16)], {"size": 3}), lrn(x, 3).astype(np.float16),
          2e-3, 2e-3)
    expect_error(ErrorKind.INVALID_MODEL, ours, "LRN", [x], match="size")
    # exact mode: graphrt's own pow, the same sum order; close to the fast (libm) result
    close(ours("LRN", [x], {"size": 3}, options=EXACT), lrn(x, 3), 1e-12, 1e-12)
