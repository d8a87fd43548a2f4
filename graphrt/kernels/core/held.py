"""Scratch kept from run to run: one buffer per (element type, shape) in a holder dict.

Kernels whose scratch is too large or too often needed to take from the arena on every call
(the products' tile and packing scratch) keep it in a holder. A run state has one holder for
all its steps (``RunContext.held``): its steps run one after another and one thread runs the
state at a time, so calls made once and replayed on later runs (OpKernel.jit_calls) may hold
its buffers whichever thread replays them. A call made and run at once, without a run state,
takes the holder of its Python thread instead. Subgraph bodies keep their own plan and run
state in a run state's holder too (subgraph.Body.run_into), keyed by the body.
"""
from __future__ import annotations

import threading

import numpy as np

_THREADS = threading.local()

ALIGN = 64      # a cache line, and one AVX-512 vector


def aligned_bytes(n: int) -> np.ndarray:
    """A uint8 array of ``n`` bytes whose data pointer is a multiple of ALIGN (a vector
    kernel's loads and stores that straddle two cache lines cost it up to twice the time:
    a misaligned state vector made a recurrence's step product 3.8 µs instead of 2.3)."""
    raw = np.empty(n + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start:start + n]


def aligned_empty(shape, dtype) -> np.ndarray:
    """np.empty(shape, dtype) with its data at a multiple of ALIGN."""
    dt = np.dtype(dtype)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
    n = 1
    for d in shape:
        n *= int(d)
    return aligned_bytes(n * dt.itemsize).view(dt).reshape(shape)


def aligned_copy(a, dtype=None) -> np.ndarray:
    """A C-contiguous copy of ``a`` (in ``dtype`` when given) at a multiple of ALIGN: for
    arrays made once per plan (transposed or packed weights) that kernels stream with
    vector loads."""
    a = np.asarray(a)
    out = aligned_empty(a.shape, a.dtype if dtype is None else dtype)
    np.copyto(out, a, casting="unsafe")
    return out


def held_buffer(dtype, shape: tuple, holder: dict | None = None, use: str = "") -> np.ndarray:
    """The uninitialised buffer of ``dtype`` and ``shape`` kept in ``holder`` (this Python
    thread's holder when None), made at the first request; ``use`` keeps a kernel's buffers
    apart from others of the same type and shape that its own calls take at the same time
    (the products' scratch)."""
    if holder is None:
        holder = getattr(_THREADS, "holder", None)
        if holder is None:
            holder = _THREADS.holder = {}
    key = (use, np.dtype(dtype), shape)
    buf = holder.get(key)
    if buf is None:
        buf = holder[key] = aligned_empty(shape, key[1])
    return buf
