"""The plan cache of a session: at most ``capacity`` plans, oldest dropped first.

Readers look the signature up in an immutable tuple without a lock; a missing plan is built
under the lock (and looked up again there, so two threads never build the same plan). Each
entry is reference-counted: the cache holds one reference and every run another, so an
evicted plan's run states are dropped only when its last run gives its state back.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .build import ExecutionPlan, build_plan
from .state import DEFAULT_ARENA_LIMIT, RunState, StatePool

if TYPE_CHECKING:
    from ..graph import CompiledGraph


class PlanEntry:
    __slots__ = ("plan", "pool", "_refs", "_lock")

    def __init__(self, plan: ExecutionPlan, poison: bool, arena_limit: int):
        self.plan = plan
        self.pool = StatePool(plan, poison, arena_limit)
        self._refs = 1                      # the cache's own reference
        self._lock = threading.Lock()

    def acquire(self) -> bool:
        with self._lock:
            if self._refs == 0:
                return False
            self._refs += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._refs -= 1
            last = self._refs == 0
        if last:
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
        """The entry for ``signature`` (and the extra values ``keep`` to keep alive) with one
        reference taken for the caller."""
        key = (signature, keep)
        while True:
            entry = self._find(key, self._entries)
            if entry is None:
                with self._lock:
                    entry = self._find(key, self._entries)
                    if entry is None:
                        entry = PlanEntry(build_plan(self.graph, signature, self.early_free, keep),
                                          self.poison, self.arena_limit)
                        self.builds += 1
                        kept = self._entries + ((key, entry),)
                        while len(kept) > self.capacity:
                            kept[0][1].release()
                            kept = kept[1:]
                        self._entries = kept
            if entry.acquire():
                return entry

    def clear(self) -> None:
        with self._lock:
            old, self._entries = self._entries, ()
        for _, e in old:
            e.release()

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _find(signature, entries):
        for sig, entry in entries:
            if sig == signature:
                return entry
        return None
