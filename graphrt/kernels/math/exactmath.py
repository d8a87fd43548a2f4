"""graphrt's own transcendental functions, for exact-mode kernels.

Every function here is built only from IEEE-754 operations that are correctly rounded (+ - * /,
comparisons), conversions between float64 and int64, and exact scaling by powers of two
(writing a double's exponent bits), evaluated in one fixed order, compiled without fast-math
(so without FMA contraction). No libm, no numba math intrinsic: the bits are the same on every
machine, math library and instruction set (tests/ops/math/test_exactmath.py runs them on numba's
generic x86-64 target too).

The public functions (exp, expm1, log, log1p, tanh, sigmoid, erf, erfc, softplus, mish, gelu,
gelu_tanh, swish, pow, sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh) take
float32 or float64 scalars and return the argument's type; cos_sin_turn(j, n) gives cos and
sin of 2 pi j / n for integers (DFT twiddles, windows). A float32 argument is computed in
float64 and rounded once at the end, so float32 results are the correctly rounded value
except when the exact value lies within about 2**-28 ulp of a rounding boundary (none seen
in 20,000 samples per function: max error 0.5 ulp). Float64 max errors measured against
mpmath over 20,000 random and edge values per function: at most 0.505 ulp for exp, log,
log1p, sigmoid, softplus, mish, gelu_tanh, swish, pow and the trigonometric and hyperbolic
functions and their inverses (sin ... atanh); expm1 0.54, tanh 0.60, erfc 0.79, gelu 0.82,
erf 0.84 (docs/exact-mode.md has the table, tests/ops/math/test_exactmath.py the bounds).
Subnormal results may be off by one subnormal ulp (their last scaling rounds a second time).

Special values follow C99 Annex F (NaN in, NaN out; log(0) = -inf; log(x < 0) = NaN; exp(-inf)
= 0; pow's table of ±0, ±1 and ±inf cases; sin, tan, asin, atan, sinh, asinh, atanh keep the
sign of zero; sin, cos, tan of ±inf, asin and acos outside [-1, 1], acosh below 1 and atanh
outside [-1, 1] are NaN; atanh(±1) = ±inf; atan(±inf) = ±pi/2; sinh and cosh overflow to inf);
where a formula would give inf * 0 the limit is returned instead: gelu, gelu_tanh, mish and
swish of -inf are -0.

Methods (all double arithmetic; "dd" = an unevaluated sum hi + lo of two doubles, made with
Knuth's two-sum and Dekker's two-product, the latter with Veltkamp splitting since there is no
FMA):
- exp: x = (64 k + j) ln2/64 + r, |r| <= ln2/128, by Cody-Waite reduction whose first step is
  exact; exp(r) - 1 by its Taylor polynomial to r**6 (truncation below 2**-64), 2**(j/64) from
  a table of dd values, 2**(j/64) * r by two-product; one rounding (a second one only when
  scaling by 2**k makes the result subnormal).
- log: x = 2**e m with m in [sqrt(1/2), sqrt(2)), F = m rounded to a multiple of 1/128, f = m - F
  (exact), u = f / F with its exact remainder carried; log x = e ln2 + log F + log1p(u), log1p by
  its Taylor polynomial to u**8 (|u| < 1/180), log F from a dd table, the big parts summed
  exactly. log1p(x) is log(1 + x) with the rounding error of 1 + x carried as a low part.
- expm1, tanh, sigmoid: from the exp parts in dd arithmetic, then one division done in dd.
- erf, erfc: |x| < 0.75: x + x P(x*x); else erfc = exp(-x*x) G(x), x*x split exactly, with
  fitted polynomials P and G (mpmath.chebyfit, 60 digits: examples/exactmath_coefficients.py
  prints them). erf = 1 - erfc there.
- gelu(x) = x/2 erfc(-x/sqrt2) with x/sqrt2 in dd; gelu_tanh(x) = x sigmoid(2u) (the same as
  x/2 (1 + tanh u)) with u = sqrt(2/pi) (x + 0.044715 x**3) in dd; mish(x) = x n/(n + 2) with
  n = e (e + 2), e = exp(x) (tanh(log(1 + e)) rewritten without cancellation); softplus(x) =
  max(x, 0) + log1p(exp(-|x|)); swish(x, a) = x sigmoid(a x) with a x in dd.
- pow(x, y) = exp(y log|x|) with log|x| in dd and y log|x| by two-product; integer results
  that are representable come out exactly (2**10, 3**3, x**2 for float32 x).
- sin, cos, tan: x = n pi/2 + r, |r| <= pi/4, r as a dd. Below 1e6, Cody-Waite with pi/2
  in four parts (three of 33 bits, so that k p_i is exact for |k| < 2**20), the partial
  differences summed by two-sum; above, Payne-Hanek: the 53-bit significand times 240 bits of
  2/pi taken at the argument's exponent (the bits of 2/pi are 24-bit integers computed at
  import), in 24-bit integer limbs, the integer part giving n mod 4 and the fraction's top
  168 bits r/(pi/2) (every double but 0 lies at least 2**-62 pi/2 from a multiple of pi/2,
  so 106 bits or more survive), times pi/2 in dd. Then sin r = r + r z P(z) and cos r = 1 + z Q(z), z = r*r,
  with fitted P and Q (mpmath.chebyfit, error below 1e-22) whose last three Horner steps and
  the products with z and r run in dd; tan = sin r / cos r (or -cos r / sin r for odd n) as one
  dd division. cos_sin_turn(j, n): j mod n and the nearest quarter turn taken off in
  integers, r = (pi/2) (4m - q n)/n in dd, then the same kernels.
- atan: 1/x for |x| > 1 (atan x = pi/2 - atan(1/x), in dd); then atan(q) = atan(c) + atan(t),
  c = j/16 the nearest, atan(c) from a dd table (Euler's series in integers), t = (q - c)/(1 +
  q c) in dd, |t| <= 1/32, atan t = t + t z P(z) with a fitted P in double.
  asin x = atan(x / sqrt(1 - x*x)) and acos x = atan(sqrt(1 - x*x) / x) (pi - that for x < 0),
  1 - x*x = (1 - x)(1 + x) and its square root in dd, the quotient taken so that it is at
  most 1 (atan2 of two dd values).
- sinh: |x| < 1: x + x z P(z) (fitted, dd in the last steps); below 36: (E - 1/E)/2 with E =
  exp|x| in dd and 1/E by a dd division; above: exp's parts scaled by 2**(k - 1). cosh: (E +
  1/E)/2 likewise, E/2 above 36.
- asinh x = log1p(a + a*a/(1 + sqrt(1 + a*a))), a = |x|, everything in dd and log1p's
  argument 1 + u carried as a dd into log's core; log a + log 2 above 2**28. acosh x =
  log1p(t + sqrt(2t + t*t)) with t = x - 1 (exact) below 2, log(x + sqrt(x*x - 1)) up to 2**28,
  log x + log 2 above. atanh x = log1p(2a/(1 - a))/2 with the quotient in dd.

The tables are computed when the module is imported, in exact integer arithmetic (no floats,
no libm), and rounded to doubles by Python's correctly rounded int-to-float division: pi by
Machin's formula and atan(j/16) by Euler's series for atan (both in 1,300-bit fixed point),
the 1,248 bits of 2/pi by an integer division, pi/2 cut into its Cody-Waite parts.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numba import njit

from ..core.jit import Variants


def _scalar(fn):
    return njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False,
                error_model="numpy")(fn)


# ----------------------------------------------------------------------------- tables

_P = 200        # bits of the fixed-point arithmetic below


def _atanh2_fixed(num: int, den: int) -> int:
    """2 atanh(num/den) * 2**_P, within a few units (|num/den| <= 1/3), integers only."""
    sign = -1 if num < 0 else 1
    z = (abs(num) << _P) // den
    z2 = (z * z) >> _P
    term, total, i = z, 0, 1
    while term:
        total += term // i
        term = (term * z2) >> _P
        i += 2
    return sign * 2 * total


def _as_float(v: int) -> float:
    """The double nearest v * 2**-_P."""
    return float(Fraction(v, 1 << _P))


def _split_fixed(v: int, bits: int) -> tuple[float, float]:
    """v * 2**-_P as hi + lo with hi a multiple of 2**-bits (so that small integer multiples
    of hi and sums of such values are exact)."""
    q = _P - bits
    hi = (v + (1 << (q - 1))) >> q
    return hi / (1 << bits), _as_float(v - (hi << q))


def _exp_table() -> tuple[np.ndarray, np.ndarray]:
    """2**(j/64) for j < 64 as hi + lo: six nested integer square roots of 2**(j + 64 _P)."""
    hi, lo = [], []
    for j in range(64):
        t = 1 << (j + 64 * _P)
        for _ in range(6):
            t = math.isqrt(t)
        hi.append(_as_float(t))
        lo.append(_as_float(t - int(Fraction(hi[-1]) * (1 << _P))))
    return np.array(hi), np.array(lo)


def _log_table() -> tuple[np.ndarray, np.ndarray]:
    """log(k/128) = 2 atanh((k - 128) / (k + 128)) for _LOG_K0 <= k <= 182, as hi + lo with
    hi a multiple of 2**-42."""
    pairs = [_split_fixed(_atanh2_fixed(k - 128, k + 128), 42) for k in range(_LOG_K0, 183)]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


_LOG_K0 = 90
_LN2_FIXED = _atanh2_fixed(1, 3)
_EXP_HI, _EXP_LO = _exp_table()
_LOG_HI, _LOG_LO = _log_table()
_LN2_64_HI, _LN2_64_LO = _split_fixed(_LN2_FIXED >> 6, 42)    # 36 bits: n * hi exact, |n| < 2**17
_LN2_HI, _LN2_LO = _split_fixed(_LN2_FIXED, 42)               # 42 bits: e * hi exact, |e| < 2**11
_INV_LN2_64 = float(Fraction(64 << _P, _LN2_FIXED))


def _dd(value: Fraction) -> tuple[float, float]:
    hi = float(value)
    return hi, float(value - Fraction(hi))


_ROUND = 6755399441055744.0         # 1.5 * 2**52: (v + _ROUND) - _ROUND rounds v to an integer
_SQRT2 = 1.4142135623730951
_TWO54 = 18014398509481984.0
_MIN_NORMAL = 2.2250738585072014e-308
_MANT = (1 << 52) - 1
_ONE_BITS = 1023 << 52
_HIGH26 = -(1 << 27)                 # clears the 27 low bits of a double's significand
_THIRD, _SIXTH, _SEVENTH = 1.0 / 3.0, 1.0 / 6.0, 1.0 / 7.0
_C4, _C5, _C6 = 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0
# constants as dd pairs (from 50-digit decimal expansions)
_RSQRT2_HI, _RSQRT2_LO = _dd(Fraction("0.70710678118654752440084436210484903928483593768847"))
_TWO_RSQRTPI = 1.1283791670955126   # 2/sqrt(pi) (a correction term only)
_K_HI, _K_LO = _dd(2 * Fraction("0.79788456080286535587989211986876373695171726232986"))
_GELU_C_HI, _GELU_C_LO = _dd(Fraction("0.044715"))


# erf(x)/x - 1 as a polynomial in x*x on [0, 1]; erfc(t) exp(t*t) on [0.75, 2] and [2, 4] as
# polynomials in t - 1.375 and t - 3; t erfc(t) exp(t*t) on [4, 28] in w = 1/(t*t).
# Highest power first, the constant term as a pair hi, lo; max fit error below 2e-19 for each.
_ERF_SMALL = np.array([
    5.957176147748911e-11, -1.1372848856791674e-09, 1.4659775274047436e-08,
    -1.6350312701054695e-07, 1.6461000484121368e-06, -1.4925595266831182e-05,
    0.0001205533111164271, -0.000854832698083379, 0.0052239776248180145,
    -0.026866170645076792, 0.11283791670954879, -0.3761263890318375,
    0.1283791670955126, -1.2550489881249748e-17,
])
_ERFC_HEAD = np.array([
    -4.4094716222366495e-10, 1.7250681797307015e-09, -5.753817170681488e-09,
    2.1471815132355912e-08, -7.905633220641513e-08, 2.8192600911581064e-07,
    -9.803040632854283e-07, 3.320817953251276e-06, -1.0938169444927068e-05,
    3.496502916202807e-05, -0.00010823683627870596, 0.0003236507758835364,
    -0.0009320855811180141, 0.00257622077922757, -0.006804603105295571,
    0.01708499160738958, -0.040503371223401106, 0.08986211864695719,
    -0.18431546997466777, 0.3432958898621254, -1.1941507934101406e-17,
])
_ERFC_2_4 = np.array([
    -3.32463503923892e-13, 1.6647790649164353e-12, -6.555844952443731e-12,
    3.165046186861128e-11, -1.539306000137148e-10, 7.206556491473509e-10,
    -3.312780752600577e-09, 1.4977112890287265e-08, -6.646690382092543e-08,
    2.8926692938101366e-07, -1.2333677143104898e-06, 5.146436493852072e-06,
    -2.0989464462229973e-05, 8.355413963925958e-05, -0.00032412554449670324,
    0.0012230390523759822, -0.00447943101837258, 0.01588437115987136,
    -0.05437226000717287, 0.17900115118138996, -5.552119524704471e-18,
])
_ERFC_4_UP = np.array([
    4494409219.87478, -2829060712.061628, 853385788.8418657,
    -167016968.17603797, 24486495.50854524, -2987058.568383735,
    333612.4937488197, -37245.37960694931, 4452.153450458183,
    -595.3978286782768, 91.63386310712049, -16.66119883606932,
    3.7024939918540407, -1.0578554685489245, 0.4231421876593345,
    -0.2820947917738762, 0.5641895835477563, 6.649999587775007e-18,
])



# ----------------------------------------------------------------------------- trigonometric tables

def _atan_fixed(a: int, b: int, prec: int) -> int:
    """atan(a/b) * 2**prec for 0 <= a <= b, integers only, within a few hundred units, by
    Euler's series atan(x) = x/(1 + x*x) sum_k (2k)!!/(2k + 1)!! (x*x/(1 + x*x))**k (the
    ratio of terms is at most 1/2)."""
    d = a * a + b * b
    term = (a * b << prec) // d
    total, k = 0, 0
    while term:
        total += term
        k += 1
        term = term * (2 * k) * a * a // ((2 * k + 1) * d)
    return total


def _pieces(v: int, prec: int, bits: int, count: int) -> list:
    """v * 2**-prec (v > 0) as count - 1 doubles of at most ``bits`` significant bits each
    (truncated, so the remainders stay positive) and a last double holding the rest."""
    out = []
    for _ in range(count - 1):
        q = max(v.bit_length() - bits, 0)
        top = (v >> q) << q
        out.append(float(Fraction(top, 1 << prec)))
        v -= top
    out.append(float(Fraction(v, 1 << prec)))
    return out


_PH_LIMBS = 52                          # 24-bit limbs of 2/pi held (bits 1..1248)
_PT = 24 * _PH_LIMBS + 64               # bits of the fixed-point pi they are divided from
_PI_FIXED = 16 * _atan_fixed(1, 5, _PT) - 4 * _atan_fixed(1, 239, _PT)     # Machin's formula
_TWO_OVER_PI_FIXED = (1 << (24 * _PH_LIMBS + 1 + _PT)) // _PI_FIXED         # 2/pi * 2**1248
# the limbs g_i (2/pi = sum g_i 2**(-24 (i + 1))), after three zero limbs for i = -3..-1
_TWO_OVER_PI_24 = np.array([0, 0, 0] + [
    (_TWO_OVER_PI_FIXED >> (24 * (_PH_LIMBS - 1 - i))) & 0xFFFFFF for i in range(_PH_LIMBS)],
    dtype=np.int64)
_PIO2_FIXED = _PI_FIXED >> (_PT - _P + 1)                                    # pi/2 * 2**_P
# pi/2 = p1 + p2 + p3 + p4 with 33 significant bits in p1, p2, p3: k * p_i is exact for
# |k| < 2**20 (Cody-Waite); p1 + ... + p4 is pi/2 to 2**-150
_PIO2_1, _PIO2_2, _PIO2_3, _PIO2_4 = _pieces(_PIO2_FIXED, _P, 33, 4)
_PIO2_HI, _PIO2_LO = _dd(Fraction(_PIO2_FIXED, 1 << _P))
_PI_HI, _PI_LO = _dd(Fraction(_PIO2_FIXED, 1 << (_P - 1)))
_PIO4 = _PIO2_HI * 0.5
_TWO_OVER_PI = float(Fraction(_TWO_OVER_PI_FIXED, 1 << (24 * _PH_LIMBS)))
_CW_MAX = 1.0e6                          # Cody-Waite below, Payne-Hanek above
# atan(j/16), j = 0..16, as hi + lo
_ATAN_TABLE = [_dd(Fraction(_atan_fixed(j, 16, _P), 1 << _P)) for j in range(17)]
_ATAN_HI = np.array([t[0] for t in _ATAN_TABLE])
_ATAN_LO = np.array([t[1] for t in _ATAN_TABLE])
_LN2_DHI, _LN2_DLO = _dd(Fraction(_LN2_FIXED, 1 << _P))
_TINY27 = 7.450580596923828e-09         # 2**-27: sin, tan, asin, atan, sinh, ... return x below

# Fitted polynomials in z = r*r (examples/exactmath_coefficients.py: mpmath.chebyfit at 60
# digits), highest power first, each coefficient as (hi, lo); the last three Horner steps run
# in double-double with the lo parts, the others in double.
# sin and cos for |r| <= pi/4 + 1e-4, sinh for |r| <= 1, atan for |t| <= 1/32 (atan's is
# evaluated in double only: its terms are below 2**-10 of the result).
# (sin(r)/r - 1)/z on [0, 0.6171], 8 terms, max error 5.24e-24
_SIN_P = np.array([
    (2.7912360888622325e-15, -1.5597069073119535e-31),
    (-7.646961188578481e-13, -4.252791314473104e-29),
    (1.6059042779805549e-10, -1.074093056017074e-26),
    (-2.50521083823851e-08, 1.536759171848184e-24),
    (2.755731922398109e-06, 3.9275237064319364e-23),
    (-0.00019841269841269839, 9.747919741492636e-21),
    (0.008333333333333333, 1.1456028730845545e-19),
    (-0.16666666666666666, -9.251853293521178e-18),
])
# (cos(r) - 1)/z on [0, 0.6171], 8 terms, max error 9.96e-23
_COS_P = np.array([
    (4.741071216368713e-14, -2.2147606561777735e-30),
    (-1.1470360953208635e-11, -5.8853777226727875e-28),
    (2.0876754980634244e-09, -1.4633727682741369e-25),
    (-2.7557319218181674e-07, -3.116885088898435e-24),
    (2.4801587301578187e-05, -1.246378022615217e-21),
    (-0.0013888888888888883, 1.0553041036951522e-19),
    (0.041666666666666664, 2.2923064546518063e-18),
    (-0.5, 9.959375739394253e-23),
])
# (sinh(r)/r - 1)/z on [0, 1], 8 terms, max error 2.54e-22
_SINH_P = np.array([
    (2.8445264169895285e-15, 1.0934602063454635e-31),
    (7.646625361656657e-13, 3.484988285804915e-29),
    (1.6059048396350562e-10, -8.233352231782857e-27),
    (2.505210836405804e-08, 1.4618744257066387e-24),
    (2.755731922404034e-06, -1.1905861152471456e-22),
    (0.00019841269841269773, -2.9260778488260105e-21),
    (0.008333333333333333, 1.4806675317945714e-19),
    (0.16666666666666666, 9.251605264140572e-18),
])
# (atan(r)/r - 1)/z on [0, 0.0009766625], 5 terms, max error 1.33e-19
_ATAN_P = np.array([
    (-0.0907215292378737, 1.8941738027641838e-19),
    (0.11111095089495254, -5.5327002104915295e-18),
    (-0.14285714280126915, 2.0218654098878875e-18),
    (0.19999999999999318, -3.843450704452952e-18),
    (-0.3333333333333333, -1.8370490596962815e-17),
])


# ----------------------------------------------------------------------------- building blocks

@_scalar
def _bits(x):
    return np.float64(x).view(np.int64)


@_scalar
def _from_bits(b):
    return np.int64(b).view(np.float64)


@_scalar
def _pow2(k):
    """2**k for -1022 <= k <= 1023, exactly."""
    return _from_bits((np.int64(k) + 1023) << 52)


@_scalar
def _scale(v, k):
    """v * 2**k for |v| < 4 and integer k, in at most two exact steps and one rounding
    (only a subnormal or overflowing result rounds)."""
    if k > 1023:
        return v * np.inf if k > 1100 else (v * _pow2(1023)) * _pow2(k - 1023)
    if k < -1022:
        return v * 0.0 if k < -1200 else (v * _pow2(k + 600)) * _pow2(-600)
    return v * _pow2(k)


@_scalar
def _two_sum(a, b):
    """s + e = a + b exactly, s = fl(a + b) (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@_scalar
def _fast_two_sum(a, b):
    """s + e = a + b exactly when a is 0 or has an exponent at least b's (Dekker)."""
    s = a + b
    return s, b - (s - a)


@_scalar
def _split(a):
    """a = hi + lo with 26 significant bits in hi (Veltkamp; |a| < 2**995)."""
    c = 134217729.0 * a
    hi = c - (c - a)
    return hi, a - hi


@_scalar
def _two_prod(a, b):
    """p + e = a * b exactly, p = fl(a * b) (Dekker, without FMA)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@_scalar
def _mul_dd(ah, al, bh, bl):
    p, e = _two_prod(ah, bh)
    return p, e + (ah * bl + al * bh)


@_scalar
def _div_dd(nh, nl, dh, dl):
    """(nh + nl) / (dh + dl) as q + lo: q rounded, lo from the exact remainder."""
    q = nh / dh
    ph, pl = _two_prod(q, dh)
    r = (((nh - ph) - pl) + nl) - q * dl
    return q, r / dh


@_scalar
def _times_dd(x, h, lo):
    """x (h + lo), rounded once; a zero result has the sign of x * h."""
    if abs(x) == np.inf:
        return x * h
    ph, pl = _two_prod(x, h)
    r = ph + (pl + x * lo)
    return r if r != 0.0 else ph


@_scalar
def _horner_dd(c, v):
    """The polynomial c at v (highest power first, the constant term as the pair c[-2],
    c[-1]) as hi + lo: the last step, which carries the most weight, is done exactly."""
    n = c.size
    r = c[0]
    for i in range(1, n - 2):
        r = r * v + c[i]
    ph, pl = _two_prod(r, v)
    s, e = _two_sum(c[n - 2], ph)
    return s, e + (pl + c[n - 1])


# ----------------------------------------------------------------------------- exp and log

@_scalar
def _expm1_small(r):
    """exp(r) - 1 - r for |r| < 0.006 (Taylor to r**6)."""
    return r * r * (0.5 + r * (_SIXTH + r * (_C4 + r * (_C5 + r * _C6))))


@_scalar
def _exp_parts(x, xlo):
    """exp(x + xlo) = (hi + lo) * 2**k, hi in [0.99, 2); for |x| < 1400, |xlo| < 1e-3."""
    nf = (x * _INV_LN2_64 + _ROUND) - _ROUND
    n = np.int64(nf)
    rh = x - nf * _LN2_64_HI                   # exact
    rl = xlo - nf * _LN2_64_LO
    q = _expm1_small(rh + rl)
    j = n & 63
    th = _EXP_HI[j]
    ph, pl = _two_prod(th, rh)
    s, e = _fast_two_sum(th, ph)
    hi, lo = _fast_two_sum(s, e + (pl + (_EXP_LO[j] + th * (rl + q))))
    return hi, lo, n >> 6


@_scalar
def _exp_dd(x, xlo):
    """exp(x + xlo) as hi + lo, for x <= 709 (tiny results lose their low part)."""
    if x < -760.0:
        return 0.0, 0.0
    hi, lo, k = _exp_parts(x, xlo)
    return _scale(hi, k), _scale(lo, k)


@_scalar
def _exp(x):
    if not x > -760.0:
        return x if x != x else 0.0
    if x > 710.0:
        return np.inf
    hi, lo, k = _exp_parts(x, 0.0)
    return _scale(hi + lo, k)


@_scalar
def _expm1(x):
    if x != x:
        return x
    if x > 710.0:
        return np.inf
    if x < -40.0:
        return -1.0
    if abs(x) < 0.005:      # the reduction would give r = x
        return x + _expm1_small(x) if x != 0.0 else x
    hi, lo, k = _exp_parts(x, 0.0)
    if k > 1000:
        return _scale(hi + lo, k)
    s = _pow2(k)
    a, e = _two_sum(hi * s, -1.0)
    return a + (e + lo * s)


@_scalar
def _log_parts(x, xlo):
    """log(x + xlo) as hi + lo (hi = the rounded log), for finite x > 0, |xlo| <= ulp(x)."""
    e = np.int64(0)
    if x < _MIN_NORMAL:
        x = x * _TWO54
        xlo = xlo * _TWO54
        e = np.int64(-54)
    b = _bits(x)
    ex = (b >> 52) - 1023
    m = _from_bits((b & _MANT) | _ONE_BITS)
    c = _scale(xlo, -ex)
    e = e + ex
    if m > _SQRT2:
        m = m * 0.5
        c = c * 0.5
        e = e + 1
    k = np.int64(m * 128.0 + 0.5)
    big_f = np.float64(k) * 0.0078125
    f = m - big_f
    u = f / big_f
    uh = _from_bits(_bits(u) & _HIGH26)         # uh * F and (u - uh) * F are exact
    ul = u - uh
    corr = (((f - uh * big_f) - ul * big_f) + c) / big_f
    de = np.float64(e)
    hi, err = _fast_two_sum(de * _LN2_HI + _LOG_HI[k - _LOG_K0], u)
    poly = (u * u) * (-0.5 + u * (_THIRD + u * (-0.25 + u * (0.2 + u * (
        -_SIXTH + u * (_SEVENTH + u * -0.125))))))
    # log1p(u + corr) = log1p(u) + corr (1 - u) - corr**2 / 2 to 2**-100; the low parts are
    # summed as a dd, since corr (xlo: log1p's rounding of 1 + x) can be near the result's ulp
    small = (poly - corr * u - 0.5 * corr * corr) + (de * _LN2_LO + _LOG_LO[k - _LOG_K0])
    t1, t2 = _two_sum(corr, small)
    s, e1 = _fast_two_sum(hi, t1)
    return _fast_two_sum(s, e1 + (err + t2))


@_scalar
def _log(x):
    if not x > 0.0:
        return -np.inf if x == 0.0 else np.nan      # NaN for NaN and x < 0
    if x == np.inf:
        return x
    return _log_parts(x, 0.0)[0]


@_scalar
def _log1p(x):
    if not x > -1.0:
        return -np.inf if x == -1.0 else np.nan
    if x == np.inf or abs(x) < 5.551115123125783e-17:
        return x
    u, c = _two_sum(1.0, x)
    return _log_parts(u, c)[0]


# ----------------------------------------------------------------------------- built on exp, log

@_scalar
def _sigmoid_parts(x, xlo):
    """1 / (1 + exp(-(x + xlo))) = (h + lo) * 2**k: (h, lo, k)."""
    k = np.int64(0)
    if x != x:
        return x, x, k
    if x < -700.0:                      # e / (1 + e) = e to 2**-1000
        if x < -1400.0:
            return 0.0, 0.0, k
        return _exp_parts(x, xlo)
    if x >= 0.0:
        eh, el = _exp_dd(-x, -xlo)
        dh, dl = _two_sum(1.0, eh)
        h, lo = _div_dd(1.0, 0.0, dh, dl + el)
        return h, lo, k
    eh, el = _exp_dd(x, xlo)
    dh, dl = _two_sum(1.0, eh)
    h, lo = _div_dd(eh, el, dh, dl + el)
    return h, lo, k


@_scalar
def _tanh(x):
    """(1 - E) / (1 + E) with E = exp(-2|x|), the sign of x; x itself below 2**-28."""
    if x != x:
        return x
    a = abs(x)
    if a < 3.725290298461914e-09:
        return x
    t = 1.0
    if a < 22.0:
        eh, el = _exp_dd(-2.0 * a, 0.0)
        nh, nl = _two_sum(1.0, -eh)
        dh, dl = _two_sum(1.0, eh)
        qh, ql = _div_dd(nh, nl - el, dh, dl + el)
        t = qh + ql
    return t if x > 0.0 else -t


@_scalar
def _softplus(x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))."""
    if x != x or x > 40.0:
        return x
    if x < -40.0:
        return _exp(x)          # log1p(e) = e (1 - e/2 ...) with e < 2**-57
    eh, el = _exp_dd(-abs(x), 0.0)
    if x < -18.0:               # e < 2**-25: log1p(e) = e - e**2/2 + e**3/3 to 2**-100
        return eh + (el + eh * eh * (-0.5 + eh * _THIRD))
    u, c = _two_sum(1.0, eh)
    lh, ll = _log_parts(u, c + el)
    s, e = _two_sum(x if x > 0.0 else 0.0, lh)
    return s + (e + ll)


@_scalar
def _mish(x):
    """x tanh(log(1 + e)) = x n / (n + 2) with n = e (e + 2), e = exp(x)."""
    if x != x or x > 20.0:
        return x
    if x < -760.0:
        return -0.0
    if x < -700.0:                      # n / (n + 2) = e to 2**-1000
        hi, lo, k = _exp_parts(x, 0.0)
        return _scale(_times_dd(x, hi, lo), k)
    eh, el = _exp_dd(x, 0.0)
    ah, al = _two_sum(eh, 2.0)
    nh, nl = _mul_dd(eh, el, ah, al + el)
    dh, dl = _two_sum(nh, 2.0)
    qh, ql = _div_dd(nh, nl, dh, dl + nl)
    return _times_dd(x, qh, ql)


@_scalar
def _swish(x, alpha):
    """x sigmoid(alpha x); the limit 0 (with x's sign) where the sigmoid is 0."""
    ph, pl = _two_prod(alpha, x)
    sh, sl, k = _sigmoid_parts(ph, pl)
    if sh == 0.0:
        return -0.0 if x < 0.0 else 0.0
    return _scale(_times_dd(x, sh, sl), k)


@_scalar
def _erfc_tail(t, tlo):
    """erfc(t + tlo) = (vh + vl) * 2**k for t >= 0.75: (vh, vl, k). erfc = exp(-t*t) g(t)
    with g' = 2 t g - 2/sqrt(pi) for the tlo correction; above 4, g = G(1/t**2) / t."""
    if t > 28.0:
        return 0.0, 0.0, np.int64(0)
    sh, sl = _two_prod(t, t)
    hi, lo, k = _exp_parts(-sh, -(sl + 2.0 * t * tlo))
    if t < 4.0:
        if t < 2.0:
            gh, gl = _horner_dd(_ERFC_HEAD, t - 1.375)
        else:
            gh, gl = _horner_dd(_ERFC_2_4, t - 3.0)
        vh, vl = _two_prod(hi, gh)
        vl = vl + ((hi * gl + lo * gh) + hi * (tlo * (2.0 * t * gh - _TWO_RSQRTPI)))
    else:
        gh, gl = _horner_dd(_ERFC_4_UP, 1.0 / sh)
        vh, vl = _two_prod(hi, gh)
        vh, vl = _div_dd(vh, vl + (hi * gl + lo * gh), t, tlo)
    return vh, vl, k


@_scalar
def _erf(x):
    if x != x or x == 0.0:
        return x
    a = abs(x)
    if a < 0.75:
        ph, pl = _horner_dd(_ERF_SMALL, x * x)
        qh, ql = _two_prod(x, ph)              # erf(x) = x + qh + ql + x pl
        s, e = _two_sum(x, qh)
        return s + (e + (ql + x * pl))
    r = 1.0
    if a < 6.0:
        vh, vl, k = _erfc_tail(a, 0.0)
        r = 1.0 - _scale(vh + vl, k)
    return r if x > 0.0 else -r


@_scalar
def _erfc_parts(x, xlo):
    """erfc(x + xlo) = (vh + vl) * 2**k: (vh, vl, k)."""
    if x != x:
        return x, x, np.int64(0)
    a = abs(x)
    if a < 0.75:
        z = x * x
        ph, pl = _horner_dd(_ERF_SMALL, z)
        qh, ql = _two_prod(x, ph)
        # erf(x + xlo) - erf(x) = xlo 2/sqrt(pi) exp(-z), exp(-z) to five terms (z < 1)
        d = xlo * (_TWO_RSQRTPI * (1.0 - z * (1.0 - z * (0.5 - z * (_SIXTH - z * _C4)))))
        s, e = _two_sum(1.0, -x)
        s, e2 = _two_sum(s, -qh)
        return s, e2 + (e - ((ql + x * pl) + d)), np.int64(0)
    if x > 0.0:
        return _erfc_tail(a, xlo)
    vh, vl, k = _erfc_tail(a, -xlo)
    s, e = _two_sum(2.0, -_scale(vh, k))
    return s, e - _scale(vl, k), np.int64(0)


@_scalar
def _gelu(x):
    """x/2 erfc(-x/sqrt2) (= x/2 (1 + erf(x/sqrt2)) without its cancellation for x < 0)."""
    if x == -np.inf:
        return -0.0
    th, tl = _two_prod(x, -_RSQRT2_HI)
    vh, vl, k = _erfc_parts(th, tl - x * _RSQRT2_LO)
    return _scale(_times_dd(0.5 * x, vh, vl), k)


@_scalar
def _gelu_tanh(x):
    """x/2 (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x**3)."""
    if x != x or x > 10.0:
        return x
    if x < -25.0:
        return -0.0
    x2h, x2l = _two_prod(x, x)
    x3h, x3l = _mul_dd(x2h, x2l, x, 0.0)
    ch, cl = _mul_dd(_GELU_C_HI, _GELU_C_LO, x3h, x3l)
    sh, sl = _two_sum(x, ch)
    uh, ul = _mul_dd(_K_HI, _K_LO, sh, sl + cl)
    gh, gl, k = _sigmoid_parts(uh, ul)
    return _scale(_times_dd(x, gh, gl), k)


@_scalar
def _int_kind(y):
    """(y is an integer, y is an odd integer) for finite y."""
    if abs(y) >= 9007199254740992.0:     # 2**53: every such double is an even integer
        return True, False
    n = np.int64(y)
    if np.float64(n) != y:
        return False, False
    return True, (n & 1) == 1


@_scalar
def _pow(x, y):
    """x**y by C99's rules; exp(y log|x|) with log|x| and the product in dd."""
    if y == 0.0 or x == 1.0:
        return 1.0
    if x != x or y != y:
        return x + y
    is_int, odd = _int_kind(y) if abs(y) != np.inf else (True, False)
    if x == 0.0:
        if y < 0.0:
            return 1.0 / x if odd else np.inf
        return x if odd else 0.0
    ax = abs(x)
    if abs(y) == np.inf:
        if ax == 1.0:
            return 1.0
        return 0.0 if (ax < 1.0) == (y > 0.0) else np.inf
    if ax == np.inf:
        r = np.inf if y > 0.0 else 0.0
        return -r if x < 0.0 and odd else r
    if x < 0.0 and not is_int:
        return np.nan
    lh, ll = _log_parts(ax, 0.0)
    p = y * lh
    if p > 710.0:
        r = np.inf
    elif p < -760.0:
        r = 0.0
    else:
        ph, pl = _two_prod(y, lh)
        hi, lo, k = _exp_parts(ph, pl + y * ll)
        r = _scale(hi + lo, k)
    return -r if x < 0.0 and odd else r


# ----------------------------------------------------------------------------- trigonometric

@_scalar
def _add_dd(ah, al, bh, bl):
    s, e = _two_sum(ah, bh)
    return _fast_two_sum(s, e + (al + bl))


@_scalar
def _sqrt_dd(h, lo):
    """sqrt(h + lo) as s + c for h > 0: s = sqrt(h) (IEEE), c from the exact residual."""
    s = np.sqrt(h)
    ph, pl = _two_prod(s, s)
    return s, (((h - ph) - pl) + lo) / (2.0 * s)


@_scalar
def _poly_dd(c, zh, zl):
    """The polynomial c (rows (hi, lo), highest power first) at zh + zl, as hi + lo: Horner
    in double, its last three steps in double-double."""
    n = c.shape[0]
    r = c[0, 0]
    for i in range(1, n - 3):
        r = r * zh + c[i, 0]
    h, lo = r, 0.0
    for i in range(n - 3, n):
        ph, pl = _mul_dd(h, lo, zh, zl)
        s, e = _two_sum(ph, c[i, 0])
        h, lo = _fast_two_sum(s, e + (pl + c[i, 1]))
    return h, lo


@_scalar
def _sin_kernel(rh, rl):
    """sin(rh + rl) as hi + lo for |rh| <= pi/4 + 1e-4: r + r z P(z), z = r*r."""
    zh, zl = _two_prod(rh, rh)
    zl = zl + 2.0 * rh * rl
    ph, pl = _poly_dd(_SIN_P, zh, zl)
    wh, wl = _mul_dd(zh, zl, ph, pl)
    vh, vl = _mul_dd(rh, rl, wh, wl)
    s, e = _two_sum(rh, vh)
    return _fast_two_sum(s, e + (rl + vl))


@_scalar
def _cos_kernel(rh, rl):
    """cos(rh + rl) as hi + lo for |rh| <= pi/4 + 1e-4: 1 + z Q(z), z = r*r."""
    zh, zl = _two_prod(rh, rh)
    zl = zl + 2.0 * rh * rl
    qh, ql = _poly_dd(_COS_P, zh, zl)
    wh, wl = _mul_dd(zh, zl, qh, ql)
    s, e = _fast_two_sum(1.0, wh)
    return _fast_two_sum(s, e + wl)


@_scalar
def _rem_pio2_big(a):
    """(rh, rl, n) with a = (4j + n) pi/2 + rh + rl, |rh| <= pi/4, for finite a >= 2**19
    (Payne-Hanek). a = M 2**(24 q) with the integer M = mantissa * 2**(e mod 24) < 2**76 in
    four 24-bit limbs; the limbs g_i of 2/pi before i = q - 1 only add multiples of 4 to
    a * 2/pi, so T = M * (g_{q-1} ... g_{q+8}) (ten limbs, 216 fraction bits; the rest of 2/pi
    adds below 2**-140) holds n in its integer limb and r / (pi/2) in the nine below it, of
    which the top seven are kept (r / (pi/2) >= 2**-62 for every double: 106 bits and more)."""
    b = _bits(a)
    e = ((b >> 52) & 0x7FF) - 1075
    m = (b & _MANT) | (np.int64(1) << 52)
    q = e // 24
    sh = e - 24 * q
    mask = np.int64(0xFFFFFF)
    v = (m & mask) << sh
    a0 = v & mask
    v = (((m >> 24) & mask) << sh) + (v >> 24)
    a1 = v & mask
    v = ((m >> 48) << sh) + (v >> 24)
    a2 = v & mask
    a3 = v >> 24
    base = q - 1 + 3 + 9                # index of g_{q-1} in _TWO_OVER_PI_24, plus 9
    carry = np.int64(0)
    t1 = t2 = t3 = t4 = t5 = t6 = t7 = t8 = np.int64(0)
    for j in range(10):                 # limb j of T (the fraction is limbs 0..8)
        col = carry + a0 * _TWO_OVER_PI_24[base - j]
        if j >= 1:
            col += a1 * _TWO_OVER_PI_24[base - j + 1]
        if j >= 2:
            col += a2 * _TWO_OVER_PI_24[base - j + 2]
        if j >= 3:
            col += a3 * _TWO_OVER_PI_24[base - j + 3]
        carry = col >> 24
        t1, t2, t3, t4, t5, t6, t7, t8 = col & mask, t1, t2, t3, t4, t5, t6, t7
    # t1 = limb 9 (n in its two low bits), t2..t8 = limbs 8..2 (the fraction's top 168 bits)
    n = t1 & 3
    neg = t2 >= 0x800000                # fraction >= 1/2: take fraction - 1, n + 1
    if neg:
        n = (n + 1) & 3
        v = (mask - t8) + 1
        t8 = v & mask
        v = (mask - t7) + (v >> 24)
        t7 = v & mask
        v = (mask - t6) + (v >> 24)
        t6 = v & mask
        v = (mask - t5) + (v >> 24)
        t5 = v & mask
        v = (mask - t4) + (v >> 24)
        t4 = v & mask
        v = (mask - t3) + (v >> 24)
        t3 = v & mask
        t2 = ((mask - t2) + (v >> 24)) & mask
    hi = np.float64(t2 * 16777216 + t3) * 3.552713678800501e-15        # 2**-48
    mid = np.float64(t4 * 16777216 + t5) * 1.2621774483536189e-29      # 2**-96
    low = (np.float64(t6 * 16777216 + t7) + np.float64(t8) * 5.960464477539063e-08) * \
        4.484155085839415e-44                                            # 2**-144, 2**-24
    s, err = _two_sum(hi, mid)
    fh, fl = _fast_two_sum(s, err + low)
    rh, rl = _mul_dd(fh, fl, _PIO2_HI, _PIO2_LO)
    if neg:
        return -rh, -rl, n
    return rh, rl, n


@_scalar
def _rem_pio2(x):
    """(rh, rl, n): x = (4j + n) pi/2 + rh + rl, |rh| <= pi/4 (+ 1e-4), for finite x."""
    a = abs(x)
    if a <= _PIO4:
        return x, 0.0, np.int64(0)
    if a < _CW_MAX:                     # Cody-Waite: k p1, k p2, k p3 exact, t exact
        kf = (x * _TWO_OVER_PI + _ROUND) - _ROUND
        t = x - kf * _PIO2_1
        s, e1 = _two_sum(t, -(kf * _PIO2_2))
        s, e2 = _two_sum(s, -(kf * _PIO2_3))
        rh, rl = _two_sum(s, (e1 + e2) - kf * _PIO2_4)
        return rh, rl, np.int64(kf) & 3
    rh, rl, n = _rem_pio2_big(a)
    if x < 0.0:
        return -rh, -rl, (4 - n) & 3
    return rh, rl, n


@_scalar
def _sin(x):
    if abs(x) < _TINY27:                # sin x = x (1 - x*x/6): x is the nearest double
        return x
    if not abs(x) < np.inf:
        return x - x                    # NaN for NaN and ±inf
    rh, rl, n = _rem_pio2(x)
    h = _cos_kernel(rh, rl)[0] if n & 1 else _sin_kernel(rh, rl)[0]
    return -h if n & 2 else h


@_scalar
def _cos(x):
    if abs(x) < _TINY27:
        return 1.0
    if not abs(x) < np.inf:
        return x - x
    rh, rl, n = _rem_pio2(x)
    h = _sin_kernel(rh, rl)[0] if n & 1 else _cos_kernel(rh, rl)[0]
    return -h if (n + 1) & 2 else h


@_scalar
def _tan(x):
    """sin/cos of the reduced argument in double-double, one division (-cos/sin for odd n)."""
    if abs(x) < _TINY27:                # tan x = x (1 + x*x/3)
        return x
    if not abs(x) < np.inf:
        return x - x
    rh, rl, n = _rem_pio2(x)
    sh, sl = _sin_kernel(rh, rl)
    ch, cl = _cos_kernel(rh, rl)
    if n & 1:
        qh, ql = _div_dd(ch, cl, sh, sl)
        return -(qh + ql)
    qh, ql = _div_dd(sh, sl, ch, cl)
    return qh + ql


@_scalar
def _sincos_turn(j, n):
    """(cos, sin) of 2 pi j / n for integers j, n >= 1 (|j|, n < 2**50): j mod n and the
    nearest quarter turn q taken off exactly in integers, r = (pi/2) (4m - q n) / n in
    double-double, |r| <= pi/4; multiples of a quarter turn give exact 0 and ±1."""
    m = j % n
    q = (8 * m + n) // (2 * n)
    num = 4 * m - q * n
    fh, fl = _div_dd(np.float64(num), 0.0, np.float64(n), 0.0)
    rh, rl = _mul_dd(fh, fl, _PIO2_HI, _PIO2_LO)
    if num == 0:
        rh, rl = 0.0, 0.0
    s = _sin_kernel(rh, rl)[0]
    c = _cos_kernel(rh, rl)[0]
    q = q & 3
    if q == 1:                          # (0 - v: an exact zero stays +0)
        return 0.0 - s, c
    if q == 2:
        return 0.0 - c, 0.0 - s
    if q == 3:
        return s, 0.0 - c
    return c, s


@_scalar
def _atan_dd(qh, ql):
    """atan(qh + ql) as hi + lo for 0 <= qh <= 1 (+ 2**-50): atan(c) + atan(t) with c = j/16
    the nearest, t = (q - c) / (1 + q c) in double-double (|t| <= 1/32), atan(t) = t + t z
    P(z), z = t*t, in double (its terms are below 2**-10 of the result)."""
    j = np.int64(qh * 16.0 + 0.5)
    th, tl = qh, ql
    if j > 0:
        c = np.float64(j) * 0.0625
        nh, nl = _two_sum(qh - c, ql)           # qh - c is exact (Sterbenz)
        ph, pl = _two_prod(qh, c)
        dh, dl = _two_sum(1.0, ph)
        th, tl = _div_dd(nh, nl, dh, dl + (pl + ql * c))
    z = th * th
    p = _ATAN_P[0, 0]
    for i in range(1, _ATAN_P.shape[0]):
        p = p * z + _ATAN_P[i, 0]
    tail = tl + th * (z * p)
    if j == 0:
        return _fast_two_sum(th, tail)
    s, e = _two_sum(_ATAN_HI[j], th)
    return _fast_two_sum(s, e + (_ATAN_LO[j] + tail))


@_scalar
def _atan2_pos(yh, yl, xh, xl):
    """atan((yh + yl) / (xh + xl)) as hi + lo for y, x >= 0 not both 0: atan(y/x), or
    pi/2 - atan(x/y) when y > x."""
    if yh <= xh:
        qh, ql = _div_dd(yh, yl, xh, xl)
        return _atan_dd(qh, ql)
    qh, ql = _div_dd(xh, xl, yh, yl)
    ah, al = _atan_dd(qh, ql)
    return _add_dd(_PIO2_HI, _PIO2_LO, -ah, -al)


@_scalar
def _atan(x):
    if x != x:
        return x
    a = abs(x)
    if a < _TINY27:                     # atan x = x (1 - x*x/3)
        return x
    if a > 1.152921504606847e18:        # 2**60: pi/2 - 1/a (the next term is below 2**-180)
        r = _PIO2_HI + (_PIO2_LO - 1.0 / a)
    elif a <= 1.0:
        r = _atan_dd(a, 0.0)[0]
    else:
        qh, ql = _div_dd(1.0, 0.0, a, 0.0)
        ah, al = _atan_dd(qh, ql)
        r = _add_dd(_PIO2_HI, _PIO2_LO, -ah, -al)[0]
    return r if x > 0.0 else -r


@_scalar
def _one_minus_sq(a):
    """1 - a*a = (1 - a)(1 + a) as hi + lo, for 0 <= a < 1."""
    uh, ul = _two_sum(1.0, -a)
    vh, vl = _two_sum(1.0, a)
    return _mul_dd(uh, ul, vh, vl)


@_scalar
def _asin(x):
    """atan(|x| / sqrt(1 - x*x)) with the square root in double-double, x's sign."""
    if x != x:
        return x
    a = abs(x)
    if a < _TINY27:                     # asin x = x (1 + x*x/6)
        return x
    if a >= 1.0:
        if a > 1.0:
            return np.nan
        r = _PIO2_HI
    else:
        sh, sl = _one_minus_sq(a)
        ch, cl = _sqrt_dd(sh, sl)
        r = _atan2_pos(a, 0.0, ch, cl)[0]
    return r if x > 0.0 else -r


@_scalar
def _acos(x):
    """atan(sqrt(1 - x*x) / |x|), and pi minus that for x < 0."""
    if x != x:
        return x
    a = abs(x)
    if a > 1.0:
        return np.nan
    if a == 1.0:
        return 0.0 if x > 0.0 else _PI_HI
    sh, sl = _one_minus_sq(a)
    ch, cl = _sqrt_dd(sh, sl)
    h, lo = _atan2_pos(ch, cl, a, 0.0)
    if x >= 0.0:
        return h
    return _add_dd(_PI_HI, _PI_LO, -h, -lo)[0]


# ----------------------------------------------------------------------------- hyperbolic

@_scalar
def _exp_pair(a):
    """exp(a) and exp(-a) as double-doubles, for 0 <= a <= 40."""
    hi, lo, k = _exp_parts(a, 0.0)
    eh, el = _scale(hi, k), _scale(lo, k)
    ih, il = _div_dd(1.0, 0.0, eh, el)
    return eh, el, ih, il


@_scalar
def _sinh(x):
    """x + x z P(z) (z = x*x) in double-double below 1; (E - 1/E)/2 up to 36, E = exp|x| in
    double-double; E/2 (scaled from exp's parts, no overflow before the result's) above."""
    if x != x:
        return x
    a = abs(x)
    if a < _TINY27:
        return x
    if a < 1.0:
        zh, zl = _two_prod(a, a)
        ph, pl = _poly_dd(_SINH_P, zh, zl)
        wh, wl = _mul_dd(zh, zl, ph, pl)
        vh, vl = _two_prod(a, wh)
        s, e = _fast_two_sum(a, vh)
        r = s + (e + (vl + a * wl))
    elif a < 36.0:
        eh, el, ih, il = _exp_pair(a)
        s, e = _two_sum(eh, -ih)
        r = (s + (e + (el - il))) * 0.5
    elif a < 711.0:
        hi, lo, k = _exp_parts(a, 0.0)
        r = _scale(hi + lo, k - 1)
    else:
        r = np.inf
    return r if x > 0.0 else -r


@_scalar
def _cosh(x):
    """(E + 1/E)/2 with E = exp|x| in double-double up to 36, E/2 above."""
    if x != x:
        return x
    a = abs(x)
    if a < 36.0:
        eh, el, ih, il = _exp_pair(a)
        s, e = _two_sum(eh, ih)
        return (s + (e + (el + il))) * 0.5
    if a < 711.0:
        hi, lo, k = _exp_parts(a, 0.0)
        return _scale(hi + lo, k - 1)
    return np.inf


@_scalar
def _log1p_dd(uh, ul):
    """log(1 + uh + ul) for uh + ul > -1, with 1 + u carried in double-double."""
    vh, vl = _two_sum(1.0, uh)
    vh, vl = _fast_two_sum(vh, vl + ul)
    return _log_parts(vh, vl)[0]


@_scalar
def _asinh(x):
    """log1p(a + a*a / (1 + sqrt(1 + a*a))) (= log(a + sqrt(a*a + 1))) in double-double,
    a = |x|; log(a) + log 2 above 2**28; x's sign."""
    if x != x or abs(x) == np.inf:
        return x
    a = abs(x)
    if a < _TINY27:                     # asinh x = x (1 - x*x/6)
        return x
    if a > 268435456.0:                 # 2**28: the rest is below 2**-58
        lh, ll = _log_parts(a, 0.0)
        r = _add_dd(lh, ll, _LN2_DHI, _LN2_DLO)[0]
    else:
        zh, zl = _two_prod(a, a)
        qh, ql = _fast_two_sum(1.0, zh) if zh < 1.0 else _fast_two_sum(zh, 1.0)
        sh, sl = _sqrt_dd(qh, ql + zl)
        dh, dl = _fast_two_sum(1.0, sh) if sh < 1.0 else _fast_two_sum(sh, 1.0)
        fh, fl = _div_dd(zh, zl, dh, dl + sl)
        uh, ul = _two_sum(a, fh)
        r = _log1p_dd(uh, ul + fl)
    return r if x > 0.0 else -r


@_scalar
def _acosh(x):
    """log1p(t + sqrt(2t + t*t)), t = x - 1 (exact), below 2; log(x + sqrt(x*x - 1)) up to
    2**28; log(x) + log 2 above; all in double-double."""
    if x != x:
        return x
    if not x >= 1.0:
        return np.nan
    if x == np.inf:
        return x
    if x > 268435456.0:
        lh, ll = _log_parts(x, 0.0)
        return _add_dd(lh, ll, _LN2_DHI, _LN2_DLO)[0]
    if x >= 2.0:
        zh, zl = _two_prod(x, x)
        qh, ql = _fast_two_sum(zh, -1.0)
        sh, sl = _sqrt_dd(qh, ql + zl)
        uh, ul = _fast_two_sum(x, sh)
        uh, ul = _fast_two_sum(uh, ul + sl)
        return _log_parts(uh, ul)[0]
    t = x - 1.0
    if t == 0.0:
        return 0.0
    th, tl = _two_prod(t, t)
    wh, wl = _fast_two_sum(2.0 * t, th)
    sh, sl = _sqrt_dd(wh, wl + tl)
    uh, ul = _two_sum(t, sh)
    return _log1p_dd(uh, ul + sl)


@_scalar
def _atanh(x):
    """log1p(2a / (1 - a)) / 2 with the quotient in double-double, a = |x|; x's sign."""
    if x != x:
        return x
    a = abs(x)
    if a < _TINY27:                     # atanh x = x (1 + x*x/3)
        return x
    if a >= 1.0:
        if a > 1.0:
            return np.nan
        r = np.inf
    else:
        dh, dl = _two_sum(1.0, -a)
        qh, ql = _div_dd(2.0 * a, 0.0, dh, dl)
        r = 0.5 * _log1p_dd(qh, ql)
    return r if x > 0.0 else -r


# ----------------------------------------------------------------------------- public functions
# float32 in, float32 out (computed in float64, rounded once); float64 in, float64 out.

@_scalar
def exp(x):
    return type(x)(_exp(np.float64(x)))


@_scalar
def expm1(x):
    return type(x)(_expm1(np.float64(x)))


@_scalar
def log(x):
    return type(x)(_log(np.float64(x)))


@_scalar
def log1p(x):
    return type(x)(_log1p(np.float64(x)))


@_scalar
def tanh(x):
    return type(x)(_tanh(np.float64(x)))


@_scalar
def sigmoid(x):
    h, lo, k = _sigmoid_parts(np.float64(x), 0.0)
    return type(x)(_scale(h + lo, k))


@_scalar
def erf(x):
    return type(x)(_erf(np.float64(x)))


@_scalar
def erfc(x):
    vh, vl, k = _erfc_parts(np.float64(x), 0.0)
    return type(x)(_scale(vh + vl, k))


@_scalar
def softplus(x):
    return type(x)(_softplus(np.float64(x)))


@_scalar
def mish(x):
    return type(x)(_mish(np.float64(x)))


@_scalar
def gelu(x):
    return type(x)(_gelu(np.float64(x)))


@_scalar
def gelu_tanh(x):
    return type(x)(_gelu_tanh(np.float64(x)))


@_scalar
def swish(x, alpha):
    return type(x)(_swish(np.float64(x), np.float64(alpha)))


@_scalar
def pow(x, y):     # noqa: A001 (the operator's name)
    return type(x)(_pow(np.float64(x), np.float64(y)))


@_scalar
def sin(x):
    return type(x)(_sin(np.float64(x)))


@_scalar
def cos(x):
    return type(x)(_cos(np.float64(x)))


@_scalar
def tan(x):
    return type(x)(_tan(np.float64(x)))


@_scalar
def asin(x):
    return type(x)(_asin(np.float64(x)))


@_scalar
def acos(x):
    return type(x)(_acos(np.float64(x)))


@_scalar
def atan(x):
    return type(x)(_atan(np.float64(x)))


@_scalar
def sinh(x):
    return type(x)(_sinh(np.float64(x)))


@_scalar
def cosh(x):
    return type(x)(_cosh(np.float64(x)))


@_scalar
def asinh(x):
    return type(x)(_asinh(np.float64(x)))


@_scalar
def acosh(x):
    return type(x)(_acosh(np.float64(x)))


@_scalar
def atanh(x):
    return type(x)(_atanh(np.float64(x)))


@_scalar
def cos_sin_turn(j, n):
    """(cos, sin) of 2 pi j / n for int64 j and n >= 1, as float64 (DFT twiddles, windows)."""
    return _sincos_turn(np.int64(j), np.int64(n))


# ----------------------------------------------------------------------------- wiring

class FastExact:
    """Kernel variants whose fast forms come from one binding of a template and whose exact
    forms from another (the exact one binds the scalar functions above instead of libm's)."""

    __slots__ = ("fast", "exact")

    def __init__(self, fast: Variants, exact: Variants):
        self.fast = fast
        self.exact = exact

    def get(self, exact: bool, parallel: bool = False, small: bool = False):
        return (self.exact if exact else self.fast).get(exact, parallel, small)

    def pick(self, path: str, exact: bool, parallel: bool) -> tuple:
        return (self.exact if exact else self.fast).pick(path, exact, parallel)

    @classmethod
    def of(cls, make, libm_op, own_op, name: str) -> "FastExact":
        """``make(op, name)`` (e.g. elementwise.unary_variants) with the libm-calling scalar
        function for the fast variants and graphrt's own for the exact ones."""
        return cls(make(libm_op, name), make(own_op, name + "_exact"))


def exact_twin(helper, name: str, **deps):
    """The exact variant of an njit scalar helper whose code branches on its module's global
    ``EXACT`` (the helper as compiled, with EXACT = False, is the fast one). ``deps`` are the
    exact functions it calls, bound again so that editing them renames the twin."""
    return Variants(helper.py_func, name, **deps).get(True)
