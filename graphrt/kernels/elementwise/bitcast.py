"""BitCast (opset 26): the input's bits read as another element type of the same bit width.

Same shape; every element keeps its bit pattern (little-endian, as numpy stores it on the
machines graphrt runs on). Types of different widths are a model error, as the operator's
specification says; so are strings. The 4- and 2-bit types, which numpy (through ml_dtypes)
keeps one per byte, carry their low bits over. Pure data movement: exact.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ..core.base import InferContext, OpKernel, RunContext
from .cast import target_type

_NARROW = {"INT4": 4, "UINT4": 4, "FLOAT4E2M1": 4, "INT2": 2, "UINT2": 2}
U8 = np.dtype(np.uint8)


def bit_width(dtype) -> int:
    """The ONNX bit width of an element type."""
    return _NARROW.get(_dt.name_of(dtype), np.dtype(dtype).itemsize * 8)


class BitCast(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.target = target_type(node, "bitcast")
        if self.target == object:
            node.fail("cannot bitcast to STRING")

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.dtype(0)
        if dt == object:
            ctx.fail("cannot bitcast STRING")
        if bit_width(dt) != bit_width(self.target):
            ctx.fail(f"{_dt.name_of(dt)} ({bit_width(dt)} bits) and {_dt.name_of(self.target)} "
                     f"({bit_width(self.target)} bits) differ in width")
        ctx.set_output(0, self.target, ctx.shape(0))
        bits = bit_width(dt)
        ctx.prepared = U8.type((1 << bits) - 1) if bits < 8 else None

    def run(self, ctx: RunContext) -> None:
        src = ctx.flat_in[0].view(U8)
        dst = ctx.flat_out[0].view(U8)
        if ctx.prepared is None:
            dst[...] = src
        else:
            np.bitwise_and(src, ctx.prepared, out=dst)
