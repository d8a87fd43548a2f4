"""A plan's first run compiles its missing kernels in two processes at once.

numba compiles on one thread at a time (its compiler holds a process-wide lock), so a cold
first run uses one core however many the machine has. When the calls a first run will make
(OpKernel.jit_calls) name kernels that are neither compiled in this process nor in the kernel
cache, they are listed in step order and shared with the schedule helper process
(schedule_worker): this process takes them from the front as its steps reach them (compiling
each on its first call, as always), a thread of this process hands them to the helper from
the back, one at a time; a step whose kernel the helper took waits for it and then loads it
from the cache (milliseconds). The machine code is the same wherever it was compiled (same
numba, flags and CPU), so the bits are too.

The GEMM tile product's machine code (gemm/driver_ir.py's entry and micro_ir's
micro-kernels: LLVM IR, about 1 s to build) is asked of the helper earlier still, when a
session whose graph has a matrix product or a convolution is made (prefetch_tiles): this process makes its passes, folds its constants and plans
meanwhile, and waits for the entry when a plan first needs it (unless that comes so soon
that the helper is still starting: then it builds the entry itself).

Nothing is shared with fewer than MIN_SHARED missing kernels, on one core, or with
GRAPHRT_COMPILE_HELPER=0; a helper that fails leaves its kernel to this process.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time

import numba
import numpy as np
from numba.core.dispatcher import Dispatcher

from ..threads import available
from .schedule_worker import in_cache, pickled_kernel

MIN_SHARED = 3


def enabled() -> bool:
    return os.environ.get("GRAPHRT_COMPILE_HELPER", "1") != "0" and available() > 1


def missing(calls: list) -> list:
    """(step index, dispatcher, signature) of each kernel of ``calls`` (per step, a list of
    (fn, args) or None) compiled neither here nor in the cache, first use first."""
    found, seen = [], set()
    for i, step in enumerate(calls):
        for fn, args in step or ():
            if not isinstance(fn, Dispatcher) or not fn._can_compile:
                continue
            try:
                sig = tuple(numba.typeof(a) for a in args)
            except ValueError:          # (an argument numba cannot type: the call says so)
                continue
            key = (id(fn), sig)
            if key in seen or sig in fn.overloads or in_cache(fn, sig):
                continue
            seen.add(key)
            found.append((i, fn, sig))
    return found


class Sharing:
    """The missing kernels of one first run, claimed from both ends."""

    def __init__(self, items: list, helper: bool = True):
        """``helper``: hand items to the helper process (else this process compiles them
        all, ``ahead`` or on its steps' calls)."""
        self.items = items
        self.lock = threading.Lock()
        self.front = 0                  # items[:front]: this process's
        self.back = len(items)          # items[back:]: the helper's
        self.done: dict = {}            # item index -> Event set when the helper is done
        self.steps: dict = {}           # step index -> its item indices
        for k, (i, _, _) in enumerate(items):
            self.steps.setdefault(i, []).append(k)
        self.feeding = helper
        self.taken_ahead = 0
        if helper:
            threading.Thread(target=self._feed, daemon=True, name="graphrt-compile").start()

    def _feed(self) -> None:
        from ..kernels.gemm import microkernel
        from .schedule_worker import CLIENT
        # the helper compiles one kernel at a time: while it has a tile entry to compile
        # (prefetch_tiles), claim nothing this process could compile meanwhile (ahead)
        for done, _ in list(microkernel.PENDING.values()):
            done.wait(300)
        while True:
            with self.lock:
                if self.back <= self.front:
                    return
                self.back -= 1
                k = self.back
                event = self.done[k] = threading.Event()
            _, fn, sig = self.items[k]
            try:
                CLIENT.compile([(pickled_kernel(fn), sig)])
            except Exception:   # (this process compiles it when its step calls it)
                pass
            finally:
                event.set()

    def ahead(self, greedy: bool = False) -> bool:
        """Compile the next kernel of this process's share now (before its step comes);
        False when none is left. With the helper fed, at most as many as are left for it
        (this process has its steps' own kernels to compile after: Python steps list none),
        unless ``greedy`` (the helper is busy with a tile entry and claims nothing yet)."""
        with self.lock:
            if self.front >= self.back or (self.feeding and not greedy and
                                           self.back - self.front <= self.taken_ahead):
                return False
            k = self.front
            self.front += 1
            self.taken_ahead += 1
        _, fn, sig = self.items[k]
        try:
            fn.compile(sig)
        except Exception:   # (its step compiles it again and reports the error)
            pass
        return True

    def before(self, step: int) -> None:
        """Before step ``step`` runs: its kernels the helper took are compiled."""
        ks = self.steps.get(step)
        if not ks:
            return
        for k in ks:
            with self.lock:
                if k < self.back:
                    self.front = max(self.front, k + 1)
                    continue
                event = self.done[k]
            event.wait()


def prefetch_tiles(kernels, exact: bool) -> None:
    """Have the helper build the float32 tile entry of ``exact``'s mode now, when one of
    ``kernels`` (the graph's) runs tile products and the cache lacks the entry."""
    from ..kernels.gemm import microkernel
    key = (np.dtype(np.float32), bool(exact))
    if not enabled() or not any(k.tile_products for k in kernels):
        return
    with _PREFETCH_LOCK:
        if (key[0], "block") in microkernel._ADDRESSES or key in microkernel.PENDING or \
                microkernel.entry_cached(key[0]):
            return
        done = threading.Event()
        microkernel.PENDING[key] = (done, time.monotonic())

    def ask():
        from .schedule_worker import CLIENT
        try:
            CLIENT.compile([{"tile": ("float32", key[1])}])
        except Exception:   # (this process compiles it when a plan needs it)
            pass
        finally:
            done.set()
            microkernel.PENDING.pop(key, None)

    threading.Thread(target=ask, daemon=True, name="graphrt-compile-tiles").start()


_PREFETCH_LOCK = threading.Lock()


def start(calls: list) -> tuple[Sharing | None, bool]:
    """The sharing of a first run whose steps make ``calls`` (or None), and whether a kernel
    of theirs was neither compiled nor cached (always False without the helper)."""
    if not enabled():
        return None, False
    items = missing(calls)
    return (Sharing(items) if len(items) >= MIN_SHARED else None), bool(items)


@contextlib.contextmanager
def tables_deferred():
    """While a run makes its calls: the GEMM tables they pass stay unfilled
    (microkernel.table); fill_tables must follow before any of the calls runs."""
    from ..kernels.gemm import microkernel
    token = microkernel.DEFER.set(True)
    try:
        yield
    finally:
        microkernel.DEFER.reset(token)


def fill_tables(calls: list, sharing: Sharing | None) -> None:
    """Fill the GEMM tables still unfilled (microkernel.ready) before a run's first step
    makes ``calls``. Where the helper is compiling a table's entry (prefetch_tiles), this
    process compiles its own share of the run's kernels meanwhile (Sharing.ahead; all of
    them when they are too few to share, and all it can while the helper has the entry to
    compile: the helper claims none of them before), then, if the helper is still at it,
    the table's micro-kernels (the helper compiles them last), then loads the entry: the
    plan no longer waits for it, nor compiles it beside the helper."""
    from ..kernels.gemm import microkernel
    tables = microkernel.unfilled()
    if not tables:
        return
    tables.sort(key=lambda t: t[1] is not None)     # the helper's last
    if sharing is None and any(helper is not None for _, helper in tables):
        sharing = Sharing(missing(calls), helper=False)
    for kt, helper in tables:
        if helper is not None:
            while not helper.is_set() and sharing.ahead(greedy=True):
                pass
            if not helper.is_set():
                microkernel.micro_ahead(kt)
        microkernel.ready(kt)
