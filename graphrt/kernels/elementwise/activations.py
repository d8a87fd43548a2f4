"""Activation functions, element-wise. Attributes (alpha, beta, ...) are rounded to the
input's type first, so the arithmetic stays in that type (float32 for float16 inputs).

Exact (compare and select, and single IEEE operations; no libm):
- Relu: max(x, 0) as a compare and select. -0 gives +0; NaN passes through.
- LeakyRelu: x if x > 0 else alpha * x.
- ThresholdedRelu: x if x > alpha else 0.
- HardSigmoid: clamp(alpha * x + beta, 0, 1) (a multiply, then an add: never fused);
  HardSwish: x * HardSigmoid(x) with alpha = 1/6, beta = 1/2.
- Softsign: x / (1 + |x|).
- Shrink: x + bias if x < -lambd, x - bias if x > lambd, else 0. For integer inputs the
  arithmetic is in float64, truncated toward zero (the result wraps to the input type).
Exact with graphrt's own exp, expm1, log1p, tanh, erf (exactmath; libm in fast mode), each
computed in float64 from the input and the attributes (themselves rounded to the input type)
and rounded once: Sigmoid, Softplus (log(1 + exp(x))), Elu (alpha expm1(x) for x <= 0), Selu
(gamma (alpha expm1(x)) for x <= 0, gamma x above), Celu (alpha expm1(x / alpha) for x <= 0),
Mish (x tanh(softplus(x))), Swish (x sigmoid(alpha x)), Gelu (x/2 (1 + erf(x/sqrt2)), or
x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))). Exact mode gives their limits at -inf (Gelu,
Mish, Swish: -0) where the fast formulas make inf * 0 = NaN.
"""
from __future__ import annotations


import numpy as np

from ... import dtypes as _dt
from ..core.floats import FLOATS
from ..core.pointwise import (unary_variants, Unary, relu_float as _relu_float, scalar_op,
                              unary_param_variants)
from ..math import exactmath as _xm
from ..math.exactmath import expm1 as _own_expm1, swish as _own_swish
from ..math.vecmath import vgelu, vgelu_tanh, vsigmoid

_FLOATS = FLOATS


@scalar_op
def _relu_int(x):
    return x if x > 0 else 0


@scalar_op
def _leaky_relu(x, alpha, _):
    return x if x > 0 else alpha * x


@scalar_op
def _thresholded_relu(x, alpha, _):
    return x if x > alpha else 0.0


@scalar_op
def _hard_sigmoid(x, alpha, beta):
    v = alpha * x
    v = v + beta
    if v <= 0:
        return 0.0
    if v >= 1:
        return 1.0
    return v


@scalar_op
def _hard_swish(x, alpha, beta):
    return x * _hard_sigmoid(x, alpha, beta)


@scalar_op
def _softsign(x, one, _):
    return x / (one + abs(x))


@scalar_op
def _shrink_float(x, lambd, bias):
    if x < -lambd:
        return x + bias
    if x > lambd:
        return x - bias
    return 0.0


@scalar_op
def _shrink_int(x, lambd, bias):
    v = _shrink_float(x, lambd, bias)
    if v != v:
        return 0
    return np.int64(max(-9.2e18, min(9.2e18, v)))   # in int64's range, then truncated


_sigmoid = vsigmoid       # (vecmath's overloaded stub: inlined into the templates)


@scalar_op
def _softplus(x):
    if x > 0:
        return x + np.log1p(np.exp(-x))
    return np.log1p(np.exp(x))


@scalar_op
def _elu(x, alpha, _):
    return x if x > 0 else alpha * np.expm1(x)


@scalar_op
def _selu(x, alpha, gamma):
    return gamma * (x if x > 0 else alpha * np.expm1(x))


@scalar_op
def _celu(x, alpha, _):
    return x if x > 0 else alpha * np.expm1(x / alpha)


@scalar_op
def _mish(x):
    return x * np.tanh(_softplus(x))


@scalar_op(inline=True)
def swish_scalar(x, alpha, _):
    """x * sigmoid(alpha x), the sigmoid rounded to x's type first (so x * Sigmoid(x) has
    these bits); inlined where it is called, as the sigmoid is (vecmath): a call of it
    kept its caller's loop scalar, 3x slower."""
    return x * _sigmoid(alpha * x)


_gelu = vgelu       # (vecmath's overloaded stub: inlined into the templates)


_gelu_tanh = vgelu_tanh       # (vecmath's overloaded stub: inlined into the templates)


@scalar_op
def _elu_exact(x, alpha, _):
    return x if x > 0 else alpha * _own_expm1(np.float64(x))


@scalar_op
def _selu_exact(x, alpha, gamma):
    g = np.float64(gamma)
    return g * x if x > 0 else g * (alpha * _own_expm1(np.float64(x)))


@scalar_op
def _celu_exact(x, alpha, _):
    return x if x > 0 else alpha * _own_expm1(np.float64(x) / alpha)


@scalar_op
def swish_exact(x, alpha, _):
    return _own_swish(x, alpha)


def _own_in_exact(libm, own, name: str, param: bool = False) -> _xm.FastExact:
    return _xm.FastExact.of(unary_param_variants if param else unary_variants, libm, own, name)


_RELU_FLOAT = unary_variants(_relu_float, "relu_float")
_RELU_INT = unary_variants(_relu_int, "relu_int")
_SHRINK_FLOAT = unary_param_variants(_shrink_float, "shrink_float")
_SHRINK_INT = unary_param_variants(_shrink_int, "shrink_int")
_GELU = _own_in_exact(_gelu, _xm.gelu, "gelu")
_GELU_TANH = _own_in_exact(_gelu_tanh, _xm.gelu_tanh, "gelu_tanh")


class Relu(Unary):
    supports_exact = True
    ALLOWED = _FLOATS | _dt.SIGNED

    def variants_for(self, dtype):
        return _RELU_FLOAT if dtype in _FLOATS else _RELU_INT


class _Activation(Unary):
    """A float activation; ``DEFAULTS`` are the attributes p, q and their defaults (ONNX
    float attributes: float32 values, then rounded to the compute type)."""

    ALLOWED = _FLOATS
    DEFAULTS: tuple = ()

    def params(self, ctx, dtype):
        if not self.DEFAULTS:
            return ()
        p = [dtype.type(np.float32(self.node.attr(name, default)))
             for name, default in self.DEFAULTS]
        return tuple(p + [dtype.type(0)] * (2 - len(p)))


class LeakyRelu(_Activation):
    supports_exact = True
    VARIANTS = unary_param_variants(_leaky_relu, "leaky_relu")
    DEFAULTS = (("alpha", 0.01),)


class ThresholdedRelu(_Activation):
    supports_exact = True
    VARIANTS = unary_param_variants(_thresholded_relu, "thresholded_relu")
    DEFAULTS = (("alpha", 1.0),)


class HardSigmoid(_Activation):
    supports_exact = True
    VARIANTS = unary_param_variants(_hard_sigmoid, "hard_sigmoid")
    DEFAULTS = (("alpha", 0.2), ("beta", 0.5))


class HardSwish(_Activation):
    supports_exact = True
    VARIANTS = unary_param_variants(_hard_swish, "hard_swish")

    def params(self, ctx, dtype):
        return dtype.type(1.0 / 6.0), dtype.type(0.5)


class Softsign(_Activation):
    supports_exact = True
    VARIANTS = unary_param_variants(_softsign, "softsign")

    def params(self, ctx, dtype):
        return dtype.type(1), dtype.type(0)


class Shrink(_Activation):
    supports_exact = True
    ALLOWED = _dt.NUMERIC | _FLOATS
    DEFAULTS = (("lambd", 0.5), ("bias", 0.0))

    def variants_for(self, dtype):
        return _SHRINK_FLOAT if dtype in _FLOATS else _SHRINK_INT

    def params(self, ctx, dtype):
        return super().params(ctx, dtype if dtype.kind == "f" else np.dtype(np.float64))


class _OwnInExact(_Activation):
    supports_exact = True


class Sigmoid(_OwnInExact):
    VARIANTS = _own_in_exact(_sigmoid, _xm.sigmoid, "sigmoid")


class Softplus(_OwnInExact):
    VARIANTS = _own_in_exact(_softplus, _xm.softplus, "softplus")


class Mish(_OwnInExact):
    VARIANTS = _own_in_exact(_mish, _xm.mish, "mish")


class Elu(_OwnInExact):
    VARIANTS = _own_in_exact(_elu, _elu_exact, "elu", param=True)
    DEFAULTS = (("alpha", 1.0),)


class Selu(_OwnInExact):
    VARIANTS = _own_in_exact(_selu, _selu_exact, "selu", param=True)
    DEFAULTS = (("alpha", 1.67326319217681884765625), ("gamma", 1.05070102214813232421875))


class Celu(_OwnInExact):
    VARIANTS = _own_in_exact(_celu, _celu_exact, "celu", param=True)
    DEFAULTS = (("alpha", 1.0),)


class Swish(_OwnInExact):
    VARIANTS = _own_in_exact(swish_scalar, swish_exact, "swish", param=True)
    DEFAULTS = (("alpha", 1.0),)


class Gelu(_OwnInExact):
    """approximate = "none" (erf) or "tanh"."""

    def __init__(self, node):
        super().__init__(node)
        how = node.attr("approximate", "none")
        how = how.decode() if isinstance(how, bytes) else how
        if how not in ("none", "tanh"):
            node.fail(f"approximate must be 'none' or 'tanh', got {how!r}")
        self.VARIANTS = _GELU if how == "none" else _GELU_TANH
