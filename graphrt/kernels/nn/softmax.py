"""Softmax, LogSoftmax and Hardmax: one function of each row, one shared row walk.

A row is the ``n`` elements along the operator's axis, ``inner`` apart in memory: for
opset 13 and later the single ``axis`` (default -1); before opset 13 the input is seen as
a matrix split at ``axis`` (default 1) and a row is the whole trailing part. Each row is
computed by one task, so the result does not depend on the thread count.

- Softmax: y_k = exp(x_k - m) / s with m = max x and s = sum_k exp(x_k - m).
- LogSoftmax: y_k = (x_k - m) - log s.
- Hardmax: y_k = 1 at the first maximum (the first NaN, as numpy's argmax), 0 elsewhere.

Softmax and LogSoftmax use vecmath's exp and libm's log in fast mode (the exponentials
written to the output, then summed); their exact variants use
graphrt's own (exactmath), in this order: d_k = x_k - m in the element type, e_k = exp(d_k)
rounded to the element type, s = the sum of the e_k in the blocked pairwise order of
core/summation.py (element-type accumulator; both modes),
then Softmax y_k = e_k / s, LogSoftmax y_k = d_k - log(s) (log rounded to the element type);
NaN results are the canonical NaN. Hardmax only compares: exact. float16 rows are computed
in float32 and rounded once at the end.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..core.base import InferContext, OpKernel, RunContext, make_calls
from ..core.broadcast import PARALLEL_MIN
from ..core.floats import FLOATS, run_wide, wide_calls
from ..core.jit import FAST_MATH, Variants
from ..core.summation import VALUES
from ..math.exactmath import FastExact, exp as _own_exp, log as _own_log
from ..math.vecmath import vexp
from ..reduce.reduce import EXACT_EXP_DEVIATIONS

EXACT = False
ROW = None
_SUM, _SUM_OWN_EXP = VALUES.run, EXACT_EXP_DEVIATIONS.run


@intrinsic
def _maximum(typingctx, a, b):
    """llvm.maximum: NaN if either is NaN, max(-0, +0) = +0. Associative and commutative
    exactly, so LLVM may (and does) vectorise a row's maximum over it without fast-math
    flags: 0.2 ns an element here, against 1.4 for the compare-and-select chain, one
    element after another, it replaced. (The Max operator keeps variadic.maximum's compares,
    whose NaN is one of its operands' own; a row's maximum only needs some NaN.)"""
    if a != b or a not in (types.float32, types.float64):
        return None

    def codegen(context, builder, sig, args):
        fty = context.get_value_type(sig.return_type)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(fty, [fty, fty]),
                                            f"llvm.maximum.{fty.intrinsic_name}")
        return builder.call(fn, args)
    return a(a, a), codegen


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _row_max(x):
    """The row's maximum, NaN if it holds one (and so the whole row). Where +0 and -0 both
    are the maximum, which one m is changes no result: exp(x - m) is the same, and the sum
    is at least 2, so LogSoftmax's x - m - log(sum) has the same sign for either."""
    m = x[0]
    for k in range(1, x.size):
        m = _maximum(m, x[k])
    return m


@njit(cache=False, nogil=True, no_cfunc_wrapper=True, error_model="numpy",
      fastmath=set(FAST_MATH))   # see scalar_op
def _softmax_row(x, out):
    """Softmax of one row (x and out may be the same memory)."""
    m = _row_max(x)
    # apart from the sum, so that this loop vectorises; in place it reads out itself (two
    # names for the same memory fail LLVM's overlap check, and its scalar loop runs)
    if x.ctypes.data == out.ctypes.data:
        for k in range(x.size):
            out[k] = vexp(out[k] - m)
    else:
        for k in range(x.size):
            out[k] = vexp(x[k] - m)
    s = _SUM(out, 0, out.size, m)
    for k in range(x.size):
        out[k] = out[k] / s


@njit(cache=False, nogil=True, no_cfunc_wrapper=True, error_model="numpy",
      fastmath=set(FAST_MATH))   # see scalar_op
def _log_softmax_row(x, out):
    """LogSoftmax of one row; x and out are distinct (LogSoftmax takes no input's storage):
    out holds the exponentials while they are summed, as Softmax's do."""
    m = _row_max(x)
    for k in range(x.size):
        out[k] = vexp(x[k] - m)
    ls = np.log(_SUM(out, 0, out.size, m))
    for k in range(x.size):
        out[k] = (x[k] - m) - ls


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _softmax_row_exact(x, out):
    m = _row_max(x)
    for k in range(x.size):
        out[k] = _own_exp(x[k] - m)
    s = _SUM(out, 0, out.size, m)
    for k in range(x.size):
        v = out[k] / s
        out[k] = np.nan if v != v else v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _log_softmax_row_exact(x, out):
    m = _row_max(x)
    ls = _own_log(_SUM_OWN_EXP(x, 0, x.size, m))
    for k in range(x.size):
        v = (x[k] - m) - ls
        out[k] = np.nan if v != v else v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _hardmax_row(x, out):
    best = x[0]
    at = 0
    for k in range(1, x.size):
        v = x[k]
        if v > best or (v != v and best == best):
            best = v
            at = k
    for k in range(x.size):
        out[k] = 0
    out[at] = 1


STRIDED = False


def _rows(x, out, n, inner, tasks):
    """ROW over each of the tasks rows: contiguous ones (inner = 1), or with STRIDED (bound
    per family) rows inner elements apart. Two families, so that a model with contiguous rows
    only compiles ROW for them only (each layout is a compile of ROW and its sum)."""
    for t in prange(tasks):
        o = t // inner
        base = o * n * inner + (t - o * inner)
        if STRIDED:
            last = base + (n - 1) * inner + 1
            ROW(x[base:last:inner], out[base:last:inner])
        else:
            ROW(x[base:base + n], out[base:base + n])


def _families(name: str, fast_row, exact_row) -> tuple:
    """(contiguous, strided) row kernels of one operator, fast and exact."""
    return tuple(FastExact(
        Variants(_rows, f"{name}{suffix}", parallel=True, ROW=fast_row, STRIDED=strided),
        Variants(_rows, f"{name}_exact{suffix}", parallel=True, ROW=exact_row, STRIDED=strided))
        for strided, suffix in ((False, ""), (True, "_strided")))


_SOFTMAX = _families("softmax", _softmax_row, _softmax_row_exact)
SOFTMAX_ROWS = _SOFTMAX[0]      # contiguous rows (attention's scores)
_LOG_SOFTMAX = _families("log_softmax", _log_softmax_row, _log_softmax_row_exact)
_HARDMAX = _families("hardmax", _hardmax_row, _hardmax_row)


class Softmax(OpKernel):
    supports_exact = True
    in_place_input = True
    VARIANTS = _SOFTMAX

    def __init__(self, node):
        super().__init__(node)
        self.coerce_2d = node.opset < 13
        self.axis = int(node.attr("axis", 1 if self.coerce_2d else -1))

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, FLOATS)     # bfloat16 too (opset 13 on), via float32
        shape = tuple(ctx.shape(0))
        r = len(shape)
        if not -r <= self.axis < r:
            ctx.fail(f"axis {self.axis} is out of range for rank {r}")
        axis = self.axis + r if self.axis < 0 else self.axis
        ctx.set_output(0, dt, shape)
        outer = math.prod(shape[:axis])
        if self.coerce_2d:
            n, inner = math.prod(shape[axis:]), 1
        else:
            n, inner = shape[axis], math.prod(shape[axis + 1:])
        tasks = outer * inner if n else 0
        parallel = outer * n * inner >= PARALLEL_MIN and tasks > 1
        ctx.prepared = (n, inner, tasks, self.VARIANTS[inner > 1].get(ctx.exact, parallel))

    @staticmethod
    def _calls(ctx: RunContext, ins, outs):
        n, inner, tasks, fn = ctx.prepared
        return [(fn, (ins[0], outs[0], n, inner, tasks))]

    def jit_calls(self, ctx: RunContext):
        return wide_calls(ctx, lambda ins, outs: self._calls(ctx, ins, outs))

    def run(self, ctx: RunContext) -> None:
        run_wide(ctx, lambda ins, outs: make_calls(self._calls(ctx, ins, outs)))


class LogSoftmax(Softmax):
    in_place_input = False      # (its row reads x after writing the exponentials to out)
    VARIANTS = _LOG_SOFTMAX


class Hardmax(Softmax):
    supports_exact = True
    VARIANTS = _HARDMAX
