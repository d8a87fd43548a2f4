"""graphrt's vectorisable float32 exp, tanh, erf, sigmoid and GELU (fast mode, math/vecmath.py):
within 1 ulp of the correctly rounded float32 result over arguments spread across the float32
range, the special values exact, and float64 arguments left to libm."""
from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

from graphrt.kernels.math import vecmath

erf64 = np.vectorize(math.erf)
erfc64 = np.vectorize(math.erfc)


def _args():
    rng = np.random.default_rng(7)
    parts = [rng.standard_normal(1 << 16) * 3, rng.uniform(-110, 110, 1 << 16),
             rng.standard_normal(1 << 14) * 1e-5, rng.standard_normal(1 << 12) * 1e-30,
             np.array([0.0, -0.0, 1e-45, -1e-45, 0.625, 1.0, 4.0, -4.0, 88.72, 88.73, -87.3,
                       -103.9, -104.0, 500.0, -500.0])]
    # both sides of each case boundary, a few ulps apart
    for edge in (0.625, 1.0, 4.0):
        e = np.float32(edge)
        parts.append(np.nextafter(np.full(8, e), np.float32(0)).astype(np.float64))
        parts.append(np.nextafter(np.full(8, e), np.float32(9)).astype(np.float64))
    x = np.concatenate(parts).astype(np.float32)
    return np.concatenate([x, -x])


def _sigmoid(d):
    return np.where(d >= 0, 1 / (1 + np.exp(-np.abs(d))), np.exp(-np.abs(d)) / (1 + np.exp(-np.abs(d))))


REFERENCE = {  # float64 references, rounded to float32 below
    "vexp": np.exp,
    "vtanh": np.tanh,
    "verf": erf64,
    "vsigmoid": _sigmoid,
    # (forms without the cancellation of 1 + erf and 1 + tanh in the negative tail)
    "vgelu": lambda d: 0.5 * d * erfc64(-d / math.sqrt(2)),
    "vgelu_tanh": lambda d: d / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (d + 0.044715 * d ** 3))),
}


def _compiled(name):
    stub = getattr(vecmath, name)

    @njit
    def run(x, out):
        for i in range(x.size):
            out[i] = stub(x[i])
    return run


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_float32_within_one_ulp(name):
    x = _args()
    out = np.empty_like(x)
    _compiled(name)(x, out)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        want = REFERENCE[name](x.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(want)
    assert np.array_equal(out[~finite], want[~finite])
    got, ref = out[finite].astype(np.float64), want[finite].astype(np.float64)
    ulp = np.spacing(np.maximum(np.abs(ref), np.float32(np.finfo(np.float32).tiny)).astype(np.float32))
    err = np.abs(got - ref) / ulp
    assert err.max() <= 1.0, (name, x[finite][err.argmax()], got[err.argmax()], ref[err.argmax()])


@pytest.mark.parametrize("name", ["vexp", "vtanh", "verf", "vsigmoid"])
def test_nan_and_infinities(name):
    x = np.array([np.nan, np.inf, -np.inf], np.float32)
    out = np.empty_like(x)
    _compiled(name)(x, out)
    with np.errstate(over="ignore", invalid="ignore"):
        want = REFERENCE[name](x.astype(np.float64)).astype(np.float32)
    assert np.isnan(out[0])
    assert np.array_equal(out[1:], want[1:])


def test_float64_goes_to_libm():
    x = np.linspace(-30, 30, 1001)
    out = np.empty_like(x)
    _compiled("vexp")(x, out)
    assert np.array_equal(out, np.vectorize(math.exp)(x))
    _compiled("vtanh")(x, out)
    assert np.array_equal(out, np.vectorize(math.tanh)(x))
