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

import contextvars
import hashlib
import threading
import types

from numba import njit

from ...source_hash import feed as _feed, feed_source as _feed_source, source_of
from ...threads import serial_planning
from . import tasks

# "arcp" is left out too: it lets LLVM turn x / y into x * (1 / y) in one compile and not in
# another (serial vs parallel), so a row's bits would depend on the batch it came in.
# "reassoc" is left out on purpose: with it LLVM vectorises reductions behind a run-time
# alias check, so a sum's order (and its bits) would depend on whether the planner let an
# output reuse its input's memory. Fast mode must depend on inputs, options and path only.
FAST_MATH = frozenset({"contract", "afn", "nsz"})

EXACT = False   # placeholder: rebound per variant


def _typed_without_literals() -> None:
    """Make a call from compiled code to one of graphrt's functions type its arguments
    without literal values first: numba would otherwise compile a specialisation per
    constant an argument is given at some call site (``f(x, 0, 64)`` and ``f(x, i, n)``
    twice, ``f(..., True)`` and ``f(..., False)`` twice), each compile costing as much as
    the first. Where the plain types do not type (a function that needs a literal), the
    literal ones are tried, as numba would. Other packages' functions are left alone."""
    from numba.core import errors
    from numba.core import types as nt
    from numba.core.dispatcher import Dispatcher
    if getattr(Dispatcher.get_call_template, "graphrt", False):
        return
    literal = Dispatcher.get_call_template

    def get_call_template(self, args, kws):
        if self._can_compile and (self.py_func.__module__ or "").startswith("graphrt."):
            plain = tuple(nt.unliteral(a) for a in args)
            plain_kws = {k: nt.unliteral(v) for k, v in kws.items()}
            if plain != tuple(args) or plain_kws != kws:
                try:
                    return literal(self, plain, plain_kws)
                except (errors.TypingError, errors.ForceLiteralArg):
                    pass
        return literal(self, args, kws)

    get_call_template.graphrt = True
    Dispatcher.get_call_template = get_call_template


_typed_without_literals()


class Variants:
    """The compiled forms of one template: ``get(exact, parallel, small)``. ``small``: a
    template of the same signature and results written for tiny inputs (shape arithmetic):
    one plain loop, a fraction of the template's compile time.

    A form's numba function is made when it is first asked for (not when the template is
    bound), so importing graphrt hashes no source and makes no dispatcher for the many
    forms a process never runs."""

    __slots__ = ("_table", "name", "_bodies", "_consts")

    def __init__(self, template, name: str, parallel: bool = False, small=None, **consts):
        self.name = name
        self._table = {}
        self._consts = consts
        self._bodies = {False: (template, "")}
        if parallel:
            self._bodies[True] = (template, "_par")
        if small is not None:
            self._bodies["small"] = (small, "_small")

    def _form(self, exact: bool, key):
        fn = self._table.get((exact, key))
        if fn is not None:
            return fn
        with _MAKING:
            fn = self._table.get((exact, key))
            if fn is None:
                body, suffix = self._bodies[key]
                count = tasks.count_parameter(body.__code__, source_of(body.__code__)) \
                    if True in self._bodies else None
                consts = self._consts if count is None or key == "small" else \
                    dict(self._consts, prange=tasks.task_range)
                task_form = key is True and count is not None
                # every form that binds task_range (the serial one too) is built on its code
                tag = _hash_of(dict(consts, TASKS=tasks.source_tag())
                               if "prange" in consts else consts, body)
                mode = "exact" if exact else "fast"
                if task_form:
                    # the serial form's code on the threads (core/tasks.py)
                    fn = tasks.parallel_form(self._form(exact, False),
                                             f"{self.name}_{mode}_tasks_{tag}",
                                             body.__code__.co_argcount, count, rebind,
                                             {"error_model": "numpy"})
                else:
                    fn = njit(rebind(body, f"{self.name}_{mode}{suffix}_{tag}",
                                     dict(consts, EXACT=exact)), cache=True, nogil=True,
                              no_cfunc_wrapper=True,
                              parallel=key is True, error_model="numpy",
                              fastmath=False if exact else set(FAST_MATH))
                self._table[exact, key] = fn
        return fn

    def get(self, exact: bool, parallel: bool = False, small: bool = False,
            record: bool = True):
        """The function of the mode and form; asking for a parallel form records it in
        ASKED (unless ``record`` is false: the caller records it, see ``ask``)."""
        if record and parallel and True in self._bodies:
            ask((self,), exact)
        if parallel and serial_planning():
            parallel = False
        if small and not parallel and "small" in self._bodies:
            return self._form(exact, "small")
        return self._form(exact, parallel if parallel in self._bodies else False)

    def forms(self, exact: bool) -> tuple:
        """(parallel form, serial form) of a template with a parallel variant."""
        return self._form(exact, True), self._form(exact, False)


_MAKING = threading.RLock()
# Where a plan being built or run records the parallel forms it asked for (plan/warm.py), else
# None: items (alternatives, exact), ``alternatives`` a tuple of Variants of which the plan
# runs one (a path and its in-place twin: which one is known only when the run's buffers are).
ASKED: contextvars.ContextVar = contextvars.ContextVar("graphrt_parallel_asked", default=None)


def ask(alternatives: tuple, exact: bool) -> None:
    """Record in ASKED that a plan runs the parallel form of one of ``alternatives``."""
    asked = ASKED.get()
    alternatives = tuple(v for v in alternatives if True in v._bodies)
    if asked is not None and alternatives:
        asked.add((alternatives, exact))


def task_forms(template, name: str, **consts) -> tuple:
    """(serial form, parallel form) of a task body made outside Variants (one form, no
    fast/exact pair: the caller's compile options are numba's defaults), named ``name`` and
    a hash of the template's source and callees (the generated ``consts`` are left out: they
    hash by address)."""
    tag = _hash_of({}, template)
    code = template.__code__
    serial = njit(rebind(template, f"{name}_{tag}", dict(consts, prange=tasks.task_range)),
                  cache=True, nogil=True, no_cfunc_wrapper=True)
    count = tasks.count_parameter(code, source_of(code))
    if count is None:
        raise TypeError(f"{template.__qualname__} is not a task body (core/tasks.py)")
    return serial, tasks.parallel_form(serial, f"{name}_tasks_{tag}", code.co_argcount, count,
                                       rebind, {})


def rebind(template, qualname: str, consts: dict):
    g = dict(template.__globals__)
    g.update(consts)
    code = template.__code__.replace(co_name=qualname, co_qualname=qualname)
    fn = types.FunctionType(code, g, qualname, template.__defaults__, template.__closure__)
    fn.__qualname__ = qualname
    fn.__module__ = template.__module__
    return fn


def file_tag(path: str) -> str:
    """The sha1 of a file's bytes (hex): a module's SOURCE_TAG, naming the kernels that call
    its intrinsics or overloads or load its generated code, which numba's cache does not
    follow to their source."""
    with open(path, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()


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
