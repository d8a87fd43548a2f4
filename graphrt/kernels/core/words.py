"""Elements moved as unsigned words of their width: one kernel serves every element type of
a width, and every bit (a NaN's payload included) is kept.

``numeric_word`` covers numpy's numeric, bool and complex types; ``word_of`` adds the
ml_dtypes types (bfloat16, float8, int4...), which the indexing kernels only move, never
compute with. None: numpy moves them (strings, complex128).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ... import dtypes as _dt

_WORD = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
         8: np.dtype(np.uint64)}


def numeric_word(dtype):
    """The unsigned type a numeric, bool or complex ``dtype`` is moved as, or None."""
    dtype = np.dtype(dtype)
    return _WORD.get(dtype.itemsize) if dtype.kind in "biuf" or dtype.kind == "c" else None


def word_of(dtype):
    """numeric_word, extended to the ml_dtypes types; None where numpy moves them."""
    dtype = np.dtype(dtype)
    word = numeric_word(dtype)
    if word is None and dtype in _dt.EXOTIC:
        word = np.dtype(f"u{dtype.itemsize}")
    return word


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def copy_bytes(src, dst):
    """dst[:] = src, two uint8 vectors of one length (any element type's bytes)."""
    for i in range(dst.size):
        dst[i] = src[i]


def copy_call(src: np.ndarray, dst: np.ndarray) -> tuple:
    """The compiled call copying ``src`` into ``dst`` (1-D, C-contiguous, one type and size)."""
    return copy_bytes, (src.view(np.uint8), dst.view(np.uint8))
