"""Operators that make tensors from shapes and values, or rearrange them wholesale:
ConstantOfShape, Range, EyeLike, OneHot, Size, CastLike, Dropout, NonZero, Unique,
DepthToSpace, SpaceToDepth.

Values are written as words of their width where they are only copied (gather.word_of), so
one kernel serves every element type of a width and the bits are kept.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN
from ..core import fill
from ..elementwise.cast import Cast
from .expand import shape_input
from .gather import Take, Window, blocks, c_strides, normalize_axis, word_of
from ..core.jit import Variants
from .layout import _word

EXACT = False
PARALLEL_FILL = 1 << 18     # bytes from which a fill is shared by the threads


class Fill:
    """out[:] = value, written as words of the element's size (so every bit of the value,
    a NaN's payload included, is copied): numpy's fill up to PARALLEL_FILL bytes, above it
    fill.fill_blocks (threads share the blocks; streaming stores past fill.STREAM_BYTES);
    numpy's assignment for strings."""

    __slots__ = ("word", "bits")

    def __init__(self, dtype, value, size: int):
        cell = np.array(value).astype(dtype).reshape(1)
        self.word = word_of(dtype)
        self.bits = cell[0] if self.word is None else cell.view(self.word)[0]

    def __call__(self, out: np.ndarray) -> None:
        if self.word is None:
            out[...] = self.bits
        elif out.nbytes >= PARALLEL_FILL:
            fill.fill_blocks(out.view(self.word), self.bits,
                        fill.STREAMS and out.nbytes >= fill.STREAM_BYTES)
        elif out.size:
            out.view(self.word).fill(self.bits)


class ConstantOfShape(OpKernel):
    """y of the shape in input 0, every element ``value`` (a one-element tensor, default
    float32 0)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        value = node.attr("value")
        value = np.zeros(1, np.float32) if value is None else np.asarray(value)
        if value.size != 1:
            node.fail(f"attribute 'value' must have one element, got {value.size}")
        self.value = value.reshape(-1)[0:1].copy()

    def infer(self, ctx: InferContext) -> None:
        target = shape_input(ctx, 0)
        if target is None:
            return
        ctx.set_output(0, self.value.dtype, target)
        ctx.prepared = Fill(self.value.dtype, self.value[0], math.prod(target))

    def run(self, ctx: RunContext) -> None:
        ctx.prepared(ctx.flat_out[0])


def _range(out, start, delta, block, tasks):
    n = out.size
    for t in prange(tasks):
        for i in range(t * block, min(n, (t + 1) * block)):
            out[i] = start + i * delta


_RANGE = Variants(_range, "range", parallel=True)


def _bfloat16():
    try:
        return _dt.to_numpy(16)         # BFLOAT16, when ml_dtypes is there
    except (KeyError, ValueError):
        return None


_LOW = frozenset(d for d in (np.dtype(np.float16), _bfloat16()) if d is not None)
_RANGE_TYPES = _LOW | frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int16,
                                                      np.int32, np.int64))
_STASH = {1: np.dtype(np.float32), 11: np.dtype(np.float64)}


class Range(OpKernel):
    """y[i] = start + i * delta for i < max(ceil((limit - start) / delta), 0).

    Integers wrap around. For float32, i * delta and the sum are computed in float64 and
    rounded once; for float64 they are two float64 operations (never fused in exact mode).
    float16 and bfloat16 are computed in ``stash_type`` (float32 by default) and rounded."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        stash = int(node.attr("stash_type", 1))
        if stash not in _STASH:
            node.fail(f"stash_type {stash} is not FLOAT (1) or DOUBLE (11)")
        self.stash = _STASH[stash]

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 1, 2)
        ctx.check_dtype(0, _RANGE_TYPES)
        values = [ctx.value(i) for i in range(3)]
        if any(v is None for v in values):
            ctx.require_run_time_values()
            return
        if any(v.size != 1 for v in values):
            ctx.bad_input("start, limit and delta must be single values")
        cd = self.stash if dt in _LOW else dt
        start, limit, delta = (v.reshape(-1)[0].astype(cd).item() for v in values)
        if delta == 0 or not all(math.isfinite(v) for v in (start, limit, delta)):
            ctx.bad_input(f"cannot count from {start} to {limit} by {delta}")
        if cd.kind == "f":
            n = math.ceil((limit - start) / delta)
        else:
            n = -((start - limit) // delta)
        n = max(n, 0)
        ctx.set_output(0, dt, (n,))
        parallel, block, tasks = blocks(n)
        ctx.prepared = (cd, cd.type(start), cd.type(delta), block, tasks,
                        _RANGE.get(ctx.exact, parallel))

    def run(self, ctx: RunContext) -> None:
        cd, start, delta, block, tasks, fn = ctx.prepared
        out = ctx.flat_out[0]
        if not tasks:
            return
        if cd == out.dtype:
            fn(out, start, delta, block, tasks)
        else:
            wide = scratch(ctx, cd, out.shape)
            fn(wide, start, delta, block, tasks)
            np.copyto(out, wide, casting="unsafe")


def _eye(out, one, rows, cols, k):
    for j in range(out.size):
        out[j] = 0
    for i in range(max(0, -k), min(rows, cols - k)):
        out[i * cols + i + k] = one


_EYE = Variants(_eye, "eye_like")


class EyeLike(OpKernel):
    """y of x's 2-D shape: 1 where column - row == k, 0 elsewhere; element type ``dtype``
    (an ONNX type code) or x's."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.k = int(node.attr("k", 0))
        code = node.attr("dtype")
        self.dtype = None
        if code is not None:
            try:
                self.dtype = _dt.to_numpy(int(code))
            except (KeyError, ValueError):
                node.fail(f"dtype {_dt.name_of_code(int(code))} is not supported",
                          ErrorKind.UNSUPPORTED)
            if self.dtype not in _dt.ALL_TENSOR:
                node.fail(f"dtype {_dt.name_of(self.dtype)} is not supported",
                          ErrorKind.UNSUPPORTED)

    def infer(self, ctx: InferContext) -> None:
        shape = tuple(ctx.shape(0))
        if len(shape) != 2:
            ctx.fail(f"input must be 2-D, got shape {list(shape)}")
        dt = self.dtype if self.dtype is not None else ctx.check_dtype(0, _dt.ALL_TENSOR)
        ctx.set_output(0, dt, shape)
        word = word_of(dt)
        one = np.ones(1, dt).view(word)[0]
        rows, cols = shape
        k = min(max(self.k, -rows), cols)       # beyond these the diagonal is empty
        ctx.prepared = (word, one, rows, cols, k)

    def run(self, ctx: RunContext) -> None:
        word, one, rows, cols, k = ctx.prepared
        _EYE.get(False)(ctx.flat_out[0].view(word), one, rows, cols, k)


def _one_hot(idx, out, off, on, depth, inner, wrap, tasks):
    for t in prange(tasks):
        base = t * depth * inner
        for e in range(depth * inner):
            out[base + e] = off
        for e in range(inner):
            v = idx[t * inner + e]
            if v != v or v >= depth or v < -depth:
                continue
            k = np.int64(v)
            if k < 0:
                if not wrap:
                    continue
                k += depth
            if 0 <= k < depth:
                out[base + k * inner + e] = on


_ONE_HOT = Variants(_one_hot, "one_hot", parallel=True)


class OneHot(OpKernel):
    """y has idx's shape with an axis of extent ``depth`` inserted at ``axis`` (default -1):
    y[.., d, ..] = on where idx (truncated to an integer; negative counts from depth, opset
    11+) equals d, else off; values = [off, on]. Out-of-range indices give a row of off."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.axis = int(node.attr("axis", -1))
        self.wrap = node.opset >= 11

    def infer(self, ctx: InferContext) -> None:
        ishape = tuple(ctx.shape(0))
        ctx.check_dtype(0, _dt.NUMERIC, " (indices)")
        ctx.check_dtype(1, _dt.NUMERIC, " (depth)")
        dt = ctx.dtype(2)
        if math.prod(ctx.shape(2)) != 2:
            ctx.fail(f"values must hold [off, on], got shape {list(ctx.shape(2))}")
        depth = ctx.value(1)
        if depth is None:
            ctx.require_run_time_values()
            return
        if depth.size != 1:
            ctx.bad_input(f"depth must be one value, got {depth.size}")
        d = depth.reshape(-1)[0]
        if not np.isfinite(d) or d < 0:
            ctx.bad_input(f"depth {d} is not a non-negative count")
        d = int(d)
        r = len(ishape)
        axis = normalize_axis(ctx, self.axis, r + 1)
        ctx.set_output(0, dt, ishape[:axis] + (d,) + ishape[axis:])
        outer, inner = math.prod(ishape[:axis]), math.prod(ishape[axis:])
        fn = _ONE_HOT.get(False, outer * d * inner >= PARALLEL_MIN and outer > 1)
        ctx.prepared = (word_of(dt), d, outer, inner, fn)

    def run(self, ctx: RunContext) -> None:
        word, depth, outer, inner, fn = ctx.prepared
        idx, values, out = ctx.flat_in[0], ctx.flat_in[2], ctx.flat_out[0]
        if idx.dtype == np.float16:     # numba cannot read float16; float32 holds it exactly
            wide = scratch(ctx, np.float32, idx.shape)
            np.copyto(wide, idx)
            idx = wide
        if word is None:
            y = out.reshape(outer, depth, inner)
            y[...] = values[0]
            k = np.trunc(idx.reshape(outer, inner)).astype(np.int64)
            k = np.where((k < 0) & self.wrap, k + depth, k)
            o, e = np.nonzero((k >= 0) & (k < depth))
            y[o, k[o, e], e] = values[1]
        elif outer:
            v = values.view(word)
            fn(idx, out.view(word), v[0], v[1], depth, inner, self.wrap, outer)


class Size(OpKernel):
    """y = the input's element count as an int64 scalar (a constant of the plan)."""

    supports_exact = True

    def infer(self, ctx: InferContext) -> None:
        ctx.set_constant_output(0, np.array(math.prod(ctx.shape(0)), np.int64))


class CastLike(Cast):
    """y = x cast to the element type of input 1, by Cast's rules and kernels."""

    def __init__(self, node):       # noqa: D107 - no 'to' attribute; one Cast per target
        OpKernel.__init__(self, node)
        self._casts = {}

    def infer(self, ctx: InferContext) -> None:
        target = ctx.dtype(1)
        cast = self._casts.get(target)
        if cast is None:
            if target not in _dt.ALL_TENSOR | _dt.EXOTIC:
                ctx.fail(f"cannot cast to element type {_dt.name_of(target)}",
                         ErrorKind.UNSUPPORTED)
            attrs = dict(self.node.attrs, to=_dt.to_code(target))
            cast = Cast(dataclasses.replace(self.node, attrs=attrs))
            self._casts[target] = cast          # a benign race: every thread builds the same
        cast.infer(ctx)


class Dropout(OpKernel):
    """Inference: y = x, mask (optional output 1) all true (all 1 before opset 10).

    Training (opset 12+, input 2 true) with ratio r > 0 (input 1, default 0.5): keep[i] =
    u[i] >= r with u numpy's legacy MT19937 uniform stream seeded by the ``seed`` attribute
    (what onnx's reference uses); y = x * (1 / (1 - r)) where kept, else 0. Without a seed the
    result would be random: not supported."""

    supports_exact = True
    in_place_input = True

    def __init__(self, node):
        super().__init__(node)
        seed = node.attr("seed")
        self.seed = None if seed is None else int(seed)
        self.from_inputs = node.opset >= 12
        self.mask_dtype = np.dtype(np.bool_) if node.opset >= 10 else None

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _dt.FLOATS)
        shape = tuple(ctx.shape(0))
        ratio = 0.0
        if self.from_inputs and ctx.has_input(2):
            train = ctx.value(2)
            ratio = ctx.value(1) if ctx.has_input(1) else np.array(0.5)
            if train is None or ratio is None:
                ctx.require_run_time_values()
                return
            ratio = float(ratio.reshape(-1)[0]) if bool(train.reshape(-1)[0]) else 0.0
            if not 0.0 <= ratio < 1.0:
                ctx.bad_input(f"ratio {ratio} is not in [0, 1)")
            if ratio and self.seed is None:
                ctx.fail("training-mode Dropout without a seed is random; not supported",
                         ErrorKind.UNSUPPORTED)
        ctx.set_output(0, dt, shape)
        mask_dt = self.mask_dtype or dt
        if self.node.n_outputs > 1:
            ctx.set_output(1, mask_dt, shape)
        ctx.prepared = (ratio, Fill(mask_dt, 1, math.prod(shape)))

    def run(self, ctx: RunContext) -> None:
        ratio, ones = ctx.prepared
        x, y = ctx.flat_in[0], ctx.flat_out[0]
        mask = ctx.flat_out[1] if len(ctx.flat_out) > 1 else None
        if not ratio:
            if not np.may_share_memory(x, y):
                y[...] = x
            if mask is not None:
                ones(mask)
            return
        keep = np.random.RandomState(self.seed).uniform(0.0, 1.0, x.size) >= ratio
        np.multiply(x, x.dtype.type(1.0 / (1.0 - ratio)), out=y)
        y[~keep] = 0
        if mask is not None:
            mask[...] = keep


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
        word = _word(x.dtype)
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


@njit(cache=True, nogil=True, fastmath=False)
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
        if _word(x.dtype) is None or x.dtype.kind == "c":
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


def _space_depth(ctx: InferContext, blocksize: int, to_space: bool, crd: bool):
    """DepthToSpace / SpaceToDepth as a reshape to 6-D, a transpose and a reshape back."""
    dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
    if len(shape) != 4:
        ctx.fail(f"input must be 4-D (N, C, H, W), got shape {list(shape)}")
    b, c, h, w = shape
    s = blocksize
    if to_space:
        if c % (s * s):
            ctx.fail(f"channels {c} are not a multiple of blocksize^2 = {s * s}")
        six = (b, c // (s * s), s, s, h, w) if crd else (b, s, s, c // (s * s), h, w)
        perm = (0, 1, 4, 2, 5, 3) if crd else (0, 3, 4, 1, 5, 2)
        out = (b, c // (s * s), h * s, w * s)
    else:
        if h % s or w % s:
            ctx.fail(f"height {h} and width {w} are not multiples of blocksize {s}")
        six = (b, c, h // s, s, w // s, s)
        perm = (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
        out = (b, c * s * s, h // s, w // s)
    strides = c_strides(six)
    ctx.set_output(0, dt, out)
    ctx.prepared = Window(dt, [six[p] for p in perm], [strides[p] for p in perm])


class DepthToSpace(OpKernel):
    """y = x's channels moved into blocksize x blocksize spatial blocks (modes DCR, the
    default, and CRD as the spec's reshape-transpose-reshape formulas state)."""

    supports_exact = True
    to_space = True

    def __init__(self, node):
        super().__init__(node)
        size = node.attr("blocksize")
        if size is None or int(size) < 1:
            node.fail("attribute 'blocksize' must be a positive integer")
        self.blocksize = int(size)
        mode = str(node.attr("mode", "DCR"))
        if mode not in ("DCR", "CRD"):
            node.fail(f"mode {mode!r} is not 'DCR' or 'CRD'")
        self.crd = mode == "CRD"

    def infer(self, ctx: InferContext) -> None:
        _space_depth(ctx, self.blocksize, self.to_space, self.crd)

    def run(self, ctx: RunContext) -> None:
        ctx.prepared(ctx.flat_in[0], ctx.flat_out[0])


class SpaceToDepth(DepthToSpace):
    """y = x's blocksize x blocksize spatial blocks moved into channels (the inverse of
    DepthToSpace in the same mode)."""

    to_space = False
