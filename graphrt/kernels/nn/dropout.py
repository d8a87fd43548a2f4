"""Dropout: the identity at inference (training_mode false), and the random mask otherwise.
"""
from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext
from ..core.fill import Fill


EXACT = False


class Dropout(OpKernel):
    """Inference: y = x, mask (optional output 1) all true (all 1 before opset 10).

    Training (opset 12+, input 2 true) with ratio r > 0 (input 1, default 0.5): keep[i] =
    u[i] >= r with u numpy's legacy MT19937 uniform stream seeded by the ``seed`` attribute
    (what onnx's reference uses); y = x * (1 / (1 - r)) where kept, else 0. Without a seed the
    result would be random: not supported."""

    supports_exact = True
    in_place_input = True

    def __init__(self, node):
        super().__init__(node)
        seed = node.attr("seed")
        self.seed = None if seed is None else int(seed)
        self.from_inputs = node.opset >= 12
        self.mask_dtype = np.dtype(np.bool_) if node.opset >= 10 else None

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _dt.FLOATS)
        shape = tuple(ctx.shape(0))
        ratio = 0.0
        if self.from_inputs and ctx.has_input(2):
            train = ctx.value(2)
            ratio = ctx.value(1) if ctx.has_input(1) else np.array(0.5)
            if train is None or ratio is None:
                ctx.require_run_time_values()
                return
            ratio = float(ratio.reshape(-1)[0]) if bool(train.reshape(-1)[0]) else 0.0
            if not 0.0 <= ratio < 1.0:
                ctx.bad_input(f"ratio {ratio} is not in [0, 1)")
            if ratio and self.seed is None:
                ctx.fail("training-mode Dropout without a seed is random; not supported",
                         ErrorKind.UNSUPPORTED)
        ctx.set_output(0, dt, shape)
        mask_dt = self.mask_dtype or dt
        if self.node.n_outputs > 1:
            ctx.set_output(1, mask_dt, shape)
        ctx.prepared = (ratio, Fill(mask_dt, 1, math.prod(shape)))

    def run(self, ctx: RunContext) -> None:
        ratio, ones = ctx.prepared
        x, y = ctx.flat_in[0], ctx.flat_out[0]
        mask = ctx.flat_out[1] if len(ctx.flat_out) > 1 else None
        if not ratio:
            if not np.may_share_memory(x, y):
                y[...] = x
            if mask is not None:
                ones(mask)
            return
        keep = np.random.RandomState(self.seed).uniform(0.0, 1.0, x.size) >= ratio
        np.multiply(x, x.dtype.type(1.0 / (1.0 - ratio)), out=y)
        y[~keep] = 0
        if mask is not None:
            mask[...] = keep
