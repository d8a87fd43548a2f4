"""RunState: what one run owns -- the slab, the value table and the arena -- and the
per-plan pool that lends run states out (at most 8 kept idle)."""
from __future__ import annotations

import threading

import numpy as np

from ..kernels.core.base import RunContext
from .arena import Arena, aligned_bytes
from .build import CONST, STATIC, ExecutionPlan

MAX_IDLE_STATES = 8
DEFAULT_ARENA_LIMIT = 4 << 30


class RunState:
    """Slab views for every static value are made once here, so a warm run creates none."""

    def __init__(self, plan: ExecutionPlan, poison: bool, arena_limit: int = DEFAULT_ARENA_LIMIT):
        self.slab = aligned_bytes(plan.slab_size)
        if poison:
            self.slab.fill(0xFF)
        values: list = [None] * len(plan.facts)
        view_outs = {st.node.outputs[0] for st in plan.steps if st.view}
        for vid, f in enumerate(plan.facts):
            if f is None:
                continue
            if f.kind == CONST:
                values[vid] = f.value
            elif f.kind == STATIC and vid in plan.offsets:
                off = plan.offsets[vid]
                values[vid] = self.slab[off:off + f.nbytes].view(f.dtype).reshape(f.shape)
            elif f.kind == STATIC and f.dtype == object and vid not in view_outs:
                values[vid] = np.empty(f.shape, dtype=object)
        for st in plan.steps:       # views of values kept outside the slab
            if st.view and values[st.node.outputs[0]] is None:
                values[st.node.outputs[0]] = values[st.node.inputs[0]].reshape(
                    plan.facts[st.node.outputs[0]].shape)
        self.values = values
        self.flag = np.zeros(1, dtype=np.int64)     # its blocks stop when set (cancel)
        self.cancel: list = [None]      # the running run's cancel token (its contexts' too)
        self.calls = None               # each step's jit_calls, made at the first run
        self.program = None             # the run as instructions (plan/program.py), made at its first run
        self.memo: dict = {}            # what callers derive from this state (its buffers)
        exact = plan.graph.exact
        self.arena = Arena(arena_limit, poison)
        self.held: dict = {}            # scratch kept from run to run (kernels/core/held.py)
        self.contexts: list[RunContext | None] = []
        for st in plan.steps:
            if st.dynamic or st.view:
                self.contexts.append(None)
                continue
            n = st.node
            self.contexts.append(RunContext(
                n.info, [values[i] if i >= 0 else None for i in n.inputs],
                [values[o] if o >= 0 else None for o in n.outputs], st.prepared, exact,
                self.arena, held=self.held, run_cancel=self.cancel, flag=self.flag))


class StatePool:
    """Run states of one plan. ``close`` drops the idle ones; states given back after it are
    dropped too, so an evicted plan's memory goes when its last run leaves."""

    def __init__(self, plan: ExecutionPlan, poison: bool, arena_limit: int = DEFAULT_ARENA_LIMIT):
        self.plan = plan
        self.poison = poison
        self.arena_limit = arena_limit
        self._idle: list[RunState] = []
        self._lock = threading.Lock()
        self._open = True

    def take(self) -> RunState:
        try:
            return self._idle.pop()     # (list.pop and list.append are atomic)
        except IndexError:
            return RunState(self.plan, self.poison, self.arena_limit)

    def give(self, state: RunState) -> None:
        if self._open and len(self._idle) < MAX_IDLE_STATES:
            self._idle.append(state)

    def close(self) -> None:
        with self._lock:
            self._open = False
            self._idle.clear()

    @property
    def idle(self) -> int:
        return len(self._idle)
