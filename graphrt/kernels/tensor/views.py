"""Reshape, Identity, Flatten, Squeeze, Unsqueeze: output 0 is input 0 with a new shape.

Only ``infer`` exists: the planner makes the view, so these are exact (no data is touched).
Axes may be negative (counted from the end) wherever ONNX allows it; out-of-range or
repeated axes are model errors.
"""
from __future__ import annotations

import math

from ..core.base import InferContext, OpKernel


class _View(OpKernel):
    supports_exact = True
    view_of_input = True


def unique_axes(ctx: InferContext, axes, rank: int, what: str = "axis") -> list[int]:
    """``axes`` normalised to [0, rank); out of range or repeated axes fail."""
    out = []
    for a in axes:
        if not -rank <= a < rank:
            ctx.fail(f"{what} {a} is out of range for rank {rank}")
        a = a + rank if a < 0 else a
        if a in out:
            ctx.fail(f"{what} {a} is given twice in {list(axes)}")
        out.append(a)
    return out


class Identity(_View):
    """y = x."""

    def infer(self, ctx: InferContext) -> None:
        ctx.set_output(0, ctx.dtype(0), ctx.shape(0))


class Reshape(_View):
    """The data with the shape of input 1: an entry 0 copies the input's extent at that
    position (unless allowzero=1, opset 14+, where 0 is an extent), one entry may be -1 and is
    inferred so that the element count is kept."""

    def __init__(self, node):
        super().__init__(node)
        self.allowzero = node.opset >= 14 and int(node.attr("allowzero", 0)) != 0

    def infer(self, ctx: InferContext) -> None:
        dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
        ctx.dtype(1)                # the shape input is required
        target = ctx.int_list(1)
        if target is None:
            ctx.require_run_time_values()
            return

        def bad(why):
            ctx.bad_input(f"cannot reshape {list(shape)} to {target}: {why}")

        out = []
        unknown = None
        for i, d in enumerate(target):
            if d == 0 and not self.allowzero:
                if i >= len(shape):
                    bad(f"entry {i} is 0 but the input has rank {len(shape)}")
                d = shape[i]
            elif d == -1:
                if unknown is not None:
                    bad("more than one -1")
                if self.allowzero and 0 in target:
                    bad("-1 together with 0 under allowzero=1")
                unknown = i
            elif d < 0:
                bad(f"negative extent {d}")
            out.append(d)
        size = math.prod(shape)
        if unknown is not None:
            known = math.prod(d for i, d in enumerate(out) if i != unknown)
            if known == 0 or size % known:
                bad("the -1 extent cannot be inferred")
            out[unknown] = size // known
        elif math.prod(out) != size:
            bad(f"{size} elements do not fit")
        ctx.set_output(0, dt, out)


class Flatten(_View):
    """A matrix: the extents before ``axis`` (default 1) multiplied, then those from it."""

    def __init__(self, node):
        super().__init__(node)
        self.axis = int(node.attr("axis", 1))

    def infer(self, ctx: InferContext) -> None:
        shape = tuple(ctx.shape(0))
        r = len(shape)
        if not -r <= self.axis <= r:
            ctx.fail(f"axis {self.axis} is out of range for rank {r}")
        axis = self.axis + r if self.axis < 0 else self.axis
        ctx.set_output(0, ctx.dtype(0), (math.prod(shape[:axis]), math.prod(shape[axis:])))


class _AxesView(_View):
    """Shared: the axes, an attribute before opset 13 and input 1 from it."""

    def __init__(self, node):
        super().__init__(node)
        self.from_input = node.opset >= 13
        attr = node.attr("axes")
        self.axes = None if self.from_input or attr is None else [int(a) for a in attr]


class Squeeze(_AxesView):
    """The input without the listed unit axes (attribute before opset 13, input 1 from it);
    no axes (or an empty list) removes every unit axis."""

    def infer(self, ctx: InferContext) -> None:
        shape = tuple(ctx.shape(0))
        axes = self.axes
        if self.from_input and ctx.has_input(1):
            axes = ctx.int_list(1)
            if axes is None:
                ctx.require_run_time_values()
                return
        if not axes:                # absent or empty: every unit axis (as onnxruntime does)
            drop = [i for i, d in enumerate(shape) if d == 1]
        else:
            drop = unique_axes(ctx, axes, len(shape))
            for a in drop:
                if shape[a] != 1:
                    ctx.fail(f"cannot squeeze axis {a} of extent {shape[a]} in {list(shape)}")
        ctx.set_output(0, ctx.dtype(0), [d for i, d in enumerate(shape) if i not in drop])


class Unsqueeze(_AxesView):
    """The input with unit axes inserted at the listed output positions (attribute before
    opset 13, input 1 from it); negative axes count from the end of the output."""

    def infer(self, ctx: InferContext) -> None:
        shape = tuple(ctx.shape(0))
        if self.from_input:
            ctx.dtype(1)            # the axes input is required
            axes = ctx.int_list(1)
            if axes is None:
                ctx.require_run_time_values()
                return
        else:
            axes = self.axes
            if axes is None:
                ctx.fail("attribute 'axes' is required")
        rank = len(shape) + len(axes)
        insert = set(unique_axes(ctx, axes, rank))
        rest = iter(shape)
        ctx.set_output(0, ctx.dtype(0), [1 if i in insert else next(rest) for i in range(rank)])
