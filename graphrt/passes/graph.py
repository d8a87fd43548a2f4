"""The mutable, shape-free graph that passes edit, and the pass record.

A PassGraph works on the compiled graph's own lists: nodes in dependency order, value ids
with names, constants, graph outputs. Passes replace nodes, add values and constants and
make kernels; a fused node keeps the NodeInfo of a node it replaces, so errors still name an
operator of the model.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..graph import CompiledNode
from ..kernels.core.base import NodeInfo
from ..options import OptimizationLevel

LEVELS = {OptimizationLevel.NONE: 0, OptimizationLevel.BASIC: 1, OptimizationLevel.ALL: 2}


@dataclass(frozen=True)
class GraphPass:
    name: str
    min_level: OptimizationLevel
    preserves_bits: bool
    run: Callable[["PassGraph"], int]       # returns how many rewrites it made


class PassGraph:
    def __init__(self, graph, table, exact: bool):
        self.g = graph
        self.table = table
        self.exact = exact
        self._edits = 0         # edits of the node list so far (replace, rewire, remove_unread)

    # -- reading -----------------------------------------------------------------------
    @property
    def nodes(self) -> list[CompiledNode]:
        return self.g.nodes

    def constant(self, vid: int):
        return self.g.constants.get(vid) if vid >= 0 else None

    def producers(self) -> dict[int, CompiledNode]:
        return {o: n for n in self.g.nodes for o in n.outputs if o >= 0}

    def consumers(self) -> dict[int, list[CompiledNode]]:
        out: dict[int, list[CompiledNode]] = {}
        for n in self.g.nodes:
            for i in set(n.inputs):
                if i >= 0:
                    out.setdefault(i, []).append(n)
        return out

    def live(self):
        """The nodes as they stand, yielded one by one while the pass edits the list: a node
        that an earlier rewrite removed or replaced is skipped, the first not yielded yet comes
        next. Between edits (replace, rewire, remove_unread: passes edit the list through
        them) the walk goes on from the last node yielded; after one it looks
        from the start again (a look from the start for every node cost O(N^2): about a third
        of a BERT's passes)."""
        seen = set()
        nodes = self.g.nodes
        at, edits = 0, self._edits
        while True:
            if edits != self._edits:
                at, edits = 0, self._edits
            while at < len(nodes) and id(nodes[at]) in seen:
                at += 1
            if at == len(nodes):
                return
            seen.add(id(nodes[at]))
            yield nodes[at]

    def is_output(self, vid: int) -> bool:
        return vid in self.g.output_ids

    def only_reader(self, vid: int, consumers) -> CompiledNode | None:
        """The single node reading vid, when exactly one does and vid is no graph output."""
        readers = consumers.get(vid, [])
        return readers[0] if len(readers) == 1 and not self.is_output(vid) else None

    # -- writing -----------------------------------------------------------------------
    def add_value(self, name: str) -> int:
        self.g.value_names.append(f"{name}#{len(self.g.value_names)}")
        return len(self.g.value_names) - 1

    def set_constant(self, vid: int, value: np.ndarray) -> None:
        self.g.constants[vid] = np.ascontiguousarray(value) if np.ndim(value) else np.asarray(value)

    def add_constant(self, name: str, value) -> int:
        vid = self.add_value(name)
        self.set_constant(vid, np.asarray(value))
        return vid

    def make_kernel(self, like: NodeInfo, cls, attrs: dict, n_inputs: int, n_outputs: int = 1):
        """A kernel of class ``cls`` (from the operator table) for a new node that keeps
        ``like``'s name; the opset is ``like``'s where the table line serves it."""
        defs = [d for d in self.table.defs() if d.makes(cls)]
        if not defs:
            return None
        opset = like.opset if like.domain == "" else 0
        opdef = next((d for d in defs if d.serves(opset)), None) or max(defs, key=lambda d: d.since)
        info = replace(like, op_type=opdef.op_type, domain=opdef.domain,
                       opset=opset if opdef.serves(opset) else opdef.since, attrs=dict(attrs),
                       n_inputs=n_inputs, n_outputs=n_outputs, compile_body=None)
        return opdef.resolve()(info)

    def replace(self, old: list[CompiledNode], new: list[CompiledNode]) -> None:
        """Put ``new`` where the last of ``old`` stood (every input of new is made by then)."""
        ids = {id(n) for n in old}
        at = max(i for i, n in enumerate(self.g.nodes) if id(n) in ids)
        kept = [n for i, n in enumerate(self.g.nodes) if id(n) not in ids or i == at]
        pos = next(i for i, n in enumerate(kept) if id(n) in ids)
        kept[pos:pos + 1] = new
        self.g.nodes[:] = kept
        self._edits += 1

    def rewire(self, old: int, new: int) -> None:
        """Make every reader of value ``old`` read ``new`` instead."""
        self.g.nodes[:] = [n if old not in n.inputs else
                           CompiledNode(n.info, n.kernel, tuple(new if i == old else i for i in n.inputs),
                                        n.outputs) for n in self.g.nodes]
        self._edits += 1

    def remove_unread(self) -> int:
        """Drop nodes none of whose outputs is read or a graph output."""
        need = set(self.g.output_ids)
        keep = []
        for n in reversed(self.g.nodes):
            if any(o in need for o in n.outputs if o >= 0):
                keep.append(n)
                need.update(i for i in n.inputs if i >= 0)
        dropped = len(self.g.nodes) - len(keep)
        self.g.nodes[:] = keep[::-1]
        self._edits += 1
        return dropped
