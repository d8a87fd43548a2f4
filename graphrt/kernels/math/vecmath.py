"""Fast-mode exp, tanh, erf and the logistic function for float32 elements, written as
arithmetic, selects and one bit cast, so that LLVM vectorises the loops calling them (libm's
functions are calls it keeps scalar: 2 to 15 ns an element here, against a fraction of a ns).

Each is computed in float64 and rounded once to float32; float64 (and other) arguments go
to libm unchanged (``vexp`` and the others are overloaded on the argument's type).

- exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 (|r| <= ln2 / 2, ln 2 split in
  a part with trailing zero bits and a remainder, so r is exact to double rounding), exp(r)
  by a polynomial of degree 6 (a relative least-squares fit on Chebyshev nodes of that
  interval: relative error 1.9e-9, against the 3e-8 of half a float32 ulp). n comes from
  adding 1.5 * 2^52 + 1023 to x / ln 2: the sum's low bits are then n + 1023, 2^n's
  exponent field, so one shift makes 2^n and one subtraction n (no floor, no conversion to
  an integer). x is clamped to [-160, 160] first (float32 results 0 and inf there; 2^n a
  normal float64 throughout) by selects whose comparison is false for NaN, so that NaN goes
  through as NaN.
- tanh(x) = x P(x^2) for |x| < 0.625 (P a least-squares fit of tanh(x)/x on Chebyshev
  nodes, relative error 1.5e-10), else sign(x) (1 - 2 / (exp(2|x|) + 1)).
- erfc(t) = exp(-t^2) R(u) for 0 <= t <= 10.5, u = 1 / (1 + t/2) (R a fit of erfc(t)
  exp(t^2), which falls like 1 / t, as a polynomial in u over u's interval: degree 11,
  1.9e-9), 0 past 10.5.
- erf(x) = x Q(x^2) for |x| < 1 (a fit of erf(x)/x, 3.4e-11), else sign(x) (1 - erfc(|x|)).
- sigmoid(x) = 1 / (1 + exp(-x)).
- GELU: x/2 (2 - erfc(x/sqrt 2)) for x >= 0, x/2 erfc(|x|/sqrt 2) below (no cancellation in
  the negative tail; one erfc for every x, with no case for small x); the tanh form as
  x / (1 + exp(-2z)), z = sqrt(2/pi) (x + 0.044715 x^3).

Both sides of every case are computed and one is selected (no branch, which would keep the
loop scalar). Each function is LLVM IR that an intrinsic writes into the calling loop
(``_Emit``): numba inlining the same arithmetic written as Python at its IR level cost 0.6-0.9 s
of compiling per kernel (a GELU's element loop: 0.9 s, as IR 0.1 s; the same machine code, bit
for bit). The caller's fastmath flags apply to the instructions as to its own. Errors against
float64 libm, measured over 2^20 arguments spread over the float32 range and the special
values: see tests/ops/math/test_vecmath.py (at most 1 ulp of float32).
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ..core.jit import file_tag

_F64 = ir.DoubleType()
_I64 = ir.IntType(64)

_LN2_HI = 0.693147180369123816490      # ln 2 with its low 32 bits zero: n * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10   # ln 2 - _LN2_HI
_INV_LN2 = 1.4426950408889634

_ROUNDING = 1.5 * 2.0 ** 52 + 1023.0     # (x / ln 2 + this) - this = round(x / ln 2); see exp

# least-squares fits on Chebyshev nodes (float64): exp(r) on |r| <= ln2 / 2 (1.9e-9), tanh(x)
# / x in x^2 on |x| < 0.625 (relative error 1.5e-10), erf(x) / x in x^2 on |x| < 1 (3.4e-11),
# erfc(t) exp(t^2) in 1 / (1 + t/2) on 0 <= t <= 10.5 (1.9e-9); highest degree first, by
# Horner's rule
_EXP_P = (0.001382940882363457, 0.00837477975502221, 0.04166835870612984,
          0.16666420734690665, 0.4999999148795855, 1.0000000361472856, 1.0000000005924918)
_TANH_P = (0.0021256387725519057, -0.008155737534733181, 0.021690329841922828,
           -0.05394439377643056, 0.13333179984671895, -0.33333329603276296, 0.9999999998507212)
_ERF_P = (-9.634993517620109e-06, 0.00011254643776179286, -0.0008482508523587231,
          0.0052209233020439, -0.026865392170817286, 0.1128378184031288, -0.3761263842609395,
          1.128379167057142)
_ERFCX_P = (0.025325406195980883, -0.12630631780466028, 0.20406748549511805,
            -0.00667150848306821, -0.3132675788678716, 0.23821562864304302,
            -0.04232108399566364, 0.2175940186023323, 0.23810096632966535,
            0.2832528394069743, 0.2820072748060258, 2.8714097273785377e-06)


class _Emit:
    """Writes the float64 functions of the module docstring as straight-line IR at a
    builder's position: each method takes and returns float64 values (ir.Value)."""

    def __init__(self, builder):
        self.b = builder

    @staticmethod
    def k(v):
        return ir.Constant(_F64, v)

    def _unary(self, name, v):
        fn = cgutils.get_or_insert_function(self.b.module, ir.FunctionType(_F64, [_F64]), name)
        return self.b.call(fn, [v])

    def where(self, op, a, b, yes, no):
        """yes if (a op b) else no; an ordered comparison (false when either is NaN)."""
        return self.b.select(self.b.fcmp_ordered(op, a, b), yes, no)

    def poly(self, coeffs, v):
        p = self.k(coeffs[0])
        for c in coeffs[1:]:
            p = self.b.fadd(self.b.fmul(p, v), self.k(c))
        return p

    def keep_nan(self, x, v):
        """v, or x itself where x is NaN."""
        return self.where("==", x, x, v, x)

    def exp(self, x):
        b = self.b
        # (x < -160 is false for NaN: the selects keep it, and it stays NaN to the end)
        c = self.where("<", x, self.k(-160.0), self.k(-160.0), x)
        c = self.where(">", c, self.k(160.0), self.k(160.0), c)
        t = b.fadd(b.fmul(c, self.k(_INV_LN2)), self.k(_ROUNDING))
        n = b.fsub(t, self.k(_ROUNDING))
        r = b.fsub(b.fsub(c, b.fmul(n, self.k(_LN2_HI))), b.fmul(n, self.k(_LN2_LO)))
        p = self.poly(_EXP_P, r)
        # t's low 12 bits are n + 1023 (|n| <= 231): shifted up, 2^n
        power = b.bitcast(b.shl(b.bitcast(t, _I64), ir.Constant(_I64, 52)), _F64)
        return b.fmul(p, power)

    def tanh(self, x):
        b = self.b
        t = self._unary("llvm.fabs.f64", x)
        small = b.fmul(x, self.poly(_TANH_P, b.fmul(x, x)))
        big = b.fsub(self.k(1.0), b.fdiv(self.k(2.0), b.fadd(self.exp(b.fmul(self.k(2.0), t)),
                                                              self.k(1.0))))
        big = self.where(">=", x, self.k(0.0), big, b.fneg(big))
        return self.keep_nan(x, self.where("<", t, self.k(0.625), small, big))

    def erfc(self, t):
        """erfc(t) for t >= 0 (0 past 10.5, where float32 products of it vanish)."""
        b = self.b
        u = b.fdiv(self.k(1.0), b.fadd(b.fmul(t, self.k(0.5)), self.k(1.0)))
        v = b.fmul(self.exp(b.fneg(b.fmul(t, t))), self.poly(_ERFCX_P, u))
        return self.where("<=", t, self.k(10.5), v, self.k(0.0))

    def erf(self, x):
        b = self.b
        t = self._unary("llvm.fabs.f64", x)
        small = b.fmul(x, self.poly(_ERF_P, b.fmul(x, x)))
        big = b.fsub(self.k(1.0), self.erfc(t))
        big = self.where(">=", x, self.k(0.0), big, b.fneg(big))
        return self.keep_nan(x, self.where("<", t, self.k(1.0), small, big))

    def sigmoid(self, x):
        # NaN gives x itself (the negation would flip its sign): x * Sigmoid(x) then has the
        # same bits in either order of the product, as the fused Swish has
        b = self.b
        return self.keep_nan(x, b.fdiv(self.k(1.0), b.fadd(self.k(1.0), self.exp(b.fneg(x)))))

    def gelu(self, d):
        # x < 0: x / 2 erfc(|x| / sqrt 2), which does not cancel as 1 + erf does
        b = self.b
        t = b.fmul(self._unary("llvm.fabs.f64", d), self.k(0.7071067811865476))
        erfc = self.erfc(t)
        half = b.fmul(self.k(0.5), d)
        v = self.where(">=", d, self.k(0.0), b.fmul(half, b.fsub(self.k(2.0), erfc)),
                       b.fmul(half, erfc))
        return self.keep_nan(d, v)

    def gelu_tanh(self, d):
        # 1 + tanh(z) = 2 / (1 + exp(-2 z)): no cancellation for z < 0
        b = self.b
        cube = b.fmul(b.fmul(b.fmul(self.k(0.044715), d), d), d)
        z = b.fmul(self.k(0.7978845608028654), b.fadd(d, cube))
        e = self.exp(b.fmul(self.k(-2.0), z))
        v = self.where(">", z, self.k(-80.0), b.fdiv(d, b.fadd(self.k(1.0), e)),
                       b.fmul(d, self.k(0.0)))
        return self.keep_nan(d, v)


def _float32_intrinsic(method):
    """An intrinsic: float32 -> float32, ``_Emit.<method>`` in float64, rounded once."""
    @intrinsic
    def f32(typingctx, x):
        def codegen(context, builder, sig, args):
            d = getattr(_Emit(builder), method)(builder.fpext(args[0], _F64))
            return builder.fptrunc(d, ir.FloatType())
        return (types.float32(types.float32), codegen) if x == types.float32 else None
    return f32


@intrinsic
def _exp_f64(typingctx, x):
    def codegen(context, builder, sig, args):
        return _Emit(builder).exp(args[0])
    return (types.float64(types.float64), codegen) if x == types.float64 else None


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")
def exp64(x):
    """exp(x) for a float64 x holding a float32 value, about 2e-9 relative (module
    docstring); NaN for NaN."""
    return _exp_f64(x)


def vexp(x):
    """exp(x): float32 as in the module docstring, others by libm."""


def vtanh(x):
    """tanh(x): float32 as in the module docstring, others by libm."""


def verf(x):
    """erf(x): float32 as in the module docstring, others by libm."""


def vsigmoid(x):
    """1 / (1 + exp(-x)): float32 as in the module docstring, others by libm's exp (the form
    that does not overflow for either sign)."""


def vgelu(x):
    """x / 2 (1 + erf(x / sqrt 2)), in float64 for float32 x (module docstring)."""


def vgelu_tanh(x):
    """x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), in float64 for float32 x."""


def _sigmoid_other(x):
    if x >= 0:
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(x)
    return e / (1.0 + e)


_OTHER = {
    vexp: lambda x: np.exp(x),
    vtanh: lambda x: np.tanh(x),
    verf: lambda x: math.erf(x),
    vsigmoid: _sigmoid_other,
    vgelu: lambda x: 0.5 * x * (1.0 + math.erf(x * 0.7071067811865476)),
    vgelu_tanh: lambda x: 0.5 * x * (1.0 + np.tanh(0.7978845608028654 *
                                                   (x + 0.044715 * x * x * x))),
}


def _overload_stub(stub, other):
    # inlined at numba's IR level: a call of the intrinsic, whose IR then sits in the caller's
    # loop for LLVM to vectorise
    f32 = _float32_intrinsic(stub.__name__[1:])

    @overload(stub, inline="always")
    def _impl(x):
        return (lambda x: f32(x)) if x == types.float32 else other


for _stub, _other in _OTHER.items():
    _overload_stub(_stub, _other)

# jit.Variants cannot follow an overload to its source: kernels calling a stub are named by
# this file's hash instead, so an edit here renames them in numba's cache
SOURCE_TAG = file_tag(__file__)[:12]
for _stub in _OTHER:
    _stub.hashed_with = (SOURCE_TAG,)
