"""Cast: numeric and bool element types to each other, one correctly defined conversion each.

- to bool: x != 0 (NaN gives True);
- float to integer: truncation toward zero, saturated at the target's range, NaN to 0
  (ONNX leaves those cases undefined; a defined answer keeps exact mode the same everywhere);
- integer to integer: wrap-around (the low bits); to float: round to nearest even;
- float to float: round to nearest even; in exact mode a NaN result is the canonical NaN.
float16 (which numba cannot compute with) is converted by numpy, with the same rules.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .. import dtypes as _dt
from ..errors import ErrorKind
from .base import InferContext, OpKernel, RunContext
from .broadcast import BLOCK, PARALLEL_MIN
from .jit import Variants

EXACT = False


def _convert(x, out, block, tasks):
    n = out.size
    for t in prange(tasks):
        j0 = t * block
        w = min(n, j0 + block) - j0
        src = x[j0:j0 + w]
        dst = out[j0:j0 + w]
        for j in range(w):
            dst[j] = src[j]
            if EXACT:
                v = dst[j]
                if v != v:
                    dst[j] = np.nan


def _to_bool(x, out, block, tasks):
    n = out.size
    for t in prange(tasks):
        j0 = t * block
        w = min(n, j0 + block) - j0
        src = x[j0:j0 + w]
        dst = out[j0:j0 + w]
        for j in range(w):
            dst[j] = src[j] != 0


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


_CONVERT = Variants(_convert, "cast", parallel=True)
_TO_BOOL = Variants(_to_bool, "cast_bool", parallel=True)
_FLOAT_TO_INT = Variants(_float_to_int, "cast_float_int", parallel=True)

_NUMBA_FLOATS = frozenset(np.dtype(t) for t in (np.float32, np.float64))


class Cast(OpKernel):
    """y = x converted to the element type ``to`` (an ONNX type code)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        code = node.attr("to")
        if code is None:
            node.fail("attribute 'to' is required")
        code = int(code)
        try:
            target = _dt.to_numpy(code)
        except KeyError:
            if code == 0:
                node.fail("attribute 'to' is UNDEFINED")
            node.fail(f"cannot cast to element type {_dt.name_of_code(code)}", ErrorKind.UNSUPPORTED)
        except ValueError:
            node.fail(f"cannot cast to element type {_dt.name_of_code(code)}", ErrorKind.UNSUPPORTED)
        if target not in _dt.ALL_TENSOR:
            node.fail(f"cannot cast to element type {_dt.name_of_code(code)}", ErrorKind.UNSUPPORTED)
        self.to = target

    def infer(self, ctx: InferContext) -> None:
        src = ctx.check_dtype(0, _dt.ALL_TENSOR)
        dst = self.to
        shape = ctx.shape(0)
        ctx.set_output(0, dst, shape)
        n = int(np.prod(shape, dtype=np.int64))
        parallel = n >= PARALLEL_MIN
        block = BLOCK if parallel else max(n, 1)
        tasks = -(-n // block)
        if src == dst:
            ctx.prepared = ("copy",)
        elif np.dtype(np.float16) in (src, dst):
            ctx.prepared = ("numpy", _float16_bounds(src, dst))
        elif dst == np.bool_:
            ctx.prepared = ("kernel", _TO_BOOL.get(ctx.exact, parallel), (), block, tasks)
        elif src in _NUMBA_FLOATS and dst in _dt.INTEGERS:
            ctx.prepared = ("kernel", _FLOAT_TO_INT.get(ctx.exact, parallel),
                            _int_bounds(dst), block, tasks)
        else:
            ctx.prepared = ("kernel", _CONVERT.get(ctx.exact, parallel), (), block, tasks)

    def run(self, ctx: RunContext) -> None:
        how = ctx.prepared[0]
        x, out = ctx.flat_in[0], ctx.flat_out[0]
        if how == "copy":
            out[...] = x
        elif how == "numpy":
            _numpy_cast(x, out, ctx.prepared[1], ctx.exact)
        else:
            _, fn, extra, block, tasks = ctx.prepared
            fn(x, out, *extra, block, tasks)


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
        np.copyto(out, x, casting="unsafe")
        if exact and out.dtype.kind == "f":
            out[out != out] = np.nan
