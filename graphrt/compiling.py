"""What graphrt says while numba compiles its kernels, and the count it keeps.

Kernels compile on first use (a model's first run, a new element type, a new path) and are
then cached on disk (cache.py). A compile burst that has lasted more than SHOW_AFTER seconds
(GRAPHRT_PROGRESS_AFTER) is shown: a tqdm bar ("graphrt: compiling kernels", one tick per
kernel) in a terminal or a notebook, closed with a one-line summary when the session's call that caused it returns;
elsewhere (stderr not a terminal, no notebook) nothing is printed and the summary goes to the
``graphrt`` logger at INFO. GRAPHRT_PROGRESS=1 shows the bar anywhere, 0 never.

``compiled()`` counts the kernels (numba functions of graphrt's, each specialisation once)
this process compiled rather than loaded from the cache.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time

from numba.core import event

# seconds of compiling before anything is shown (GRAPHRT_PROGRESS_AFTER)
SHOW_AFTER = float(os.environ.get("GRAPHRT_PROGRESS_AFTER") or 2.0)

log = logging.getLogger("graphrt")


def _ours(e) -> bool:
    d = e.data.get("dispatcher")
    return d is not None and (getattr(d.py_func, "__module__", None) or "").startswith("graphrt.")


class _Monitor(event.Listener):
    """numba's compile events for graphrt's functions: a count, and the burst they form."""

    def __init__(self):
        self.lock = threading.Lock()
        self.total = 0              # compiles since the process started
        self.start = None           # when the current burst began
        self.count = 0              # compiles in the current burst
        self.bar = None

    def on_start(self, e):
        if _ours(e):
            with self.lock:
                if self.start is None:
                    self.start, self.count = time.perf_counter(), 0
                self._show()

    def on_end(self, e):
        if _ours(e):
            d = e.data["dispatcher"]
            with self.lock:
                self.total += 1
                self.count += 1
                if self.start is None:
                    self.start = time.perf_counter()
                self._show()
                if self.bar is not None:
                    self.bar.update(1)
                    self.bar.set_postfix_str(d.py_func.__qualname__.split("_fast")[0]
                                             .split("_exact")[0][:32], refresh=False)

    def _show(self):
        if self.bar is not None or time.perf_counter() - self.start < SHOW_AFTER or \
                not _visible():
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            self.bar = _Line()
        else:
            self.bar = tqdm(desc="graphrt: compiling kernels (cached for later runs)",
                            unit=" kernels", initial=self.count, file=sys.stderr,
                            leave=True, dynamic_ncols=True)

    def settle(self) -> None:
        """End the current burst: close the bar (with its summary) or log the summary."""
        with self.lock:
            if self.start is None:
                return
            seconds = time.perf_counter() - self.start
            count, bar = self.count, self.bar
            self.start, self.count, self.bar = None, 0, None
        if bar is not None:
            bar.set_postfix_str(f"{seconds:.1f} s", refresh=False)
            bar.close()
        if seconds >= SHOW_AFTER:
            log.info("compiled %d kernels in %.1f s (cached on disk for later processes; "
                     "`graphrt warmup` compiles ahead of time)", count, seconds)


class _Line:
    """The bar's stand-in without tqdm: one line at the start, one at the end."""

    def __init__(self):
        self.n = 0
        print("graphrt: compiling kernels (cached for later runs) ...", file=sys.stderr,
              flush=True)

    def update(self, k):
        self.n += k

    def set_postfix_str(self, text, refresh=True):
        self.text = text

    def close(self):
        print(f"graphrt: compiled {self.n} kernels ({getattr(self, 'text', '')})",
              file=sys.stderr, flush=True)


def _visible() -> bool:
    flag = os.environ.get("GRAPHRT_PROGRESS")
    if flag is not None:
        return flag not in ("", "0")
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


MONITOR = _Monitor()
event.register("numba:compile", MONITOR)


def compiled() -> int:
    """Kernels this process has compiled (not loaded from the cache) so far."""
    return MONITOR.total


def settle() -> None:
    """Called when a session's call returns: ends a compile burst's display."""
    if MONITOR.start is not None:
        MONITOR.settle()
