"""Running a plan with one run state: stage inputs, walk the steps, hand out outputs."""
from __future__ import annotations

from time import perf_counter

import numpy as np

from ..errors import ErrorKind, SessionError
from ..kernels.control.drivers import DRIVERS
from ..kernels.core.base import InferContext, RunContext
from . import compile_share
from .build import DYNAMIC, ExecutionPlan, infer_kernel, kernel_failure, run_kernel
from .program import Program, run_python, step_calls_of
from .state import RunState


def execute(plan: ExecutionPlan, state: RunState, feeds, cancel, poison: bool,
            timings: list | None = None) -> None:
    """Run every step; afterwards ``state.values[vid]`` holds each value of the run.
    ``timings``, when given, receives (step index, start, end) in perf_counter seconds."""
    values = state.values
    for vid, x in zip(plan.graph.input_ids, feeds):
        if plan.facts[vid].kind == DYNAMIC:
            values[vid] = x             # a packed value: read, never written
        else:
            values[vid][...] = x        # (the plan's signature: same type and shape)
    execute_staged(plan, state, cancel, poison, timings)


def execute_staged(plan: ExecutionPlan, state: RunState, cancel, poison: bool,
                   timings: list | None = None) -> None:
    """``execute`` with the inputs already in ``state.values`` (a loop body's next
    iteration, subgraph.Iterations): the state's program (plan/program.py), by the plain
    loop, or by the checked one for a run with timings or poisoning and for a plan's first
    run. A ``cancel`` token belongs to the state for the whole run."""
    state.arena.reset()
    program = state.program
    if cancel is None and program is not None:      # (the common case)
        _run_program(plan, state, program, None, poison, timings, None)
        return
    sharing = None
    if program is None:
        with compile_share.tables_deferred():
            calls = step_calls_of(plan, state)
        # (a control-flow driver's calls are not the first run's: it takes the Python path)
        first = [None if c and c[0][0] in DRIVERS else c for c in calls]
        if plan.runs == 0:
            # a cold first run: two compilers
            sharing, plan.cold_first = compile_share.start(first)
        compile_share.fill_tables(first, sharing)   # (before any of the calls runs)
        state.calls = calls
        program = state.program = Program(plan, calls)
    if cancel is None:
        _run_program(plan, state, program, None, poison, timings, sharing)
        return
    if cancel.cancelled:
        raise SessionError(ErrorKind.CANCELLED, "the run was cancelled",
                           plan.steps[0].node.info.name if plan.steps else None)
    state.cancel[0] = cancel            # (the steps' contexts read it: a Loop's body too)
    cancel.watch(state.flag)            # (the blocks read the flag)
    try:
        _run_program(plan, state, program, cancel, poison, timings, sharing)
    finally:
        cancel.unwatch(state.flag)
        state.flag[0] = 0
        state.cancel[0] = None


def _run_program(plan, state, program, cancel, poison, timings, sharing) -> None:
    if timings is None and not poison and plan.runs >= 1:
        _run(plan, state, program.scheduled(plan, state), cancel)
    else:
        _run_checked(plan, state, program.by_steps, cancel, poison, timings, sharing)
        plan.runs += 1
        if timings is None and not poison:
            # the blocked form the next run takes, made now: its kernels are all loaded
            # by now, and making it (the block interpreter's and trampolines' code, 3-5 ms
            # in a new process) would be most of a small model's second run
            program.scheduled(plan, state)


def _run(plan: ExecutionPlan, state: RunState, program: list, cancel) -> None:
    """The plain loop: each instruction of ``program`` in turn; with a ``cancel`` token,
    checked before each Python step (blocks check its flag before each call)."""
    values, slab, contexts, arena = state.values, state.slab, state.contexts, state.arena
    steps = plan.steps
    exact = plan.graph.exact
    i = 0
    try:
        for fn, args, i in program:
            if fn is not None:
                fn(*args)
                continue
            if cancel is not None and cancel.cancelled:
                raise _cancelled(steps[i])
            if steps[i].dynamic:
                _run_dynamic(steps[i], values, arena, exact, cancel, slab)
            else:
                run_python(steps[i].node, contexts[i], arena)
    except SessionError:
        raise
    except Exception as e:  # (compiled calls do not raise; this is a bug)
        raise kernel_failure(plan.steps[i].node, e) from e


def _run_checked(plan: ExecutionPlan, state: RunState, program: list, cancel, poison: bool,
                 timings: list | None, sharing) -> None:
    """The checked loop: ``program`` (its by-steps form) step by step, checking ``cancel``
    before each step, recording ``timings`` (step, start, end) and poisoning the blocks
    freed after each; ``sharing``: a cold first run's compile sharing (compile_share)."""
    values, slab, contexts, arena = state.values, state.slab, state.contexts, state.arena
    exact = plan.graph.exact
    if poison:
        _poison(slab, plan.freed_after[0])
    k, n = 0, len(program)
    i = 0
    try:
        for i, st in enumerate(plan.steps):
            if cancel is not None and cancel.cancelled:
                raise _cancelled(st)
            if timings is not None:
                t0 = perf_counter()
            if sharing is not None:
                sharing.before(i)
            while k < n and program[k][2] == i:
                fn, args, _ = program[k]
                k += 1
                if fn is not None:
                    fn(*args)
                elif st.dynamic:
                    _run_dynamic(st, values, arena, exact, cancel, slab)
                else:
                    run_python(st.node, contexts[i], arena)
            if timings is not None:
                timings.append((i, t0, perf_counter()))
            if poison:
                _poison(slab, plan.freed_after[i + 1])
    except SessionError:
        raise
    except Exception as e:  # (compiled calls do not raise; this is a bug)
        raise kernel_failure(plan.steps[i].node, e) from e


def _cancelled(st) -> SessionError:
    return SessionError(ErrorKind.CANCELLED, "the run was cancelled", st.node.info.name)


def release_dynamic(plan: ExecutionPlan, state: RunState) -> None:
    """Drop the run's references to arena memory."""
    for vid in plan.dynamic_ids:
        state.values[vid] = None


class _Reads(list):
    """The inputs of an inference, recording which ones it read the value of."""

    def __init__(self, items):
        super().__init__(items)
        self.read: set[int] = set()

    def __getitem__(self, i):
        self.read.add(i)
        return list.__getitem__(self, i)


def _infer_dynamic(st, ins: list, exact: bool) -> InferContext:
    """A dynamic step's inference, reused from the step's last run when the inputs' types and
    shapes are the same and the inference read no values but the plan's constants (whose
    arrays never change: compared by identity). One that read a run-time value runs again:
    what it prepared may refer to that run's arrays."""
    node = st.node
    sig = tuple((a.dtype, a.shape) if a is not None else None for a in ins)
    memo = st.memo
    if memo is not None and memo[0] == sig and all(ins[i] is v for i, v in memo[1]):
        return memo[2]
    reads = _Reads(ins)
    ictx = InferContext(node.info, exact, [s[0] if s else None for s in sig],
                        [s[1] if s else None for s in sig], reads, len(node.outputs))
    infer_kernel(node, ictx)
    read = [i for i in reads.read if ins[i] is not None]
    if all(i in st.fixed for i in read):
        st.memo = (sig, tuple((i, ins[i]) for i in read), ictx)
    return ictx


def _run_dynamic(st, values, arena, exact: bool, cancel, slab) -> None:
    node = st.node
    ins = [values[i] if i >= 0 else None for i in node.inputs]
    n_out = len(node.outputs)
    kernel = node.kernel
    ictx = None
    if not (kernel.outputs_data_dependent or st.data_dependent):
        ictx = _infer_dynamic(st, ins, exact)
    if ictx is None or ictx.data_dependent:
        ctx = RunContext(node.info, ins, [None] * n_out, None, exact, arena, cancel)
    else:
        if any(c is not None for c in ictx.constants):
            for o, c in zip(node.outputs, ictx.constants):
                if o >= 0:
                    values[o] = c
            return
        if kernel.view_of_input:
            values[node.outputs[0]] = ins[0].reshape(ictx.out_shapes[0])
            return
        outs = [arena.take(d, s, node.info.name) if o >= 0 else None
                for o, d, s in zip(node.outputs, ictx.out_dtypes, ictx.out_shapes)]
        ctx = RunContext(node.info, ins, outs, ictx.prepared, exact, arena, cancel)
    run_kernel(node, ctx)
    for o, arr in zip(node.outputs, ctx.outputs):
        if o >= 0:
            if arr is None:
                node.info.fail("the kernel produced no value for a used output")
            if np.may_share_memory(arr, slab):
                # an input handed back as an output (Loop with no iteration, ...): the planner
                # may reuse that input's block after this step, so the output gets a copy
                copy = arena.take(arr.dtype, arr.shape, node.info.name)
                copy[...] = arr
                arr = copy
            values[o] = arr


def _poison(slab: np.ndarray, blocks) -> None:
    for off, size in blocks:
        slab[off:off + size] = 0xFF
