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
from numba import njit

from ... import dtypes as _dt
from .base import RunContext, scratch

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


def widen(ctx: RunContext, a: np.ndarray | None, dtype=None) -> np.ndarray | None:
    """``a`` in ``dtype`` (by default the type it is computed in): ``a`` itself, or a
    scratch copy of the same shape converted by numpy (exact for a widening)."""
    if a is None:
        return None
    dtype = compute_dtype(a.dtype) if dtype is None else np.dtype(dtype)
    if a.dtype == dtype:
        return a
    w = scratch(ctx, dtype, a.shape)
    np.copyto(w, a, casting="unsafe")
    return w


def result_buffer(ctx: RunContext, out: np.ndarray | None) -> np.ndarray | None:
    """Where a kernel writes ``out``: ``out`` itself, or float32 scratch for a narrow float."""
    if out is None or out.dtype not in NARROW:
        return out
    return scratch(ctx, F32, out.shape)


def narrow(out: np.ndarray | None, buf: np.ndarray | None) -> None:
    """Round ``buf`` into ``out`` (once) when the kernel wrote scratch."""
    if out is not None and buf is not out:
        np.copyto(out, buf, casting="unsafe")


def run_wide(ctx: RunContext, body) -> None:
    """``body(flat_in, flat_out)`` with narrow inputs and outputs swapped for float32
    copies (outputs rounded back once)."""
    outs = [result_buffer(ctx, o) for o in ctx.flat_out]
    body([widen(ctx, a) for a in ctx.flat_in], outs)
    for o, w in zip(ctx.flat_out, outs):
        narrow(o, w)


@njit(cache=True, nogil=True, fastmath=False)
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
