"""Bit-preserving clean-ups: constant folding, identity removal, transpose and reshape
chains. Each changes where a value is computed, never how."""
from __future__ import annotations

import numpy as np

from ..graph import CompiledNode
from ..kernels.nn.dropout import Dropout
from ..kernels.tensor.layout import Transpose
from ..kernels.tensor.views import Identity, Reshape
from ..plan.build import evaluate_constant_node
from .graph import PassGraph


def fold_constants(pg: PassGraph) -> int:
    """A node whose inputs are all constants is run once now (the same kernel, so the same
    bits); its outputs become constants. Nodes with bodies or data-dependent or random
    outputs are left."""
    done = 0
    for node in pg.live():
        values = [pg.constant(i) for i in node.inputs]
        if any(v is None for v, i in zip(values, node.inputs) if i >= 0):
            continue
        outs = evaluate_constant_node(node, values, pg.exact)
        if outs is None:
            continue
        for o, v in zip(node.outputs, outs):
            if o >= 0:
                pg.set_constant(o, v)
        pg.replace([node], [])
        done += 1
    return done


def _is_inference_dropout(pg: PassGraph, node: CompiledNode, consumers) -> bool:
    if not isinstance(node.kernel, Dropout):
        return False
    training = pg.constant(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] >= 0 else None
    if len(node.inputs) > 2 and node.inputs[2] >= 0 and (training is None or bool(training)):
        return False
    mask_used = len(node.outputs) > 1 and node.outputs[1] >= 0 and \
        (consumers.get(node.outputs[1]) or pg.is_output(node.outputs[1]))
    return not mask_used


def eliminate_identities(pg: PassGraph) -> int:
    """x -> Identity -> y and inference Dropout: readers of y read x instead (# y = x)."""
    done = 0
    for node in pg.live():
        consumers = pg.consumers()
        if not (isinstance(node.kernel, Identity) or _is_inference_dropout(pg, node, consumers)):
            continue
        src, dst = node.inputs[0], node.outputs[0]
        if pg.is_output(dst) or src < 0:
            continue
        pg.rewire(dst, src)
        pg.replace([node], [])
        done += 1
    return done


def _collapse_pairs(pg: PassGraph, kernel_type, merge) -> int:
    """Until none is left: a node of ``kernel_type`` whose output only a second such node
    reads is replaced, with that node, by ``merge(first, second)`` (None: left as they are)."""
    done = 0
    changed = True
    while changed:
        changed = False
        consumers = pg.consumers()
        for first in pg.nodes:
            if not isinstance(first.kernel, kernel_type):
                continue
            second = pg.only_reader(first.outputs[0], consumers)
            if second is None or not isinstance(second.kernel, kernel_type):
                continue
            merged = merge(first, second)
            if merged is None:
                continue
            pg.replace([first, second], [merged])
            done += 1
            changed = True
            break
    return done


def collapse_transposes(pg: PassGraph) -> int:
    """Transpose(p2) after Transpose(p1) -> Transpose(p1[p2]) when both perms are given."""

    def merge(first, second):
        p1, p2 = first.info.attr("perm"), second.info.attr("perm")
        if p1 is None or p2 is None or len(p1) != len(p2):
            return None
        kernel = pg.make_kernel(second.info, Transpose, {"perm": [p1[i] for i in p2]}, 1)
        return CompiledNode(kernel.node, kernel, (first.inputs[0],), second.outputs)

    return _collapse_pairs(pg, Transpose, merge)


def collapse_reshapes(pg: PassGraph) -> int:
    """Reshape(s2) after Reshape(s1) -> Reshape(s2) when s2 is a constant with no 0 (whose
    meaning would depend on the intermediate shape)."""

    def merge(first, second):
        if second.inputs[0] != first.outputs[0]:
            return None
        target = pg.constant(second.inputs[1])
        if target is None or np.any(target == 0):
            return None
        return CompiledNode(second.info, second.kernel, (first.inputs[0], second.inputs[1]),
                            second.outputs)

    return _collapse_pairs(pg, Reshape, merge)


def sink_constant_nodes(pg: PassGraph) -> int:
    """A node that reads constants only (what folding left: a result larger than its inputs
    and 64 KiB, such as DequantizeLinear of a layer's int8 weights) moves to just before its
    first reader: its result lives for a step, not from the start of the run, so the slab
    holds one layer's dequantized weights at a time instead of all of them (quantizers put
    these nodes first). Random and subgraph nodes stay where they are; order only, so the
    bits are unchanged. Returns how many nodes moved."""
    before = list(pg.nodes)
    waiting: dict[int, CompiledNode] = {}       # output value -> node not placed yet
    placed = []
    for node in before:
        for i in node.inputs:
            held = waiting.get(i)
            if held is not None:
                for o in held.outputs:
                    waiting.pop(o, None)
                placed.append(held)
        k = node.kernel
        ins = [i for i in node.inputs if i >= 0]
        if ins and all(pg.constant(i) is not None for i in ins) and k.constant_foldable \
                and not k.outputs_data_dependent:
            for o in node.outputs:
                if o >= 0:
                    waiting[o] = node
            continue
        placed.append(node)
    placed.extend(dict.fromkeys(waiting.values()))       # read by nothing but outputs
    pg.nodes[:] = placed
    where = {id(n): k for k, n in enumerate(before)}
    # a node that moved sits after a node that came after it
    return sum(1 for k, n in enumerate(placed) if any(where[id(m)] > where[id(n)]
                                                      for m in placed[:k]))


def pack_weights(pg: PassGraph) -> int:
    """A constant that one node reads, once, and whose kernel takes it over in a layout of
    its own (OpKernel.take_constant: a product's weights as the micro-kernel's panels, laid
    out now rather than at the first plan) stops being a value of the graph: the model's
    array is let go, so the weights are held once, not twice. The same layout the kernel
    made before, so the same bits. Returns how many constants were taken."""
    consumers = pg.consumers()
    taken: dict[int, tuple[CompiledNode, list]] = {}
    for vid, value in list(pg.g.constants.items()):
        node = pg.only_reader(vid, consumers)
        if node is None or node.inputs.count(vid) != 1:
            continue
        j = node.inputs.index(vid)
        if node.kernel.take_constant(j, value, pg.g.value_names[vid], pg.exact):
            taken.setdefault(id(node), (node, []))[1].append(j)
            del pg.g.constants[vid]
    for node, positions in taken.values():
        pg.replace([node], [CompiledNode(node.info, node.kernel, tuple(
            -1 if j in positions else i for j, i in enumerate(node.inputs)), node.outputs)])
    return sum(len(p) for _, p in taken.values())
