"""Shape logic for element-wise kernels (plain Python, run once per plan).

Numpy broadcasting: shapes are right-aligned; each output extent is the common extent, an
input extent of 1 repeats. An input is then read with stride 0 along repeated axes.
Adjacent axes that every operand walks contiguously are merged, so kernels see few axes.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from .frozen import frozen

PARALLEL_MIN = 1 << 16      # elements: below this a parallel launch costs more than it saves
BLOCK = 1 << 14             # elements per parallel task along the inner axis


def broadcast_shape(shapes, fail) -> tuple:
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        ext = 1
        for s in shapes:
            d = s[axis - rank + len(s)] if axis - rank + len(s) >= 0 else 1
            if d != 1:
                if ext not in (1, d):
                    fail(f"shapes {' and '.join(str(list(x)) for x in shapes)} do not broadcast")
                ext = d
        out.append(ext)
    return tuple(out)


def element_strides(shape, out_shape) -> list[int]:
    """Strides (in elements) of a C-contiguous ``shape`` read along ``out_shape``."""
    rank = len(out_shape)
    padded = (1,) * (rank - len(shape)) + tuple(shape)
    strides = [0] * rank
    step = 1
    for axis in range(rank - 1, -1, -1):
        strides[axis] = 0 if padded[axis] == 1 else step
        step *= padded[axis]
    return strides


class Walk:
    """How a kernel walks an output of ``shape`` reading operands with ``strides``:
    merged extents and strides as int64 arrays, a block size and the task count."""

    __slots__ = ("shape", "strides", "block", "tasks", "parallel")

    def __init__(self, out_shape, operand_strides):
        shape, strides = _merge(list(out_shape), [list(s) for s in operand_strides])
        size = int(np.prod(shape)) if shape else 1
        inner = shape[-1]
        rows = size // inner if inner else 0
        self.parallel = size >= PARALLEL_MIN
        self.block = BLOCK if self.parallel else max(inner, 1)
        self.tasks = rows * (-(-inner // self.block)) if inner else 0
        self.shape = np.array(shape, dtype=np.int64)
        self.strides = [np.array(s, dtype=np.int64) for s in strides]


def _merge(shape, strides):
    if not shape:
        return [1], [[0] for _ in strides]
    keep_shape = [shape[0]]
    keep = [[s[0]] for s in strides]
    for axis in range(1, len(shape)):
        n = shape[axis]
        mergeable = all(k[-1] == s[axis] * n for k, s in zip(keep, strides))
        if keep_shape[-1] == 1:      # a unit axis merges into the next one
            keep_shape[-1] = n
            for k, s in zip(keep, strides):
                k[-1] = s[axis]
        elif mergeable or n == 1:
            if n != 1:
                keep_shape[-1] *= n
                for k, s in zip(keep, strides):
                    k[-1] = s[axis]
        else:
            keep_shape.append(n)
            for k, s in zip(keep, strides):
                k.append(s[axis])
    return keep_shape, keep


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def task_span(t, per_row, block, inner):
    """Task t of a Walk: its row and the [j0, j1) part of the inner axis it covers."""
    row = t // per_row
    j0 = (t - row * per_row) * block
    return row, j0, min(inner, j0 + block)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def row_offset(row, shape, strides):
    """Where an operand's element for (row, inner index 0) lies: the row index split over
    the outer merged axes, each times the operand's stride."""
    off = 0
    rem = row
    for d in range(shape.size - 2, -1, -1):
        q = rem // shape[d]
        off += (rem - q * shape[d]) * strides[d]
        rem = q
    return off


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def put(out, k, v, exact):
    """out[k] = v, with NaN written as the canonical quiet NaN when exact (one store of a
    selected value: two stores in branches kept LLVM from vectorising the callers' loops),
    frozen: never a masked store where out[k] was v's operand (core/frozen.py)."""
    out[k] = frozen(canonical(v) if exact else v)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def canonical_nans(a):
    """Every NaN of the 1-D float array ``a`` made the canonical quiet NaN, in place."""
    for i in range(a.size):
        if a[i] != a[i]:
            a[i] = np.nan


def canonical(v):
    """v, or for a float NaN the canonical quiet NaN."""


@overload(canonical)
def _canonical(v):
    if isinstance(v, types.Float):
        return lambda v: v if v == v else np.nan
    return lambda v: v      # (integers: a float select would round large ones)
