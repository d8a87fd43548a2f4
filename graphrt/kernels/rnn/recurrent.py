"""RNN, GRU and LSTM (opsets 7+; layout from 14).

With x_t the input at step t, h the hidden state, W/R/Wb/Rb the direction's weights and
biases split by gate (activations f, g, h in the order the attribute lists them, defaults
f = Sigmoid, g = h = Tanh, RNN: f = Tanh):

    RNN   h = f(x_t W^T + h R^T + Wb + Rb)
    GRU   z = f(x Wz^T + h Rz^T + Wbz + Rbz),  r = f(x Wr^T + h Rr^T + Wbr + Rbr)
          n = g(x Wn^T + (r * h) Rn^T + Rbn + Wbn)       (linear_before_reset = 0)
          n = g(x Wn^T + r * (h Rn^T + Rbn) + Wbn)       (linear_before_reset = 1)
          h = (1 - z) * n + z * h
    LSTM  i = f(x Wi^T + h Ri^T + Wbi + Rbi + Pi * c)
          f = f(... forget gate ... + Pf * c)            (1 - i with input_forget)
          c = f * c + i * g(x Wc^T + h Rc^T + Wbc + Rbc)
          o = f(x Wo^T + h Ro^T + Wbo + Rbo + Po * c),   h = o * h(c)

Gate pre-activations are clamped to [-clip, clip] when clip is given. "reverse" walks the
steps backwards, "bidirectional" does both (direction index 0 forward, 1 reverse). With
sequence_lens, batch entry b runs its first sequence_lens[b] steps only: Y is 0 after them
and Y_h (Y_c) hold the state after the last step run.

x W^T for all steps is one product (gemm/product.py). A small recurrence (few batch entries,
or R in L2) then runs fused: one compiled call for the whole sequence, one task per
(direction, batch entry), each step making that task's h R^T itself and finishing its gates.
A large one takes h R^T for every task as one product per step (R^T reused over the batch)
and finishes the gates in one call per step. Both make each element of h R^T with the same
chain of operations (k ascending, as the GEMM does), so the two paths give the same bits. R
is transposed once per plan when it is a constant, else once per run. The exact variant takes
its tanh, sigmoid, expm1 and softplus from graphrt's own exactmath (no libm, no FMA) and writes
NaN results canonically. float16 and bfloat16 are computed in float32.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit, prange

from ...aligned import ALIGN, aligned_copy, aligned_empty
from ...errors import ErrorKind
from ..core.base import Calls, InferContext, OpKernel, RunContext, make_calls, scratch
from ..core.broadcast import canonical_nans
from ..core.floats import FLOATS, NARROW, compute_dtype, widen
from ..core.held import held_buffer
from ..core.jit import Variants
from ..gemm.micro_ir import GEMV, SOURCE_TAG, gemv, kernels
from ..gemm.microkernel import nr_of, pack_panels, unpack_panels
from ..gemm.product import Product, own_tiles
from ..math import exactmath, vecmath

EXACT = False
ACT = TANH = SIGMOID = None
GATES = 1
# bound per family, chosen when the plan is made (each a path of its own, so that a model
# compiles the loops of its own node only): LSTM's peepholes and coupled input and forget
# gates (input_forget), GRU's linear_before_reset
PEEPHOLES = COUPLED = LBR = False
# work per step from which a step's product runs in parallel: a recurrence launches one
# parallel region per step, and below this size the launches cost more than they save
STEP_PARALLEL = 1 << 22
# a recurrence with at most this many batch entries, or with R^T of at most this many
# elements per direction (in L2), runs fused: one call per sequence, a task per (direction,
# batch entry) making its own h R^T; larger ones reuse R^T over the batch in one product
# per step (module constants so that tests can force either path)
FUSED_BATCH = 4
FUSED_WEIGHTS = 1 << 18
# multiply-adds of a fused task's whole sequence from which tasks run in parallel
FUSED_PARALLEL = 1 << 17
# a fused recurrence over at most this many rows of X (steps x batch) makes x W^T itself
# too (a product call costs more than these few rows; streaming models run one step a call)
INLINE_ROWS = 4


# name -> (code, default alpha, default beta, uses alpha, uses beta)
_ACTIVATIONS = {
    "relu": (0, 0.0, 0.0, False, False), "tanh": (1, 0.0, 0.0, False, False),
    "sigmoid": (2, 0.0, 0.0, False, False), "affine": (3, 1.0, 0.0, True, True),
    "leakyrelu": (4, 0.01, 0.0, True, False), "thresholdedrelu": (5, 1.0, 0.0, True, False),
    "scaledtanh": (6, 1.0, 1.0, True, True), "hardsigmoid": (7, 0.2, 0.5, True, True),
    "elu": (8, 1.0, 0.0, True, False), "softsign": (9, 0.0, 0.0, False, False),
    "softplus": (10, 0.0, 0.0, False, False),
}


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _act(code, alpha, beta, x):
    if code == 1:
        return np.tanh(x)
    if code == 2:
        return 1 / (1 + np.exp(-x))
    if code == 0:
        return x if x > 0 else 0.0
    if code == 3:
        return alpha * x + beta
    if code == 4:
        return x if x >= 0 else alpha * x
    if code == 5:
        return x if x > alpha else 0.0
    if code == 6:
        return alpha * np.tanh(beta * x)
    if code == 7:
        return max(0.0, min(1.0, alpha * x + beta))
    if code == 8:
        return x if x >= 0 else alpha * (np.exp(x) - 1)
    if code == 9:
        return x / (1 + abs(x))
    return np.log1p(np.exp(x))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _act_exact(code, alpha, beta, x):
    """_act with graphrt's own transcendental functions (exactmath): exact mode."""
    if code == 1:
        return exactmath.tanh(x)
    if code == 2:
        return exactmath.sigmoid(x)
    if code == 6:
        return alpha * exactmath.tanh(beta * x)
    if code == 8:
        return x if x >= 0 else alpha * exactmath.expm1(x)
    if code == 10:
        return exactmath.softplus(x)
    return _act(code, alpha, beta, x)     # the others use + - * / and compares only


def _apply(code, alpha, beta, clip, a, lo, hi):
    """a[lo:hi] = f(clip(a[lo:hi])) for the activation of ``code``: one loop per activation,
    so that tanh and the logistic function (the defaults) vectorise in fast mode (TANH and
    SIGMOID: vecmath's there, exactmath's in exact mode). The other activations (ACT) only
    where GENERIC (bound per form, chosen by the node's activations): compiled, they cost
    about a third of a second that models with the defaults need not pay."""
    v = a[lo:hi]
    if clip > 0:
        for j in range(v.size):
            x = v[j]
            v[j] = clip if x > clip else (-clip if x < -clip else x)
    if code == 1:
        for j in range(v.size):
            v[j] = TANH(v[j])
    elif code == 2:
        for j in range(v.size):
            v[j] = SIGMOID(v[j])
    elif GENERIC:
        for j in range(v.size):
            v[j] = ACT(code, alpha, beta, v[j])


GENERIC = True
DEFAULT_CODES = (1, 2)      # tanh and the logistic function: _apply's loops of their own


def _steps(x, wt, xw, rt, hr, hn, b, p, lens, y, h, c, rh, geo, s0, s1, phase, codes, alphas,
           betas, has_y, clip, tasks, fused, kt):
    """Steps s0..s1-1 of every (direction d, batch entry e) task. State h, c and the gate
    rows hr are (d, e)-ordered. ``fused``: each task makes its own h R^T (and GRU's
    (r * h) Rn^T) from rt = R^T, (dirs, hidden, G * hidden), so a whole sequence is one call
    with one task per (d, e); else hr (and hn) were made by a product over all tasks before
    this call of one step. x W^T is in xw, or made here from x and wt = W^T, (dirs, input
    size, G * hidden), when wt is not empty. geo: [seq, batch, hidden, dirs, x row stride
    over t, over b, y strides (t, d, b), reverse, input size] (peepholes, coupled gates and
    linear_before_reset are the family's PEEPHOLES, COUPLED and LBR). GRU without
    linear_before_reset runs in two phases: 0 computes z and r (kept in hr) and r * h (into
    rh), 1 the rest; fused, both in one step."""
    batch = geo[1]
    hs = geo[2]
    dirs = geo[3]
    xt, xb = geo[4], geo[5]
    yt, yd, yb = geo[6], geo[7], geo[8]
    reverse = geo[9] != 0
    seq = geo[0]
    isz = geo[10]
    g = GATES * hs
    for task in prange(tasks):
        d = task // batch
        e = task - d * batch
        steps = lens[e]
        bo = d * 2 * g
        go = task * g
        so = task * hs
        ro = d * hs * g
        f1, f2, f3 = codes[3 * d], codes[3 * d + 1], codes[3 * d + 2]
        a1, a2, a3 = alphas[3 * d], alphas[3 * d + 1], alphas[3 * d + 2]
        b1, b2, b3 = betas[3 * d], betas[3 * d + 1], betas[3 * d + 2]
        for s in range(s0, min(s1, steps)):
            t = steps - 1 - s if reverse and (dirs == 1 or d == 1) else s
            xo = (d * seq * batch) * g + (t * xt + e * xb) * g
            if wt.size:
                gemv(kt[GEMV], x, (t * xt + e * xb) * isz, 1, wt, d * isz * g, g, xw, xo, isz, g)
            if fused:
                gemv(kt[GEMV], h, so, 1, rt, ro, g, hr, go, hs, g if GATES != 3 or LBR else 2 * hs)
            # the loops index slices from 0: numba then knows no index is negative and
            # leaves out its wrap-around test, which kept them scalar (0.6 µs a step)
            gates = hr[go:go + g]
            xg = xw[xo:xo + g]
            bw = b[bo:bo + g]
            br = b[bo + g:bo + 2 * g]
            hh = h[so:so + hs]
            if GATES == 1:
                for j in range(hs):
                    gates[j] = xg[j] + bw[j] + br[j] + gates[j]
                _apply(f1, a1, b1, clip, hr, go, go + hs)
                for j in range(hs):         # (not hh[:] = gates: see micro_int.unpack)
                    hh[j] = gates[j]
            elif GATES == 3:
                rg = gates[hs:2 * hs]
                if phase == 0:
                    for j in range(2 * hs):
                        gates[j] = xg[j] + bw[j] + br[j] + gates[j]
                    _apply(f1, a1, b1, clip, hr, go, go + 2 * hs)
                    if not LBR:
                        rr = rh[so:so + hs]
                        for j in range(hs):
                            rr[j] = rg[j] * hh[j]
                        if not fused:
                            continue        # the caller makes (r * h) Rn^T, then phase 1
                        gemv(kt[GEMV], rh, so, 1, rt, ro + 2 * hs, g, hn, so, hs, hs)
                xn, bwn, brn = xg[2 * hs:], bw[2 * hs:], br[2 * hs:]
                if LBR:                     # n's pre-activation where h Rn^T was
                    n, no = hr, go + 2 * hs
                    nv = gates[2 * hs:]
                    for j in range(hs):
                        wn = xn[j] + bwn[j]
                        nv[j] = wn + rg[j] * (nv[j] + brn[j])
                else:                       # ... where (r * h) Rn^T was
                    n, no = hn, so
                    nv = hn[so:so + hs]
                    for j in range(hs):
                        nv[j] = xn[j] + nv[j] + brn[j] + bwn[j]
                _apply(f2, a2, b2, clip, n, no, no + hs)
                for j in range(hs):
                    z = gates[j]
                    hh[j] = (1 - z) * nv[j] + z * hh[j]
            else:
                # gates i, o, f, c at go, go + hs, go + 2 hs, go + 3 hs of hr
                ig, og, fg, cg = gates[:hs], gates[hs:2 * hs], gates[2 * hs:3 * hs], gates[3 * hs:]
                cs = c[so:so + hs]
                pv = p[d * 3 * hs:(d + 1) * 3 * hs]
                for j in range(g):
                    gates[j] = xg[j] + bw[j] + br[j] + gates[j]
                if PEEPHOLES:
                    pi, pf = pv[:hs], pv[2 * hs:]
                    for j in range(hs):
                        ig[j] = ig[j] + pi[j] * cs[j]
                        fg[j] = fg[j] + pf[j] * cs[j]
                _apply(f1, a1, b1, clip, hr, go, go + hs)
                if COUPLED:
                    for j in range(hs):
                        fg[j] = 1 - ig[j]
                else:
                    _apply(f1, a1, b1, clip, hr, go + 2 * hs, go + 3 * hs)
                _apply(f2, a2, b2, clip, hr, go + 3 * hs, go + g)
                for j in range(hs):
                    cc = fg[j] * cs[j] + ig[j] * cg[j]
                    cs[j] = cc
                    cg[j] = cc                  # for h(c) below
                if PEEPHOLES:
                    po = pv[hs:2 * hs]
                    for j in range(hs):
                        og[j] = og[j] + po[j] * cs[j]
                _apply(f1, a1, b1, clip, hr, go + hs, go + 2 * hs)
                # (clip - clip: 0 in clip's type, not a second specialisation of _apply; NaN
                # for an infinite clip, which clips nothing either)
                _apply(f3, a3, b3, clip - clip, hr, go + 3 * hs, go + g)
                for j in range(hs):
                    hh[j] = og[j] * cg[j]
            if has_y:
                yo = t * yt + d * yd + e * yb
                yv = y[yo:yo + hs]
                for j in range(hs):
                    yv[j] = hh[j]


# by GENERIC (the node has an activation other than DEFAULT_CODES)
_APPLY = {generic: exactmath.FastExact(
    Variants(_apply, "rnn_apply" + suffix, ACT=_act, TANH=vecmath.vtanh,
             SIGMOID=vecmath.vsigmoid, GENERIC=generic),
    Variants(_apply, "rnn_apply_exact" + suffix, ACT=_act_exact, TANH=exactmath.tanh,
             SIGMOID=exactmath.sigmoid, GENERIC=generic))
    for generic, suffix in ((False, ""), (True, "_generic"))}


def _variants(name: str, gates: int):
    """The step kernels of one recurrence: a function of (GENERIC, PEEPHOLES, COUPLED, LBR)
    giving the fast and exact families of that path (made once, when a plan first asks)."""
    @functools.lru_cache(maxsize=None)
    def family(generic: bool, peepholes: bool, coupled: bool, lbr: bool):
        suffix = "".join(tag for on, tag in ((generic, "_generic"), (peepholes, "_peep"),
                                             (coupled, "_coupled"), (lbr, "_lbr")) if on)
        # (IR: micro_ir's file tag, so that its call convention's edits rename the kernels)
        paths = dict(GATES=gates, PEEPHOLES=peepholes, COUPLED=coupled, LBR=lbr, IR=SOURCE_TAG)
        return exactmath.FastExact(
            Variants(_steps, name + suffix, parallel=True, _apply=_APPLY[generic].get(False),
                     **paths),
            Variants(_steps, name + "_exact" + suffix, parallel=True,
                     _apply=_APPLY[generic].get(True), **paths))
    return family


_RNN = _variants("rnn_step", 1)
_GRU = _variants("gru_step", 3)
_LSTM = _variants("lstm_step", 4)


class _Recurrent(OpKernel):
    tile_products = True
    supports_exact = True
    GATES = 1
    DEFAULTS = ("tanh",)
    VARIANTS = _RNN

    def __init__(self, node):
        super().__init__(node)
        a = node.attr
        hidden = a("hidden_size")
        self.hidden = int(hidden) if hidden is not None else None
        direction = a("direction", "forward")
        self.direction = direction.decode() if isinstance(direction, bytes) else direction
        if self.direction not in ("forward", "reverse", "bidirectional"):
            node.fail(f"direction {self.direction!r} is not forward, reverse or bidirectional")
        self.dirs = 2 if self.direction == "bidirectional" else 1
        self.layout = int(a("layout", 0)) if node.opset >= 14 else 0
        clip = a("clip")
        self.clip = float(clip) if clip is not None else 0.0
        self.lbr = int(a("linear_before_reset", 0))
        self.coupled = int(a("input_forget", 0))
        names = a("activations")
        k = len(self.DEFAULTS)
        names = [n.decode() if isinstance(n, bytes) else n for n in names] if names \
            else list(self.DEFAULTS) * self.dirs
        if len(names) != k * self.dirs:
            node.fail(f"{len(names)} activations given, {k * self.dirs} expected")
        alphas = list(a("activation_alpha") or [])
        betas = list(a("activation_beta") or [])
        codes, al, be = [], [], []
        for name in names:
            spec = _ACTIVATIONS.get(name.lower())
            if spec is None:
                node.fail(f"activation {name!r} is not supported", ErrorKind.UNSUPPORTED)
            code, alpha, beta, uses_a, uses_b = spec
            if uses_a and alphas:
                alpha = alphas.pop(0)
            if uses_b and betas:
                beta = betas.pop(0)
            codes.append(code)
            al.append(alpha)
            be.append(beta)
        pad = 3 - k       # the kernel reads three activations per direction
        self.codes = np.array(sum((codes[i * k:(i + 1) * k] + [1] * pad
                                   for i in range(self.dirs)), []), dtype=np.int64)
        self.alphas = np.array(sum((al[i * k:(i + 1) * k] + [0.0] * pad
                                    for i in range(self.dirs)), []), dtype=np.float64)
        self.betas = np.array(sum((be[i * k:(i + 1) * k] + [0.0] * pad
                                   for i in range(self.dirs)), []), dtype=np.float64)
        self.generic = any(int(c) not in DEFAULT_CODES for c in self.codes)
        self._taken: dict = {}      # {1 or 2: (name, stand-in, layout)}: see take_constant

    # -- constant weights held once (passes/basic.py pack_weights) ------------------------
    def take_constant(self, i: int, value: np.ndarray, name: str, exact: bool) -> bool:
        """W (input 1) as the per-direction panels its product reads, where graphrt's tiles
        run it, and R (input 2) as R^T [dirs, hidden, G * hidden], the layouts every plan
        made of them before: float32 and float64 (which are their own compute type)."""
        if i not in (1, 2) or value.ndim != 3 or value.dtype not in (np.float32, np.float64):
            return False
        if i == 1:
            if not own_tiles(value.dtype, exact):
                return False
            layout = _panels_of(value)
        else:
            layout = aligned_copy(value.transpose(0, 2, 1), value.dtype).reshape(-1)
        stand_in = np.broadcast_to(np.full((), np.nan, value.dtype), value.shape)
        self._taken[i] = (name, stand_in, layout)
        return True

    def taken_constants(self) -> dict:
        out = {}
        for i, (name, stand_in, layout) in self._taken.items():
            dirs, rows, cols = stand_in.shape
            wt = self._w_t(layout, dirs, cols, rows) if i == 1 else \
                layout.reshape(dirs, cols, rows)
            out[i] = (name, np.ascontiguousarray(wt.transpose(0, 2, 1)))
        return out

    def _w_t(self, w: np.ndarray, dirs: int, k: int, n: int) -> np.ndarray:
        """W^T [dirs, k = input, n = G * hidden]: of the model's W, or of the panels of a
        taken one (W^T of each direction laid out by _panels_of)."""
        if 1 not in self._taken:
            return w.transpose(0, 2, 1)
        return np.stack([unpack_panels(p, k, n) for p in np.split(w, dirs)])

    def infer(self, ctx: InferContext) -> None:
        for i, (_name, stand_in, _layout) in self._taken.items():
            ctx.supply(i, stand_in.dtype, stand_in.shape, stand_in)
        dt = ctx.same_dtype(0, 1, 2, 3, 5, 6, 7)
        if dt not in FLOATS:
            ctx.fail(f"element type {dt} is not supported", ErrorKind.UNSUPPORTED)
        xs, ws, rs = (tuple(ctx.shape(i)) for i in range(3))
        if len(xs) != 3:
            ctx.fail(f"X must be 3-D, got shape {list(xs)}")
        seq, batch, isz = (xs[1], xs[0], xs[2]) if self.layout else xs
        dirs, g = self.dirs, self.GATES
        hs = self.hidden if self.hidden is not None else (rs[-1] if rs else 0)
        gh = g * hs
        want = {1: (dirs, gh, isz), 2: (dirs, gh, hs), 3: (dirs, 2 * gh),
                5: (batch, dirs, hs) if self.layout else (dirs, batch, hs), 7: (dirs, 3 * hs)}
        want[6] = want[5]
        for i, shape in want.items():
            if ctx.has_input(i) and tuple(ctx.shape(i)) != shape:
                ctx.fail(f"input {i} of shape {list(ctx.shape(i))} should be {list(shape)}")
        if ctx.has_input(4) and (ctx.dtype(4) != np.int32 or tuple(ctx.shape(4)) != (batch,)):
            ctx.fail(f"sequence_lens must be int32 of shape [{batch}]")
        n_out = self.node.n_outputs
        if n_out > 0:
            ctx.set_output(0, dt, (batch, seq, dirs, hs) if self.layout else (seq, dirs, batch, hs))
        for i in range(1, min(n_out, 3 if self.GATES == 4 else 2)):
            ctx.set_output(i, dt, want[5])
        work = compute_dtype(dt)
        rows = seq * batch
        if self.layout:
            xt, xb = 1, seq
            yt, yd, yb = dirs * hs, hs, seq * dirs * hs
        else:
            xt, xb = batch, 1
            yt, yd, yb = dirs * batch * hs, batch * hs, hs
        geo = [seq, batch, hs, dirs, xt, xb, yt, yd, yb, int(self.direction != "forward"), isz]
        tasks = dirs * batch
        # h R^T for every task: A = the (d, e)-ordered state, B = R^T, which run makes once
        # as a (dirs, hidden, G * hidden) array so each step's product reads rows
        state_off = np.arange(dirs, dtype=np.int64) * (batch * hs)
        r_off = np.arange(dirs, dtype=np.int64) * (gh * hs)
        recur = Product(work, batch, gh, hs, (hs, 1), (gh, 1), state_off, r_off, exact=ctx.exact,
                        min_parallel=STEP_PARALLEL)
        # GRU: (r * h) Rn^T, Rn^T being columns 2H..3H of R^T
        reset = Product(work, batch, hs, hs, (hs, 1), (gh, 1), state_off, r_off + 2 * hs,
                        exact=ctx.exact, min_parallel=STEP_PARALLEL) \
            if self.GATES == 3 and not self.lbr else None
        fused = batch <= FUSED_BATCH or hs * gh <= FUSED_WEIGHTS
        parallel = tasks > 1 and (seq * gh * hs >= FUSED_PARALLEL if fused
                                  else tasks * gh >= STEP_PARALLEL >> 6)
        lstm, gru = self.GATES == 4, self.GATES == 3
        fn = type(self).VARIANTS(self.generic, ctx.has_input(7) and lstm,
                                 bool(self.coupled) and lstm,
                                 bool(self.lbr) and gru).get(ctx.exact, parallel)
        # R^T once per plan when R is a constant (the session's own when it took R)
        if 2 in self._taken:
            rt = self._taken[2][2]
        else:
            r = ctx.value(2)
            rt = None if r is None else aligned_copy(r.transpose(0, 2, 1), work).reshape(-1)
        taken_w = self._taken[1][2] if 1 in self._taken else None
        w = ctx.value(1) if taken_w is None else taken_w     # (taken: panels, read below)
        wt = aligned_copy(self._w_t(w, dirs, isz, gh), work).reshape(-1) \
            if fused and rows <= INLINE_ROWS and w is not None else np.zeros(0, work)
        # x W^T for every direction: A = X rows, B[k, j] = W[d, j, k]; a constant W laid
        # out once per plan as the tiles' panels (read transposed, B was packed every run:
        # 2.3x the product's time), or the session's own when it took W
        offa = np.zeros(dirs, np.int64)
        wp = None
        if w is not None and not wt.size and own_tiles(work, ctx.exact):
            wp = w if taken_w is not None else _panels_of(w, work)
            nr = nr_of(np.dtype(work).itemsize)
            product = Product(work, rows, gh, isz, (isz, 1), (nr, isz), offa,
                              np.arange(dirs, dtype=np.int64) * (wp.size // dirs),
                              exact=ctx.exact, panels=True)
        else:
            product = Product(work, rows, gh, isz, (isz, 1), (1, isz), offa,
                              np.arange(dirs, dtype=np.int64) * (gh * isz), exact=ctx.exact)
        # one scratch block per run: x W^T, the state h and c, the gate rows, GRU's two more
        g3 = self.GATES == 3 and not self.lbr
        parts = (dirs * rows * gh, tasks * hs, tasks * hs, tasks * gh, tasks * hs * g3,
                 tasks * hs * g3)
        # each part starting on a cache line (ALIGN bytes), the block itself aligned: a
        # vector's loads and stores that straddle two lines cost the step's product up to
        # twice its time
        line = ALIGN // np.dtype(work).itemsize
        starts = np.cumsum((0,) + tuple(-(-n // line) * line for n in parts)).tolist()
        bounds = [(starts[i], starts[i] + n) for i, n in enumerate(parts)] + [starts[-1]]
        # a taken W read by another product (GRAPHRT_GEMM changed since): W again, per plan
        w_read = np.ascontiguousarray(self._w_t(w, dirs, isz, gh).transpose(0, 2, 1), work) \
            .reshape(-1) if taken_w is not None and wp is None and not wt.size else None
        fixed = (np.zeros(dirs * 2 * gh, work), np.full(batch, seq, np.int32), w_read)
        ctx.prepared = (product, recur, reset, np.array(geo, dtype=np.int64), work, tasks, fn,
                        fused, rt, wt, wp, bounds, fixed)

    def jit_calls(self, ctx: RunContext):
        """The run's calls, its scratch held by the run state; None for float16 and
        bfloat16 (widened first), with sequence_lens (checked in Python), and where a
        product is the BLAS's or R is not a constant (Python around them)."""
        if ctx.flat_in[0].dtype in NARROW or self._lens(ctx) is not None:
            return None
        return self._calls(ctx, lambda dt, n: held_buffer(dt, n, ctx.held, "rnn"),
                           ctx.held).jit()

    def run(self, ctx: RunContext) -> None:
        make_calls(self._calls(ctx, lambda dt, n: scratch(ctx, dt, n), None))

    @staticmethod
    def _lens(ctx):
        flat = ctx.flat_in
        return flat[4] if len(flat) > 4 and flat[4] is not None else None

    def _calls(self, ctx: RunContext, buffer, holder):
        """The recurrence as Calls (Python ones: the BLAS's products, R transposed per run,
        conversions from and to float16, Y zeroed past sequence_lens); scratch from
        ``buffer(dtype, shape)``, the products' kept in ``holder``. Inputs are widened and
        sequence_lens checked as the calls are made."""
        product, recur, reset, geo, work, tasks, fn, fused, r, wt, wp, bounds, fixed = \
            ctx.prepared
        zeros, full, w_read = fixed
        calls = Calls()
        python = calls.python

        def multiply(prod, a, bmat, out):
            call = prod.call_of(a, bmat, out, holder=holder)
            if call is None:
                python(prod, a, bmat, out)
            else:
                calls.append(call)

        block = buffer(work, (bounds[-1],))
        xw, h, c, hr, hn, rh = (block[lo:hi] for lo, hi in bounds[:6])
        seq, batch, hs, dirs = (int(v) for v in geo[:4])
        g = self.GATES * hs
        flat = ctx.flat_in
        x = widen(ctx, flat[0], work)
        # (W^T, or W's panels, made per plan)
        w = None if wt.size else wp if wp is not None else w_read if w_read is not None \
            else widen(ctx, flat[1], work)
        if r is None:
            r = buffer(work, (dirs * hs * g,))
            python(np.copyto, r.reshape(dirs, hs, g), ctx.inputs[2].transpose(0, 2, 1))
        b = self._optional(ctx, 3, work, zeros)
        p = self._optional(ctx, 7, work, zeros[:0])
        lens = self._lens(ctx)
        if lens is None:
            lens = full
        elif lens.size and (lens.min() < 0 or lens.max() > seq):
            ctx.node.fail(f"sequence_lens must lie in [0, {seq}]", ErrorKind.INVALID_INPUT)
        if not wt.size:
            multiply(product, x, w, xw)
        # the state, (direction, batch entry, hidden) ordered whatever the layout
        for i, state in ((5, h), (6, c)):
            src = ctx.flat_in[i] if len(ctx.flat_in) > i else None
            if src is None:
                src = zeros[:0]
            if src.dtype == work:
                calls.append((_states, (src, state, dirs, batch, hs, self.layout, True)))
            else:
                python(np.copyto, state.reshape(dirs, batch, hs),
                       ctx.inputs[i].transpose(1, 0, 2) if self.layout else ctx.inputs[i],
                       "unsafe")
        y = ctx.flat_out[0] if len(ctx.flat_out) > 0 else None
        ys = y if y is None or y.dtype == work else buffer(work, (y.size,))
        if ys is not None and lens.size and lens.min() < seq:
            python(ys.fill, 0)
        if not hn.size:
            hn = rh = hr
        y_arg = ys if ys is not None else hr[:0]
        clip = work.type(self.clip)
        consts = (self.codes, self.alphas, self.betas, ys is not None, clip, tasks)
        kt = kernels(work, ctx.exact)       # its one-row product, GEMV
        if fused:
            calls.append((fn, (x, wt, xw, r, hr, hn, b, p, lens, y_arg, h, c, rh, geo, 0, seq,
                               0, *consts, True, kt)))
        else:
            for s in range(seq):
                multiply(recur, h, r, hr)
                calls.append((fn, (x, wt, xw, r, hr, hn, b, p, lens, y_arg, h, c, rh, geo, s,
                                   s + 1, 0, *consts, False, kt)))
                if reset is not None:
                    multiply(reset, rh, r, hn)
                    calls.append((fn, (x, wt, xw, r, hr, hn, b, p, lens, y_arg, h, c, rh, geo,
                                       s, s + 1, 1, *consts, False, kt)))
        if ys is not None and ys is not y:
            python(np.copyto, y, ys, "unsafe")
        for i, state in ((1, h), (2, c)):
            out = ctx.flat_out[i] if len(ctx.flat_out) > i else None
            if out is None:
                continue
            if out.dtype == work:
                calls.append((_states, (state, out, dirs, batch, hs, self.layout, False)))
            else:
                view = ctx.outputs[i].transpose(1, 0, 2) if self.layout else ctx.outputs[i]
                python(np.copyto, view, state.reshape(dirs, batch, hs), "unsafe")
        if ctx.exact:                       # NaN results as the canonical quiet NaN
            for out in ctx.flat_out:
                if out is not None and out.dtype.kind == "f" and out.dtype.itemsize >= 4:
                    calls.append((canonical_nans, (out,)))
        return calls

    @staticmethod
    def _optional(ctx, i, work, zeros):
        """Input i in the work type, ``zeros`` when it is absent."""
        if len(ctx.flat_in) > i and ctx.flat_in[i] is not None:
            return widen(ctx, ctx.flat_in[i], work)
        return zeros


def _panels_of(w: np.ndarray, dtype=None) -> np.ndarray:
    """W [dirs, G * hidden, input] as the micro-kernel's panels of each direction's W^T, one
    after another (x W^T's B)."""
    dtype = w.dtype if dtype is None else dtype
    panels = [pack_panels(np.asarray(w[d]).T, dtype) for d in range(w.shape[0])]
    return np.concatenate(panels, out=aligned_empty(len(panels) * panels[0].size, dtype))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _states(src, dst, dirs, batch, hs, layout, inward):
    """Copies between a state (direction, batch entry, hidden) ordered and the same values as
    an input or output is laid out ((batch entry, direction, hidden) for layout 1): inward,
    dst (the state) from src (the input; zeros when src is empty); else dst (the output)
    from src (the state)."""
    for d in range(dirs):
        for e in range(batch):
            so = (d * batch + e) * hs
            lo = ((e * dirs + d) if layout else (d * batch + e)) * hs
            if not inward:
                for j in range(hs):
                    dst[lo + j] = src[so + j]
            elif src.size:
                for j in range(hs):
                    dst[so + j] = src[lo + j]
            else:
                for j in range(hs):
                    dst[so + j] = 0


class RNN(_Recurrent):
    pass


class GRU(_Recurrent):
    GATES = 3
    DEFAULTS = ("sigmoid", "tanh")
    VARIANTS = _GRU


class LSTM(_Recurrent):
    GATES = 4
    DEFAULTS = ("sigmoid", "tanh", "tanh")
    VARIANTS = _LSTM
