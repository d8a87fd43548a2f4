"""Slice, Split, Compress, ReverseSequence, Trilu, CenterCropPad: parts of a tensor, moved
as they are (exact by construction).

Positive-step slices and split parts are windows of the input (gather.Window, layout's
strided copy); negative steps and center crops/pads use expand.AxisMaps.
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext
from ..core.broadcast import PARALLEL_MIN
from ..core.jit import Variants
from ..core.words import word_of
from .expand import AxisMaps, pad_map, zero_of
from .gather import Take, Window, c_strides, normalize_axis
from .views import unique_axes

EXACT = False


def _unique_axes(node, axes, what="axes"):
    if axes is not None and len(set(axes)) != len(axes):
        node.fail(f"{what} {list(axes)} name an axis twice")
    return axes


def slice_range(start: int, end: int, step: int, n: int):
    """(first index, count) of start:end:step on an axis of extent n, clamped as ONNX says:
    negative values count from the end; for step > 0 both are clamped to [0, n], for step < 0
    start to [0, n-1] and end to [-1, n-1]."""
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), n), min(max(end, 0), n)
        return start, max(0, -(-(end - start) // step))
    start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
    return start, max(0, -(-(start - end) // -step))


class Slice(OpKernel):
    """y = x[starts[a]:ends[a]:steps[a] on each listed axis a, the other axes whole]
    (attributes starts/ends/axes before opset 10, inputs 1-4 from it)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.from_inputs = node.opset >= 10
        if not self.from_inputs:
            starts, ends = node.attr("starts"), node.attr("ends")
            if starts is None or ends is None:
                node.fail("attributes 'starts' and 'ends' are required")
            self.starts, self.ends = [int(v) for v in starts], [int(v) for v in ends]
            axes = node.attr("axes")
            self.axes = _unique_axes(node, None if axes is None else [int(a) for a in axes])

    def infer(self, ctx: InferContext) -> None:
        dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
        if self.from_inputs:
            starts, ends = ctx.int_list(1), ctx.int_list(2)
            axes = ctx.int_list(3) if ctx.has_input(3) else None
            steps = ctx.int_list(4) if ctx.has_input(4) else None
            if starts is None or ends is None or (axes is None and ctx.has_input(3)) \
                    or (steps is None and ctx.has_input(4)):
                ctx.require_run_time_values()
                return
            bad = ctx.bad_input
        else:
            starts, ends, axes, steps = self.starts, self.ends, self.axes, None
            bad = ctx.fail
        axes = list(range(len(starts))) if axes is None else axes
        steps = [1] * len(starts) if steps is None else steps
        if not len(starts) == len(ends) == len(axes) == len(steps):
            bad(f"starts, ends, axes and steps have different lengths ({len(starts)}, "
                f"{len(ends)}, {len(axes)}, {len(steps)})")
        axes = [normalize_axis(ctx, a, len(shape)) for a in axes]
        if len(set(axes)) != len(axes):
            bad(f"axes {axes} name an axis twice")
        first = [0] * len(shape)
        count = list(shape)
        step = [1] * len(shape)
        for a, b, e, s in zip(axes, starts, ends, steps):
            if s == 0:
                bad(f"step 0 on axis {a}")
            first[a], count[a] = slice_range(b, e, s, shape[a])
            step[a] = s
        ctx.set_output(0, dt, count)
        if all(s > 0 or c <= 1 for s, c in zip(step, count)):
            strides = c_strides(shape)
            base = sum(f * st for f, st, c in zip(first, strides, count) if c)
            ctx.prepared = Window(dt, count, [st * abs(s) for st, s in zip(strides, step)], base)
        else:
            maps = [f + s * np.arange(c, dtype=np.int64) for f, s, c in zip(first, step, count)]
            ctx.prepared = AxisMaps(dt, shape, maps)

    def jit_calls(self, ctx: RunContext):
        return _window_calls([ctx.prepared], ctx.flat_in[0], ctx.flat_out)

    def run(self, ctx: RunContext) -> None:
        ctx.prepared(ctx.flat_in[0], ctx.flat_out[0])


def _window_calls(windows, x, outs):
    """jit_calls of copies ``windows`` of x into ``outs`` (an output may be unused: None);
    None when a window is not a Window (AxisMaps) or numpy moves its type."""
    calls = []
    for window, out in zip(windows, outs):
        if out is None:
            continue
        more = window.calls(x, out) if isinstance(window, Window) else None
        if more is None:
            return None
        calls += more
    return calls


class Split(OpKernel):
    """The input cut along ``axis`` into consecutive parts: their sizes from the ``split``
    attribute (before opset 13) or input 1 (opset 1 and 13+), else equal parts, one per
    output; opset 18's ``num_outputs`` allows a smaller last part (sizes ceil(n / count))."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.axis = int(node.attr("axis", 0))
        split = node.attr("split") if node.opset < 13 else None
        self.split = None if split is None else [int(s) for s in split]
        num = node.attr("num_outputs") if node.opset >= 18 else None
        self.num_outputs = None if num is None else int(num)
        if self.num_outputs is not None and self.num_outputs != node.n_outputs:
            node.fail(f"num_outputs {self.num_outputs} differs from the {node.n_outputs} outputs")

    def infer(self, ctx: InferContext) -> None:
        dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
        axis = normalize_axis(ctx, self.axis, len(shape))
        n, parts = shape[axis], self.node.n_outputs
        split, bad = self.split, ctx.fail
        if split is None and ctx.has_input(1):
            split, bad = ctx.int_list(1), ctx.bad_input
            if split is None:
                ctx.require_run_time_values()
                return
        if split is None:
            size = -(-n // parts) if self.num_outputs is not None else n // parts
            split = [size] * (parts - 1) + [n - size * (parts - 1)]
            if split[-1] < 0 or (self.num_outputs is None and n % parts):
                ctx.fail(f"cannot split extent {n} into {parts} parts")
        if len(split) != parts or any(s < 0 for s in split) or sum(split) != n:
            bad(f"split {split} does not cut extent {n} into {parts} parts")
        outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
        windows, offset = [], 0
        for i, s in enumerate(split):
            out = shape[:axis] + (s,) + shape[axis + 1:]
            ctx.set_output(i, dt, out)
            windows.append(Window(dt, (outer, s, inner), (n * inner, inner, 1), offset * inner))
            offset += s
        ctx.prepared = windows

    def jit_calls(self, ctx: RunContext):
        return _window_calls(ctx.prepared, ctx.flat_in[0], ctx.flat_out)

    def run(self, ctx: RunContext) -> None:
        x = ctx.flat_in[0]
        for window, out in zip(ctx.prepared, ctx.flat_out):
            if out is not None:
                window(x, out)


class Compress(OpKernel):
    """y = the slices of x along ``axis`` whose condition entry is true (x flattened when
    there is no axis); condition may be shorter than the axis."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        axis = node.attr("axis")
        self.axis = None if axis is None else int(axis)

    def infer(self, ctx: InferContext) -> None:
        dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
        ctx.check_dtype(1, _dt.BOOL, " (condition)")
        if len(ctx.shape(1)) != 1:
            ctx.fail(f"condition must be 1-D, got shape {list(ctx.shape(1))}")
        cond = ctx.value(1)
        if cond is None:
            ctx.require_run_time_values()
            return
        if self.axis is None:
            outer, n, inner, head, tail = 1, math.prod(shape), 1, (), ()
        else:
            axis = normalize_axis(ctx, self.axis, len(shape))
            outer, n, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
            head, tail = shape[:axis], shape[axis + 1:]
        picks = np.flatnonzero(cond)
        if picks.size and picks[-1] >= n:
            ctx.bad_input(f"condition selects index {int(picks[-1])} of an axis of extent {n}")
        ctx.set_output(0, dt, head + (picks.size,) + tail)
        ctx.prepared = (Take(dt, outer, n, inner, picks.size), picks)

    def run(self, ctx: RunContext) -> None:
        take, picks = ctx.prepared
        take(ctx.flat_in[0], picks, ctx.flat_out[0])


def _reverse_sequence(x, out, lens, sb, st, batch, time, inner):
    for b in prange(batch):
        n = lens[b]
        for t in range(time):
            src = n - 1 - t if t < n else t
            d = out[b * sb + t * st:b * sb + t * st + inner]
            s = x[b * sb + src * st:b * sb + src * st + inner]
            for e in range(inner):
                d[e] = s[e]


_REVERSE_SEQUENCE = Variants(_reverse_sequence, "reverse_sequence", parallel=True)


class ReverseSequence(OpKernel):
    """For each batch entry b: y[b, t] = x[b, lens[b] - 1 - t] for t < lens[b], x[b, t]
    after (batch and time are axes 0 and 1 in either order)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.batch_axis = int(node.attr("batch_axis", 1))
        self.time_axis = int(node.attr("time_axis", 0))
        if {self.batch_axis, self.time_axis} != {0, 1}:
            node.fail(f"batch_axis {self.batch_axis} and time_axis {self.time_axis} must be "
                      "0 and 1")

    def infer(self, ctx: InferContext) -> None:
        dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
        if len(shape) < 2:
            ctx.fail(f"input must have rank >= 2, got {list(shape)}")
        batch, time = shape[self.batch_axis], shape[self.time_axis]
        if ctx.dtype(1) not in (np.int32, np.int64) or tuple(ctx.shape(1)) != (batch,):
            ctx.fail(f"sequence_lens must be an integer tensor of shape [{batch}]")
        inner = math.prod(shape[2:])
        sb, st = (time * inner, inner) if self.batch_axis == 0 else (inner, batch * inner)
        ctx.set_output(0, dt, shape)
        fn = _REVERSE_SEQUENCE.get(False, math.prod(shape) >= PARALLEL_MIN and batch > 1)
        ctx.prepared = (word_of(dt), sb, st, batch, time, inner, fn)

    def run(self, ctx: RunContext) -> None:
        word, sb, st, batch, time, inner, fn = ctx.prepared
        lens = ctx.flat_in[1]
        if lens.size and (lens.min() < 0 or lens.max() > time):
            bad = int(lens.min()) if lens.min() < 0 else int(lens.max())
            self.node.fail(f"sequence length {bad} is out of range [0, {time}]",
                           ErrorKind.INVALID_INPUT)
        x, out = ctx.flat_in[0], ctx.flat_out[0]
        if word is None:
            out[...] = x
            for b in range(batch):
                for t in range(int(lens[b])):
                    s, d = b * sb + (int(lens[b]) - 1 - t) * st, b * sb + t * st
                    out[d:d + inner] = x[s:s + inner]
        elif inner:
            fn(x.view(word), out.view(word), lens, sb, st, batch, time, inner)


def _trilu(x, out, rows, cols, k, upper, tasks):
    for t in prange(tasks):
        i = t % rows
        if upper:
            lo, hi = min(max(i + k, 0), cols), cols
        else:
            lo, hi = 0, min(max(i + k + 1, 0), cols)
        src = x[t * cols:(t + 1) * cols]
        dst = out[t * cols:(t + 1) * cols]
        for j in range(cols):
            dst[j] = src[j] if lo <= j < hi else 0


_TRILU = Variants(_trilu, "trilu", parallel=True)


class Trilu(OpKernel):
    """y[.., i, j] = x[.., i, j] where j - i >= k (upper, the default) or j - i <= k (lower),
    else 0; k is input 1 (default 0)."""

    supports_exact = True
    in_place_input = True

    def __init__(self, node):
        super().__init__(node)
        self.upper = int(node.attr("upper", 1)) != 0

    def infer(self, ctx: InferContext) -> None:
        dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
        if len(shape) < 2:
            ctx.fail(f"input must have rank >= 2, got {list(shape)}")
        if ctx.has_input(1) and (ctx.dtype(1) != np.int64 or math.prod(ctx.shape(1)) != 1):
            ctx.fail("k must be one INT64 value")
        ctx.set_output(0, dt, shape)
        rows, cols = shape[-2], shape[-1]
        tasks = math.prod(shape[:-1]) if cols else 0
        fn = _TRILU.get(False, math.prod(shape) >= PARALLEL_MIN and tasks > 1)
        ctx.prepared = (word_of(dt), rows, cols, tasks, fn)

    def run(self, ctx: RunContext) -> None:
        word, rows, cols, tasks, fn = ctx.prepared
        k = int(ctx.flat_in[1][0]) if len(ctx.flat_in) > 1 and ctx.flat_in[1] is not None else 0
        k = min(max(k, -rows - 1), cols + 1)        # beyond these every row is the same
        x, out = ctx.flat_in[0], ctx.flat_out[0]
        if word is None:
            i = np.arange(rows)[:, None]
            j = np.arange(cols)[None, :]
            keep = (j - i >= k) if self.upper else (j - i <= k)
            y = ctx.outputs[0]
            y[...] = np.where(keep, ctx.inputs[0], np.array(zero_of(y.dtype), y.dtype))
        elif tasks:
            fn(x.view(word), out.view(word), rows, cols, k, self.upper, tasks)


class CenterCropPad(OpKernel):
    """Each listed axis (all by default) brought to the extent in input 1: centered crop
    (start rounded down) or centered zero padding (the odd element at the end)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        axes = node.attr("axes")
        self.axes = _unique_axes(node, None if axes is None else [int(a) for a in axes])

    def infer(self, ctx: InferContext) -> None:
        dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
        target = ctx.int_list(1)
        if target is None:
            ctx.require_run_time_values()
            return
        r = len(shape)
        axes = list(range(r)) if self.axes is None else unique_axes(ctx, self.axes, r)
        if len(target) != len(axes):
            ctx.bad_input(f"shape {target} must list one extent for each of the {len(axes)} axes")
        maps = [np.arange(n, dtype=np.int64) for n in shape]
        for a, s in zip(axes, target):
            if s < 0:
                ctx.bad_input(f"negative extent {s} in shape {target}")
            d = s - shape[a]
            begin = d // 2 if d >= 0 else -((-d) // 2)
            maps[a] = pad_map("constant", shape[a], begin, d - begin)
        ctx.set_output(0, dt, [m.size for m in maps])
        ctx.prepared = AxisMaps(dt, shape, maps, zero_of(dt))

    def run(self, ctx: RunContext) -> None:
        ctx.prepared(ctx.flat_in[0], ctx.flat_out[0])
