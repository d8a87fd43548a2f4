"""The optimised graph as an ONNX model, so users can see what the passes did (like
onnxruntime's optimized_model_filepath). Fused nodes appear in the domain "graphrt"."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import dtypes
from ..ir import IrGraph, TensorInfo
from ..kernels.elementwise.fused import FusedEpilogue

DOMAIN = "graphrt"


def to_onnx(graph, opsets: dict) -> onnx.ModelProto:
    names = graph.value_names

    def name(vid):
        return names[vid] if vid >= 0 else ""

    nodes = []
    taken = []          # weights that kernels took over (pack_weights), as the model had them
    for n in graph.nodes:
        k = n.kernel
        # captured outer values are implicit in ONNX: only a node's declared inputs are written
        ins = [name(i) for i in (n.inputs if isinstance(k, FusedEpilogue) else n.inputs[:n.info.n_inputs])]
        for j, (weight, value) in k.taken_constants().items():
            ins[j] = weight
            taken.append(numpy_helper.from_array(value, weight))
        if isinstance(k, FusedEpilogue):
            nodes.append(helper.make_node("FusedEpilogue", ins, [name(o) for o in n.outputs], n.info.name,
                                          domain=DOMAIN, stages=k.describe()))
        else:
            nodes.append(helper.make_node(n.info.op_type, ins, [name(o) for o in n.outputs], n.info.name,
                                          domain=n.info.domain, **_attrs(n.info.attrs, opsets)))
    inits = [numpy_helper.from_array(np.asarray(v), names[vid]) for vid, v in graph.constants.items()
             if v.dtype != object] + taken
    g = helper.make_graph(nodes, "optimized", [_info(i) for i in graph.inputs],
                          [_info(o) for o in graph.outputs], inits)
    ops = [helper.make_opsetid(d, v) for d, v in opsets.items()] + [helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(g, opset_imports=ops, producer_name="graphrt")


def _attrs(attrs: dict, opsets: dict) -> dict:
    out = {}
    for key, v in attrs.items():
        if isinstance(v, IrGraph):
            out[key] = _graph(v, opsets)
        elif isinstance(v, np.ndarray):
            out[key] = numpy_helper.from_array(v)
        elif isinstance(v, tuple):            # a (kind, element code) type description
            continue
        else:
            out[key] = v
    return out


def _graph(g: IrGraph, opsets: dict) -> onnx.GraphProto:
    nodes = [helper.make_node(n.op_type, n.inputs, n.outputs, n.name, domain=n.domain,
                              **_attrs(n.attrs, opsets)) for n in g.nodes]
    inits = [numpy_helper.from_array(v, k) for k, v in g.initializers.items()]
    return helper.make_graph(nodes, g.name, [_info(i) for i in g.inputs], [_info(o) for o in g.outputs], inits)


def _info(info: TensorInfo) -> onnx.ValueInfoProto:
    code = dtypes.to_code(info.dtype) if info.dtype is not None and info.kind == "tensor" else 0
    if info.kind == "sequence":
        return helper.make_tensor_sequence_value_info(info.name, info.elem_code, None)
    return helper.make_tensor_value_info(info.name, code, list(info.dims) if info.dims is not None else None)
