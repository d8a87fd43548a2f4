"""frozen (graphrt/kernels/core/frozen.py): a stored value through LLVM's freeze, so a loop
writing an element-wise result over its operand is never compiled to masked stores (which
AMD's Zen 1-3 cores run microcoded); the values are the plain store's."""
from __future__ import annotations

import platform
import re

import numpy as np
import pytest
from numba import njit

from graphrt.kernels.core.broadcast import put
from graphrt.kernels.core.pointwise import relu_float

# a masked vector store in AT&T syntax: AVX's vmaskmov to memory, or AVX-512's {%k} store
MASKED_STORE = re.compile(r"vp?maskmov\w*\s+%[xy]mm\d+,\s*%[xy]mm\d+,\s*-?\w*\(|"
                          r"vmov\w+\s+%[xyz]mm\d+,\s*-?\w*\([^)]*\)\s*\{%k")


@njit(cache=False)
def _relu_over(y, exact):
    for j in range(y.size):
        put(y, j, relu_float(y[j]), exact)


@njit(cache=False)
def _relu_over_plain(y):
    for j in range(y.size):
        y[j] = relu_float(y[j])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("exact", [False, True])
def test_put_over_its_operand_stores_the_values(dt, exact):
    rng = np.random.default_rng(3)
    for n in (0, 1, 7, 8, 9, 31, 33, 1000):
        x = rng.standard_normal(n).astype(dt)
        if n > 8:
            x[:6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, -np.nan]
        y, want = x.copy(), x.copy()
        _relu_over(y, exact)
        _relu_over_plain(want)
        if exact:
            want[np.isnan(want)] = np.nan       # canonical
        assert y.tobytes() == want.tobytes(), n


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 assembly")
def test_put_over_its_operand_is_never_a_masked_store():
    y = np.ones(64, np.float32)
    _relu_over(y, False)
    asm = "\n".join(_relu_over.inspect_asm().values())
    assert "ymm" in asm or "zmm" in asm or "xmm" in asm       # (vectorised)
    assert MASKED_STORE.search(asm) is None
