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

import numpy as np
from numba import njit

from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext
from ..core.lowering import Builder, Lowered

F32 = np.dtype(np.float32)
LENGTHS, SPANS, KEYS, QUERY_KEYS = range(4)


@njit(cache=True, nogil=True)
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

    def run(self, ctx: RunContext) -> None:
        form, batch, rows, keys = ctx.prepared
        _mask_bias(ctx.flat_in[0], form, batch, rows, keys, np.float32(self.masked),
                   ctx.flat_out[0])


class MsAttention(Lowered):
    def expand(self, b: Builder) -> None:
        a = self.node.attrs
        heads = a.get("num_heads")
        if heads is None:
            self.node.fail("attribute num_heads is required")
        if b.input(4) or b.input(6) or b.output(1):
            b.refuse("past and present (the key-value cache) are not supported")
        if int(a.get("do_rotary", 0)) or int(a.get("past_present_share_buffer", 0)):
            b.refuse("do_rotary and past_present_share_buffer are not supported")
        b.require(0, 1)
        qkv = b.op("MatMul", [b.input(0), b.input(1)])
        if b.input(2):
            qkv = b.op("Add", [qkv, b.input(2)])
        sizes = a.get("qkv_hidden_sizes")
        q, k, v = b.temp(), b.temp(), b.temp()
        if sizes:
            b.op("Split", [qkv, b.const([int(s) for s in sizes], np.int64)], outputs=[q, k, v],
                 axis=-1)
        else:
            b.op("Split", [qkv], outputs=[q, k, v], axis=-1, num_outputs=3)
        bias = ""
        if b.input(3):
            bias = b.op("MaskBias", [b.input(3), b.input(0)], domain="graphrt", opset=1,
                        masked=float(a.get("mask_filter_value", -10000.0)))
        if b.input(5):
            bias = b.op("Add", [bias, b.input(5)]) if bias else b.input(5)
        if bias:
            bias = b.op("CastLike", [bias, b.input(0)])
        attrs = dict(q_num_heads=int(heads), kv_num_heads=int(heads),
                     is_causal=int(a.get("unidirectional", 0)))
        if a.get("scale"):
            attrs["scale"] = float(a["scale"])
        b.op("Attention", [q, k, v] + ([bias] if bias else []), outputs=[b.output(0)], **attrs)
