"""Scatter (deprecated form), ScatterElements, ScatterND and TensorScatter.

y = a copy of the data, then each update u is combined into y at the position its index
selects: y[p] = f(y[p], u) with f = the update itself (reduction "none"), +, *, max or min.
Updates are applied one at a time in C order of the indices, so with duplicate indices the
last update wins ("none") or the reduction accumulates in that order. max and min are
variadic's (NaN propagates, max(-0, +0) = +0); in exact mode a NaN result is the canonical
NaN. Reduction "none" moves bits (words); the reductions compute in the element type
(float16 is not supported for them).

Indices are checked before the kernel runs; output 0 may share the data's memory.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext
from ..core.broadcast import put, row_offset
from ..core.jit import Variants
from ..core.words import word_of
from ..elementwise.arithmetic import add_scalar, mul_scalar
from ..elementwise.variadic import maximum, minimum
from .gather import (along, check_range, check_tuples, data_and_indices, elements_layout,
                     nd_layout, nd_offset, normalize_axis)

EXACT = False
OP = None


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _replace(a, b):
    return b


_REDUCTIONS = {"none": _replace, "add": add_scalar, "mul": mul_scalar, "max": maximum, "min": minimum}


def _scatter_elements(out, idx, upd, shape, sx, n, step, rows):
    r = shape.size
    inner = shape[r - 1]
    si = sx[r - 1]
    for row in range(rows):
        base = row_offset(row, shape, sx)
        for j in range(inner):
            k = idx[row * inner + j]
            if k < 0:
                k += n
            p = base + j * si + k * step
            put(out, p, OP(out[p], upd[row * inner + j]), EXACT)


def _scatter_nd(out, idx, upd, lim, xs, k, inner, tuples):
    for t in range(tuples):
        off = nd_offset(idx, t, k, lim, xs)
        for e in range(inner):
            put(out, off + e, OP(out[off + e], upd[t * inner + e]), EXACT)


_ELEMENTS = {name: Variants(_scatter_elements, f"scatter_elements_{name}", OP=op)
             for name, op in _REDUCTIONS.items()}
_ND = {name: Variants(_scatter_nd, f"scatter_nd_{name}", OP=op) for name, op in _REDUCTIONS.items()}

_COMPUTABLE = _dt.ALL_TENSOR - {np.dtype(np.float16)}


class _Scatter(OpKernel):
    """Shared: reduction attribute, the copy of the data and the element view."""

    supports_exact = True
    in_place_input = True

    def __init__(self, node):
        super().__init__(node)
        self.reduction = str(node.attr("reduction", "none"))
        if self.reduction not in _REDUCTIONS:
            node.fail(f"reduction {self.reduction!r} is not one of {', '.join(_REDUCTIONS)}")

    def element_view(self, ctx: InferContext, table):
        """(how the arrays are viewed, the compiled kernel) for the data's element type."""
        dt = ctx.same_dtype(0, 2)
        if self.reduction == "none":
            word = word_of(dt)
            return word, (table["none"].get(ctx.exact) if word is not None else None)
        if dt not in _COMPUTABLE:
            ctx.fail(f"reduction {self.reduction!r} on element type {_dt.name_of(dt)} is not "
                     "supported", ErrorKind.UNSUPPORTED)
        return dt, table[self.reduction].get(ctx.exact)

    @staticmethod
    def copy_data(ctx: RunContext):
        x, out = ctx.flat_in[0], ctx.flat_out[0]
        if not np.may_share_memory(x, out):
            out[...] = x


class ScatterElements(_Scatter):
    """y = data; y[i with i_axis replaced by idx[i]] = f(that, updates[i]) for every i of
    idx (Scatter, opset 9-10, is the same without reduction)."""

    def __init__(self, node):
        super().__init__(node)
        self.axis = int(node.attr("axis", 0))

    def infer(self, ctx: InferContext) -> None:
        _, shape, ishape = data_and_indices(ctx)
        if tuple(ctx.shape(2)) != ishape:
            ctx.fail(f"updates of shape {list(ctx.shape(2))} do not match indices of shape "
                     f"{list(ishape)}")
        axis, wshape, sx, step, rows = elements_layout(ctx, self.axis, shape, ishape, "indices")
        view, fn = self.element_view(ctx, _ELEMENTS)
        ctx.set_output(0, ctx.dtype(0), shape)
        ctx.prepared = (view, fn, shape[axis], axis, wshape, sx, step,
                        rows if math.prod(ishape) else 0)

    def run(self, ctx: RunContext) -> None:
        view, fn, n, axis, shape, sx, step, rows = ctx.prepared
        idx = ctx.flat_in[1]
        check_range(self.node, idx, n, "index")
        self.copy_data(ctx)
        if fn is None:
            y = ctx.outputs[0][along(shape, axis)]       # a view: writes reach the output
            np.put_along_axis(y, ctx.inputs[1], ctx.inputs[2], axis)
        elif rows:
            fn(ctx.flat_out[0].view(view), idx, ctx.flat_in[2].view(view), shape, sx, n, step,
               rows)


class ScatterND(_Scatter):
    """y = data; y[idx[t]] = f(y[idx[t]], updates[t]) for every index tuple t (a tuple of k
    values selects a slice of the trailing r - k axes)."""

    def infer(self, ctx: InferContext) -> None:
        shape = tuple(ctx.shape(0))
        if ctx.dtype(1) != np.int64:
            ctx.fail(f"indices must be INT64, got {_dt.name_of(ctx.dtype(1))}")
        ishape = tuple(ctx.shape(1))
        k, lim, xs, _, tuples, _, inner = nd_layout(ctx, shape, ishape, 0)
        want = ishape[:-1] + shape[k:]
        if tuple(ctx.shape(2)) != want:
            ctx.fail(f"updates of shape {list(ctx.shape(2))} do not match {list(want)} "
                     f"(indices {list(ishape)}, data {list(shape)})")
        view, fn = self.element_view(ctx, _ND)
        ctx.set_output(0, ctx.dtype(0), shape)
        ctx.prepared = (view, fn, k, lim, xs, inner, tuples if inner else 0)

    def run(self, ctx: RunContext) -> None:
        view, fn, k, lim, xs, inner, tuples = ctx.prepared
        idx = ctx.flat_in[1]
        check_tuples(self.node, idx, lim)
        self.copy_data(ctx)
        if fn is None:
            out, upd = ctx.flat_out[0], ctx.flat_in[2]
            for t in range(tuples):
                off = int(nd_offset(idx, t, k, lim, xs))
                out[off:off + inner] = upd[t * inner:(t + 1) * inner]
        elif tuples:
            fn(ctx.flat_out[0].view(view), idx, ctx.flat_in[2].view(view), lim, xs, k, inner,
               tuples)


def _tensor_scatter(out, upd, pos, inner, seq, length, per_batch, prefixes, circular):
    for p in range(prefixes):
        w = pos[p // per_batch]
        for s in range(seq):
            c = w + s
            if circular:
                c = c % length
            dst = out[(p * length + c) * inner:(p * length + c + 1) * inner]
            src = upd[(p * seq + s) * inner:(p * seq + s + 1) * inner]
            for e in range(inner):
                dst[e] = src[e]


_TENSOR_SCATTER = Variants(_tensor_scatter, "tensor_scatter")


class TensorScatter(OpKernel):
    """y = past; for every prefix index (axes before ``axis``, the first being the batch) and
    s < update's extent on ``axis``: y[prefix, c] = update[prefix, s] with
    c = write_indices[batch] + s (mod the axis extent in ``circular`` mode)."""

    supports_exact = True
    in_place_input = True

    def __init__(self, node):
        super().__init__(node)
        self.mode = str(node.attr("mode", "linear"))
        if self.mode not in ("linear", "circular"):
            node.fail(f"mode {self.mode!r} is not 'linear' or 'circular'")
        self.axis = int(node.attr("axis", -2))

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 1)
        shape, ushape = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        axis = normalize_axis(ctx, self.axis, len(shape))
        if axis == 0:
            ctx.fail("axis must not be the batch axis 0")
        if len(ushape) != len(shape) or any(
                a != b for d, (a, b) in enumerate(zip(shape, ushape)) if d != axis) \
                or ushape[axis] > shape[axis]:
            ctx.fail(f"update of shape {list(ushape)} does not fit cache of shape {list(shape)} "
                     f"along axis {axis}")
        if ctx.has_input(2):
            if ctx.dtype(2) != np.int64 or tuple(ctx.shape(2)) != (shape[0],):
                ctx.fail(f"write_indices must be INT64 of shape [{shape[0]}]")
        ctx.set_output(0, dt, shape)
        prefixes = math.prod(shape[:axis])
        ctx.prepared = (word_of(dt), math.prod(shape[axis + 1:]), ushape[axis], shape[axis],
                        shape[0], prefixes)

    def run(self, ctx: RunContext) -> None:
        word, inner, seq, length, batch, prefixes = ctx.prepared
        circular = self.mode == "circular"
        per_batch = prefixes // batch if batch else 1
        pos = ctx.flat_in[2] if len(ctx.flat_in) > 2 else None
        if pos is None:
            pos = np.zeros(batch, np.int64)
        elif circular:
            pos = pos % max(length, 1)          # Python's modulo: never negative
        elif pos.size and (pos.min() < 0 or pos.max() > length - seq):
            bad = int(pos.min()) if pos.min() < 0 else int(pos.max())
            self.node.fail(f"write index {bad} is out of range [0, {length - seq}]",
                           ErrorKind.INVALID_INPUT)
        _Scatter.copy_data(ctx)
        if not (seq and inner and prefixes):
            return
        if word is None:
            out = ctx.flat_out[0].reshape(prefixes, length, inner)
            upd = ctx.flat_in[1].reshape(prefixes, seq, inner)
            for p in range(prefixes):
                c = (pos[p // per_batch] + np.arange(seq)) % length
                out[p, c] = upd[p]
            return
        _TENSOR_SCATTER.get(False)(ctx.flat_out[0].view(word), ctx.flat_in[1].view(word), pos,
                                   inner, seq, length, per_batch, prefixes, circular)
