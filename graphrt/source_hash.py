"""Hashes of a function's source and of the compiled functions it calls, for names and cache
keys that must change when any code a kernel is built from changes.

numba's on-disk cache keys a function's compiled code by its own bytecode and validates it
by its own file: code compiled from a callee in another module (linked into the caller, or
loaded from that callee's cache entry) is kept after the callee's module changes. graphrt
names its kernel variants by :func:`feed`'s hash (kernels/core/jit.py) and puts
:func:`dependency_hash` into the key of every function cached in its folders (cache.py).

Imports nothing of graphrt's: cache.py needs it before any kernel module is imported.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import linecache
import types


def feed(h, value, seen: set) -> None:
    """Feed ``value`` into hasher ``h``: a compiled function by its source (feed_source), a
    plain function by its name and its ``hashed_with`` tags, anything else by its repr;
    ``seen``: the functions already fed."""
    py = getattr(value, "py_func", None)
    if py is None:
        if callable(value) and hasattr(value, "__qualname__"):
            # a plain function (vecmath's overloaded stubs): its name, not its repr, which
            # holds an address and would rename the variants in every process
            h.update(f"{value.__module__}.{value.__qualname__}".encode())
            for dep in getattr(value, "hashed_with", ()):
                feed(h, dep, seen)
        else:
            h.update(repr(value).encode())
        return
    feed_source(h, py, seen)


@functools.lru_cache(maxsize=None)
def source_of(code) -> bytes:
    """A function's source text: its file's lines from its first (its first decorator's)
    to the end of its last statement (memoised; the shared helpers are hashed into hundreds
    of variants). Read by the code's positions, not by inspect, which tokenised every block:
    50 ms of a warm process's first session."""
    lines = linecache.getlines(code.co_filename)
    if lines and hasattr(code, "co_positions"):
        return "".join(lines[code.co_firstlineno - 1:_last_line(code)]).encode()
    try:
        return inspect.getsource(code).encode()
    except OSError:     # made at run time (exec): its code and constants stand for it
        return code.co_code + repr(code.co_consts).encode()


def _last_line(code) -> int:
    """The last line any instruction of ``code`` or of the code nested in it spans."""
    last = code.co_firstlineno
    for pos in code.co_positions():
        if pos[1] is not None and pos[1] > last:
            last = pos[1]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            last = max(last, _last_line(const))
    return last


def feed_source(h, py, seen: set) -> None:
    """Feed function ``py``'s module and source into ``h``, then every compiled function
    and ``hashed_with`` tag its global names reach (once each)."""
    if id(py) in seen:
        return
    seen.add(id(py))
    h.update(str(py.__module__).encode())   # cached code refers to it: a helper that moves renames
    h.update(source_of(py.__code__))
    for name in py.__code__.co_names:
        callee = py.__globals__.get(name)
        if getattr(callee, "py_func", None) is not None:
            feed(h, callee, seen)
        for dep in getattr(callee, "hashed_with", ()):     # e.g. vecmath's overloaded stubs
            feed(h, dep, seen)


@functools.lru_cache(maxsize=None)
def dependency_hash(py) -> str:
    """The hash of function ``py``'s source and of every compiled function it calls by a
    global name, recursively, with the tags they are ``hashed_with`` (feed)."""
    h = hashlib.sha1()
    feed_source(h, py, set())
    return h.hexdigest()[:16]
