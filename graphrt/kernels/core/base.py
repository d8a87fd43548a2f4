"""The operator contract (docs/contract.md section 2): OpDef, OpKernel and the two contexts.

``infer`` is plain Python over dtypes, shapes and known constant values; it states each
output or a constant output, may ask for run-time values, and may leave per-plan data in
``ctx.prepared`` for ``run``. ``run`` computes into the buffers the plan gave it.
"""
from __future__ import annotations

import contextvars
import importlib

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ... import dtypes as _dt
from ...errors import ErrorKind, SessionError

MAX_VALUE_BYTES = 2 << 30       # one value's limit, the same as the slab's (plan/memory.py)


@dataclass(frozen=True)
class NodeInfo:
    """What a kernel factory sees of its node."""

    name: str
    op_type: str
    domain: str
    opset: int
    attrs: dict
    n_inputs: int               # declared inputs; captured outer values follow them
    n_outputs: int
    compile_body: Callable | None = None   # IrGraph -> runnable body (subgraph operators)
    scope: Callable | None = None   # () -> the IrGraph holding the node, while kernels are made

    def attr(self, key, default=None):
        return self.attrs.get(key, default)

    def choice(self, key, table: dict, default):
        """``table[value]`` of a string attribute that names one of ``table``'s keys."""
        value = self.attrs.get(key, default)
        if value not in table:
            self.fail(f"{key} {value!r} is not one of {', '.join(map(str, table))}")
        return table[value]

    def fail(self, message: str, kind: ErrorKind = ErrorKind.INVALID_MODEL):
        raise SessionError(kind, f"{self.op_type}: {message}", self.name)


class OpKernel:
    """Base of every kernel. A kernel object is shared by all plans and concurrent runs, so
    it holds only what its node's attributes fix."""

    supports_exact = False          # exact-mode kernel exists (exact-mode rules followed)
    in_place_input = False          # output 0 may reuse input 0's storage (when of its size)
    view_of_input = False           # output 0 is input 0 with the inferred shape; run not called
    outputs_data_dependent = False  # output shapes depend on values: run allocates outputs
    constant_foldable = True        # same inputs give the same outputs
    tile_products = False           # runs the GEMM tile products (gemm/microkernel.py)
    traps = False                   # a raise of its jit_calls' compiled call means: make
                                    # run(ctx) instead (plan/program.py, Block)
    fixed_output = None             # the one output of a kernel without inputs that never varies
    def __init__(self, node: NodeInfo):
        self.node = node

    def infer(self, ctx: "InferContext") -> None:
        raise NotImplementedError

    def run(self, ctx: "RunContext") -> None:
        raise NotImplementedError

    def jit_calls(self, ctx: "RunContext"):
        """[(dispatcher, args), ...] when ``run(ctx)`` is exactly those calls in order --
        compiled functions, no Python work around them, no exception, no memory taken from
        the run's arena -- so that the run makes the calls itself, most of them in blocks
        by one interpreter (plan/program.py, core/trampolines.py), instead of calling
        ``run``; an empty list when the run does nothing; None (the
        default) when the run needs Python. The calls are made once per run state and
        replayed by whichever thread runs it next, so a buffer they hold must belong to the
        run state (``ctx.held``, see core/held.py), never to a thread. Derive ``run`` and this
        from one function that builds the arguments, so that the two cannot drift apart."""
        return None

    # -- hooks of the fusion pass (kernels/elementwise/fused.py); the defaults decline ------
    def absorb_relu(self, prepared) -> bool:
        """Apply a Relu node that follows this one in its own last pass, with Relu's scalar
        function (so the bits of the two nodes), changing ``prepared`` (this plan's data)
        to say so; True when it did."""
        return False

    def absorb_affine(self, prepared, stage: "OpKernel", pos: int, values: list,
                      shape: tuple) -> bool:
        """Fast mode only: fold a following per-channel scale-and-shift node ``stage``
        (its chained input at ``pos``, its other inputs' constant ``values``, this node's
        output ``shape``) into this node's last pass; True when it did. Rounded differently
        from the two nodes, so never asked in exact mode."""
        return False

    # -- the hooks of the weight-packing pass (passes/basic.py pack_weights) ---------------
    def take_constant(self, i: int, value: np.ndarray, name: str, exact: bool) -> bool:
        """Take over constant input ``i`` (its value and name) in a layout of the kernel's
        own, which every plan will read whatever the other inputs' shapes, so that the node
        stops reading the value and the graph can let it go; infer then finds the input as
        before (``InferContext.supply``). True when taken; the default declines."""
        return False

    def taken_constants(self) -> dict:
        """{position: (name, value)} of the inputs ``take_constant`` took, the value as the
        model had it (for writing the graph out)."""
        return {}


def step_calls(kernel: OpKernel, ctx: RunContext):
    """``kernel.jit_calls(ctx)``, or None where a subclass overrides ``run`` below the class
    whose jit_calls it inherits (those calls would not be its run)."""
    cls = type(kernel)
    owns = _CALLS_OWN_RUN.get(cls)
    if owns is None:
        run_at = next(c for c in cls.__mro__ if "run" in c.__dict__)
        calls_at = next(c for c in cls.__mro__ if "jit_calls" in c.__dict__)
        owns = _CALLS_OWN_RUN[cls] = issubclass(calls_at, run_at)
    return kernel.jit_calls(ctx) if owns else None


_CALLS_OWN_RUN: dict = {}


_FOLDING: contextvars.ContextVar = contextvars.ContextVar("graphrt_folding", default=False)


def folding() -> bool:
    """Whether the kernel runs to fold constants (plan/build.py ``_fold``). Kernels whose
    result numpy computes with the same bits -- moving elements of any type, integer and
    bool arithmetic and comparisons -- then let numpy compute it: a fold runs once, mostly
    on a few elements of shape arithmetic, and compiling a kernel for it cost 0.1-0.4 s."""
    return _FOLDING.get()


def fold_run(kernel: "OpKernel", ctx: "RunContext") -> None:
    """``kernel.run(ctx)`` as a constant fold (``folding()`` is true inside)."""
    token = _FOLDING.set(True)
    try:
        kernel.run(ctx)
    finally:
        _FOLDING.reset(token)


def make_calls(calls) -> None:
    """Make the calls of a jit_calls list, in order."""
    for fn, args in calls:
        fn(*args)


class Calls(list):
    """A kernel's run being written as calls, (fn, args) each: ``python`` appends a call of
    Python code (the BLAS, a numpy copy), after which ``compiled`` is False and the list
    is the kernel's run but not its jit_calls."""

    compiled = True

    def python(self, fn, *args) -> None:
        self.append((fn, args))
        self.compiled = False

    def jit(self):
        """The list as jit_calls: itself where every call is compiled, else None."""
        return self if self.compiled else None


@dataclass(frozen=True)
class OpDef:
    """One line of the operator table: (domain, op type, opsets since..until) -> factory.
    ``factory`` is the kernel class (or any callable of a NodeInfo), or its dotted path under
    graphrt.kernels (graphrt's own table: imported by ``resolve`` when first needed)."""

    domain: str
    op_type: str
    since: int
    until: int | None
    factory: Callable[[NodeInfo], OpKernel] | str

    def serves(self, opset: int) -> bool:
        return self.since <= opset and (self.until is None or opset <= self.until)

    def makes(self, cls) -> bool:
        """Whether the factory is ``cls`` (without importing a factory named by path)."""
        if not isinstance(self.factory, str):
            return self.factory is cls
        return f"graphrt.kernels.{self.factory}" == f"{cls.__module__}.{cls.__qualname__}"

    def resolve(self) -> Callable[[NodeInfo], OpKernel]:
        """The factory itself."""
        if not isinstance(self.factory, str):
            return self.factory
        module, _, name = self.factory.rpartition(".")
        return getattr(importlib.import_module(f"graphrt.kernels.{module}"), name)


class InferContext:
    """Input facts of one node for one plan (or one run, for dynamic nodes)."""

    __slots__ = ("node", "exact", "_dtypes", "_shapes", "_values", "out_dtypes", "out_shapes",
                 "constants", "prepared", "needs_values", "planning", "data_dependent")

    def __init__(self, node: NodeInfo, exact: bool, in_dtypes, in_shapes, in_values, n_out: int,
                 planning: bool = False):
        self.node = node
        self.exact = exact
        self._dtypes = in_dtypes
        self._shapes = in_shapes
        self._values = in_values
        self.out_dtypes = [None] * n_out
        self.out_shapes = [None] * n_out
        self.constants = [None] * n_out
        self.prepared = None
        self.needs_values = False
        self.planning = planning        # a plan is being built (else: a dynamic step's run)
        self.data_dependent = False     # set by infer: outputs known only once the kernel ran

    @property
    def n_inputs(self) -> int:
        return len(self._dtypes)

    def has_input(self, i: int) -> bool:
        return i < len(self._dtypes) and self._dtypes[i] is not None

    def dtype(self, i: int) -> np.dtype:
        self._need(i)
        return self._dtypes[i]

    def shape(self, i: int) -> tuple:
        self._need(i)
        return self._shapes[i]

    def value(self, i: int):
        """The input's value when it is known now (a constant, or any input at run time)."""
        return self._values[i] if self.has_input(i) else None

    def int_list(self, i: int):
        """A known 1-D integer input as a list of ints, or None when not known yet."""
        v = self.value(i)
        if v is None:
            return None
        if v.dtype.kind not in "iu":
            self.fail(f"input {i} must be an integer tensor, got {_dt.name_of(v.dtype)}")
        return [int(x) for x in np.asarray(v).reshape(-1)]

    def set_output(self, i: int, dtype, shape) -> None:
        dtype, shape = np.dtype(dtype), tuple(int(d) for d in shape)
        size = 1
        for d in shape:             # Python ints: no overflow, however absurd the extents
            size *= max(d, 0)
        if size * dtype.itemsize > MAX_VALUE_BYTES:
            # refused before the kernel's infer does per-position work (a pad of 2**62)
            self.fail(f"output {i} would be {list(shape)} {_dt.name_of(dtype)}: more than the "
                      "2 GiB limit of a plan's memory", ErrorKind.UNSUPPORTED)
        self.out_dtypes[i] = dtype
        self.out_shapes[i] = shape

    def set_constant_output(self, i: int, value: np.ndarray) -> None:
        value = np.asarray(value)
        if not value.flags.c_contiguous:      # (ascontiguousarray would make 0-d into 1-d)
            value = value.copy()
        self.constants[i] = value
        self.set_output(i, value.dtype, value.shape)

    def supply(self, i: int, dtype, shape: tuple, value) -> None:
        """Input ``i`` as a constant the kernel itself keeps (OpKernel.take_constant): the
        node no longer reads it, so the plan does not know it."""
        self._dtypes[i], self._shapes[i], self._values[i] = dtype, shape, value

    def require_run_time_values(self) -> None:
        self.needs_values = True

    def outputs_known_at_run(self) -> None:
        """The outputs cannot be stated here: the step runs as a kernel with
        ``outputs_data_dependent`` does (``run`` makes them; ``prepared`` is None)."""
        self.data_dependent = True

    def check_dtype(self, i: int, allowed, what: str = "") -> np.dtype:
        dt = self.dtype(i)
        if dt not in allowed:
            self.fail(f"input {i}{what} of element type {_dt.name_of(dt)} is not supported",
                      ErrorKind.UNSUPPORTED)
        return dt

    def same_dtype(self, *idx) -> np.dtype:
        first = self.dtype(idx[0])
        for i in idx[1:]:
            if self.has_input(i) and self.dtype(i) != first:
                self.fail(f"inputs {idx[0]} and {i} have different element types "
                          f"({_dt.name_of(first)} and {_dt.name_of(self.dtype(i))})")
        return first

    def fail(self, message: str, kind: ErrorKind = ErrorKind.INVALID_MODEL):
        self.node.fail(message, kind)

    def bad_input(self, message: str):
        self.node.fail(message, ErrorKind.INVALID_INPUT)

    def _need(self, i):
        if not self.has_input(i):
            self.fail(f"input {i} is required")


class RunContext:
    """The buffers of one step in one run state. ``flat_in``/``flat_out`` are 1-D views of
    the same memory (kernels are compiled for 1-D arrays, whatever the rank)."""

    __slots__ = ("node", "inputs", "outputs", "flat_in", "flat_out", "prepared", "exact",
                 "arena", "run_cancel", "held", "flag")

    def __init__(self, node: NodeInfo, inputs, outputs, prepared, exact: bool, arena=None,
                 cancel=None, held=None, run_cancel: list | None = None, flag=None):
        self.node = node
        self.inputs = inputs
        self.outputs = outputs
        self.flat_in = [None if a is None else a.reshape(-1) for a in inputs]
        self.flat_out = [None if a is None else a.reshape(-1) for a in outputs]
        self.prepared = prepared
        self.exact = exact
        self.arena = arena
        # [the run's cancel token or None]: one list shared by a run state's contexts, set
        # for each run (plan/execute.py)
        self.run_cancel = [cancel] if run_cancel is None else run_cancel
        self.held = held            # what the run state keeps for its steps (core/held.py), or None
        # the run state's cancel flag (int64[1], set by the run's token; compiled drivers of
        # subgraphs stop at it), or None without a run state
        self.flag = flag

    @property
    def cancel(self):
        """The cancel token of the run this step belongs to, or None."""
        return self.run_cancel[0]

    def set_output_value(self, i: int, value: np.ndarray) -> None:
        """For kernels with data-dependent outputs: an array made by the kernel itself."""
        self.outputs[i] = value
        self.flat_out[i] = None

    def allocate_output(self, i: int, dtype, shape) -> np.ndarray:
        """For kernels with data-dependent outputs: a buffer from the run's arena."""
        arr = self.arena.take(np.dtype(dtype), tuple(map(int, shape)), self.node.name)
        self.outputs[i] = arr
        self.flat_out[i] = arr.reshape(-1)
        return arr


def scratch(ctx: RunContext, dtype, shape) -> np.ndarray:
    """Scratch memory for this run from the arena (a plain array where a kernel runs without
    one, as in some tests). ``shape``: a tuple or an element count."""
    shape = tuple(map(int, shape)) if isinstance(shape, (tuple, list)) else (int(shape),)
    if ctx.arena is None:
        return np.empty(shape, dtype)
    return ctx.arena.take(dtype if isinstance(dtype, np.dtype) else np.dtype(dtype), shape,
                          ctx.node.name)
