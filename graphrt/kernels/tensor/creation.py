"""Tensors made from shapes and values: ConstantOfShape, Range, EyeLike, OneHot.

Values are written as words of their width where they are only copied (gather.word_of), so
one kernel serves every element type of a width and the bits are kept.
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN
from ..core.fill import Fill
from ..core.floats import HALF
from ..core.jit import Variants
from ..core.words import word_of
from .expand import shape_input
from .gather import blocks, normalize_axis


EXACT = False


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


_RANGE_TYPES = HALF | frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int16,
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
        cd = self.stash if dt in HALF else dt
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
