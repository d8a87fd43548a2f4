"""CompiledGraph: operators resolved, dead nodes dropped, weights owned; no input shapes.

Subgraph attributes (If, Loop, Scan, SequenceMap bodies) are compiled here too, each into a
nested CompiledGraph of the same mode. The values a body reads from any enclosing graph
become extra inputs of the node (after its declared inputs, in first-use order) and of the
nested graph (after the body's declared inputs), so planning and freeing see those reads.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes
from .errors import ErrorKind, SessionError
from .ir import IrGraph, IrModel, IrNode, TensorInfo
from .kernels.core.base import NodeInfo, OpKernel
from .kernels.core.lowering import Builder, Lowered
from .kernels.table import DEFAULT, OperatorTable
from .options import CancelToken, SessionOptions, WeightStorage


@dataclass(frozen=True)
class CompiledNode:
    info: NodeInfo
    kernel: OpKernel
    inputs: tuple[int, ...]     # value ids (declared, then captured); -1: missing optional
    outputs: tuple[int, ...]    # value ids; -1 marks an unused optional output


class CompiledGraph:
    """A graph with every value numbered and every node bound to its kernel.

    ``body_factory(compiled_graph)`` wraps a nested compiled body into what subgraph kernels
    run (the session layer provides it). ``captures`` name the extra inputs of a body;
    those in ``known`` (outer constants, by name) become constants of the body instead, and
    ``dropped`` lists their positions among the caller's inputs (declared, then captured),
    which Body.run leaves out."""

    def __init__(self, graph: IrGraph, opsets: dict, options: SessionOptions,
                 table: OperatorTable = DEFAULT, cancel: CancelToken | None = None,
                 body_factory=None, captures: tuple[str, ...] = (), is_body: bool = False,
                 known: dict | None = None, feedable: frozenset = frozenset()):
        if options.weight_storage is not WeightStorage.ORIGINAL:
            raise SessionError(ErrorKind.UNSUPPORTED,
                               f"weight_storage={options.weight_storage.value} is not implemented yet")
        g = graph
        self.exact = options.exact
        self.value_names: list[str] = []
        ids: dict[str, int] = {}

        def define(name: str, where: str | None) -> int:
            if name in ids:
                raise SessionError(ErrorKind.INVALID_MODEL, f"value {name!r} is defined twice", where)
            ids[name] = len(self.value_names)
            self.value_names.append(name)
            return ids[name]

        # graph inputs that an initializer also defines: the initializer is their default
        self.overridable = [i for i in g.inputs if i.name in g.initializers]
        unknown = set(feedable) - {i.name for i in self.overridable}
        if unknown:
            raise SessionError(ErrorKind.INVALID_INPUT, f"{sorted(unknown)} are not initializers that "
                               "the graph also lists as inputs: they cannot be fed")
        self.defaults = {name: g.initializers[name] for name in feedable}
        self.constants: dict[int, np.ndarray] = {}
        for name, arr in g.initializers.items():
            if name not in feedable:
                self.constants[define(name, None)] = arr
        known = known or {}
        for name in captures:
            if name in known:
                self.constants[define(name, None)] = known[name]
        self.inputs: list[TensorInfo] = []
        self.input_ids: list[int] = []
        declared = [i for i in g.inputs if i.name not in g.initializers or i.name in feedable]
        self.dropped = frozenset(len(declared) + k for k, c in enumerate(captures) if c in known)
        for info in declared + [TensorInfo(c, None, None) for c in captures if c not in known]:
            if info.dtype is None and not is_body:
                if info.elem_code:
                    raise SessionError(ErrorKind.UNSUPPORTED, f"input {info.name!r} has element type "
                                       f"{dtypes.name_of_code(info.elem_code)}, which graphrt does not support")
                raise SessionError(ErrorKind.INVALID_MODEL, f"input {info.name!r} has no element type")
            self.inputs.append(info)
            self.input_ids.append(define(info.name, None))

        wired = []
        for n in _lowered(g.nodes, opsets, table, cancel):
            caps = _free_names_of_node(n)
            for name in list(n.inputs) + caps:
                if name and name not in ids:
                    raise SessionError(ErrorKind.INVALID_MODEL,
                                       f"{n.op_type} reads {name!r}, which no earlier node, "
                                       "input or initializer defines", n.name)
            ins = tuple(ids[x] if x else -1 for x in list(n.inputs) + caps)
            outs = tuple(define(x, n.name) if x else -1 for x in n.outputs)
            wired.append((n, ins, outs, tuple(caps)))

        self.outputs: list[TensorInfo] = []
        self.output_ids: list[int] = []
        for info in g.outputs:
            if info.name not in ids:
                raise SessionError(ErrorKind.INVALID_MODEL, f"output {info.name!r} is never computed")
            self.outputs.append(info)
            self.output_ids.append(ids[info.name])
        # a top graph whose inputs and outputs are all tensors: its runs' plan keys and
        # outputs need no look for packed values (a body's captured values may be any kind)
        self.tensors_only = not is_body and all(
            i.kind == "tensor" for i in self.inputs + self.outputs)
        # the model's own statements of value types (value_info and the outputs): checked
        # against the shapes a plan computes, and only logged where they disagree
        self.declared = {ids[i.name]: i for i in list(g.value_info.values()) + self.outputs
                         if i.name in ids and i.kind == "tensor"}

        live = _live_nodes(wired, set(self.output_ids))
        missing: dict[str, list[str]] = {}
        resolved = []
        for n, ins, outs, caps in (wired[i] for i in live):
            _check(cancel)
            opset = _opset_of(n, opsets)
            opdef = table.resolve(n.domain, n.op_type, opset) if opset is not None else None
            label = f"{n.domain + '.' if n.domain else ''}{n.op_type} (opset {opset})"
            if opdef is None:
                missing.setdefault(label, []).append(n.name)
                continue
            resolved.append((n, ins, outs, caps, opdef, opset))
        if missing:
            names = [x for ns in missing.values() for x in ns]
            raise SessionError(ErrorKind.UNSUPPORTED_OPERATOR,
                               "no kernel for " + ", ".join(
                                   f"{k} used by {', '.join(v)}" for k, v in sorted(missing.items())),
                               names[0], tuple(sorted(missing)))

        made_constants: dict[int, np.ndarray] = {}      # outputs of Constant nodes so far

        def body_compiler(caps):
            # captured constants (initializers, and Constant nodes' outputs) are the body's
            # own: its plans fold what depends on them and never copy them in per call
            known = {c: v for c in caps
                     if (v := self.constants.get(ids[c], made_constants.get(ids[c]))) is not None}

            def compile_body(body: IrGraph):
                if body_factory is None:
                    raise SessionError(ErrorKind.UNSUPPORTED, "subgraphs need a session to run them")
                return body_factory(CompiledGraph(body, opsets, options, table, cancel, body_factory,
                                                  caps, is_body=True, known=known))
            return compile_body

        # the IrGraph, for kernels made over the graph (Gradient), while the kernels are
        # made: not after, so that no node keeps the model's arrays alive
        making = [g]

        def scope():
            return making[0] if making else None

        self.nodes: list[CompiledNode] = []
        for n, ins, outs, caps, opdef, opset in resolved:
            _check(cancel)
            info = NodeInfo(n.name, n.op_type, n.domain, opset, n.attrs, len(n.inputs), len(outs),
                            body_compiler(caps), scope)
            kernel = _make_kernel(opdef, info)
            if kernel.fixed_output is not None and outs[0] >= 0:
                made_constants[outs[0]] = kernel.fixed_output
            self.nodes.append(CompiledNode(info, kernel, ins, outs))
        making.clear()

        if self.exact:
            lacking = sorted({c.info.op_type for c in self.nodes if not c.kernel.supports_exact})
            if lacking:
                first = next(c.info.name for c in self.nodes if not c.kernel.supports_exact)
                raise SessionError(ErrorKind.EXACT_MODE_UNAVAILABLE,
                                   "exact mode has no kernel for " + ", ".join(lacking),
                                   first, tuple(lacking))

    @classmethod
    def from_model(cls, model: IrModel, options: SessionOptions, table: OperatorTable = DEFAULT,
                   cancel: CancelToken | None = None, body_factory=None,
                   feedable: frozenset = frozenset()) -> "CompiledGraph":
        """``feedable`` names overridable initializers to make inputs (fed, or their
        initializer when not)."""
        return cls(model.graph, model.opsets, options, table, cancel, body_factory,
                   feedable=frozenset(feedable))

    @property
    def n_values(self) -> int:
        return len(self.value_names)


def _graphs_of(value) -> list[IrGraph]:
    if isinstance(value, IrGraph):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, IrGraph)]
    return []


def free_names(g: IrGraph) -> list[str]:
    """Names ``g`` reads (its nested bodies included) that it does not define, in first-use
    order."""
    defined = {i.name for i in g.inputs} | set(g.initializers)
    out: list[str] = []
    for n in g.nodes:
        for x in list(n.inputs) + _free_names_of_node(n):
            if x and x not in defined and x not in out:
                out.append(x)
        defined.update(o for o in n.outputs if o)
    for o in g.outputs:
        if o.name and o.name not in defined and o.name not in out:
            out.append(o.name)
    return out


def _free_names_of_node(n) -> list[str]:
    out: list[str] = []
    for value in n.attrs.values():
        for body in _graphs_of(value):
            for x in free_names(body):
                if x not in out:
                    out.append(x)
    return out


def _live_nodes(wired, wanted: set[int]) -> list[int]:
    """Indices of nodes with a path to a graph output, in graph order."""
    need = set(wanted)
    keep = []
    for i in range(len(wired) - 1, -1, -1):
        ins, outs = wired[i][1], wired[i][2]
        if any(o in need for o in outs if o >= 0):
            keep.append(i)
            need.update(x for x in ins if x >= 0)
    return keep[::-1]


def _opset_of(n: IrNode, opsets: dict) -> int | None:
    return n.opset if n.opset is not None else opsets.get(n.domain)


def _lowered(nodes, opsets: dict, table: OperatorTable, cancel) -> list[IrNode]:
    """``nodes`` with each node of a Lowered operator replaced by its expansion (itself
    lowered again: a composition may use another)."""
    out: list[IrNode] = []
    todo = list(reversed(nodes))
    while todo:
        n = todo.pop()
        opset = _opset_of(n, opsets)
        opdef = table.resolve(n.domain, n.op_type, opset) if opset is not None else None
        factory = None if opdef is None else opdef.resolve()
        if not (isinstance(factory, type) and issubclass(factory, Lowered)):
            out.append(n)
            continue
        _check(cancel)
        info = NodeInfo(n.name, n.op_type, n.domain, opset, n.attrs, len(n.inputs),
                        len(n.outputs))
        b = Builder(info, n.inputs, n.outputs)
        _make_kernel(opdef, info).expand(b)
        todo.extend(reversed(b.nodes))
    return out


def _make_kernel(opdef, info: NodeInfo) -> OpKernel:
    """The factory's kernel; a factory tripping over malformed attributes is a bad model."""
    try:
        return opdef.resolve()(info)
    except SessionError:
        raise
    except Exception as e:  # noqa: BLE001 - e.g. an attribute of the wrong type
        raise SessionError(ErrorKind.INVALID_MODEL,
                           f"{info.op_type}: malformed attributes ({type(e).__name__}: {e})", info.name) from e


def _check(cancel):
    if cancel is not None and cancel.cancelled:
        raise SessionError(ErrorKind.CANCELLED, "cancelled while creating the session")
