"""Compiling kernel templates into their fast and exact variants.

A template is a plain Python function written for ``numba.njit``. It may read module-level
names that :func:`variants` binds per specialisation (``EXACT`` always, plus whatever the
caller passes, e.g. the scalar operation ``OP``). Each binding becomes a function of its own
with its own qualified name, so numba's on-disk cache, which keys on code bytes and ignores
decorator options and globals, keeps fast and exact (and Add and Mul) apart.

Fast variants may use the fastmath flags below, which allow FMA contraction and
approximate functions but keep NaN and infinity semantics, every division and the order of
every sum; exact variants use none.
"""
from __future__ import annotations

import hashlib
import inspect
import types

from numba import njit

# "arcp" is left out too: it lets LLVM turn x / y into x * (1 / y) in one compile and not in
# another (serial vs parallel), so a row's bits would depend on the batch it came in.
# "reassoc" is left out on purpose: with it LLVM vectorises reductions behind a run-time
# alias check, so a sum's order (and its bits) would depend on whether the planner let an
# output reuse its input's memory. Fast mode must depend on inputs, options and path only.
FAST_MATH = frozenset({"contract", "afn", "nsz"})

EXACT = False   # placeholder: rebound per variant


class Variants:
    """The compiled forms of one template: ``get(exact, parallel)``."""

    __slots__ = ("_table", "name")

    def __init__(self, template, name: str, parallel: bool = False, **consts):
        self.name = name
        tag = _hash_of(consts, template)
        self._table = {}
        for exact in (False, True):
            for par in ((False, True) if parallel else (False,)):
                qual = f"{name}_{'exact' if exact else 'fast'}{'_par' if par else ''}_{tag}"
                fn = rebind(template, qual, dict(consts, EXACT=exact))
                self._table[exact, par] = njit(
                    fn, cache=True, nogil=True, parallel=par, error_model="numpy",
                    fastmath=False if exact else set(FAST_MATH))

    def get(self, exact: bool, parallel: bool = False):
        return self._table.get((exact, parallel)) or self._table[exact, False]


def rebind(template, qualname: str, consts: dict):
    g = dict(template.__globals__)
    g.update(consts)
    code = template.__code__.replace(co_name=qualname, co_qualname=qualname)
    fn = types.FunctionType(code, g, qualname, template.__defaults__, template.__closure__)
    fn.__qualname__ = qualname
    fn.__module__ = template.__module__
    return fn


def _hash_of(consts: dict, template=None) -> str:
    """A short hash of the template's and the bound helpers' source and of the njit functions
    they call (by global name, recursively), so editing any of them renames the variants
    that use it (numba's cache would otherwise keep code compiled from the old callees)."""
    h = hashlib.sha1()
    h.update(",".join(sorted(FAST_MATH)).encode())
    seen: set = set()
    if template is not None:
        _feed_source(h, template, seen)
    for key in sorted(consts):
        h.update(key.encode())
        _feed(h, consts[key], seen)
    return h.hexdigest()[:8]


def _feed(h, value, seen: set) -> None:
    py = getattr(value, "py_func", None)
    if py is None:
        if callable(value) and hasattr(value, "__qualname__"):
            # a plain function (vecmath's overloaded stubs): its name, not its repr, which
            # holds an address and would rename the variants in every process
            h.update(f"{value.__module__}.{value.__qualname__}".encode())
            for dep in getattr(value, "hashed_with", ()):
                _feed(h, dep, seen)
        else:
            h.update(repr(value).encode())
        return
    _feed_source(h, py, seen)


def _feed_source(h, py, seen: set) -> None:
    if id(py) in seen:
        return
    seen.add(id(py))
    h.update(py.__module__.encode())    # cached code refers to it: a helper that moves renames
    try:
        h.update(inspect.getsource(py).encode())
    except OSError:     # made at run time (exec): its code and constants stand for it
        h.update(py.__code__.co_code + repr(py.__code__.co_consts).encode())
    for name in py.__code__.co_names:
        callee = py.__globals__.get(name)
        if getattr(callee, "py_func", None) is not None:
            _feed(h, callee, seen)
        for dep in getattr(callee, "hashed_with", ()):     # e.g. vecmath's overloaded stubs
            _feed(h, dep, seen)
