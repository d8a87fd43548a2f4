"""Memory whose data starts on a cache line (64 bytes, one AVX-512 vector).

A vector kernel's loads and stores that straddle two cache lines cost it up to twice the
time (a misaligned state vector made a recurrence's step product 3.8 µs instead of 2.3), and
numpy's own allocations are only 16-byte aligned: the slab, the arena, held scratch, weights
laid out per plan and the model's initializers are allocated here.
"""
from __future__ import annotations

import functools
import math

import numpy as np

ALIGN = 64


def aligned_bytes(n: int) -> np.ndarray:
    """A uint8 array of ``n`` bytes whose data pointer is a multiple of ALIGN."""
    raw = np.empty(n + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start:start + n]


def aligned_empty(shape, dtype) -> np.ndarray:
    """np.empty(shape, dtype) with its data at a multiple of ALIGN."""
    dt = np.dtype(dtype)
    shape = tuple(map(int, shape)) if isinstance(shape, (tuple, list)) else (int(shape),)
    return aligned_bytes(math.prod(shape) * dt.itemsize).view(dt).reshape(shape)


def aligned_copy(a, dtype=None) -> np.ndarray:
    """A C-contiguous copy of ``a`` (in ``dtype`` when given) at a multiple of ALIGN: for
    arrays made once per plan (transposed or packed weights) that kernels stream with
    vector loads. (Object arrays, e.g. strings, are copied as numpy allocates them.)"""
    a = np.asarray(a)
    dt = a.dtype if dtype is None else np.dtype(dtype)
    if dt.hasobject:
        return np.array(a, dtype=dt, copy=True, order="C")
    out = aligned_empty(a.shape, dt)
    np.copyto(out, a, casting="unsafe")
    return out


@functools.lru_cache(maxsize=None)
def _malloc_trim():
    try:
        import ctypes
        import ctypes.util
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):       # not glibc: nothing to call
        return None


def return_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's malloc_trim; elsewhere
    nothing). Called once a session is made: the model's arrays a session lets go (the
    protobuf's, a product's weights it keeps laid out for itself) sit in the heap, and
    glibc keeps them, because the model file's bytes, freed before, raised its threshold for
    giving memory back to their size (bert: 15 MiB of the process kept otherwise)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
