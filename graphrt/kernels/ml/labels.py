"""Class labels of the ai.onnx.ml classifiers, and their scores made final.

A classifier's label is ``classlabels[argmax_j score_j]`` (the first best on ties) over the
raw scores. A two-class model with one score column s writes two columns made from s, as
onnxruntime does, after the post_transform of s:

    LOGISTIC:  p = 1 / (1 + exp(-s))        -> [1 - p, p]
    PROBIT:    q = sqrt(2) erfinv(2 s - 1)  -> [q, q]  (onnxruntime leaves column 1 unset)
    otherwise: [1 - s, s] when s reads as a probability, [-s, s] when it reads as a margin

and its label is classlabels[1] where s exceeds a threshold (0.5 or 0, per operator).
"""
from __future__ import annotations

import numpy as np

from ..core.base import RunContext, scratch
from . import post

_I64, _STRING = np.dtype(np.int64), np.dtype(object)


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


def expand(ctx: RunContext, s: np.ndarray, post_kind: int, probability: bool) -> np.ndarray:
    """The two score columns [N, 2] (float64 scratch) made from one column s (module
    docstring)."""
    rows = s.shape[0]
    out = scratch(ctx, np.float64, (rows, 2))
    out[:, 1] = s
    if post_kind in (post.LOGISTIC, post.PROBIT):
        post.apply(out[:, 1:], post_kind, ctx.exact)
        if post_kind == post.PROBIT:
            out[:, 0] = out[:, 1]
            return out
        probability = True
    if probability:
        np.subtract(1.0, out[:, 1], out=out[:, 0])
    else:
        np.negative(out[:, 1], out=out[:, 0])
    return out


def above(ctx: RunContext, s: np.ndarray, threshold: float) -> np.ndarray:
    """Label positions: 1 where s > threshold, else 0."""
    best = scratch(ctx, np.int64, (s.shape[0],))
    np.greater(s, threshold, out=best, casting="unsafe")
    return best


def argmax(ctx: RunContext, scores: np.ndarray) -> np.ndarray:
    best = scratch(ctx, np.int64, (scores.shape[0],))
    if scores.shape[1]:
        np.argmax(scores, axis=1, out=best)
    else:
        best[:] = 0
    return best


def write(ctx: RunContext, classes: ClassLabels, best: np.ndarray, scores: np.ndarray,
          label_out: int = 0, score_out: int = 1) -> None:
    """Labels ``classlabels[best]`` and the scores (cast to the output's type) into the
    node's outputs (either may be unused)."""
    labels_out, scores_out = ctx.outputs[label_out], ctx.outputs[score_out]
    if labels_out is not None and classes.count:
        np.take(classes.values, best, out=labels_out.reshape(-1), mode="clip")
    if scores_out is not None:
        np.copyto(scores_out.reshape(scores.shape[0], -1), scores, casting="unsafe")
        post.canonical(ctx, scores_out)


def finish(ctx: RunContext, classes: ClassLabels, scores: np.ndarray, post_kind: int,
           one_column=None) -> None:
    """Labels and scores from raw ``scores`` [N, C]: argmax and post_transform; or, with
    ``one_column`` = (threshold, probability) and scores [N, 1], the two-column form."""
    if one_column is not None:
        threshold, probability = one_column
        s = scores[:, 0]
        best = above(ctx, s, threshold)
        write(ctx, classes, best, expand(ctx, s, post_kind, probability))
        return
    best = argmax(ctx, scores)
    post.apply(scores, post_kind, ctx.exact)
    write(ctx, classes, best, scores)
