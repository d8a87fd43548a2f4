"""Making an ExecutionPlan for one list of input element types and shapes (docs/contract.md section 3).

1. Types and shapes: nodes in graph order, each kernel's infer states its outputs.
2. Constant evaluation: a node whose inputs are all constants runs now, unless its result
   would be larger than both its inputs and 64 KiB; a view of a constant is a constant.
3. Dynamic nodes (a run-time-shaped input, data-dependent outputs, or run-time values
   required) are shaped again in every run and take their outputs from the arena.
4. Memory: static values get slab offsets from plan_slab.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ErrorKind, SessionError
from ..kernels.core.base import InferContext, RunContext, fold_run
from .arena import Arena
from .memory import MAX_SLAB, plan_slab

_log = logging.getLogger("graphrt.plan")

if TYPE_CHECKING:      # the compiled graph is the layer above: types only
    from ..graph import CompiledGraph, CompiledNode

FOLD_LIMIT = 64 * 1024
FOLD_ARENA = 1 << 30        # scratch a kernel may take while a constant is folded

CONST, STATIC, DYNAMIC = "const", "static", "dynamic"


@dataclass
class Fact:
    kind: str
    dtype: np.dtype | None = None
    shape: tuple | None = None
    value: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize     # Python ints: no overflow


@dataclass
class Step:
    node: CompiledNode
    dynamic: bool
    view: bool = False          # static view: made once per run state, nothing to run
    prepared: object = None
    # dynamic steps: the inputs that are constants of the plan (their arrays never change),
    # and the last run's inference with what it depended on (execute._infer_dynamic)
    fixed: frozenset = frozenset()
    memo: object = None
    data_dependent: bool = False    # its infer said so at plan time (InferContext)


class ExecutionPlan:
    """Shared by concurrent runs (run states are per run); immutable after creation but for
    its run count and its jitted schedule, which a background thread sets once."""

    def __init__(self, graph: CompiledGraph, signature: tuple, facts: list, steps: list,
                 offsets: dict, slab_size: int, freed_after: list, in_place: dict):
        self.graph = graph
        self.signature = signature
        self.facts = facts
        self.steps = steps
        self.offsets = offsets
        self.slab_size = slab_size
        self.freed_after = freed_after
        self.in_place = in_place
        self.runs = 0                   # step-by-step runs so far (the first compiles)
        self.provisional = False        # serial kernels until warmed (plan/warm.py)
        self.cold_first = False         # its first run found kernels to compile
        self.dynamic_ids = [o for st in steps if st.dynamic for o in st.node.outputs if o >= 0]
        self.dynamic_ids += [v for v in graph.input_ids if facts[v].kind == DYNAMIC]

    def static_type(self, vid: int):
        """(dtype, shape) of a value this plan knows before running, else None."""
        f = self.facts[vid]
        return (f.dtype, f.shape) if f.kind in (CONST, STATIC) else None


def build_plan(graph: CompiledGraph, signature: tuple, early_free: str | None = None,
               keep: tuple = ()) -> ExecutionPlan:
    """``signature``: ((dtype, shape), ...) in graph input order. ``keep``: ids of
    intermediate values the caller wants, kept alive to the end like outputs.
    ``early_free`` names a value whose slab block is freed too early (a planted fault for
    checked-mode tests)."""
    exact = graph.exact
    facts: list[Fact | None] = [None] * graph.n_values
    for vid, arr in graph.constants.items():
        facts[vid] = Fact(CONST, arr.dtype, arr.shape, arr)
    for vid, (dtype, shape) in zip(graph.input_ids, signature):
        # a shape of None: a packed sequence or optional, handed over as it is in each run
        facts[vid] = Fact(STATIC, np.dtype(dtype), tuple(shape)) if shape is not None else Fact(DYNAMIC)

    steps: list[Step] = []
    for node in graph.nodes:
        outs, step = plan_node(node, [facts[i] if i >= 0 else None for i in node.inputs], exact)
        for o, f in zip(node.outputs, outs):
            if o >= 0 and f is not None:
                facts[o] = f
        if step is not None:
            steps.append(step)

    _note_contradictions(graph, facts)
    layout = _layout(graph, facts, steps, early_free, keep)
    if layout.size > MAX_SLAB:
        raise SessionError(ErrorKind.UNSUPPORTED,
                           f"the plan for input shapes {[list(s) for _, s in signature]} needs a "
                           f"slab of {layout.size} bytes, more than the 2 GiB limit")
    return ExecutionPlan(graph, signature, facts, steps, layout.offsets, layout.size,
                         layout.freed_after, layout.in_place)


def _note_contradictions(graph: CompiledGraph, facts: list) -> None:
    """Exporters write value_info (and output shapes) that the real shapes contradict: a
    stale rank, a fixed extent that is really dynamic, another element type. The computed
    facts win; each disagreement is a debug record, never a refusal."""
    if not _log.isEnabledFor(logging.DEBUG):
        return
    for vid, info in graph.declared.items():
        f = facts[vid]
        if f is None or f.kind == DYNAMIC or f.shape is None:
            continue
        dims = info.dims
        wrong_type = info.dtype is not None and np.dtype(info.dtype) != f.dtype
        wrong_shape = dims is not None and (len(dims) != len(f.shape) or any(
            isinstance(d, int) and d != n for d, n in zip(dims, f.shape)))
        if wrong_type or wrong_shape:
            _log.debug("the model declares %r as %s %s; it is %s %s here (declaration ignored)",
                       graph.value_names[vid], info.dtype, None if dims is None else list(dims),
                       f.dtype, list(f.shape))


def _check_stated(node: CompiledNode, ctx: InferContext) -> None:
    for i, o in enumerate(node.outputs):
        if o >= 0 and ctx.out_dtypes[i] is None:
            node.info.fail(f"infer stated no type for output {i}")
        if o >= 0 and any(d < 0 for d in ctx.out_shapes[i]):
            node.info.fail(f"infer stated a negative extent for output {i}: {list(ctx.out_shapes[i])}")


def worth_folding(outs: list, ins: list) -> bool:
    """Fold unless the result has more elements than all its inputs together and takes
    more than 64 KiB: a constant that grows (Expand, Tile, ConstantOfShape) is made at run
    time, one that rearranges its inputs (Concat of weight slices, Transpose) or converts
    them element for element (a widening Cast, DequantizeLinear of quantized weights: at
    most 8 times the bytes, once, instead of a conversion every run) is made once."""
    n_out = sum(math.prod(f.shape) for f in outs)
    return not (n_out > sum(math.prod(f.shape) for f in ins) and
                sum(f.nbytes for f in outs) > FOLD_LIMIT)


def plan_node(node: CompiledNode, ins: list, exact: bool) -> tuple[list, Step | None]:
    """The facts of a node's outputs for the facts of its inputs, and its step (None when
    nothing runs in the plan's runs: constant outputs, folded, or a view of a constant).
    The one place where constant evaluation happens, for plans and for the fold pass."""
    kernel = node.kernel
    n_out = len(node.outputs)
    if kernel.outputs_data_dependent or any(f is not None and f.kind == DYNAMIC for f in ins):
        return _dynamic(node, ins)
    ctx = InferContext(node.info, exact, [f.dtype if f else None for f in ins],
                       [f.shape if f else None for f in ins],
                       [f.value if f else None for f in ins], n_out, planning=True)
    infer_kernel(node, ctx)
    if ctx.needs_values or ctx.data_dependent:
        return _dynamic(node, ins, ctx.data_dependent)
    _check_stated(node, ctx)
    if any(c is not None for c in ctx.constants):
        if not all(c is not None for c, o in zip(ctx.constants, node.outputs) if o >= 0):
            node.info.fail("states some outputs constant and some not")
        return [Fact(CONST, c.dtype, c.shape, c) if c is not None else None
                for c in ctx.constants], None
    outs = [Fact(STATIC, d, s) if o >= 0 else Fact(STATIC, np.dtype(np.uint8), (0,))
            for o, d, s in zip(node.outputs, ctx.out_dtypes, ctx.out_shapes)]
    for f in outs:
        if f.nbytes > MAX_SLAB:
            raise SessionError(ErrorKind.UNSUPPORTED,
                               f"{node.info.op_type}: an output of shape {list(f.shape)} needs "
                               f"{f.nbytes} bytes, more than the 2 GiB limit", node.info.name)
    if kernel.view_of_input:
        src = ins[0]
        if outs[0].nbytes != src.nbytes or outs[0].dtype != src.dtype:
            node.info.fail("a view must keep the element type and the size")
        if src.kind == CONST:
            return [Fact(CONST, src.dtype, outs[0].shape, src.value.reshape(outs[0].shape))], None
        return [outs[0]], Step(node, dynamic=False, view=True)
    present = [f for f in ins if f is not None]
    if present and kernel.constant_foldable and all(f.kind == CONST for f in present) and \
            worth_folding(outs, present):
        return [Fact(CONST, arr.dtype, arr.shape, arr) if o >= 0 else None
                for o, arr in zip(node.outputs, _fold(node, ins, outs, ctx.prepared, exact))], None
    return [f if o >= 0 else None for o, f in zip(node.outputs, outs)], \
        Step(node, dynamic=False, prepared=ctx.prepared)


def _dynamic(node: CompiledNode, ins: list, data_dependent: bool = False) -> tuple[list, Step]:
    """Facts and step of a node whose outputs are known only when it runs."""
    fixed = frozenset(i for i, f in enumerate(ins) if f is not None and f.kind == CONST)
    return [Fact(DYNAMIC)] * len(node.outputs), Step(node, dynamic=True, fixed=fixed,
                                                    data_dependent=data_dependent)


def evaluate_constant_node(node: CompiledNode, values: list, exact: bool) -> list | None:
    """The outputs of a node whose present inputs are all constants (``values``), computed
    now with its own kernel (plan_node), or None where it cannot or should not be folded."""
    if node.kernel.outputs_data_dependent or not node.kernel.constant_foldable:
        return None
    ins = [Fact(CONST, v.dtype, v.shape, v) if v is not None else None for v in values]
    outs, step = plan_node(node, ins, exact)
    if step is not None:
        return None
    return [f.value if f is not None else None for f in outs]


def _fold(node: CompiledNode, ins, outs, prepared, exact: bool) -> list[np.ndarray]:
    """Run the node now on constant inputs: the same kernel, so the same bits (where the
    kernel lets numpy compute instead, numpy's bits are the same by construction:
    kernels/core/base.py ``folding``)."""
    arrays = [np.empty(f.shape, f.dtype) if o >= 0 else None for f, o in zip(outs, node.outputs)]
    ctx = RunContext(node.info, [f.value if f is not None else None for f in ins], arrays,
                     prepared, exact, Arena(FOLD_ARENA))
    run_kernel(node, ctx, fold=True)
    return arrays


def infer_kernel(node: CompiledNode, ctx: InferContext) -> None:
    """``kernel.infer`` with foreign failures turned into a SessionError naming the node."""
    try:
        node.kernel.infer(ctx)
    except SessionError:
        raise
    except Exception as e:  # noqa: BLE001 - malformed attributes or inputs the kernel missed
        raise SessionError(ErrorKind.INVALID_MODEL,
                           f"{node.info.op_type}: cannot infer outputs ({type(e).__name__}: {e})".splitlines()[0],
                           node.info.name) from e


def run_kernel(node: CompiledNode, ctx: RunContext, fold: bool = False) -> None:
    """``kernel.run`` (as a constant fold: ``fold_run``) with foreign failures turned into a
    SessionError naming the node."""
    try:
        if fold:
            fold_run(node.kernel, ctx)
        else:
            node.kernel.run(ctx)
    except SessionError:
        raise
    except Exception as e:  # a kernel bug or a numba typing failure
        raise kernel_failure(node, e) from e


def kernel_failure(node: CompiledNode, e: Exception) -> SessionError:
    """The SessionError for an exception a kernel raised that is not one."""
    return SessionError(ErrorKind.UNSUPPORTED,
                        f"{node.info.op_type} failed: {type(e).__name__}: {e}".splitlines()[0],
                        node.info.name)


def _layout(graph: CompiledGraph, facts, steps, early_free, extra_keep=()):
    """Describe the slab values and steps to plan_slab. Step 0 makes the graph inputs.
    Values of object dtype (strings) cannot live in bytes: run states hold them apart."""
    def in_slab(v):
        return v >= 0 and facts[v].kind == STATIC and facts[v].dtype != object
    made = [[v for v in graph.input_ids if in_slab(v)]]
    reads = [[]]
    in_place = {}
    views = {}
    # A dynamic step of a view kernel (e.g. Unsqueeze with run-time axes) makes its output
    # as a view of its input (execute._run_dynamic): a read of that output is a read of the
    # slab value it shows, so the value's block must live as long as the view is read.
    shows = {}
    for st in steps:
        s = len(made)
        ins, outs = st.node.inputs, st.node.outputs
        src = [shows.get(i, i) for i in ins]
        made.append([o for o in outs if in_slab(o)])
        reads.append([i for i in src if in_slab(i)])
        if st.view:
            if in_slab(outs[0]):
                views[outs[0]] = ins[0]
        elif st.dynamic:
            if st.node.kernel.view_of_input and ins and outs[0] >= 0 and in_slab(src[0]):
                shows[outs[0]] = src[0]
        elif st.node.kernel.in_place_input and ins and in_slab(ins[0]) \
                and in_slab(outs[0]) and ins.count(ins[0]) == 1:
            in_place[s] = (outs[0], ins[0])
    static = [v for vs in made for v in vs]
    keep = {shows.get(v, v) for v in list(graph.output_ids) + list(extra_keep)}
    keep = {v for v in keep if in_slab(v)}
    early = None
    if early_free is not None:
        early = graph.value_names.index(early_free)
    return plan_slab(len(made), made, reads, {v: facts[v].nbytes for v in static},
                     {v: facts[v].dtype for v in static}, views, in_place, keep, early)


def checked_mode() -> bool:
    """GRAPHRT_CHECKED=1 poisons slab blocks as their values die and the arena at reset."""
    return os.environ.get("GRAPHRT_CHECKED", "") not in ("", "0")
