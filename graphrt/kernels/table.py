"""The operator table: every OpDef graphrt has, as one literal list (no scanning)."""
from __future__ import annotations

from .activations import Relu
from .arithmetic import Add, Div, Mul, Sub
from .base import OpDef
from .cast import Cast
from .constants import Constant, Shape
from .control import If, Loop, Scan, SequenceMap
from .layout import Concat, Transpose
from .matmul import Gemm, MatMul
from .sequence import (ConcatFromSequence, Optional, OptionalGetElement, OptionalHasElement,
                       SequenceAt, SequenceConstruct, SequenceEmpty, SequenceErase, SequenceInsert,
                       SequenceLength, SplitToSequence)
from .softmax import Softmax
from .views import Flatten, Identity, Reshape, Squeeze, Unsqueeze

ALL: tuple[OpDef, ...] = (
    OpDef("", "Add", 7, None, Add),
    OpDef("", "Sub", 7, None, Sub),
    OpDef("", "Mul", 7, None, Mul),
    OpDef("", "Div", 7, None, Div),
    OpDef("", "Relu", 6, None, Relu),
    OpDef("", "MatMul", 1, None, MatMul),
    OpDef("", "Gemm", 7, None, Gemm),
    OpDef("", "Reshape", 5, None, Reshape),
    OpDef("", "Identity", 1, None, Identity),
    OpDef("", "Flatten", 1, None, Flatten),
    OpDef("", "Squeeze", 1, None, Squeeze),
    OpDef("", "Unsqueeze", 1, None, Unsqueeze),
    OpDef("", "Constant", 1, None, Constant),
    OpDef("", "Shape", 1, None, Shape),
    OpDef("", "Transpose", 1, None, Transpose),
    OpDef("", "Concat", 4, None, Concat),
    OpDef("", "If", 1, None, If),
    OpDef("", "Loop", 1, None, Loop),
    OpDef("", "Scan", 8, None, Scan),
    OpDef("", "SequenceMap", 17, None, SequenceMap),
    OpDef("", "SequenceEmpty", 11, None, SequenceEmpty),
    OpDef("", "SequenceConstruct", 11, None, SequenceConstruct),
    OpDef("", "SequenceInsert", 11, None, SequenceInsert),
    OpDef("", "SequenceErase", 11, None, SequenceErase),
    OpDef("", "SequenceAt", 11, None, SequenceAt),
    OpDef("", "SequenceLength", 11, None, SequenceLength),
    OpDef("", "ConcatFromSequence", 11, None, ConcatFromSequence),
    OpDef("", "SplitToSequence", 11, None, SplitToSequence),
    OpDef("", "Optional", 15, None, Optional),
    OpDef("", "OptionalHasElement", 15, None, OptionalHasElement),
    OpDef("", "OptionalGetElement", 15, None, OptionalGetElement),
    OpDef("", "Cast", 6, None, Cast),
    OpDef("", "Softmax", 1, None, Softmax),
)


class OperatorTable:
    """Lookup of OpDefs by (domain, op type, opset)."""

    def __init__(self, defs=ALL):
        self._by_key: dict[tuple[str, str], list[OpDef]] = {}
        for d in defs:
            self._by_key.setdefault((d.domain, d.op_type), []).append(d)

    def extended(self, defs) -> "OperatorTable":
        """A new table with ``defs`` added (user registries; graphrt's table is untouched)."""
        return OperatorTable([d for ds in self._by_key.values() for d in ds] + list(defs))

    def resolve(self, domain: str, op_type: str, opset: int) -> OpDef | None:
        for d in self._by_key.get((domain, op_type), ()):
            if d.serves(opset):
                return d
        return None


DEFAULT = OperatorTable()
