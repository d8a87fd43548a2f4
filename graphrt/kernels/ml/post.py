"""Score post-transforms of the ai.onnx.ml models, row by row over a float64 score matrix.

- NONE: y unchanged.
- SOFTMAX: y_j = exp(y_j - max y) / sum_k exp(y_k - max y).
- LOGISTIC: y_j = 1 / (1 + exp(-y_j)).
- SOFTMAX_ZERO: the softmax over the non-zero scores only; a zero score stays 0.
- PROBIT: y_j = sqrt(2) erfinv(2 y_j - 1) (the standard normal quantile of y_j).

Exact mode computes exp and erf with graphrt's own functions (graphrt/kernels/math/
exactmath.py), so its bits are the same on every machine.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..core.broadcast import canonical_nans
from ..core.jit import Variants
from ..math import exactmath

NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT = range(5)
NAMES = {"NONE": NONE, "SOFTMAX": SOFTMAX, "LOGISTIC": LOGISTIC, "SOFTMAX_ZERO": SOFTMAX_ZERO,
         "PROBIT": PROBIT}
EXACT = False


def parse(node, value) -> int:
    """post_transform as a string (opsets 1-4) or an int (TreeEnsemble): its number."""
    if value is None:
        return NONE
    if isinstance(value, str):
        return node.choice("post_transform", NAMES, "NONE")
    if not NONE <= int(value) <= PROBIT:
        node.fail(f"post_transform must be 0..4, got {value}")
    return int(value)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _exp(v, exact):
    return exactmath.exp(v) if exact else np.exp(v)


# Inlined, as every helper here: ``exact`` is then the caller's constant and numba types and
# compiles only its mode's branch (a called erfinv compiled exactmath's erf, log and exp into
# every fast kernel too, 2 s).
@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def erfinv(z, exact):
    """erf^-1(z): Winitzki's approximation refined by three Newton steps on erf."""
    if z != z or z < -1.0 or z > 1.0:
        return np.nan
    if z == 1.0 or z == -1.0:
        return z * np.inf
    ln = exactmath.log((1.0 - z) * (1.0 + z)) if exact else math.log((1.0 - z) * (1.0 + z))
    t = 2.0 / (math.pi * 0.147) + 0.5 * ln
    x = math.copysign(math.sqrt(math.sqrt(t * t - ln / 0.147) - t), z)
    for _ in range(3):
        e = exactmath.erf(x) if exact else math.erf(x)
        x -= (e - z) / (2.0 / math.sqrt(math.pi) * _exp(-x * x, exact))
    return x


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def logistic(v, exact):
    return 1.0 / (1.0 + _exp(-v, exact))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def probit(v, exact):
    return math.sqrt(2.0) * erfinv(2.0 * v - 1.0, exact)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def transform_row(y, post, exact):
    """Apply ``post`` to the 1-D row y in place."""
    c = y.size
    if post == 1 or post == 3:
        m = -np.inf
        for j in range(c):
            if post == 1 or y[j] != 0:
                m = max(m, y[j])
        s = 0.0
        for j in range(c):
            if post == 1 or y[j] != 0:
                y[j] = _exp(y[j] - m, exact)
                s += y[j]
        for j in range(c):
            y[j] = y[j] / s if s > 0 else 0.0
    elif post == 2:
        for j in range(c):
            y[j] = logistic(y[j], exact)
    elif post == 4:
        for j in range(c):
            y[j] = probit(y[j], exact)


def _transform(y, post, rows):
    """Apply ``post`` to each of the first ``rows`` rows of y [R, C] in place."""
    for r in prange(rows):
        transform_row(y[r], post, EXACT)


TRANSFORM = Variants(_transform, "ml_post", parallel=True)


def canonical_calls(ctx, out) -> list:
    """In exact mode, the call making the NaNs of the float output ``out`` the canonical
    quiet NaN (a NaN from an input keeps the payload the hardware gave it otherwise)."""
    if ctx.exact and out is not None and out.dtype.kind == "f":
        return [(canonical_nans, (out.reshape(-1),))]
    return []


def canonical(ctx, out) -> None:
    """canonical_calls made now."""
    for fn, args in canonical_calls(ctx, out):
        fn(*args)


def apply(y: np.ndarray, post: int, exact: bool, parallel: bool = False) -> None:
    """Post-transform the float64 scores y [rows, C] in place."""
    if post != NONE and y.size:
        TRANSFORM.get(exact, parallel)(y, post, y.shape[0])
