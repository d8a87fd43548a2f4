"""graphrt's own register-blocked GEMM (float32 and float64), in both modes' arithmetic.

    out[i, j] = sum_k a[ao + i*a_si + k*a_sk] * b[bo + k*b_sk + j*b_sj]   (i < rows, j < cols)

Every output element is one accumulator: acc = 0, then acc = fma(a[i, k], b[k, j], acc) for k
ascending, in the element type (fast mode); in exact mode acc = acc + a[i, k] * b[k, j], a
rounded multiply then a rounded add — the operations and order of graphrt's blocked kernel
(product._product), so the same bits, on every machine, at several times its speed.
Blocking (KC values of k at a time, the partial sum waiting in
``out`` between blocks), packing, the tile an element falls in and the thread that runs it
change where the sum waits, never its order or its operations, so the bits of an element
depend on its row of A, its column of B and K only: not on M, N, the batch, the tiling or
the thread count. Identical rows of A give identical rows of the result (onnx's light zoo
models depend on that: their weights are constant, so their logits tie).

The inner loop is a micro-kernel written in LLVM IR (micro_ir.py): MR rows by NR columns of
accumulators held in vector registers (NR = two vectors of the widest registers the target
has), one broadcast of A and two loads of B per row and k. A and B are packed into
zero-padded panels (MR-row panels of A, NR-column panels of B, k-major) only where they are not
already rows with contiguous k (A) or contiguous columns (B), which are read in place;
padded lanes are computed and thrown away, edge tiles go through a small buffer. The tile
product that packs and walks the panels, and its few-rows paths, are LLVM IR too
(driver_ir.py), one function per element type that kernels call through its address
(``call_tile``): no numba code of the product is compiled.
"""
from __future__ import annotations

import contextvars
import hashlib
import os
import threading
import time

import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ...aligned import aligned_copy
from ..core.held import held_buffer
from . import driver_ir, micro_ir
from .driver_ir import KC, MC, NC_BYTES
from .micro_ir import (EPI_C, EPI_RELU, EPI_ROW,  # noqa: F401 (re-exported)
                       FUSED_EPILOGUE, KERNEL_PATH, MR, VBYTES)

# Kernels that call into this module bind SOURCE_TAG (jit.Variants hashes it into their
# names), so an edit here or in the micro-kernels' call convention renames them in numba's
# cache.
_h = hashlib.sha1()
for _path in (__file__, micro_ir.__file__, driver_ir.__file__):
    with open(_path, "rb") as _f:
        _h.update(_f.read())
SOURCE_TAG = _h.hexdigest()[:12]



def nr_of(itemsize: int) -> int:
    """Columns of a micro-tile: two vectors."""
    return 2 * VBYTES // itemsize


@intrinsic
def fma(typingctx, x, y, z):
    """x * y + z rounded once (llvm.fma), the micro-kernel's step on one element."""
    sig = x(x, x, x)

    def codegen(context, builder, sig, args):
        fty = context.get_value_type(sig.return_type)
        name = "llvm.fma.f32" if sig.return_type == types.float32 else "llvm.fma.f64"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(fty, [fty] * 3),
                                            name)
        return builder.call(fn, args)

    return sig, codegen


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", inline="always")
def step(exact, x, y, acc):
    """One step of an element's chain: acc + x * y rounded twice (exact) or once (FMA)."""
    if exact:
        return acc + x * y
    return fma(x, y, acc)


NO_TABLE = np.zeros(0, dtype=np.int64)


def pack_panels(bk: np.ndarray, dtype) -> np.ndarray:
    """A k-major B (K x N) as the tile products read it with ``panels``: NR-column panels,
    each K rows of NR contiguous values (zeros past N), one after another -- every tile then
    streams its B from consecutive memory (a weight matrix read in place, rows far apart,
    cost about twice the time when it was not in cache)."""
    dt = np.dtype(dtype)
    nr = nr_of(dt.itemsize)
    k, n = bk.shape
    p = -(-n // nr)
    wide = np.zeros((k, p * nr), dtype=dt)
    wide[:, :n] = bk
    return aligned_copy(wide.reshape(k, p, nr).transpose(1, 0, 2)).reshape(-1)


def unpack_panels(flat: np.ndarray, k: int, n: int) -> np.ndarray:
    """The K x N B that :func:`pack_panels` laid out as ``flat`` (a view of it, not C-ordered)."""
    nr = nr_of(flat.dtype.itemsize)
    return flat.reshape(-1, k, nr).transpose(1, 0, 2).reshape(k, -1)[:, :n]


TILE = micro_ir.SLOTS       # kernels(...)[TILE]: the address of the tile product entry


_KERNELS: dict = {}
_KERNELS_LOCK = threading.Lock()
_UNFILLED: dict = {}        # id(table) -> (table, its key) until ready() fills it
_FILL_LOCK = threading.RLock()
# set while a run makes its calls (plan/execute.py): call_of leaves tables unfilled then, and
# the run fills them (compile_share.fill_tables) before any call runs
DEFER: contextvars.ContextVar = contextvars.ContextVar("graphrt_defer_tiles", default=False)


def kernels(dtype, exact: bool) -> np.ndarray:
    """The addresses a tiled product passes down (int64): the micro-kernels of the mode and
    element type (micro_ir.kernels, by slot), then at TILE the tile product entry
    (driver_ir)."""
    return ready(table(dtype, exact))


def table(dtype, exact: bool) -> np.ndarray:
    """The array ``kernels`` gives, one per process and key, possibly still all 0: a plan
    takes it when it is made, and ``ready`` fills it before the first call that passes it
    (neither the micro-kernels' build nor the entry's then stops the plan: on a cold first
    run the helper process, asked for them when the session was made, has usually put both
    in the cache by then)."""
    return micro_ir.once(_KERNELS, _KERNELS_LOCK, (np.dtype(dtype), bool(exact)), _blank)


def _blank(dtype: np.dtype, exact: bool) -> np.ndarray:
    kt = np.zeros(TILE + 1, np.int64)
    if dtype in _ADDRESSES:
        _fill(kt, dtype, exact)
    else:
        with _FILL_LOCK:
            _UNFILLED[id(kt)] = (kt, (dtype, exact))
    return kt


def ready(kt: np.ndarray) -> np.ndarray:
    """``kt`` with its entry and micro-kernel addresses in place (built or loaded now where
    they are missing); any other array is returned as it is."""
    if id(kt) in _UNFILLED:
        with _FILL_LOCK:
            key = _unfilled_key(kt)
            if key is not None:
                _fill(kt, *key)
                del _UNFILLED[id(kt)]
    return kt


def _unfilled_key(kt: np.ndarray):
    """The (dtype, exact) ``kt`` is still to be filled for, else None."""
    item = _UNFILLED.get(id(kt))
    return item[1] if item is not None and item[0] is kt else None


def micro_ahead(kt: np.ndarray) -> None:
    """Load, or compile into the cache, the micro-kernels an unfilled ``kt`` will hold,
    without filling it: a first run waiting for the helper process's entry does this share
    itself (the helper, building the entry first, then loads them from the cache)."""
    key = _unfilled_key(kt)
    if key is not None:
        micro_ir.kernels(key[0], key[1])


def passed(kt: np.ndarray) -> np.ndarray:
    """``kt`` as a call made now passes it: filled (``ready``), unless the run making its
    calls fills the tables once they are all made (``DEFER``)."""
    return kt if DEFER.get() else ready(kt)


def unfilled() -> list:
    """(table, helper) of each table ``ready`` has not filled yet: ``helper`` the Event the
    helper process sets when it has built that table's entry (prefetch_tiles), else None."""
    out = []
    with _FILL_LOCK:
        items = list(_UNFILLED.values())
    for kt, (dtype, exact) in items:
        pending = PENDING.get((dtype, exact))
        out.append((kt, None if pending is None else pending[0]))
    return out


def _fill(kt: np.ndarray, dtype: np.dtype, exact: bool) -> None:
    entry = _entry(dtype, exact)      # first: it may wait for the helper's build
    kt[:TILE] = micro_ir.kernels(dtype, exact)
    kt[TILE] = entry


# (dtype, exact) -> (an Event set when the helper process has built the tile entry of that
# type into the cache or given up, when it was asked: plan/compile_share.prefetch_tiles).
# _entry waits for it, then loads, where the helper has had WAIT_AFTER seconds already;
# earlier (a small model planned at once) the helper is still starting and this process
# builds it itself.
PENDING: dict = {}
WAIT_AFTER = float(os.environ.get("GRAPHRT_TILE_WAIT_AFTER") or 2.0)


def entry_cached(dtype) -> bool:
    """Whether the kernel cache holds the tile entry's object code for ``dtype``."""
    return driver_ir.cached(np.dtype(dtype))


def _entry(dtype: np.dtype, exact: bool) -> int:
    """The address of the tile entry for ``dtype`` (both modes: ``exact`` is an argument of
    its calls), built or loaded once per process."""
    with _ENTRY_LOCK:
        address = _ADDRESSES.get(dtype)
        if address is not None:
            return address
        pending = PENDING.get((dtype, exact))
        if pending is not None and time.monotonic() - pending[1] >= WAIT_AFTER:
            pending[0].wait(300)    # (a helper that hangs: then this process builds it)
        address = _ADDRESSES[dtype] = int(driver_ir.addresses(dtype)[0])
        return address


_ADDRESSES: dict = {}
_ENTRY_LOCK = threading.RLock()


@intrinsic
def call_tile(typingctx, kt, args):
    """The tile product entry at kt[TILE] on ``args`` (tile_product's arguments with the
    scratch as one work row and the epilogue's four fields in line): arrays passed as
    (data pointer, length), integers and booleans as int64. Returns its int64 result."""
    sig = types.int64(kt, args)

    def codegen(context, builder, sig, cargs):
        i64 = ir.IntType(64)
        table = context.make_array(sig.args[0])(context, builder, cargs[0])
        addr = builder.load(builder.gep(table.data, [ir.Constant(i64, TILE)]))
        flat, kinds = [], []
        for k, ty in enumerate(sig.args[1].types):
            v = builder.extract_value(cargs[1], k)
            if isinstance(ty, types.Array):
                arr = context.make_array(ty)(context, builder, v)
                flat += [arr.data, arr.nitems]
                kinds += [arr.data.type, i64]
            else:
                flat.append(context.cast(builder, v, ty, types.int64))
                kinds.append(i64)
        fn = builder.inttoptr(addr, ir.FunctionType(i64, kinds).as_pointer())
        return builder.call(fn, flat)

    return sig, codegen


@njit(cache=True, nogil=True)
def tile_product(a, ao, a_si, a_sk, b, bo, b_sk, b_sj, out, oo, ldo, rows, cols, kk, work,
                 exact, btab, panels, epi, kt):
    """out[oo + i*ldo + j] = A[i, :] @ B[:, j] for i < rows, j < cols (module docstring)
    by the tile entry of ``kt`` (kernels(dtype, exact)); ``work``: a row of work_for. A
    non-empty ``btab`` (B's columns contiguous) places B's row k at b[bo + btab[k]]
    (NO_TABLE: at b[bo + k*b_sk]). ``panels``: B is laid out as pack_panels makes it (b_sk
    = NR, b_sj = kk). ``epi`` = (e, e_off, e_si, flags): the epilogue the micro-kernel
    applies as it stores (micro_ir; flags 0: none). Returns whether it was applied (not
    where some rows fall to the padded edge path: then the caller makes its pass). For the
    tests; kernels call the entry themselves (``call_tile``)."""
    return call_tile(kt, (a, ao, a_si, a_sk, b, bo, b_sk, b_sj, out, oo, ldo, rows, cols, kk,
                          work, exact, btab, panels, epi[0], epi[1], epi[2], epi[3], kt)) != 0


def work_size(itemsize: int) -> int:
    """Elements of scratch one tile product call needs at most (driver_ir carves A's block,
    B's block of NC columns and the edge buffer from it)."""
    nr = nr_of(itemsize)
    nc = max(1, NC_BYTES // (KC * nr * itemsize)) * nr
    return MC * KC + KC * max(nr, nc) + MR * nr


def work_for(dtype, holder: dict | None = None) -> np.ndarray:
    """Tile scratch: one row of work_size elements per numba pool thread (kernels take row
    numba.get_thread_id()), kept in ``holder`` (a run state's, else the Python thread's:
    core/held.py), so warm runs allocate nothing and concurrent runs never share one."""
    dt = np.dtype(dtype)
    return held_buffer(dt, (numba.config.NUMBA_NUM_THREADS, work_size(dt.itemsize)), holder)
