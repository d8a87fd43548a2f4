"""Expand, Tile and Pad, plus AxisMaps, the separable gather Pad, CenterCropPad and
negative-step Slice share.

- Expand: y = x broadcast (numpy rules, both ways) with the shape input.
- Tile: y[o_0, ..] = x[o_0 mod n_0, ..]; each axis repeated ``repeats[d]`` times.
- Pad: per axis, ``pads[begin]`` and ``pads[end]`` elements added (negative: removed first);
  the added ones are ``constant_value`` (mode constant), the nearest edge element (edge),
  the mirror image without repeating the edge (reflect, repeated as often as needed) or the
  elements from the other end (wrap). Modes other than constant pad from what is left after
  the removals.

All three move elements only, so they are exact.
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..core.base import InferContext, OpKernel, RunContext, make_calls
from ..core.broadcast import BLOCK, PARALLEL_MIN, broadcast_shape, element_strides
from ..core.jit import Variants
from ..core.words import word_of
from .gather import Window, c_strides, normalize_axis

EXACT = False


def _axis_maps(x, out, shape, table, starts, value, block, tasks):
    """out[i] = value if some table entry of i is negative, else x[sum of the entries]."""
    r = shape.size
    inner = shape[r - 1]
    last = starts[r - 1]
    per_row = (inner + block - 1) // block
    for t in prange(tasks):
        row = t // per_row
        j0 = (t - row * per_row) * block
        j1 = min(inner, j0 + block)
        off = 0
        rem = row
        for d in range(r - 2, -1, -1):
            q = rem // shape[d]
            s = table[starts[d] + rem - q * shape[d]]
            rem = q
            off = -1 if (s < 0 or off < 0) else off + s
        dst = out[row * inner:(row + 1) * inner]
        if off < 0:
            for j in range(j0, j1):
                dst[j] = value
        else:
            for j in range(j0, j1):
                s = table[last + j]
                if s < 0:
                    dst[j] = value
                else:
                    dst[j] = x[off + s]


_AXIS_MAPS = Variants(_axis_maps, "axis_maps", parallel=True)


class AxisMaps:
    """out[i_0, .., i_{r-1}] = value if some maps[d][i_d] < 0,
    else x[maps[0][i_0], .., maps[r-1][i_{r-1}]]: each output axis reads its input axis
    through its own index map (all map values checked by the caller to be < the extent)."""

    __slots__ = ("word", "maps", "in_shape", "out_shape", "value", "table", "starts",
                 "shape", "block", "tasks", "fn")

    def __init__(self, dtype, in_shape, maps, value=0):
        dtype = np.dtype(dtype)
        if not maps:                 # rank 0: one element, copied
            in_shape, maps = (1,), [np.zeros(1, np.int64)]
        self.maps = [np.asarray(m, np.int64) for m in maps]
        self.in_shape = tuple(in_shape)
        self.out_shape = tuple(m.size for m in self.maps)
        self.word = word_of(dtype)
        cell = np.array(value).astype(dtype).reshape(1)
        self.value = cell[0] if self.word is None else cell.view(self.word)[0]
        strides = c_strides(in_shape)
        self.table = np.concatenate([np.where(m < 0, -1, m * s)
                                     for m, s in zip(self.maps, strides)])
        self.starts = np.cumsum([0] + [m.size for m in self.maps[:-1]]).astype(np.int64)
        self.shape = np.array(self.out_shape, np.int64)
        size = math.prod(self.out_shape)
        inner = self.out_shape[-1]
        parallel = size >= PARALLEL_MIN
        self.block = BLOCK if parallel else max(inner, 1)
        self.tasks = (size // inner) * -(-inner // self.block) if inner else 0
        self.fn = _AXIS_MAPS.get(False, parallel)

    def calls(self, x: np.ndarray, out: np.ndarray):
        """The fill as compiled calls (OpKernel.jit_calls); None for a type numpy moves."""
        if self.word is None:
            return None
        if not self.tasks:
            return []
        return [(self.fn, (x.view(self.word), out.view(self.word), self.shape, self.table,
                           self.starts, self.value, self.block, self.tasks))]

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        """``x`` and ``out`` are 1-D."""
        if self.word is None:
            y = out.reshape(self.out_shape)
            y[...] = self.value
            valid = [np.flatnonzero(m >= 0) for m in self.maps]
            src = x.reshape(self.in_shape)[np.ix_(*[m[v] for m, v in zip(self.maps, valid)])]
            y[np.ix_(*valid)] = src
            return
        make_calls(self.calls(x, out))


_MODES = ("constant", "reflect", "edge", "wrap")


def zero_of(dtype):
    """The zero of an element type (the empty string for strings)."""
    return "" if np.dtype(dtype) == object else 0


def pad_map(mode: str, n: int, begin: int, end: int):
    """Index map of one axis of extent ``n`` padded by ``begin``/``end`` (negative: removed),
    or a reason why it cannot be."""
    size = n + begin + end
    lo, hi = max(0, -begin), n - max(0, -end)
    if size < 0 or hi < lo:
        return f"pads ({begin}, {end}) remove more than the extent {n}"
    w = hi - lo
    i = np.arange(size, dtype=np.int64) - max(begin, 0)
    if mode == "constant":
        return np.where((i >= 0) & (i < w), i + lo, -1)
    if w == 0:
        return None if size == 0 else f"mode {mode} cannot pad an axis with no elements left"
    if mode == "edge":
        return np.clip(i, 0, w - 1) + lo
    if mode == "wrap":
        return i % w + lo
    if w == 1:
        return np.full(size, lo, np.int64)
    period = 2 * (w - 1)
    j = i % period
    return np.where(j >= w, period - j, j) + lo


class Pad(OpKernel):
    """See the module docstring. pads (attribute ``paddings`` in opset 1, ``pads`` until 10,
    input 1 from 11) lists every begin then every end; ``axes`` (input 3, opset 18+) names
    the padded axes; the constant is attribute ``value`` before 11, input 2 from it."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.mode = str(node.attr("mode", "constant"))
        if self.mode not in _MODES or (self.mode == "wrap" and node.opset < 19):
            node.fail(f"mode {self.mode!r} is not supported at opset {node.opset}")
        self.from_inputs = node.opset >= 11
        if not self.from_inputs:
            pads = node.attr("pads" if node.opset >= 2 else "paddings")
            if pads is None:
                node.fail("attribute 'pads' is required")
            self.pads = [int(p) for p in pads]
            self.value = float(node.attr("value", 0.0))

    def infer(self, ctx: InferContext) -> None:
        dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
        r = len(shape)
        axes = list(range(r))
        if self.from_inputs:
            pads = ctx.int_list(1)
            value = ctx.value(2) if ctx.has_input(2) else np.array([zero_of(dt)], dt)
            given = ctx.int_list(3) if ctx.has_input(3) else axes
            if pads is None or value is None or given is None:
                ctx.require_run_time_values()
                return
            if value.size != 1:
                ctx.bad_input(f"constant_value must have one element, got {value.size}")
            value = value.reshape(-1)[0]
            axes = [normalize_axis(ctx, a, r) for a in given]
            if len(set(axes)) != len(axes):
                ctx.bad_input(f"axes {given} name an axis twice")
        else:
            pads, value = self.pads, self.value
        if len(pads) != 2 * len(axes):
            ctx.bad_input(f"{len(pads)} pads given for {len(axes)} axes (2 per axis needed)")
        maps = [np.arange(n, dtype=np.int64) for n in shape]
        for a, begin, end in zip(axes, pads, pads[len(axes):]):
            m = pad_map(self.mode, shape[a], begin, end)
            if isinstance(m, str):
                ctx.bad_input(f"axis {a}: {m}")
            maps[a] = m
        ctx.set_output(0, dt, [m.size for m in maps])
        ctx.prepared = AxisMaps(dt, shape, maps, value)

    def jit_calls(self, ctx: RunContext):
        return ctx.prepared.calls(ctx.flat_in[0], ctx.flat_out[0])

    def run(self, ctx: RunContext) -> None:
        ctx.prepared(ctx.flat_in[0], ctx.flat_out[0])


def shape_input(ctx: InferContext, i: int):
    """The extents listed by input ``i``, none negative; None when they are known only at
    run time (the node is then inferred again with them)."""
    target = ctx.int_list(i)
    if target is None:
        ctx.require_run_time_values()
    elif any(d < 0 for d in target):
        ctx.bad_input(f"shape {target} has a negative extent")
    return target


class Expand(OpKernel):
    """y = x broadcast with the shape input (numpy's rules, so the result may be larger than
    the shape asked for where x is)."""

    supports_exact = True

    def infer(self, ctx: InferContext) -> None:
        dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
        target = shape_input(ctx, 1)
        if target is None:
            return
        out = broadcast_shape([shape, tuple(target)], ctx.bad_input)
        ctx.set_output(0, dt, out)
        ctx.prepared = Window(dt, out, element_strides(shape, out))

    def jit_calls(self, ctx: RunContext):
        return ctx.prepared.calls(ctx.flat_in[0], ctx.flat_out[0])

    def run(self, ctx: RunContext) -> None:
        ctx.prepared(ctx.flat_in[0], ctx.flat_out[0])


class Tile(OpKernel):
    """y[o_0, .., o_{r-1}] = x[o_0 mod n_0, .., o_{r-1} mod n_{r-1}], y's extents n_d *
    repeats[d]."""

    supports_exact = True

    def infer(self, ctx: InferContext) -> None:
        dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
        reps = ctx.int_list(1)
        if reps is None:
            ctx.require_run_time_values()
            return
        if len(reps) != len(shape) or any(k < 0 for k in reps):
            ctx.bad_input(f"repeats {reps} must be {len(shape)} non-negative counts")
        ctx.set_output(0, dt, [n * k for n, k in zip(shape, reps)])
        # the output seen as (repeats_0, n_0, repeats_1, n_1, ...): repeats read with stride 0
        split = [e for pair in zip(reps, shape) for e in pair]
        strides = [e for s in c_strides(shape) for e in (0, s)]
        ctx.prepared = Window(dt, split, strides)

    def jit_calls(self, ctx: RunContext):
        return ctx.prepared.calls(ctx.flat_in[0], ctx.flat_out[0])

    def run(self, ctx: RunContext) -> None:
        ctx.prepared(ctx.flat_in[0], ctx.flat_out[0])
