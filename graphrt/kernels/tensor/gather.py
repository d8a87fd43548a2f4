"""Gather, GatherElements, GatherND, and the two copy helpers the indexing modules share.

- Window: out (C order) [i] = x[base + sum_d i_d * strides_d] with strides >= 0, moved by
  layout's gather kernel (Slice, Split, Expand, Tile, DepthToSpace...).
- Take: out[o, j, :] = x[o, idx[j], :] over rows of ``inner`` elements (Gather, Compress,
  Unique).

Every index is checked in Python (``check_range``) before a kernel sees it: numba does no
bounds checking. Elements are moved as unsigned words of their width (``word_of``), so one
compiled kernel serves every element type of a width (bfloat16 and float8 included) and the
bits are kept; types with no word (strings, complex128) are moved by numpy.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from numpy.lib.stride_tricks import as_strided

from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, folding, make_calls
from ..core.broadcast import BLOCK, PARALLEL_MIN, Walk, row_offset
from ..core.jit import Variants
from ..core.words import word_of
from .layout import STRIDED_GATHER, walk_tasks

EXACT = False

INDEX_TYPES = frozenset(np.dtype(t) for t in (np.int32, np.int64))


def check_range(node, idx: np.ndarray, n: int, what: str = "index", where: str = "") -> None:
    """Every value of ``idx`` must lie in [-n, n) (negative counts from the end)."""
    if idx.size == 0:
        return
    lo, hi = idx.min(), idx.max()
    if lo >= -n and hi < n:
        return
    bad = int(lo) if lo < -n else int(hi)
    node.fail(f"{what} {bad}{where} is out of range [{-n}, {n - 1}]", ErrorKind.INVALID_INPUT)


def normalize_axis(node, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        node.fail(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def data_and_indices(ctx: InferContext) -> tuple:
    """(element type, shape) of the data (input 0) and the shape of the int32/int64
    indices (input 1)."""
    dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
    ctx.check_dtype(1, INDEX_TYPES, " (indices)")
    return dt, shape, tuple(ctx.shape(1))


def c_strides(shape) -> list[int]:
    """Element strides of a C-contiguous array of ``shape``."""
    out, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        out[d] = step
        step *= shape[d]
    return out


def blocks(n: int):
    """(parallel, block, tasks) for a flat loop over ``n`` elements."""
    parallel = n >= PARALLEL_MIN
    block = BLOCK if parallel else max(n, 1)
    return parallel, block, -(-n // block)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def nd_offset(idx, t, k, lim, xs):
    """Offset selected by the index tuple idx[t*k:(t+1)*k] (values checked to [-lim, lim))."""
    off = 0
    t = np.int64(t)
    for m in range(k):
        v = idx[t * k + m]
        if v < 0:
            v += lim[m]
        off += v * xs[m]
    return off


class Window:
    """out (C order over ``shape``) = x[base + sum_d i_d * strides[d]], strides >= 0."""

    __slots__ = ("word", "base", "shape", "strides", "walk", "fn", "itemsize", "tasks")

    def __init__(self, dtype, shape, strides, base: int = 0):
        dtype = np.dtype(dtype)
        self.word = word_of(dtype)
        self.base = int(base)
        self.shape = tuple(int(d) for d in shape)
        self.strides = tuple(int(s) for s in strides)
        self.itemsize = dtype.itemsize
        # Walk's axis merging expects unit axes to be gone (see layout.Transpose)
        kept = [d for d in range(len(shape)) if shape[d] != 1]
        self.walk = Walk([shape[d] for d in kept], [[strides[d] for d in kept]])
        self.fn = STRIDED_GATHER.get(False, self.walk.parallel)
        self.tasks = walk_tasks(self.walk)

    def calls(self, x: np.ndarray, out: np.ndarray):
        """The copy as compiled calls (OpKernel.jit_calls); None for a type numpy moves."""
        if 0 in self.shape:
            return []
        if self.word is None:
            return None
        w = self.walk
        return [(self.fn, (x[self.base:].view(self.word), out.view(self.word), w.shape,
                           w.strides[0], *self.tasks))]

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        """``x`` and ``out`` are 1-D (RunContext.flat_in / flat_out)."""
        calls = None if folding() else self.calls(x, out)
        if calls is None:
            view = as_strided(x[self.base:], self.shape,
                              [s * self.itemsize for s in self.strides])
            out.reshape(self.shape)[...] = view
            return
        make_calls(calls)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _check_indices(idx, n):
    """Raise unless every index lies in [-n, n) (check_range, compiled)."""
    for i in range(idx.size):
        if idx[i] < -n or idx[i] >= n:
            raise IndexError("an index is out of range")


def _take(x, idx, out, n, inner, m, tasks):
    for t in prange(tasks):
        o = t // m
        k = idx[t - o * m]
        if k < 0:
            k += n
        src = x[(o * n + k) * inner:(o * n + k + 1) * inner]
        dst = out[t * inner:(t + 1) * inner]
        for e in range(inner):
            dst[e] = src[e]


_TAKE = Variants(_take, "gather_take", parallel=True)


class Take:
    """out[o, j, :] = x[o, idx[j], :] for o < outer, j < m; idx checked to [-n, n)."""

    __slots__ = ("word", "outer", "n", "inner", "m", "fn")

    def __init__(self, dtype, outer: int, n: int, inner: int, m: int):
        self.word = word_of(dtype)
        self.outer, self.n, self.inner, self.m = outer, n, inner, m
        tasks = outer * m
        self.fn = _TAKE.get(False, tasks * inner >= PARALLEL_MIN and tasks > 1)

    def calls(self, x: np.ndarray, idx: np.ndarray, out: np.ndarray):
        """The gather as compiled calls (OpKernel.jit_calls; indices already checked);
        None for a type numpy moves."""
        tasks = self.outer * self.m
        if tasks * self.inner == 0:
            return []
        if self.word is None:
            return None
        return [(self.fn, (x.view(self.word), idx, out.view(self.word), self.n, self.inner,
                           self.m, tasks))]

    def __call__(self, x: np.ndarray, idx: np.ndarray, out: np.ndarray) -> None:
        """``x``, ``idx``, ``out`` are 1-D."""
        calls = None if folding() else self.calls(x, idx, out)
        if calls is None:
            got = np.take(x.reshape(self.outer, self.n, self.inner), idx, axis=1)
            out.reshape(self.outer, self.m, self.inner)[...] = got
            return
        make_calls(calls)


class _AlongAxis(OpKernel):
    """Shared: the ``axis`` attribute (default 0) the indices select along."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.axis = int(node.attr("axis", 0))


class Gather(_AlongAxis):
    """y[i_0..i_{a-1}, j.., i_{a+1}..] = x[i_0..i_{a-1}, idx[j..], i_{a+1}..] along ``axis``
    (default 0); negative indices count from the end of the axis."""

    def infer(self, ctx: InferContext) -> None:
        dt, shape, ishape = data_and_indices(ctx)
        axis = normalize_axis(ctx, self.axis, len(shape))
        n = shape[axis]
        ctx.set_output(0, dt, shape[:axis] + ishape + shape[axis + 1:])
        known = ctx.value(1)
        if known is not None:
            check_range(ctx.node, known, n, "index")
        take = Take(dt, math.prod(shape[:axis]), n, math.prod(shape[axis + 1:]), math.prod(ishape))
        ctx.prepared = (take, known is not None)

    # run-time indices: a compiled check raises for one out of range, and the step's run,
    # made in its place (a trap), raises the SessionError saying which
    traps = True

    def jit_calls(self, ctx: RunContext):
        """The take; before it, for run-time indices, their check."""
        take, checked = ctx.prepared
        calls = take.calls(*ctx.flat_in[:2], ctx.flat_out[0])
        if calls is None or checked:
            return calls
        return [(_check_indices, (ctx.flat_in[1], take.n))] + calls

    def run(self, ctx: RunContext) -> None:
        take, checked = ctx.prepared
        if not checked:
            check_range(self.node, ctx.flat_in[1], take.n, "index")
        take(ctx.flat_in[0], ctx.flat_in[1], ctx.flat_out[0])


def elements_layout(ctx: InferContext, axis_attr: int, data_shape, idx_shape, what: str):
    """For GatherElements/ScatterElements: (axis, walk shape, data strides with the axis
    stride zeroed, axis stride, row count). Indices must have the data's rank and no larger
    extents (reading past an extent would leave the data)."""
    r = len(data_shape)
    axis = normalize_axis(ctx, axis_attr, r)
    if len(idx_shape) != r:
        ctx.fail(f"{what} of rank {len(idx_shape)} do not match data of rank {r}")
    for d in range(r):
        if d != axis and idx_shape[d] > data_shape[d]:
            ctx.fail(f"{what} shape {list(idx_shape)} exceeds data shape {list(data_shape)} "
                     f"on axis {d}")
    sx = c_strides(data_shape)
    step = sx[axis]
    sx[axis] = 0
    rows = math.prod(idx_shape[:-1])
    return axis, np.array(idx_shape, np.int64), np.array(sx, np.int64), step, rows


def _gather_elements(x, idx, out, shape, sx, n, step, tasks):
    r = shape.size
    inner = shape[r - 1]
    si = sx[r - 1]
    for row in prange(tasks):
        # a prange index may arrive unsigned: keep row_offset's arithmetic in int64
        base = row_offset(np.int64(row), shape, sx)
        for j in range(inner):
            k = idx[row * inner + j]
            if k < 0:
                k += n
            out[row * inner + j] = x[base + j * si + k * step]


STRIDED_GATHER_ELEMENTS = Variants(_gather_elements, "gather_elements", parallel=True)


class GatherElements(_AlongAxis):
    """y[i] = x[i with i_axis replaced by idx[i]]; y has the shape of idx."""

    def infer(self, ctx: InferContext) -> None:
        dt, shape, ishape = data_and_indices(ctx)
        axis, wshape, sx, step, rows = elements_layout(ctx, self.axis, shape, ishape, "indices")
        ctx.set_output(0, dt, ishape)
        size = math.prod(ishape)
        fn = STRIDED_GATHER_ELEMENTS.get(False, size >= PARALLEL_MIN and rows > 1)
        ctx.prepared = (word_of(dt), shape[axis], axis, wshape, sx, step, rows if size else 0, fn)

    def run(self, ctx: RunContext) -> None:
        word, n, axis, shape, sx, step, rows, fn = ctx.prepared
        idx = ctx.flat_in[1]
        check_range(self.node, idx, n, "index")
        if word is None or folding():
            x = ctx.inputs[0][along(shape, axis)]
            ctx.outputs[0][...] = np.take_along_axis(x, ctx.inputs[1], axis)
        elif rows:
            fn(ctx.flat_in[0].view(word), idx, ctx.flat_out[0].view(word), shape, sx, n, step,
               rows)


def along(idx_shape, axis: int) -> tuple:
    """The part of the data an index array of ``idx_shape`` addresses along ``axis`` (numpy's
    take/put_along_axis want equal extents off the axis)."""
    return tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(idx_shape))


def nd_layout(ctx: InferContext, data_shape, idx_shape, batch_dims: int):
    """For GatherND/ScatterND: (k, limits, strides of the indexed axes, batch count, tuples per
    batch, batch stride, inner size)."""
    r, q, b = len(data_shape), len(idx_shape), batch_dims
    if q < 1 or r < 1:
        ctx.fail("data and indices must have rank >= 1")
    if not 0 <= b < min(q, r):
        ctx.fail(f"batch_dims {b} must be in [0, {min(q, r) - 1}]")
    if tuple(idx_shape[:b]) != tuple(data_shape[:b]):
        ctx.fail(f"the first {b} extents of indices {list(idx_shape)} and data "
                 f"{list(data_shape)} differ")
    k = idx_shape[-1]
    if k > r - b:
        ctx.fail(f"index tuples of length {k} exceed the {r - b} indexable axes of "
                 f"data {list(data_shape)}")
    sx = c_strides(data_shape)
    batch = math.prod(idx_shape[:b])
    per_batch = math.prod(idx_shape[b:-1])
    batch_stride = sx[b - 1] if b else 0
    inner = math.prod(data_shape[b + k:])
    lim = np.array(data_shape[b:b + k], np.int64)
    xs = np.array(sx[b:b + k], np.int64)
    return k, lim, xs, batch, per_batch, batch_stride, inner


def check_tuples(node, idx: np.ndarray, lim: np.ndarray) -> None:
    """Column m of the (…, k) index array must lie in [-lim[m], lim[m])."""
    cols = idx.reshape(-1, lim.size)
    for m in range(lim.size):
        check_range(node, cols[:, m], int(lim[m]), where=f" (position {m} of an index tuple)")


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _check_tuples(idx, lim):
    """Raise unless column m of the (…, k) index array lies in [-lim[m], lim[m])
    (check_tuples, compiled)."""
    k = lim.size
    for i in range(idx.size):
        m = i % k
        if idx[i] < -lim[m] or idx[i] >= lim[m]:
            raise IndexError("an index tuple is out of range")


def _gather_nd(x, idx, out, lim, xs, k, per_batch, batch_stride, inner, tasks):
    for t in prange(tasks):
        off = (t // per_batch) * batch_stride + nd_offset(idx, t, k, lim, xs)
        dst = out[t * inner:(t + 1) * inner]
        src = x[off:off + inner]
        for e in range(inner):
            dst[e] = src[e]


STRIDED_GATHER_ND = Variants(_gather_nd, "gather_nd", parallel=True)


class GatherND(OpKernel):
    """y[b.., t.., :] = x[b.., idx[b.., t.., 0], ..., idx[b.., t.., k-1], :] with ``batch_dims``
    leading axes shared by data and indices (opset 12+)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.batch_dims = int(node.attr("batch_dims", 0))

    def infer(self, ctx: InferContext) -> None:
        dt, shape, ishape = data_and_indices(ctx)
        b = self.batch_dims
        k, lim, xs, batch, per_batch, bstride, inner = nd_layout(ctx, shape, ishape, b)
        ctx.set_output(0, dt, ishape[:-1] + shape[self.batch_dims + k:])
        tasks = batch * per_batch if inner else 0
        fn = STRIDED_GATHER_ND.get(False, tasks * inner >= PARALLEL_MIN and tasks > 1)
        ctx.prepared = (word_of(dt), k, lim, xs, per_batch, bstride, inner, tasks, fn)

    # a compiled check raises for a tuple out of range, and the step's run, made in its
    # place (a trap), raises the SessionError saying which
    traps = True

    def jit_calls(self, ctx: RunContext):
        """The tuples' check, then the gather (None for a type numpy moves)."""
        word, k, lim, xs, per_batch, bstride, inner, tasks, fn = ctx.prepared
        if word is None:
            return None
        idx = ctx.flat_in[1]
        return ([(_check_tuples, (idx, lim))] if idx.size else []) + self._gather(ctx)

    def _gather(self, ctx: RunContext) -> list:
        """The compiled gather (tuples checked; a type moved as words)."""
        word, k, lim, xs, per_batch, bstride, inner, tasks, fn = ctx.prepared
        if not tasks:
            return []
        return [(fn, (ctx.flat_in[0].view(word), ctx.flat_in[1], ctx.flat_out[0].view(word),
                      lim, xs, k, per_batch, bstride, inner, tasks))]

    def run(self, ctx: RunContext) -> None:
        word, k, lim, xs, per_batch, bstride, inner, tasks, fn = ctx.prepared
        idx = ctx.flat_in[1]
        check_tuples(self.node, idx, lim)
        if not tasks:
            return
        if word is None:
            x, out = ctx.flat_in[0], ctx.flat_out[0].reshape(tasks, inner)
            for t in range(tasks):
                off = (t // per_batch) * bstride + int(nd_offset(idx, t, k, lim, xs))
                out[t] = x[off:off + inner]
            return
        make_calls(self._gather(ctx))
