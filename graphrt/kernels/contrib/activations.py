"""com.microsoft activations, each a composition of standard operators (core/lowering.py):

  Gelu(X)             = X/2 (1 + erf(X/sqrt 2))                        -> Gelu
  BiasGelu(A, B)      = Gelu(A + B), B broadcast over the last axis     -> Add, Gelu
  FastGelu(X[, bias]) = X/2 (1 + tanh(sqrt(2/pi) (X + 0.044715 X^3))), on X + bias when a
                        bias is given                                   -> [Add], Gelu(tanh)
  QuickGelu(X)        = X sigmoid(alpha X), alpha = 1.702 by default    -> Swish(alpha)
  BiasSoftmax(X, B)   = softmax(X + B) over X's axes [axis:)            -> Add, Softmax(11)
"""
from __future__ import annotations

import math

from ..core.base import InferContext, OpKernel
from ..core.lowering import Builder, Lowered, trimmed


def _biased(b: Builder) -> str:
    """X, or X + bias when input 1 is given."""
    x, bias = b.input(0), b.input(1)
    return b.op("Add", [x, bias]) if bias else x


class MsGelu(Lowered):
    def expand(self, b: Builder) -> None:
        b.op("Gelu", [b.input(0)], outputs=[b.output(0)])


class BiasGelu(Lowered):
    def expand(self, b: Builder) -> None:
        b.require(0, 1)
        b.op("Gelu", [b.op("Add", [b.input(0), b.input(1)])], outputs=[b.output(0)])


class FastGelu(Lowered):
    def expand(self, b: Builder) -> None:
        b.op("Gelu", [_biased(b)], outputs=[b.output(0)], approximate="tanh")


class QuickGelu(Lowered):
    def expand(self, b: Builder) -> None:
        b.op("Swish", [b.input(0)], outputs=[b.output(0)],
             alpha=float(self.node.attr("alpha", 1.702)))


# FusedConv's activation -> (the standard operator, its attributes from activation_params)
_ACTIVATIONS = {
    "Relu": ("Relu", ()), "Tanh": ("Tanh", ()), "Sigmoid": ("Sigmoid", ()),
    "LeakyRelu": ("LeakyRelu", ("alpha",)), "HardSigmoid": ("HardSigmoid", ("alpha", "beta")),
}


class FusedConv(Lowered):
    """Conv(X, W, B) [+ Z], then ``activation`` (Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid,
    Clip with activation_params (alpha[, beta]) or (min, max))."""

    def expand(self, b: Builder) -> None:
        act = self.node.attr("activation", "")
        act = act.decode() if isinstance(act, bytes) else act
        params = [float(p) for p in self.node.attr("activation_params", [])]
        if act not in _ACTIVATIONS and act not in ("Clip", ""):
            b.refuse(f"activation {act!r} is not supported")
        if act == "Clip" and len(params) != 2:
            self.node.fail("Clip needs activation_params (min, max)")
        last = {} if act or b.input(3) else {"outputs": [b.output(0)]}
        attrs = {k: v for k, v in self.node.attrs.items()
                 if k not in ("activation", "activation_params")}
        y = b.op("Conv", trimmed([b.input(0), b.input(1), b.input(2)]), **last, **attrs)
        if b.input(3):
            y = b.op("Add", [y, b.input(3)], **({} if act else {"outputs": [b.output(0)]}))
        if act == "Clip":
            bounds = [b.op("CastLike", [b.const(p, "float32"), y]) for p in params]
            b.op("Clip", [y] + bounds, outputs=[b.output(0)])
        elif act:
            op, names = _ACTIVATIONS[act]
            b.op(op, [y], outputs=[b.output(0)], **dict(zip(names, params)))


class BiasRows(OpKernel):
    """(bias, data) -> bias viewed with data's rank, so that ordinary broadcasting adds
    BiasSoftmax's bias rows: data seen as rows of its axes [axis:), the bias holding
    bias.size / row size distinct rows that repeat over the axes just before ``axis``
    (``inner`` = 1: bias shape data[:k] + [1] * (axis - k) + data[axis:]) or over the
    leading axes (``inner`` = 0: [1] * k + data[k:])."""

    supports_exact = True
    view_of_input = True

    def __init__(self, node):
        super().__init__(node)
        self.axis = int(node.attr("axis", 1))
        self.inner = int(node.attr("inner", 1))

    def infer(self, ctx: InferContext) -> None:
        xs = tuple(ctx.shape(1))
        axis = self.axis + len(xs) if self.axis < 0 else self.axis
        if not 0 <= axis < len(xs):
            ctx.fail(f"axis {self.axis} is out of range for data of rank {len(xs)}")
        size = math.prod(ctx.shape(0))
        row = math.prod(xs[axis:])
        rows = size // row if row else 0
        for k in range(axis + 1):
            lead = xs[:k] if self.inner else xs[axis - k:axis]
            if math.prod(lead) == rows and rows * row == size:
                shape = xs[:k] + (1,) * (axis - k) + xs[axis:] if self.inner else \
                    (1,) * (axis - k) + xs[axis - k:]
                ctx.set_output(0, ctx.dtype(0), shape)
                return
        ctx.fail(f"bias of shape {list(ctx.shape(0))} does not give whole rows of "
                 f"{list(xs[axis:])} repeating over data {list(xs)}")


class BiasSoftmax(Lowered):
    """softmax(data + bias) over data's flattened axes [axis:) (Softmax of opset 11), the
    bias rows broadcast as ``BiasRows`` says (is_inner_broadcast). onnxruntime has no CPU
    kernel for it (its semantics here are its CUDA kernel's)."""

    def expand(self, b: Builder) -> None:
        b.require(0, 1)
        inner = self.node.attr("is_inner_broadcast")
        if inner is None:
            self.node.fail("attribute is_inner_broadcast is required")
        axis = int(self.node.attr("axis", 1))
        rows = b.op("BiasRows", [b.input(1), b.input(0)], domain="graphrt", opset=1,
                    axis=axis, inner=int(inner))
        b.op("Softmax", [b.op("Add", [b.input(0), rows])], outputs=[b.output(0)], opset=11,
             axis=axis)
