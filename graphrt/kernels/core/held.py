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

from ...aligned import aligned_empty

_THREADS = threading.local()


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
