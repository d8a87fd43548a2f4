"""Compiled drivers of control flow: an If's branch and a Loop's iterations run from a block
of compiled calls (plan/program.py), without Python between the body's steps.

A driver is called like any kernel (a step's jit_calls) and reads its subgraph runs as
records (kernels/core/trampolines.py): the body's block of calls and the copies that stage
its inputs and hand its outputs on, all by address. A record's address is 0 until the body's
plan has run once in the run state and proved to be compiled calls only; a driver that meets
a 0, or a body run stopped by a trap of its own, raises, which the block takes as a trap: the
step's Python run is made instead (OpKernel.traps), and that run fills the record in.
"""
from __future__ import annotations

import numba
from numba import njit

from ..core.trampolines import byte_at, copy_bytes, run_copies, run_record, words_at


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def run_branch(cond, records, flag):
    """If: the record of records[1] (then) when cond[0], else of records[0]."""
    addr = records[1] if cond[0] else records[0]
    if addr == 0 or run_record(addr, flag) >= 0:
        raise RuntimeError("the branch needs Python")


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def run_loop(trips, cond, loop, flag):
    """Loop: ``loop`` holds [body record, address of the body's iteration-number input (0:
    none), of its condition input (0: none), of its condition output, the (dst, src,
    nbytes) copies staging the carried and captured inputs, those carrying each
    iteration's outputs to its inputs (through scratch where they overlap: listed as two
    copy lists), and those handing the final carried values on]. ``trips`` (int64) and
    ``cond`` (bool) are the node's first two inputs, or arrays holding no limit and true."""
    p = words_at(loop.ctypes.data)
    if p[0] == 0:
        raise RuntimeError("the body needs Python")
    at = run_copies(p, 4)               # stage the carried and captured inputs
    steps = at
    limit = trips[0]
    go = cond[0]
    i = 0
    while i < limit and go:
        if p[1] != 0:
            idx = words_at(p[1])
            idx[0] = i
        if i > 0:
            at = run_copies(p, steps)   # carry the last outputs (through scratch)
            at = run_copies(p, at)
        if run_record(p[0], flag) >= 0:
            raise RuntimeError("the body needs Python")
        go = byte_at(p[3]) != 0
        i += 1
    if i > 0:
        at = run_copies(p, steps)
        at = run_copies(p, at)
    else:
        at = run_copies(p, run_copies(p, steps))
    run_copies(p, at)                   # hand the final carried values on


def compiled(fn, args: tuple) -> tuple:
    """(fn, args), ``fn`` compiled (or loaded from the cache) for the types of ``args``: a
    block calls only compiled overloads."""
    fn.compile(tuple(numba.typeof(a) for a in args))
    return fn, args
