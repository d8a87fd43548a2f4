"""Sequence and optional operators over packed values (graphrt/packed.py).

All outputs are data-dependent (a packed value's size depends on the elements); the work
is plain data movement in numpy, so every operator here is exact.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt, packed
from ...errors import ErrorKind
from ..core.base import OpKernel, RunContext


class _SeqKernel(OpKernel):
    supports_exact = True
    outputs_data_dependent = True

    def seq(self, ctx: RunContext, i: int) -> tuple[list, np.dtype]:
        v = ctx.inputs[i]
        if not packed.is_packed(v) or packed.kind_of(v) != packed.SEQUENCE:
            self.node.fail(f"input {i} must be a sequence", ErrorKind.INVALID_INPUT)
        return packed.unpack_sequence(v)

    def position(self, ctx: RunContext, i: int, n: int, default: int, allow_end: bool) -> int:
        """A position input (negative counts from the end) checked against length n."""
        v = ctx.inputs[i] if i < len(ctx.inputs) else None
        if v is None:
            return default
        p = int(v.reshape(-1)[0])
        hi = n if allow_end else n - 1
        if not -n <= p <= hi:
            self.node.fail(f"position {p} is out of range for a sequence of length {n}",
                           ErrorKind.INVALID_INPUT)
        return p + n if p < 0 else p

    def put(self, ctx: RunContext, items, dtype) -> None:
        ctx.set_output_value(0, packed.pack_sequence(items, dtype))


class SequenceEmpty(_SeqKernel):
    def run(self, ctx):
        self.put(ctx, [], _dt.to_numpy(self.node.attr("dtype", 1)))


class SequenceConstruct(_SeqKernel):
    def run(self, ctx):
        items = list(ctx.inputs[:ctx.node.n_inputs])
        if len({x.dtype for x in items}) > 1:
            self.node.fail("the tensors of a sequence must share one element type")
        self.put(ctx, items, items[0].dtype)


class SequenceInsert(_SeqKernel):
    def run(self, ctx):
        items, dt = self.seq(ctx, 0)
        x = ctx.inputs[1]
        if items and x.dtype != dt:
            self.node.fail(f"cannot insert {_dt.name_of(x.dtype)} into a sequence of {_dt.name_of(dt)}")
        items.insert(self.position(ctx, 2, len(items), len(items), True), x)
        self.put(ctx, items, x.dtype)


class SequenceErase(_SeqKernel):
    def run(self, ctx):
        items, dt = self.seq(ctx, 0)
        if not items:
            self.node.fail("cannot erase from an empty sequence", ErrorKind.INVALID_INPUT)
        del items[self.position(ctx, 1, len(items), len(items) - 1, False)]
        self.put(ctx, items, dt)


class SequenceAt(_SeqKernel):
    def run(self, ctx):
        items, _ = self.seq(ctx, 0)
        if not items:
            self.node.fail("cannot index an empty sequence", ErrorKind.INVALID_INPUT)
        ctx.set_output_value(0, items[self.position(ctx, 1, len(items), 0, False)])


class SequenceLength(_SeqKernel):
    def run(self, ctx):
        ctx.set_output_value(0, np.array(len(self.seq(ctx, 0)[0]), np.int64))


class ConcatFromSequence(_SeqKernel):
    """Concatenates along ``axis``, or stacks on a new axis when new_axis=1."""

    def run(self, ctx):
        items, _ = self.seq(ctx, 0)
        axis, new = self.node.attr("axis"), self.node.attr("new_axis", 0)
        if axis is None:
            self.node.fail("attribute 'axis' is required")
        if not items:
            self.node.fail("cannot concatenate an empty sequence", ErrorKind.INVALID_INPUT)
        rank = items[0].ndim + (1 if new else 0)
        if not -rank <= axis < rank:
            self.node.fail(f"axis {axis} is out of range for rank {rank}")
        try:
            out = np.stack(items, axis) if new else np.concatenate(items, axis)
        except ValueError as e:
            self.node.fail(f"the tensors do not fit together: {e}", ErrorKind.INVALID_INPUT)
        ctx.set_output_value(0, out)


class SplitToSequence(_SeqKernel):
    """Splits along ``axis`` into pieces of the given lengths, or equal pieces of a scalar
    length, or single slices (dropping the axis unless keepdims) when no split is given."""

    def run(self, ctx):
        x = ctx.inputs[0]
        axis = self.node.attr("axis", 0)
        if not -x.ndim <= axis < x.ndim:
            self.node.fail(f"axis {axis} is out of range for rank {x.ndim}")
        axis %= x.ndim
        n = x.shape[axis]
        split = ctx.inputs[1] if len(ctx.inputs) > 1 else None
        if split is None:
            pieces = [np.take(x, [i], axis) for i in range(n)]
            if not self.node.attr("keepdims", 1):
                pieces = [np.squeeze(p, axis) for p in pieces]
        else:
            if split.ndim == 0:
                step = int(split)
                if step <= 0:
                    self.node.fail("split must be positive", ErrorKind.INVALID_INPUT)
                lengths = [step] * (n // step) + ([n % step] if n % step else [])
            else:
                lengths = [int(s) for s in split]
                if any(s < 0 for s in lengths) or sum(lengths) != n:
                    self.node.fail(f"split {lengths} does not add up to {n}", ErrorKind.INVALID_INPUT)
            bounds = np.cumsum([0] + lengths)
            pieces = [np.take(x, range(a, b), axis) for a, b in zip(bounds, bounds[1:])]
        self.put(ctx, pieces, x.dtype)


class Optional(_SeqKernel):
    def run(self, ctx):
        x = ctx.inputs[0] if ctx.node.n_inputs and ctx.inputs[0] is not None else None
        tp = self.node.attr("type")          # the importer's (kind, element code) pair
        elem = _dt.to_numpy(tp[1]) if x is None and tp is not None and tp[1] else None
        ctx.set_output_value(0, packed.pack_optional(x, elem))


class OptionalHasElement(_SeqKernel):
    def run(self, ctx):
        x = ctx.inputs[0] if ctx.node.n_inputs else None
        has = x is not None and not (packed.is_packed(x) and packed.kind_of(x) == packed.OPTIONAL_NONE)
        ctx.set_output_value(0, np.array(has))


class OptionalGetElement(_SeqKernel):
    def run(self, ctx):
        x = ctx.inputs[0]
        if packed.is_packed(x) and packed.kind_of(x) != packed.SEQUENCE:
            if packed.kind_of(x) == packed.OPTIONAL_NONE:
                self.node.fail("the optional is empty", ErrorKind.INVALID_INPUT)
            x = x[5:].copy() if packed.kind_of(x) == packed.OPTIONAL_SEQ else packed.unpack_optional(x)
        ctx.set_output_value(0, x)
