"""Session: named inputs and outputs, thread-safe runs (docs/contract.md section 4)."""
from __future__ import annotations

import math
import threading
from collections.abc import Mapping

import numpy as np

from . import dtypes as _dt, packed, threads
from .aligned import return_free_memory
from .compiling import MONITOR, settle
from .errors import ErrorKind, SessionError
from .graph import CompiledGraph
from .importer import read_model
from .ir import TensorInfo
from .kernels.gemm.microkernel import KERNEL_PATH
from .kernels.table import DEFAULT, OperatorTable
from .options import CancelToken, SessionOptions
from .plan import compile_share
from .plan.build import checked_mode
from .plan.cache import PlanCache
from .subgraph import Body


class Session:
    """An imported, compiled model. ``run`` may be called from any number of threads."""

    def __init__(self, src, options: SessionOptions | None = None,
                 cancel: CancelToken | None = None, *, operators: OperatorTable = DEFAULT,
                 feedable=(), initializers: Mapping | None = None):
        """``feedable``: overridable initializers (graph inputs that an initializer also
        defines, see ``overridable``) that runs may feed; a run that does not feed one uses
        the initializer. ``initializers`` (name -> array) replaces initializers of the
        model, external ones included (same element type and dims)."""
        self.options = options if options is not None else SessionOptions()
        self._operators = operators
        self._feedable = frozenset(feedable)
        self._supplied = dict(initializers or {})
        threads.ensure_layer()
        model, self._source = read_model(src, cancel, self._supplied)
        self._graph = CompiledGraph.from_model(model, self.options, operators, cancel, Body,
                                               self._feedable)
        compile_share.prefetch_tiles([n.kernel for n in self._graph.nodes], self.options.exact)
        self._opsets = dict(model.opsets)
        self.model_info = model.info       # producer, description, version, metadata_props
        del model           # (its arrays: those the passes let go are freed with it)
        self._threads = threads.resolve(self.options.intra_op_threads)
        token = threads.PLAN_THREADS.set(self._threads)
        from .passes.table import run_passes    # (the kernel families its passes know)
        try:
            self.pass_counts = run_passes(self._graph, operators,
                                          self.options.optimization_level, self.options.exact,
                                          cancel)
        finally:
            threads.PLAN_THREADS.reset(token)
        self._cancel = cancel
        self.kernel_path = KERNEL_PATH
        self._poison = checked_mode()
        self._plans = PlanCache(self._graph, self.options.max_cached_plans, self._poison,
                                self.options.max_arena_bytes)
        self._closed = False
        self._lock = threading.Lock()
        self._input_pos = {info.name: i for i, info in enumerate(self._graph.inputs)}
        # per input, the shapes of arrays of its element type that passed _check_input
        self._passed: list[set] = [set() for _ in self._graph.inputs]
        self._output_pos = {info.name: i for i, info in enumerate(self._graph.outputs)}
        self._value_ids = None
        self._made = None
        return_free_memory()
        settle()

    # -- description -------------------------------------------------------------------
    @property
    def inputs(self) -> list[TensorInfo]:
        return list(self._live_graph().inputs)

    @property
    def outputs(self) -> list[TensorInfo]:
        return list(self._live_graph().outputs)

    @property
    def overridable(self) -> list[TensorInfo]:
        """Graph inputs that an initializer also defines; runs feed them only when the
        session was made with them in ``feedable``."""
        return list(self._live_graph().overridable)

    @property
    def plans_built(self) -> int:
        return self._plans.builds

    def wait_for_schedules(self, timeout: float | None = None) -> bool:
        """Wait until, after a cold first run, the parallel kernels its next plan takes are
        compiled (plan/warm.py; nothing is compiled per plan). True when none is left
        compiling, False when ``timeout`` seconds passed first."""
        return self._plans.wait_for_schedules(timeout)

    # -- running -----------------------------------------------------------------------
    def run(self, output_names=None, feeds: Mapping | None = None, *, out: Mapping | None = None,
            cancel: CancelToken | None = None, profile=None) -> list:
        """Tensor form: ``feeds`` maps every input name to an array; returns the values named
        (all graph outputs when None) in that order. Any value of the graph may be named, not
        only its outputs: the plan then keeps that intermediate value alive to the end.
        Arrays in ``out`` (name -> array) are checked and overwritten; the others are
        allocated. ``profile``: a graphrt.profile.Profile that records each step's time."""
        graph = self._live_graph()
        arrays = self._validate_feeds(graph, feeds)
        if output_names is None and not out:
            # the common call (every output, no buffers): nothing to look up or check
            return self._run(graph, arrays, cancel, self._deliver_all, None, (), profile)
        names = [o.name for o in graph.outputs] if output_names is None else list(output_names)
        wanted = [self._value_id(graph, name) for name in names]
        out = dict(out or {})
        for name in out:
            if name not in names:
                raise SessionError(ErrorKind.INVALID_INPUT,
                                   f"an out buffer was given for {name!r}, which is not requested")
        keep = tuple(sorted({v for v in wanted if v not in graph.output_ids}))
        return self._run(graph, arrays, cancel, lambda plan, values: [
            self._deliver(plan, values, vid, name, out.get(name), False)
            for vid, name in zip(wanted, names)], lambda plan: [
            self._check_out(plan, vid, name, out.get(name), False)
            for vid, name in zip(wanted, names)], keep, profile)

    def _deliver_all(self, plan, values) -> list:
        """Every graph output, in order, for a run without out buffers."""
        graph = plan.graph
        if graph.tensors_only:          # (the common case: copies, nothing to unpack)
            return [values[vid].copy() for vid in graph.output_ids]
        return [self._deliver(plan, values, vid, info.name, None, False)
                for vid, info in zip(graph.output_ids, graph.outputs)]

    def _value_id(self, graph: CompiledGraph, name: str) -> int:
        k = self._output_pos.get(name)
        if k is not None:
            return graph.output_ids[k]
        ids = self._value_ids
        if ids is None:
            ids = self._value_ids = {v: i for i, v in enumerate(graph.value_names)}
        if name not in ids:
            raise SessionError(ErrorKind.INVALID_INPUT, f"the model has no output or value {name!r}")
        vid = ids[name]
        made = self._made
        if made is None:
            made = self._made = ({o for n in graph.nodes for o in n.outputs} | set(graph.input_ids)
                                 | set(graph.constants))
        if vid not in made:
            raise SessionError(ErrorKind.INVALID_INPUT,
                               f"value {name!r} is not computed by this session: no output needs it, or a "
                               "graph pass fused it away (optimization_level='basic' keeps every value)")
        return vid

    def run_into(self, x, out: np.ndarray) -> tuple:
        """Span form for one-input, one-output models: ``x`` is copied into the plan's
        staging area, the output is written into the first elements of ``out`` (any shape,
        C-contiguous, at least as many elements) and its shape is returned."""
        graph = self._live_graph()
        if len(graph.inputs) != 1 or len(graph.outputs) != 1:
            raise SessionError(ErrorKind.INVALID_INPUT,
                               "run_into needs a model with one input and one output; this one has "
                               f"{len(graph.inputs)} and {len(graph.outputs)}")
        arrays = self._validate_feeds(graph, {graph.inputs[0].name: x})
        vid, name = graph.output_ids[0], graph.outputs[0].name

        def deliver(plan, values):
            src = values[vid]
            if not graph.tensors_only or plan.static_type(vid) is None:
                # (a statically typed output's buffer was checked before the run)
                return self._deliver(plan, values, vid, name, out, True).shape
            out.reshape(-1)[:src.size] = src.reshape(-1)
            return src.shape

        return self._run(graph, arrays, None, deliver,
                         lambda plan: self._check_out(plan, vid, name, out, True))

    def _run(self, graph, arrays, cancel, deliver, precheck, keep=(), profile=None):
        try:
            return self._plans.run(arrays, deliver, keep=keep, precheck=precheck,
                                   profile=profile,
                                   cancel=cancel if cancel is not None else self._cancel,
                                   threads=self._threads)
        finally:
            if MONITOR.start is not None:      # a first run compiled kernels: say it is done
                settle()

    def _live_graph(self) -> CompiledGraph:
        graph = self._graph
        if self._closed or graph is None:
            raise SessionError(ErrorKind.DISPOSED, "the session is closed")
        return graph

    def _validate_feeds(self, graph: CompiledGraph, feeds) -> list[np.ndarray]:
        if type(feeds) is not dict and not isinstance(feeds, Mapping):
            raise SessionError(ErrorKind.INVALID_INPUT, "feeds must map input names to arrays")
        inputs = graph.inputs
        arrays: list = [None] * len(inputs)
        positions, passed = self._input_pos, self._passed
        for name, value in feeds.items():
            k = positions.get(name)
            if k is None:
                raise SessionError(ErrorKind.INVALID_INPUT,
                                   f"the model has no input {name!r}; its inputs are "
                                   f"{[i.name for i in inputs]}")
            info = inputs[k]
            if type(value) is np.ndarray and value.dtype is info.dtype and \
                    value.shape in passed[k]:
                arrays[k] = value          # (the checks below passed for this type)
                continue
            arrays[k] = checked = _check_input(info, value)
            if type(checked) is np.ndarray and checked.dtype is info.dtype and \
                    len(passed[k]) < _SHAPES_KEPT:
                passed[k].add(checked.shape)
        if len(feeds) == len(inputs):   # (each input fed once: the names are keys)
            return arrays
        if graph.defaults:          # overridable initializers not fed this run
            for k, a in enumerate(arrays):
                if a is None and inputs[k].name in graph.defaults:
                    arrays[k] = graph.defaults[inputs[k].name]
        missing = [inputs[k].name for k, a in enumerate(arrays) if a is None]
        if missing:
            raise SessionError(ErrorKind.INVALID_INPUT, f"no value was fed for input(s) {missing}")
        return arrays

    @staticmethod
    def _check_out(plan, vid: int, name: str, buf, span: bool) -> None:
        """Before anything runs: a caller's buffer for a statically shaped output."""
        known = plan.static_type(vid)
        if buf is None or known is None:
            return
        _check_buffer(buf, name, *known, span)

    @staticmethod
    def _deliver(plan, values, vid: int, name: str, buf, span: bool):
        src = values[vid]
        if packed.is_packed(src) and vid in plan.graph.output_ids and \
                plan.graph.outputs[plan.graph.output_ids.index(vid)].kind != "tensor":
            if buf is not None:
                raise SessionError(ErrorKind.INVALID_INPUT,
                                   f"output {name!r} is a sequence, optional or map: it takes no out buffer")
            return packed.to_python(src)
        if buf is None:
            return src.copy()
        _check_buffer(buf, name, src.dtype, src.shape, span)
        if span:
            np.copyto(buf.reshape(-1)[:src.size], src.reshape(-1))
            return src
        np.copyto(buf, src)
        return buf

    def save_optimized(self, path: str) -> None:
        """Write the graph as the passes left it (fused nodes in the domain "graphrt")."""
        import onnx

        from .passes.export import to_onnx
        onnx.save(to_onnx(self._live_graph(), self._opsets), path)

    # -- life cycle ----------------------------------------------------------------------
    def close(self) -> None:
        """Runs in progress finish; new runs raise Disposed; the weights and plans go when
        the last run leaves."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            plans, self._graph = self._plans, None
        plans.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        return (_rebuild, (self._source.data(), self.options,
                           None if self._operators is DEFAULT else self._operators, self._feedable,
                           self._supplied))


_SHAPES_KEPT = 64      # shapes remembered per input as checked


def _rebuild(model_bytes: bytes, options: SessionOptions, operators=None, feedable=(),
             initializers=None) -> Session:
    return Session(model_bytes, options, operators=DEFAULT if operators is None else operators,
                   feedable=feedable, initializers=initializers)


def _check_input(info: TensorInfo, value) -> np.ndarray:
    if info.kind != "tensor":
        return _pack_input(info, value)
    if not isinstance(value, np.ndarray):
        if isinstance(value, np.generic):
            value = np.asarray(value)
        else:
            raise SessionError(ErrorKind.INVALID_INPUT,
                               f"input {info.name!r} must be a numpy array, got {type(value).__name__}")
    if value.dtype != info.dtype:
        raise SessionError(ErrorKind.INVALID_INPUT,
                           f"input {info.name!r} must have element type {_dt.name_of(info.dtype)}, "
                           f"got {_dt.name_of(value.dtype)}")
    if info.dims is not None:
        if value.ndim != len(info.dims):
            raise SessionError(ErrorKind.INVALID_INPUT,
                               f"input {info.name!r} must have rank {len(info.dims)} "
                               f"(dims {list(info.dims)}), got shape {list(value.shape)}")
        for axis, (want, got) in enumerate(zip(info.dims, value.shape)):
            if isinstance(want, int) and want != got:
                raise SessionError(ErrorKind.INVALID_INPUT,
                                   f"input {info.name!r} must have extent {want} on axis {axis} "
                                   f"(dims {list(info.dims)}), got shape {list(value.shape)}")
    return value


def _pack_input(info: TensorInfo, value) -> np.ndarray:
    """Sequences come as lists of arrays, optionals as None, an array or a list, maps as
    dicts."""
    elem = _dt.to_numpy(info.elem_code) if info.elem_code else None
    try:
        if info.kind == "map":
            return _pack_map(info, value, elem)
        if info.kind == "sequence":
            if not isinstance(value, (list, tuple)):
                raise TypeError(f"a list of arrays, got {type(value).__name__}")
            for item in value:
                if not isinstance(item, np.ndarray) or (elem is not None and item.dtype != elem):
                    raise TypeError(f"arrays of element type {_dt.name_of(elem) if elem else 'any'}")
            return packed.pack_sequence(value, elem)
        return packed.pack_optional(value, elem)
    except (TypeError, KeyError, ValueError) as e:
        raise SessionError(ErrorKind.INVALID_INPUT, f"input {info.name!r} is a {info.kind}: "
                           f"it takes {e}") from None


def _pack_map(info: TensorInfo, value, elem) -> np.ndarray:
    if not isinstance(value, dict):
        raise TypeError(f"a dict, got {type(value).__name__}")
    key = _dt.to_numpy(info.key_code)
    keys, values = list(value.keys()), list(value.values())
    if key == np.dtype(object):
        if not all(isinstance(k, str) for k in keys):
            raise TypeError("a dict with str keys")
    elif not all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in keys):
        raise TypeError(f"a dict with int keys ({_dt.name_of(key)})")
    if elem == np.dtype(object):
        if not all(isinstance(v, str) for v in values):
            raise TypeError("a dict with str values")
        v = np.array(values, dtype=object)
    else:
        v = np.array(values)
        if values and (v.dtype.kind not in "iuf" or v.ndim != 1):
            raise TypeError(f"a dict with number values ({_dt.name_of(elem)})")
        v = v.astype(elem)
    return packed.pack_map(np.array(keys, dtype=key), v)


def _check_buffer(buf, name: str, dtype, shape, span: bool) -> None:
    if not isinstance(buf, np.ndarray):
        raise SessionError(ErrorKind.INVALID_INPUT, f"the buffer for output {name!r} must be a numpy array")
    if buf.dtype != dtype:
        raise SessionError(ErrorKind.INVALID_INPUT,
                           f"the buffer for output {name!r} has element type {_dt.name_of(buf.dtype)}, "
                           f"the output is {_dt.name_of(dtype)}")
    if not buf.flags.writeable:
        raise SessionError(ErrorKind.INVALID_INPUT, f"the buffer for output {name!r} is read-only")
    if span:
        need = math.prod(shape)
        if not buf.flags.c_contiguous:
            raise SessionError(ErrorKind.INVALID_INPUT, f"the buffer for output {name!r} must be C-contiguous")
        if buf.size < need:
            raise SessionError(ErrorKind.INVALID_INPUT,
                               f"the buffer for output {name!r} holds {buf.size} elements, the output "
                               f"has {need} (shape {list(shape)})")
    elif buf.shape != tuple(shape):
        raise SessionError(ErrorKind.INVALID_INPUT,
                           f"the buffer for output {name!r} has shape {list(buf.shape)}, the output "
                           f"has shape {list(shape)}")

