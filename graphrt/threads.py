"""Numba's threading layer and per-run thread counts.

graphrt runs kernels from many Python threads at once, which only the omp and tbb layers
allow (workqueue aborts the process on concurrent parallel calls). The layer is pinned before
numba starts its threads; if neither loads, sessions fail with a clear error.
"""
from __future__ import annotations

import contextvars
import threading

import numba

from .errors import ErrorKind, SessionError

SAFE_LAYERS = ("omp", "tbb")
_lock = threading.Lock()
_ready = False


def pin_layer() -> None:
    """Ask numba for a thread-safe layer (called at import, before any parallel kernel)."""
    if numba.config.THREADING_LAYER in ("default", "workqueue"):
        numba.config.THREADING_LAYER = "threadsafe"
    numba.config.THREADING_LAYER_PRIORITY = list(SAFE_LAYERS) + ["workqueue"]


def ensure_layer() -> None:
    global _ready
    if _ready:
        return
    with _lock:
        if _ready:
            return
        from numba.np.ufunc import parallel
        try:
            parallel._launch_threads()
            layer = numba.threading_layer()
        except (ValueError, ImportError) as e:
            raise SessionError(ErrorKind.UNSUPPORTED,
                               "numba could not load a thread-safe threading layer (omp or tbb): "
                               f"{e}. Install libgomp (gcc) or the 'tbb' package.") from None
        if layer not in SAFE_LAYERS:
            raise SessionError(ErrorKind.UNSUPPORTED,
                               f"numba runs the {layer!r} threading layer, which is not safe for "
                               "concurrent runs; set NUMBA_THREADING_LAYER=omp (or tbb)")
        _ready = True


# The thread count of the session whose plans are being built on this Python thread, where it
# is one: kernels then take their serial variants (the same bits: fast-mode results do not
# depend on the thread count), so a one-thread session never compiles a parallel loop.
# Set by PlanCache.run for the whole run (If/Loop bodies plan during their parent's run) and
# by Session while its graph passes fold constants.
PLAN_THREADS: contextvars.ContextVar = contextvars.ContextVar("graphrt_plan_threads",
                                                              default=None)


def serial_planning() -> bool:
    return PLAN_THREADS.get() == 1


def available() -> int:
    return numba.config.NUMBA_NUM_THREADS


def resolve(intra_op_threads: int) -> int:
    """0 means one per logical core; more than numba started is capped there."""
    n = intra_op_threads or available()
    return max(1, min(n, available()))


def thread_count_calls():
    """(get, set) of the calling thread's numba thread count, once the layer runs: numba's
    own low-level pair when present (numba.get_num_threads/set_num_threads check the
    layer first, about 1.5 us a call, twice a run), else the public functions."""
    ensure_layer()
    from numba.np.ufunc import parallel
    get = getattr(parallel, "_get_num_threads", None)
    set_ = getattr(parallel, "_set_num_threads", None)
    if callable(get) and callable(set_):
        return get, set_
    return numba.get_num_threads, numba.set_num_threads
