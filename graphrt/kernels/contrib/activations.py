"""com.microsoft activations, each a composition of standard operators (core/lowering.py):

  Gelu(X)             = X/2 (1 + erf(X/sqrt 2))                        -> Gelu
  BiasGelu(A, B)      = Gelu(A + B), B broadcast over the last axis     -> Add, Gelu
  FastGelu(X[, bias]) = X/2 (1 + tanh(sqrt(2/pi) (X + 0.044715 X^3))), on X + bias when a
                        bias is given                                   -> [Add], Gelu(tanh)
  QuickGelu(X)        = X sigmoid(alpha X), alpha = 1.702 by default    -> Swish(alpha)
"""
from __future__ import annotations

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
