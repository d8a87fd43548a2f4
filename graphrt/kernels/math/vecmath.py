"""Fast-mode exp, tanh, erf and the logistic function for float32 elements, written as
arithmetic, selects and one bit cast, so that LLVM vectorises the loops calling them (libm's
functions are calls it keeps scalar: 2 to 15 ns an element here, against a fraction of a ns).

Each is computed in float64 and rounded once to float32; float64 (and other) arguments go
to libm unchanged (``vexp`` and the others are overloaded on the argument's type).

- exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 (|r| <= ln2 / 2, ln 2 split in
  a part with trailing zero bits and a remainder, so r is exact to double rounding), exp(r)
  by its Taylor polynomial of degree 9 (truncation below 1e-10 relative), 2^n from its bit
  pattern. x is clamped to [-160, 160] first (float32 results 0 and inf there); NaN stays NaN.
- tanh(x) = x P(x^2) for |x| < 0.625 (P a least-squares fit of tanh(x)/x on Chebyshev
  nodes, relative error 1.5e-10), else sign(x) (1 - 2 / (exp(2|x|) + 1)).
- erf(x) = x Q(x^2) for |x| < 1 (a fit of erf(x)/x, 3.4e-11), else
  sign(x) (1 - erfc(|x|)) with erfc(t) = exp(-t^2) R(1/t) (R a fit of erfc(t) exp(t^2) as a
  polynomial in 1/t over [1, 10.5], 1.6e-10), 0 past 10.5.
- sigmoid(x) = 1 / (1 + exp(-x)).
- GELU: x/2 (2 - erfc(x/sqrt 2)) for x >= 0, x/2 erfc(|x|/sqrt 2) below (no cancellation in
  the negative tail); the tanh form as x / (1 + exp(-2z)), z = sqrt(2/pi) (x + 0.044715 x^3).

Both sides of every case are computed and one is selected (no branch, which would keep the
loop scalar). Errors against float64 libm, measured over 2^20 arguments spread over the
float32 range and the special values: see tests/ops/math/test_vecmath.py (at most 1 ulp of float32).
"""
from __future__ import annotations

import hashlib
import math
import warnings

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.errors import NumbaIRAssumptionWarning
from numba.extending import intrinsic, overload

# numba inlines these functions (inline="always") into the element loops, so that LLVM sees
# one loop body it can vectorise; its pedantic SSA check then reports the inlined selects'
# variables as "not in scope", a known false report of IR-level inlining: not shown (the
# message may start with a terminal colour code, hence the leading .*)
warnings.filterwarnings("ignore", r"(?s).*variable '.*' is not in scope",
                        NumbaIRAssumptionWarning)

_LN2_HI = 0.693147180369123816490      # ln 2 with its low 32 bits zero: n * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10   # ln 2 - _LN2_HI
_INV_LN2 = 1.4426950408889634

@intrinsic
def _f64_from_bits(typingctx, bits):
    """The float64 whose IEEE bit pattern is the int64 ``bits``."""
    sig = types.float64(types.int64)

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


@njit(cache=True, nogil=True, fastmath=False, error_model="numpy", inline="always")
def exp64(x):
    """exp(x) for a float64 x holding a float32 value, about 1e-10 relative (module
    docstring); NaN for NaN."""
    c = min(max(x, -160.0), 160.0)
    n = np.floor(c * _INV_LN2 + 0.5)
    r = (c - n * _LN2_HI) - n * _LN2_LO
    p = 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    k = np.int64(n)
    # 2^n as two factors, each a normal float64 for |n| <= 231
    h = k >> 1
    s1 = _f64_from_bits((h + 1023) << 52)
    s2 = _f64_from_bits((k - h + 1023) << 52)
    v = p * s1 * s2
    return v if x == x else x


# Least-squares fits on Chebyshev nodes (float64), by Horner's rule: tanh(x) / x in x^2 on
# |x| < 0.625 (relative error 1.5e-10), erf(x) / x in x^2 on |x| < 1 (3.4e-11), and
# erfc(t) exp(t^2) in 1/t on 1 <= t <= 10.5 (1.6e-10). Written out: a loop over the
# coefficients would be the innermost loop, and LLVM vectorises innermost loops only (the
# element loop calling these would stay scalar).
def _polynomial(name, coeffs):
    """An njit function of v: the polynomial with ``coeffs`` (highest degree first) by
    Horner's rule, written out as straight-line code."""
    lines = [f"def {name}(v):", f"    p = {coeffs[0]!r}"]
    lines += [f"    p = p * v + {c!r}" for c in coeffs[1:]]
    scope: dict = {}
    exec("\n".join(lines + ["    return p"]), scope)
    return njit(nogil=True, fastmath=False, error_model="numpy", inline="always")(scope[name])


_tanh_p = _polynomial("_tanh_p", (
    0.0021256387725519057, -0.008155737534733181, 0.021690329841922828, -0.05394439377643056,
    0.13333179984671895, -0.33333329603276296, 0.9999999998507212,))
_erf_p = _polynomial("_erf_p", (
    -9.634993517620109e-06, 0.00011254643776179286, -0.0008482508523587231, 0.0052209233020439,
    -0.026865392170817286, 0.1128378184031288, -0.3761263842609395, 1.128379167057142,))
_erfcx_p = _polynomial("_erfcx_p", (
    0.12158877158446194, -1.0242972381245008, 3.9343855289224194, -9.094136660691408,
    14.018796519701436, -15.000035393750265, 11.083579611997365, -5.233035769217376,
    1.0965787066010522, 0.21674135592837546, 0.027772598246797783, -0.2846995412499431,
    0.0001613166615744906, 0.5641836728828672, 9.673099365519122e-08,))


@njit(cache=True, nogil=True, fastmath=False, error_model="numpy", inline="always")
def _tanh64(x):
    t = abs(x)
    small = x * _tanh_p(x * x)
    big = 1.0 - 2.0 / (exp64(2.0 * t) + 1.0)
    big = big if x >= 0 else -big
    v = small if t < 0.625 else big
    return v if x == x else x


@njit(cache=True, nogil=True, fastmath=False, error_model="numpy", inline="always")
def _erfc_tail(t):
    """erfc(t) for t >= 1 (0 past 10.5, where float32 products of it vanish)."""
    u = 1.0 / (t if t > 1.0 else 1.0)
    v = exp64(-(t * t)) * _erfcx_p(u)
    return v if t <= 10.5 else 0.0


@njit(cache=True, nogil=True, fastmath=False, error_model="numpy", inline="always")
def _erf64(x):
    t = abs(x)
    small = x * _erf_p(x * x)
    big = 1.0 - _erfc_tail(t)
    big = big if x >= 0 else -big
    v = small if t < 1.0 else big
    return v if x == x else x


def vexp(x):
    """exp(x): float32 by exp64, others by libm."""


def vtanh(x):
    """tanh(x): float32 as in the module docstring, others by libm."""


def verf(x):
    """erf(x): float32 as in the module docstring, others by libm."""


def vsigmoid(x):
    """1 / (1 + exp(-x)): float32 by exp64, others by libm's exp (the form that does not
    overflow for either sign)."""


def _overload_f32(stub, f32, other, inline="never"):
    # "always" for the large bodies (erf): LLVM would not inline them into the element loop
    @overload(stub, inline=inline)
    def _impl(x):
        return f32 if x == types.float32 else other


_overload_f32(vexp, lambda x: np.float32(exp64(np.float64(x))), lambda x: np.exp(x))
_overload_f32(vtanh, lambda x: np.float32(_tanh64(np.float64(x))), lambda x: np.tanh(x))
_overload_f32(verf, lambda x: np.float32(_erf64(np.float64(x))), lambda x: math.erf(x), "always")


def _sigmoid_other(x):
    if x >= 0:
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(x)
    return e / (1.0 + e)


def vgelu(x):
    """x / 2 (1 + erf(x / sqrt 2)), in float64 for float32 x (erf as above)."""


def vgelu_tanh(x):
    """x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), in float64 for float32 x."""


def _gelu_f32(x):
    # x < 0: x / 2 erfc(|x| / sqrt 2), which does not cancel as 1 + erf does
    d = np.float64(x)
    t = abs(d) * 0.7071067811865476
    erfc = 1.0 - t * _erf_p(t * t) if t < 1.0 else _erfc_tail(t)
    v = 0.5 * d * (2.0 - erfc) if d >= 0 else 0.5 * d * erfc
    return np.float32(v if d == d else d)


def _gelu_tanh_f32(x):
    # 1 + tanh(z) = 2 / (1 + exp(-2 z)): no cancellation for z < 0
    d = np.float64(x)
    z = 0.7978845608028654 * (d + 0.044715 * d * d * d)
    v = d / (1.0 + exp64(-2.0 * z)) if z > -80.0 else d * 0.0
    return np.float32(v if d == d else d)


_overload_f32(vgelu, _gelu_f32, lambda x: 0.5 * x * (1.0 + math.erf(x * 0.7071067811865476)),
              "always")
_overload_f32(vgelu_tanh, _gelu_tanh_f32,
              lambda x: 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))))
_overload_f32(vsigmoid, lambda x: np.float32(1.0 / (1.0 + exp64(-np.float64(x)))),
              _sigmoid_other)

# jit.Variants cannot follow an overload to its source: kernels calling a stub are named by
# this file's hash instead, so an edit here renames them in numba's cache
with open(__file__, "rb") as _f:
    SOURCE_TAG = hashlib.sha1(_f.read()).hexdigest()[:12]
for _stub in (vexp, vtanh, verf, vsigmoid, vgelu, vgelu_tanh):
    _stub.hashed_with = (SOURCE_TAG,)
