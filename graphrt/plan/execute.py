"""Running a plan with one run state: stage inputs, walk the steps, hand out outputs."""
from __future__ import annotations

import os
from time import perf_counter

import numpy as np

from ..errors import ErrorKind, SessionError
from ..kernels.core.base import InferContext, RunContext, make_calls, step_calls
from . import compile_share, jitsched
from .build import DYNAMIC, ExecutionPlan, infer_kernel, kernel_failure, run_kernel
from .state import RunState


def jit_schedule_enabled() -> bool:
    """GRAPHRT_JIT_SCHEDULE=0 keeps plans made from then on on the step-by-step loop."""
    return os.environ.get("GRAPHRT_JIT_SCHEDULE", "1") != "0"


def execute(plan: ExecutionPlan, state: RunState, feeds, cancel, poison: bool,
            timings: list | None = None) -> None:
    """Run every step; afterwards ``state.values[vid]`` holds each value of the run.
    ``timings``, when given, receives (step index, start, end) in perf_counter seconds."""
    values = state.values
    for vid, x in zip(plan.graph.input_ids, feeds):
        if plan.facts[vid].kind == DYNAMIC:
            values[vid] = x             # a packed value: read, never written
        else:
            np.copyto(values[vid], x, casting="no")
    execute_staged(plan, state, cancel, poison, timings)


def execute_staged(plan: ExecutionPlan, state: RunState, cancel, poison: bool,
                   timings: list | None = None) -> None:
    """``execute`` with the inputs already in ``state.values`` (a loop body's next
    iteration, subgraph.Iterations)."""
    values = state.values
    state.arena.reset()
    slab = state.slab
    if poison:
        _poison(slab, plan.freed_after[0])
    contexts = state.contexts
    calls = state.calls
    sharing = None
    if calls is None:
        with compile_share.tables_deferred():
            calls = [_calls_of(st, c) for st, c in zip(plan.steps, contexts)]
        if plan.runs == 0:
            sharing = compile_share.start(calls)     # a cold first run: two compilers
        compile_share.fill_tables(calls, sharing)   # (before any of the calls runs)
        state.calls = calls
    if plan.jit_job is not None:
        jitsched.poll(plan)             # compiled by the helper process: load it now
    jit = plan.jit
    if cancel is None and timings is None and not poison and (jit is not None or plan.runs >= 2):
        _run_scheduled(plan, state, jit, calls)
        return
    for i, st in enumerate(plan.steps):
        if cancel is not None and cancel.cancelled:
            raise SessionError(ErrorKind.CANCELLED, "the run was cancelled", st.node.info.name)
        if timings is not None:
            t0 = perf_counter()
        if sharing is not None:
            sharing.before(i)
        if st.dynamic:
            _run_dynamic(st, values, state.arena, plan.graph.exact, cancel, slab)
        elif st.view:
            pass
        elif cancel is not None and calls[i] is None:
            ctx = contexts[i]       # a static If's branch checks the run's token too
            ctx.cancel = cancel
            try:
                _run_static(st, ctx, state.arena, None)
            finally:
                ctx.cancel = None
        else:
            _run_static(st, contexts[i], state.arena, calls[i])
        if timings is not None:
            timings.append((i, t0, perf_counter()))
        if poison:
            _poison(slab, plan.freed_after[i + 1])
    plan.runs += 1
    if plan.runs <= 2 and jit_schedule_enabled() and not plan.provisional:
        if plan.runs == 1:
            jitsched.warm_up()
        else:
            jitsched.start_compile(plan, state)     # a reused plan: compile its schedule


def _run_scheduled(plan: ExecutionPlan, state: RunState, jit, calls) -> None:
    """The steps as the run state's program (``_program``), which puts the compiled segments
    of ``jit`` in place of their steps."""
    program = state.program
    if program is None or program[0] is not jit:
        program = state.program = [jit, _program(plan, state, jit, calls), ENTRY_AFTER]
    elif program[2]:
        program[2] -= 1
        if not program[2]:
            program[1] = _with_entries(program[1], jit)
    values, slab, contexts, arena = state.values, state.slab, state.contexts, state.arena
    steps = plan.steps
    i = 0
    try:
        for fn, args, i in program[1]:
            if fn is not None:
                fn(*args)
                continue
            st = steps[i]
            if st.dynamic:
                _run_dynamic(st, values, arena, plan.graph.exact, None, slab)
            else:
                _run_static(st, contexts[i], arena, None)
    except SessionError:
        raise
    except Exception as e:  # (compiled calls do not raise; this is a bug)
        segment = next((g for g in jit.segments if g.start == i), None) if jit else None
        if segment is None:
            raise kernel_failure(steps[i].node, e) from e
        first, last = steps[i].node.info, steps[segment.stop - 1].node.info
        raise SessionError(ErrorKind.UNSUPPORTED,
                           f"the compiled steps {first.name!r} to {last.name!r} failed: "
                           f"{type(e).__name__}: {e}".splitlines()[0], first.name) from e


def _program(plan: ExecutionPlan, state: RunState, jit, calls) -> list:
    """A run of ``state`` as one flat list: (dispatcher, args, step) for each compiled call
    (a segment of ``jit``, or one of a step's jit_calls), (None, None, step) for a step
    that runs as Python; static views have nothing to run."""
    segments = {} if jit is None else {g.start: (k, g) for k, g in enumerate(jit.segments)}
    consts = None if jit is None else jit.consts(state)
    program = []
    steps = plan.steps
    i = 0
    while i < len(steps):
        if i in segments:
            k, g = segments[i]
            # (a segment keeps its dispatcher: typing its tuples of slab views to find the
            # entry point cost more than the calls would save, t5_encoder 8 ms a state)
            program.append((g.fn, (*consts[k], g.ints, g.floats), i))
            i = g.stop
            continue
        st = steps[i]
        if st.view:
            pass
        elif st.dynamic or calls[i] is None:
            program.append((None, None, i))
        else:
            program += [(fn, args, i) for fn, args in calls[i]]
        i += 1
    return program


ENTRY_AFTER = 8     # runs of a run state's program before its calls go to entry points


def _with_entries(program: list, jit) -> list:
    """``program`` with each step call's dispatcher (not a segment's: those sit at their
    first step) replaced by its entry point (_entry). Done after a few runs of the state, not
    when the program is made: typing every argument takes milliseconds on a large plan
    (bert, 150 calls), which runs 2-5 would pay."""
    starts = set() if jit is None else {g.start for g in jit.segments}
    return [(fn if fn is None or i in starts else _entry(fn, args), args, i)
            for fn, args, i in program]


def _entry(fn, args):
    """The compiled entry point a numba dispatcher would pick for ``args`` (found once: the
    dispatcher's own choice costs about 0.3 us a call, more with many arguments), else
    ``fn`` itself (not compiled for these types yet, not a dispatcher, or a parallel kernel:
    once, t5_encoder's parallel MatMul took 400 us a call through its entry point against
    160 through the dispatcher at 2 threads; later runs of the same test were even, so it is
    not understood, and parallel kernels keep the dispatcher)."""
    overloads = getattr(fn, "overloads", None)
    if overloads is None or not hasattr(fn, "typeof_pyval") or \
            getattr(fn, "targetoptions", {}).get("parallel"):
        return fn
    try:
        cres = overloads.get(tuple(fn.typeof_pyval(a) for a in args))
    except Exception:   # (a value numba cannot type: let the dispatcher say so)
        return fn
    return fn if cres is None or cres.entry_point is None else cres.entry_point


def _calls_of(st, ctx):
    """The step's jit_calls (None for a dynamic step, a view or a kernel that needs Python)."""
    if ctx is None:
        return None
    try:
        return step_calls(st.node.kernel, ctx)
    except Exception as e:  # (a kernel bug: named like a failing run)
        raise kernel_failure(st.node, e) from e


def _run_static(st, ctx, arena, calls) -> None:
    """A static step: its kernel's calls (``calls``, OpKernel.jit_calls: no Python of the
    kernel's own per run), or its run; the scratch a run took from the arena is free again
    when it returns."""
    if calls is not None:
        try:
            make_calls(calls)
        except Exception as e:  # (the calls do not raise; this is a bug)
            raise kernel_failure(st.node, e) from e
        return
    chunks, used, total = len(arena.chunks), arena.used, arena.total
    run_kernel(st.node, ctx)
    if arena.total != total:
        arena.rewind(chunks, used, total)


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
