"""The BLAS behind scipy.linalg, called from njit code one thread per call.

Fast-mode GEMM hands tiles of a product to ``?gemm`` through numba's own entry point
``numba_xxgemm`` (numba's helper library, which looks the routine up in
``scipy.linalg.cython_blas``), so the calling kernels stay cacheable on disk. graphrt runs
the tiles on numba's threads and the BLAS single-threaded: OpenBLAS's own threading
changes the bits with its thread count, and its threads would compete with numba's.
While a graphrt product runs, the library's thread count is held at 1 (counted over
concurrent callers) and put back when the last one leaves.

The path exists when scipy and threadpoolctl import and scipy's BLAS is an OpenBLAS whose
thread count can be set (pthreads or serial build, the scipy wheels' case); otherwise
``available()`` is False. graphrt's own micro-kernel (microkernel.py) is the default fast
path; ``GRAPHRT_GEMM=blas`` chooses this one (product.gemm_path).

Kernel set: OpenBLAS picks its kernels from the CPU when the library loads, unless
OPENBLAS_CORETYPE names them; ``corename()`` tells which it runs. Fast-mode bits depend on it.
"""
from __future__ import annotations

import ctypes
import functools
import itertools
import os
import threading

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# kind, transa, transb, m, n, k, alpha*, a*, lda, b*, ldb, beta*, c*, ldc -> status
XXGEMM = types.ExternalFunction("numba_xxgemm", types.int32(
    types.char, types.char, types.char, types.intp, types.intp, types.intp,
    types.voidptr, types.voidptr, types.intp, types.voidptr, types.intp, types.voidptr,
    types.voidptr, types.intp))

KIND = {np.dtype(np.float32): ord("s"), np.dtype(np.float64): ord("d")}
NOTRANS, TRANS = ord("n"), ord("t")
INT_MAX = 2**31 - 1         # cython_blas takes Fortran int (32-bit) sizes


@intrinsic
def ptr(typingctx, arr, offset):
    """The address of ``arr[offset]`` (1-D array, element offset) as a void pointer."""
    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.bitcast(builder.gep(a.data, [args[1]]), cgutils.voidptr_t)
    return types.voidptr(arr, offset), codegen


class _Pool:
    """One BLAS library's thread count: get() and set(n) through its C API."""

    __slots__ = ("get", "set")

    def __init__(self, get, set_):
        self.get, self.set = get, set_


_lock = threading.Lock()
_users = 0
_saved: tuple = ()
_POOLS: tuple = ()          # set by available(): enter/leave run only after it said True


def enter() -> None:
    """Hold the BLAS at one thread until the matching leave() (the pair costs about 2 us,
    the two thread-count calls included when the pool was not at one thread)."""
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = tuple(p.get() for p in _POOLS)
            for p, n in zip(_POOLS, _saved):
                if n != 1:
                    p.set(1)
        _users += 1


def leave() -> None:
    global _users
    with _lock:
        _users -= 1
        if _users == 0:
            for p, n in zip(_POOLS, _saved):
                if n != 1:
                    p.set(n)


def available() -> bool:
    """True when fast-mode products may go to the BLAS (see the module docstring)."""
    global _POOLS
    pools = _pools()
    if pools is None:
        return False
    _POOLS = pools
    return True


def corename() -> str | None:
    """The kernel set of scipy's OpenBLAS (e.g. 'Haswell', 'SkylakeX'), None without it."""
    libs = _libs()
    return getattr(libs[0], "architecture", None) if libs else None


@functools.lru_cache(maxsize=1)
def _pools():
    libs = _libs()
    if not libs:
        return None
    pools = []
    for lc in libs:
        if lc.internal_api != "openblas" or getattr(lc, "threading_layer", "") not in (
                "pthreads", "disabled"):
            return None
        pool = _openblas_pool(lc.dynlib)
        if pool is None:
            return None
        pools.append(pool)
    return tuple(pools)


@functools.lru_cache(maxsize=1)
def _libs() -> list:
    """threadpoolctl's controllers of the BLAS that scipy.linalg.cython_blas calls."""
    try:
        import scipy
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return []
    home = os.path.dirname(os.path.abspath(scipy.__file__))
    # scipy wheels keep their OpenBLAS in scipy.libs (Linux, Windows) or scipy/.dylibs
    # (macOS); elsewhere scipy shares a system BLAS and all loaded ones are held.
    try:
        import scipy.linalg.cython_blas  # noqa: F401  (loads the library)
    except ImportError:
        return []
    libs = [lc for lc in ThreadpoolController().lib_controllers if lc.user_api == "blas"]
    own = [lc for lc in libs if os.path.abspath(lc.filepath).startswith(home)]
    return own or libs


def _openblas_pool(lib):
    for prefix, suffix in itertools.product(("", "scipy_"), ("", "64_", "_64")):
        get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
        set_ = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
        if get is not None and set_ is not None:
            get.restype = ctypes.c_int
            get.argtypes = []
            set_.restype = None
            set_.argtypes = [ctypes.c_int]
            return _Pool(get, set_)
    return None
