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

from numba import njit

from ..core.trampolines import (byte_at, run_copies, run_record, store_byte, store_word,
                                words_at)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def run_branch(cond, records, flag):
    """If: the record of records[1] (then) when cond[0], else of records[0]."""
    addr = records[1] if cond[0] else records[0]
    if addr == 0 or run_record(addr, flag) >= 0:
        raise RuntimeError("the branch needs Python")


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def run_loop(trips, cond, armed, flag):
    """Loop without scan outputs: ``armed[0]`` is the address of the loop's record (0: not
    armed) -- [the body's record, the addresses of its iteration-number input, its condition
    input (0: none) and its condition output; then four copy lists: staging the carried and
    captured inputs; carrying each iteration's outputs to the carried inputs, in two lists
    (through scratch when some output lies in a carried input's block); handing the final
    carried values on]. ``trips`` (int64) and ``cond`` (bool) are the node's first two inputs,
    or arrays holding no limit and true."""
    if armed[0] == 0:
        raise RuntimeError("the body needs Python")
    p = words_at(armed[0])
    first = run_copies(p, 4)
    then = first + 1 + 3 * p[first]
    leave = then + 1 + 3 * p[then]
    limit = trips[0]
    go = cond[0]
    i = 0
    while i < limit and go:
        if flag[0] != 0:                # (a body of no calls never looks at it)
            raise RuntimeError("cancelled")
        if p[1] != 0:
            store_word(p[1], i)
        if p[2] != 0:
            store_byte(p[2], 1)
        if run_record(p[0], flag) >= 0:
            raise RuntimeError("the body needs Python")
        go = byte_at(p[3]) != 0
        run_copies(p, first)
        run_copies(p, then)
        i += 1
    run_copies(p, leave)


DRIVERS = frozenset((run_branch, run_loop))     # (a first run's compile sharing leaves them)
