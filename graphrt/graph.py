"""CompiledGraph: operators resolved, dead nodes dropped, weights owned; no input shapes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes
from .errors import ErrorKind, SessionError
from .ir import IrModel, TensorInfo
from .kernels.base import NodeInfo, OpKernel
from .kernels.table import DEFAULT, OperatorTable
from .options import CancelToken, SessionOptions, WeightStorage


@dataclass(frozen=True)
class CompiledNode:
    info: NodeInfo
    kernel: OpKernel
    inputs: tuple[int, ...]     # value ids; -1 marks a missing optional input
    outputs: tuple[int, ...]    # value ids; -1 marks an unused optional output


class CompiledGraph:
    """The model's graph with every value numbered and every node bound to its kernel."""

    def __init__(self, model: IrModel, options: SessionOptions,
                 table: OperatorTable = DEFAULT, cancel: CancelToken | None = None):
        if options.weight_storage is not WeightStorage.ORIGINAL:
            raise SessionError(ErrorKind.UNSUPPORTED,
                               f"weight_storage={options.weight_storage.value} is not implemented yet")
        g = model.graph
        self.exact = options.exact
        self.value_names: list[str] = []
        ids: dict[str, int] = {}

        def define(name: str, where: str | None) -> int:
            if name in ids:
                raise SessionError(ErrorKind.INVALID_MODEL, f"value {name!r} is defined twice", where)
            ids[name] = len(self.value_names)
            self.value_names.append(name)
            return ids[name]

        self.constants: dict[int, np.ndarray] = {}
        for name, arr in g.initializers.items():
            self.constants[define(name, None)] = arr
        self.inputs: list[TensorInfo] = []
        self.input_ids: list[int] = []
        for info in g.inputs:
            if info.name in g.initializers:
                continue        # an initializer listed as input (IR < 4): a constant here
            if info.kind != "tensor":
                raise SessionError(ErrorKind.UNSUPPORTED, f"input {info.name!r} is a {info.kind}; graphrt runs tensors only so far")
            if info.dtype is None:
                if info.elem_code:
                    raise SessionError(ErrorKind.UNSUPPORTED, f"input {info.name!r} has element type "
                                       f"{dtypes.name_of_code(info.elem_code)}, which graphrt does not support")
                raise SessionError(ErrorKind.INVALID_MODEL, f"input {info.name!r} has no element type")
            self.inputs.append(info)
            self.input_ids.append(define(info.name, None))

        wired = []
        for n in g.nodes:
            for name in n.inputs:
                if name and name not in ids:
                    raise SessionError(ErrorKind.INVALID_MODEL,
                                       f"{n.op_type} reads {name!r}, which no earlier node, "
                                       "input or initializer defines", n.name)
            ins = tuple(ids[x] if x else -1 for x in n.inputs)
            outs = tuple(define(x, n.name) if x else -1 for x in n.outputs)
            wired.append((n, ins, outs))

        self.outputs: list[TensorInfo] = []
        self.output_ids: list[int] = []
        for info in g.outputs:
            if info.name not in ids:
                raise SessionError(ErrorKind.INVALID_MODEL, f"output {info.name!r} is never computed")
            if info.kind != "tensor":
                raise SessionError(ErrorKind.UNSUPPORTED, f"output {info.name!r} is a {info.kind}; graphrt runs tensors only so far")
            self.outputs.append(info)
            self.output_ids.append(ids[info.name])

        live = _live_nodes(wired, set(self.output_ids))
        missing: dict[str, list[str]] = {}
        resolved = []
        for n, ins, outs in (wired[i] for i in live):
            _check(cancel)
            opset = model.opsets.get(n.domain)
            opdef = table.resolve(n.domain, n.op_type, opset) if opset is not None else None
            label = f"{n.domain + '.' if n.domain else ''}{n.op_type} (opset {opset})"
            if opdef is None:
                missing.setdefault(label, []).append(n.name)
                continue
            resolved.append((n, ins, outs, opdef, opset))
        if missing:
            names = [x for ns in missing.values() for x in ns]
            raise SessionError(ErrorKind.UNSUPPORTED_OPERATOR,
                               "no kernel for " + ", ".join(
                                   f"{k} used by {', '.join(v)}" for k, v in sorted(missing.items())),
                               names[0], tuple(sorted(missing)))

        self.nodes: list[CompiledNode] = []
        for n, ins, outs, opdef, opset in resolved:
            _check(cancel)
            info = NodeInfo(n.name, n.op_type, n.domain, opset, n.attrs, len(ins), len(outs))
            self.nodes.append(CompiledNode(info, opdef.factory(info), ins, outs))

        if self.exact:
            lacking = sorted({c.info.op_type for c in self.nodes if not c.kernel.supports_exact})
            if lacking:
                first = next(c.info.name for c in self.nodes if not c.kernel.supports_exact)
                raise SessionError(ErrorKind.EXACT_MODE_UNAVAILABLE,
                                   "exact mode has no kernel for " + ", ".join(lacking),
                                   first, tuple(lacking))

    @property
    def n_values(self) -> int:
        return len(self.value_names)


def _live_nodes(wired, wanted: set[int]) -> list[int]:
    """Indices of nodes with a path to a graph output, in graph order."""
    need = set(wanted)
    keep = []
    for i in range(len(wired) - 1, -1, -1):
        _, ins, outs = wired[i]
        if any(o in need for o in outs if o >= 0):
            keep.append(i)
            need.update(x for x in ins if x >= 0)
    return keep[::-1]


def _check(cancel):
    if cancel is not None and cancel.cancelled:
        raise SessionError(ErrorKind.CANCELLED, "cancelled while creating the session")
