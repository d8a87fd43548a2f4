"""The Reduce* family: out[kept] = FINISH(COMBINE over the reduced elements of MAP(x)).

One template serves every member. A member is three scalar functions: MAP (applied to
each element: v, |v| or v*v), COMBINE (add, multiply, max or min) and FINISH (identity,
/n, sqrt or log), plus the value of a reduction over no element (its identity, FINISHed).

Accumulation order, the same in every variant and for every thread count: for each output
element, the reduced elements are visited in row-major order of the reduced axes (reduced
index ascending); float sums (ReduceSum, Mean, L1, L2, SumSquare, LogSum, LogSumExp's
second pass) are added in core/summation.py's blocked pairwise order, products, maxima,
minima and integer sums left to right from the first element's MAP. The accumulator is of
the element type (float32 for float32; float16 is computed in float32 and rounded once at
the end).
Work is split over output elements only. The fast variant may reassociate and contract;
the exact one does neither and writes NaN results as the canonical quiet NaN.
ReduceLogSumExp makes two passes: m = max, then log of the sum of exp(x - m), plus m: x - m
in the accumulator type, exp rounded to it and summed in the order above, then m + log(s)
with log rounded to the accumulator type. ReduceLogSum is log of the sum. Their exact
variants use graphrt's own exp and log (exactmath), the fast ones libm's.

Axes: an attribute before opset 13 (ReduceSum) or 18 (the others), then an optional
input; absent or empty axes reduce everything, or nothing with noop_with_empty_axes
(then MAP and FINISH still apply: ReduceSumSquare squares, ReduceLogSum takes the log).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import BLOCK, PARALLEL_MIN
from ..core.floats import F64, FLOATS, HALF, compute_dtype, run_wide, wide_calls
from ..core.jit import Variants
from ..core.summation import MAGNITUDES, SQUARES, VALUES, Summer, cols_work
from ..math.exactmath import FastExact, exact_twin, exp as XEXP, log as XLOG

EXACT = False
MAP = None
COMBINE = None
FINISH = None
SECOND = None
TWO_PASS = False
PAIRWISE = False    # the members that add: their sum in summation's blocked pairwise order
SUM_SET = None      # that sum's helpers (summation.Summer), for one output / side by side
SUM_COLS = None
SUM_RUN = None      # ... for one contiguous run
EXP_SET = None      # ReduceLogSumExp's sum of exp(x - m), fast or exact
EXP_COLS = None

COLUMN_BLOCK = 2048     # outputs per task when reading along the kept inner axis
_NO_WORK = np.empty((0, 0), np.float32)   # the cols walk's work for members that do not add


# ----------------------------------------------------------------------------- shared helpers

@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def offset_of(i, shape, strides, n):
    """Element offset of the C-order index ``i`` over the first ``n`` axes of ``shape``."""
    i = np.int64(i)     # a prange index may be unsigned, and uint64 // int64 is a float
    off = 0
    for d in range(n - 1, -1, -1):
        q = i // shape[d]
        off += (i - q * shape[d]) * strides[d]
        i = q
    return off


def normalize_axes(ctx: InferContext, axes, rank: int) -> list[int]:
    """Axes made non-negative and checked: in range, no repeats."""
    out = []
    for a in axes:
        if not -rank <= a < rank:
            ctx.fail(f"axis {a} is out of range for rank {rank}")
        out.append(a + rank if a < 0 else a)
    if len(set(out)) != len(out):
        ctx.fail(f"axes {list(axes)} repeat an axis")
    return out


def split_axes(shape, reduced) -> tuple:
    """(kept extents, kept strides, reduced extents, reduced strides) of a C-contiguous
    ``shape`` as int64 arrays, unit axes dropped and neighbours that are contiguous in
    memory merged; an empty group is [1] with stride 0. Row-major order within each
    group is kept, so is the visiting order of the reduced elements."""
    strides, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = step
        step *= shape[d]
    groups = (([], []), ([], []))
    for d, n in enumerate(shape):
        if n == 1:
            continue
        ext, st = groups[d in reduced]
        if ext and st[-1] == strides[d] * n:
            ext[-1] *= n
            st[-1] = strides[d]
        else:
            ext.append(n)
            st.append(strides[d])
    (ke, ks), (re, rs) = groups
    arr = lambda v, empty: np.array(v or [empty], dtype=np.int64)  # noqa: E731
    return arr(ke, 1), arr(ks, 0), arr(re, 1), arr(rs, 0)


# ----------------------------------------------------------------------------- templates

def _rows(x, out, ident, n_, kshape, kstride, rshape, rstride, count, block, tasks):
    """One accumulator per output element, walking its reduced elements."""
    nk = kshape.size
    nr = rshape.size
    rin = rshape[nr - 1]
    rs = rstride[nr - 1]
    router = count // rin if count > 0 else 0
    nout = out.size
    for t in prange(tasks):
        for o in range(t * block, min(nout, t * block + block)):
            base = offset_of(o, kshape, kstride, nk)
            a = ident
            if PAIRWISE:
                if count > 0:
                    a = SUM_SET(x, base, rshape, rstride, router, ident)
            elif count > 0:
                a = MAP(x[base])
                for ro in range(router):
                    off = base + offset_of(ro, rshape, rstride, nr - 1)
                    k0 = 1 if ro == 0 else 0
                    if rs == 1:         # a contiguous slice
                        src = x[off + k0:off + rin]
                        for k in range(src.size):
                            a = COMBINE(a, MAP(src[k]))
                    else:
                        for k in range(k0, rin):
                            a = COMBINE(a, MAP(x[off + k * rs]))
            m = a
            a = SECOND(x, base, rshape, rstride, router, m, a)
            v = FINISH(a, n_, m)
            if EXACT and v != v:
                out[o] = np.nan
            else:
                out[o] = v


def _runs(x, out, ident, n_, rin, block, tasks):
    """Output o the sum of the one contiguous run x[o * rin:(o + 1) * rin] (a sum over
    the trailing axes: GlobalAveragePool's planes, a last-axis ReduceMean), finished: the
    value _rows gives such a set (its set is that one run), without the general walk."""
    nout = out.size
    for t in prange(tasks):
        for o in range(t * block, min(nout, t * block + block)):
            a = SUM_RUN(x, o * rin, rin, ident)
            v = FINISH(a, n_, a)
            if EXACT and v != v:
                out[o] = np.nan
            else:
                out[o] = v


def _cols(x, acc, aux, work, out, ident, n_, kshape, kstride, rshape, rstride, count, block,
          tasks):
    """A block of outputs along the kept inner axis (stride 1) at a time: each reduced
    element is added to the block's accumulators, so the reads stay contiguous. Each
    output still sees its reduced elements in ascending order."""
    nk = kshape.size
    nr = rshape.size
    rin = rshape[nr - 1]
    rs = rstride[nr - 1]
    router = count // rin if count > 0 else 0
    inner = kshape[nk - 1]
    per_row = (inner + block - 1) // block
    for t in prange(tasks):
        row = t // per_row
        j0 = (t - row * per_row) * block
        w = min(inner, j0 + block) - j0
        base = offset_of(row, kshape, kstride, nk - 1) + j0
        o = row * inner + j0
        a = acc[o:o + w]
        if count == 0:
            for j in range(w):
                a[j] = ident
        elif PAIRWISE:
            SUM_COLS(x, base, w, rshape, rstride, router, a, a, work[:, o:o + w])
        else:
            src = x[base:base + w]
            for j in range(w):
                a[j] = MAP(src[j])
            for ro in range(router):
                off = base + offset_of(ro, rshape, rstride, nr - 1)
                for k in range(1 if ro == 0 else 0, rin):
                    src = x[off + k * rs:off + k * rs + w]
                    for j in range(w):
                        a[j] = COMBINE(a[j], MAP(src[j]))
        m = aux[o:o + w]
        if TWO_PASS:
            for j in range(w):
                m[j] = a[j]
            EXP_COLS(x, base, w, rshape, rstride, router, m, a, work[:, o:o + w])
        dst = out[o:o + w]
        for j in range(w):
            v = FINISH(a[j], n_, m[j])
            if EXACT and v != v:
                dst[j] = np.nan
            else:
                dst[j] = v


# ----------------------------------------------------------------------------- scalar parts
# fastmath=False: callees otherwise inherit their first caller's fast flags (see jit.py).

@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _no_second(x, base, rshape, rstride, router, m, a):
    return a


def _exp_sum(x, base, rshape, rstride, router, m, a):
    """Sum of exp(x - m) over one output's reduced elements (m finite), else ``a``."""
    if router == 0 or m - m != 0:
        return a
    return EXP_SET(x, base, rshape, rstride, router, m)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _exp_deviation(v, m):
    return np.exp(v - m)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _exact_exp_deviation(v, m):
    return XEXP(v - m)


# sum exp(v - m) with libm's exp and with graphrt's own (Softmax's denominators too)
EXP_DEVIATIONS = Summer(_exp_deviation, "exp_dev")
EXACT_EXP_DEVIATIONS = Summer(_exact_exp_deviation, "exact_exp_dev")
_EXP_SECOND = Variants(_exp_sum, "reduce_exp_sum", EXP_SET=EXP_DEVIATIONS.set).get(False)
_EXACT_EXP_SECOND = Variants(_exp_sum, "reduce_exp_sum_x", EXP_SET=EXACT_EXP_DEVIATIONS.set).get(True)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _same(v):
    return v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _abs(v):
    return abs(v)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _square(v):
    return v * v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _add(a, v):
    return a + v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _mul(a, v):
    return a * v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _max(a, v):
    return v if v > a or v != v else a      # a NaN stays


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _min(a, v):
    return v if v < a or v != v else a


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _keep(a, n, m):
    return a


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _mean(a, n, m):
    return a / n


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _int_mean(a, n, m):
    """Truncated toward zero, as numpy's mean cast back to the integer type; 0 for n = 0."""
    if n == 0:
        return a - a
    q = a // n
    if q < 0 and q * n != a:
        q += 1
    return q


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _sqrt(a, n, m):
    return np.sqrt(a)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _log(a, n, m):
    return XLOG(a) if EXACT else np.log(a)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _log_sum_exp(a, n, m):
    """m + log(sum exp(x - m)); an infinite or NaN maximum is the result itself."""
    return m if m - m != 0 else m + (XLOG(a) if EXACT else np.log(a))


class _Kernels:
    """The compiled row and column walks of one member. ``summer``: the members that add
    sum MAP(x) with it (blocked pairwise) instead of COMBINE. ``exact``: the scalar parts
    the exact variants bind instead (graphrt's own exp and log in place of libm's)."""

    __slots__ = ("rows", "cols", "runs", "two_pass", "pairwise")

    def __init__(self, name, map_, combine, finish, two_pass=False, exact=None, summer=None):
        consts = dict(MAP=map_, COMBINE=combine, FINISH=finish, TWO_PASS=two_pass,
                      SECOND=_no_second, PAIRWISE=summer is not None)
        if summer is not None:
            consts.update(SUM_SET=summer.set, SUM_COLS=summer.cols)
        if two_pass:
            consts.update(SECOND=_EXP_SECOND, EXP_COLS=EXP_DEVIATIONS.cols)
            exact = dict(exact or {}, SECOND=_EXACT_EXP_SECOND, EXP_COLS=EXACT_EXP_DEVIATIONS.cols)
        self.two_pass = two_pass     # the column walk keeps each output's maximum in scratch
        self.pairwise = summer is not None or two_pass     # ... and its partial sums
        self.rows = _variants(_rows, name + "_rows", consts, exact)
        self.cols = _variants(_cols, name + "_cols", consts, exact)
        self.runs = None if summer is None or two_pass else \
            _variants(_runs, name + "_runs", dict(consts, SUM_RUN=summer.run), exact)


def _variants(template, name, consts, exact):
    fast = Variants(template, name, parallel=True, **consts)
    if not exact:
        return fast
    return FastExact(fast, Variants(template, name + "_exact", parallel=True,
                                    **dict(consts, **exact)))


# ----------------------------------------------------------------------------- kernels

# the 16-bit floats (bfloat16 too) are reduced in float32 and rounded once
_SUMMABLE = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64,
                                           np.uint32, np.uint64)) | HALF
_ORDERED = _dt.NUMERIC | _dt.BOOL | HALF


def _lowest(dt):
    if dt.kind == "f":
        return -np.inf
    return False if dt.kind == "b" else np.iinfo(dt).min


def _highest(dt):
    if dt.kind == "f":
        return np.inf
    return True if dt.kind == "b" else np.iinfo(dt).max


class _Reduce(OpKernel):
    """The family's shape logic and run; members set KERNELS, IDENTITY and the rest."""

    KERNELS: _Kernels
    # integers: another FINISH (ReduceMean), and left-to-right sums, since integer addition
    # (wrapping) is exact in any order and the pairwise walk would only cost compiles
    KERNELS_INT: _Kernels | None = None
    IDENTITY = staticmethod(lambda dt: 0)   # the accumulator over no element
    ALLOWED = _SUMMABLE
    AXES_INPUT_SINCE = 18
    FLOAT_ACC_UNTIL = 0     # integers accumulate in float64 before this opset (log ops)

    def __init__(self, node):
        super().__init__(node)
        self.keepdims = int(node.attr("keepdims", 1)) != 0
        self.axes_input = node.opset >= self.AXES_INPUT_SINCE
        self.noop = self.axes_input and int(node.attr("noop_with_empty_axes", 0)) != 0
        axes = node.attr("axes")
        if self.axes_input and axes is not None:
            node.fail(f"axes is an input from opset {self.AXES_INPUT_SINCE}, not an attribute")
        self.axes = None if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]

    def all_axes(self, ctx: InferContext, rank: int) -> list[int]:
        """What "no axes" reduces: every axis."""
        return list(range(rank))

    def allowed(self):
        if self.FLOAT_ACC_UNTIL and self.node.opset < self.FLOAT_ACC_UNTIL:
            return self.ALLOWED | frozenset(np.dtype(t) for t in
                                            (np.int32, np.int64, np.uint32, np.uint64))
        return self.ALLOWED

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, self.allowed())
        shape = tuple(ctx.shape(0))
        rank = len(shape)
        axes = self.axes
        if self.axes_input and ctx.has_input(1):
            axes = ctx.int_list(1)
            if axes is None:
                ctx.require_run_time_values()
                return
        if not axes:
            axes = [] if self.noop else self.all_axes(ctx, rank)
        reduced = set(normalize_axes(ctx, axes, rank))
        if self.keepdims:
            out_shape = [1 if d in reduced else n for d, n in enumerate(shape)]
        else:
            out_shape = [n for d, n in enumerate(shape) if d not in reduced]
        ctx.set_output(0, dt, out_shape)

        kshape, kstride, rshape, rstride = split_axes(shape, reduced)
        count = math.prod(shape[d] for d in reduced)
        nout = math.prod(out_shape)
        acc_dt = compute_dtype(dt)
        kernels = self.KERNELS
        if dt.kind in "iu":
            kernels = self.KERNELS_INT or kernels
            if self.FLOAT_ACC_UNTIL:
                acc_dt = F64
        ident = acc_dt.type(self.IDENTITY(acc_dt))
        n_ = acc_dt.type(count)
        parallel = math.prod(shape) >= PARALLEL_MIN
        cols = kstride[-1] == 1 and count > 1 and nout > 0
        one_run = kernels.runs is not None and count > 0 and len(rshape) == 1 and \
            rstride[0] == 1 and len(kshape) == 1 and (kstride[0] == count or nout == 1)
        if cols:
            block = min(int(kshape[-1]), COLUMN_BLOCK)
            tasks = nout // int(kshape[-1]) * -(-int(kshape[-1]) // block)
            fn = kernels.cols
        else:
            block = max(1, BLOCK // max(count, 1)) if parallel else max(nout, 1)
            tasks = -(-nout // block)
            fn = kernels.runs if one_run else kernels.rows
        walk = (count,) if fn is kernels.runs else (kshape, kstride, rshape, rstride, count)
        parallel = parallel and tasks > 1
        need_acc = acc_dt != compute_dtype(dt) or kernels.two_pass
        work_rows = cols_work(rshape, count) if cols and kernels.pairwise else 0
        ctx.prepared = (fn.get(ctx.exact, parallel), cols, need_acc, work_rows, acc_dt, ident, n_,
                        *walk, block, tasks)

    @staticmethod
    def _call(ctx: RunContext, x, out):
        fn, cols, need_acc, work_rows, acc_dt, ident, n_, *walk = ctx.prepared
        if not cols:
            return fn, (x, out, ident, n_, *walk)
        acc = scratch(ctx, acc_dt, out.shape) if need_acc else out
        aux = scratch(ctx, acc_dt, out.shape) if need_acc else acc
        work = scratch(ctx, acc_dt, (work_rows, out.size)) if work_rows else _NO_WORK
        return fn, (x, acc, aux, work, out, ident, n_, *walk)

    def jit_calls(self, ctx: RunContext):
        if ctx.prepared[1] or type(self).run is not _Reduce.run:
            return None
        return wide_calls(ctx, lambda ins, outs: [self._call(ctx, ins[0], outs[0])])

    def run(self, ctx: RunContext) -> None:
        def body(ins, outs):
            fn, args = self._call(ctx, ins[0], outs[0])
            fn(*args)

        run_wide(ctx, body)


class ReduceSum(_Reduce):
    supports_exact = True
    AXES_INPUT_SINCE = 13
    KERNELS = _Kernels("reduce_sum", _same, _add, _keep, summer=VALUES)
    KERNELS_INT = _Kernels("reduce_int_sum", _same, _add, _keep)


class ReduceMean(_Reduce):
    supports_exact = True
    KERNELS = _Kernels("reduce_mean", _same, _add, _mean, summer=VALUES)
    KERNELS_INT = _Kernels("reduce_int_mean", _same, _add, _int_mean)


class ReduceProd(_Reduce):
    supports_exact = True
    KERNELS = _Kernels("reduce_prod", _same, _mul, _keep)
    IDENTITY = staticmethod(lambda dt: 1)


class ReduceMax(_Reduce):
    supports_exact = True
    KERNELS = _Kernels("reduce_max", _same, _max, _keep)
    IDENTITY = staticmethod(_lowest)
    ALLOWED = _ORDERED


class ReduceMin(_Reduce):
    supports_exact = True
    KERNELS = _Kernels("reduce_min", _same, _min, _keep)
    IDENTITY = staticmethod(_highest)
    ALLOWED = _ORDERED


class ReduceL1(_Reduce):
    supports_exact = True
    KERNELS = _Kernels("reduce_l1", _abs, _add, _keep, summer=MAGNITUDES)
    KERNELS_INT = _Kernels("reduce_int_l1", _abs, _add, _keep)


class ReduceL2(_Reduce):
    supports_exact = True
    KERNELS = _Kernels("reduce_l2", _square, _add, _sqrt, summer=SQUARES)
    KERNELS_INT = _Kernels("reduce_int_l2", _square, _add, _sqrt)


class ReduceSumSquare(_Reduce):
    supports_exact = True
    KERNELS = _Kernels("reduce_sum_square", _square, _add, _keep, summer=SQUARES)
    KERNELS_INT = _Kernels("reduce_int_sum_square", _square, _add, _keep)


class ReduceLogSum(_Reduce):
    """log of the sum."""
    supports_exact = True
    KERNELS = _Kernels("reduce_log_sum", _same, _add, _log, summer=VALUES,
                       exact=dict(FINISH=exact_twin(_log, "reduce_log", XLOG=XLOG)))
    ALLOWED = FLOATS
    FLOAT_ACC_UNTIL = 28


class ReduceLogSumExp(_Reduce):
    """max m, then m + log(sum exp(x - m))."""
    supports_exact = True
    KERNELS = _Kernels("reduce_lse", _same, _max, _log_sum_exp, two_pass=True,
                       exact=dict(FINISH=exact_twin(_log_sum_exp, "reduce_lse_log", XLOG=XLOG)))
    IDENTITY = staticmethod(lambda dt: -np.inf)
    ALLOWED = FLOATS
    FLOAT_ACC_UNTIL = 28
