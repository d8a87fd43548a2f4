"""InferenceSession, NodeArg and ModelMetadata as onnxruntime's Python API has them, over a
graphrt Session.

Inputs are checked the way onnxruntime checks them, with its wording: element type (a list
or scalar is converted to the input's type, as onnxruntime does), rank, fixed extents, free
dimension overrides, unknown names, missing inputs (ValueError). Overridable initializers
(graph inputs that an initializer also defines) may be fed: a run that feeds some runs on a
graphrt Session that takes those as inputs, made once per set of names.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping

import numpy as np

from .. import dtypes
from ..ir import TensorInfo
from ..profile import Profile
from ..session import Session
from .errors import InvalidArgument, MissingInputs, NoSuchFile, as_onnxruntime
from .options import RunOptions, SessionOptions
from .providers import resolve
from .values import IOBinding, OrtValue

_NO_VERSION = 2**63 - 1     # what onnxruntime reports for a model without model_version


class NodeArg:
    """A graph input or output: name, shape (ints, strings for symbolic extents, None for
    unknown ones; [] when the rank is unknown or the value is not a tensor) and type text."""

    def __init__(self, name: str, type: str, shape: list):  # noqa: A002 - onnxruntime's name
        self.name = name
        self.type = type
        self.shape = shape

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"

    __str__ = __repr__


class ModelMetadata:
    def __init__(self, info):
        self.producer_name = info.producer_name
        self.graph_name = info.graph_name
        self.domain = info.domain
        self.description = info.description
        self.graph_description = info.graph_description
        self.version = _NO_VERSION if info.version is None else info.version
        self.custom_metadata_map = dict(info.metadata)


def _overridden(info: TensorInfo, by_name: dict, by_note: dict):
    """The input's dims with the free dimension overrides applied."""
    if info.dims is None:
        return None
    notes = info.denotations or (None,) * len(info.dims)
    dims = []
    for d, note in zip(info.dims, notes):
        if note in by_note and not isinstance(d, int):
            d = by_note[note]
        elif isinstance(d, str):
            d = by_name.get(d, d)
        dims.append(d)
    return tuple(dims)


def _strings(arr: np.ndarray) -> np.ndarray:
    """numpy str, bytes or void arrays as the object arrays of str that graphrt's strings are
    (bytes decoded as UTF-8, as onnxruntime reads them)."""
    if arr.dtype.kind == "U":
        return arr.astype(object)
    flat = [bytes(b).rstrip(b"\0").decode("utf-8", "replace") for b in arr.reshape(-1)]
    return np.array(flat, dtype=object).reshape(arr.shape)


def _type_text(info: TensorInfo) -> str:
    if info.type_name:
        return info.type_name
    return f"tensor({dtypes.name_of(info.dtype).lower()})" if info.dtype is not None else ""


class InferenceSession:
    """onnxruntime.InferenceSession on graphrt. ``graphrt_session`` is the graphrt Session
    behind it; ``sess_options.add_session_config_entry("graphrt.mode", "exact")`` makes it
    run in exact mode."""

    def __init__(self, path_or_bytes, sess_options: SessionOptions | None = None, providers=None,
                 provider_options=None, **kwargs):
        if isinstance(path_or_bytes, (str, os.PathLike)):
            path = os.fspath(path_or_bytes)
            if not os.path.isfile(path):
                raise NoSuchFile(f"Load model from {path} failed: File doesn't exist")
            self._source = path
        elif isinstance(path_or_bytes, (bytes, bytearray, memoryview)) or \
                hasattr(path_or_bytes, "SerializeToString") or hasattr(path_or_bytes, "read"):
            self._source = path_or_bytes    # (a ModelProto or a file object: graphrt takes these too)
        else:
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._provider_options = resolve(providers, provider_options)
        options = self._sess_options.graphrt_options()
        self._initializers = dict(self._sess_options._initializers)
        with as_onnxruntime(loading=True):
            self._sess = Session(self._source, options, self._sess_options._load_cancel,
                                 initializers=self._initializers)
            if self._sess_options.optimized_model_filepath:
                self._sess.save_optimized(self._sess_options.optimized_model_filepath)
        self._options = options
        self._inputs = {i.name: i for i in self._sess.inputs}
        self._overridable = {i.name: i for i in self._sess.overridable}
        by_name, by_note = self._sess_options._free_dims, self._sess_options._free_denotations
        self._dims = {i.name: _overridden(i, by_name, by_note)
                      for i in list(self._inputs.values()) + list(self._overridable.values())}
        self._output_names = [o.name for o in self._sess.outputs]
        self._variants: dict[frozenset, Session] = {}
        self._lock = threading.Lock()
        self._profile = Profile() if self._sess_options.enable_profiling else None
        self._profile_start_ns = time.time_ns()

    # -- description -------------------------------------------------------------------
    @property
    def graphrt_session(self) -> Session:
        return self._sess

    def _node_arg(self, info: TensorInfo) -> NodeArg:
        dims = self._dims.get(info.name, info.dims)
        shape = [] if info.kind != "tensor" or dims is None else list(dims)
        return NodeArg(info.name, _type_text(info), shape)

    def get_inputs(self) -> list[NodeArg]:
        return [self._node_arg(i) for i in self._sess.inputs]

    def get_outputs(self) -> list[NodeArg]:
        return [self._node_arg(o) for o in self._sess.outputs]

    def get_overridable_initializers(self) -> list[NodeArg]:
        return [self._node_arg(i) for i in self._sess.overridable]

    def get_modelmeta(self) -> ModelMetadata:
        return ModelMetadata(self._sess.model_info)

    def get_providers(self) -> list[str]:
        return list(self._provider_options)

    def get_provider_options(self) -> dict:
        return {k: dict(v) for k, v in self._provider_options.items()}

    def set_providers(self, providers=None, provider_options=None) -> None:
        self._provider_options = resolve(providers, provider_options, strict=True)

    def disable_fallback(self) -> None:
        """There is nothing to fall back from: graphrt runs on the CPU."""

    def enable_fallback(self) -> None:
        """There is nothing to fall back from: graphrt runs on the CPU."""

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    def get_profiling_start_time_ns(self) -> int:
        return self._profile_start_ns

    def end_profiling(self) -> str:
        """Writes the runs' per-node trace (Chrome/Perfetto JSON) and returns its file name;
        profiling stops. Returns "" when profiling was not enabled."""
        if self._profile is None:
            return ""
        name = f"{self._sess_options.profile_file_prefix}_{time.strftime('%Y-%m-%d_%H-%M-%S')}.json"
        events = self._profile.trace_events()
        with open(name, "w") as f:       # onnxruntime's layout: a JSON array, one event a line
            f.write("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")
        self._profile = None
        return name

    # -- running -----------------------------------------------------------------------
    def run(self, output_names, input_feed, run_options: RunOptions | None = None) -> list:
        names = list(output_names) if output_names else self._output_names
        sess, feeds = self._prepare(input_feed)
        cancel = run_options.cancel_token if run_options is not None else None
        with as_onnxruntime():
            return sess.run(names, feeds, cancel=cancel, profile=self._profile)

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None) -> list:
        feeds = {k: v.value if isinstance(v, OrtValue) else v for k, v in input_dict_ort_values.items()}
        return [OrtValue(r) for r in self.run(output_names, feeds, run_options)]

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None) -> None:
        """Runs on a new thread; then ``callback(outputs, user_data, error_text)``."""
        def work():
            try:
                outs = self.run(output_names, input_feed, run_options)
            except Exception as e:  # noqa: BLE001 - the callback receives it, as onnxruntime's does
                callback([], user_data, str(e))
                return
            callback(outs, user_data, "")
        threading.Thread(target=work, daemon=True).start()

    def io_binding(self) -> IOBinding:
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options: RunOptions | None = None) -> None:
        names = list(iobinding.outputs)
        sess, feeds = self._prepare(iobinding.inputs)
        out = {n: buf for n, buf in iobinding.outputs.items() if buf is not None}
        cancel = run_options.cancel_token if run_options is not None else None
        with as_onnxruntime():
            results = sess.run(names, feeds, out=out, cancel=cancel, profile=self._profile)
        iobinding._results = [OrtValue(r) for r in results]

    def _prepare(self, input_feed) -> tuple[Session, dict]:
        if not isinstance(input_feed, Mapping):
            raise InvalidArgument(f"input_feed must map input names to values, got {type(input_feed).__name__}")
        feeds, overrides = {}, []
        for name, value in input_feed.items():
            info = self._inputs.get(name)
            if info is None:
                info = self._overridable.get(name)
                if info is None:
                    raise InvalidArgument(f"Invalid input name: {name}")
                overrides.append(name)
            feeds[name] = self._convert(info, value) if info.kind == "tensor" else value
        missing = []
        for name, info in self._inputs.items():
            if name not in feeds:
                if info.kind != "optional":
                    missing.append(name)
                feeds[name] = None          # an optional input left out has no value
        if missing:
            raise MissingInputs(f"Required inputs ({missing}) are missing from input feed "
                                f"({list(input_feed)}).")
        return (self._variant(frozenset(overrides)) if overrides else self._sess), feeds

    def _convert(self, info: TensorInfo, value) -> np.ndarray:
        want = info.dtype
        if isinstance(value, OrtValue):
            value = value.value
        if isinstance(value, np.ndarray):
            arr = value
            if arr.dtype != want:
                if want == np.dtype(object) and arr.dtype.kind in "USV":
                    arr = _strings(arr)
                else:
                    raise InvalidArgument(f"Unexpected input data type. Actual: (tensor("
                                          f"{dtypes.name_of(arr.dtype).lower()})) , expected: ({_type_text(info)})")
        else:
            try:
                arr = np.asarray(value, dtype=want)
            except (TypeError, ValueError) as e:
                raise InvalidArgument(f"input {info.name}: cannot make a {_type_text(info)} from a "
                                      f"{type(value).__name__} ({e})") from None
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        dims = self._dims[info.name]
        if dims is not None:
            if arr.ndim != len(dims):
                raise InvalidArgument(f"Invalid rank for input: {info.name} Got: {arr.ndim} Expected: "
                                      f"{len(dims)} Please fix either the inputs/outputs or the model.")
            wrong = []
            for axis, (d, got) in enumerate(zip(dims, arr.shape)):
                if isinstance(d, int) and d != got:
                    wrong.append(f" index: {axis} Got: {got} Expected: {d}\n")
            if wrong:
                raise InvalidArgument(f"Got invalid dimensions for input: {info.name} for the following "
                                      f"indices\n{''.join(wrong)} Please fix either the inputs/outputs or the model.")
        return arr

    def _variant(self, names: frozenset) -> Session:
        """A session in which the overridable initializers ``names`` are inputs."""
        with self._lock:
            sess = self._variants.get(names)
            if sess is None:
                with as_onnxruntime(loading=True):
                    sess = Session(self._source, self._options, feedable=names,
                                   initializers=self._initializers)
                self._variants[names] = sess
            return sess
