"""Kernel paths: chosen once per session from the CPU's features (llvmlite reports them)."""
from __future__ import annotations

import functools

PATHS = ("avx512", "avx2", "generic")


@functools.lru_cache(maxsize=1)
def best_path() -> str:
    try:
        import llvmlite.binding as ll
        features = ll.get_host_cpu_features()
    except Exception:
        return "generic"
    if features.get("avx512f") and features.get("avx512bw"):
        return "avx512"
    if features.get("avx2") and features.get("fma"):
        return "avx2"
    return "generic"
