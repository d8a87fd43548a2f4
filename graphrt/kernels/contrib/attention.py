"""com.microsoft Attention (onnxruntime's fused BERT self-attention), as standard operators:

    QKV = input @ weights + bias, split along the last axis into Q, K, V (equal thirds, or
          qkv_hidden_sizes), each (batch, sequence, heads * head size)
    Y   = Attention(Q, K, V, mask bias + attention_bias; q_num_heads = kv_num_heads =
          num_heads, is_causal = unidirectional, scale)      (ai.onnx Attention, opset 23)

The mask bias comes from mask_index (``MaskBias``, a kernel of this module): for each batch
b, key j (and query i for a 3-D mask) 0 where the key is kept, mask_filter_value (default
-10000) where it is masked, shaped (batch, 1, 1 or sequence, keys). mask_index is one of
onnxruntime's forms: (batch) key counts (keys j < count[b] kept: right padding), (2 batch)
end then start positions (start[b] <= j < end[b]), (batch, keys) or (batch, sequence, keys)
with a value > 0 kept. A masked key thus gets a large negative score, not -inf: a row with
every key masked averages all values, as onnxruntime's does. past/present (the key-value
cache), do_rotary and the (3 batch + 2) mask form are refused.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, make_calls
from ..core.lowering import Builder, Lowered, trimmed

F32 = np.dtype(np.float32)
LENGTHS, SPANS, KEYS, QUERY_KEYS = range(4)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _mask_bias(mask, form, batch, rows, keys, masked, out):
    """out[b, 0, i, j] = 0 where key j is kept for query row i of batch b, else ``masked``."""
    for b in range(batch):
        for i in range(rows):
            for j in range(keys):
                if form == LENGTHS:
                    keep = j < mask[b]
                elif form == SPANS:
                    keep = mask[batch + b] <= j < mask[b]
                elif form == KEYS:
                    keep = mask[b * keys + j] > 0
                else:
                    keep = mask[(b * rows + i) * keys + j] > 0
                out[(b * rows + i) * keys + j] = 0.0 if keep else masked


class MaskBias(OpKernel):
    """(mask_index, the attention's input) -> the additive mask, float32 (batch, 1, rows,
    keys); attribute ``masked``: the value of a masked key."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.masked = float(node.attr("masked", -10000.0))

    def infer(self, ctx: InferContext) -> None:
        if ctx.dtype(0) not in (np.int32, np.int64):
            ctx.fail(f"mask_index of element type {ctx.dtype(0)} is not supported (int32 is)",
                     ErrorKind.UNSUPPORTED)
        ms, xs = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        if len(xs) != 3:
            ctx.fail(f"input of shape {list(xs)} must be (batch, sequence, hidden)")
        batch, seq = xs[0], xs[1]
        forms = {(batch,): (LENGTHS, 1), (2 * batch,): (SPANS, 1), (batch, seq): (KEYS, 1),
                 (batch, seq, seq): (QUERY_KEYS, seq)}
        if ms not in forms:
            ctx.fail(f"mask_index of shape {list(ms)} is not supported for input {list(xs)} "
                     f"(({batch}), ({2 * batch}), ({batch}, {seq}) or ({batch}, {seq}, {seq}) "
                     "are)", ErrorKind.UNSUPPORTED)
        form, rows = forms[ms]
        ctx.set_output(0, F32, (batch, 1, rows, seq))
        ctx.prepared = (form, batch, rows, seq)

    def jit_calls(self, ctx: RunContext):
        form, batch, rows, keys = ctx.prepared
        return [(_mask_bias, (ctx.flat_in[0], form, batch, rows, keys, np.float32(self.masked),
                              ctx.flat_out[0]))]

    def run(self, ctx: RunContext) -> None:
        make_calls(self.jit_calls(ctx))


def _split_qkv(b: Builder, qkv: str, sizes) -> tuple[str, str, str]:
    """Q, K, V from the last axis of qkv: equal thirds, or ``sizes``."""
    q, k, v = b.temp(), b.temp(), b.temp()
    if sizes:
        b.op("Split", [qkv, b.const([int(s) for s in sizes], np.int64)], outputs=[q, k, v],
             axis=-1)
    else:
        b.op("Split", [qkv], outputs=[q, k, v], axis=-1, num_outputs=3)
    return q, k, v


def _attend(b: Builder, q: str, k: str, v: str, mask: str, like: str, extra_bias: str,
            heads: int, causal: bool, out: str) -> None:
    """out = ai.onnx Attention of (batch, sequence, heads * size) Q, K, V with the additive
    bias of ``mask`` (mask_index forms, MaskBias; ``like``: the (batch, sequence, hidden)
    value whose shape it is read against) plus ``extra_bias``."""
    a = b.info.attrs
    bias = ""
    if mask:
        bias = b.op("MaskBias", [mask, like], domain="graphrt", opset=1,
                    masked=float(a.get("mask_filter_value", -10000.0)))
    if extra_bias:
        bias = b.op("Add", [bias, extra_bias]) if bias else extra_bias
    if bias:
        bias = b.op("CastLike", [bias, q])
    attrs = dict(q_num_heads=heads, kv_num_heads=heads, is_causal=int(causal))
    if a.get("scale"):
        attrs["scale"] = float(a["scale"])
    b.op("Attention", [q, k, v] + ([bias] if bias else []), outputs=[out], **attrs)


def _heads(b: Builder) -> int:
    heads = b.info.attrs.get("num_heads")
    if heads is None:
        b.info.fail("attribute num_heads is required")
    return int(heads)


def _no_cache(b: Builder, past: tuple, present: tuple) -> None:
    if any(b.input(i) for i in past) or any(b.output(i) for i in present):
        b.refuse("past and present (the key-value cache) are not supported")
    if int(b.info.attrs.get("do_rotary", 0)) or \
            int(b.info.attrs.get("past_present_share_buffer", 0)):
        b.refuse("do_rotary and past_present_share_buffer are not supported")


class MsAttention(Lowered):
    def expand(self, b: Builder) -> None:
        heads = _heads(b)
        _no_cache(b, (4, 6), (1,))
        b.require(0, 1)
        qkv = b.op("MatMul", [b.input(0), b.input(1)])
        if b.input(2):
            qkv = b.op("Add", [qkv, b.input(2)])
        q, k, v = _split_qkv(b, qkv, self.node.attrs.get("qkv_hidden_sizes"))
        _attend(b, q, k, v, b.input(3), b.input(0), b.input(5), heads,
                bool(int(self.node.attrs.get("unidirectional", 0))), b.output(0))


class QAttention(Lowered):
    """(input, weight, bias, input_scale, weight_scale[, mask_index[, input_zp[,
    weight_zp[, past]]]]): Attention whose input projection is the quantized product

        QKV = float((input - input_zp) @ (weight - weight_zp)) * (input_scale *
              weight_scale) + bias       (MatMulIntegerToFloat: weight_scale per tensor or
                                          per column)

    followed by the heads of com.microsoft Attention (this module)."""

    def expand(self, b: Builder) -> None:
        from .quantized import scaled_product
        heads = _heads(b)
        _no_cache(b, (8,), (1,))
        b.require(0, 1, 2, 3, 4)
        qkv = b.temp()
        scaled_product(b, b.input(0), b.input(1), b.input(3), b.input(4), b.input(6),
                       b.input(7), b.input(2), qkv)
        q, k, v = _split_qkv(b, qkv, None)
        _attend(b, q, k, v, b.input(5), b.input(0), "", heads,
                bool(int(self.node.attrs.get("unidirectional", 0))), b.output(0))


class MultiHeadAttention(Lowered):
    """(query, key, value[, bias[, key_padding_mask[, attention_bias]]]), query
    (batch, sequence, hidden), key and value (batch, keys, hidden) (cross- or
    self-attention with separate projections): Q, K, V plus their thirds of bias, then the
    heads of com.microsoft Attention (this module; key_padding_mask in its mask_index forms
    over the keys). Packed QKV or KV, 4-D (batch, heads, keys, size) keys and values, the
    key-value cache and cache_indirection are refused."""

    def expand(self, b: Builder) -> None:
        heads = _heads(b)
        _no_cache(b, (6, 7, 8, 9), (1, 2))
        b.require(0)
        if not b.input(1) or not b.input(2):
            b.refuse("packed QKV or KV (no separate key and value) is not supported")
        q, k, v = b.input(0), b.input(1), b.input(2)
        if b.input(3):
            bq, bk, bv = _split_qkv(b, b.input(3), None)
            q, k, v = b.op("Add", [q, bq]), b.op("Add", [k, bk]), b.op("Add", [v, bv])
        _attend(b, q, k, v, b.input(4), b.input(1), b.input(5), heads,
                bool(int(self.node.attrs.get("unidirectional", 0))), b.output(0))


class RotaryPositions(OpKernel):
    """(position_ids, input) -> (batch, sequence) int64 positions: position_ids itself when
    it is (batch, sequence), offset + s for every batch when it is one offset (shape (1) or
    ()); input is (batch, sequence, hidden) or (batch, heads, sequence, size)."""

    supports_exact = True

    def infer(self, ctx: InferContext) -> None:
        if ctx.dtype(0) != np.int64:
            ctx.fail(f"position_ids must be int64, not {ctx.dtype(0)}")
        xs, ps = tuple(ctx.shape(1)), tuple(ctx.shape(0))
        if len(xs) not in (3, 4):
            ctx.fail(f"input must be 3-D or 4-D, got shape {list(xs)}")
        batch, seq = xs[0], xs[len(xs) - 2]
        if ps not in ((), (1,), (batch, seq)):
            ctx.fail(f"position_ids of shape {list(ps)} must be one offset or "
                     f"[{batch}, {seq}]")
        ctx.set_output(0, np.dtype(np.int64), (batch, seq))
        ctx.prepared = (batch, seq, np.arange(seq, dtype=np.int64) if len(ps) < 2 else None)

    def run(self, ctx: RunContext) -> None:
        batch, seq, steps = ctx.prepared
        pos, out = ctx.flat_in[0], ctx.flat_out[0].reshape(batch, seq)
        if steps is not None:
            np.add(steps, pos[0], out=out)
        else:
            out[:] = pos.reshape(batch, seq)


class MsRotaryEmbedding(Lowered):
    """(input, position_ids, cos_cache, sin_cache): ai.onnx RotaryEmbedding (opset 23, the
    same rotation: interleaved pairs or the two halves of the rotated dimensions) with
    position_ids as an offset (1) or per token (batch, sequence); input (batch, sequence,
    hidden) with num_heads, or (batch, heads, sequence, size). is_packed_batching is
    refused; ``scale`` is not read by onnxruntime's CPU kernel either."""

    def expand(self, b: Builder) -> None:
        b.require(0, 1, 2, 3)
        a = self.node.attrs
        if int(a.get("is_packed_batching", 0)):
            b.refuse("is_packed_batching=1 is not supported")
        pos = b.op("RotaryPositions", [b.input(1), b.input(0)], domain="graphrt", opset=1)
        attrs = {k: int(a[k]) for k in ("interleaved", "num_heads", "rotary_embedding_dim")
                 if k in a}
        b.op("RotaryEmbedding", [b.input(0), b.input(2), b.input(3), pos],
             outputs=[b.output(0)], **attrs)


class CacheLengths(OpKernel):
    """(query, seqlens_k, total_sequence_length[, past_key]) -> query, unchanged, once the
    lengths are those of a cache graphrt's Attention keeps: either a first prompt (no past,
    total = sequence; seqlens_k[b] + 1 <= total, rows past it right padding) or a past of P
    positions for every batch (total = P + sequence = seqlens_k[b] + 1). A shared, partly
    filled buffer or a batch of unequal lengths is refused when it arrives."""

    supports_exact = True

    def infer(self, ctx: InferContext) -> None:
        for i in (1, 2):
            if ctx.dtype(i) != np.int32:
                ctx.fail(f"input {i} must be int32, not {ctx.dtype(i)}")
        qs = tuple(ctx.shape(0))
        if len(qs) != 3:
            ctx.fail(f"query of shape {list(qs)} must be (batch, sequence, hidden)")
        if tuple(ctx.shape(1)) != (qs[0],) or math.prod(ctx.shape(2)) != 1:
            ctx.fail(f"seqlens_k must be [{qs[0]}] and total_sequence_length one value")
        past = int(ctx.shape(3)[2]) if ctx.has_input(3) and len(ctx.shape(3)) == 4 else 0
        ctx.set_output(0, ctx.dtype(0), qs)
        ctx.prepared = (qs[1], past)

    def run(self, ctx: RunContext) -> None:
        seq, past = ctx.prepared
        q, lens, total = ctx.flat_in[0], ctx.flat_in[1], int(ctx.flat_in[2][0])
        if total != past + seq:
            ctx.node.fail(f"total_sequence_length {total} is not the past's {past} plus the "
                          f"sequence's {seq} (a shared key-value buffer is not supported)",
                          ErrorKind.UNSUPPORTED)
        if lens.size and (lens.max() + 1 > total or lens.min() < 0 or
                          (past and lens.min() + 1 != total)):
            ctx.node.fail(f"seqlens_k {lens.tolist()} must be total_sequence_length - 1 "
                          f"({total - 1}) for every batch once there is a past (a padded "
                          "batch is not supported)", ErrorKind.UNSUPPORTED)
        ctx.flat_out[0][:] = q


class GroupQueryAttention(Lowered):
    """(query, key, value[, past_key, past_value], seqlens_k, total_sequence_length[, ...,
    attention_bias]): causal grouped-query attention over the past and the new keys, query
    head h using key/value head h // (num_heads / kv_num_heads), the new keys appended to
    the (batch, kv heads, past, size) cache as present_key/present_value: ai.onnx
    Attention with is_causal, its past and present, scale and softcap, after
    ``CacheLengths`` has checked the lengths. Refused: packed QKV, do_rotary,
    local_window_size, smooth_softmax, head_sink, position_ids."""

    def expand(self, b: Builder) -> None:
        a = self.node.attrs
        heads = _heads(b)
        kv = a.get("kv_num_heads")
        if kv is None:
            self.node.fail("attribute kv_num_heads is required")
        b.require(0, 5, 6)
        if not b.input(1) or not b.input(2):
            b.refuse("packed QKV (no separate key and value) is not supported")
        if int(a.get("do_rotary", 0)) or int(a.get("local_window_size", -1)) != -1 or \
                int(a.get("smooth_softmax", -1)) == 1:
            b.refuse("do_rotary, local_window_size and smooth_softmax are not supported")
        if any(b.input(i) for i in (7, 8, 9, 11)):
            b.refuse("cos/sin caches, position_ids and head_sink are not supported")
        if bool(b.input(3)) != bool(b.input(4)):
            self.node.fail("past_key and past_value must be given together")
        q = b.op("CacheLengths", trimmed([b.input(0), b.input(5), b.input(6), b.input(3)]),
                 domain="graphrt", opset=1)
        attrs = dict(q_num_heads=heads, kv_num_heads=int(kv), is_causal=1)
        if a.get("scale"):
            attrs["scale"] = float(a["scale"])
        if a.get("softcap"):
            attrs["softcap"] = float(a["softcap"])
        b.op("Attention", trimmed([q, b.input(1), b.input(2), b.input(10), b.input(3),
                                   b.input(4)]),
             outputs=trimmed([b.output(0), b.output(1), b.output(2)]), **attrs)
