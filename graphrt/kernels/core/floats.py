"""Narrow floats: the float element types graphrt holds but numba cannot compute in.

float16, and bfloat16, the float8 and the float4 formats where ml_dtypes provides them.
A kernel widens such an operand exactly to float32 scratch, computes in float32 and rounds
a narrow result once at the end. For + - * / and sqrt that is the correctly rounded result
(float32 has at least 2p+2 bits for these p-bit formats, so the double rounding is
innocuous); bool and integer results need no rounding at all.

The sets, one meaning each:
- ``HALF``: the 16-bit floats (float16, bfloat16);
- ``FLOAT8``: the four float8 formats of ONNX's types 17-20;
- ``NARROW``: every float type narrower than float32 (HALF, FLOAT8, float4, e8m0);
- ``FLOATS``: the floats with arithmetic kernels: float32, float64 and HALF
  (``graphrt.dtypes.FLOATS`` is numpy's three, without bfloat16).
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import binding as llvm, ir
from numba import njit, types
from numba.extending import intrinsic

from ... import dtypes as _dt
from .base import RunContext, scratch
from .held import held_buffer

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def optional_dtype(code):
    """The numpy dtype of an ONNX type code, None when there is none (no ml_dtypes)."""
    try:
        return _dt.to_numpy(code)
    except ValueError:
        return None


BF16 = optional_dtype(16)           # None without ml_dtypes
HALF = frozenset(t for t in (F16, BF16) if t is not None)
FLOAT8 = frozenset(t for t in map(optional_dtype, (17, 18, 19, 20)) if t is not None)
NARROW = frozenset({F16} | {dt for dt in _dt.EXOTIC if "float" in dt.name})
FLOATS = frozenset({F32, F64}) | HALF


def compute_dtype(dtype) -> np.dtype:
    """The type a kernel computes in for elements of ``dtype``: float32 for narrow floats."""
    return F32 if dtype in NARROW else np.dtype(dtype)


# float16 <-> float32 in compiled code: LLVM's half conversions, one instruction per vector
# where the CPU has F16C (numpy's own conversion is a scalar routine, about 40 times slower)
F16C = "+f16c" in llvm.get_host_cpu_features().flatten().split(",")


def _bits_converter(src, dst):
    """An intrinsic: the bits of float type ``dst`` (ir.HalfType or ir.FloatType) for the
    bits of a value of float type ``src``, converted by LLVM (fpext or fptrunc)."""
    width = {ir.HalfType: 16, ir.FloatType: 32}
    ws, wd = width[src], width[dst]

    @intrinsic
    def convert(typingctx, bits):
        def codegen(context, builder, sig, args):
            x = builder.bitcast(args[0], src())
            x = (builder.fpext if wd > ws else builder.fptrunc)(x, dst())
            return builder.bitcast(x, ir.IntType(wd))
        return getattr(types, f"uint{wd}")(getattr(types, f"uint{ws}")), codegen
    return convert


_half_to_float_bits = _bits_converter(ir.HalfType, ir.FloatType)
_float_bits_to_half = _bits_converter(ir.FloatType, ir.HalfType)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _widen_half(src, dst):
    """dst = float32 bits of the float16 bits src, numpy's conversion bit for bit: exact,
    and a NaN keeps its payload (the hardware would quiet a signalling one)."""
    for i in range(src.size):
        h = np.uint32(src[i])
        nan = (h & 0x7C00) == 0x7C00 and (h & 0x3FF) != 0
        dst[i] = ((h & 0x8000) << 16) | 0x7F800000 | ((h & 0x3FF) << 13) if nan else \
            _half_to_float_bits(src[i])


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _narrow_half(src, dst):
    """dst = float16 bits of the float32 bits src rounded to nearest even, numpy's bit for
    bit: a NaN keeps the top 10 bits of its payload (made non-zero)."""
    for i in range(src.size):
        u = src[i]
        nan = (u & 0x7FFFFFFF) > 0x7F800000
        m = np.uint16((u >> 13) & 0x3FF)
        dst[i] = np.uint16((u >> 16) & 0x8000) | np.uint16(0x7C00) | (m if m else np.uint16(1)) \
            if nan else _float_bits_to_half(u)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _widen_bfloat16(src, dst):
    """dst = float32 bits of the bfloat16 bits src: the same 16 bits, then 16 zeros (exact;
    a NaN keeps its payload, as ml_dtypes converts)."""
    for i in range(src.size):
        dst[i] = np.uint32(src[i]) << 16


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _narrow_bfloat16(src, dst):
    """dst = bfloat16 bits of the float32 bits src rounded to nearest even (the top 16 bits
    after adding 0x7FFF and the lowest kept bit), ml_dtypes' conversion bit for bit: a NaN
    becomes the quiet NaN of its sign (0x7FC0, 0xFFC0)."""
    for i in range(src.size):
        u = np.uint32(src[i])
        dst[i] = np.uint16(((u >> 16) & 0x8000) | 0x7FC0) if (u & 0x7FFFFFFF) > 0x7F800000 \
            else np.uint16((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16)


def convert_call(dst: np.ndarray, src: np.ndarray):
    """The compiled call (kernel, args) that converts float16 or bfloat16 <-> float32 arrays
    of one contiguous shape with numpy's (ml_dtypes') bits, or None where there is none
    (float16 without F16C, other types or layouts)."""
    pair = (src.dtype, dst.dtype)
    if not (src.flags.c_contiguous and dst.flags.c_contiguous and src.shape == dst.shape):
        return None
    s, d = src.reshape(-1), dst.reshape(-1)
    if F16C and pair == (F16, F32):
        return _widen_half, (s.view(np.uint16), d.view(np.uint32))
    if F16C and pair == (F32, F16):
        return _narrow_half, (s.view(np.uint32), d.view(np.uint16))
    if BF16 is not None and pair == (BF16, F32):
        return _widen_bfloat16, (s.view(np.uint16), d.view(np.uint32))
    if BF16 is not None and pair == (F32, BF16):
        return _narrow_bfloat16, (s.view(np.uint32), d.view(np.uint16))
    return None


def convert(dst: np.ndarray, src: np.ndarray) -> None:
    """np.copyto(dst, src, casting="unsafe"), compiled for float16 or bfloat16 <-> float32
    arrays of one contiguous shape (same bits as numpy and ml_dtypes)."""
    call = convert_call(dst, src)
    if call is None:
        np.copyto(dst, src, casting="unsafe")
    else:
        call[0](*call[1])


def widen(ctx: RunContext, a: np.ndarray | None, dtype=None) -> np.ndarray | None:
    """``a`` in ``dtype`` (by default the type it is computed in): ``a`` itself, or a
    scratch copy of the same shape converted as numpy does (exact for a widening)."""
    if a is None:
        return None
    dtype = compute_dtype(a.dtype) if dtype is None else np.dtype(dtype)
    if a.dtype == dtype:
        return a
    w = scratch(ctx, dtype, a.shape)
    convert(w, a)
    return w


def wide_constants(ctx, *idx) -> dict:
    """At infer: float32 copies (flat) of the constant narrow inputs among ``idx`` (a
    layer's float16 weights), made once per plan so that runs read them instead of widening
    them again (``widen_input``)."""
    return {i: np.asarray(ctx.value(i), compute_dtype(ctx.dtype(i))).reshape(-1)
            for i in idx if ctx.has_input(i) and ctx.dtype(i) in NARROW and
            ctx.value(i) is not None}


def widen_input(ctx: RunContext, i: int, wide: dict) -> np.ndarray | None:
    """Input ``i`` in the type it is computed in: its copy in ``wide`` (wide_constants), or
    ``widen``; None when absent."""
    if i in wide:
        return wide[i]
    return widen(ctx, ctx.flat_in[i]) if i < len(ctx.flat_in) else None


def result_buffer(ctx: RunContext, out: np.ndarray | None) -> np.ndarray | None:
    """Where a kernel writes ``out``: ``out`` itself, or float32 scratch for a narrow float."""
    if out is None or out.dtype not in NARROW:
        return out
    return scratch(ctx, F32, out.shape)


def narrow(out: np.ndarray | None, buf: np.ndarray | None) -> None:
    """Round ``buf`` into ``out`` (once) when the kernel wrote scratch."""
    if out is not None and buf is not out:
        convert(out, buf)


def run_wide(ctx: RunContext, body) -> None:
    """``body(flat_in, flat_out)`` with narrow inputs and outputs swapped for float32
    copies (outputs rounded back once)."""
    outs = [result_buffer(ctx, o) for o in ctx.flat_out]
    body([widen(ctx, a) for a in ctx.flat_in], outs)
    for o, w in zip(ctx.flat_out, outs):
        narrow(o, w)


def wide_calls(ctx: RunContext, calls_of, wide: dict | None = None, unused=()):
    """jit_calls of a kernel computed in float32 for narrow operands: ``calls_of(flat_in,
    flat_out)``, where float16 inputs are converted into float32 buffers held by the run
    state (core/held.py) by calls before, float16 outputs written there and rounded by
    calls after (numpy's bits, as ``widen`` and ``narrow``); inputs in ``wide``
    (wide_constants) are their per-plan copies, inputs in ``unused`` are passed as they are.
    None where calls_of gives None or an operand is narrow without a compiled conversion
    (the float8 types, float16 on a CPU without F16C)."""
    wide = wide or {}
    before, after = [], []
    ins = _held_copies(ctx, [wide.get(i, a) for i, a in enumerate(ctx.flat_in)], "in",
                       before, unused)
    outs = _held_copies(ctx, ctx.flat_out, "out", after, ())
    if ins is None or outs is None:
        return None
    calls = calls_of(ins, outs)
    return None if calls is None else before + calls + after


def _held_copies(ctx: RunContext, arrays: list, way: str, calls: list, keep) -> list | None:
    """``arrays`` with each float16 one (but those at ``keep``) replaced by a float32 buffer
    held by the run state, the call converting it into (way "in") or out of (way "out") the
    buffer appended to ``calls``; None where such a conversion is not compiled."""
    out = []
    for i, a in enumerate(arrays):
        if a is not None and a.dtype in NARROW and i not in keep:
            w = held_buffer(F32, a.shape, ctx.held, f"wide {way} {i}")
            call = convert_call(w, a) if way == "in" else convert_call(a, w)
            if call is None:
                return None
            calls.append(call)
            a = w
        out.append(a)
    return out


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def round_to(v, p, emin, emax):
    """v (float64) rounded to the nearest value of a binary format with p significant bits
    and normal exponents emin..emax, half to even; inf past the largest finite value."""
    a = abs(v)
    if a != a or a == np.inf or a == 0:
        return v
    if a < 2.0 ** emin:                 # subnormals: multiples of 2^(emin - p + 1)
        q = np.rint(a * 2.0 ** (p - 1 - emin)) * 2.0 ** (emin - p + 1)
    else:
        m, e = math.frexp(a)
        q = math.ldexp(np.rint(math.ldexp(m, p)), e - p)
        if q >= 2.0 ** (emax + 1):
            q = np.inf
    return q if v > 0 else -q
