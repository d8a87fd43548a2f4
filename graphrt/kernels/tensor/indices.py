"""NonZero and Unique: the positions and the distinct values of a tensor (data-dependent
output shapes).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..core.base import OpKernel, RunContext, scratch
from ..core.jit import Variants
from ..core.words import numeric_word
from .gather import Take, Window, normalize_axis


EXACT = False


def _count_nonzero(x, mask):
    c = 0
    for i in range(x.size):
        if x[i] & mask:
            c += 1
    return c


def _nonzero(x, mask, shape, out, count):
    r = shape.size
    c = 0
    for i in range(x.size):
        if x[i] & mask:
            rem = i
            for d in range(r - 1, -1, -1):
                q = rem // shape[d]
                out[d * count + c] = rem - q * shape[d]
                rem = q
            c += 1


_COUNT_NONZERO = Variants(_count_nonzero, "count_nonzero")
_NONZERO = Variants(_nonzero, "nonzero")


class NonZero(OpKernel):
    """y[:, j] = the coordinates of the j-th non-zero element of x in C order (shape
    [rank, count], int64). -0.0 is zero, NaN is not."""

    supports_exact = True
    outputs_data_dependent = True

    def run(self, ctx: RunContext) -> None:
        x = ctx.inputs[0]
        word = numeric_word(x.dtype)
        if word is None:
            coords = np.array(np.nonzero(x.reshape(x.shape or (1,))), np.int64)
            out = ctx.allocate_output(0, np.int64, (x.ndim, coords.shape[1]))
            out[...] = coords[:x.ndim]
            return
        bits = np.dtype(word).itemsize * 8
        mask = word.type((1 << (bits - 1)) - 1 if x.dtype.kind == "f" else (1 << bits) - 1)
        if x.dtype.kind == "c":         # both halves are floats: drop both sign bits
            half = (1 << (bits // 2 - 1)) - 1
            mask = word.type(half | (half << (bits // 2)))
        flat = ctx.flat_in[0].view(word)
        count = int(_COUNT_NONZERO.get(False)(flat, mask))
        out = ctx.allocate_output(0, np.int64, (x.ndim, count))
        if count and x.ndim:
            _NONZERO.get(False)(flat, mask, np.array(x.shape, np.int64), out.reshape(-1), count)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _compare_rows(keys, m, a, b):
    """-1, 0, 1 as row a of ``keys`` (rows of m) sorts before, with or after row b: elements
    in order; NaN after every number and equal to NaN; -0.0 equal to 0.0."""
    for e in range(m):
        u = keys[a * m + e]
        v = keys[b * m + e]
        if u < v:
            return -1
        if v < u:
            return 1
        if u != v:                  # a NaN is involved
            if u != u and v != v:
                continue
            return 1 if u != u else -1
    return 0


def _unique(keys, m, n, order, tmp, inverse, first, counts, ordered):
    """Groups of equal rows: stable bottom-up merge sort of row numbers, then runs.
    Returns the group count u; first/counts/inverse describe the groups in sorted order,
    or (ordered false) in order of first occurrence."""
    for i in range(n):
        order[i] = i
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if _compare_rows(keys, m, order[j], order[i]) < 0:
                    tmp[k] = order[j]
                    j += 1
                else:
                    tmp[k] = order[i]
                    i += 1
                k += 1
            while i < mid:
                tmp[k] = order[i]
                i += 1
                k += 1
            while j < hi:
                tmp[k] = order[j]
                j += 1
                k += 1
        for i in range(n):
            order[i] = tmp[i]
        width *= 2
    u = 0
    for p in range(n):
        r = order[p]
        if p == 0 or _compare_rows(keys, m, order[p - 1], r) != 0:
            first[u] = r
            counts[u] = 0
            u += 1
        inverse[r] = u - 1
        counts[u - 1] += 1
    if not ordered:
        for g in range(u):
            tmp[g] = -1
        nxt = 0
        for r in range(n):
            if tmp[inverse[r]] < 0:
                tmp[inverse[r]] = nxt
                nxt += 1
        for g in range(u):
            order[tmp[g]] = first[g]
        for g in range(u):
            first[g] = order[g]
        for g in range(u):
            order[tmp[g]] = counts[g]
        for g in range(u):
            counts[g] = order[g]
        for r in range(n):
            inverse[r] = tmp[inverse[r]]
    return u


_UNIQUE = Variants(_unique, "unique")


class Unique(OpKernel):
    """The distinct elements of x (flattened), or distinct slices along ``axis``: y, the
    index of each one's first occurrence, for each element/slice of x the number of its
    distinct value in y, and the counts. Sorted ascending (``sorted``=1, default; NaN last)
    or in order of first occurrence."""

    supports_exact = True
    outputs_data_dependent = True

    def __init__(self, node):
        super().__init__(node)
        axis = node.attr("axis")
        self.axis = None if axis is None else int(axis)
        self.sorted = int(node.attr("sorted", 1)) != 0

    def run(self, ctx: RunContext) -> None:
        x = ctx.inputs[0]
        shape = x.shape
        if self.axis is None:
            outer, n, inner, axis = 1, x.size, 1, None
        else:
            axis = normalize_axis(self.node, self.axis, x.ndim)
            outer, n, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
        if numeric_word(x.dtype) is None or x.dtype.kind == "c":
            first, inverse, counts = self._numpy(x, axis)
        else:
            first, inverse, counts = self._kernel(ctx, x, outer, n, inner)
        u = first.size
        head, tail = (shape[:axis], shape[axis + 1:]) if axis is not None else ((), ())
        y = ctx.allocate_output(0, x.dtype, head + (u,) + tail)
        Take(x.dtype, outer, n, inner, u)(ctx.flat_in[0], first, y.reshape(-1))
        for i, part in enumerate((first, inverse, counts), start=1):
            if i < self.node.n_outputs:
                ctx.allocate_output(i, np.int64, part.shape)[...] = part

    def _kernel(self, ctx, x, outer, n, inner):
        m = outer * inner
        keys = ctx.flat_in[0]
        if outer > 1:                   # rows along the axis, made contiguous
            rows = scratch(ctx, x.dtype, (n * m,))
            Window(x.dtype, (n, outer, inner), (inner, n * inner, 1))(keys, rows)
            keys = rows
        if keys.dtype == np.float16:    # numba cannot compare float16; float32 holds it exactly
            wide = scratch(ctx, np.float32, keys.shape)
            np.copyto(wide, keys)
            keys = wide
        elif keys.dtype == np.bool_:
            keys = keys.view(np.uint8)
        order, tmp, inverse, first, counts = (scratch(ctx, np.int64, (n,)) for _ in range(5))
        u = _UNIQUE.get(False)(keys, m, n, order, tmp, inverse, first, counts, self.sorted)
        return first[:u], inverse, counts[:u]

    def _numpy(self, x, axis):
        """Strings and complex numbers: numpy's unique (sorted), reordered if asked."""
        _, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                              return_counts=True, axis=axis)
        inverse = inverse.reshape(-1)
        if not self.sorted:
            by_first = np.argsort(first, kind="stable")
            rank = np.empty_like(by_first)
            rank[by_first] = np.arange(by_first.size)
            first, counts, inverse = first[by_first], counts[by_first], rank[inverse]
        return first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)
