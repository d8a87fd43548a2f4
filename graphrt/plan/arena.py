"""The per-run arena: dynamic values and kernel scratch, reset at the start of every run.

A bump allocator over one 64-byte-aligned uint8 buffer. When a run needs more, another
chunk is added; at the next reset the chunks are replaced by one of the run's peak size, so
a steady workload settles on one buffer and allocates nothing. A static step's scratch is
dead once the step returns: the run loop rewinds the arena to where it stood before the
step (``rewind``), so scratch is reused from step to step and the peak is that of the
largest step plus the dynamic values alive, not the sum over the run.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ErrorKind, SessionError
from ..aligned import ALIGN, aligned_bytes


class Arena:
    __slots__ = ("chunks", "used", "total", "peak", "limit", "poison")

    def __init__(self, limit: int, poison: bool = False):
        self.chunks: list[np.ndarray] = []
        self.used = 0           # bytes used in the last chunk
        self.total = 0          # bytes handed out this run and not rewound
        self.peak = 0           # the largest total of this run
        self.limit = limit
        self.poison = poison

    def reset(self) -> None:
        if len(self.chunks) > 1 or (self.chunks and self.chunks[0].size < self.peak):
            self.chunks = [aligned_bytes(max(self.peak, 1 << 16))]
        self.peak = 0
        if self.poison:
            for c in self.chunks:
                c.fill(0xFF)
        self.used = 0
        self.total = 0

    def take(self, dtype: np.dtype, shape: tuple, node: str | None = None) -> np.ndarray:
        """An uninitialised array of ``shape`` (a tuple of ints) and ``dtype`` (np.dtype)."""
        if min(shape, default=0) < 0:
            raise SessionError(ErrorKind.INVALID_INPUT, f"negative extent in shape {list(shape)}", node)
        if dtype.kind == "O":       # strings: Python objects cannot live in bytes
            return np.empty(shape, dtype=object)
        n = math.prod(shape) * dtype.itemsize
        if self.total + n > self.limit:
            raise SessionError(ErrorKind.INVALID_INPUT,
                               f"a run-time buffer of {n} bytes would pass the arena limit of "
                               f"{self.limit} bytes", node)
        rounded = (n + ALIGN - 1) // ALIGN * ALIGN
        if not self.chunks or self.used + rounded > self.chunks[-1].size:
            self.chunks.append(aligned_bytes(max(rounded, 1 << 16)))
            self.used = 0
        # one constructor call: slicing, viewing and reshaping cost twice as much, and
        # kernels take scratch on every run
        buf = np.ndarray(shape, dtype, self.chunks[-1], self.used)
        self.used += rounded
        self.total += rounded
        if self.total > self.peak:
            self.peak = self.total
        return buf

    def rewind(self, chunks: int, used: int, total: int) -> None:
        """Free what was taken since ``len(self.chunks), self.used, self.total`` were
        (chunks, used, total): the scratch of a step that has returned."""
        del self.chunks[max(chunks, 1):]
        if len(self.chunks) == chunks:
            self.used = used
        else:       # the step's first buffer opened the arena's first chunk
            self.used = 0
        self.total = total
