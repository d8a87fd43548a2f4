"""Linear models of ai.onnx.ml.

- LinearRegressor: y[n, t] = sum_f x[n, f] W[t, f] + b[t], then post_transform; y is float32.
- LinearClassifier: s[n, e] = sum_f x[n, f] W[e, f] + b[e]; the label is classlabels[argmax_e
  s], the scores post_transform(s). One coefficient row with two classes gives one score s:
  the label is classlabels[1] where s > 0, the scores the two-column form of :mod:`.labels`.

The products are summed in float64 over f in order (x widened exactly), then rounded once
to float32 at the output, so exact mode needs nothing else.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.held import held_buffer
from ..core.jit import Variants
from . import labels, post

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
INPUTS = frozenset({_F32, _F64, np.dtype(np.int64), np.dtype(np.int32)})
EXACT = False


def _affine(x, w, b, out, rows):
    """out[n, e] = sum_f x[n, f] w[e, f] + b[e], in float64, for the rows of x."""
    f = x.shape[1]
    for n in prange(rows):
        for e in range(w.shape[0]):
            s = 0.0
            for k in range(f):
                s += np.float64(x[n, k]) * w[e, k]
            out[n, e] = s + b[e]


AFFINE = Variants(_affine, "ml_affine", parallel=True)


def affine(ctx: RunContext, x: np.ndarray, w: np.ndarray, b: np.ndarray,
           out: np.ndarray | None = None) -> np.ndarray:
    """x [N, F] @ w [E, F]^T + b into ``out`` (float64 [N, E]; scratch when None)."""
    if out is None:
        out = scratch(ctx, _F64, (x.shape[0], w.shape[0]))
    affine_fn(ctx.exact, x.shape[0], w)(x, w, b, out, x.shape[0])
    return out


def affine_fn(exact: bool, rows: int, w: np.ndarray):
    """The form of _affine for ``rows`` rows and weights ``w``."""
    return AFFINE.get(exact, rows * w.size >= 1 << 16)


def rows_of(ctx: InferContext, allowed=INPUTS) -> tuple[int, int]:
    """The input's [N, F] (a 1-D input is one row)."""
    ctx.check_dtype(0, allowed)
    shape = ctx.shape(0)
    if len(shape) == 1:
        return 1, shape[0]
    if len(shape) != 2:
        ctx.fail(f"the input must have shape [N, F] or [F], got {list(shape)}")
    return shape


def as_rows(ctx: RunContext) -> np.ndarray:
    rows, f = ctx.prepared[:2]
    return ctx.inputs[0].reshape(rows, f)


class _Linear(OpKernel):
    supports_exact = True

    def weights(self, rows_name: str, n_rows=None):
        node = self.node
        coef = node.attr("coefficients")
        if coef is None:
            node.fail("attribute coefficients is required")
        coef = np.asarray(coef, np.float64).reshape(-1)
        b = node.attr("intercepts")
        b = None if b is None else np.asarray(b, np.float64).reshape(-1)
        e = n_rows if n_rows is not None else (b.size if b is not None and b.size else None)
        if e is None or e < 1 or coef.size % e:
            node.fail(f"{coef.size} coefficients do not make {e} {rows_name}")
        if b is None or b.size != e:
            if b is not None and b.size and b.size != e:
                node.fail(f"intercepts holds {b.size} values for {e} {rows_name}")
            b = np.zeros(e)
        self.w, self.b = coef.reshape(e, -1), b

    def check(self, ctx: InferContext) -> tuple[int, int]:
        rows, f = rows_of(ctx)
        if f != self.w.shape[1]:
            ctx.fail(f"the input has {f} features, the coefficients {self.w.shape[1]}")
        return rows, f


class LinearRegressor(_Linear):
    def __init__(self, node):
        super().__init__(node)
        self.weights("targets", int(node.attr("targets", 1)))
        self.post = post.parse(node, node.attr("post_transform"))

    def infer(self, ctx: InferContext) -> None:
        rows, f = self.check(ctx)
        ctx.set_output(0, _F32, (rows, self.w.shape[0]))
        ctx.prepared = (rows, f)

    def run(self, ctx: RunContext) -> None:
        y = affine(ctx, as_rows(ctx), self.w, self.b)
        post.apply(y, self.post, ctx.exact)
        np.copyto(ctx.outputs[0].reshape(y.shape), y, casting="unsafe")
        post.canonical(ctx, ctx.outputs[0])


class LinearClassifier(_Linear):
    def __init__(self, node):
        super().__init__(node)
        self.classes = labels.ClassLabels(node)
        c = self.classes.count
        given = node.attr("intercepts")
        self.weights("score rows", len(given) if given else c)
        e = self.w.shape[0]
        if e == 1 and c != 2:
            node.fail(f"one coefficient row needs two class labels, got {c}")
        if e > 1 and e != c:
            node.fail(f"{e} coefficient rows for {c} class labels")
        self.post = post.parse(node, node.attr("post_transform"))

    def infer(self, ctx: InferContext) -> None:
        rows, f = self.check(ctx)
        ctx.set_output(0, self.classes.dtype, (rows,))
        ctx.set_output(1, _F32, (rows, max(self.w.shape[0], 2)))
        ctx.prepared = (rows, f)

    def jit_calls(self, ctx: RunContext):
        """The scores' product, then labels.finish_call (integer labels only)."""
        if self.classes.dtype == np.dtype(object):
            return None
        rows, f = ctx.prepared
        s = held_buffer(_F64, (rows, self.w.shape[0]), ctx.held, "linear scores")
        return [(affine_fn(ctx.exact, rows, self.w),
                 (ctx.flat_in[0].reshape(rows, f), self.w, self.b, s, rows)),
                labels.finish_call(ctx, self.classes, s, self.post, self._one_column(),
                                   lambda dt, shape, use: held_buffer(dt, shape, ctx.held,
                                                                      "linear " + use))]

    def _one_column(self):
        return (0.0, True) if self.w.shape[0] == 1 else None

    def run(self, ctx: RunContext) -> None:
        s = affine(ctx, as_rows(ctx), self.w, self.b)
        labels.finish(ctx, self.classes, s, self.post, self._one_column())
