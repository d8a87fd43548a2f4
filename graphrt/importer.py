"""ONNX protobuf -> IrModel. The only module that touches protobuf (its message classes:
onnx_proto.py, without importing the onnx package).

Weights are copied out of the protobuf so the caller may drop the ModelProto. External data
is read relative to the model's folder and may not name a file outside it.
"""
from __future__ import annotations

import io
import os

import numpy as np

from . import attribute_types, dtypes, onnx_proto
from .aligned import aligned_copy
from .errors import ErrorKind, SessionError
from .ir import IrGraph, IrModel, IrNode, ModelInfo, TensorInfo
from .options import CancelToken


_TP = onnx_proto.TensorProto
_AP = onnx_proto.AttributeProto
UNREADABLE = "not a readable ONNX model"      # how a protobuf that fails to parse is reported


class ModelSource:
    """What a session keeps of its model to be pickled: the bytes it was given (the caller's
    own object, not a copy), or the path of the file it read, read again when pickled after
    checking that the file is unchanged; so a session made from a file does not hold a
    second copy of the weights it has imported."""

    __slots__ = ("_data", "_path", "_stamp", "_external")

    def __init__(self, data: bytes | None = None, path: str | None = None,
                 external: bool = False):
        self._data, self._path, self._external = data, path, external
        self._stamp = None if path is None else _stamp(path)

    def data(self) -> bytes:
        """The model as bytes (a file's external data in line)."""
        if self._data is not None:
            return self._data
        try:
            if _stamp(self._path) != self._stamp:
                raise OSError("changed since the session was made")
            if self._external:
                import onnx         # (its loader puts the external data in line)
                return onnx.load(self._path).SerializeToString()
            with open(self._path, "rb") as f:
                return f.read()
        except (OSError, ValueError) as e:
            raise SessionError(ErrorKind.INVALID_MODEL,
                               f"the session cannot be pickled: its model file {self._path!r} "
                               f"cannot be read again ({e})") from None


def _stamp(path: str) -> tuple:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def read_model(src, cancel: CancelToken | None = None,
               supplied: dict | None = None) -> tuple[IrModel, ModelSource]:
    """Load ``src`` (path, bytes, binary file object or ModelProto); returns the IR and the
    ModelSource a session keeps for pickling. ``supplied`` (name -> array) replaces the
    main graph's initializers of those names, external ones included, whose data is then
    not read; each must have the initializer's element type and dims."""
    base_dir = path = data = None
    try:
        if onnx_proto.is_model(src):
            proto = src
        elif isinstance(src, (bytes, bytearray, memoryview)):
            data = bytes(src)
            proto = onnx_proto.ModelProto.FromString(data)
        elif isinstance(src, (str, os.PathLike)):
            path = os.path.abspath(os.fspath(src))
            if not os.path.isfile(path):
                raise SessionError(ErrorKind.INVALID_MODEL, f"no model file at {os.fspath(src)!r}")
            base_dir = os.path.dirname(path)
            with open(path, "rb") as f:
                proto = onnx_proto.ModelProto.FromString(f.read())
        elif isinstance(src, io.IOBase) or hasattr(src, "read"):
            data = src.read()
            if not isinstance(data, (bytes, bytearray)):
                raise SessionError(ErrorKind.INVALID_MODEL, "the file object must be opened in binary mode")
            data = bytes(data)
            proto = onnx_proto.ModelProto.FromString(data)
        else:
            raise SessionError(ErrorKind.INVALID_MODEL,
                               f"cannot load a model from a {type(src).__name__}")
    except SessionError:
        raise
    except Exception as e:  # protobuf decode errors and the like
        raise SessionError(ErrorKind.INVALID_MODEL, f"{UNREADABLE}: {e}") from None
    if not proto.HasField("graph"):
        raise SessionError(ErrorKind.INVALID_MODEL, "the model has no graph")
    _check_text(proto)
    if proto.functions:
        proto = _inline_functions(proto)
    opsets = {}
    for imp in proto.opset_import:
        domain = "" if imp.domain in ("", "ai.onnx") else imp.domain
        opsets[domain] = int(imp.version)
    if "" not in opsets and proto.ir_version < 3:
        opsets[""] = 1
    importer = _Importer(base_dir, cancel, opsets)
    graph = importer.graph(proto.graph, supplied)
    version = int(proto.model_version) if proto.HasField("model_version") else None
    info = ModelInfo(proto.producer_name, proto.producer_version, proto.domain, proto.doc_string,
                     version, proto.graph.name, proto.graph.doc_string,
                     {p.key: p.value for p in proto.metadata_props})
    model = IrModel(graph, opsets, int(proto.ir_version), proto.producer_name, info)
    if path is not None:
        return model, ModelSource(path=path, external=importer.read_external)
    return model, ModelSource(proto.SerializeToString() if data is None else data)


def _check_text(proto) -> None:
    """Names, operator types and domains must be UTF-8 text; protobuf hands an invalid one
    over as bytes, which would fail far from here."""
    def bad(v, what):
        if isinstance(v, bytes):
            raise SessionError(ErrorKind.INVALID_MODEL, f"{what} {v!r} is not UTF-8 text")

    def graph(g):
        for v in list(g.input) + list(g.output) + list(g.value_info):
            bad(v.name, "the value name")
        for t in g.initializer:
            bad(t.name, "the initializer name")
        for n in g.node:
            for v, what in ((n.name, "the node name"), (n.op_type, "the operator type"),
                            (n.domain, "the domain")):
                bad(v, what)
            for v in list(n.input) + list(n.output):
                bad(v, f"a value name of node {n.name!r}")
            for a in n.attribute:
                bad(a.name, f"an attribute name of node {n.name!r}")
                if a.HasField("g"):
                    graph(a.g)
                for sub in a.graphs:
                    graph(sub)

    for imp in proto.opset_import:
        bad(imp.domain, "the opset domain")
    graph(proto.graph)


def _inline_functions(proto):
    """The model with its local functions (ModelProto.functions, which onnxscript and
    torch's exporter write) expanded in place of the nodes that call them, each body with
    its function's own opset imports (onnx's inliner)."""
    from onnx import inliner
    try:
        return inliner.inline_local_functions(onnx_proto.to_onnx(proto))
    except Exception as e:  # noqa: BLE001 - onnx's inliner raises plain errors
        raise SessionError(ErrorKind.INVALID_MODEL,
                           f"the model's local functions cannot be expanded: {e}") from None


class _Importer:
    def __init__(self, base_dir: str | None, cancel: CancelToken | None, opsets: dict):
        self.base_dir = base_dir
        self.cancel = cancel
        self.opsets = opsets
        self.read_external = False      # whether a tensor's data came from another file

    def _check_cancel(self):
        if self.cancel is not None and self.cancel.cancelled:
            raise SessionError(ErrorKind.CANCELLED, "cancelled while importing the model")

    def graph(self, g, supplied: dict | None = None) -> IrGraph:
        inits = {}
        supplied = supplied or {}
        for t in g.initializer:
            self._check_cancel()
            inits[t.name] = self.tensor(t) if t.name not in supplied else _supplied(t, supplied[t.name])
        unknown = set(supplied) - {t.name for t in g.initializer}
        if unknown:
            raise SessionError(ErrorKind.INVALID_INPUT,
                               f"initializer values were supplied for {sorted(unknown)}, which the model "
                               "does not have")
        for st in g.sparse_initializer:
            self._check_cancel()
            inits[st.values.name] = self.sparse(st)
        nodes = []
        for i, n in enumerate(g.node):
            self._check_cancel()
            name = n.name or f"{n.op_type}_{i}"
            self.check_attribute_types(n, name)
            attrs = {a.name: self.attribute(a, name) for a in n.attribute}
            domain = "" if n.domain in ("", "ai.onnx") else n.domain
            nodes.append(IrNode(name, n.op_type, domain, list(n.input), list(n.output), attrs))
        infos = {v.name: value_info(v) for v in g.value_info}
        return IrGraph(g.name, nodes, [value_info(v) for v in g.input],
                       [value_info(v) for v in g.output], inits, infos)

    def check_attribute_types(self, n, name: str) -> None:
        """Attributes whose type differs from the operator's schema make a bad model."""
        domain = "" if n.domain in ("", "ai.onnx") else n.domain
        version = self.opsets.get(domain)
        if version is None:
            return
        declared = attribute_types.declared(domain, n.op_type, version)
        if declared is None:        # a custom or unknown operator: nothing to check here
            return
        for a in n.attribute:
            want = declared.get(a.name)
            if want is not None and a.type != want:
                raise SessionError(ErrorKind.INVALID_MODEL,
                                   f"{n.op_type}: attribute {a.name!r} must be "
                                   f"{_AP.AttributeType.Name(want)}, got "
                                   f"{_AP.AttributeType.Name(a.type)}", name)

    def tensor(self, t) -> np.ndarray:
        if t.data_type == _TP.UNDEFINED:
            raise SessionError(ErrorKind.INVALID_MODEL, f"tensor {t.name!r} has no element type")
        if t.data_location == _TP.EXTERNAL:
            return self.external(t)
        try:
            arr = onnx_proto.to_array(t)
        except Exception as e:
            raise SessionError(ErrorKind.INVALID_MODEL, f"tensor {t.name!r} cannot be read: {e}") from None
        return _own(arr)

    def sparse(self, st) -> np.ndarray:
        values = self.tensor(st.values)
        idx = self.tensor(st.indices).astype(np.int64)
        dense = np.zeros(tuple(st.dims), dtype=values.dtype)
        if idx.ndim == 1:
            dense.reshape(-1)[idx] = values
        else:
            dense[tuple(idx.T)] = values
        return dense

    def external(self, t) -> np.ndarray:
        self.read_external = True
        info = {e.key: e.value for e in t.external_data}
        where = f"external data of tensor {t.name!r}"
        if self.base_dir is None:
            raise SessionError(ErrorKind.INVALID_MODEL,
                               f"{where} needs the model to be loaded from a path")
        location = info.get("location", "")
        if not location or os.path.isabs(location):
            raise SessionError(ErrorKind.INVALID_MODEL, f"{where}: location {location!r} must be a relative path")
        base = os.path.realpath(self.base_dir)
        path = os.path.realpath(os.path.join(base, location))
        if os.path.commonpath([base, path]) != base:
            raise SessionError(ErrorKind.INVALID_MODEL,
                               f"{where}: location {location!r} is outside the model's folder")
        try:
            dtype = dtypes.to_numpy(t.data_type)
        except (KeyError, ValueError) as e:
            raise SessionError(ErrorKind.UNSUPPORTED, f"{where}: {e}") from None
        count = int(np.prod(t.dims, dtype=np.int64))
        offset = int(info.get("offset", 0))
        bits = onnx_proto.PACKED_BITS.get(t.data_type)        # 4- and 2-bit types: packed in the file
        stored = count * dtype.itemsize if bits is None else (count * bits + 7) // 8
        length = int(info.get("length", stored))
        if length != stored:
            raise SessionError(ErrorKind.INVALID_MODEL, f"{where}: length {length} does not match dims {list(t.dims)}")
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(length)
        except OSError as e:
            raise SessionError(ErrorKind.INVALID_MODEL, f"{where}: {e}") from None
        if len(data) != length:
            raise SessionError(ErrorKind.INVALID_MODEL, f"{where}: file {location!r} is too short")
        return _own(onnx_proto.from_raw(data, t.data_type, tuple(t.dims)))

    def attribute(self, a, node: str):
        T = _AP
        if a.type == T.FLOAT:
            return float(a.f)
        if a.type == T.INT:
            return int(a.i)
        if a.type == T.STRING:
            return a.s.decode("utf-8", "replace")
        if a.type == T.TENSOR:
            return self.tensor(a.t)
        if a.type == T.SPARSE_TENSOR:
            return self.sparse(a.sparse_tensor)
        if a.type == T.GRAPH:
            return self.graph(a.g)
        if a.type == T.FLOATS:
            return [float(x) for x in a.floats]
        if a.type == T.INTS:
            return [int(x) for x in a.ints]
        if a.type == T.STRINGS:
            return [s.decode("utf-8", "replace") for s in a.strings]
        if a.type == T.TENSORS:
            return [self.tensor(t) for t in a.tensors]
        if a.type == T.GRAPHS:
            return [self.graph(g) for g in a.graphs]
        if a.type == T.TYPE_PROTO:
            return type_desc(a.tp)
        raise SessionError(ErrorKind.INVALID_MODEL, f"attribute {a.name!r} has an unknown type", node)


def value_info(v) -> TensorInfo:
    t = v.type
    which = t.WhichOneof("value")
    text = type_name(t)
    if which == "tensor_type":
        tt = t.tensor_type
        try:
            dt = dtypes.to_numpy(tt.elem_type) if tt.elem_type else None
        except (KeyError, ValueError):
            dt = None
        dims = notes = None
        if tt.HasField("shape"):
            dims = tuple(_dim(d) for d in tt.shape.dim)
            if any(d.denotation for d in tt.shape.dim):
                notes = tuple(d.denotation for d in tt.shape.dim)
        return TensorInfo(v.name, dt, dims, "tensor", int(tt.elem_type), type_name=text,
                          denotations=notes)
    if which in ("sequence_type", "optional_type"):
        kind, code = type_desc(t)
        return TensorInfo(v.name, np.dtype(np.uint8), None, kind, code, type_name=text)
    if which == "map_type":
        value = t.map_type.value_type
        code = int(value.tensor_type.elem_type) if value.WhichOneof("value") == "tensor_type" else 0
        return TensorInfo(v.name, np.dtype(np.uint8), None, "map", code, int(t.map_type.key_type),
                          type_name=text)
    return TensorInfo(v.name, None, None, "tensor", type_name=text)


def type_name(tp) -> str:
    """A TypeProto as text, the way onnxruntime names types: tensor(float),
    seq(tensor(int64)), map(string,tensor(float)), optional(seq(tensor(float)))."""
    which = tp.WhichOneof("value")
    if which in ("tensor_type", "sparse_tensor_type"):
        code = getattr(tp, which).elem_type
        name = _TP.DataType.Name(code).lower() if code in _TP.DataType.values() \
            else "undefined"
        return f"{'tensor' if which == 'tensor_type' else 'sparse_tensor'}({name})"
    if which == "sequence_type":
        return f"seq({type_name(tp.sequence_type.elem_type)})"
    if which == "optional_type":
        return f"optional({type_name(tp.optional_type.elem_type)})"
    if which == "map_type":
        key = _TP.DataType.Name(tp.map_type.key_type).lower()
        return f"map({key},{type_name(tp.map_type.value_type)})"
    return ""


def type_desc(tp) -> tuple[str, int]:
    """A TypeProto as (outer kind, innermost tensor element code)."""
    kind = {"sequence_type": "sequence", "optional_type": "optional",
            "map_type": "map"}.get(tp.WhichOneof("value"), "tensor")
    inner = tp
    while inner.WhichOneof("value") in ("sequence_type", "optional_type"):
        inner = getattr(inner, inner.WhichOneof("value")).elem_type
    code = int(inner.tensor_type.elem_type) if inner.WhichOneof("value") == "tensor_type" else 0
    return kind, code


def _dim(d):
    if d.HasField("dim_value"):     # a negative extent (paddle2onnx writes -1) is dynamic
        return int(d.dim_value) if d.dim_value >= 0 else None
    if d.HasField("dim_param"):
        return d.dim_param
    return None


def _supplied(t, value) -> np.ndarray:
    arr = np.asarray(value)
    try:
        want = dtypes.to_numpy(t.data_type)
    except (KeyError, ValueError):
        want = None
    if arr.dtype != want or arr.shape != tuple(t.dims):
        raise SessionError(ErrorKind.INVALID_INPUT,
                           f"the value supplied for initializer {t.name!r} is {dtypes.name_of(arr.dtype)} "
                           f"{list(arr.shape)}; the model's is {dtypes.name_of_code(t.data_type)} {list(t.dims)}")
    return _own(arr)


def _own(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous array that owns its memory (no reference into the protobuf), aligned
    to a cache line (aligned.py). It stays writeable: numba compiles read-only arrays as a
    type of their own, and kernels never write their inputs."""
    return aligned_copy(arr)
