"""Compiling kernel templates into their fast and exact variants.

A template is a plain Python function written for ``numba.njit``. It may read module-level
names that :func:`variants` binds per specialisation (``EXACT`` always, plus whatever the
caller passes, e.g. the scalar operation ``OP``). Each binding becomes a function of its own
with its own qualified name, so numba's on-disk cache, which keys on code bytes and ignores
decorator options and globals, keeps fast and exact (and Add and Mul) apart.

Fast variants may use the fastmath flags below, which allow FMA contraction and
reassociation but keep NaN and infinity semantics; exact variants use none.
"""
from __future__ import annotations

import hashlib
import inspect
import types

from numba import njit

FAST_MATH = frozenset({"contract", "arcp", "afn", "nsz", "reassoc"})

EXACT = False   # placeholder: rebound per variant


class Variants:
    """The compiled forms of one template: ``get(exact, parallel)``."""

    __slots__ = ("_table", "name")

    def __init__(self, template, name: str, parallel: bool = False, **consts):
        self.name = name
        tag = _hash_of(consts)
        self._table = {}
        for exact in (False, True):
            for par in ((False, True) if parallel else (False,)):
                qual = f"{name}_{'exact' if exact else 'fast'}{'_par' if par else ''}_{tag}"
                fn = _rebind(template, qual, dict(consts, EXACT=exact))
                self._table[exact, par] = njit(
                    fn, cache=True, nogil=True, parallel=par, error_model="numpy",
                    fastmath=False if exact else set(FAST_MATH))

    def get(self, exact: bool, parallel: bool = False):
        return self._table.get((exact, parallel)) or self._table[exact, False]


def _rebind(template, qualname: str, consts: dict):
    g = dict(template.__globals__)
    g.update(consts)
    code = template.__code__.replace(co_name=qualname, co_qualname=qualname)
    fn = types.FunctionType(code, g, qualname, template.__defaults__, template.__closure__)
    fn.__qualname__ = qualname
    fn.__module__ = template.__module__
    return fn


def _hash_of(consts: dict) -> str:
    """A short hash of the bound helpers' source, so editing a helper renames its users."""
    h = hashlib.sha1()
    for key in sorted(consts):
        value = consts[key]
        py = getattr(value, "py_func", None)
        h.update(key.encode())
        h.update(inspect.getsource(py).encode() if py is not None else repr(value).encode())
    return h.hexdigest()[:8]
