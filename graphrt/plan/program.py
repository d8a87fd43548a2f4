"""A run state's program: its run as one flat list of instructions.

An instruction is ``(fn, args, step)``:
- a compiled call, ``fn(*args)``: one of a step's jit_calls (OpKernel.jit_calls: a numba
  dispatcher, or after ENTRY_AFTER runs the entry point it would pick), or a segment of the
  plan's jitted schedule (plan/jitsched.py) standing for its steps ``step`` .. its stop;
- a Python step, ``(None, None, step)``: a static step whose kernel needs Python (its run),
  or a dynamic step (inferred and run with this run's arrays).
Static views and steps whose calls are none have no instruction.

A state has two forms of its program, made from one function (``instructions``): by steps
(every step's own calls), which the checked loop runs -- with a cancel token, a profile's
timings, poisoning, and a plan's first runs -- and scheduled (the segments in place of their
steps, entry points after a few runs), which the plain loop runs. The loops are in
plan/execute.py.
"""
from __future__ import annotations

from ..kernels.core.base import step_calls
from .build import ExecutionPlan, kernel_failure

ENTRY_AFTER = 8     # runs of a state's scheduled form before its calls go to entry points


def step_calls_of(plan: ExecutionPlan, state) -> list:
    """Each step's jit_calls in ``state`` (None for a dynamic step, a view or a kernel that
    needs Python); a kernel failing to make them is named like a failing run."""
    calls = []
    for st, ctx in zip(plan.steps, state.contexts):
        if ctx is None:
            calls.append(None)
            continue
        try:
            calls.append(step_calls(st.node.kernel, ctx))
        except Exception as e:  # (a kernel bug)
            raise kernel_failure(st.node, e) from e
    return calls


def instructions(plan: ExecutionPlan, calls: list, jit=None, consts=None) -> list:
    """The run as instructions, each step's ``calls`` (step_calls_of), the segments of
    ``jit`` (with this state's ``consts``) in place of their steps."""
    segments = {} if jit is None else {g.start: (k, g) for k, g in enumerate(jit.segments)}
    out = []
    steps = plan.steps
    i = 0
    while i < len(steps):
        if i in segments:
            k, g = segments[i]
            # (a segment keeps its dispatcher: typing its tuples of slab views to find the
            # entry point cost more than the calls would save, t5_encoder 8 ms a state)
            out.append((g.fn, (*consts[k][:3], *g.data), i))   # (not what it holds)
            i = g.stop
            continue
        st = steps[i]
        if st.view:
            pass
        elif st.dynamic or calls[i] is None:
            out.append((None, None, i))
        else:
            out += [(fn, args, i) for fn, args in calls[i]]
        i += 1
    return out


class Program:
    """A run state's program in its two forms (the module docstring): ``by_steps``, and
    ``plain``, the scheduled form as the plain loop last ran it (None before)."""

    __slots__ = ("by_steps", "jit", "plain", "_countdown")

    def __init__(self, plan: ExecutionPlan, calls: list):
        self.by_steps = instructions(plan, calls)
        self.jit = None
        self.plain = None
        self._countdown = 0

    def scheduled(self, plan: ExecutionPlan, state) -> list:
        """The scheduled form for the plan's current schedule (remade when it changes);
        after ENTRY_AFTER runs of it, its calls go to entry points (``with_entries``)."""
        jit = plan.jit
        if self.plain is None or self.jit is not jit:
            self.plain = self.by_steps if jit is None else \
                instructions(plan, state.calls, jit, jit.consts(state))
            self.jit = jit
            self._countdown = ENTRY_AFTER
        elif self._countdown:
            self._countdown -= 1
            if not self._countdown:
                self.plain = with_entries(self.plain, jit)
        return self.plain


def with_entries(program: list, jit) -> list:
    """``program`` with each step call's dispatcher (not a segment's: those sit at their
    first step) replaced by its entry point (``entry``). Done after a few runs of the state,
    not when the program is made: typing every argument takes milliseconds on a large plan
    (bert, 150 calls), which runs 2-5 would pay."""
    starts = set() if jit is None else {g.start for g in jit.segments}
    return [(fn if fn is None or i in starts else entry(fn, args), args, i)
            for fn, args, i in program]


def entry(fn, args):
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
