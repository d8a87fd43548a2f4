"""Cast: numeric and bool element types to each other, one correctly defined conversion each.

- to bool: x != 0 (NaN gives True);
- float to integer: truncation toward zero, saturated at the target's range, NaN to 0
  (ONNX leaves those cases undefined; a defined answer keeps exact mode the same everywhere);
- integer to integer: wrap-around (the low bits); to float: round to nearest even;
- float to float: round to nearest even; in exact mode a NaN result is the canonical NaN.
float16 (which numba cannot compute with) is converted by numpy, with the same rules; in fast
mode float16 <-> float32 by LLVM's conversions where the CPU has F16C (numpy's bits).

The types numpy lacks (ml_dtypes dtypes, see dtypes.EXOTIC), which numba cannot compute in:

- from them: widened exactly by ml_dtypes (the float ones to float32, int4/int2 to int8,
  uint4/uint2 to uint8), then converted by the rules above;
- to bfloat16, float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) and float4e2m1: round to nearest
  even. ml_dtypes rounds float32 correctly but takes wider sources through float32 (rounding
  twice), so every source is first rounded to float32 *to odd* (the float32 next to x on
  x's side whose last bit is 1 when x is not a float32): a format of at most 22 bits then
  rounds that exactly as it would round x. float8 with ``saturate`` (opset 19+, default 1):
  x is clipped to [-max, max] first, so +-inf and out-of-range values give +-max;
  saturate=0: out of range gives NaN (E4M3FN and the FNUZ types) or +-inf (E5M2). NaN stays
  NaN; -0 gives 0 in the FNUZ types (they have no -0). float4e2m1 has no NaN or infinity:
  beyond +-6 gives +-6, NaN gives 0 (as onnx's reference; onnx's float4 note says 6);
- to float8e8m0 (2**k, k in -127..127, or NaN): |x| rounded to a power of two by
  ``round_mode`` (opset 24+): up (the least at or above |x|, the default), down (the
  greatest at or below), nearest (up when |x| / 2**floor(log2|x|) >= 1.5); the sign is
  ignored (negative x is undefined in the spec). Beyond the range, 0 and +-inf give the
  nearest end (0 and below: 2**-127, inf: 2**127) with saturate and NaN without; NaN gives
  NaN. (onnx's reference differs where the spec's table says otherwise: it gives NaN for
  inf, 2**-127 for 0 without saturate, and treats float32 subnormals as having exponent 0);
- to int4/uint4/int2/uint2: integers keep their low bits; floats are rounded to the nearest
  integer, ties to even (onnx's int4/int2 notes), and keep the low bits of that; NaN and
  +-inf give 0.

These are deterministic conversions (integer logic, IEEE conversions and comparisons, and
ml_dtypes' software rounding), so they serve exact mode as they are; NaN results are the
canonical NaN there too. Their kernels are always the exact variants: they do no arithmetic
that fast flags would speed up.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, folding, scratch
from ..core.floats import F16C, FLOAT8, convert_call, optional_dtype
from ..core.jit import Variants
from ..core.words import copy_call
from ..core.pointwise import unary_variants
from ..tensor.gather import blocks

EXACT = False
GAP = None      # bound per variant: the sign-exact x - float32(x) for the source type
ROUND = None    # bound per variant: x as an int64 with the low bits of its rounding


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _same(v):
    """v itself: the store into the output converts it (NaN stays NaN, so elementwise's
    canonical-NaN check on v is the check on the converted value)."""
    return v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _nonzero(v):
    return v != 0


def _float_to_int(x, out, lo, hi, lo_v, hi_v, block, tasks):
    """lo = the target's minimum (exact as a float: 0 or -2**(b-1)); hi = 2**b or 2**(b-1),
    the first value above the target's range."""
    n = out.size
    for t in prange(tasks):
        j0 = t * block
        w = min(n, j0 + block) - j0
        src = x[j0:j0 + w]
        dst = out[j0:j0 + w]
        for j in range(w):
            v = src[j]
            if v != v:
                dst[j] = 0
            elif v < lo:
                dst[j] = lo_v
            elif v >= hi:
                dst[j] = hi_v
            else:
                dst[j] = v


_CONVERT = unary_variants(_same, "cast")
_TO_BOOL = unary_variants(_nonzero, "cast_bool")
_FLOAT_TO_INT = Variants(_float_to_int, "cast_float_int", parallel=True)

_NUMBA_FLOATS = frozenset(np.dtype(t) for t in (np.float32, np.float64))


# ---- the types numpy lacks ----------------------------------------------------------------

@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _gap_float(v, r):
    """v - r with the sign of the exact difference (v a float or an integer of at most 32
    bits, both exact in float64; an IEEE difference of unequal values is never 0)."""
    return np.float64(v) - np.float64(r)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _gap_int64(v, r):
    """v - r exactly, v an int64 and r its float32 rounding: v = hi + lo with lo its low 32
    bits; hi, lo and r - hi (an integer below 2**41 in size) are exact in float64."""
    w = np.int64(v)
    lo = w & np.int64(0xFFFFFFFF)
    return np.float64(lo) - (np.float64(r) - np.float64(w - lo))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _gap_uint64(v, r):
    """As _gap_int64 for a uint64 v."""
    w = np.uint64(v)
    lo = w & np.uint64(0xFFFFFFFF)
    return np.float64(lo) - (np.float64(r) - np.float64(w - lo))


def _to_float32_odd(x, f, bits, hi, nan_zero, canon, block, tasks):
    """f = x rounded to float32 to odd (bits: f's words; x beyond float32's range gives +-inf),
    clipped to [-hi, hi]. NaN: 0 when nan_zero, else the canonical NaN when canon, else as
    float32 rounds it. f may be x."""
    n = f.size
    for t in prange(tasks):
        for j in range(t * block, min(n, (t + 1) * block)):
            v = x[j]
            r = np.float32(v)
            if r != r:
                if nan_zero:
                    f[j] = 0.0
                elif canon:
                    f[j] = np.nan
                else:
                    f[j] = r
                continue
            d = GAP(v, r)
            f[j] = r
            if d != 0.0 and abs(r) < np.inf and (bits[j] & 1) == 0:
                # inexact with an even last bit: the neighbour on x's side is odd (past
                # float32's range x stays inf: beyond every target's range as well)
                if r == 0.0 or (d > 0.0) == (r > 0.0):
                    bits[j] += 1
                else:
                    bits[j] -= 1
            if f[j] > hi:
                f[j] = hi
            elif f[j] < -hi:
                f[j] = -hi


def _to_e8m0(bits, out, mode, saturate, block, tasks):
    """out = the float8e8m0 code (k + 127 for 2**k, 255 for NaN) of |f|, f given by its
    float32 words; mode 0 down, 1 up, 2 nearest (see the module docstring)."""
    n = out.size
    for t in prange(tasks):
        for j in range(t * block, min(n, (t + 1) * block)):
            b = np.int64(bits[j]) & 0x7FFFFFFF
            e = b >> 23                        # float32 exponent field = the code of 2**floor
            m = b & 0x7FFFFF                   # fraction bits below the leading 1
            if e == 255:
                code = 254 if m == 0 and saturate else 255
            elif b == 0:
                code = 0 if saturate else 255
            else:
                if e == 0:                     # subnormal m * 2**-149: leading bit k
                    k = 22
                    while (m >> k) == 0:
                        k -= 1
                    e = k - 22
                    m = (m - (np.int64(1) << k)) << (23 - k)
                code = e
                if (mode == 1 and m != 0) or (mode == 2 and m >= 0x400000):
                    code += 1
                if code > 254:
                    code = 254 if saturate else 255
                elif code < 0:
                    code = 0 if saturate else 255
            out[j] = code


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _round_float(v):
    """v rounded to an integer, ties to even, as an int64 with that integer's low bits: 0
    for NaN and +-inf, and for |v| >= 2**63 (a multiple of 2**11 there)."""
    r = np.rint(np.float64(v))
    if not abs(r) < 9.223372036854775808e18:
        return np.int64(0)
    return np.int64(r)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _round_int(v):
    """v's low 64 bits as an int64."""
    return np.int64(v)


def _to_low_bits(x, out, mask, block, tasks):
    """out = the low bits (mask) of x rounded to an integer (ROUND)."""
    n = out.size
    for t in prange(tasks):
        for j in range(t * block, min(n, (t + 1) * block)):
            out[j] = ROUND(x[j]) & mask


_ODD = {g: Variants(_to_float32_odd, f"cast_odd_{name}", parallel=True, GAP=g)
        for name, g in (("float", _gap_float), ("int64", _gap_int64), ("uint64", _gap_uint64))}
_E8M0 = Variants(_to_e8m0, "cast_e8m0", parallel=True)
_LOW_BITS = {r: Variants(_to_low_bits, f"cast_low_{name}", parallel=True, ROUND=r)
             for name, r in (("float", _round_float), ("int", _round_int))}


def _present(pairs):
    return {dt: v for dt, v in pairs if dt is not None}


_F16, _F32 = np.dtype(np.float16), np.dtype(np.float32)
_I8, _U8 = np.dtype(np.int8), np.dtype(np.uint8)
# exotic type -> the standard type holding each of its values exactly
_WIDE = _present([(dt, _F32) for dt in map(optional_dtype, (16, 17, 18, 19, 20, 23, 24))]
                 + [(optional_dtype(21), _U8), (optional_dtype(22), _I8), (optional_dtype(25), _U8), (optional_dtype(26), _I8)])
_LOW_MASK = _present([(optional_dtype(21), 0xF), (optional_dtype(22), 0xF), (optional_dtype(25), 0x3), (optional_dtype(26), 0x3)])
_FLOAT4 = optional_dtype(23)
_E8M0_DT = optional_dtype(24)
_ROUND_MODES = {"down": 0, "up": 1, "nearest": 2}
_SUPPORTED = _dt.ALL_TENSOR | _dt.EXOTIC


def _float8_max(dt) -> float:
    import ml_dtypes
    return float(ml_dtypes.finfo(dt).max)


def _gap_of(src):
    if src == np.int64:
        return _gap_int64
    if src == np.uint64:
        return _gap_uint64
    return _gap_float


def target_type(node, verb: str, allowed=None) -> np.dtype:
    """The element type named by the required attribute ``to`` (an ONNX type code): a model
    error when it is missing or UNDEFINED, unsupported when graphrt has no dtype for it or
    it is not in ``allowed``."""
    code = node.attr("to")
    if code is None:
        node.fail("attribute 'to' is required")
    code = int(code)
    if code == 0:
        node.fail("attribute 'to' is UNDEFINED")
    try:
        target = _dt.to_numpy(code)
    except (KeyError, ValueError):
        target = None
    if target is None or (allowed is not None and target not in allowed):
        node.fail(f"cannot {verb} to element type {_dt.name_of_code(code)}", ErrorKind.UNSUPPORTED)
    return target


def _numpy_exact(src: np.dtype, dst: np.dtype) -> bool:
    """Whether numpy's conversion has the kernel's bits: integers and bools to integers and
    bools (wrapping, nonzero is true) or to float32/float64 (rounded to nearest even; from
    unsigned types up to 32 bits, whose conversion is a signed one)."""
    return (src.kind in "bi" or (src.kind == "u" and src.itemsize <= 4)) and \
        (dst.kind in "biu" or dst in (_F32, np.dtype(np.float64)))


class Cast(OpKernel):
    """y = x converted to the element type ``to`` (an ONNX type code)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.to = target_type(node, "cast", _SUPPORTED)
        self.saturate = node.opset < 19 or int(node.attr("saturate", 1)) != 0
        mode = node.attr("round_mode", "up") if node.opset >= 24 else "up"
        if mode not in _ROUND_MODES:
            node.fail(f"attribute 'round_mode' must be up, down or nearest, got {mode!r}")
        self.round_mode = _ROUND_MODES[mode]

    def infer(self, ctx: InferContext) -> None:
        src = ctx.check_dtype(0, _SUPPORTED)
        dst = self.to
        shape = ctx.shape(0)
        ctx.set_output(0, dst, shape)
        parallel, block, tasks = blocks(int(np.prod(shape, dtype=np.int64)))
        wide = None
        if src != dst:
            wide = _WIDE.get(src)
            if wide is None and dst in _dt.EXOTIC and src in (np.float16, np.bool_):
                wide = _F32 if src == np.float16 else _U8     # numba reads neither as needed
        if wide is not None:
            src = wide
        if dst in _dt.EXOTIC:
            plan = self._to_exotic(src, dst, ctx.exact, parallel, block, tasks)
        elif src == dst and wide is not None and ctx.exact and dst.kind == "f":
            plan = ("kernel", _CONVERT.get(True, parallel), (), block, tasks)   # canonical NaN
        else:
            plan = _standard_plan(src, dst, ctx.exact, parallel, block, tasks)
        ctx.prepared = (wide, plan)

    def _to_exotic(self, src, dst, exact, parallel, block, tasks):
        if src == dst:
            return ("copy",)
        if dst in _LOW_MASK:
            rnd = _round_float if src.kind == "f" else _round_int
            return ("low", _LOW_BITS[rnd].get(True, parallel), _LOW_MASK[dst], block, tasks)
        hi = _float8_max(dst) if dst in FLOAT8 and self.saturate else np.inf
        odd = (_ODD[_gap_of(src)].get(True, parallel), hi, dst == _FLOAT4, exact, block, tasks)
        if dst == _E8M0_DT:
            return ("e8m0", odd, _E8M0.get(True, parallel), self.round_mode, self.saturate)
        return ("odd", odd)

    def jit_calls(self, ctx: RunContext):
        """The conversion kernel's one call where the input needs no widening first."""
        wide, plan = ctx.prepared
        x, out = ctx.flat_in[0], ctx.flat_out[0]
        if wide is None and plan[0] == "copy" and x.dtype.kind in "biufc":
            return [copy_call(x, out)]
        if wide is not None or plan[0] not in ("kernel", "half"):
            return None
        return [_kernel_call(plan, x, out)]

    def run(self, ctx: RunContext) -> None:
        wide, plan = ctx.prepared
        x, out = ctx.flat_in[0], ctx.flat_out[0]
        if folding() and _numpy_exact(x.dtype, out.dtype):
            np.copyto(out, x, casting="unsafe")
            return
        if wide is not None:
            w = scratch(ctx, wide, x.size)
            np.copyto(w, x, casting="unsafe")
            x = w
        how = plan[0]
        if how == "copy" and x.dtype.kind in "biufc":
            fn, args = copy_call(x, out)
            fn(*args)
        elif how == "copy":
            out[...] = x
        elif how == "numpy":
            _numpy_cast(x, out, plan[1], ctx.exact)
        elif how in ("kernel", "half"):
            fn, args = _kernel_call(plan, x, out)
            fn(*args)
        elif how == "low":
            _, fn, mask, block, tasks = plan
            fn(x, out.view(np.uint8), mask, block, tasks)
        else:
            fn, hi, nan_zero, canon, block, tasks = plan[1]
            f = x if x.dtype == _F32 and wide is not None else scratch(ctx, _F32, x.size)
            bits = f.view(np.uint32)
            fn(x, f, bits, hi, nan_zero, canon, block, tasks)
            if how == "odd":
                np.copyto(out, f, casting="unsafe")     # ml_dtypes: float32 rounded to nearest even
            else:
                _, _, e8, mode, saturate = plan
                e8(bits, out.view(np.uint8), mode, saturate, block, tasks)


def _kernel_call(plan, x, out):
    """(kernel, args) of a "kernel" or "half" plan converting flat ``x`` into flat ``out``."""
    if plan[0] == "half":
        return convert_call(out, x)
    _, fn, extra, block, tasks = plan
    return fn, (x, out, *extra, block, tasks)


def _standard_plan(src, dst, exact, parallel, block, tasks):
    if src == dst:
        return ("copy",)
    if {src, dst} == {_F16, _F32} and F16C and not exact:
        return ("half",)        # exact mode: numpy's conversion, then the canonical NaN
    if _F16 in (src, dst):
        return ("numpy", _float16_bounds(src, dst))
    if dst == np.bool_:
        return ("kernel", _TO_BOOL.get(exact, parallel), (), block, tasks)
    if src in _NUMBA_FLOATS and dst in _dt.INTEGERS:
        return ("kernel", _FLOAT_TO_INT.get(exact, parallel), _int_bounds(dst), block, tasks)
    return ("kernel", _CONVERT.get(exact, parallel), (), block, tasks)


def _int_bounds(dst):
    info = np.iinfo(dst)
    lo = float(info.min)                 # 0 or -2**(b-1): exact in any float type
    hi = float(info.max) + 1.0           # 2**b or 2**(b-1) (rounding lands there as well)
    return (lo, hi, dst.type(info.min), dst.type(info.max))


def _float16_bounds(src, dst):
    return _int_bounds(dst) if src.kind == "f" and dst.kind in "iu" else None


def _numpy_cast(x, out, bounds, exact):
    """Casts involving float16, with the rules of the kernels above."""
    if out.dtype == np.bool_:
        np.not_equal(x, 0, out=out)
    elif bounds is not None:
        lo, hi, lo_v, hi_v = bounds
        with np.errstate(invalid="ignore"):
            np.copyto(out, np.where(x != x, 0, np.clip(np.trunc(x.astype(np.float32)), lo, hi - 1)),
                      casting="unsafe")
            out[x >= hi] = hi_v
            out[x < lo] = lo_v
    else:
        with np.errstate(over="ignore"):        # out of float16's range: +-inf, as defined
            np.copyto(out, x, casting="unsafe")
        if exact and out.dtype.kind == "f":
            out[out != out] = np.nan


class CastLike(Cast):
    """y = x cast to the element type of input 1, by Cast's rules and kernels."""

    def __init__(self, node):       # noqa: D107 - no 'to' attribute; one Cast per target
        OpKernel.__init__(self, node)
        self._casts = {}

    def infer(self, ctx: InferContext) -> None:
        target = ctx.dtype(1)
        cast = self._casts.get(target)
        if cast is None:
            if target not in _dt.ALL_TENSOR | _dt.EXOTIC:
                ctx.fail(f"cannot cast to element type {_dt.name_of(target)}",
                         ErrorKind.UNSUPPORTED)
            attrs = dict(self.node.attrs, to=_dt.to_code(target))
            cast = Cast(dataclasses.replace(self.node, attrs=attrs))
            self._casts[target] = cast          # a benign race: every thread builds the same
        cast.infer(ctx)
