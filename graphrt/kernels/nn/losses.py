"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12+).

Input x is (N, C, d1, ..., dk), target t is (N, d1, ..., dk) of class indices, weight w (C,)
is optional (1 by default). For each position e = (n, d):

    loss[e] = -x[n, t[e], d] * w[t[e]],   and 0 with weight 0 where t[e] == ignore_index

reduction "none" gives loss itself; "sum" its sum; "mean" the sum divided by the sum of the
weights used (a weight of 1 for every position not ignored). Targets outside [0, C) that are
not ignore_index are invalid input. Sums run over positions in C order in a float64
accumulator and are rounded once; the mean is one division of the two float64 sums.

SoftmaxCrossEntropyLoss first takes log_softmax over axis 1,
log_prob = x - (m + log(sum_c exp(x_c - m))) with m the maximum over the classes (the sum in
the blocked pairwise order of core/summation.py), and applies the loss above to it; log_prob
is the optional second output. Fast mode uses libm's exp and log, exact mode graphrt's own
(exactmath): both losses are exact-mode kernels. float16 is computed in float32.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN, put
from ..core.floats import FLOATS, compute_dtype, widen
from ..core.jit import Variants
from ..math.exactmath import FastExact, log as _own_log
from ..reduce.reduce import EXACT_EXP_DEVIATIONS, EXP_DEVIATIONS

EXACT = False
SUM_EXP = None      # sum exp(x - m) over the classes (blocked pairwise), fast or exact
LOG = None


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _libm_log(v):
    return np.log(v)

_INDICES = frozenset(np.dtype(t) for t in (np.int32, np.int64))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _first_bad(target, classes, ignore, has_ignore):
    """Index of the first target outside [0, classes) that is not ignored, or -1."""
    for i in range(target.size):
        t = target[i]
        if (t < 0 or t >= classes) and not (has_ignore and t == ignore):
            return i
    return -1


def _nll(x, target, weight, loss, classes, inner, ignore, has_ignore, has_weight):
    """loss[e] = -x[n, t, d] * w[t] for every position; returns (sum of loss, sum of w)."""
    total = 0.0
    wsum = 0.0
    for e in range(target.size):
        n = e // inner
        d = e - n * inner
        t = target[e]
        if has_ignore and t == ignore:
            loss[e] = 0
            continue
        v = -x[(n * classes + t) * inner + d]
        w = weight[t] if has_weight else 1
        v = v * w
        put(loss, e, v, EXACT)
        total += loss[e]
        wsum += w
    return total, wsum


def _log_softmax(x, out, classes, inner, tasks):
    """log_softmax over the class axis: one task per (n, d) position."""
    for p in prange(tasks):
        n = p // inner
        base = n * classes * inner + (p - n * inner)
        m = x[base]
        for c in range(1, classes):
            v = x[base + c * inner]
            if v > m or v != v:
                m = v
        lse = m + LOG(SUM_EXP(x, base, classes, inner, m))
        for c in range(classes):
            out[base + c * inner] = x[base + c * inner] - lse


_NLL = Variants(_nll, "nll_loss")
_LOG_SOFTMAX = FastExact(
    Variants(_log_softmax, "log_softmax", parallel=True, SUM_EXP=EXP_DEVIATIONS.strided, LOG=_libm_log),
    Variants(_log_softmax, "log_softmax_exact", parallel=True, SUM_EXP=EXACT_EXP_DEVIATIONS.strided,
             LOG=_own_log))


class NegativeLogLikelihoodLoss(OpKernel):
    supports_exact = True
    LOG_SOFTMAX = False

    def __init__(self, node):
        super().__init__(node)
        reduction = node.attr("reduction", "mean")
        self.reduction = reduction.decode() if isinstance(reduction, bytes) else str(reduction)
        if self.reduction not in ("none", "sum", "mean"):
            node.fail(f"reduction {self.reduction!r} is not none, sum or mean")
        ignore = node.attr("ignore_index")
        self.has_ignore = ignore is not None
        self.ignore = int(ignore) if ignore is not None else 0

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 2)
        if dt not in FLOATS:
            ctx.fail(f"element type {dt} is not supported", ErrorKind.UNSUPPORTED)
        if ctx.dtype(1) not in _INDICES:
            ctx.fail(f"target must be int32 or int64, got {ctx.dtype(1)}")
        shape, tshape = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        if len(shape) < 2 or tshape != shape[:1] + shape[2:]:
            ctx.fail(f"input {list(shape)} and target {list(tshape)} do not match "
                     "((N, C, d...) and (N, d...))")
        classes = shape[1]
        if ctx.has_input(2) and tuple(ctx.shape(2)) != (classes,):
            ctx.fail(f"weight of shape {list(ctx.shape(2))} must be [{classes}]")
        ctx.set_output(0, dt, tshape if self.reduction == "none" else ())
        if self.node.n_outputs > 1:
            ctx.set_output(1, dt, shape)
        inner = math.prod(shape[2:])
        work = compute_dtype(dt)
        tasks = shape[0] * inner
        soft = None
        if self.LOG_SOFTMAX:
            soft = _LOG_SOFTMAX.get(ctx.exact, math.prod(shape) >= PARALLEL_MIN and tasks > 1)
        ctx.prepared = (classes, inner, work, soft, _NLL.get(ctx.exact))

    def run(self, ctx: RunContext) -> None:
        classes, inner, work, soft, nll = ctx.prepared
        x, target = ctx.flat_in[0], ctx.flat_in[1]
        bad = _first_bad(target, classes, self.ignore, self.has_ignore)
        if bad >= 0:
            ctx.node.fail(f"target {int(target[bad])} at position {bad} is outside "
                          f"[0, {classes})", ErrorKind.INVALID_INPUT)
        has_w = len(ctx.flat_in) > 2 and ctx.flat_in[2] is not None
        weight = ctx.flat_in[2] if has_w else x[:0]
        x, weight = widen(ctx, x, work), widen(ctx, weight, work)
        if soft is not None:
            logp = ctx.flat_out[1] if len(ctx.flat_out) > 1 and ctx.flat_out[1] is not None \
                and ctx.flat_out[1].dtype == work else scratch(ctx, work, (x.size,))
            soft(x, logp, classes, inner, target.size)
            if len(ctx.flat_out) > 1 and ctx.flat_out[1] is not None \
                    and ctx.flat_out[1] is not logp:
                np.copyto(ctx.flat_out[1], logp, casting="unsafe")
            x = logp
        out = ctx.flat_out[0]
        elems = out if self.reduction == "none" and out.dtype == work \
            else scratch(ctx, work, (target.size,))
        total, wsum = nll(x, target, weight, elems, classes, inner, self.ignore,
                          self.has_ignore, has_w)
        if self.reduction == "none":
            if elems is not out:
                np.copyto(out, elems, casting="unsafe")
        else:
            v = total if self.reduction == "sum" else total / wsum if wsum != 0 else np.nan
            out[0] = np.nan if v != v else v


class SoftmaxCrossEntropyLoss(NegativeLogLikelihoodLoss):
    supports_exact = True
    LOG_SOFTMAX = True
