"""A cold first run takes serial kernels; their parallel forms are compiled beside it.

numba compiles a kernel's parallel form (a prange loop, outlined and compiled again) at two
to four times the cost of its serial one, and a first run from an empty cache compiled both
for many kernels (a product's serial form for its few-row steps, the parallel one for the
large). Results do not depend on the form (fast mode: the same operations per element and
per task whatever the thread count, threads.py; exact mode alike), so a plan whose
parallel kernels the kernel cache does not hold yet is built and run with serial kernels
only: a *provisional* plan (PlanCache). After its first run, the parallel forms it asked for
are compiled by the helper process (schedule_worker) for the signatures their serial twins
ran with; once they are in the cache the plan is built again with them (each loads in
milliseconds) and stays. The first result comes without the parallel compiles; later runs
use both cores as before. ``GRAPHRT_SERIAL_FIRST=0`` turns this off, as does anything that
turns the helper off (compile_share.enabled).
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import threading

from ..kernels.core import jit
from ..threads import PLAN_THREADS
from . import compile_share


def enabled() -> bool:
    return os.environ.get("GRAPHRT_SERIAL_FIRST", "1") != "0" and not _OFF.get() and \
        compile_share.enabled()


_OFF: contextvars.ContextVar = contextvars.ContextVar("graphrt_serial_first_off", default=False)


@contextlib.contextmanager
def turned_off():
    """Plans built in this context take their parallel kernels from the first run (graphrt
    warmup: everything compiled before the process ends)."""
    token = _OFF.set(True)
    try:
        yield
    finally:
        _OFF.reset(token)


# The provisional plan being built or run on this Python thread (subgraph bodies planned
# during its run are provisional with it).
CURRENT: contextvars.ContextVar = contextvars.ContextVar("graphrt_provisional", default=None)


class Provisional:
    """The parallel forms a provisional plan (and the bodies planned in its runs) asked for,
    and their compiling: ``done`` is set when the helper has finished (or failed: then the
    plan built again compiles what is missing itself, as without this)."""

    def __init__(self, asked: set):
        self.asked = asked              # (jit.Variants, exact) pairs
        self.done = threading.Event()
        self._started = False
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._started

    @contextlib.contextmanager
    def serial(self):
        """A context in which plans are built and run with serial kernels, the parallel
        forms asked for being recorded here."""
        tokens = (PLAN_THREADS.set(1), jit.ASKED.set(self.asked), CURRENT.set(self))
        try:
            yield self
        finally:
            CURRENT.reset(tokens[2])
            jit.ASKED.reset(tokens[1])
            PLAN_THREADS.reset(tokens[0])

    def start(self) -> None:
        """After a first run: have the helper compile the parallel forms asked for (once)."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._compile, daemon=True, name="graphrt-warm").start()

    def _compile(self) -> None:
        from .schedule_worker import in_cache, pickled_kernel
        from .schedule_worker import CLIENT
        try:
            for alternatives, exact in list(self.asked):
                for variants in alternatives:
                    par, ser = variants.forms(exact)
                    for sig in list(ser.signatures):
                        if sig in par.overloads or in_cache(par, sig):
                            continue
                        try:
                            CLIENT.compile([(pickled_kernel(par), sig)])
                        except Exception:   # (the plan built again compiles it, as always)
                            return
        finally:
            self.done.set()


def cold(asked: set) -> bool:
    """Whether the kernel cache lacks the parallel forms ``asked`` for: for some item, the
    form of none of its alternatives (a path and its in-place twin, of which the plan runs
    one) has an index (some specialisation compiled here). Asked for both of a pair, a plan
    used to look cold to a warm cache when it ran only one of them (bert's Gelu in place): its
    first run took serial kernels, the next planned again, and the helper process started
    for nothing beside runs 2-30 (about 0.4 s of a core at two threads)."""
    return not all(any(_indexed(v.forms(exact)[0]) for v in alternatives)
                   for alternatives, exact in asked)


def _indexed(fn) -> bool:
    """Whether the kernel cache holds an index of ``fn`` (some compiled specialisation)."""
    try:
        return os.path.exists(fn._cache._cache_file._index_path)
    except AttributeError:
        return False
