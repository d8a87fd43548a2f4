"""Transpose and Concat: pure data movement, so exact by construction.

Elements are moved as unsigned integers of their width (bool and int8 as uint8, float32 as
uint32, ...): the bits are copied unchanged, NaN payloads included, and one compiled kernel
serves every element type of a width. Types numba cannot move this way (strings, complex128)
are moved by numpy.
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..core.base import InferContext, OpKernel, RunContext, folding, make_calls
from ..core.broadcast import BLOCK, PARALLEL_MIN, Walk, row_offset
from ..core.jit import Variants
from ..core.words import word_of

EXACT = False
MIN_TASKS = 8       # a parallel move of short rows is cut into at least this many tasks

def _gather(x, out, shape, sx, block, tasks):
    """out (C order over ``shape``) [i] = x[offset of i along strides ``sx``]. A task moves
    ``block`` elements: part of a row where rows are longer, else block // inner whole rows
    (row_tasks), stepping from one row's offset to the next by the last outer axis's stride:
    rows of a few elements (a detector head split into 2 + 2 + 21 columns) cost a division
    or two each otherwise, about ten times the move."""
    r = shape.size
    inner = shape[r - 1]
    per_row = (inner + block - 1) // block
    span = block // inner if inner else 1
    ix = sx[r - 1]
    rows = out.size // inner if inner else 0
    for t in prange(tasks):
        if span > 1:
            r0 = t * span
            r1 = min(rows, r0 + span)
            o = np.uint64(r0 * inner)
            n = np.uint64(inner)
            step = np.uint64(ix)
            last, s_last = shape[r - 2], sx[r - 2]     # (span > 1: there are outer axes)
            row = r0
            while row < r1:
                # the rows up to the next carry out of the last outer axis step by its
                # stride; unsigned indices, so numba adds no negative-index wraparound
                ox = row_offset(row, shape, sx)
                end = min(r1, row + last - row % last)
                for _ in range(row, end):
                    at_x = np.uint64(ox)
                    for j in range(n):
                        out[o + j] = x[at_x + j * step]
                    o += n
                    ox += s_last
                row = end
        else:
            row = t // per_row
            j0 = (t - row * per_row) * block
            w = min(inner, j0 + block) - j0
            ox = row_offset(row, shape, sx)
            dst = out[row * inner + j0:row * inner + j0 + w]
            if ix == 1:
                src = x[ox + j0:ox + j0 + w]
                for j in range(w):
                    dst[j] = src[j]
            else:
                ox += j0 * ix
                for j in range(w):
                    dst[j] = x[ox + j * ix]


def _place(src, dst, chunk, row, offset, block, tasks):
    """Row o of ``src`` (``chunk`` elements) goes to dst[o * row + offset:][:chunk]; a task
    moves ``block`` elements, part of a row or block // chunk whole rows (see _gather)."""
    per_row = (chunk + block - 1) // block
    span = block // chunk if chunk else 1
    outer = src.size // chunk if chunk else 0
    for t in prange(tasks):
        if span > 1:
            n = np.uint64(chunk)
            for o in range(t * span, min(outer, t * span + span)):
                d = np.uint64(o * row + offset)     # (unsigned: see _gather)
                c = np.uint64(o * chunk)
                for j in range(n):
                    dst[d + j] = src[c + j]
        else:
            o = t // per_row
            j0 = (t - o * per_row) * block
            w = min(chunk, j0 + block) - j0
            s = src[o * chunk + j0:o * chunk + j0 + w]
            d = dst[o * row + offset + j0:o * row + offset + j0 + w]
            for j in range(w):
                d[j] = s[j]


def walk_tasks(walk: Walk) -> tuple[int, int]:
    """row_tasks for a strided move along ``walk``."""
    return row_tasks(int(walk.shape[-1]), int(np.prod(walk.shape[:-1])), walk.parallel)


def row_tasks(inner: int, rows: int, parallel: bool) -> tuple[int, int]:
    """(block, tasks) for _gather and _place over ``rows`` rows of ``inner`` elements: a
    serial move is one task; a parallel one BLOCK elements a task, whole rows where they
    are shorter."""
    if not inner or not rows:
        return max(inner, 1), 0
    if not parallel:
        return inner * rows, 1
    if inner >= BLOCK:
        return BLOCK, rows * -(-inner // BLOCK)
    span = max(1, min(BLOCK // inner, -(-rows // MIN_TASKS)))
    return span * inner, -(-rows // span)


# Moving bits is the same in both modes: only the fast variants are ever compiled.
STRIDED_GATHER = Variants(_gather, "transpose", parallel=True)
_PLACE = Variants(_place, "concat", parallel=True)


class Transpose(OpKernel):
    """y[i_0, ..., i_{r-1}] = x[j] with j[perm[d]] = i_d; perm defaults to reversed axes."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        perm = node.attr("perm")
        self.perm = None if perm is None else [int(p) for p in perm]

    def infer(self, ctx: InferContext) -> None:
        dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
        r = len(shape)
        perm = list(range(r - 1, -1, -1)) if self.perm is None else self.perm
        if sorted(perm) != list(range(r)):
            ctx.fail(f"perm {perm} is not a permutation of the {r} axes of {list(shape)}")
        out_shape = [shape[p] for p in perm]
        ctx.set_output(0, dt, out_shape)
        word = word_of(dt)
        if word is None:
            ctx.prepared = (None, perm, None)
            return
        strides = [0] * r
        step = 1
        for axis in range(r - 1, -1, -1):
            strides[axis] = step
            step *= shape[axis]
        # Unit axes are dropped first: Walk's axis merging compares strides of neighbouring
        # axes and expects a unit axis to have stride 0, which a permuted stride is not.
        kept = [d for d in range(r) if out_shape[d] != 1]
        walk = Walk([out_shape[d] for d in kept], [[strides[perm[d]] for d in kept]])
        ctx.prepared = (word, perm, (walk, STRIDED_GATHER.get(False, walk.parallel),
                                     walk_tasks(walk)))

    def jit_calls(self, ctx: RunContext):
        word, _, data = ctx.prepared
        if word is None:
            return None
        w, fn, (block, tasks) = data
        return [(fn, (ctx.flat_in[0].view(word), ctx.flat_out[0].view(word), w.shape,
                      w.strides[0], block, tasks))]

    def run(self, ctx: RunContext) -> None:
        calls = None if folding() else self.jit_calls(ctx)
        if calls is None:
            np.copyto(ctx.outputs[0], np.transpose(ctx.inputs[0], ctx.prepared[1]))
            return
        make_calls(calls)


class Concat(OpKernel):
    """The inputs joined along ``axis`` (negative counts from the end); all other extents
    must agree. Seen as matrices (extents before axis) x (the rest), each input is a block
    of columns of the output."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        axis = node.attr("axis")
        if axis is None and node.opset >= 4:
            node.fail("attribute 'axis' is required")
        self.axis = 1 if axis is None else int(axis)

    def infer(self, ctx: InferContext) -> None:
        n = ctx.n_inputs
        if n == 0:
            ctx.fail("at least one input is required")
        dt = ctx.same_dtype(*range(n))
        shapes = [tuple(ctx.shape(i)) for i in range(n)]
        r = len(shapes[0])
        if not -r <= self.axis < r:
            ctx.fail(f"axis {self.axis} is out of range for rank {r}")
        axis = self.axis + r if self.axis < 0 else self.axis
        for s in shapes[1:]:
            if len(s) != r or s[:axis] != shapes[0][:axis] or s[axis + 1:] != shapes[0][axis + 1:]:
                ctx.fail(f"shapes {', '.join(str(list(x)) for x in shapes)} cannot be joined "
                         f"along axis {axis}")
        out_shape = list(shapes[0])
        out_shape[axis] = sum(s[axis] for s in shapes)
        ctx.set_output(0, dt, out_shape)
        outer = math.prod(out_shape[:axis])
        row = math.prod(out_shape[axis:])
        word = word_of(dt)
        parallel = outer * row >= PARALLEL_MIN
        parts = []
        offset = 0
        for i, s in enumerate(shapes):
            chunk = math.prod(s[axis:])
            if chunk and outer:
                parts.append((i, chunk, offset, *row_tasks(chunk, outer, parallel)))
            offset += chunk
        fn = _PLACE.get(False, parallel)
        ctx.prepared = (word, axis, outer, row, parts, fn)

    def jit_calls(self, ctx: RunContext):
        word, axis, outer, row, parts, fn = ctx.prepared
        if word is None:
            return None
        dst = ctx.flat_out[0].view(word)
        flat = ctx.flat_in
        return [(fn, (flat[i].view(word), dst, chunk, row, offset, block, tasks))
                for i, chunk, offset, block, tasks in parts]

    def run(self, ctx: RunContext) -> None:
        calls = None if folding() else self.jit_calls(ctx)
        if calls is None:
            np.concatenate(ctx.inputs, axis=ctx.prepared[1], out=ctx.outputs[0])
            return
        make_calls(calls)
