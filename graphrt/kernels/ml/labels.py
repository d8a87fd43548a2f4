"""Class labels of the ai.onnx.ml classifiers, and their scores made final.

A classifier's label is ``classlabels[argmax_j score_j]`` (the first best on ties) over the
raw scores. A two-class model with one score column s writes two columns made from s, as
onnxruntime does, after the post_transform of s:

    LOGISTIC:  p = 1 / (1 + exp(-s))        -> [1 - p, p]
    PROBIT:    q = sqrt(2) erfinv(2 s - 1)  -> [q, q]  (onnxruntime leaves column 1 unset)
    otherwise: [1 - s, s] when s reads as a probability, [-s, s] when it reads as a margin

and its label is classlabels[1] where s exceeds a threshold (0.5 or 0, per operator).

The scores are made final by one compiled kernel (``final_call``), from raw sums to labels
and output scores, so a model's classifier or regressor step is compiled calls without
Python (string labels are taken by Python from the best positions it leaves).
"""
from __future__ import annotations

import functools

import numpy as np

from numba import prange

from ..core.base import RunContext, make_calls, scratch
from ..core.jit import Variants
from . import post

_I64, _STRING = np.dtype(np.int64), np.dtype(object)
# what final_call makes of the raw scores
REGRESS, ARGMAX, ONE_COLUMN, SECOND_COLUMN = range(4)
EXACT = False


class ClassLabels:
    """classlabels_int64s / classlabels_ints or classlabels_strings of a classifier node."""

    def __init__(self, node, required: bool = True):
        ints = node.attr("classlabels_int64s", node.attr("classlabels_ints"))
        strings = node.attr("classlabels_strings")
        if ints is not None and strings is not None and len(ints) and len(strings):
            node.fail("give integer or string class labels, not both")
        if strings is not None and len(strings):
            self.values = np.array(list(strings), dtype=object)
        elif ints is not None and len(ints):
            self.values = np.array(list(ints), dtype=np.int64)
        elif required:
            node.fail("classlabels_int64s (or _ints) or classlabels_strings is required")
        else:
            self.values = np.zeros(0, np.int64)
        self.dtype = self.values.dtype
        self.count = int(self.values.size)


def argmax(ctx: RunContext, scores: np.ndarray) -> np.ndarray:
    best = scratch(ctx, np.int64, (scores.shape[0],))
    if scores.shape[1]:
        np.argmax(scores, axis=1, out=best)
    else:
        best[:] = 0
    return best


def write(ctx: RunContext, classes: ClassLabels, best: np.ndarray, scores: np.ndarray,
          label_out: int = 0, score_out: int = 1) -> None:
    """Labels ``classlabels[best]`` and the scores (cast to the output's type; None: written
    already) into the node's outputs (either may be unused)."""
    labels_out, scores_out = ctx.outputs[label_out], ctx.outputs[score_out]
    if labels_out is not None and classes.count:
        np.take(classes.values, best, out=labels_out.reshape(-1), mode="clip")
    if scores_out is not None and scores is not None:
        np.copyto(scores_out.reshape(scores.shape[0], -1), scores, casting="unsafe")
        post.canonical(ctx, scores_out)


def _final(acc, t, divide, base, threshold, probability, values, best, labels_out, out, rows):
    """Row r of the raw scores acc[r * t:(r + 1) * t] (in place): divided by ``divide``
    (unless 0), plus ``base`` (unless empty), then by KIND:
    - REGRESS: post-transformed (POST) into out[r * t:];
    - ARGMAX: best[r] = the first best score's position, then post-transformed;
    - ONE_COLUMN: s = column 0, best[r] = s > threshold, out[2r:2r + 2] the two columns of s
      (module docstring; in float64);
    - SECOND_COLUMN: best[r] = column 1 > threshold, then post-transformed;
    best written where it is not empty, labels_out[r] = values[best[r]] where ``values``
    (integer labels) is not empty.
    Exact mode makes the NaNs of out the canonical quiet NaN."""
    w = 2 if KIND == ONE_COLUMN else t
    has_base, nv, has_best = base.size > 0, values.size, best.size > 0
    for r in prange(rows):
        y = acc[r * t:(r + 1) * t]
        if divide != 0:
            for j in range(t):
                y[j] /= divide
        if has_base:
            for j in range(t):
                y[j] += base[j]
        o = out[r * w:(r + 1) * w]
        b = 0
        if KIND == ONE_COLUMN:
            s = np.float64(y[0])
            b = 1 if s > threshold else 0
            if POST == post.LOGISTIC:
                p = post.logistic(s, EXACT)
                o[0], o[1] = 1.0 - p, p
            elif POST == post.PROBIT:
                q = post.probit(s, EXACT)
                o[0], o[1] = q, q
            elif probability:
                o[0], o[1] = 1.0 - s, s
            else:
                o[0], o[1] = -s, s
        else:
            if KIND == ARGMAX:
                # np.argmax's choice: the first NaN, else the first largest
                if t > 0:
                    m = y[0]
                    if m == m:
                        for j in range(1, t):
                            if y[j] != y[j]:
                                b = j
                                break
                            if y[j] > m:
                                m, b = y[j], j
            elif KIND == SECOND_COLUMN:
                b = 1 if y[1] > threshold else 0
            post.transform_row(y, POST, EXACT)
            for j in range(t):
                o[j] = y[j]
        if EXACT:
            for j in range(w):
                if o[j] != o[j]:
                    o[j] = np.nan
        if KIND != REGRESS:
            if has_best:
                best[r] = b
            if nv:
                labels_out[r] = values[b]


# One template, compiled per (KIND, POST) a model uses: every kind and post-transform in one
# function compiled in 2 s (numba types and optimises the branches a model never takes), a
# form in about 0.6 s (per POST alone, kind an argument, about 1.2 s). The test suite, which
# runs some thirty pairs in each mode, compiles more for it (about 45 s of its workers' time).
KIND = POST = None      # rebound per form
_NONE_F = np.zeros(0)
_NONE_I = np.zeros(0, np.int64)


@functools.lru_cache(maxsize=None)
def _final_form(kind: int, post_kind: int) -> Variants:
    return Variants(_final, f"ml_final_{kind}{post_kind}", parallel=True, KIND=kind,
                    POST=post_kind)


def final_call(exact: bool, acc: np.ndarray, out: np.ndarray, kind: int, post_kind: int,
               rows: int, divide=0, base=None, threshold: float = 0.0,
               probability: bool = False, classes: ClassLabels | None = None, best=None,
               labels_out=None) -> tuple:
    """The call of the kernel that makes raw scores ``acc`` [rows * t] final (``_final``):
    scores into ``out`` (flat), with a classifier's ``classes`` its best positions into
    ``best`` (int64 [rows]) and integer labels into ``labels_out``."""
    t = acc.size // max(rows, 1)
    numeric = classes is not None and classes.dtype != _STRING and labels_out is not None
    parallel = rows * max(t, 1) >= 1 << 14
    return (_final_form(kind, post_kind).get(exact, parallel),
            (acc, t, acc.dtype.type(divide), _NONE_F if base is None else base,
             threshold, probability, classes.values if numeric else _NONE_I,
             _NONE_I if best is None else best,
             labels_out.reshape(-1) if numeric else _NONE_I, out.reshape(-1), rows))


def take_labels(ctx: RunContext, classes: ClassLabels, best: np.ndarray,
                label_out: int = 0) -> None:
    """String labels ``classlabels[best]`` into the node's output (final_call writes integer
    ones itself)."""
    labels_out = ctx.outputs[label_out]
    if labels_out is not None and classes.dtype == _STRING and classes.count:
        np.take(classes.values, best, out=labels_out.reshape(-1), mode="clip")


def finish_call(ctx: RunContext, classes: ClassLabels, scores: np.ndarray, post_kind: int,
                one_column, buffer) -> tuple:
    """final_call for raw ``scores`` [N, C] (C-contiguous, overwritten): argmax and
    post_transform; or, with ``one_column`` = (threshold, probability), the two-column form
    of column 0. ``buffer(dtype, shape, use)`` gives scratch: the best positions' is
    ``buffer(np.int64, (N,), "best")``."""
    rows = scores.shape[0]
    threshold, probability = one_column if one_column is not None else (0.0, False)
    best = buffer(np.int64, (rows,), "best")
    out = ctx.flat_out[1] if ctx.flat_out[1] is not None else \
        buffer(np.float32, (rows * (2 if one_column is not None else scores.shape[1]),), "scores")
    return final_call(ctx.exact, scores.reshape(-1), out,
                      ARGMAX if one_column is None else ONE_COLUMN, post_kind, rows,
                      threshold=threshold, probability=probability, classes=classes,
                      best=best, labels_out=ctx.flat_out[0])


def finish(ctx: RunContext, classes: ClassLabels, scores: np.ndarray, post_kind: int,
           one_column=None) -> None:
    """finish_call made now, then string labels."""
    taken = {}

    def buffer(dtype, shape, use):
        taken[use] = scratch(ctx, dtype, shape)
        return taken[use]

    make_calls([finish_call(ctx, classes, scores, post_kind, one_column, buffer)])
    take_labels(ctx, classes, taken["best"])