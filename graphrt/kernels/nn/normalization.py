"""Normalisations: each element set S (a row, an instance's channel or group, a channel
across the batch, a line along an axis) is shifted and scaled by statistics of S.

One template walks a set: its elements are those of a reduction (kept index = the set,
reduced axes visited in row-major order, see reduce.split_axes), so one task per set,
and the statistics accumulate in a fixed order whatever the thread count:

  mean = (sum of x) / n,  var = (sum of (x - mean)^2) / n, each sum in the blocked
  pairwise order of core/summation.py
  LayerNormalization, InstanceNormalization, GroupNormalization, BatchNormalization in
  training mode:  y = ((x - mean) * inv) * scale + bias,  inv = 1 / sqrt(var + epsilon)
  RMSNormalization: mean = 0 and var = (sum of x^2) / n, then as above
  BatchNormalization (inference): mean and var are inputs, then as above
  MeanVarianceNormalization:  y = (x - mean) / (sqrt(var) + 1e-9)
  LpNormalization:  y = x / norm with norm = sum |x| (p=1) or sqrt(sum x^2) (p=2); 0 where
  the norm is 0

Each step is one correctly rounded IEEE operation and the exact variant has no FMA: all
are exact-mode kernels. The statistics are computed in float32 for float16 and float32
inputs (the stash type) and in float64 for float64 inputs.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, make_calls, scratch
from ..core.broadcast import PARALLEL_MIN
from ..core.floats import F32, FLOATS, compute_dtype, run_wide, wide_calls
from ..core.jit import Variants
from ..core.pointwise import relu_float, scale_shift_relu
from ..core.summation import DEVIATION_MAGNITUDES, DEVIATION_SQUARES, VALUES
from ..elementwise.arithmetic import Add, Div, Mul, Sub
from ..reduce.reduce import offset_of, split_axes

EXACT = False
MODE = 0
RELU = False

LAYER, RMS, GIVEN, MVN, LP1, LP2 = range(6)
_SUM, _SUM_DEV_SQ, _SUM_DEV_ABS = VALUES.set, DEVIATION_SQUARES.set, DEVIATION_MAGNITUDES.set
# prm (compute type): epsilon, 1, 0, n, momentum, 1 - momentum
_EPS, _ONE, _ZERO, _N, _KEEP, _TAKE = range(6)
NO_STATS, MEAN_INV, RUNNING = range(3)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _affine_run(xs, ys, mu, inv, scale, bias, c0, step, has_scale, has_bias, exact,
                relu=False):
    """ys[k] = ((xs[k] - mu) * inv) * scale[c0 + k * step] + bias[...] (step 0 or 1), the
    element loop of _normalize for a contiguous run, NaN canonical when exact; ``relu``:
    then Relu's function (an absorbed Relu node)."""
    if xs.size > 0 and xs.ctypes.data == ys.ctypes.data:
        # in place: one array in the loop, else LLVM's overlap check fails at run time and
        # the scalar loop runs (3.5x slower)
        _affine_loop(ys, ys, mu, inv, scale, bias, c0, step, has_scale, has_bias, exact, relu)
    else:
        _affine_loop(xs, ys, mu, inv, scale, bias, c0, step, has_scale, has_bias, exact, relu)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False,
      inline="always")
def _affine_loop(xs, ys, mu, inv, scale, bias, c0, step, has_scale, has_bias, exact, relu):
    n = xs.size
    if step == 0 or not has_scale:
        sc = scale[c0] if has_scale else mu
        bi = bias[c0] if has_bias else mu
        for k in range(n):
            v = scale_shift_relu((xs[k] - mu) * inv, sc, bi, has_scale, has_bias, relu)
            ys[k] = np.nan if exact and v != v else v
    else:
        scs = scale[c0:c0 + n]
        bis = bias[c0:c0 + n] if has_bias else scs
        for k in range(n):
            v = scale_shift_relu((xs[k] - mu) * inv, scs[k], bis[k], True, has_bias, relu)
            ys[k] = np.nan if exact and v != v else v


def _normalize(x, scale, bias, mean_in, var_in, y, st1, st2, kshape, kstride, rshape,
               rstride, count, cw, prm, has_scale, has_bias, stats, tasks):
    """One set per task. ``cw`` = (cmod, cset, cout, cin): the scale/bias index of the
    element at reduced index (ro, k) of set s is (s % cmod) * cset + ro * cout + k * cin."""
    nk = kshape.size
    nr = rshape.size
    rin = rshape[nr - 1]
    rs = rstride[nr - 1]
    router = count // rin if count > 0 else 0
    eps = prm[_EPS]
    one = prm[_ONE]
    zero = prm[_ZERO]
    for t in prange(tasks):
        s = np.int64(t)     # a prange index may be unsigned: keep the index arithmetic int64
        base = offset_of(s, kshape, kstride, nk)
        mu = zero
        var = zero
        if MODE == GIVEN:
            mu = mean_in[s]
            var = var_in[s]
        else:
            acc = zero
            if MODE == LAYER or MODE == MVN:
                if router > 0:
                    acc = _SUM(x, base, rshape, rstride, router, zero)
                mu = acc / prm[_N]
            if router == 0:
                acc = zero
            elif MODE == LP1:
                acc = _SUM_DEV_ABS(x, base, rshape, rstride, router, mu)
            else:
                acc = _SUM_DEV_SQ(x, base, rshape, rstride, router, mu)
            var = acc if MODE == LP1 or MODE == LP2 else acc / prm[_N]
        if MODE == MVN:
            den = np.sqrt(var) + eps
        elif MODE == LP1:
            den = var
        elif MODE == LP2:
            den = np.sqrt(var)
        else:
            den = np.sqrt(var + eps)
        inv = one / den
        if stats != NO_STATS:
            a = mu
            b = inv
            if stats == RUNNING:
                a = mean_in[s] * prm[_KEEP] + mu * prm[_TAKE]
                b = var_in[s] * prm[_KEEP] + var * prm[_TAKE]
            st1[s] = np.nan if EXACT and a != a else a
            st2[s] = np.nan if EXACT and b != b else b
        cb = (s % cw[0]) * cw[1]
        for ro in range(router):
            off = base + offset_of(ro, rshape, rstride, nr - 1)
            c0 = cb + ro * cw[2]
            if rs == 1 and MODE != MVN and MODE != LP1 and MODE != LP2 and \
                    (not has_scale or cw[3] == 0 or cw[3] == 1):
                # a contiguous run (BatchNormalization's planes, LayerNormalization's rows):
                # the same operations over slices, which LLVM vectorises
                _affine_run(x[off:off + rin], y[off:off + rin], mu, inv, scale, bias, c0,
                            cw[3], has_scale, has_bias, EXACT, RELU)
                continue
            for k in range(rin):
                p = off + k * rs
                if MODE == MVN or MODE == LP1 or MODE == LP2:
                    v = (x[p] - mu) / den if den != 0 else zero
                else:
                    v = (x[p] - mu) * inv
                c = c0 + k * cw[3]
                sc = scale[c] if has_scale else v
                bi = bias[c] if has_scale and has_bias else v
                v = scale_shift_relu(v, sc, bi, has_scale, has_scale and has_bias, RELU)
                if EXACT and v != v:
                    y[p] = np.nan
                else:
                    y[p] = v


def _rows(x, scale, bias, y, st1, st2, cols, prm, stats, tasks):
    """_normalize for LayerNormalization and RMSNormalization over contiguous rows of
    ``cols`` elements (the sets), scale and bias indexed by the column: the same
    operations in the same order (one run per set), without the general walk. One loop
    body: an absent scale comes as ones and an absent bias as -0.0 (v * 1 and v + -0.0
    are v, bit for bit); IN_PLACE (bound per form): y is x, read and written through one
    array so that LLVM's overlap check does not send the loop to its scalar version."""
    eps = prm[_EPS]
    one = prm[_ONE]
    zero = prm[_ZERO]
    n = prm[_N]
    for t in prange(tasks):
        s = np.int64(t)
        off = s * cols
        mu = zero
        if MODE == LAYER:
            mu = _RUN(x, off, cols, zero) / n
        var = _RUN_DEV_SQ(x, off, cols, mu) / n
        inv = one / np.sqrt(var + eps)
        if stats != NO_STATS:
            st1[s] = np.nan if EXACT and mu != mu else mu
            st2[s] = np.nan if EXACT and inv != inv else inv
        if IN_PLACE:
            _affine_row_in(y[off:off + cols], mu, inv, scale, bias, EXACT)
        else:
            _affine_row(x[off:off + cols], y[off:off + cols], mu, inv, scale, bias, EXACT)


# The row's affine step is compiled without fast-math in both modes (as _affine_run): a
# multiply-add is not fused, so a row has the general walk's bits.
@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False,
      no_cpython_wrapper=True)
def _affine_row(xs, ys, mu, inv, scale, bias, exact):
    """ys = ((xs - mu) * inv) * scale + bias, NaN canonical when exact."""
    for k in range(ys.size):
        v = ((xs[k] - mu) * inv) * scale[k] + bias[k]
        ys[k] = np.nan if exact and v != v else v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False,
      no_cpython_wrapper=True)
def _affine_row_in(ys, mu, inv, scale, bias, exact):
    """_affine_row with ys over xs: one array in the loop, which LLVM vectorises."""
    for k in range(ys.size):
        v = ((ys[k] - mu) * inv) * scale[k] + bias[k]
        ys[k] = np.nan if exact and v != v else v


def _planes(x, scale, bias, mean, var, y, channels, size, prm, tasks):
    """BatchNormalization in inference (and with absorbed stages: p.folded) over planes of
    ``size`` contiguous elements, plane t of channel t % channels: the general walk's
    operations for its GIVEN mode (inv = 1 / sqrt(var + epsilon), then each element as
    _plane), one task per plane instead of per channel, the same bits."""
    eps = prm[_EPS]
    one = prm[_ONE]
    for t in prange(tasks):
        s = np.int64(t)
        ch = s % channels
        inv = one / np.sqrt(var[ch] + eps)
        off = s * size
        if IN_PLACE:
            _plane_in(y[off:off + size], mean[ch], inv, scale[ch], bias[ch], EXACT, RELU)
        else:
            _plane(x[off:off + size], y[off:off + size], mean[ch], inv, scale[ch], bias[ch],
                   EXACT, RELU)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False,
      no_cpython_wrapper=True)
def _plane(xs, ys, mu, inv, sc, bi, exact, relu):
    """ys = ((xs - mu) * inv) * sc + bi, then Relu's function (relu), NaN canonical when
    exact; without fast-math in both modes (as _affine_run)."""
    for k in range(ys.size):
        v = ((xs[k] - mu) * inv) * sc + bi
        if relu:
            v = relu_float(v)
        ys[k] = np.nan if exact and v != v else v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False,
      no_cpython_wrapper=True)
def _plane_in(ys, mu, inv, sc, bi, exact, relu):
    """_plane with ys over xs: one array in the loop, which LLVM vectorises."""
    for k in range(ys.size):
        v = ((ys[k] - mu) * inv) * sc + bi
        if relu:
            v = relu_float(v)
        ys[k] = np.nan if exact and v != v else v


IN_PLACE = False
_RUN, _RUN_DEV_SQ = VALUES.run, DEVIATION_SQUARES.run
# (the form for separate buffers, the form for y over x)
_LAYER_ROWS = tuple(Variants(_rows, "norm_layer_rows" + tag, parallel=True, MODE=LAYER,
                             IN_PLACE=inp) for tag, inp in (("", False), ("_in", True)))
_RMS_ROWS = tuple(Variants(_rows, "norm_rms_rows" + tag, parallel=True, MODE=RMS,
                           IN_PLACE=inp) for tag, inp in (("", False), ("_in", True)))
_LAYER = Variants(_normalize, "norm_layer", parallel=True, MODE=LAYER, AFFINE=_affine_run)
_RMS = Variants(_normalize, "norm_rms", parallel=True, MODE=RMS, AFFINE=_affine_run)
_GIVEN = Variants(_normalize, "norm_given", parallel=True, MODE=GIVEN, AFFINE=_affine_run)
# by Relu absorbed: (the form for separate buffers, the form for y over x)
_GIVEN_PLANES = {relu: tuple(Variants(_planes, f"norm_given_planes{'_relu' * relu}{tag}",
                                      parallel=True, IN_PLACE=inp, RELU=relu)
                             for tag, inp in (("", False), ("_in", True)))
                 for relu in (False, True)}
_MVN = Variants(_normalize, "norm_mvn", parallel=True, MODE=MVN)
_LP = {1: Variants(_normalize, "norm_lp1", parallel=True, MODE=LP1),
       2: Variants(_normalize, "norm_lp2", parallel=True, MODE=LP2)}


def _arr(*v):
    return np.array(v, dtype=np.int64)


class _Prepared:
    __slots__ = ("fn", "cdt", "walk", "count", "cw", "prm", "scale", "bias", "mean", "var",
                 "stats", "stat_dt", "sets", "param_shape", "no_param", "no_stat", "exact",
                 "parallel", "narrow", "consts", "folded", "rows", "ones", "neg_zeros",
                 "planes")


class _Norm(OpKernel):
    """Shared prepare and run; subclasses state their inputs' roles and the walk."""

    supports_exact = True
    in_place_input = True
    SCALE, BIAS, MEAN, VAR = None, None, None, None     # input indices, None when unused

    def __init__(self, node):
        super().__init__(node)
        self.epsilon = float(node.attr("epsilon", 1e-5))

    def _prepare(self, ctx, variants, walk, count, cw=(1, 0, 0, 0), stats=NO_STATS,
                 stat_dt=F32, param_shape=None, momentum=0.0, eps=None, rows=None):
        """walk = (kshape, kstride, rshape, rstride): sets = the kept elements. ``rows``:
        the kernels of the same normalisation over contiguous rows (_rows), taken where
        the sets are such rows and the parameters run along them."""
        p = _Prepared()
        cdt = compute_dtype(ctx.dtype(0))
        sets = math.prod(int(e) for e in walk[0])
        p.cdt, p.walk, p.count, p.cw = cdt, walk, count, _arr(*cw)
        eps = self.epsilon if eps is None else eps
        p.prm = np.array([eps, 1, 0, count, momentum, 1 - momentum], dtype=cdt)
        p.scale, p.bias, p.mean, p.var = (i if i is not None and ctx.has_input(i) else None
                                          for i in (self.SCALE, self.BIAS, self.MEAN, self.VAR))
        p.stats, p.stat_dt, p.param_shape = stats, np.dtype(stat_dt), param_shape
        p.sets = sets
        p.no_param = np.empty(0, cdt)           # stand-ins for absent inputs and outputs
        p.no_stat = np.empty(0, stat_dt)
        parallel = math.prod(ctx.shape(0)) >= PARALLEL_MIN and sets > 1
        kshape, kstride, rshape, rstride = walk
        p.rows = rows is not None and rshape.size == 1 and rstride[0] == 1 and \
            kshape.size == 1 and (kshape[0] == 1 or kstride[0] == count) and \
            tuple(cw) == (1, 0, count, 1) and stats in (NO_STATS, MEAN_INV)
        if p.rows:
            p.fn = tuple(v.get(ctx.exact, parallel) for v in rows)
            cols = int(rshape[0])
            p.ones = np.ones(cols, cdt)
            p.neg_zeros = np.full(cols, -0.0, cdt)
        else:       # (None: the caller's own kernel, e.g. BatchNormalization's planes)
            p.fn = None if variants is None else variants.get(ctx.exact, parallel)
        p.exact, p.parallel, p.narrow = ctx.exact, parallel, ctx.dtype(0) != cdt
        p.consts = None
        p.folded = None
        p.planes = None
        ctx.prepared = p

    def _calls(self, ctx: RunContext, ins, outs, take):
        """The kernel's call over flat ``ins`` and ``outs``; ``take(dtype, shape)`` gives
        scratch for a parameter that must be broadcast or converted, or a statistic the
        node does not output (None when the caller has none: then the result is None)."""
        p = ctx.prepared
        kshape, kstride, rshape, rstride = p.walk
        if p.folded is not None and p.planes is None:   # with absorbed stages
            scale, bias, mean, var, prm = p.folded[:5]
            return [(p.fn, (ins[0], scale, bias, mean, var, outs[0], p.no_stat, p.no_stat,
                            kshape, kstride, rshape, rstride, p.count, p.cw, prm, True, True,
                            NO_STATS, p.sets))]

        def param(i, shape=None):
            if i is None:
                return p.no_param
            a = ins[i]
            if (shape is None or ctx.inputs[i].shape == shape) and a.dtype == p.cdt:
                return a
            full = take(p.cdt, shape or a.shape)
            if full is not None:
                np.copyto(full, ins[i].reshape(ctx.inputs[i].shape))
                full = full.reshape(-1)
            return full

        def stat(i):
            if p.stats == NO_STATS:
                return p.no_stat
            o = outs[i] if i < len(outs) else None
            return o if o is not None else take(p.stat_dt, (p.sets,))

        if p.planes is not None:        # BatchNormalization in inference
            channels, size, forms = p.planes
            if p.folded is not None:
                scale, bias, mean, var, prm = p.folded[:5]
            else:
                scale, bias, mean, var = (param(i) for i in (p.scale, p.bias, p.mean, p.var))
                prm = p.prm
            if any(a is None for a in (scale, bias, mean, var)):
                return None
            fn = forms[1] if np.may_share_memory(ins[0], outs[0]) else forms[0]
            return [(fn, (ins[0], scale, bias, mean, var, outs[0], channels, size, prm,
                          p.count // max(1, size) * channels))]
        if p.rows:
            scale = p.ones if p.scale is None else param(p.scale, p.param_shape)
            bias = p.neg_zeros if p.bias is None else param(p.bias, p.param_shape)
            args = (ins[0], scale, bias, outs[0], stat(1), stat(2))
            if any(a is None for a in args):
                return None
            fn = p.fn[1] if np.may_share_memory(ins[0], outs[0]) else p.fn[0]
            return [(fn, args + (p.count, p.prm, p.stats, p.sets))]
        args = (ins[0], param(p.scale, p.param_shape), param(p.bias, p.param_shape),
                param(p.mean), param(p.var), outs[0], stat(1), stat(2))
        if any(a is None for a in args):
            return None
        return [(p.fn, args + (kshape, kstride, rshape, rstride, p.count, p.cw, p.prm,
                               p.scale is not None, p.bias is not None, p.stats, p.sets))]

    def jit_calls(self, ctx: RunContext):
        if type(self).run is not _Norm.run:
            return None
        return wide_calls(ctx, lambda ins, outs: self._calls(ctx, ins, outs,
                                                             lambda dt, shape: None))

    def run(self, ctx: RunContext) -> None:
        run_wide(ctx, lambda ins, outs: make_calls(self._calls(
            ctx, ins, outs, lambda dt, shape: scratch(ctx, dt, shape))))


def _check_float(ctx, *idx):
    """float16, bfloat16 (computed in float32, rounded once), float32 or float64."""
    for i in idx:
        if ctx.has_input(i):
            ctx.check_dtype(i, FLOATS)


def _axis(ctx, axis, r):
    if not -r <= axis < r:
        ctx.fail(f"axis {axis} is out of range for rank {r}")
    return axis + r if axis < 0 else axis


def _stash(node):
    stash = int(node.attr("stash_type", 1))
    if stash != 1:
        node.fail(f"stash_type {stash} is not supported (1, float, is)", ErrorKind.UNSUPPORTED)


class LayerNormalization(_Norm):
    """Statistics over the axes from ``axis`` on; Scale and B broadcast to those axes.
    Optional outputs Mean and InvStdDev (float32, the stash type) have the statistics,
    with the normalised axes kept as 1."""

    SCALE, BIAS = 1, 2
    VARIANTS = _LAYER
    ROWS = _LAYER_ROWS
    STATS = MEAN_INV

    def __init__(self, node):
        super().__init__(node)
        self.axis = int(node.attr("axis", -1))
        _stash(node)

    def infer(self, ctx: InferContext) -> None:
        _check_float(ctx, 0, 1, 2)
        shape = tuple(ctx.shape(0))
        r = len(shape)
        axis = _axis(ctx, self.axis, r)
        norm_shape = shape[axis:]
        for i in (self.SCALE, self.BIAS):
            if i is not None and ctx.has_input(i):
                s = tuple(ctx.shape(i))
                if len(s) > len(norm_shape) or any(
                        d not in (1, e) for d, e in zip(s[::-1], norm_shape[::-1])):
                    ctx.fail(f"input {i} of shape {list(s)} does not broadcast to the "
                             f"normalised shape {list(norm_shape)}")
        ctx.set_output(0, ctx.dtype(0), shape)
        stat_shape = shape[:axis] + (1,) * (r - axis)
        for i in (1, 2):
            if i < self.node.n_outputs:
                ctx.set_output(i, F32, stat_shape)
        walk = split_axes(shape, set(range(axis, r)))
        cols = math.prod(norm_shape)
        # sets are rows; the scale index is the reduced index itself
        self._prepare(ctx, self.VARIANTS, walk, cols, (1, 0, int(walk[2][-1]), 1),
                      stats=self.STATS if self.node.n_outputs > 1 else NO_STATS,
                      param_shape=norm_shape, rows=self.ROWS)


class RMSNormalization(LayerNormalization):
    """y = x / sqrt(mean of x^2 + epsilon) * scale over the axes from ``axis`` on."""

    SCALE, BIAS = 1, None
    VARIANTS = _RMS
    ROWS = _RMS_ROWS
    STATS = NO_STATS


class BatchNormalization(_Norm):
    """Per channel (axis 1) of X (N, C, ...). Inference: y = (x - input_mean) * inv *
    scale + B with inv = 1 / sqrt(input_var + epsilon). Training mode (opset 14+): the
    batch's mean and population variance instead, and the optional outputs running_mean
    = input_mean * momentum + mean * (1 - momentum) (running_var alike). Opsets 6 to 8
    with spatial=0 have statistics per element of (C, D1, ...). Training outputs of
    opsets before 14 are not supported."""

    SCALE, BIAS, MEAN, VAR = 1, 2, 3, 4

    def __init__(self, node):
        super().__init__(node)
        self.momentum = float(node.attr("momentum", 0.9))
        self.training = node.opset >= 14 and int(node.attr("training_mode", 0)) != 0
        self.spatial = node.opset >= 9 or int(node.attr("spatial", 1)) != 0
        if node.n_outputs > 1 and not self.training:
            if node.opset >= 14:
                node.fail("outputs running_mean and running_var need training_mode=1")
            node.fail("training outputs before opset 14 are not supported",
                      ErrorKind.UNSUPPORTED)

    def infer(self, ctx: InferContext) -> None:
        _check_float(ctx, 0, 1, 2, 3, 4)
        shape = tuple(ctx.shape(0))
        if len(shape) < 2:
            ctx.fail(f"X must have rank 2 or more (N, C, ...), got shape {list(shape)}")
        n, rest = shape[0], math.prod(shape[1:])
        c = shape[1]
        spatial = rest // c if c else 0
        stat_shape = (c,) if self.spatial else shape[1:]
        sets = math.prod(stat_shape)
        for i in (1, 2, 3, 4):
            if math.prod(ctx.shape(i)) != sets:
                ctx.fail(f"input {i} of shape {list(ctx.shape(i))} should have "
                         f"{sets} elements (shape {list(stat_shape)})")
        ctx.set_output(0, ctx.dtype(0), shape)
        for i in (1, 2):
            if i < self.node.n_outputs:
                ctx.set_output(i, ctx.dtype(3 + i - 1), ctx.shape(3 + i - 1))
        if self.spatial:
            walk = (_arr(c), _arr(spatial), _arr(n, spatial), _arr(rest, 1))
        else:
            walk = (_arr(rest), _arr(1), _arr(n), _arr(rest))
        count = n * (spatial if self.spatial else 1)
        if self.training:
            self._prepare(ctx, _LAYER, walk, count, (sets, 1, 0, 0), stats=RUNNING,
                          stat_dt=compute_dtype(ctx.dtype(3)), momentum=self.momentum)
        else:
            self._prepare(ctx, None if self.spatial else _GIVEN, walk, count, (sets, 1, 0, 0))
            if self.spatial:
                p = ctx.prepared
                p.planes = (c, spatial, tuple(v.get(p.exact, p.parallel)
                                              for v in _GIVEN_PLANES[False]))
            vals = [ctx.value(i) for i in (1, 2, 3, 4)]
            if self.spatial and all(v is not None for v in vals):
                ctx.prepared.consts = vals

    def absorb_affine(self, prepared, stage, pos, values, shape) -> bool:
        """Fold a following per-channel scale or shift (normalization.channel_affine: Mul, Add, Sub,
        Div by one value per channel, or another BatchNormalization) into the scale and
        shift (fast mode, FusedEpilogue): y = x * s + t per channel, s and t composed in
        float64 from the statistics and rounded once; the node then runs with mean 0, var
        1, epsilon 0."""
        p = prepared
        if p.consts is None or p.narrow or p.stats != NO_STATS:
            return False
        st = channel_affine(stage, pos, values, shape, p.cdt)
        if st is None:
            return False
        if p.folded is None:
            scale, bias, mean, var = (np.asarray(a, dtype=np.float64).reshape(-1)
                                      for a in p.consts)
            s = scale / np.sqrt(var + self.epsilon)
            t = bias - mean * s
        else:
            s, t = p.folded[5:]
        s, t = s * st[0], t * st[0] + st[1]
        c = shape[1]
        prm = p.prm.copy()
        prm[_EPS] = 0
        p.folded = (s.astype(p.cdt), t.astype(p.cdt), np.zeros(c, p.cdt), np.ones(c, p.cdt),
                    prm, s, t)
        return True

    def absorb_relu(self, prepared) -> bool:
        """Apply a following Relu in the same pass (FusedEpilogue): inference with scale
        and bias per channel, not computed in a wider type; the same bits as the two nodes."""
        p = prepared
        if self.training or not self.spatial or p.narrow or p.scale is None or p.bias is None:
            return False
        p.planes = p.planes[:2] + (tuple(v.get(p.exact, p.parallel)
                                         for v in _GIVEN_PLANES[True]),)
        return True


class InstanceNormalization(_Norm):
    """Per instance and channel of X (N, C, ...): scale and B have one value per channel."""

    SCALE, BIAS = 1, 2

    def infer(self, ctx: InferContext) -> None:
        _check_float(ctx, 0, 1, 2)
        shape = tuple(ctx.shape(0))
        if len(shape) < 2:
            ctx.fail(f"input must have rank 2 or more (N, C, ...), got shape {list(shape)}")
        c, spatial = shape[1], math.prod(shape[2:])
        for i in (1, 2):
            if math.prod(ctx.shape(i)) != c:
                ctx.fail(f"input {i} of shape {list(ctx.shape(i))} should have {c} elements")
        ctx.set_output(0, ctx.dtype(0), shape)
        walk = (_arr(shape[0] * c), _arr(spatial), _arr(spatial), _arr(1))
        self._prepare(ctx, _LAYER, walk, spatial, (max(c, 1), 1, 0, 0))


class GroupNormalization(_Norm):
    """Per instance and group of C / num_groups channels of X (N, C, ...). Opset 18:
    scale and bias have one value per group; opset 21: one per channel (and stash_type)."""

    SCALE, BIAS = 1, 2

    def __init__(self, node):
        super().__init__(node)
        if node.attr("num_groups") is None:
            node.fail("attribute 'num_groups' is required")
        self.groups = int(node.attr("num_groups"))
        if self.groups <= 0:
            node.fail(f"num_groups must be positive, got {self.groups}")
        self.per_channel = node.opset >= 21
        if self.per_channel:
            _stash(node)

    def infer(self, ctx: InferContext) -> None:
        _check_float(ctx, 0, 1, 2)
        shape = tuple(ctx.shape(0))
        g = self.groups
        if len(shape) < 2 or shape[1] % g:
            ctx.fail(f"the channels of X (shape {list(shape)}) do not split into {g} groups")
        c, spatial = shape[1], math.prod(shape[2:])
        per = c // g
        want = c if self.per_channel else g
        for i in (1, 2):
            if math.prod(ctx.shape(i)) != want:
                ctx.fail(f"input {i} of shape {list(ctx.shape(i))} should have {want} elements")
        ctx.set_output(0, ctx.dtype(0), shape)
        walk = (_arr(shape[0] * g), _arr(per * spatial), _arr(per, spatial), _arr(spatial, 1))
        cw = (g, per, 1, 0) if self.per_channel else (g, 1, 0, 0)
        self._prepare(ctx, _LAYER, walk, per * spatial, cw)


class LpNormalization(_Norm):
    """x / ||x||_p along ``axis`` (p = 1 or 2); 0 where the norm is 0."""

    def __init__(self, node):
        super().__init__(node)
        self.axis = int(node.attr("axis", -1))
        self.p = int(node.attr("p", 2))
        if self.p not in (1, 2):
            node.fail(f"p must be 1 or 2, got {self.p}")

    def infer(self, ctx: InferContext) -> None:
        _check_float(ctx, 0)
        shape = tuple(ctx.shape(0))
        axis = _axis(ctx, self.axis, len(shape))
        ctx.set_output(0, ctx.dtype(0), shape)
        self._prepare(ctx, _LP[self.p], split_axes(shape, {axis}), shape[axis])


class MeanVarianceNormalization(_Norm):
    """(x - mean) / (sqrt(var) + 1e-9) with the statistics over ``axes`` (default 0, 2, 3)."""

    def __init__(self, node):
        super().__init__(node)
        self.axes = [int(a) for a in node.attr("axes", [0, 2, 3])]

    def infer(self, ctx: InferContext) -> None:
        _check_float(ctx, 0)
        shape = tuple(ctx.shape(0))
        r = len(shape)
        axes = {_axis(ctx, a, r) for a in self.axes}
        if len(axes) != len(self.axes):
            ctx.fail(f"axes {self.axes} repeat an axis")
        ctx.set_output(0, ctx.dtype(0), shape)
        count = math.prod(shape[a] for a in axes)
        self._prepare(ctx, _MVN, split_axes(shape, axes), count, eps=1e-9)


def channel_affine(stage: OpKernel, pos: int, values, shape, dtype):
    """(s, t), float64 per channel (axis 1 of ``shape``), with stage(y) = y * s + t, for a
    stage that is BatchNormalization in inference (values: its four statistics) or Mul,
    Add, Sub or Div (opset 7 on, y at input ``pos``; values: the other operand) by a
    constant of type ``dtype`` with one value per channel; else None."""
    node = stage.node
    if len(shape) < 2 or any(v is None for v in values):
        return None
    c = shape[1]
    if isinstance(stage, BatchNormalization):
        if stage.training or not stage.spatial or len(values) != 4 or \
                any(np.size(v) != c for v in values):
            return None
        scale, bias, mean, var = (np.asarray(v, dtype=np.float64).reshape(-1) for v in values)
        s = scale / np.sqrt(var + stage.epsilon)
        return s, bias - mean * s
    if not isinstance(stage, (Mul, Add, Sub, Div)) or node.opset < 7 or len(values) != 1 \
            or (pos == 1 and isinstance(stage, (Sub, Div))):
        return None
    v = np.asarray(values[0])
    if v.dtype != dtype or v.ndim > len(shape):
        return None
    vs = (1,) * (len(shape) - v.ndim) + v.shape
    if vs[0] != 1 or vs[1] not in (1, c) or any(d != 1 for d in vs[2:]):
        return None
    v = np.broadcast_to(v.reshape(-1).astype(np.float64), (c,))
    one, zero = np.ones(c), np.zeros(c)
    if isinstance(stage, Mul):
        return v, zero
    if isinstance(stage, Div):
        return 1.0 / v, zero
    return (one, v) if isinstance(stage, Add) else (one, -v)
