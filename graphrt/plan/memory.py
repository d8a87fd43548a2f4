"""The slab planner (docs/contract.md section 5): offsets for every static value from liveness.

Input: steps in order, what each step makes and reads, value sizes and element types, which
values are views of which, and where a kernel allows output 0 to take over input 0. Output:
an offset per value, the slab size and, per step, the blocks that die after it.

1. last[v] is the last step reading v, or the step making it; kept values live to the end.
   A view lives in its root's block; a block lives while any value in it lives.
2. Steps are walked in order; a new value takes the smallest free block that fits (best fit)
   or the slab grows. Outputs are placed before the step's dying inputs are freed.
3. In place: input 0 dies at this step, is alone in its block, the block is big enough and
   the element types match -> the output takes over the block.
4. Freed blocks are coalesced with free neighbours.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ..kernels.core.base import MAX_VALUE_BYTES

ALIGN = 64
MAX_SLAB = MAX_VALUE_BYTES


def _round(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class SlabLayout:
    offsets: dict[int, int]                 # value id -> byte offset in the slab
    size: int                               # slab bytes
    freed_after: list[list[tuple[int, int]]] = field(default_factory=list)  # per step
    in_place: dict[int, int] = field(default_factory=dict)   # output id -> input id it took over


class _FreeList:
    """Free blocks as sorted (offset, size) with best-fit take and coalescing give."""

    def __init__(self):
        self.offs: list[int] = []
        self.sizes: list[int] = []
        self.end = 0

    def take(self, size: int) -> int:
        best = -1
        for i, s in enumerate(self.sizes):
            if s >= size and (best < 0 or s < self.sizes[best]):
                best = i
        if best >= 0:
            off = self.offs[best]
            if self.sizes[best] == size:
                del self.offs[best], self.sizes[best]
            else:
                self.offs[best] += size
                self.sizes[best] -= size
            return off
        if self.offs and self.offs[-1] + self.sizes[-1] == self.end:   # grow the last block
            off = self.offs.pop()
            self.sizes.pop()
            self.end = off + size
            return off
        off = self.end
        self.end += size
        return off

    def give(self, off: int, size: int) -> None:
        i = bisect.bisect(self.offs, off)
        self.offs.insert(i, off)
        self.sizes.insert(i, size)
        if i + 1 < len(self.offs) and off + size == self.offs[i + 1]:
            self.sizes[i] += self.sizes.pop(i + 1)
            self.offs.pop(i + 1)
        if i > 0 and self.offs[i - 1] + self.sizes[i - 1] == off:
            self.sizes[i - 1] += self.sizes.pop(i)
            self.offs.pop(i)


def plan_slab(n_steps: int, made: list[list[int]], reads: list[list[int]],
              nbytes: dict[int, int], dtypes: dict[int, object], views: dict[int, int],
              in_place: dict[int, tuple[int, int]], keep: set[int],
              early_free: int | None = None) -> SlabLayout:
    """``made[s]``/``reads[s]``: the value ids step s makes and reads (graph inputs are
    made by a first step of their own). ``views[v] = source``; ``in_place[s] = (out, in)``
    where the kernel allows it; ``keep``: values that live to the end. ``early_free``: that
    value's block is freed right after the step that makes it -- a planted fault for tests
    of the checked mode, never used otherwise."""
    def root(v):
        while v in views:
            v = views[v]
        return v

    last: dict[int, int] = {}
    made_at: dict[int, int] = {}
    for s in range(n_steps):
        for v in made[s]:
            made_at[v] = s
            last.setdefault(v, s)
        for v in reads[s]:
            last[v] = max(last.get(v, s), s)
    for v in keep:
        last[v] = n_steps
    if early_free is not None:
        last[early_free] = made_at[early_free]
    # a block lives while any value in it lives
    block_end: dict[int, int] = {}
    members: dict[int, int] = {}
    for v in made_at:
        r = root(v)
        block_end[r] = max(block_end.get(r, -1), last[v])
        members[r] = members.get(r, 0) + 1

    free = _FreeList()
    offsets: dict[int, int] = {}
    taken: dict[int, int] = {}
    freed_after: list[list[tuple[int, int]]] = [[] for _ in range(n_steps)]
    dying: dict[int, list[int]] = {}
    layout_in_place: dict[int, int] = {}

    def size_of(r):
        return _round(nbytes[r])

    for s in range(n_steps):
        for v in made[s]:
            if v in views:
                offsets[v] = offsets[root(v)]
                continue
            cand = in_place.get(s)
            if cand is not None and cand[0] == v:
                src = cand[1]
                if (src in offsets and src not in views and members.get(src) == 1
                        and block_end.get(src) == s and src not in keep
                        and dtypes[src] == dtypes[v] and nbytes[src] == nbytes[v]):
                    # the same size, not only a block that fits: a broadcast input smaller
                    # than the output (Mul of (2, 1) by (2, 5)) would be overwritten while
                    # later rows still read it
                    offsets[v] = offsets[src]
                    taken[v] = taken.pop(src)
                    dying[s].remove(src)                     # handed over, not freed
                    layout_in_place[v] = src
                    dying.setdefault(block_end[v], []).append(v)
                    continue
            size = size_of(v)
            offsets[v] = free.take(size) if size else 0
            taken[v] = size
            dying.setdefault(block_end[v], []).append(v)
        for r in dying.pop(s, ()):
            size = taken.pop(r)
            if size:
                free.give(offsets[r], size)
                freed_after[s].append((offsets[r], size))
    return SlabLayout(offsets, free.end, freed_after, layout_in_place)
