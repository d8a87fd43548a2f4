"""Attention (opsets 23-25) and RotaryEmbedding (opset 23).

Attention: for each batch b and query head h (using key/value head h // (Hq / Hkv), which is
grouped-query attention when Hq > Hkv),

    S = (Q_bh K_bg^T) * scale          scale = (T1(sqrt(scale attribute or 1/sqrt(D))))^2
    S = softcap * tanh(S / softcap)    when softcap > 0
    S = S + bias                       bias below
    P = softmax(S) per row; a row whose bias is -inf everywhere is all zero
    Y_bh = P V_bg

K and V are the concatenation of past_key/past_value (when given) and the inputs along the
sequence axis; that concatenation is the present_key/present_value output. 3-D inputs are
(batch, seq, heads * head_size) and are read in place with strides, never transposed.

bias[b, h, i, j] starts from the mask (a float mask's value; a bool mask: 0 where True, -inf
where False; positions past the mask's last extent are masked) and gets -inf added for every
constraint that disallows key j for query i: is_causal (j <= i + offset), the window
(offset + i - left <= j <= offset + i + right, opset 25), and nonpad_kv_seqlen (j <
nonpad[b]). offset is past_sequence_length with a past cache, nonpad[b] - q_sequence_length
with nonpad_kv_seqlen, else 0.

The fourth output (qk_matmul_output_mode): 0 the scaled product, 1 after softcap, 2 after the
bias, 3 the probabilities. Both matrix products go through gemm/product.py; the row step
(scale, softcap, bias, softmax) is one task per row, so results do not depend on the thread
count. float16 is computed in float32 and rounded once. bfloat16
(8 significant bits, where one final rounding drifts visibly from a bfloat16 computation) is
computed in float32 with every step of the operator's function body rounded to bfloat16: Q
and K times the rounded sqrt(scale), the product, softcap's divide/tanh/multiply, the bias
add, and (unless softmax_precision asks for a wider type) the softmax's subtract, exp, each
running-sum add and divide.

The order, in both modes (R rounds to the work type -- float32 for float16 -- or, on the
bfloat16 path, to bfloat16; W to the softmax precision, bfloat16 on that path unless
softmax_precision is given):

    a_ij  = Product's sum over d ascending, acc = acc + q_id * k_jd (exact mode: a rounded
            multiply then a rounded add; fast mode may fuse them)
    x_ij  = R(a_ij * scale)                                  mode 0 output
    x_ij  = R(softcap * R(tanh(R(x_ij / softcap))))          softcap > 0; mode 1 output
    x_ij  = R(x_ij + bias_ij)                                mode 2 output
    m_i   = max_j x_ij (NaN when one is NaN); 0 when it is -inf
    e_ij  = W(exp(W(x_ij - m_i)))                            in the softmax precision
    s_i   = sum_j e_ij in core/summation.py's blocked pairwise order, in the softmax
            precision (the bfloat16-rounded softmax: j ascending, every add rounded to
            bfloat16); 1 when it is 0
    p_ij  = R(W(e_ij / s_i)), 0 for a row whose keys are all masked     mode 3 output
    Y_i   = Product's sum over j ascending of p_ij * v_j, rounded once to a narrow type

Fast mode uses libm's exp (vecmath.vexp, vectorised apart from the sum) and tanh; the exact
variants are compiled without fast-math and use graphrt's own exp and tanh (exactmath),
and every NaN they write (Y, the fourth output, the probabilities) is the canonical NaN.

RotaryEmbedding: the first rotary_embedding_dim values x of each head (halves, or
even/odd pairs when interleaved) are rotated by the cached cos/sin of their position:
(x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2); the rest is copied. Only multiplies and adds:
exact (two products and one add/subtract, unfused, in the exact variant).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN, put
from ..core.floats import BF16, F16, F32, F64, FLOATS, HALF, compute_dtype, round_to, widen
from ..core.held import held_buffer
from ..core.jit import Variants
from ..core.summation import VALUES
from ..gemm.product import Product
from ..math.exactmath import FastExact, exp as _own_exp, tanh as _own_tanh
from ..math.vecmath import vexp
from ..tensor.gather import Window

EXACT = False
ROUND = SROUND = EXP = TANH = DENOMINATOR = None       # bound per variant (_row_variants)
_SUM = VALUES.run

_SOFTMAX_DTYPES = {1: F32, 10: F16, 11: F64, 16: F32}

# rows() parameter vector layout (int64)
_S, _T, _HQ, _TM, _MODE, _CAUSAL, _LEFT, _RIGHT, _KIND, _PAD = range(10)


def _rows(scores, ex, out3, mask, ms, offset, nonpad, par, scale, softcap, zero, ninf, wide,
          tasks):
    """The row step over scores (B*Hq*S rows of T), in place: scores become probabilities.
    ``ex`` holds the exponentials in the softmax precision (``scores`` itself unless that
    is wider than the work type); ``ms`` are the mask's element strides over (b, h, i, j);
    ``zero`` and ``ninf`` are 0 and -inf in the work type, ``wide`` a zero of the softmax
    precision."""
    s_len = par[_S]
    t_len = par[_T]
    hq = par[_HQ]
    tm = par[_TM]
    mode = par[_MODE]
    causal = par[_CAUSAL] != 0
    left = par[_LEFT]
    right = par[_RIGHT]
    kind = par[_KIND]
    pad = par[_PAD] != 0
    # no mask, constraint, softcap or fourth output: the row in simple loops (the same
    # operations in the same order), the exponentials apart from the sum so they vectorise
    simple = mode < 0 and kind == 0 and not causal and left < 0 and right < 0 and not pad \
        and not softcap > 0
    same = ex.ctypes.data == scores.ctypes.data
    for r in prange(tasks):
        base = r * t_len
        if simple:
            b0 = np.uint64(base)
            n = np.uint64(t_len)
            m = ninf
            for j in range(n):
                x = ROUND(scores[b0 + j] * scale)
                scores[b0 + j] = x
                if x > m or x != x:
                    m = x
            if m == ninf:
                m = zero
            # one name for the memory when ex is scores: two fail LLVM's overlap check
            # at run time and its scalar loop runs
            if same:
                for j in range(n):
                    scores[b0 + j] = SROUND(EXP(SROUND((wide + scores[b0 + j]) - m)))
                s = DENOMINATOR(scores, base, t_len, wide)
                for j in range(n):
                    put(scores, b0 + j, ROUND(SROUND(scores[b0 + j] / s)), EXACT)
            else:
                for j in range(n):
                    ex[b0 + j] = SROUND(EXP(SROUND((wide + scores[b0 + j]) - m)))
                s = DENOMINATOR(ex, base, t_len, wide)
                for j in range(n):
                    put(scores, b0 + j, ROUND(SROUND(ex[b0 + j] / s)), EXACT)
            continue
        i = r % s_len
        bh = r // s_len
        b = bh // hq
        h = bh - b * hq
        mbase = b * ms[0] + h * ms[1] + i * ms[2]
        off = offset[b]
        allowed = False
        m = ninf
        for j in range(t_len):
            x = ROUND(scores[base + j] * scale)
            if mode == 0:
                put(out3, base + j, x, EXACT)
            if softcap > 0:
                x = ROUND(softcap * ROUND(TANH(ROUND(x / softcap))))
            if mode == 1:
                put(out3, base + j, x, EXACT)
            bias = zero
            if kind != 0:
                if j >= tm:
                    bias = ninf
                elif kind == 1:
                    if not mask[mbase + j * ms[3]]:
                        bias = ninf
                else:
                    bias = bias + mask[mbase + j * ms[3]]
            if causal and j > i + off:
                bias = bias + ninf
            if (left >= 0 and off + i - j > left) or (right >= 0 and j - off - i > right):
                bias = bias + ninf
            if pad and j >= nonpad[b]:
                bias = bias + ninf
            if bias != ninf:
                allowed = True
            x = ROUND(x + bias)
            if mode == 2:
                put(out3, base + j, x, EXACT)
            scores[base + j] = x
            if x > m or x != x:
                m = x
        if m == ninf:
            m = zero
        if same:
            for j in range(t_len):
                scores[base + j] = SROUND(EXP(SROUND((wide + scores[base + j]) - m)))
        else:
            for j in range(t_len):
                ex[base + j] = SROUND(EXP(SROUND((wide + scores[base + j]) - m)))
        s = DENOMINATOR(ex, base, t_len, wide)
        for j in range(t_len):
            p = ROUND(SROUND(ex[base + j] / s)) if allowed else wide
            put(scores, base + j, p, EXACT)
            if mode == 3:
                put(out3, base + j, p, EXACT)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _keep(v):
    return v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _to_bf16(v):
    """v (float32) rounded to bfloat16."""
    return np.float32(round_to(np.float64(v), 8, -126, 127))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _pairwise_denominator(ex, base, n, wide):
    """The softmax denominator of the row ex[base:base + n] in summation's blocked pairwise
    order (in ex's type); 1 when it is 0 (an empty or all -inf row)."""
    s = _SUM(ex, base, n, wide) if n > 0 else wide
    return ex.dtype.type(1) if s == 0 else s


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _bf16_denominator(ex, base, n, wide):
    """The same left to right with every add rounded to bfloat16, as the function body's
    bfloat16 softmax computes."""
    s = wide
    for j in range(n):
        s = _to_bf16(s + ex[base + j])
    return ex.dtype.type(1) if s == 0 else s


_FAST = dict(EXP=vexp, TANH=np.tanh)
_OWN = dict(EXP=_own_exp, TANH=_own_tanh)


def _row_variants(name, **consts):
    """The fast variants with libm's exp and tanh, the exact ones with graphrt's own."""
    return FastExact(Variants(_rows, name, parallel=True, **consts, **_FAST),
                     Variants(_rows, name + "_exact", parallel=True, **consts, **_OWN))


_ROWS = _row_variants("attention_rows", ROUND=_keep, SROUND=_keep,
                      DENOMINATOR=_pairwise_denominator)
# bfloat16: every step rounded to bfloat16 (the softmax too, unless softmax_precision
# says otherwise), as the operator's function body computes
_ROWS_BF16 = _row_variants("attention_rows_bf16", ROUND=_to_bf16, SROUND=_to_bf16,
                           DENOMINATOR=_bf16_denominator)
_ROWS_BF16_WIDE = _row_variants("attention_rows_bf16w", ROUND=_to_bf16, SROUND=_keep,
                                DENOMINATOR=_pairwise_denominator)


class _Operand:
    """Where head (b, g) of a 4-D view of Q, K or V starts and its row stride."""

    __slots__ = ("heads", "seq", "size", "three_d")

    def __init__(self, shape, heads, three_d):
        self.three_d = three_d
        self.heads = heads
        self.seq = shape[1] if three_d else shape[2]
        self.size = shape[2] // heads if three_d else shape[3]

    def offsets(self, batch, per_head):
        """Element offset of the head used by each (b, h) query pair, in (b, h) order."""
        hq = len(per_head)
        b = np.repeat(np.arange(batch, dtype=np.int64), hq)
        g = np.tile(np.asarray(per_head, dtype=np.int64), batch)
        if self.three_d:
            return b * (self.seq * self.heads * self.size) + g * self.size
        return (b * self.heads + g) * (self.seq * self.size)

    @property
    def row(self):
        return self.heads * self.size if self.three_d else self.size

    def view4(self, x):
        """The input as (batch, heads, seq, size) (a view)."""
        if self.three_d:
            return x.reshape(x.shape[0], self.seq, self.heads, self.size).transpose(0, 2, 1, 3)
        return x


class _Plan:
    __slots__ = ("q", "k", "v", "past", "nonpad", "work", "dims", "qk", "pv", "rows", "par",
                 "ms", "scale", "root", "softcap", "zero", "ninf", "wide", "mask_kind",
                 "offset", "ex_dtype", "merge")


class Attention(OpKernel):
    tile_products = True
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        a = node.attr
        self.is_causal = int(a("is_causal", 0)) != 0
        self.q_heads = a("q_num_heads")
        self.kv_heads = a("kv_num_heads")
        self.scale = a("scale")
        self.softcap = float(a("softcap", 0.0))
        self.mode = int(a("qk_matmul_output_mode", 0))
        self.precision = a("softmax_precision")
        self.left = int(a("left_window_size", -1)) if node.opset >= 25 else -1
        self.right = int(a("right_window_size", -1)) if node.opset >= 25 else -1
        if self.mode not in (0, 1, 2, 3):
            node.fail(f"qk_matmul_output_mode {self.mode} is not 0, 1, 2 or 3")
        if self.left < -1 or self.right < -1:
            node.fail("window sizes must be -1 or nonnegative")
        if self.precision is not None and int(self.precision) not in _SOFTMAX_DTYPES:
            node.fail(f"softmax_precision {self.precision} is not a float type")

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 1, 2, 4, 5)
        if dt not in FLOATS:
            ctx.fail(f"element type {dt} is not supported", ErrorKind.UNSUPPORTED)
        sq, sk, sv = (tuple(ctx.shape(i)) for i in range(3))
        rank = len(sq)
        if rank not in (3, 4) or len(sk) != rank or len(sv) != rank:
            ctx.fail(f"Q, K and V must all be 3-D or all 4-D, got shapes {list(sq)}, "
                     f"{list(sk)} and {list(sv)}")
        three_d = rank == 3
        if three_d:
            if self.q_heads is None or self.kv_heads is None:
                ctx.fail("3-D inputs need the q_num_heads and kv_num_heads attributes")
            hq, hkv = int(self.q_heads), int(self.kv_heads)
            if hq <= 0 or hkv <= 0 or sq[2] % hq or sk[2] % hkv or sv[2] % hkv:
                ctx.fail(f"hidden sizes {sq[2]}, {sk[2]}, {sv[2]} do not split into "
                         f"{hq} and {hkv} heads")
        else:
            if self.node.opset >= 25 and (self.q_heads is not None or self.kv_heads is not None):
                ctx.fail("q_num_heads and kv_num_heads must not be given for 4-D inputs")
            hq, hkv = sq[1], sk[1]
        q, k, v = _Operand(sq, hq, three_d), _Operand(sk, hkv, three_d), _Operand(sv, hkv, three_d)
        batch, s_len = sq[0], q.seq
        if sk[0] != batch or sv[0] != batch or k.size != q.size or v.seq != k.seq \
                or (not three_d and sv[1] != hkv):
            ctx.fail(f"shapes Q {list(sq)}, K {list(sk)} and V {list(sv)} do not match")
        if hkv == 0 or hq % hkv:
            ctx.fail(f"{hq} query heads cannot be grouped over {hkv} key/value heads")
        d, dv = q.size, v.size
        past = ctx.has_input(4) or ctx.has_input(5)
        p_len = 0
        if past:
            if not (ctx.has_input(4) and ctx.has_input(5)):
                ctx.fail("past_key and past_value must be given together")
            pk, pv = tuple(ctx.shape(4)), tuple(ctx.shape(5))
            if pk[:2] != (batch, hkv) or pv[:3] != pk[:3] or len(pk) != 4 or len(pv) != 4 \
                    or pk[3] != d or pv[3] != dv:
                ctx.fail(f"past_key {list(pk)} and past_value {list(pv)} do not match "
                         f"(batch {batch}, {hkv} heads, sizes {d} and {dv})")
            p_len = pk[2]
        t_len = p_len + k.seq
        nonpad = ctx.has_input(6)
        if nonpad:
            if past:
                ctx.fail("nonpad_kv_seqlen cannot be combined with past_key/past_value")
            if ctx.dtype(6) != np.int64 or tuple(ctx.shape(6)) != (batch,):
                ctx.fail(f"nonpad_kv_seqlen must be int64 of shape [{batch}]")
        ms, tm, kind = [0, 0, 0, 0], t_len, 0
        if ctx.has_input(3):
            mshape = tuple(ctx.shape(3))
            kind = 1 if ctx.dtype(3) == np.bool_ else 2
            if ctx.dtype(3).kind not in "biuf" and ctx.dtype(3) not in HALF:
                ctx.fail(f"attn_mask of element type {ctx.dtype(3)} is not supported",
                         ErrorKind.UNSUPPORTED)
            target = (batch, hq, s_len, t_len)
            if not 1 <= len(mshape) <= 4 or mshape[-1] > t_len or any(
                    m not in (1, e) for m, e in zip(mshape[-2::-1], target[-2::-1])):
                ctx.fail(f"attn_mask of shape {list(mshape)} does not broadcast to "
                         f"{list(target)}")
            tm = mshape[-1]
            padded = (1,) * (4 - len(mshape)) + mshape
            step = 1
            for axis in range(3, -1, -1):
                ms[axis] = 0 if padded[axis] == 1 and axis < 3 else step
                step *= padded[axis]
        ctx.set_output(0, dt, (batch, s_len, hq * dv) if three_d else (batch, hq, s_len, dv))
        n_out = self.node.n_outputs
        if n_out > 1:
            ctx.set_output(1, dt, (batch, hkv, t_len, d))
        if n_out > 2:
            ctx.set_output(2, dt, (batch, hkv, t_len, dv))
        if n_out > 3:
            ctx.set_output(3, dt, (batch, hq, s_len, t_len))

        p = _Plan()
        p.work = compute_dtype(dt)
        p.q, p.k, p.v, p.past, p.nonpad = q, k, v, past, nonpad
        p.dims = (batch, hq, hkv, s_len, t_len, d, dv, p_len)
        reps = hq // hkv
        groups = [h // reps for h in range(hq)]
        qoff = q.offsets(batch, range(hq))
        if past:        # K and V are read from the (batch, hkv, T, size) present buffers
            k_src = _Operand((batch, hkv, t_len, d), hkv, False)
            v_src = _Operand((batch, hkv, t_len, dv), hkv, False)
        else:
            k_src, v_src = k, v
        p.qk = Product(p.work, s_len, t_len, d, (q.row, 1), (1, k_src.row), qoff,
                       k_src.offsets(batch, groups), exact=ctx.exact)
        poff = np.arange(batch * hq, dtype=np.int64) * (s_len * t_len)
        p.pv = Product(p.work, s_len, dv, t_len, (t_len, 1), (v_src.row, 1), poff,
                       v_src.offsets(batch, groups), exact=ctx.exact)
        par = [0] * 10
        par[_S], par[_T], par[_HQ], par[_TM] = s_len, t_len, hq, tm
        par[_MODE] = self.mode if n_out > 3 else -1
        par[_CAUSAL], par[_LEFT], par[_RIGHT], par[_KIND], par[_PAD] = (
            int(self.is_causal), self.left, self.right, kind, int(nonpad))
        p.par = np.array(par, dtype=np.int64)
        p.ms = np.array(ms, dtype=np.int64)
        p.mask_kind = kind
        p.offset = np.full(batch, p_len, np.int64)      # the causal/window offset per batch
        rows = batch * hq * s_len
        variants = _ROWS
        if dt == BF16:
            variants = _ROWS_BF16 if int(self.precision or 16) == 16 else _ROWS_BF16_WIDE
        p.rows = (rows, variants.get(ctx.exact, rows * t_len >= PARALLEL_MIN and rows > 1))
        scale = self.scale if self.scale is not None else 1.0 / math.sqrt(d) if d else 1.0
        root = float(dt.type(math.sqrt(float(scale))))  # Q and K are each scaled by T1(sqrt)
        # bfloat16: Q and K are scaled and rounded in run, as the function body does
        p.root = root if dt == BF16 else None
        p.scale = p.work.type(1.0 if dt == BF16 else root * root)
        p.softcap = p.work.type(self.softcap)
        p.zero, p.ninf = p.work.type(0), p.work.type(-np.inf)
        wide = _SOFTMAX_DTYPES.get(int(self.precision), p.work) if self.precision else p.work
        p.wide = np.float64(0) if wide == F64 else p.work.type(0)
        # the exponentials in the softmax precision: a buffer of their own when it is wider
        p.ex_dtype = F64 if wide == F64 and p.work != F64 else None
        # 3-d: the heads' (batch, heads, sequence, size) result read into Y's layout
        hs = s_len * dv
        p.merge = Window(p.work, (batch, s_len, hq, dv), (hq * hs, dv, hs, 1)) \
            if three_d else None
        ctx.prepared = p

    def jit_calls(self, ctx: RunContext):
        """The common case as compiled calls (the products, the row step, Y's layout): no
        past or present, no fourth output, no nonpad_kv_seqlen, Q, K, V and Y in the type
        computed in and a mask numba reads as it is; None elsewhere (run). The same
        kernels on the same operands as run, so the same bits."""
        p = ctx.prepared
        ins, y = ctx.flat_in, ctx.flat_out[0]
        if p.past or p.nonpad or p.root is not None or p.ex_dtype is not None or \
                len(ctx.flat_out) > 1 or y.dtype != p.work or \
                any(a.dtype != p.work for a in ins[:3]) or \
                (p.mask_kind and ins[3].dtype in HALF):
            return None
        batch, hq, _, s_len, t_len, _, dv, _ = p.dims
        scores = held_buffer(p.work, (batch * hq * s_len * t_len,), ctx.held, "attention")
        y4 = y if p.merge is None else held_buffer(p.work, (y.size,), ctx.held, "attention y")
        qk = p.qk.call_of(ins[0], ins[1], scores, holder=ctx.held)
        pv = p.pv.call_of(scores, ins[2], y4, holder=ctx.held)
        if qk is None or pv is None:
            return None
        rows, fn = p.rows
        mask = ins[3] if p.mask_kind else scores[:0]
        calls = [qk, (fn, (scores, scores, scores, mask, p.ms, p.offset, p.offset, p.par,
                           p.scale, p.softcap, p.zero, p.ninf, p.wide, rows)), pv]
        return calls if p.merge is None else calls + p.merge.calls(y4, y)

    def run(self, ctx: RunContext) -> None:
        p = ctx.prepared
        batch, hq, hkv, s_len, t_len, d, dv, p_len = p.dims
        ins, outs, work = ctx.inputs, ctx.outputs, p.work
        n_out = len(outs)
        q = self._scaled(ctx, widen(ctx, ctx.flat_in[0], work))
        kv = []
        for i, (op, size) in enumerate(((p.k, d), (p.v, dv))):
            present = outs[1 + i] if n_out > 1 + i else None
            if p.past:
                if present is None:
                    present = scratch(ctx, ins[0].dtype, (batch, hkv, t_len, size))
                present[:, :, :p_len] = ins[4 + i]
                present[:, :, p_len:] = op.view4(ins[1 + i])
                kv.append(widen(ctx, present.reshape(-1), work))
            else:
                if present is not None:
                    np.copyto(present, op.view4(ins[1 + i]))
                kv.append(widen(ctx, ctx.flat_in[1 + i], work))
        scores = scratch(ctx, work, (batch * hq * s_len * t_len,))
        p.qk(q, self._scaled(ctx, kv[0]), scores)
        out3 = outs[3] if n_out > 3 else None
        o3 = scores if out3 is None else (
            out3.reshape(-1) if out3.dtype == work else scratch(ctx, work, (out3.size,)))
        mask = scores[:0]
        if p.mask_kind:
            mask = ctx.flat_in[3]
            if mask.dtype in HALF:        # numba has no 16-bit float arithmetic
                mask = widen(ctx, mask, F32)
        nonpad = offset = p.offset
        if p.nonpad:
            nonpad = ins[6].reshape(-1)
            offset = scratch(ctx, np.int64, (batch,))
            np.subtract(nonpad, s_len, out=offset)
        rows, fn = p.rows
        ex = scores if p.ex_dtype is None else scratch(ctx, p.ex_dtype, (scores.size,))
        fn(scores, ex, o3, mask, p.ms, offset, nonpad, p.par, p.scale, p.softcap, p.zero, p.ninf,
           p.wide, rows)
        if out3 is not None and o3 is not out3.reshape(-1):
            np.copyto(out3.reshape(-1), o3, casting="unsafe")
        y = outs[0]
        direct = not p.q.three_d and y.dtype == work
        y4 = y.reshape(-1) if direct else scratch(ctx, work, (batch * hq * s_len * dv,))
        p.pv(scores, kv[1], y4)
        if not direct:
            src = y4.reshape(batch, hq, s_len, dv)
            dst = y.reshape(batch, s_len, hq, dv).transpose(0, 2, 1, 3) if p.q.three_d else y
            np.copyto(dst, src, casting="unsafe")


    @staticmethod
    def _scaled(ctx, x):
        """bfloat16 only: x (a float32 scratch copy) times T1(sqrt(scale)), rounded."""
        root = ctx.prepared.root
        if root is None:
            return x
        np.multiply(x, np.float32(root), out=x)
        tmp = scratch(ctx, BF16, (x.size,))
        np.copyto(tmp, x, casting="unsafe")
        np.copyto(x, tmp)
        return x


# ----------------------------------------------------------------------------- rotary

def _rotary(x, cos, sin, out, pos, geo, tasks):
    """One task per (b, s, h) head vector of ``x`` (strides in ``geo``)."""
    seq, heads, size, rot, half = geo[0], geo[1], geo[2], geo[3], geo[4]
    sb, ss, sh = geo[5], geo[6], geo[7]
    inter = geo[8] != 0
    has_pos = geo[9] != 0
    for t in prange(tasks):
        h = t % heads
        bs = t // heads
        s = bs % seq
        b = bs // seq
        o = b * sb + s * ss + h * sh
        c = (pos[bs] if has_pos else bs) * half
        for j in range(half):
            if inter:
                i1 = o + 2 * j
                i2 = i1 + 1
            else:
                i1 = o + j
                i2 = o + half + j
            x1 = x[i1]
            x2 = x[i2]
            cj = cos[c + j]
            sj = sin[c + j]
            v1 = cj * x1 - sj * x2
            v2 = sj * x1 + cj * x2
            if EXACT and v1 != v1:
                v1 = np.nan
            if EXACT and v2 != v2:
                v2 = np.nan
            out[i1] = v1
            out[i2] = v2
        for j in range(rot, size):
            out[o + j] = x[o + j]


_ROTARY = Variants(_rotary, "rotary", parallel=True)


class RotaryEmbedding(OpKernel):
    supports_exact = True
    in_place_input = True

    def __init__(self, node):
        super().__init__(node)
        self.interleaved = int(node.attr("interleaved", 0)) != 0
        self.rot = int(node.attr("rotary_embedding_dim", 0))
        self.heads = int(node.attr("num_heads", 0))

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 1, 2)
        if dt not in FLOATS:
            ctx.fail(f"element type {dt} is not supported", ErrorKind.UNSUPPORTED)
        shape = tuple(ctx.shape(0))
        if len(shape) == 4:
            batch, heads, seq, size = shape
            strides = (heads * seq * size, size, seq * size)
        elif len(shape) == 3:
            if self.heads <= 0 or shape[2] % self.heads:
                ctx.fail(f"3-D input {list(shape)} needs num_heads dividing its last extent")
            batch, seq, heads = shape[0], shape[1], self.heads
            size = shape[2] // heads
            strides = (seq * heads * size, heads * size, size)
        else:
            ctx.fail(f"input must be 3-D or 4-D, got shape {list(shape)}")
        rot = self.rot or size
        if rot > size or rot % 2:
            ctx.fail(f"rotary_embedding_dim {rot} must be even and at most the head size {size}")
        half = rot // 2
        cs, ss = tuple(ctx.shape(1)), tuple(ctx.shape(2))
        has_pos = ctx.has_input(3)
        if cs != ss:
            ctx.fail(f"cos_cache {list(cs)} and sin_cache {list(ss)} differ")
        if has_pos:
            if tuple(ctx.shape(3)) != (batch, seq) or ctx.dtype(3) != np.int64:
                ctx.fail(f"position_ids must be int64 of shape [{batch}, {seq}]")
            if len(cs) != 2 or cs[1] != half:
                ctx.fail(f"caches of shape {list(cs)} must be [max_position, {half}]")
        elif cs != (batch, seq, half):
            ctx.fail(f"caches of shape {list(cs)} must be [{batch}, {seq}, {half}]")
        ctx.set_output(0, dt, shape)
        geo = np.array([seq, heads, size, rot, half, *strides, int(self.interleaved),
                        int(has_pos)], dtype=np.int64)
        tasks = batch * seq * heads
        work = compute_dtype(dt)
        fn = _ROTARY.get(ctx.exact, tasks * size >= PARALLEL_MIN and tasks > 1)
        ctx.prepared = (geo, tasks, work, cs[0] if has_pos else 0, fn)

    def run(self, ctx: RunContext) -> None:
        geo, tasks, work, n_pos, fn = ctx.prepared
        x, cos, sin = ctx.flat_in[:3]
        if geo[9]:
            pos = ctx.flat_in[3]
            if pos.size and (pos.min() < 0 or pos.max() >= n_pos):
                ctx.node.fail(f"position_ids must lie in [0, {n_pos})", ErrorKind.INVALID_INPUT)
        else:
            pos = geo[:0]
        out = ctx.flat_out[0]
        if x.dtype == work:
            fn(x, cos, sin, out, pos, geo, tasks)
            return
        xs = [widen(ctx, a, work) for a in (x, cos, sin)]
        o = scratch(ctx, work, (out.size,))
        fn(xs[0], xs[1], xs[2], o, pos, geo, tasks)
        np.copyto(out, o, casting="unsafe")
