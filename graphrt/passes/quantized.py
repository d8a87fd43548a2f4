"""QDQ groups as integer operators (fast mode).

onnxruntime's static quantizer (QDQ format) writes a quantized convolution as float
operators between quantize and dequantize steps:

    y_q = QuantizeLinear(Conv(DequantizeLinear(x_q, x_s, x_zp),
                              DequantizeLinear(w_q, w_s, w_zp),       (per tensor or axis 0)
                              DequantizeLinear(b_q, x_s * w_s)),      (optional, int32)
                         y_s, y_zp)

and a quantized product as QuantizeLinear(MatMul(DequantizeLinear(a), DequantizeLinear(b))).
Each group is rewritten as the integer operator with the same operands, QLinearConv or
QLinearMatMul: the products and sums exact in int32, then one requantization,
y_q = saturate(rint(acc * (x_s * w_s / y_s) + y_zp)). In real arithmetic the two are the
same; in floating point the group's float convolution and division round differently, so an
output can differ by one quantization step where a value falls next to a rounding boundary
(onnxruntime runs these groups as the integer operators too). A Relu between the product and
QuantizeLinear becomes a floor at y_zp (quantization is monotonic: Q(max(v, 0)) =
max(Q(v), y_zp)).

A bias that is the int32 dequantization with scale x_s * w_s becomes QLinearConv's bias; any
other constant bias b (onnxruntime's quantizer shares one dequantized bias between
convolutions whose scales differ) is added before rounding, as b / y_s in float64. A group
is rewritten only when every scale and zero point and the weights are constants, the scales
of x and y are single values and the operands are 8-bit.
"""
from __future__ import annotations

import sys

import numpy as np

from ..graph import CompiledNode
from ..kernels.elementwise.activations import Relu
from ..kernels.gemm.matmul import MatMul
from ..kernels.nn.conv import Conv
from ..kernels.tensor.views import Identity
from ..plan.build import evaluate_constant_node
from .graph import PassGraph

EIGHT_BIT = (np.dtype(np.uint8), np.dtype(np.int8))
_QUANTIZE = "graphrt.kernels.quant.quantize"


def _quantize():
    """kernels.quant.quantize, imported only where a node has one of its kernels (so that
    models without them never import the quantized kernels: about 1.2 MiB a process)."""
    return sys.modules[_QUANTIZE]
WINDOW = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _dequantized(pg: PassGraph, vid: int, producers):
    """(the DequantizeLinear node making vid, its constant scale, its zero point or None),
    or None when vid is not such a value or the node is blocked."""
    node = producers.get(vid)
    while node is not None and type(node.kernel) is Identity:   # the quantizer shares biases
        node = producers.get(node.inputs[0])
    if node is None or type(node.kernel) is not _quantize().DequantizeLinear or node.kernel.block:
        return None
    scale = pg.constant(node.inputs[1])
    has_zp = len(node.inputs) > 2 and node.inputs[2] >= 0
    zp = pg.constant(node.inputs[2]) if has_zp else None
    if scale is None or (has_zp and zp is None):
        return None
    return node, scale, zp


def _zero_point_id(pg: PassGraph, dq, like: np.dtype, count: int) -> int:
    """The zero point input of a DequantizeLinear, or a new constant of zeros."""
    node, _, zp = dq
    if zp is not None:
        return node.inputs[2]
    return pg.add_constant(pg.g.value_names[node.inputs[0]] + "_zp",
                           np.zeros(() if count == 1 else (count,), like))


def _activation(pg: PassGraph, vid: int, producers):
    """(x_q, x_s, x_zp ids) of a per-tensor 8-bit dequantization making vid."""
    dq = _dequantized(pg, vid, producers)
    if dq is None or dq[1].size != 1 or dq[2] is None or dq[2].dtype not in EIGHT_BIT:
        return None
    return dq[0].inputs[:3]


def _weights(pg: PassGraph, vid: int, producers, axis: int):
    """(w_q, w_s, w_zp ids, w_s) of an 8-bit constant dequantized per tensor or along
    ``axis`` (of the weights' rank), making vid."""
    dq = _dequantized(pg, vid, producers)
    if dq is None:
        return None
    node, scale, zp = dq
    w = pg.constant(node.inputs[0])
    if w is None or w.dtype not in EIGHT_BIT:
        return None
    if scale.size > 1 and (scale.ndim != 1 or node.kernel.axis % w.ndim != axis % w.ndim
                           or scale.size != w.shape[axis]):
        return None
    return node.inputs[0], node.inputs[1], _zero_point_id(pg, dq, w.dtype, scale.size), scale


def _bias(pg: PassGraph, vid: int, producers, x_scale, w_scale):
    """The bias: ("int", the int32 id) where it is the dequantization of an int32 constant
    with scale x_s * w_s and zero point 0, else ("float", its float value) where it is a
    constant or computed from constants only (a dequantization with another scale: the
    quantizer shares one bias between convolutions), else None."""
    dq = _dequantized(pg, vid, producers)
    if dq is not None:
        node, scale, zp = dq
        b = pg.constant(node.inputs[0])
        want = np.float64(x_scale.reshape(-1)[0]) * w_scale.astype(np.float64).reshape(-1)
        if b is not None and b.dtype == np.int32 and (zp is None or not np.any(zp)) and \
                np.allclose(scale.astype(np.float64).reshape(-1), want, rtol=1e-6, atol=0):
            return "int", node.inputs[0]
    value = _constant_value(pg, vid, producers)
    return None if value is None else ("float", value)


def _constant_value(pg: PassGraph, vid: int, producers, depth: int = 4):
    """vid's value where it is a constant or made from constants by a few nodes (computed
    with their kernels, so with the graph's bits), else None."""
    v = pg.constant(vid)
    node = producers.get(vid)
    if v is not None or node is None or depth == 0:
        return v
    values = [_constant_value(pg, i, producers, depth - 1) if i >= 0 else None
              for i in node.inputs]
    if any(x is None for x, i in zip(values, node.inputs) if i >= 0):
        return None
    outs = evaluate_constant_node(node, values, pg.exact)
    return None if outs is None else outs[node.outputs.index(vid)]


def _group(pg: PassGraph, q: CompiledNode, producers, consumers):
    """(product node, Relu node or None) feeding QuantizeLinear ``q`` as a group, or None."""
    if type(q.kernel) is not _quantize().QuantizeLinear or q.kernel.block or len(q.inputs) < 3 \
            or q.inputs[2] < 0:
        return None
    ys, yz = pg.constant(q.inputs[1]), pg.constant(q.inputs[2])
    if ys is None or yz is None or ys.size != 1 or yz.size != 1 or yz.dtype not in EIGHT_BIT \
            or (q.kernel.output_dtype is not None and q.kernel.output_dtype != yz.dtype):
        return None
    node, relu = producers.get(q.inputs[0]), None
    if node is not None and type(node.kernel) is Relu \
            and pg.only_reader(node.outputs[0], consumers) is q:
        relu, node = node, producers.get(node.inputs[0])
    if node is None or type(node.kernel) not in (Conv, MatMul) or \
            pg.only_reader(node.outputs[0], consumers) is not (relu or q):
        return None
    return node, relu


def recognize_qdq(pg: PassGraph) -> int:
    """The QDQ groups of the module docstring -> QLinearConv / QLinearMatMul."""
    if _QUANTIZE not in sys.modules:    # no node has a (de)quantization kernel
        return 0
    from ..kernels.quant.convolution import QLinearConv
    done = 0
    producers, consumers = pg.producers(), pg.consumers()
    for q in pg.live():
        found = _group(pg, q, producers, consumers)
        if found is None:
            continue
        node, relu = found
        x = _activation(pg, node.inputs[0], producers)
        conv = type(node.kernel) is Conv
        w = _weights(pg, node.inputs[1], producers, 0 if conv else -1)
        if x is None or w is None:
            continue
        inputs = [*x, *w[:3], q.inputs[1], q.inputs[2]]
        offset = None
        if conv and len(node.inputs) > 2 and node.inputs[2] >= 0:
            bias = _bias(pg, node.inputs[2], producers, pg.constant(x[1]), w[3])
            if bias is None or (bias[0] == "float" and bias[1].dtype.kind != "f"):
                continue
            if bias[0] == "int":
                inputs.append(bias[1])
            else:
                offset = bias[1].astype(np.float64).reshape(-1) / \
                    np.float64(pg.constant(q.inputs[1]).reshape(-1)[0])
        if conv:
            attrs = {k: v for k, v in node.info.attrs.items() if k in WINDOW}
            kernel = pg.make_kernel(node.info, QLinearConv, attrs, len(inputs))
        else:
            kernel = pg.make_kernel(node.info, _quantize().QLinearMatMul, {}, len(inputs))
        if kernel is None:
            continue
        kernel.floor_at_zero_point = relu is not None
        if offset is not None:
            kernel.offset = offset
        pg.replace([node] + ([relu] if relu else []) + [q],
                   [CompiledNode(kernel.node, kernel, tuple(inputs), q.outputs)])
        producers, consumers = pg.producers(), pg.consumers()
        done += 1
    return done
