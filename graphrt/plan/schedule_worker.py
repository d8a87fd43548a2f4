"""A helper process that compiles kernels into graphrt's on-disk kernel cache.

numba's compiler is Python code: compiled on a thread of the process that runs the model, it
takes the interpreter lock from every run of that process. So kernels a cold first run needs
(compile_share.py), the parallel forms of a provisional plan (warm.py) and the GEMM tile
entries are compiled here too, in one long-lived child process per parent, and the parent
loads the finished code from the cache, which takes milliseconds.

Protocol, over the child's stdin and a duplicate of its stdout (its own stdout and stderr
are redirected, so nothing numba prints can break a message): each message is a 64-bit
little-endian length and a pickle. A request is ``(env, items)``: the cache variables of the
parent (so the child caches kernels where the parent does), then per kernel
``(kernel, signature)``, the kernel pickled by numba's serializer (functions by value, so the
child needs no name to find a generated kernel variant), which the child compiles into
graphrt's kernel cache, or ``{"tile": (dtype name, exact)}``, the GEMM
tile entry of that type and mode. The reply is one entry per item: None, or the
compile error's text. The child exits when its stdin closes or after
IDLE_EXIT seconds without a request; the parent starts a new one when it next needs one.
"""
from __future__ import annotations

import atexit
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import weakref

from numba.core.caching import NullCache

IDLE_EXIT = 120.0
CACHE_ENV = ("GRAPHRT_CACHE_DIR", "NUMBA_CACHE_DIR", "XDG_CACHE_HOME")


def in_cache(fn, sig) -> bool:
    """Whether numba's on-disk cache holds ``fn`` for ``sig`` (its index names it)."""
    cache = getattr(fn, "_cache", None)
    try:
        key = cache._index_key(sig, fn.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:       # (no cache, an unreadable index: a miss)
        return False


_BLOBS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def pickled_kernel(disp) -> bytes:
    """A dispatcher for the helper process, pickled by value (numba's serializer) once per
    process: a cold first run's shared compiles (compile_share) and the warming of parallel
    forms reuse it (pickling walks the bytecode: about 7 ms for a recurrence's step
    kernel)."""
    blob = _BLOBS.get(disp)
    if blob is None:
        from numba.core import serialize
        blob = _BLOBS[disp] = serialize.dumps(disp)
    return blob


class Unavailable(RuntimeError):
    """The helper process could not be started, or died during a request."""


def _send(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _recv(fd: int):
    """The next message, or None at end of stream."""
    head = _read(fd, 8)
    if head is None:
        return None
    body = _read(fd, struct.unpack("<Q", head)[0])
    if body is None:
        raise EOFError("the stream ended inside a message")
    return pickle.loads(body)


def _read(fd: int, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


class Client:
    """The parent's end: one child at a time, requests one at a time (a lock), a new child
    after a fork or when the last one exited."""

    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._pid = None
        atexit.register(self.close)

    def compile(self, items: list) -> list:
        """Per item (path, kernels blob, signature): None when compiled into the cache, else
        the error's text. Raises Unavailable when no child can serve the request."""
        request = ({k: os.environ.get(k) for k in CACHE_ENV}, items)
        with self._lock:
            for attempt in range(2):
                proc = self._child()
                try:
                    _send(proc.stdin.fileno(), request)
                    reply = _recv(proc.stdout.fileno())
                except (OSError, EOFError, pickle.UnpicklingError) as e:
                    reply, why = None, f"{type(e).__name__}: {e}"
                else:
                    why = f"it exited with code {proc.poll()}"
                if reply is not None:
                    return reply
                self._stop()                # an idle exit, a crash: once more, with a new one
                if attempt:
                    raise Unavailable(f"the schedule helper process failed: {why}")
        raise AssertionError("unreachable")

    def start(self) -> None:
        """Start the child now if there is none (it imports graphrt, a second or two), without
        waiting for it: a plan run once will likely be run again and want it."""
        if self._lock.acquire(blocking=False):
            try:
                self._child()
            except Unavailable:
                pass                        # (reported when a request needs it)
            finally:
                self._lock.release()

    def _child(self) -> subprocess.Popen:
        if self._proc is not None and (self._pid != os.getpid() or self._proc.poll() is not None):
            self._proc = None               # forked since, or gone
        if self._proc is None:
            package_parent = os.path.dirname(os.path.dirname(os.path.dirname(
                os.path.abspath(__file__))))
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (package_parent, env.get("PYTHONPATH")) if p)
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "graphrt.plan.schedule_worker"], env=env,
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                    close_fds=True)
            except OSError as e:
                raise Unavailable(f"the schedule helper process did not start: {e}") from e
            self._pid = os.getpid()
        return self._proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and self._pid == os.getpid():
            for pipe in (proc.stdin, proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def close(self) -> None:
        if self._lock.acquire(timeout=0.5):     # (a request in flight at exit: leave it)
            try:
                self._stop()
            finally:
                self._lock.release()
        elif self._proc is not None and self._pid == os.getpid():
            self._proc.kill()


CLIENT = Client()


def _serve() -> None:
    replies = os.dup(1)
    os.dup2(2, 1)                       # print() and numba's warnings: not into the replies
    import graphrt  # noqa: F401  (graphrt's kernel cache locator and typing rules, as in the parent)
    requests = sys.stdin.fileno()
    while True:
        ready, _, _ = select.select([requests], [], [], IDLE_EXIT)
        if not ready:
            return
        msg = _recv(requests)
        if msg is None:
            return
        env, items = msg
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        out = []
        for item in items:
            try:
                if isinstance(item, dict):  # the GEMM tile entry of a type and mode
                    import numpy as np
                    from ..kernels.gemm import microkernel
                    dtype, exact = item["tile"]
                    microkernel.kernels(np.dtype(dtype), exact)
                    out.append(None)
                    continue
                blob, sig = item            # a kernel: compiled into the kernel cache
                fn = pickle.loads(blob)
                if isinstance(fn._cache, NullCache):
                    fn.enable_caching()
                fn.compile(sig)
                out.append(None)
            except Exception as e:
                out.append(f"{type(e).__name__}: {e}".splitlines()[0][:2000])
        _send(replies, out)


if __name__ == "__main__":
    _serve()
