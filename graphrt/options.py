"""Session options (docs/contract.md section 4) and the cancel token."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import Enum


class Mode(str, Enum):
    FAST = "fast"
    EXACT = "exact"


class OptimizationLevel(str, Enum):
    NONE = "none"
    BASIC = "basic"
    ALL = "all"


class WeightStorage(str, Enum):
    ORIGINAL = "original"
    BINARY16 = "binary16"
    BFLOAT16 = "bfloat16"


MAX_THREADS = 256


@dataclass(frozen=True)
class SessionOptions:
    """What a session is made with. Strings are accepted for the enum fields."""

    mode: Mode = Mode.FAST
    intra_op_threads: int = 0          # 0 = one per logical core; changes speed only
    optimization_level: OptimizationLevel = OptimizationLevel.ALL
    weight_storage: WeightStorage = WeightStorage.ORIGINAL
    max_cached_plans: int = 16
    max_arena_bytes: int = 4 << 30     # run-time buffers (dynamic values) of one run, at most

    def __post_init__(self):
        object.__setattr__(self, "mode", Mode(_lower(self.mode)))
        object.__setattr__(self, "optimization_level",
                           OptimizationLevel(_lower(self.optimization_level)))
        object.__setattr__(self, "weight_storage", WeightStorage(_lower(self.weight_storage)))
        if not isinstance(self.intra_op_threads, int) or not 0 <= self.intra_op_threads <= MAX_THREADS:
            raise ValueError(f"intra_op_threads must be an int from 0 to {MAX_THREADS}")
        if not isinstance(self.max_cached_plans, int) or self.max_cached_plans < 1:
            raise ValueError("max_cached_plans must be a positive int")
        if not isinstance(self.max_arena_bytes, int) or self.max_arena_bytes < 0:
            raise ValueError("max_arena_bytes must be a non-negative int")

    @property
    def exact(self) -> bool:
        return self.mode is Mode.EXACT


def _lower(v):
    return v.lower() if isinstance(v, str) else v


class CancelToken:
    """Set from any thread; sessions check it while importing and between operators (a
    run's compiled blocks read a flag the token sets: ``watch``)."""

    def __init__(self):
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._flags: list = []

    def cancel(self) -> None:
        with self._lock:
            self._event.set()
            for flag in self._flags:
                flag[0] = 1

    def watch(self, flag) -> None:
        """Have ``cancel`` set ``flag[0]`` to 1 (now, when it was already called)."""
        with self._lock:
            self._flags.append(flag)
            if self._event.is_set():
                flag[0] = 1

    def unwatch(self, flag) -> None:
        with self._lock:
            self._flags = [f for f in self._flags if f is not flag]

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()
