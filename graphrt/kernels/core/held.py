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
    holder = _of_thread() if holder is None else holder
    key = (use, np.dtype(dtype), shape)
    buf = holder.get(key)
    if buf is None:
        buf = holder[key] = aligned_empty(shape, key[1])
    return buf


def shared_buffer(dtype, shape: tuple, holder: dict | None = None, use: str = "") -> np.ndarray:
    """A buffer of ``dtype`` and ``shape`` for scratch that a step's calls alone use while
    they run, shared by every step of the holder's run state that asks with ``use``: one
    allocation, the largest asked for so far, of which this is a view (a larger request
    makes a larger one; steps that took the smaller keep it). Steps of a run state run one
    after another, so their scratch can be one buffer instead of one per shape (yolo's
    convolutions: nine buffers of 0.1-2.8 MiB)."""
    holder = _of_thread() if holder is None else holder
    key = ("shared " + use, np.dtype(dtype))
    n = int(np.prod(shape, dtype=np.int64))
    buf = holder.get(key)
    if buf is None or buf.size < n:
        buf = holder[key] = aligned_empty((n,), key[1])
    return buf[:n].reshape(shape)


def _of_thread() -> dict:
    """This Python thread's holder (for calls made and run without a run state)."""
    holder = getattr(_THREADS, "holder", None)
    if holder is None:
        holder = _THREADS.holder = {}
    return holder
