"""The plan cache of a session or a subgraph body, and the one way to run a plan.

At most ``capacity`` plans, oldest dropped first. Readers look the signature up in an
immutable tuple without a lock; a missing plan is built under the lock (and looked up again
there, so two threads never build the same plan). An entry the cache drops has its
pool of run states closed: runs still using it finish, and their states are dropped when
given back.

``PlanCache.run`` is the run protocol every caller uses: acquire the plan for the inputs'
signature, check the caller's buffers against it, take a run state, execute, hand the
values to the caller, drop the run's arena references, give the state back.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable


from .. import packed
from ..kernels.core import jit
from ..threads import PLAN_THREADS, serial_planning, thread_count_calls
from . import warm
from .build import ExecutionPlan, build_plan
from .execute import execute, release_dynamic
from .state import DEFAULT_ARENA_LIMIT, RunState, StatePool

if TYPE_CHECKING:
    from ..graph import CompiledGraph


class PlanEntry:
    """A plan and the pool of its run states. Runs use an entry without counting references:
    once the cache drops it (evicted, warmed, cleared) its pool is closed, and the states of
    runs still under way are dropped when they are given back."""
    __slots__ = ("plan", "pool", "provisional")

    def __init__(self, plan: ExecutionPlan, poison: bool, arena_limit: int,
                 provisional: warm.Provisional | None = None):
        self.plan = plan
        self.provisional = provisional      # plan/warm.py: serial kernels until warmed
        self.pool = StatePool(plan, poison, arena_limit)

    def close(self) -> None:
        self.pool.close()

    def take(self) -> RunState:
        return self.pool.take()

    def give(self, state: RunState) -> None:
        self.pool.give(state)


class PlanCache:
    def __init__(self, graph: CompiledGraph, capacity: int, poison: bool,
                 arena_limit: int = DEFAULT_ARENA_LIMIT):
        self.graph = graph
        self.capacity = capacity
        self.poison = poison
        self.arena_limit = arena_limit
        self._entries: tuple[tuple[tuple, PlanEntry], ...] = ()
        self._lock = threading.Lock()
        self.builds = 0
        self.early_free: str | None = None     # test hook: see build_plan

    def acquire(self, signature: tuple, keep: tuple = ()) -> PlanEntry:
        """The entry for ``signature`` (and the extra values ``keep`` to keep alive)."""
        key = (signature, keep)
        entry = self._find(key, self._entries)
        warmed = False
        if entry is not None and entry.provisional is not None and \
                entry.provisional.done.is_set() and warm.CURRENT.get() is None:
            self._drop(key, entry)      # its parallel kernels are compiled: plan again
            entry, warmed = None, True
        if entry is None:
            with self._lock:
                entry = self._find(key, self._entries)
                if entry is None:
                    entry = self._build(signature, keep, warmed)
                    self.builds += 1
                    kept = self._entries + ((key, entry),)
                    while len(kept) > self.capacity:
                        kept[0][1].close()
                        kept = kept[1:]
                    self._entries = kept
        return entry

    def _build(self, signature: tuple, keep: tuple, warmed: bool = False) -> PlanEntry:
        """A new entry: a provisional plan of serial kernels where the cache lacks the
        parallel ones this plan asks for (plan/warm.py), else (and always after a warmed
        provisional plan: what the helper did not compile is compiled here) the plan."""
        def build():
            return build_plan(self.graph, signature, self.early_free, keep)

        current = warm.CURRENT.get()
        if current is not None:         # a body planned in a provisional run: serial with it
            return self._entry(build(), current)
        if warmed or serial_planning() or not warm.enabled():
            return self._entry(build(), None)
        asked: set = set()
        token = jit.ASKED.set(asked)
        try:
            plan = build()
        finally:
            jit.ASKED.reset(token)
        if not asked or not warm.cold(asked):
            return self._entry(plan, None)
        provisional = warm.Provisional(asked)
        with provisional.serial():
            return self._entry(build(), provisional)

    def _entry(self, plan: ExecutionPlan, provisional) -> PlanEntry:
        plan.provisional = provisional is not None
        return PlanEntry(plan, self.poison, self.arena_limit, provisional)

    def _drop(self, key, entry: PlanEntry) -> None:
        with self._lock:
            if self._find(key, self._entries) is not entry:
                return
            self._entries = tuple(e for e in self._entries if e[1] is not entry)
        entry.close()

    def run(self, arrays: list, deliver: Callable, *, keep: tuple = (), cancel=None,
            precheck: Callable | None = None, profile=None, threads: int | None = None):
        """Run the graph on ``arrays`` (C-contiguous, in graph input order) with the plan for
        their signature (built on a miss) and return ``deliver(plan, values)``, which must
        copy out what it keeps: the run state goes back to the pool afterwards.
        ``precheck(plan)`` runs before anything else (buffer checks); ``keep``: values to
        keep alive to the end; ``profile``: a graphrt.profile.Profile; ``threads``: numba's
        thread count for this run (put back afterwards)."""
        # a one-thread session plans serial kernels only
        token = PLAN_THREADS.set(1) if threads == 1 else None
        try:
            entry = self.acquire(signature(arrays, not self.graph.tensors_only), keep)
            provisional = entry.provisional
            if provisional is None:
                return self._run_entry(entry, arrays, deliver, cancel, precheck, profile,
                                       threads)
            try:
                with provisional.serial():
                    return self._run_entry(entry, arrays, deliver, cancel, precheck, profile,
                                           threads)
            finally:
                provisional.start()
        finally:
            if token is not None:
                PLAN_THREADS.reset(token)

    def _run_entry(self, entry, arrays, deliver, cancel, precheck, profile, threads):
        plan = entry.plan
        if precheck is not None:
            precheck(plan)
        state = entry.take()
        get_threads, set_threads = _THREAD_CALLS or _thread_calls()
        before = get_threads() if threads is not None else None
        if before != threads:
            set_threads(threads)
        sink = None if profile is None else profile.begin(plan)
        try:
            execute(plan, state, arrays, cancel, self.poison, sink)
            if sink is not None:
                sink.close(state.values)
            return deliver(plan, state.values)
        finally:
            if before != threads:
                set_threads(before)
            release_dynamic(plan, state)
            entry.give(state)

    def held(self, keep: tuple = ()) -> "HeldRuns":
        """Repeated runs that keep one plan and run state while the inputs' signature stays
        (a Loop's iterations); close(), or the end of a ``with`` block, gives them back.
        ``keep``: values the plans keep alive to the end (see acquire)."""
        return HeldRuns(self, keep)

    def wait_for_schedules(self, timeout: float | None = None) -> bool:
        """Wait until the parallel kernels of every provisional plan that has run are
        compiled (plan/warm.py: the next run plans with them); False when ``timeout``
        seconds passed first."""
        end = None if timeout is None else time.monotonic() + timeout
        for _key, entry in self._entries:
            p = entry.provisional
            if p is not None and p.started and \
                    not p.done.wait(None if end is None else max(0.0, end - time.monotonic())):
                return False
        return True

    def clear(self) -> None:
        with self._lock:
            old, self._entries = self._entries, ()
        for _, e in old:
            e.close()

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _find(signature, entries):
        for sig, entry in entries:
            if sig == signature:
                return entry
        return None


class HeldRuns:
    """PlanCache.run for a run of calls (without its buffer checks, profile or thread
    switch), acquiring the plan and taking a run state only when the signature changes."""

    __slots__ = ("cache", "keep", "key", "entry", "state")

    def __init__(self, cache: PlanCache, keep: tuple = ()):
        self.cache, self.keep, self.key, self.entry, self.state = cache, keep, None, None, None

    def run(self, arrays: list, deliver: Callable, cancel=None):
        key = signature(arrays, not self.cache.graph.tensors_only)
        if key != self.key:
            self.close()
            self.entry = self.cache.acquire(key, self.keep)
            self.state = self.entry.take()
            self.key = key
        plan, state = self.entry.plan, self.state
        try:
            execute(plan, state, arrays, cancel, self.cache.poison, None)
            return deliver(plan, state.values)
        finally:
            release_dynamic(plan, state)

    def close(self) -> None:
        if self.entry is not None:
            self.entry.give(self.state)
        self.key = self.entry = self.state = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def signature(arrays, packed_inputs: bool = True) -> tuple:
    """The plan key of a list of inputs: packed values (where ``packed_inputs``: the graph
    has inputs of other kinds than tensors) are keyed by kind, not by size."""
    if not packed_inputs:
        return tuple([(a.dtype, a.shape) for a in arrays])
    return tuple((a.dtype, None if packed.is_packed(a) else a.shape) for a in arrays)


_THREAD_CALLS: tuple = ()


def _thread_calls() -> tuple:
    global _THREAD_CALLS
    _THREAD_CALLS = thread_count_calls()
    return _THREAD_CALLS
