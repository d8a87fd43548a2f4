"""Operators defined as small graphs of other operators.

Some operators are by definition a fixed composition of standard ones: most of the
com.microsoft fusions that onnxruntime's tools write (SkipLayerNormalization is an Add and a
LayerNormalization, MatMulIntegerToFloat a MatMulInteger, a Cast and a Mul). Their table
line names a ``Lowered`` class instead of a kernel: before any kernel is made, the compiled
graph replaces each such node by the nodes its ``expand`` writes, and those are planned,
fused, scheduled and checked in exact mode like the model's own. A composition therefore
gives the bits of its standard operators; where onnxruntime computes the same maths in
another order, the documented tolerance is that of the reordering.

Every node of an expansion has the lowered node's name, so an error names the node the
model has (its message starts with the standard operator that refused); intermediate values
are named ``<node>::<k>``.
"""
from __future__ import annotations

import numpy as np

from ...errors import ErrorKind
from ...ir import IrNode
from .base import NodeInfo

OPSET = 24      # expansions use the operators' current definitions, whatever the model imports


def trimmed(names) -> list[str]:
    """``names`` without their trailing "" (absent optional inputs or unread outputs)."""
    names = list(names)
    while names and not names[-1]:
        names.pop()
    return names


class Lowered:
    """Base of an operator written as other operators: subclasses define ``expand``.
    Exact mode holds where every node of the expansion has an exact kernel (the compiled
    graph checks those nodes as it checks the model's own)."""

    supports_exact = True

    def __init__(self, node: NodeInfo):
        self.node = node

    def expand(self, b: "Builder") -> None:
        raise NotImplementedError


class Builder:
    """Writes the nodes of one expansion. ``inputs`` and ``outputs`` are the lowered node's
    value names ("" for an absent optional one)."""

    def __init__(self, node: NodeInfo, inputs, outputs):
        self.info = node
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.nodes: list[IrNode] = []
        self._k = 0

    def require(self, *idx: int) -> None:
        """Fail (naming the node) unless the inputs at ``idx`` are given."""
        for i in idx:
            if not self.input(i):
                self.info.fail(f"input {i} is required")

    def input(self, i: int) -> str:
        """Input ``i``'s name, "" when absent."""
        return self.inputs[i] if i < len(self.inputs) else ""

    def output(self, i: int) -> str:
        """Output ``i``'s name, "" when the model does not read it."""
        return self.outputs[i] if i < len(self.outputs) else ""

    def temp(self) -> str:
        self._k += 1
        return f"{self.info.name}::{self._k}"

    def op(self, op_type: str, inputs, outputs=None, domain: str = "", opset: int = OPSET,
           **attrs) -> str:
        """Appends one node (of the default domain's ``opset`` unless told); returns its
        first output's name (a new intermediate value unless ``outputs`` names them)."""
        outs = [self.temp()] if outputs is None else list(outputs)
        self.nodes.append(IrNode(self.info.name, op_type, domain, list(inputs), outs, attrs,
                                 opset))
        return outs[0]

    def const(self, value, dtype) -> str:
        """A Constant node holding ``value`` as ``dtype``."""
        return self.op("Constant", [], value=np.asarray(value, dtype=dtype))

    def refuse(self, message: str) -> None:
        self.info.fail(message, ErrorKind.UNSUPPORTED)
