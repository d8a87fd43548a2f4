"""The newer attention-like operators: CausalConvWithState and LinearAttention (opset 27),
and FlexAttention (ai.onnx.preview, opset 1). float16 and bfloat16 are computed in float32
and rounded once at the end.

CausalConvWithState: a depthwise causal 1-D convolution that carries its left context.
With p = concat(past_state or zeros, x) along the length (k - 1 + L values per row),

    y[b, c, t] = act(sum_{j < k} w[c, 0, j] * p[b, c, t + j] + bias[c])   (j ascending,
    the bias added last; act = x * sigmoid(x) for 'silu'/'swish', else the identity)
    present_state[b, c, :] = the last k - 1 values of p

One task per (b, c) row. Without an activation only multiplies and adds, unfused in the
exact variant: an exact-mode kernel; silu uses libm exp.

LinearAttention: per batch b and key/value head h, a d_k x d_v state S (past_state or
zeros) runs through the tokens t in order:

    S = exp(g_t) * S                         gated, gated_delta (g per key row or per head)
    u = beta_t * (v_t - S^T k_t)             delta, gated_delta (else u = v_t)
    S = S + k_t u^T
    o_t[hq] = scale * q_t[hq]^T S            for each query head hq of the group of h

(query head hq reads key/value head hq // (Hq / Hkv)); scale defaults to 1/sqrt(d_k).
Heads are packed in the last axis of the 3-D inputs. Every sum runs over d_k ascending.
One task per (b, h). 'linear' and 'delta' only multiply and add: exact-mode kernels;
the gated rules use libm exp. present_state has past_state's type (query's without one).

FlexAttention: scores = (Q K_g^T) * scale (K_g the key/value head of each query head, as
in Attention; scale = T(sqrt(scale or 1/sqrt(E)))^2), then score_mod(scores), softmax
over the keys, prob_mod(probs), Y = probs V_g. The score tensor (B, Hq, L, S) is in
softmax_precision (float32 by default, float64 for float64 inputs); the optional
modifiers are subgraphs run on the whole tensor. Both products go through
gemm/product.py, the softmax is softmax.py's row kernel, the scale one multiply per score.
An exact-mode kernel: the products' exact path, the softmax's exact variant (graphrt's exp,
its denominator in summation's pairwise order; the scores rounded to a narrow
softmax_precision before and after it), canonical NaN; the modifiers' bodies are compiled
with the session's options, so in exact mode each of their operators must be exact too
(session creation fails with ExactModeUnavailable naming the first that is not).
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN, put
from ..core.floats import BF16, F16, F32, F64, FLOATS, HALF, compute_dtype, widen
from ..core.jit import Variants
from ..core.pointwise import scalar_op, unary_param_variants
from ..elementwise.activations import swish_scalar
from ..gemm.product import Product
from ..nn.softmax import SOFTMAX_ROWS

EXACT = False

_NARROW_OR_F32 = frozenset({F32}) | HALF


def _out_buffer(ctx: RunContext, out: np.ndarray, work) -> np.ndarray:
    """Where a kernel computing in ``work`` writes ``out`` (1-D): ``out`` or scratch."""
    return out if out.dtype == work else scratch(ctx, work, (out.size,))


def _give_back(out: np.ndarray, buf: np.ndarray) -> None:
    if buf is not out:
        np.copyto(out, buf, casting="unsafe")


# ----------------------------------------------------------------------------- causal conv

def _causal_conv(x, w, bias, past, out, state, geo, zero, one, tasks):
    """``geo``: channels, length, k, has_bias, has_past, silu."""
    ch = geo[0]
    n = geo[1]
    k = geo[2]
    has_bias = geo[3] != 0
    has_past = geo[4] != 0
    silu = geo[5] != 0
    lead = k - 1
    for t in prange(tasks):
        c = t % ch
        xb = t * n
        pb = t * lead
        wb = c * k
        for i in range(n):
            acc = zero
            for j in range(k):
                p = i + j
                if p >= lead:
                    v = x[xb + p - lead]
                elif has_past:
                    v = past[pb + p]
                else:
                    v = zero
                prod = w[wb + j] * v
                acc = acc + prod
            if has_bias:
                acc = acc + bias[c]
            if silu:
                put(out, xb + i, swish_scalar(acc, one, one), EXACT)
            else:
                put(out, xb + i, acc, EXACT)
        for s in range(lead):
            p = n + s
            if p >= lead:
                state[pb + s] = x[xb + p - lead]
            elif has_past:
                state[pb + s] = past[pb + p]
            else:
                state[pb + s] = zero


_CAUSAL_CONV = Variants(_causal_conv, "causal_conv_state", parallel=True)


class CausalConvWithState(OpKernel):
    def __init__(self, node):
        super().__init__(node)
        act = node.attr("activation", "none")
        if act not in ("none", "silu", "swish"):
            node.fail(f"activation must be 'none', 'silu' or 'swish', got {act!r}")
        self.silu = act != "none"
        self.supports_exact = not self.silu

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 1, 2, 3)
        ctx.check_dtype(0, _NARROW_OR_F32)
        shape, ws = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        if len(shape) != 3 or len(ws) != 3 or ws[0] != shape[1] or ws[1] != 1 or ws[2] < 1:
            ctx.fail(f"input {list(shape)} must be (batch, channels, length) and weight "
                     f"{list(ws)} (channels, 1, k) with k >= 1")
        batch, ch, n = shape
        k = ws[2]
        if ctx.has_input(2) and tuple(ctx.shape(2)) != (ch,):
            ctx.fail(f"bias {list(ctx.shape(2))} must be [{ch}]")
        if ctx.has_input(3) and tuple(ctx.shape(3)) != (batch, ch, k - 1):
            ctx.fail(f"past_state {list(ctx.shape(3))} must be [{batch}, {ch}, {k - 1}]")
        ctx.set_output(0, dt, shape)
        if self.node.n_outputs > 1:
            ctx.set_output(1, dt, (batch, ch, k - 1))
        geo = np.array([ch, n, k, int(ctx.has_input(2)), int(ctx.has_input(3)), int(self.silu)],
                       dtype=np.int64)
        tasks = batch * ch
        fn = _CAUSAL_CONV.get(ctx.exact, tasks > 1 and tasks * n * k >= PARALLEL_MIN)
        ctx.prepared = (geo, tasks, fn)

    def run(self, ctx: RunContext) -> None:
        geo, tasks, fn = ctx.prepared
        ins = [None if a is None else widen(ctx, a, F32) for a in ctx.flat_in]
        x, w, bias, past = ins + [None] * (4 - len(ins))
        outs = ctx.flat_out
        out = _out_buffer(ctx, outs[0], F32)
        present = outs[1] if len(outs) > 1 else None
        state = scratch(ctx, F32, (int(geo[2] - 1) * tasks,)) if present is None \
            else _out_buffer(ctx, present, F32)
        fn(x, w, x[:0] if bias is None else bias, x[:0] if past is None else past, out, state,
           geo, np.float32(0), np.float32(1), tasks)
        _give_back(outs[0], out)
        if present is not None:
            _give_back(present, state)


# ----------------------------------------------------------------------------- linear attention

# LinearAttention parameter vector layout (int64)
_T, _HQ, _HKV, _DK, _DV, _GATED, _DELTA, _DECAY_N, _BETA_N = range(9)


def _linear_attention(q, k, v, decay, beta, state, out, tmp, par, scale, zero, tasks):
    """``state`` (tasks, d_k, d_v) holds the initial state and is updated in place; ``tmp``
    has d_v elements per task."""
    n_t = par[_T]
    hq = par[_HQ]
    hkv = par[_HKV]
    dk = par[_DK]
    dv = par[_DV]
    gated = par[_GATED] != 0
    delta = par[_DELTA] != 0
    dn = par[_DECAY_N]
    bn = par[_BETA_N]
    group = hq // hkv
    for task in prange(tasks):
        b = task // hkv
        h = task - b * hkv
        sb = task * dk * dv
        tb = task * dv
        for t in range(n_t):
            row = b * n_t + t
            kb = (row * hkv + h) * dk
            vb = (row * hkv + h) * dv
            if gated:
                for i in range(dk):
                    g = np.exp(decay[row * dn + (h if dn == hkv else h * dk + i)])
                    for m in range(dv):
                        state[sb + i * dv + m] = state[sb + i * dv + m] * g
            if delta:
                bt = beta[row * bn + (h if bn > 1 else 0)]
                for m in range(dv):
                    acc = zero
                    for i in range(dk):
                        prod = state[sb + i * dv + m] * k[kb + i]
                        acc = acc + prod
                    diff = v[vb + m] - acc
                    tmp[tb + m] = bt * diff
            else:
                for m in range(dv):
                    tmp[tb + m] = v[vb + m]
            for i in range(dk):
                ki = k[kb + i]
                for m in range(dv):
                    prod = ki * tmp[tb + m]
                    state[sb + i * dv + m] = state[sb + i * dv + m] + prod
            for g in range(group):
                head = h * group + g
                qb = (row * hq + head) * dk
                ob = (row * hq + head) * dv
                for m in range(dv):
                    acc = zero
                    for i in range(dk):
                        prod = q[qb + i] * state[sb + i * dv + m]
                        acc = acc + prod
                    put(out, ob + m, scale * acc, EXACT)
        if EXACT:
            for i in range(sb, sb + dk * dv):
                if state[i] != state[i]:
                    state[i] = np.nan


_LINEAR_ATTENTION = Variants(_linear_attention, "linear_attention", parallel=True)

_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True),
          "gated_delta": (True, True)}


class LinearAttention(OpKernel):
    def __init__(self, node):
        super().__init__(node)
        self.gated, self.delta = node.choice("update_rule", _RULES, "gated_delta")
        self.rule = node.attr("update_rule", "gated_delta")
        self.supports_exact = not self.gated
        self.hq, self.hkv = node.attr("q_num_heads"), node.attr("kv_num_heads")
        if self.hq is None or self.hkv is None:
            node.fail("q_num_heads and kv_num_heads are required")
        if self.hq <= 0 or self.hkv <= 0 or self.hq % self.hkv:
            node.fail(f"q_num_heads {self.hq} must be a positive multiple of kv_num_heads "
                      f"{self.hkv}")
        self.scale = float(node.attr("scale", 0.0))

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 1, 2, 4, 5)
        ctx.check_dtype(0, _NARROW_OR_F32)
        hq, hkv = self.hq, self.hkv
        sq, sk, sv = (tuple(ctx.shape(i)) for i in range(3))
        if len(sq) != 3 or len(sk) != 3 or len(sv) != 3 or sk[:2] != sq[:2] or sv[:2] != sq[:2] \
                or sq[2] % hq or sk[2] % hkv or sv[2] % hkv or sq[2] // hq != sk[2] // hkv:
            ctx.fail(f"query {list(sq)}, key {list(sk)} and value {list(sv)} must be (B, T, "
                     f"heads * size) with {hq} query and {hkv} key/value heads of one key size")
        batch, n_t = sq[:2]
        dk, dv = sq[2] // hq, sv[2] // hkv
        state_dt = dt
        if ctx.has_input(3):
            state_dt = ctx.check_dtype(3, _NARROW_OR_F32)
            if tuple(ctx.shape(3)) != (batch, hkv, dk, dv):
                ctx.fail(f"past_state {list(ctx.shape(3))} must be [{batch}, {hkv}, {dk}, {dv}]")
        dn = self._side(ctx, 4, "decay", self.gated, (hkv, hkv * dk), batch, n_t)
        bn = self._side(ctx, 5, "beta", self.delta, (hkv, 1), batch, n_t)
        ctx.set_output(0, dt, (batch, n_t, hq * dv))
        if self.node.n_outputs > 1:
            ctx.set_output(1, state_dt, (batch, hkv, dk, dv))
        par = [0] * 9
        par[_T], par[_HQ], par[_HKV], par[_DK], par[_DV] = n_t, hq, hkv, dk, dv
        par[_GATED], par[_DELTA], par[_DECAY_N], par[_BETA_N] = (
            int(self.gated), int(self.delta), dn, bn)
        scale = self.scale if self.scale != 0.0 else (1.0 / math.sqrt(dk) if dk else 1.0)
        tasks = batch * hkv
        work = batch * n_t * hq * dk * dv
        fn = _LINEAR_ATTENTION.get(ctx.exact, tasks > 1 and work >= PARALLEL_MIN)
        ctx.prepared = (np.array(par, dtype=np.int64), np.float32(scale), tasks,
                        (batch, hkv, dk, dv), fn)

    def _side(self, ctx, i, name, needed, lasts, batch, n_t) -> int:
        """The last extent of the decay or beta input (0 when absent), checked."""
        if ctx.has_input(i) != needed:
            ctx.fail(f"update_rule {self.rule!r} {'requires' if needed else 'forbids'} "
                     f"the {name} input")
        if not needed:
            return 0
        s = tuple(ctx.shape(i))
        if len(s) != 3 or s[:2] != (batch, n_t) or s[2] not in lasts:
            ctx.fail(f"{name} {list(s)} must be [{batch}, {n_t}, {' or '.join(map(str, lasts))}]")
        return s[2]

    def run(self, ctx: RunContext) -> None:
        par, scale, tasks, state_shape, fn = ctx.prepared
        flat = list(ctx.flat_in) + [None] * (6 - len(ctx.flat_in))
        q, k, v = (widen(ctx, a, F32) for a in flat[:3])
        decay = q[:0] if flat[4] is None else widen(ctx, flat[4], F32)
        beta = q[:0] if flat[5] is None else widen(ctx, flat[5], F32)
        outs = ctx.flat_out
        present = outs[1] if len(outs) > 1 else None
        size = math.prod(state_shape)
        state = scratch(ctx, F32, (size,)) if present is None else _out_buffer(ctx, present, F32)
        if flat[3] is None:
            state[:] = 0
        else:
            np.copyto(state, flat[3], casting="unsafe")
        out = _out_buffer(ctx, outs[0], F32)
        tmp = scratch(ctx, F32, (tasks * state_shape[3],))
        fn(q, k, v, decay, beta, state, out, tmp, par, scale, np.float32(0), tasks)
        _give_back(outs[0], out)
        if present is not None:
            _give_back(present, state)


# ----------------------------------------------------------------------------- flex attention

@scalar_op
def _times(x, p, _):
    return x * p


_SCALE = unary_param_variants(_times, "flex_scale")
_PRECISION = {1: F32, 10: F16, 11: F64}
if BF16 is not None:
    _PRECISION[16] = BF16


def _round(x: np.ndarray, dtype) -> None:
    """x (float32) rounded to a narrow softmax precision, in place."""
    if x.dtype != dtype:
        np.copyto(x, x.astype(dtype))


class _FlexPlan:
    __slots__ = ("shape", "scores_dt", "qk_work", "work", "qk", "pv", "scale", "scale_fn",
                 "blocks", "softmax", "rows", "n_keys")


class FlexAttention(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.scale = node.attr("scale")
        self.precision = node.attr("softmax_precision")
        if self.precision is not None and int(self.precision) not in _PRECISION:
            node.fail(f"softmax_precision {self.precision} is not a supported float type")
        self.mods = [self._mod(key) for key in ("score_mod", "prob_mod")]

    def _mod(self, key):
        g = self.node.attr(key)
        if g is None:
            return None
        body = self.node.compile_body(g)
        if len(body.output_infos) != 1 or len(body.input_infos) < 1:
            self.node.fail(f"{key} must take one tensor and give one tensor")
        return body

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 1, 2)
        if dt not in FLOATS:
            ctx.fail(f"element type {_dt.name_of(dt)} is not supported", ErrorKind.UNSUPPORTED)
        sq, sk, sv = (tuple(ctx.shape(i)) for i in range(3))
        if len(sq) != 4 or len(sk) != 4 or len(sv) != 4 or sk[0] != sq[0] or sv[:3] != sk[:3] \
                or sk[3] != sq[3] or sk[1] == 0 or sq[1] % sk[1]:
            ctx.fail(f"Q {list(sq)}, K {list(sk)} and V {list(sv)} must be (B, Hq, L, E), "
                     "(B, Hkv, S, E) and (B, Hkv, S, Ev) with Hq a multiple of Hkv")
        batch, hq, n_q, e = sq
        hkv, n_k, ev = sk[1], sk[2], sv[3]
        ctx.set_output(0, dt, (batch, hq, n_q, ev))
        p = _FlexPlan()
        p.shape = (batch, hq, n_q, n_k)
        p.scores_dt = _PRECISION[int(self.precision)] if self.precision is not None else (
            F64 if dt == F64 else F32)
        p.qk_work, p.work = compute_dtype(dt), compute_dtype(p.scores_dt)
        group = hq // hkv
        bh = np.arange(batch * hq, dtype=np.int64)
        kv = (bh // hq) * hkv + (bh % hq) // group
        p.qk = Product(p.qk_work, n_q, n_k, e, (e, 1), (1, e), bh * (n_q * e), kv * (n_k * e),
                       exact=ctx.exact)
        p.pv = Product(p.work, n_q, ev, n_k, (n_k, 1), (ev, 1), bh * (n_q * n_k),
                       kv * (n_k * ev), exact=ctx.exact)
        scale = self.scale if self.scale is not None else (1.0 / math.sqrt(e) if e else 1.0)
        root = dt.type(np.sqrt(np.float32(scale)))        # Q and K are each scaled by it
        p.scale = p.qk_work.type(float(root) * float(root))
        size = batch * hq * n_q * n_k
        parallel = size >= PARALLEL_MIN
        p.blocks = (1 << 14 if parallel else max(size, 1))
        p.scale_fn = _SCALE.get(ctx.exact, parallel)
        p.rows = batch * hq * n_q if n_k else 0
        p.n_keys = n_k
        p.softmax = SOFTMAX_ROWS.get(ctx.exact, parallel and p.rows > 1)
        ctx.prepared = p

    def run(self, ctx: RunContext) -> None:
        p = ctx.prepared
        size = math.prod(p.shape)
        q, k, v = (widen(ctx, a, p.qk_work) for a in ctx.flat_in[:3])
        raw = scratch(ctx, p.qk_work, (size,))
        p.qk(q, k, raw)
        scores = scratch(ctx, p.work, (size,))
        p.scale_fn(raw, scores, p.scale, p.scale, p.blocks, -(-size // p.blocks))
        _round(scores, p.scores_dt)
        self._modify(ctx, 0, scores, p)
        p.softmax(scores, scores, p.n_keys, 1, p.rows)
        _round(scores, p.scores_dt)
        self._modify(ctx, 1, scores, p)
        vw = widen(ctx, ctx.flat_in[2] if p.work != p.qk_work else v, p.work)
        out = _out_buffer(ctx, ctx.flat_out[0], p.work)
        p.pv(scores, vw, out)
        _give_back(ctx.flat_out[0], out)

    def _modify(self, ctx: RunContext, which: int, scores: np.ndarray, p: _FlexPlan) -> None:
        """scores <- mod(scores) through the subgraph (in the softmax precision's type)."""
        body = self.mods[which]
        if body is None:
            return
        x = scores.reshape(p.shape).astype(p.scores_dt, copy=p.scores_dt != p.work)
        (y,) = body.run([x] + list(ctx.inputs[ctx.node.n_inputs:]), ctx.cancel)
        y = np.asarray(y)
        if y.shape != p.shape or y.dtype != p.scores_dt:
            name = ("score_mod", "prob_mod")[which]
            ctx.node.fail(f"{name} gave {_dt.name_of(y.dtype)} {list(y.shape)}, expected "
                          f"{_dt.name_of(p.scores_dt)} {list(p.shape)}")
        np.copyto(scores, y.reshape(-1), casting="unsafe")
