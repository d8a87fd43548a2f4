"""Where graphrt's results and another runtime's part ways: ``graphrt compare`` and
:func:`compare`.

    result = graphrt.compare("model.onnx")                    # random inputs, onnxruntime
    result = graphrt.compare(model, {"x": x}, against="reference", mode="exact")
    print(result)                                             # the report
    result.agree, result.outputs, result.first_divergence     # the same, as data

Both runtimes run the same feeds. When an output differs beyond tolerance, both run again
with every intermediate value kept: graphrt at optimization_level 'basic' (no value is
fused away; ``Session.run`` returns any value by name), onnxruntime on a copy of the model
whose graph outputs list every top-level value (onnx's reference evaluator returns them all
by itself). The values are compared node by node in topological order and the first node
with a diverging output is reported with the differences of its inputs, so that one sees
whether the node itself or what it was given differs. Values inside If/Loop/Scan bodies are
not compared: the node that owns the body stands for them.

The peers (onnxruntime, onnx.reference) are imported only here and only when asked for.
This module reads protobuf (onnx) only to give the peer its model: graphrt's side goes
through :class:`~graphrt.session.Session` like any caller.

The module also holds :func:`random_feeds`, the random inputs ``graphrt run``/``bench``/
``compare`` make, and :func:`describe`, the one-line text of a value's type.
"""
from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, field

import numpy as np

from . import dtypes as _dt, packed
from .errors import ErrorKind, SessionError
from .options import SessionOptions
from .score import to_feeds
from .session import Session

__all__ = ["compare", "Comparison", "ValueDiff", "NodeDivergence", "tolerance", "random_feeds",
           "describe", "PEERS"]

PEERS = ("onnxruntime", "reference")

# (rtol, atol) per element type: a graphrt value g and the peer's p agree where
# |g - p| <= atol + rtol * |p| (NaN equals NaN, an infinity equals the same infinity).
# Narrow floats are compared as float64 of their values, at their own precision.
_TOLERANCES = {
    "float64": (1e-9, 1e-12),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (4e-2, 1e-2),
}
_FLOAT8 = (1.25e-1, 2e-2)          # the float8 and float4 kinds
_WIDE = ("float64", "float32", "complex64", "complex128")


def tolerance(dtype, rtol: float | None = None, atol: float | None = None) -> tuple[float, float]:
    """The (rtol, atol) values of ``dtype`` are compared with. Given ``rtol``/``atol`` apply
    as they are to float32, float64 and complex values; narrower floats (float16, bfloat16,
    float8) never go below their own default, which their precision sets."""
    name = dtype.lower() if isinstance(dtype, str) else np.dtype(dtype).name
    if name.startswith("complex"):
        base = _TOLERANCES["float64" if name == "complex128" else "float32"]
    else:
        base = _TOLERANCES.get(name, _FLOAT8)
    r = base[0] if rtol is None else rtol
    a = base[1] if atol is None else atol
    if name not in _WIDE:
        r, a = max(r, base[0]), max(a, base[1])
    return float(r), float(a)


# ---- one value -----------------------------------------------------------------------------

@dataclass
class ValueDiff:
    """How graphrt's value of ``name`` compares with the peer's.

    ``compared`` is False when the value could not be compared (``note`` says why: a
    sequence, map or optional; a value one side does not have; a graph input...).
    ``mismatches`` counts elements beyond tolerance (or unequal, for integers, booleans and
    strings; every element when the shapes or element types differ). ``max_abs`` and
    ``max_rel`` are over elements finite on both sides (``max_rel`` where the peer's value is
    not zero); None for strings. ``worst``: (index, graphrt's element, the peer's element) of
    the element furthest beyond tolerance, when one is."""

    name: str
    dtype: str = ""
    shape: tuple | None = None
    peer_shape: tuple | None = None
    peer_dtype: str = ""
    compared: bool = False
    mismatches: int = 0
    size: int = 0
    max_abs: float | None = None
    max_rel: float | None = None
    nan_mismatches: int = 0
    worst: tuple | None = None
    rtol: float | None = None
    atol: float | None = None
    note: str = ""

    @property
    def diverges(self) -> bool:
        return self.compared and self.mismatches > 0

    def line(self, peer: str = "peer", width: int = 0, indent: str = "") -> str:
        """The report's line (two when an element differs: the worst one on the second)."""
        head = f"{indent}{self.name:<{width}}"
        if self.dtype:
            head += f"  {self.dtype} {_fmt_shape(self.shape)}"
            if self.peer_shape is not None and self.peer_shape != self.shape:
                head += f" ({peer} {_fmt_shape(self.peer_shape)})"
            if self.peer_dtype and self.peer_dtype != self.dtype:
                head += f" ({peer} {self.peer_dtype})"
        if not self.compared:
            if self.note.startswith(_SAME_SIDES):
                return f"{head}  the same on both sides ({self.note.split(' (')[0]})"
            return f"{head}  not compared: {self.note}".rstrip()
        parts = [head]
        if self.max_abs is not None:
            parts.append(f"max abs {_num(self.max_abs)}")
        if self.max_rel is not None:
            parts.append(f"max rel {_num(self.max_rel)}")
        if not self.mismatches:
            parts.append("agree" if self.rtol is not None else "equal")
            return "  ".join(parts)
        what = f"DIFFER: {self.mismatches} of {self.size} elements"
        if self.note:
            what += f" ({self.note})"
        elif self.nan_mismatches:
            what += f" ({self.nan_mismatches} NaN on one side only)"
        parts.append(what)
        text = "  ".join(parts)
        if self.worst is not None:
            idx, ours, theirs = self.worst
            text += (f"\n{indent}    worst at [{', '.join(map(str, idx))}]: graphrt {_elem(ours)}, "
                     f"{peer} {_elem(theirs)}")
        return text


def diff_value(name: str, ours, theirs, rtol: float | None = None,
               atol: float | None = None) -> ValueDiff:
    """Compare graphrt's value ``ours`` with the peer's ``theirs`` (see :class:`ValueDiff`)."""
    d = ValueDiff(name)
    if ours is None and theirs is None:
        d.note = "absent on both sides (an empty optional)"
        return d
    if _non_tensor(ours) or _non_tensor(theirs):
        d.note = "a sequence, map or optional (skipped)"
        return d
    if ours is None or theirs is None:
        d.note = f"{'graphrt' if ours is None else 'the peer'} has no value"
        return d
    a, b = np.asarray(ours), np.asarray(theirs)
    d.dtype, d.peer_dtype = _type_name(a.dtype), _type_name(b.dtype)
    d.shape, d.peer_shape = tuple(a.shape), tuple(b.shape)
    d.size, d.compared = int(a.size), True
    if a.shape != b.shape or a.dtype != b.dtype:
        d.mismatches = max(a.size, b.size, 1)
        d.note = "different shapes" if a.shape != b.shape else "different element types"
        return d
    if a.size == 0:
        return d
    if _is_float(a.dtype):
        _diff_floats(d, a, b, rtol, atol)
    elif a.dtype.kind in "iub":
        bad = a != b
        d.mismatches = int(np.count_nonzero(bad))
        wide = a.astype(np.float64) - b.astype(np.float64)
        d.max_abs = float(np.max(np.abs(wide)))
        _worst(d, bad, np.abs(wide), a, b)
    else:                                   # strings and other objects: equality
        bad = np.asarray(a != b, dtype=bool).reshape(a.shape)
        d.mismatches = int(np.count_nonzero(bad))
        _worst(d, bad, bad.astype(np.float64), a, b)
    return d


def _diff_floats(d: ValueDiff, a: np.ndarray, b: np.ndarray, rtol, atol) -> None:
    r, t = tolerance(a.dtype, rtol, atol)
    d.rtol, d.atol = r, t
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    x, y = a.astype(wide), b.astype(wide)
    with np.errstate(invalid="ignore", over="ignore"):
        nan_x, nan_y = np.isnan(x), np.isnan(y)
        same = (x == y) | (nan_x & nan_y)
        finite = np.isfinite(x) & np.isfinite(y)
        err = np.where(finite, np.abs(x - y), 0.0).real
        mag = np.abs(y).real
        limit = t + r * mag
        bad = ~same & ~(finite & (err <= limit))
        d.mismatches = int(np.count_nonzero(bad))
        d.nan_mismatches = int(np.count_nonzero(nan_x ^ nan_y))
        d.max_abs = float(err.max()) if finite.any() else 0.0
        nz = finite & (mag > 0)
        d.max_rel = float((err[nz] / mag[nz]).max()) if nz.any() else 0.0
        # how far beyond tolerance each element is; non-finite mismatches count as furthest
        excess = np.where(finite, err / np.where(limit > 0, limit, 1.0), np.inf)
    _worst(d, bad, excess, a, b)


def _worst(d: ValueDiff, bad: np.ndarray, score: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    if not d.mismatches:
        return
    masked = np.where(bad, score, -1.0)
    k = int(np.argmax(masked))
    idx = np.unravel_index(k, a.shape) if a.ndim else ()
    d.worst = (tuple(int(i) for i in idx), a.reshape(-1)[k], b.reshape(-1)[k])


def _is_float(dt: np.dtype) -> bool:
    return dt.kind in "fc" or (dt.kind == "V" and dt.name.startswith(("bfloat", "float")))


def _type_name(dt: np.dtype) -> str:
    return "string" if dt.kind in "OUS" else np.dtype(dt).name


def _non_tensor(v) -> bool:
    return isinstance(v, (list, tuple, dict)) or (isinstance(v, np.ndarray) and packed.is_packed(v))


# ---- one node and the whole comparison ----------------------------------------------------

@dataclass
class NodeDivergence:
    """The first node (in topological order) an output of which diverges."""

    name: str
    op_type: str
    domain: str
    index: int                      # its position among the top-level nodes, from 0
    inputs: list[ValueDiff]
    outputs: list[ValueDiff]
    has_subgraphs: bool = False
    body_inputs: list[ValueDiff] = field(default_factory=list)   # outer values its bodies read

    @property
    def label(self) -> str:
        op = f"{self.domain}.{self.op_type}" if self.domain and self.domain != "ai.onnx" else self.op_type
        return f"{self.name!r} ({op})" if self.name else f"#{self.index} ({op}, unnamed)"

    @property
    def inputs_agree(self) -> bool:
        """Every input that could be compared agrees and none was left uncompared (graph
        inputs and initializers are the same on both sides)."""
        return all(not d.diverges and (d.compared or d.note.startswith(_SAME_SIDES))
                   for d in self.inputs + self.body_inputs)


_SAME_SIDES = ("a graph input", "an initializer")


@dataclass
class Comparison:
    """What :func:`compare` found; ``str(result)`` is the report."""

    model: str
    against: str
    peer_version: str
    mode: str
    feeds: dict                          # name -> (element type, shape)
    random_seed: int | None              # None when the feeds were given
    outputs: list[ValueDiff]
    first_divergence: NodeDivergence | None = None
    walked: bool = False                 # intermediate values were compared
    nodes_total: int = 0
    nodes_compared: int = 0
    nodes_diverging: int = 0
    values_skipped: int = 0
    notes: list[str] = field(default_factory=list)
    rtol: float | None = None
    atol: float | None = None

    @property
    def agree(self) -> bool:
        """No output that could be compared diverges."""
        return not any(d.diverges for d in self.outputs)

    def __str__(self) -> str:
        return self.report()

    def report(self) -> str:
        peer = self.against
        lines = [f"graphrt compare: {self.model}, {self.mode} mode, against {peer} {self.peer_version}"]
        src = f"random, seed {self.random_seed}" if self.random_seed is not None else "given"
        lines.append(f"inputs ({src}): " + (", ".join(
            f"{k} {dt} {_fmt_shape(s)}" for k, (dt, s) in self.feeds.items()) or "none"))
        lines.append(f"tolerance: {self._tolerances()}  (|graphrt - {peer}| <= atol + rtol * |{peer}|; "
                     "NaN = NaN; other types exactly)")
        lines.append("outputs:")
        width = max((len(d.name) for d in self.outputs), default=0)
        lines += [d.line(peer, width, "  ") for d in self.outputs]
        differing = [d for d in self.outputs if d.diverges]
        skipped = [d for d in self.outputs if not d.compared]
        if not differing:
            n = len(self.outputs) - len(skipped)
            verdict = ("result: the output agrees within tolerance" if n == 1 else
                       f"result: the {n} compared outputs agree within tolerance")
            if skipped:
                verdict += f" ({len(skipped)} not compared)"
            lines.append(verdict + ".")
        else:
            lines.append("result: the output differs beyond tolerance." if len(self.outputs) == 1 else
                         f"result: {len(differing)} of {len(self.outputs)} outputs differ beyond "
                         "tolerance.")
        fd = self.first_divergence
        if fd is not None:
            lines.append(f"first diverging node: {fd.label}, node {fd.index + 1} of {self.nodes_total} "
                         "in topological order")
            lines.append(f"  ({self.nodes_diverging} of {self.nodes_compared} compared nodes diverge; "
                         "graphrt ran at optimization_level 'basic' for this)")
            w = max((len(d.name) for d in fd.inputs + fd.outputs + fd.body_inputs), default=0)
            lines.append("  inputs:")
            lines += [d.line(peer, w, "    ") for d in fd.inputs] or ["    (none)"]
            if fd.body_inputs:
                lines.append("  values its bodies read from outside:")
                lines += [d.line(peer, w, "    ") for d in fd.body_inputs]
            lines.append("  outputs:")
            lines += [d.line(peer, w, "    ") for d in fd.outputs]
            if fd.inputs_agree and not any(d.max_abs for d in fd.inputs + fd.body_inputs):
                lines.append("  its inputs are the same on both sides: the difference starts in this node.")
            elif fd.inputs_agree:
                lines.append("  its inputs agree within tolerance, not bit for bit: the node computes "
                             "differently, or magnifies its inputs' small differences (rounding to "
                             "integers, comparisons, dividing by small numbers).")
            elif any(d.diverges for d in fd.inputs):
                lines.append("  an input already differs: look upstream.")
            else:
                lines.append("  some inputs could not be compared: the difference may start before "
                             "this node.")
            if fd.has_subgraphs:
                lines.append("  the node has subgraphs (If/Loop/Scan bodies); values inside them are "
                             "not compared.")
        elif self.walked and differing:
            lines.append(f"no intermediate value diverges at optimization_level 'basic' "
                         f"({self.nodes_compared} nodes compared): the difference comes from a fused "
                         "kernel of level 'all' (see `graphrt compare --opt basic`), or lies in a "
                         "value that was not compared.")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _tolerances(self) -> str:
        seen = []
        for d in self.outputs + ((self.first_divergence.inputs + self.first_divergence.outputs)
                                 if self.first_divergence else []):
            if d.rtol is not None and d.dtype not in [s for s, _ in seen]:
                seen.append((d.dtype, (d.rtol, d.atol)))
        if not seen:
            r, a = tolerance(np.float32, self.rtol, self.atol)
            seen = [("float32", (r, a))]
        return ", ".join(f"{name} rtol {_tol(r)} atol {_tol(a)}" for name, (r, a) in seen)


def compare(model, feeds=None, against: str = "onnxruntime", mode: str = "fast",
            rtol: float | None = None, atol: float | None = None, *, dims=None, seed: int = 0,
            threads: int = 0, optimization_level: str = "all", operators=None,
            walk: bool = True) -> Comparison:
    """Run ``model`` on graphrt and on ``against`` ("onnxruntime" or "reference", onnx's
    reference evaluator) with the same feeds and compare the outputs; if one differs beyond
    tolerance (and ``walk``), find the first node whose output differs.

    ``model``: a path, bytes or an ``onnx.ModelProto``. ``feeds``: what ``graphrt.score``
    takes (a dict of arrays, one array, a DataFrame or a .npy/.npz/.parquet path); None
    makes random inputs (``dims`` sets symbolic dimensions, others are 1; ``seed``).
    ``mode`` and ``optimization_level`` are graphrt's for the outputs' run (the walk runs
    at 'basic'); ``threads``: intra-op threads of both runtimes. ``rtol``/``atol``: see
    :func:`tolerance`. ``operators``: an operator table for graphrt's session
    (``graphrt.custom_operators``)."""
    if against not in PEERS:
        raise SessionError(ErrorKind.INVALID_INPUT,
                           f"against must be one of {', '.join(PEERS)}, got {against!r}")
    label, proto, peer_src = _load_proto(model)
    table = {} if operators is None else {"operators": operators}
    opts = SessionOptions(mode=mode, intra_op_threads=threads, optimization_level=optimization_level)
    peer_kind = _OnnxRuntime if against == "onnxruntime" else _Reference
    sess = Session(model, opts, **table)
    try:
        if feeds is None:
            feeds, random_seed = random_feeds(sess, dict(dims or {}), seed), seed
        else:
            feeds, random_seed = to_feeds(sess, feeds), None
        peer = peer_kind(peer_src, proto, threads)
        out_names = [o.name for o in sess.outputs]
        ours = dict(zip(out_names, sess.run(out_names, feeds)))
        theirs = peer.outputs(out_names, feeds)
        result = Comparison(
            model=label, against=against, peer_version=peer.version, mode=opts.mode.value,
            feeds={k: (_type_name(v.dtype), tuple(v.shape)) for k, v in feeds.items()
                   if isinstance(v, np.ndarray)},
            random_seed=random_seed, rtol=rtol, atol=atol,
            outputs=[diff_value(n, ours[n], theirs.get(n), rtol, atol) for n in out_names])
        del ours, theirs
        if walk and not result.agree:
            if opts.optimization_level.value == "all":    # 'basic' and 'none' keep every value
                sess.close()
                sess = Session(model, SessionOptions(mode=mode, intra_op_threads=threads,
                                                     optimization_level="basic"), **table)
            _walk(result, sess, peer, proto, feeds, rtol, atol)
    finally:
        sess.close()
    return result


def _load_proto(model):
    """(label, ModelProto with external data loaded, what the peer loads the plain model
    from)."""
    import onnx
    if isinstance(model, onnx.ModelProto):
        return f"<ModelProto {model.graph.name!r}>", model, model
    if isinstance(model, (bytes, bytearray, memoryview)):
        try:
            proto = onnx.load_model_from_string(bytes(model))
        except Exception as e:
            raise SessionError(ErrorKind.INVALID_MODEL, f"not a readable ONNX model: {e}") from None
        return f"<model bytes {proto.graph.name!r}>", proto, proto
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise SessionError(ErrorKind.INVALID_MODEL, f"no model file at {path!r}")
        try:
            proto = onnx.load(path)           # external data too, relative to the file
        except Exception as e:
            raise SessionError(ErrorKind.INVALID_MODEL, f"cannot read {path!r}: {e}") from None
        return os.path.basename(path), proto, path
    raise SessionError(ErrorKind.INVALID_MODEL,
                       f"compare takes a path, bytes or an onnx.ModelProto, not a {type(model).__name__}")


def _walk(result: Comparison, sess: Session, peer, proto, feeds, rtol, atol) -> None:
    """Compare every top-level value, node by node in topological order."""
    graph = proto.graph
    nodes = _topological(graph)
    inputs = {i.name for i in graph.input}
    inits = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
    types = _inferred_types(proto, result.notes)
    made = {o for nd in nodes for o in nd.output if o}
    init_types = _initializer_types(graph)
    names, skipped = [], {}
    for node in nodes:
        for name in node.output:
            if not name or name in skipped or name in names:
                continue
            kind = types.get(name, (None, None))[0]
            if kind not in (None, "tensor"):
                skipped[name] = f"a {kind} (skipped)"
            elif not _computed(sess, name):
                skipped[name] = "graphrt does not compute it (no output needs it)"
            else:
                names.append(name)
    ours = dict(zip(names, sess.run(names, feeds))) if names else {}
    for name in list(names):
        if _non_tensor(ours[name]):
            skipped[name] = "a sequence, map or optional (skipped)"
            names.remove(name)
            del ours[name]
    elem = {}
    for name in names:
        code = types.get(name, (None, 0))[1]
        elem[name] = code or _dt.to_code(ours[name].dtype)
    try:
        theirs = peer.values(names, elem, feeds)
    except SessionError as e:
        result.notes.append(f"the intermediate values could not be compared: {e}")
        return
    result.walked = True
    result.nodes_total = len(nodes)
    result.values_skipped = len(skipped)
    diffs = {}

    def diff_of(name: str) -> ValueDiff:
        if name not in diffs:
            if name in skipped:
                diffs[name] = ValueDiff(name, note=skipped[name])
            elif name in theirs and name in ours:
                diffs[name] = diff_value(name, ours[name], theirs[name], rtol, atol)
            elif name in inputs and name not in inits:
                diffs[name] = _same_sides(name, feeds.get(name), "a graph input (the same feed on both sides)")
            elif name in inits:
                diffs[name] = _same_sides(name, init_types.get(name), "an initializer (the same on both sides)")
            elif name in ours:
                diffs[name] = ValueDiff(name, note=f"{result.against} did not return it")
            else:
                diffs[name] = ValueDiff(name, note="not compared")
        return diffs[name]

    for k, node in enumerate(nodes):
        outs = [diff_of(n) for n in node.output if n]
        if not any(d.compared for d in outs):
            continue
        result.nodes_compared += 1
        if not any(d.diverges for d in outs):
            continue
        result.nodes_diverging += 1
        if result.first_divergence is None:
            result.first_divergence = NodeDivergence(
                node.name, node.op_type, node.domain, k,
                [diff_of(n) for n in node.input if n],
                outs, has_subgraphs=_has_subgraphs(node),
                body_inputs=[diff_of(v) for v in _outer_reads(node)
                             if v and v not in node.input and (v in inputs or v in inits or v in made)])
    if skipped:
        result.notes.append(f"{len(skipped)} intermediate value(s) not compared "
                            "(sequences, maps, optionals or values graphrt does not compute)")


def _same_sides(name: str, value, note: str) -> ValueDiff:
    """``value``: the array, or (element type name, dims) of an initializer."""
    d = ValueDiff(name, note=note)
    if isinstance(value, np.ndarray):
        d.dtype, d.shape = _type_name(value.dtype), tuple(value.shape)
    elif isinstance(value, tuple):
        d.dtype, d.shape = value
    return d


def _initializer_types(graph) -> dict:
    from onnx import helper
    types = {}
    for t in graph.initializer:
        try:
            types[t.name] = (_type_name(np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))),
                             tuple(t.dims))
        except (KeyError, TypeError, ValueError):
            types[t.name] = (_dt.name_of_code(t.data_type).lower(), tuple(t.dims))
    return types


def _computed(sess: Session, name: str) -> bool:
    # Session.run raises for a value a pass removed or no output needs; asking up front keeps
    # one run for every value (the same check run() makes).
    try:
        sess._value_id(sess._live_graph(), name)
        return True
    except SessionError:
        return False


def _topological(graph) -> list:
    """The top-level nodes in a topological order (the model's own when it is one); a body's
    reads of outer values count as its node's inputs."""
    made = {o: k for k, n in enumerate(graph.node) for o in n.output if o}
    deps = []
    ordered = True
    for k, n in enumerate(graph.node):
        reads = set(n.input) | set(_outer_reads(n))
        ds = {made[r] for r in reads if r in made and made[r] != k}
        deps.append(ds)
        ordered = ordered and all(d < k for d in ds)
    if ordered:
        return list(graph.node)
    remaining = [len(d) for d in deps]
    users = [[] for _ in deps]
    for k, ds in enumerate(deps):
        for d in ds:
            users[d].append(k)
    ready = [k for k, r in enumerate(remaining) if r == 0]      # sorted: a heap already
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for u in users[k]:
            remaining[u] -= 1
            if remaining[u] == 0:
                heapq.heappush(ready, u)
    placed = set(order)
    order += [k for k in range(len(deps)) if k not in placed]     # a cycle: file order
    return [graph.node[k] for k in order]


def _outer_reads(node) -> list:
    """The names a node's bodies read, in order of first use (the callers keep the ones
    defined outside)."""
    names = {}
    for attr in node.attribute:
        for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
            for n in g.node:
                names.update(dict.fromkeys(n.input))
                names.update(dict.fromkeys(_outer_reads(n)))
    return list(names)


def _has_subgraphs(node) -> bool:
    return any(a.HasField("g") or len(a.graphs) for a in node.attribute)


def _inferred_types(proto, notes: list) -> dict:
    """name -> (kind, element type code) for the top-level values, from the model's
    value_info and onnx's shape inference (kind: tensor, sequence, map, optional)."""
    import onnx
    graph = proto.graph
    infos = list(graph.value_info) + list(graph.output) + list(graph.input)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
        infos = list(inferred.graph.value_info) + infos
    except Exception as e:     # inference fails on some models: graphrt's dtypes fill in
        notes.append(f"onnx shape inference failed ({str(e).splitlines()[0][:120]}); "
                     "element types taken from graphrt's values")
    types = {}
    for v in infos:
        which = v.type.WhichOneof("value")
        if which is None:
            continue
        kind = {"tensor_type": "tensor", "sparse_tensor_type": "sparse tensor",
                "sequence_type": "sequence", "map_type": "map", "optional_type": "optional"}.get(which, which)
        code = v.type.tensor_type.elem_type if kind == "tensor" else 0
        old = types.get(v.name)
        if old is None or (old[0] == "tensor" and not old[1]):
            types[v.name] = (kind, code)
    return types


# ---- the peers ------------------------------------------------------------------------------

class _OnnxRuntime:
    def __init__(self, src, proto, threads: int):
        try:
            import onnxruntime as ort
        except ImportError:
            raise SessionError(ErrorKind.UNSUPPORTED, "comparing against onnxruntime needs the "
                               "onnxruntime package (pip install onnxruntime)") from None
        here = os.path.dirname(os.path.abspath(__file__))
        if os.path.abspath(getattr(ort, "__file__", "") or "").startswith(here + os.sep):
            raise SessionError(ErrorKind.UNSUPPORTED, "'onnxruntime' is graphrt's own shim here "
                               "(graphrt.onnxruntime.install()): compare needs the real package")
        self._ort, self._proto, self._threads = ort, proto, threads
        self.version = getattr(ort, "__version__", "?")
        self._plain = self._session(src if isinstance(src, str) else proto.SerializeToString())

    def _session(self, src):
        ort = self._ort
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        if self._threads:
            opts.intra_op_num_threads = self._threads
        try:
            return ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
        except Exception as e:
            raise SessionError(ErrorKind.UNSUPPORTED,
                               f"onnxruntime cannot load the model: {_first_line(e)}") from None

    def _run(self, sess, names, feeds) -> dict:
        try:
            return dict(zip(names, sess.run(names, feeds)))
        except Exception as e:
            raise SessionError(ErrorKind.UNSUPPORTED,
                               f"onnxruntime cannot run the model: {_first_line(e)}") from None

    def outputs(self, names, feeds) -> dict:
        return self._run(self._plain, names, feeds)

    def values(self, names, elem: dict, feeds) -> dict:
        """``names`` as extra graph outputs of a copy of the model (``elem``: their element
        type codes)."""
        import onnx
        from onnx import helper
        copy = onnx.ModelProto()
        copy.CopyFrom(self._proto)
        present = {o.name for o in copy.graph.output}
        for name in names:
            if name not in present:
                copy.graph.output.append(helper.make_tensor_value_info(name, elem[name], None))
        return self._run(self._session(copy.SerializeToString()), list(names), feeds)


class _Reference:
    def __init__(self, src, proto, threads: int):
        try:
            import onnx
            from onnx.reference import ReferenceEvaluator
        except ImportError:
            raise SessionError(ErrorKind.UNSUPPORTED, "comparing against the reference evaluator "
                               "needs the onnx package (pip install onnx)") from None
        self.version = f"(onnx {onnx.__version__})"
        try:
            self._ref = ReferenceEvaluator(proto)
        except Exception as e:
            raise SessionError(ErrorKind.UNSUPPORTED,
                               f"onnx's reference evaluator cannot load the model: {_first_line(e)}") from None
        self._all = None

    def _run_all(self, feeds) -> dict:
        if self._all is None:
            try:
                self._all = self._ref.run(None, feeds, intermediate=True)
            except Exception as e:
                raise SessionError(ErrorKind.UNSUPPORTED, "onnx's reference evaluator cannot run "
                                   f"the model: {type(e).__name__}: {_first_line(e)}") from None
        return self._all

    def outputs(self, names, feeds) -> dict:
        values = self._run_all(feeds)
        return {n: values.get(n) for n in names}

    def values(self, names, elem, feeds) -> dict:
        values = self._run_all(feeds)
        return {n: values[n] for n in names if n in values}


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


# ---- random feeds and type text --------------------------------------------------------------

def describe(info) -> str:
    """A TensorInfo as text: "FLOAT [batch, 16]", "sequence of FLOAT unknown rank"."""
    kind = "" if info.kind == "tensor" else f"{info.kind} of "
    elem = _dt.name_of(info.dtype) if info.dtype is not None else f"element type {info.elem_code}"
    dims = "unknown rank" if info.dims is None else \
        "[" + ", ".join("?" if d is None else str(d) for d in info.dims) + "]"
    return f"{kind}{elem} {dims}"


def random_feeds(session: Session, dims: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs of the declared types; symbolic dims from ``dims`` (others 1)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in session.inputs:
        if info.kind != "tensor" or info.dims is None:
            raise SessionError(ErrorKind.UNSUPPORTED,
                               f"input {info.name!r} ({describe(info)}) has no shape to make random data for")
        shape = tuple(d if isinstance(d, int) else dims.get(d, 1) for d in info.dims)
        dt = info.dtype
        if dt.kind == "f":
            arr = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "b":
            arr = rng.random(shape) < 0.5
        elif dt.kind in "iu":
            arr = rng.integers(0, 10, shape).astype(dt)
        else:
            raise SessionError(ErrorKind.UNSUPPORTED,
                               f"input {info.name!r}: no random data for element type {_dt.name_of(dt)}")
        feeds[info.name] = arr
    return feeds


# ---- formatting ------------------------------------------------------------------------------

def _fmt_shape(shape) -> str:
    return "?" if shape is None else "[" + ", ".join(map(str, shape)) + "]"


def _num(x: float) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    return f"{x:.3g}"


def _tol(x: float) -> str:
    short = f"{x:.0e}"
    return short if x and float(short) == x else f"{x:g}"


def _elem(v) -> str:
    """An element as its own type's shortest text that reads back the same (two elements
    one ulp apart print differently)."""
    if isinstance(v, np.generic) and _is_float(np.dtype(v.dtype)):
        return str(v)
    return repr(v.item() if hasattr(v, "item") else v)
