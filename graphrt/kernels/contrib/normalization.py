"""com.microsoft normalisations over the last axis, compositions of standard operators:

  SkipLayerNormalization(input, skip, gamma[, beta[, bias]]):
      s = (input + skip) + bias;  output = LayerNormalization(s, gamma, beta, axis=-1)
      outputs: output, mean, inv_std_var (float32, shape [..., 1]), input_skip_bias_sum = s
  SkipSimplifiedLayerNormalization(input, skip, gamma[, bias]):
      s as above;  output = s / sqrt(mean(s^2) + epsilon) * gamma  (RMSNormalization)
  SimplifiedLayerNormalization(X, scale) (onnxruntime writes it in the default domain):
      X / sqrt(mean(X^2) + epsilon) * scale over the axes from ``axis`` on

The statistics outputs of the simplified forms are refused (RMSNormalization has none).
"""
from __future__ import annotations

import numpy as np

from ..core.lowering import Builder, Lowered, trimmed


def skip_sum(b: Builder, bias_index: int, sum_output: int) -> str:
    """(input + skip) + bias, written to output ``sum_output`` when the model reads it."""
    named = b.output(sum_output)
    terms = [t for t in (b.input(0), b.input(1), b.input(bias_index)) if t]
    s = terms[0]
    for k, t in enumerate(terms[1:], 2):
        s = b.op("Add", [s, t], outputs=[named] if named and k == len(terms) else None)
    return s


class SkipLayerNormalization(Lowered):
    def expand(self, b: Builder) -> None:
        b.require(0, 1, 2)
        s = skip_sum(b, 4, 3)
        b.op("LayerNormalization", [s, b.input(2), b.input(3)],
             outputs=trimmed([b.output(0), b.output(1), b.output(2)]), axis=-1,
             epsilon=float(self.node.attr("epsilon", 1e-12)))


def _rms(b: Builder, x: str, scale: str, stats, axis: int, epsilon: float) -> None:
    if any(stats):
        b.refuse("the inv_std_var and mean outputs are not supported")
    b.op("RMSNormalization", [x, scale], outputs=[b.output(0)], axis=axis, epsilon=epsilon)


class SkipSimplifiedLayerNormalization(Lowered):
    def expand(self, b: Builder) -> None:
        b.require(0, 1, 2)
        s = skip_sum(b, 3, 3)
        _rms(b, s, b.input(2), (b.output(1), b.output(2)), -1,
             float(self.node.attr("epsilon", 1e-12)))


class SimplifiedLayerNormalization(Lowered):
    def expand(self, b: Builder) -> None:
        b.require(0, 1)
        if int(self.node.attr("stash_type", 1)) != 1:
            b.refuse(f"stash_type {self.node.attr('stash_type')} is not supported (1 is)")
        _rms(b, b.input(0), b.input(1), (b.output(1),), int(self.node.attr("axis", -1)),
             float(self.node.attr("epsilon", 1e-5)))


class EmbedLayerNormalization(Lowered):
    """(input_ids, segment_ids, word, position and segment embeddings, gamma, beta, mask,
    position_ids):

        e[b, s] = word[ids[b, s]] + position[p] + segment[segment_ids[b, s]]
                  p = s, or position_ids[b, s] (position_ids of shape (1, S) broadcast)
        output = LayerNormalization(e, gamma, beta, axis=-1), embedding_sum = e
        mask_index[b] = the count of mask[b, :] == 1 (int32; zeros without a mask)
    """

    def expand(self, b: Builder) -> None:
        b.require(0, 2, 3, 5, 6)
        ids, seg, word, pos, seg_table, gamma, beta, mask, pos_ids = map(b.input, range(9))
        if not pos_ids:
            count = b.op("Squeeze", [b.op("Shape", [ids], start=1, end=2)])
            pos_ids = b.op("Range", [b.const(0, np.int64), count, b.const(1, np.int64)])
        terms = [b.op("Gather", [word, ids]), b.op("Gather", [pos, pos_ids])]
        if seg and seg_table:
            terms.append(b.op("Gather", [seg_table, seg]))
        total = b.output(2)
        e = terms[0]
        for k, t in enumerate(terms[1:], 2):
            e = b.op("Add", [e, t], outputs=[total] if total and k == len(terms) else None)
        b.op("LayerNormalization", [e, gamma, beta], outputs=[b.output(0)], axis=-1,
             epsilon=float(self.node.attr("epsilon", 1e-12)))
        if b.output(1):
            if mask:
                ones = b.op("Equal", [mask, b.op("CastLike", [b.const(1, np.int32), mask])])
                b.op("ReduceSum", [b.op("Cast", [ones], to=6), b.const([1], np.int64)],
                     outputs=[b.output(1)], keepdims=0)
            else:
                b.op("ConstantOfShape", [b.op("Shape", [ids], end=1)], outputs=[b.output(1)],
                     value=np.zeros(1, np.int32))
