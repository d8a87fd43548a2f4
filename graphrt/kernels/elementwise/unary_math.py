"""Element-wise unary mathematics: y = f(x), same shape and type as x (bool for IsNaN, IsInf).

Exact (IEEE operations or compare-and-select): Abs and Neg (the sign bit for floats; integers
wrap, so |int_min| = int_min), Sqrt (NaN for x < 0), Reciprocal (1/x as a float64 division
rounded to the input type, which is the correctly rounded division), Floor, Ceil, Round (to
nearest, halves to even), Sign (-1 or +1; ±0 and NaN give x itself), IsNaN, IsInf, Clip.
Exp, Log, Tanh, Erf: in fast mode, float32 Exp, Tanh and Erf by graphrt's vectorisable forms
(vecmath, within 1 ulp), the rest by libm; in exact mode graphrt's own functions (exactmath:
float32 computed in float64 and rounded once, float16 from that float32 result).
Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh: libm in fast mode,
exactmath's functions in exact mode (the same rounding; float64 within 0.51 ulp).
"""
from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from ..core.floats import FLOAT8, FLOATS
from ..core.pointwise import unary_variants, Unary, scalar_op, unary_param_variants
from ..math import exactmath as _xm
from ..math.vecmath import verf, vexp, vtanh
from .variadic import maximum, minimum

_FLOATS = FLOATS


@scalar_op
def _abs(x):
    return abs(x)


@scalar_op
def _neg(x):
    return -x


@scalar_op
def _reciprocal(x):
    return 1.0 / x


@scalar_op
def _sign_float(x):
    if x > 0:
        return 1.0
    if x < 0:
        return -1.0
    return x


@scalar_op
def _sign_int(x):
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0


@scalar_op
def _isnan(x):
    return x != x


@scalar_op
def _isinf(x, positive, negative):
    return (positive and x == np.inf) or (negative and x == -np.inf)


@scalar_op
def _sqrt(x):
    return np.sqrt(x)


@scalar_op
def _sqrt_exact(x):
    """The NaN of x < 0 as a constant: with plain np.sqrt, LLVM's vectorised code drops the
    template's NaN rewrite (sqrt gives a NaN there anyway) and x86 writes -NaN."""
    return np.sqrt(x) if x >= 0 else np.nan


@scalar_op
def _floor(x):
    return np.floor(x)


@scalar_op
def _ceil(x):
    return np.ceil(x)


@scalar_op
def _round(x):
    return np.rint(x)


_exp = vexp       # (vecmath's overloaded stub: inlined into the templates)


@scalar_op
def _log(x):
    return np.log(x)


@scalar_op
def _sin(x):
    return np.sin(x)


@scalar_op
def _cos(x):
    return np.cos(x)


@scalar_op
def _tan(x):
    return np.tan(x)


@scalar_op
def _asin(x):
    return np.arcsin(x)


@scalar_op
def _acos(x):
    return np.arccos(x)


@scalar_op
def _atan(x):
    return np.arctan(x)


@scalar_op
def _sinh(x):
    return np.sinh(x)


@scalar_op
def _cosh(x):
    return np.cosh(x)


@scalar_op
def _asinh(x):
    return np.arcsinh(x)


@scalar_op
def _acosh(x):
    return np.arccosh(x)


@scalar_op
def _atanh(x):
    return np.arctanh(x)


_tanh = vtanh       # (vecmath's overloaded stub: inlined into the templates)


_erf = verf       # (vecmath's overloaded stub: inlined into the templates)


@scalar_op
def _clip(x, lo, hi):
    return minimum(maximum(x, lo), hi)


_SIGN_FLOAT = unary_variants(_sign_float, "sign_float")
_SIGN_INT = unary_variants(_sign_int, "sign_int")


class _Exact(Unary):
    supports_exact = True


class Abs(_Exact):
    ALLOWED = _dt.NUMERIC | _FLOATS
    VARIANTS = unary_variants(_abs, "abs")
    UFUNC = np.abs


class Neg(_Exact):
    ALLOWED = _FLOATS | _dt.SIGNED
    VARIANTS = unary_variants(_neg, "neg")
    UFUNC = np.negative


class Sign(_Exact):
    ALLOWED = _dt.NUMERIC | _FLOATS

    def variants_for(self, dtype):
        return _SIGN_FLOAT if dtype in _FLOATS else _SIGN_INT


class Reciprocal(_Exact):
    ALLOWED = _FLOATS
    VARIANTS = unary_variants(_reciprocal, "reciprocal")


class Sqrt(_Exact):
    ALLOWED = _FLOATS
    VARIANTS = _xm.FastExact.of(unary_variants, _sqrt, _sqrt_exact, "sqrt")


class Floor(_Exact):
    ALLOWED = _FLOATS
    VARIANTS = unary_variants(_floor, "floor")


class Ceil(_Exact):
    ALLOWED = _FLOATS
    VARIANTS = unary_variants(_ceil, "ceil")


class Round(_Exact):
    ALLOWED = _FLOATS
    VARIANTS = unary_variants(_round, "round")


class IsNaN(_Exact):
    ALLOWED = _FLOATS | FLOAT8
    VARIANTS = unary_variants(_isnan, "isnan")

    def out_dtype(self, dtype):
        return np.dtype(np.bool_)


class IsInf(IsNaN):
    """detect_positive / detect_negative (default 1) choose which infinities are true."""

    VARIANTS = unary_param_variants(_isinf, "isinf")

    def params(self, ctx, dtype):
        return (bool(self.node.attr("detect_positive", 1)),
                bool(self.node.attr("detect_negative", 1)))


class Clip(_Exact):
    """y = Min(Max(x, lo), hi) with Max's and Min's NaN and signed-zero rules, so lo > hi
    gives hi everywhere. The bounds are the attributes min and max (default ±FLT_MAX) before
    opset 11; since then the optional scalar inputs 1 and 2, read in each run, where a missing
    bound is no bound."""

    ALLOWED = _dt.NUMERIC | _FLOATS
    VARIANTS = unary_param_variants(_clip, "clip")

    def __init__(self, node):
        super().__init__(node)
        self.from_inputs = node.opset >= 11
        if not self.from_inputs:
            self.ALLOWED = _FLOATS

    def params(self, ctx, dtype):
        if dtype.kind == "f":
            lo, hi = -np.inf, np.inf
        else:
            lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
        if not self.from_inputs:
            big = float(np.finfo(np.float32).max)
            return dtype.type(self.node.attr("min", -big)), dtype.type(self.node.attr("max", big))
        for i, what in ((1, "min"), (2, "max")):
            if ctx.has_input(i):
                if ctx.dtype(i) != ctx.dtype(0):
                    ctx.fail(f"{what} must have the input's type {_dt.name_of(ctx.dtype(0))}, "
                             f"got {_dt.name_of(ctx.dtype(i))}")
                if math.prod(ctx.shape(i)) != 1:
                    ctx.fail(f"{what} must be a scalar, got shape {list(ctx.shape(i))}")
        return dtype.type(lo), dtype.type(hi)

    def run_params(self, ctx, params):
        ins = ctx.flat_in
        return tuple(p if i >= len(ins) or ins[i] is None else type(p)(ins[i][0])
                     for i, p in zip((1, 2), params))


class _Libm(Unary):
    ALLOWED = _FLOATS


class _OwnInExact(_Libm):
    """libm in the fast variants, graphrt's own function in the exact ones."""

    supports_exact = True


def _own_in_exact(libm, own, name: str) -> _xm.FastExact:
    return _xm.FastExact.of(unary_variants, libm, own, name)


class Exp(_OwnInExact):
    VARIANTS = _own_in_exact(_exp, _xm.exp, "exp")


class Log(_OwnInExact):
    VARIANTS = _own_in_exact(_log, _xm.log, "log")


class Sin(_OwnInExact):
    VARIANTS = _own_in_exact(_sin, _xm.sin, "sin")


class Cos(_OwnInExact):
    VARIANTS = _own_in_exact(_cos, _xm.cos, "cos")


class Tan(_OwnInExact):
    VARIANTS = _own_in_exact(_tan, _xm.tan, "tan")


class Asin(_OwnInExact):
    VARIANTS = _own_in_exact(_asin, _xm.asin, "asin")


class Acos(_OwnInExact):
    VARIANTS = _own_in_exact(_acos, _xm.acos, "acos")


class Atan(_OwnInExact):
    VARIANTS = _own_in_exact(_atan, _xm.atan, "atan")


class Sinh(_OwnInExact):
    VARIANTS = _own_in_exact(_sinh, _xm.sinh, "sinh")


class Cosh(_OwnInExact):
    VARIANTS = _own_in_exact(_cosh, _xm.cosh, "cosh")


class Asinh(_OwnInExact):
    VARIANTS = _own_in_exact(_asinh, _xm.asinh, "asinh")


class Acosh(_OwnInExact):
    VARIANTS = _own_in_exact(_acosh, _xm.acosh, "acosh")


class Atanh(_OwnInExact):
    VARIANTS = _own_in_exact(_atanh, _xm.atanh, "atanh")


class Tanh(_OwnInExact):
    VARIANTS = _own_in_exact(_tanh, _xm.tanh, "tanh")


class Erf(_OwnInExact):
    VARIANTS = _own_in_exact(_erf, _xm.erf, "erf")
