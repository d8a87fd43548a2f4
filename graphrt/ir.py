"""The model as graphrt holds it after import: plain Python objects, no protobuf."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output: name, element type, dims and kind.

    ``dims`` holds ints for fixed extents, strings for symbolic ones and None for unknown
    ones; ``dims`` itself is None when not even the rank is known. ``kind`` is "tensor",
    "sequence", "optional" or "map" (``elem_code`` then the values' type).
    """

    name: str
    dtype: np.dtype | None
    dims: tuple | None
    kind: str = "tensor"
    elem_code: int = 0          # the ONNX element type code (also when numpy has no dtype)
    key_code: int = 0           # a map's key type code
    type_name: str = ""         # the full type as text: "tensor(float)", "seq(map(int64,tensor(float)))"
    denotations: tuple | None = None    # each axis's denotation ("DATA_BATCH", ...), when any has one

    @property
    def rank(self) -> int | None:
        return None if self.dims is None else len(self.dims)


@dataclass
class IrNode:
    name: str
    op_type: str
    domain: str
    inputs: list[str]            # "" marks a missing optional input
    outputs: list[str]           # "" marks an unused optional output
    attrs: dict = field(default_factory=dict)
    opset: int | None = None     # the domain's opset when not the model's (lowered nodes)


@dataclass
class IrGraph:
    name: str
    nodes: list[IrNode]
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    initializers: dict[str, np.ndarray]
    value_info: dict[str, TensorInfo] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelInfo:
    """What a model says about itself (ModelProto's and GraphProto's descriptive fields)."""

    producer_name: str = ""
    producer_version: str = ""
    domain: str = ""
    description: str = ""
    version: int | None = None                      # model_version, None when not set
    graph_name: str = ""
    graph_description: str = ""
    metadata: dict = field(default_factory=dict)     # metadata_props, key -> value


@dataclass
class IrModel:
    graph: IrGraph
    opsets: dict[str, int]       # domain ("" is the default ONNX domain) -> version
    ir_version: int = 0
    producer: str = ""
    info: ModelInfo = field(default_factory=ModelInfo)
