"""Bodies of subgraph operators: a nested compiled graph with its own plan cache.

A body runs like a session without names: inputs in order (declared body inputs, then the
captured outer values), outputs in order. Each call makes or reuses a plan for the inputs'
types and shapes and borrows a run state from it; outputs are copied out, since the state
goes back to the pool. A loop's calls (Iterations) keep one plan and run state instead and
rewrite its inputs in place from call to call.
"""
from __future__ import annotations

import numpy as np

from .errors import ErrorKind, SessionError
from .graph import CompiledGraph
from .plan.build import CONST, STATIC, checked_mode
from .plan.cache import PlanCache
from .kernels.core import trampolines
from .plan.execute import execute_staged, release_dynamic
from .plan.program import Block

BODY_PLANS = 16


def _addressable(a) -> bool:
    return isinstance(a, np.ndarray) and trampolines.addressable(a)


class Body:
    def __init__(self, graph: CompiledGraph):
        self.graph = graph
        self._plans = PlanCache(graph, BODY_PLANS, checked_mode())

    @property
    def output_infos(self):
        return self.graph.outputs

    @property
    def input_infos(self):
        return self.graph.inputs

    def run(self, inputs, cancel=None) -> list[np.ndarray]:
        """``inputs``: the declared ones, then every captured value (those the body holds as
        constants are left out here)."""
        out_ids = self.graph.output_ids

        def deliver(plan, values):
            return [np.array(values[v], copy=True) for v in out_ids]
        return self._plans.run(self._arrays(inputs), deliver, cancel=cancel)

    def run_into(self, inputs, outputs: list, cancel=None, holder: dict | None = None) -> None:
        """Body.run writing each output into the array given for it (of the body's planned
        type and shape: see planned_outputs). ``holder``: the caller's run state's dict of
        kept things (RunContext.held), where the body keeps a plan and run state of its own
        for the calls of that run state (one thread at a time), instead of taking them from
        the cache at each call."""
        out_ids = self.graph.output_ids

        def deliver(plan, values):
            for out, v in zip(outputs, out_ids):
                np.copyto(out, values[v], casting="no")
        if holder is None:
            self._plans.run(self._arrays(inputs), deliver, cancel=cancel)
            return
        runs = holder.get(self)
        if runs is None:
            runs = holder[self] = self._plans.held()
        runs.run(self._arrays(inputs), deliver, cancel)

    def compiled_run(self, holder: dict, key=None):
        """(plan, run state, block) of the run this body keeps in ``holder`` (under ``key``,
        the body itself by default), when its plan has run and its program is compiled
        calls only (``block`` None when it has none); else None. The state stays the
        holder's: what a record of it points at lives as long as the holder."""
        runs = holder.get(self if key is None else key)
        state = None if runs is None else runs.state
        if state is None or state.program is None or runs.entry.plan.runs < 1:
            return None
        plan = runs.entry.plan
        program = state.program.scheduled(plan, state)
        if len(program) > 1 or any(not isinstance(fn, Block) for fn, _a, _i in program):
            return None
        return plan, state, (program[0][0] if program else None)

    def input_buffers(self, plan, state, n_inputs: int) -> list:
        """The run state's buffer of each of the body's ``n_inputs`` inputs (declared, then
        captured; None for one the body holds as a constant), or None when one is not an
        addressable slab value."""
        dropped = self.graph.dropped
        kept = iter(plan.graph.input_ids)
        out = []
        for p in range(n_inputs):
            if p in dropped:
                out.append(None)
                continue
            vid = next(kept)
            v = state.values[vid]
            if plan.facts[vid].kind != STATIC or not _addressable(v):
                return None
            out.append(v)
        return out

    def output_values(self, plan, state) -> list | None:
        """The run state's value of each body output, or None when one is not addressable."""
        values = [state.values[v] for v in self.graph.output_ids]
        return values if all(_addressable(v) for v in values) else None

    def planned_outputs(self, types: list) -> list | None:
        """(dtype, shape) of each output when the inputs have ``types`` ((dtype, shape) per
        Body.run input), planned now; None when an output is known only at run time or the
        body cannot be planned for these types (the error comes when it runs, if it does)."""
        dropped = self.graph.dropped
        key = tuple((np.dtype(d), tuple(s)) for i, (d, s) in enumerate(types) if i not in dropped)
        try:
            entry = self._plans.acquire(key)
        except SessionError:
            return None
        facts = [entry.plan.static_type(v) for v in self.graph.output_ids]
        return None if any(f is None for f in facts) else facts

    def _arrays(self, inputs) -> list[np.ndarray]:
        """Body.run's ``inputs`` as the plan takes them: C-contiguous, the constants out."""
        dropped = self.graph.dropped
        if len(inputs) != len(self.graph.inputs) + len(dropped):
            raise SessionError(ErrorKind.INVALID_MODEL,
                               f"a body takes {len(self.graph.inputs) + len(dropped)} inputs, "
                               f"got {len(inputs)}")
        if dropped:
            inputs = [x for i, x in enumerate(inputs) if i not in dropped]
        return [x if x.flags.c_contiguous else x.copy() for x in map(np.asarray, inputs)]

    def iterations(self, fresh: list[int], carried: list[tuple[int, int]],
                   holder: dict | None = None) -> "Iterations":
        """The calls of one Loop or Scan (see Iterations); use as a ``with`` block.
        ``holder``: a run state's dict of kept things, where the calls keep their plan and
        run state from one run of the node to the next (under (body, "loop"))."""
        return Iterations(self, fresh, carried, holder)


class Iterations:
    """The calls of one Loop or Scan over a body, on one plan and run state while the inputs
    keep their types and shapes. The inputs (numbered as for Body.run) come in three parts:
    ``fresh`` positions, given anew at each call (the iteration number, scan slices);
    ``carried`` (output index, input position) pairs, whose input is the previous call's
    output; and the rest (captured values), the same at every call. ``first`` stages them
    all; ``next`` writes the fresh and carried ones into the run state's input buffers and
    runs the steps again: no signature, no copies of outputs out and back in, no state
    taken per call. The captured inputs are kept alive to the end of each run (the plan's
    ``keep``), so no step overwrites them. Either returns the body's outputs as the run
    state holds them, valid until the next call: copy what you keep."""

    def __init__(self, body: Body, fresh: list[int], carried: list[tuple[int, int]],
                 holder: dict | None = None):
        graph = body.graph
        self.body = body
        self.fresh = list(fresh)
        self.carried = list(carried)
        moving = set(self.fresh) | {p for _, p in self.carried}
        n_in = len(graph.inputs)    # declared inputs: their positions are not renumbered
        keep = tuple(v for k, v in enumerate(graph.input_ids) if k >= n_in or k not in moving)
        self._own = holder is None
        if holder is None:
            self._held = body._plans.held(keep)
        else:
            self._held = holder.get((body, "loop"))
            if self._held is None:
                self._held = holder[(body, "loop")] = body._plans.held(keep)
        self._inputs: list = []
        self._outs: list = []
        self._lean = None       # per plan: (targets, static pairs, checked pairs, two_phase)
        self._out_ids = graph.output_ids
        self._poison = body._plans.poison

    def first(self, inputs: list, cancel=None) -> list:
        self._inputs = list(inputs)
        return self._full(cancel)

    def next(self, fresh: list, cancel=None) -> list:
        """The next call: ``fresh`` values in the order of the fresh positions."""
        lean = self._lean
        if lean is None:
            return self._moved(fresh, cancel)
        targets, pairs, checked, two_phase = lean
        if checked:
            outs, slab, pairs = self._outs, self._held.state.slab, list(pairs)
            for o, t in checked:
                src = outs[o]
                if not isinstance(src, np.ndarray) or src.dtype != t.dtype or src.shape != t.shape:
                    return self._moved(fresh, cancel)
                two_phase = two_phase or np.may_share_memory(src, slab)
                pairs.append((src, t))
        if two_phase:
            pairs = [(np.array(src, copy=True), t) for src, t in pairs]
        for src, t in pairs:
            t[...] = src
        for t, v in zip(targets, fresh):
            t[...] = v
        plan, state = self._held.entry.plan, self._held.state
        try:
            execute_staged(plan, state, cancel, self._poison)
            values = state.values
            self._outs = outs = [values[v] for v in self._out_ids]
        finally:
            release_dynamic(plan, state)    # (the outputs stay referenced)
        return outs

    def _moved(self, fresh, cancel) -> list:
        """The general call: every input staged (a new signature gets its plan)."""
        for p, v in zip(self.fresh, fresh):
            self._inputs[p] = v
        for o, p in self.carried:
            self._inputs[p] = np.array(self._outs[o], copy=True)    # the state may go back
        return self._full(cancel)

    def _full(self, cancel) -> list:
        arrays = self.body._arrays(self._inputs)
        out_ids = self.body.graph.output_ids
        self._outs = self._held.run(arrays, lambda plan, values: [values[v] for v in out_ids],
                                    cancel)
        memo = self._held.state.memo
        key = (Iterations, tuple(self.fresh), tuple(self.carried))
        if key not in memo:
            memo[key] = self._lean_of()
        self._lean = memo[key]
        return self._outs

    def _lean_of(self):
        """How ``next`` rewrites this plan's inputs, or None when it cannot (a packed input,
        an output whose planned type or shape is not its input's)."""
        plan, state = self._held.entry.plan, self._held.state
        graph = self.body.graph
        values = state.values

        def buffer(p):
            vid = graph.input_ids[p]
            return values[vid] if plan.facts[vid].kind == STATIC else None
        targets = [buffer(p) for p in self.fresh]
        static, checked = [], []
        for o, p in self.carried:
            t = buffer(p)
            targets.append(t)
            f = plan.facts[graph.output_ids[o]]
            src = values[graph.output_ids[o]]
            if f.kind in (STATIC, CONST) and src is not None:
                if t is None or f.dtype != t.dtype or f.shape != t.shape:
                    return None
                static.append((src, t))
            else:
                checked.append((o, t))
        if any(t is None for t in targets):
            return None
        # an output may lie in a carried input's block (the input was dead by then): then
        # copy every output out before writing any input
        two_phase = any(np.may_share_memory(src, t) for src, _ in static
                        for t in targets if t is not _own(static, src))
        return targets[:len(self.fresh)], static, checked, two_phase

    def close(self) -> None:
        if self._own:
            self._held.close()
        self._lean = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _own(pairs, src):
    """The target ``src`` is copied into."""
    for s, t in pairs:
        if s is src:
            return t
    return None
