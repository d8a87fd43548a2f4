"""Runs of elements copied or zeroed, for kernels that move data in short pieces (im2col,
pooling rows, transposes).

dst[d0 + j] = src[s0 + j * step] for 0 <= j < n, and dst[d0 + j] = 0 for 0 <= j < n.

The indices are unsigned on purpose: numba wraps a negative signed index around (adds the
length), and that check, which LLVM cannot drop when it cannot prove the index non-negative,
keeps these loops scalar. With unsigned indices they vectorise (about ten times faster for
runs of 56 float32). Callers pass n <= 0 for nothing to do.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def copy_run(dst, d0, src, s0, n, step):
    if n <= 0:
        return
    d = np.uint64(d0)
    s = np.uint64(s0)
    if step == 1:
        for j in range(np.uint64(n)):
            dst[d + j] = src[s + j]
    else:
        st = np.uint64(step)
        for j in range(np.uint64(n)):
            dst[d + j] = src[s + j * st]


@njit(cache=True, nogil=True)
def zero_run(dst, d0, n):
    if n <= 0:
        return
    d = np.uint64(d0)
    for j in range(np.uint64(n)):
        dst[d + j] = 0
