"""A run state's program: its run as one flat list of instructions.

An instruction is ``(fn, args, step)``:
- a block of compiled calls, ``fn()`` (a ``Block``, ``args`` empty): consecutive calls of
  one or more steps, made by the interpreter of kernels/core/trampolines.py in one call from
  Python -- every call a trampoline can make (a compiled overload that returns nothing, its
  arrays C-contiguous); ``step`` is its first step;
- a compiled call, ``fn(*args)``: one of a step's jit_calls (OpKernel.jit_calls) that no
  trampoline can make (a value numba boxes, such as a tuple), through the entry point numba
  would pick (``entry``);
- a Python step, ``(None, None, step)``: a static step whose kernel needs Python (its run),
  or a dynamic step (inferred and run with this run's arrays).
Static views and steps whose calls are none have no instruction.

A state has two forms of its program: by steps (every step's own calls through numba's
dispatchers), which the checked loop runs -- with a profile's timings, poisoning, and at a
plan's first run, whose calls compile the kernels -- and blocked (``blocked``), which the
plain loop runs from the second run on (made at the end of the plan's first run, else at
the state's first). Both are made from each step's calls, once per state;
nothing is compiled for a plan. The loops are in plan/execute.py.
"""
from __future__ import annotations

import numpy as np

from ..errors import ErrorKind, SessionError
from ..kernels.core import trampolines
from ..kernels.core.by_address import overload_address
from ..kernels.core.base import step_calls
from .build import ExecutionPlan, kernel_failure, run_kernel


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


def by_steps(plan: ExecutionPlan, calls: list) -> list:
    """The run as instructions, each step's ``calls`` (step_calls_of) as themselves."""
    out = []
    for i, st in enumerate(plan.steps):
        if st.view:
            pass
        elif st.dynamic or calls[i] is None or st.node.kernel.traps:
            out.append((None, None, i))     # (a checked run: control flow runs its bodies
        else:                               # by their checked loop too)
            out += [(fn, args, i) for fn, args in calls[i]]
    return out


def blocked(plan: ExecutionPlan, state) -> list:
    """The run as instructions with each run of consecutive calls a trampoline can make as
    one Block (reading the state's cancel flag), the other calls through entry points."""
    calls = state.calls
    out = []
    pending: list = []          # (step, fn, args, argtypes) of the block being gathered

    def close():
        if pending:
            out.append((Block(plan, pending, state.flag, state), (), pending[0][0]))
            pending.clear()

    for i, st in enumerate(plan.steps):
        if st.view:
            continue
        if st.dynamic or calls[i] is None:
            close()
            out.append((None, None, i))
            continue
        traps = st.node.kernel.traps
        for fn, args in calls[i]:
            if traps:       # (a control-flow driver: compiled now, not for a first run
                compile_for(fn, args)                       # that runs the Python path)
            sig = trampolines.signature(fn, args)
            if sig is None:
                close()
                out.append((entry(fn, args), args, i))
            else:
                pending.append((i, fn, args, sig))
    close()
    return out


class Block:
    """Consecutive compiled calls (of steps ``steps``) made by ``trampolines.run_calls`` in
    one call from Python; calling the block makes them. A set cancel flag stops the block
    before its next call. A call that raises is a trap when its step's kernel says so
    (``OpKernel.traps``: a control-flow driver meeting a subgraph not compiled yet): the
    step's Python run is made in its place, and the block goes on. Any other call that
    raises is made again from Python, so that the SessionError names its step and carries
    the kernel's message."""

    __slots__ = ("prog", "row", "flag", "n", "steps", "calls", "nodes", "_run", "_state")

    def __init__(self, plan: ExecutionPlan, pending: list, flag: np.ndarray, state=None):
        addresses = trampolines.trampolines([sig for *_, sig in pending])
        prog, row = [], []
        for (_i, fn, args, sig), tramp in zip(pending, addresses):
            prog += [tramp, overload_address(fn, sig), len(row)]
            row += trampolines.row_of(args)
        self.prog = np.array(prog, dtype=np.int64)
        self.row = np.array(row + [0], dtype=np.int64)
        self.flag = flag
        self.n = len(pending)
        self.steps = [i for i, *_ in pending]
        self.calls = [(fn, args) for _i, fn, args, _sig in pending]  # (keeps the arrays alive)
        self.nodes = [plan.steps[i].node for i in self.steps]
        self._run = trampolines.interpreter()
        self._state = state

    def __call__(self) -> None:
        k = self._run(self.prog, self.row, self.flag, 0, self.n)
        while k >= 0:
            k = self.failed(k)      # (returns only after a trap's Python run)
            k = self._run(self.prog, self.row, self.flag, k, self.n)

    def failed(self, k: int) -> int:
        """Call k raised or found the flag set: raise the SessionError, or after a trap's
        Python run the index of the next step's first call."""
        node = self.nodes[k]
        if self.flag[0]:
            raise SessionError(ErrorKind.CANCELLED, "the run was cancelled", node.info.name)
        if node.kernel.traps and self._state is not None:
            state = self._state
            step = self.steps[k]
            run_python(node, state.contexts[step], state.arena)
            while k < self.n and self.steps[k] == step:
                k += 1
            return k
        fn, args = self.calls[k]
        try:
            fn(*args)
        except SessionError:
            raise
        except Exception as e:
            raise kernel_failure(node, e) from e
        raise SessionError(ErrorKind.UNSUPPORTED, f"{node.info.op_type} failed in a block of "
                           f"compiled calls and not when called alone", node.info.name)


class Program:
    """A run state's program in its two forms (the module docstring): ``by_steps``, and
    ``plain``, the blocked form (made at the end of the plan's first run, or at a later
    state's first)."""

    __slots__ = ("by_steps", "plain")

    def __init__(self, plan: ExecutionPlan, calls: list):
        self.by_steps = by_steps(plan, calls)
        self.plain = None

    def scheduled(self, plan: ExecutionPlan, state) -> list:
        if self.plain is None:
            self.plain = blocked(plan, state)
        return self.plain


def compile_for(fn, args) -> None:
    """Compile (or load from the cache) ``fn``'s overload for the types of ``args``."""
    fn.compile(tuple(fn.typeof_pyval(a) for a in args))


def run_python(node, ctx, arena) -> None:
    """A static step's run (its kernel needs Python); the scratch it took from the arena is
    free again when it returns."""
    chunks, used, total = len(arena.chunks), arena.used, arena.total
    run_kernel(node, ctx)
    if arena.total != total:
        arena.rewind(chunks, used, total)


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
