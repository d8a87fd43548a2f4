"""Add, Sub, Mul, Div: one correctly rounded operation per element (exact by construction).

Integer arithmetic wraps around; integer Div truncates toward zero (x / 0 gives 0 rather than
a trap, ONNX leaves it undefined). float16 is computed in float32 and rounded once, which is
the correctly rounded float16 result (pointwise.Binary).

Also Pow, Mod, PRelu and BitShift (see their classes).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ... import dtypes as _dt
from ..core.floats import FLOATS
from ..core.pointwise import binary_variants, prepare_binary, Binary
from ..gemm import microkernel
from ..math.exactmath import FastExact, pow as _own_pow


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def add_scalar(x, y):
    return x + y


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _sub(x, y):
    return x - y


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def mul_scalar(x, y):
    return x * y


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _fdiv(x, y):
    return x / y


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _idiv(x, y):
    if y == 0:
        return x - x
    if y == -1:             # x // -1 would trap for the most negative x
        return -x
    q = x // y
    if q < 0 and q * y != x:
        q += 1
    return q


ADD_VARIANTS = binary_variants(add_scalar, "add")
_SUB = binary_variants(_sub, "sub")
_MUL = binary_variants(mul_scalar, "mul")
FDIV_VARIANTS = binary_variants(_fdiv, "fdiv")
_IDIV = binary_variants(_idiv, "idiv")


class Add(Binary):
    supports_exact = True
    UFUNC = np.add

    def variants_for(self, dtype):
        return ADD_VARIANTS


class Sub(Binary):
    supports_exact = True
    UFUNC = np.subtract

    def variants_for(self, dtype):
        return _SUB


class Mul(Binary):
    supports_exact = True
    UFUNC = np.multiply

    def variants_for(self, dtype):
        return _MUL


class Div(Binary):
    supports_exact = True

    def variants_for(self, dtype):
        return FDIV_VARIANTS if dtype in FLOATS else _IDIV


# ----------------------------------------------------------------- Pow, Mod, PRelu, BitShift
# (pointwise.Binary adds the narrow-float path: float16 and bfloat16 computed in float32.)

@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _pow_f32(x, y):
    return np.power(x, np.float32(y))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _square(x, y):
    return x * x


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _cube(x, y):
    return x * x * x


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _square_exact(x, y):
    """x * x: one IEEE product, the correctly rounded square (as graphrt's float32 pow)."""
    v = x * x
    return np.nan if v != v else v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _as_wide(f):
    """A float32 as float64, its infinities standing for +-2^128 (where rounding put them)."""
    d = np.float64(f)
    return d if abs(d) != np.inf else math.copysign(2.0 ** 128, d)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _cube_f32_exact(x, y):
    """x^3 correctly rounded to float32: hi + lo = x^3 exactly (x^2 is exact in float64, lo
    the FMA remainder of hi = x^2 * x); hi is rounded to float32 (f), and when hi lies exactly
    halfway between f and its neighbour g = f + 2 (hi - f) (then g is a float32) and lo says
    x^3 lies past hi, the result is g."""
    d = np.float64(x)
    d2 = d * d
    hi = d2 * d
    lo = microkernel.fma(d2, d, -hi)
    f = np.float32(hi)
    r = hi - _as_wide(f)
    g = hi + r
    if lo != 0 and r != 0 and np.float64(np.float32(g)) == g and (lo > 0) == (r > 0):
        f = np.float32(g)
    return np.nan if x != x else f


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _pow_f64(x, y):
    return np.power(x, np.float64(y))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _pow_int(x, y):
    """x ** y by squaring, wrapping around; for y < 0 the truncated 1 / x ** -y."""
    if y < 0:
        if x == 1 or x == -1:
            return 1 if x == 1 or y % 2 == 0 else -1
        return 0
    r = np.int64(1)
    b = np.int64(x)
    e = y
    while e > 0:
        if e & 1:
            r *= b
        b *= b
        e >>= 1
    return r


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _pow_f32_exact(x, y):
    return _own_pow(x, np.float32(y))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _pow_f64_exact(x, y):
    return _own_pow(x, np.float64(y))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _truncated(v):
    """v truncated toward zero (NaN gives 0; clamped to int64's range first)."""
    if v != v:
        return 0
    return np.int64(max(-9.2e18, min(9.2e18, v)))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _pow_int_float(x, y):
    """float64 power truncated toward zero."""
    return _truncated(np.power(np.float64(x), np.float64(y)))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _pow_int_float_exact(x, y):
    return _truncated(_own_pow(np.float64(x), np.float64(y)))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _mod_float(x, y):
    """x - floor(x / y) * y: fmod, then moved to the divisor's sign; a zero takes y's sign."""
    r = np.fmod(x, y)
    if r == 0:
        return np.copysign(r, y)
    if (r < 0) != (y < 0):
        return r + y
    return r


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _fmod_float(x, y):
    return np.fmod(x, y)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _mod_int(x, y):
    if y == 0:
        return x - x
    return x % y            # numba follows Python: the sign of the divisor


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _fmod_int(x, y):
    if y == 0:
        return x - x
    r = x % y
    if r != 0 and (r < 0) != (x < 0):
        r -= y
    return r


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _prelu(x, slope):
    return x if x > 0 else x * slope


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _shift_left(x, y):
    if y < 0 or y >= np.iinfo(x).bits:
        return x - x
    return x << y


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _shift_right(x, y):
    bits = np.iinfo(x).bits
    if y < 0 or y >= bits:
        return x >> (bits - 1) if x < 0 else x - x
    return x >> y


_POW_F32 = FastExact.of(binary_variants, _pow_f32, _pow_f32_exact, "pow_f32")
_POW_F64 = FastExact.of(binary_variants, _pow_f64, _pow_f64_exact, "pow_f64")
# fast mode, a constant exponent 2 or 3: products (rounded once per product, not once)
_POW_SMALL = {2.0: binary_variants(_square, "pow_square"), 3.0: binary_variants(_cube, "pow_cube")}
# exact mode: the correctly rounded square and (float32) cube, graphrt's pow's bits
_POW_SQUARE_EXACT = binary_variants(_square_exact, "pow_square_exact")
_POW_CUBE_EXACT = binary_variants(_cube_f32_exact, "pow_cube_f32_exact")
_POW_INT = binary_variants(_pow_int, "pow_int")
_POW_INT_FLOAT = FastExact.of(binary_variants, _pow_int_float, _pow_int_float_exact,
                              "pow_int_float")
_MOD = {(True, False): binary_variants(_mod_float, "mod_float"),
        (True, True): binary_variants(_fmod_float, "fmod_float"),
        (False, False): binary_variants(_mod_int, "mod_int"),
        (False, True): binary_variants(_fmod_int, "fmod_int")}
_PRELU = binary_variants(_prelu, "prelu")
_SHIFT = {"LEFT": binary_variants(_shift_left, "shift_left"),
          "RIGHT": binary_variants(_shift_right, "shift_right")}

_POW_BASE = FLOATS | {np.dtype(np.int32), np.dtype(np.int64)}


class Pow(Binary):
    """x ** y; the result has x's type, the exponent may be any numeric type.

    Float x: computed in x's type (float32 for float16) by libm pow, the exponent converted
    to that type. Integer x: an integer exponent gives exact wrap-around powers (negative
    exponents: 1 / x ** -y truncated, 0 for |x| > 1 and for x = 0); a float exponent is
    computed in float64 and truncated toward zero. Exact mode: graphrt's own pow (exactmath:
    exp(y log|x|) in double-double, C99's special cases; float32 computed in float64 and
    rounded once) in place of libm's. A constant exponent 2 or 3: fast mode x * x or
    x * x * x; exact mode, below float64, the correctly rounded square (one product) and cube
    (see _cube_f32_exact): the bits graphrt's pow gives there, much faster."""

    supports_exact = True

    def infer(self, ctx):
        dt = ctx.check_dtype(0, _POW_BASE)
        et = ctx.check_dtype(1, _dt.NUMERIC | FLOATS, " (the exponent)")
        y = ctx.value(1)
        y = float(y.reshape(-1)[0]) if y is not None and y.size == 1 and dt in FLOATS else None
        if y in _POW_SMALL and not ctx.exact:
            variants = _POW_SMALL[y]
        elif y in (2.0, 3.0) and dt != np.float64:
            variants = _POW_SQUARE_EXACT if y == 2.0 else _POW_CUBE_EXACT
        elif dt in FLOATS:
            variants = _POW_F64 if dt == np.float64 else _POW_F32
        else:
            variants = _POW_INT if et in _dt.INTEGERS else _POW_INT_FLOAT
        prepare_binary(ctx, dt, variants, self.operand_shapes(ctx))


class Mod(Binary):
    """Remainder of x / y. fmod = 0 (default): x - floor(x / y) * y, the sign of y; fmod = 1:
    x - trunc(x / y) * y, the sign of x. Floats follow the ONNX special cases (NaN for
    y = ±0 or an infinite x); integer x mod 0 gives 0. Exact: fmod is exact in IEEE, the
    one adjusting addition is correctly rounded."""

    supports_exact = True
    ALLOWED = _dt.NUMERIC | FLOATS

    def __init__(self, node):
        super().__init__(node)
        fmod = int(node.attr("fmod", 0))
        if fmod not in (0, 1):
            node.fail(f"fmod must be 0 or 1, got {fmod}")
        self.fmod = bool(fmod)

    def variants_for(self, dtype):
        return _MOD[dtype in FLOATS, self.fmod]


class PRelu(Binary):
    """x if x > 0 else slope * x; slope broadcasts to x's shape (unidirectionally)."""

    supports_exact = True
    ALLOWED = FLOATS | {np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64)}
    VARIANTS = _PRELU
    CHANNEL_SLOPE = True

    def infer(self, ctx):
        super().infer(ctx)
        if ctx.out_shapes[0] != tuple(ctx.shape(0)):
            ctx.fail(f"slope of shape {list(ctx.shape(1))} does not broadcast to the input's "
                     f"shape {list(ctx.shape(0))}")


class BitShift(Binary):
    """x << y or x >> y (direction LEFT or RIGHT); right shifts of signed types are
    arithmetic. Shift counts < 0 or >= the bit width give 0 (-1 for right shifts of
    negative x); left shifts wrap around."""

    supports_exact = True
    ALLOWED = _dt.INTEGERS

    def __init__(self, node):
        super().__init__(node)
        direction = node.attr("direction")
        direction = direction.decode() if isinstance(direction, bytes) else direction
        if direction not in _SHIFT:
            node.fail(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
        self.VARIANTS = _SHIFT[direction]
