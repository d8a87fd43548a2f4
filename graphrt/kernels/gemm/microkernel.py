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
padded lanes are computed and thrown away, edge tiles go through a small buffer. The blocked
driver that packs and walks the panels is LLVM IR too (driver_ir.py); the few-rows paths and
the tile entries that callers reach by address (``call_tile``) are numba code here.
"""
from __future__ import annotations

import contextvars
import glob
import hashlib
import os
import threading
import time

import numba
import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ...aligned import aligned_copy
from ...cache import folder_of
from ..core import by_address
from ..core.held import held_buffer
from ..core.jit import rebind
from . import driver_ir, micro_ir
from .driver_ir import KC, MC, call_blocked
from .micro_ir import (EPI_C, EPI_RELU, EPI_ROW, FULL,  # noqa: F401 (re-exported)
                       FUSED_EPILOGUE, GEMV, HALF, KERNEL_PATH, MASKED, MR, VBYTES, call, gemv,
                       slot)

# Kernels that call into this module bind SOURCE_TAG (jit.Variants hashes it into their
# names), so an edit here or in the micro-kernels' call convention renames them in numba's
# cache.
_h = hashlib.sha1()
for _path in (__file__, micro_ir.__file__, driver_ir.__file__):
    with open(_path, "rb") as _f:
        _h.update(_f.read())
SOURCE_TAG = _h.hexdigest()[:12]

NC_BYTES = 1 << 19          # a packed block of B (KC x NC) stays in L2
FEW_ROWS = 4                # fewer rows: _dot_rows (B transposed) or the one-row product


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


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, no_cpython_wrapper=True,
      error_model="numpy")
def _dot_rows(a, ao, a_si, a_sk, b, bo, b_sj, out, oo, ldo, rows, cols, kk, cb, exact):
    """The few-rows case with B's columns contiguous in k (B transposed, e.g. a Gemm with
    transB over one input row): eight columns at a time, each its own FMA chain over k
    ascending, the same operations as the micro-kernel's, read without packing."""
    cb[0] = 0
    z = cb[0]                   # a zero of the element type
    for i in range(rows):
        ai = ao + i * a_si
        arow = a[ai:ai + (kk - 1) * a_sk + 1]
        for j0 in range(0, cols, 8):
            if j0 + 8 <= cols:
                # eight chains in flight: an FMA's latency is about four times its rate
                q = bo + j0 * b_sj
                # row slices: indices known non-negative, no wrap-around test per load
                r0 = b[q:q + kk]
                r1 = b[q + b_sj:q + b_sj + kk]
                r2 = b[q + 2 * b_sj:q + 2 * b_sj + kk]
                r3 = b[q + 3 * b_sj:q + 3 * b_sj + kk]
                r4 = b[q + 4 * b_sj:q + 4 * b_sj + kk]
                r5 = b[q + 5 * b_sj:q + 5 * b_sj + kk]
                r6 = b[q + 6 * b_sj:q + 6 * b_sj + kk]
                r7 = b[q + 7 * b_sj:q + 7 * b_sj + kk]
                s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
                for k in range(kk):
                    x = arow[k * a_sk]
                    s0 = step(exact, x, r0[k], s0)
                    s1 = step(exact, x, r1[k], s1)
                    s2 = step(exact, x, r2[k], s2)
                    s3 = step(exact, x, r3[k], s3)
                    s4 = step(exact, x, r4[k], s4)
                    s5 = step(exact, x, r5[k], s5)
                    s6 = step(exact, x, r6[k], s6)
                    s7 = step(exact, x, r7[k], s7)
                o = oo + i * ldo + j0
                out[o] = s0
                out[o + 1] = s1
                out[o + 2] = s2
                out[o + 3] = s3
                out[o + 4] = s4
                out[o + 5] = s5
                out[o + 6] = s6
                out[o + 7] = s7
            else:
                for j in range(j0, cols):
                    bj = bo + j * b_sj
                    s0 = z
                    for k in range(kk):
                        s0 = step(exact, a[ai + k * a_sk], b[bj + k], s0)
                    out[oo + i * ldo + j] = s0


def _tile_product(a, ao, a_si, a_sk, b, bo, b_sk, b_sj, out, oo, ldo, rows, cols, kk,
                  ap, bp, cb, exact, btab, panels, epi, kt):
    """out[oo + i*ldo + j] = A[i, :] @ B[:, j] for i < rows, j < cols (module docstring),
    NC columns at a time. ``ap``, ``bp``, ``cb``: scratch from carve(work, rows, cols, kk);
    ``kt``: the micro-kernels of the mode and element type (kernels(dtype, exact)).
    A non-empty ``btab`` (B's columns contiguous) places B's row k at b[bo + btab[k]]
    (NO_TABLE: at b[bo + k*b_sk]). ``panels``: B is laid out as pack_panels makes it (b_sk
    = NR, b_sj = kk: the panel of column j0, a multiple of NR, starts at b[bo + j0 * kk]),
    read in place, never packed. ``epi`` = (e, e_off, e_si, flags): the
    epilogue the micro-kernel applies as it stores (micro_ir; e_off for the tile's
    element (0, 0), e's columns contiguous); flags 0: none. Returns whether it was applied:
    not where some rows fall to the padded edge path (then the caller makes its pass).
    FEW and BLOCKED (bound per entry) keep the few-rows paths and the blocked path: the
    blocked path serves every tile (the few-rows paths give the same bits, faster), so an
    entry without the few-rows paths is compiled for products whose tiles have FEW_ROWS
    rows or more, and one with them only (few_rows_only) for those whose tiles all have
    fewer: each compiles about half of the whole."""
    if kk == 0:
        for i in range(rows):
            for j in range(cols):
                out[oo + i * ldo + j] = 0
        return False
    if FEW:
        if rows < FEW_ROWS and panels:
            # each row by the 4-row micro-kernel reading that row four times (a_r = 0) and
            # storing its four equal results at one place (ldc = 0): the micro-kernel's
            # operations, its eight accumulators in registers (a row alone has two, and
            # waits on each FMA's latency: 2.5x slower)
            # (btab goes along unread, rows_at being False: the global NO_TABLE, typed as a
            # read-only array, would compile _micro_at once more for callers passing both)
            nr = cb.size // MR
            none = (epi[0], epi[1], epi[2], 0)
            for i in range(rows):
                for j0 in range(0, cols, nr):
                    _micro_at(kt, 4, a, ao + i * a_si, a_sk, 0, b, bo + j0 * kk, nr, False,
                              btab, 0, out, oo + i * ldo + j0, 0, kk, False,
                              min(nr, cols - j0), nr, none)
            return False
        if rows < FEW_ROWS and b_sk == 1 and b_sj != 1 and btab.size == 0:
            DOT_ROWS_AT(kt, (a, ao, a_si, a_sk, b, bo, b_sj, out, oo, ldo, rows, cols, kk, cb,
                             exact))
            return False
        if rows < FEW_ROWS and b_sj == 1 and btab.size == 0:
            # B's rows contiguous (a k-major B, read in place): each row of A by the one-row
            # product, all its columns' chains advancing together over k ascending
            for i in range(rows):
                gemv(kt[GEMV], a, ao + i * a_si, a_sk, b, bo, b_sk, out, oo + i * ldo, kk, cols)
            return False
    if BLOCKED:
        fuse = FUSED_EPILOGUE and epi[3] != 0 and rows % MR in (0, 8, 4)
        nc = bp.size // max(1, min(KC, kk))
        for jc in range(0, cols, nc):
            call_blocked(kt[BLOCKED_AT], a, ao, a_si, a_sk, b, bo + jc * b_sj, b_sk, b_sj, out,
                         oo + jc, ldo, rows, min(nc, cols - jc), kk, ap, bp, cb, btab,
                         btab.size, panels, epi[0], epi[1] + _cols(epi, jc), epi[2],
                         epi[3] if fuse else 0, kt)
        return fuse
    return False


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _cols(epi, j):
    """How far the epilogue's operand moves for column j of a tile: j, or 0 for one value
    a row (EPI_ROW)."""
    return 0 if epi[3] & EPI_ROW else j


FEW = True          # bound per entry (_tile_product's docstring)
BLOCKED = True
# bound per function: calls of the few-rows path _dot_rows (_AT, _direct)
DOT_ROWS_AT = None
NO_TABLE = np.zeros(0, dtype=np.int64)


def few_rows_only(rows: int, b_sk: int, b_sj: int, table: bool, panels: bool) -> bool:
    """Whether every tile of at most ``rows`` rows of a product with these B strides (a
    row table, panels) takes one of _tile_product's few-rows paths."""
    return 0 < rows < FEW_ROWS and (panels or (not table and (b_sj == 1 or b_sk == 1)))


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


@njit(nogil=True, error_model="numpy")
def _micro_at(kt, h, asrc, aoff, a_k, a_r, bsrc, boff, ldb, rows_at, btab, pc, c, co, ldc,
              kc, load, w, nr, ep):
    """The micro-kernel of ``kt`` for h rows (MR, 8 or 4) and w columns (w = nr: a full
    tile; else the first w, in one vector where they fit) into c at co, B's rows by btab
    from pc (rows_at) or ldb apart."""
    form = FULL if w == nr else HALF if w * c.itemsize <= VBYTES else MASKED
    height = 1 if h == 8 else 2 if h == 4 else 0
    call(kt[slot(form, rows_at, height)], asrc, aoff, a_k, a_r, bsrc, boff, ldb, btab, pc,
         c, co, ldc, kc, load, w, ep[0], ep[1], ep[2], ep[3])


def _signatures(dt):
    """The signatures the tile entries call their callees with, for element type ``dt``
    (numba's)."""
    v, i, b = types.Array(dt, 1, "C"), types.int64, types.boolean
    return {"dot_rows": types.none(v, i, i, i, v, i, i, v, i, i, i, i, i, v, b)}


TILE = micro_ir.SLOTS       # kernels(...)[TILE]: the address of the tile product entry
BLOCKED_AT = TILE + 1       # kernels(...)[BLOCKED_AT]: the blocked driver (driver_ir)
# kernels(...)[BLOCKED_AT + 1 + k]: the addresses of the tile entries' numba callees, in
# CALLEES order; the entries call them through these (by_address): their code is compiled
# once, as itself, not linked into each entry and optimised again there
CALLEES = {"dot_rows": _dot_rows}
_AT = {name: by_address.caller(BLOCKED_AT + 1 + k,
                               lambda dt, name=name: _signatures(dt)[name])
       for k, name in enumerate(CALLEES)}


def _direct(fn):
    """A call of ``fn`` in the form of a by_address caller: (table, arguments)."""
    return njit(nogil=True, inline="always")(lambda kt, args: fn(*args))


# every path, its callees linked: for the tests that call a tile product directly
tile_product = njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy")(
    rebind(_tile_product, f"tile_product_{SOURCE_TAG}",
           {"DOT_ROWS_AT": _direct(_dot_rows)}))
# the paths of one entry, inlined into it: compiled once there, not compiled, linked and
# optimised again as a callee; its own callees called through the table
_INLINED = {path: njit(nogil=True, error_model="numpy", inline="always")(
    rebind(_tile_product, f"tile_product_{path}_{SOURCE_TAG}",
           {"FEW": path == "few", "BLOCKED": path == "block", "DOT_ROWS_AT": _AT["dot_rows"]}))
    for path in ("few", "block")}


TILE_PRODUCT = None         # bound per entry: _INLINED[path]


def _tile_entry(a_p, a_n, ao, a_si, a_sk, b_p, b_n, bo, b_sk, b_sj, o_p, o_n, oo, ldo, rows,
                cols, kk, w_p, w_n, exact, t_p, t_n, panels, e_p, e_n, e_off, e_si, flags, k_p,
                k_n):
    """TILE_PRODUCT with a C signature (each array a pointer and a length; the scratch
    carved here from one row of work_for), compiled once per element type as a cfunc: the
    kernels that call it through its address (``call_tile``) link none of its code, so
    each of them (matmul, Gemm, Conv; serial and parallel) does not compile it again."""
    ap, bp, cb = _carve_inlined(carray(w_p, w_n), rows, cols, kk)
    return np.int64(TILE_PRODUCT(
        carray(a_p, a_n), ao, a_si, a_sk, carray(b_p, b_n), bo, b_sk, b_sj, carray(o_p, o_n),
        oo, ldo, rows, cols, kk, ap, bp, cb, exact != 0, carray(t_p, t_n), panels != 0,
        (carray(e_p, e_n), e_off, e_si, flags), carray(k_p, k_n)))


def _entry_signature(dt):
    p, i = types.CPointer(dt), types.int64
    ti = types.CPointer(types.int64)
    return i(p, i, i, i, i, p, i, i, i, i, p, i, i, i, i, i, i, p, i, i, ti, i, i, p, i, i, i,
             i, ti, i)


_KERNELS: dict = {}
_KERNELS_LOCK = threading.Lock()
_UNFILLED: dict = {}        # id(table) -> (table, its key) until ready() fills it
_FILL_LOCK = threading.RLock()
# set while a run makes its calls (plan/execute.py): call_of leaves tables unfilled then, and
# the run fills them (compile_share.fill_tables) before any call runs
DEFER: contextvars.ContextVar = contextvars.ContextVar("graphrt_defer_tiles", default=False)


def kernels(dtype, exact: bool, few: bool = False) -> np.ndarray:
    """The addresses a tiled product passes down (int64): the micro-kernels of the mode and
    element type (micro_ir.kernels, by slot), then at TILE the tile product entry: the one
    of the few-rows paths where ``few`` (every tile takes one: few_rows_only), else the one
    of the blocked path; at BLOCKED_AT the blocked driver (driver_ir); after it the addresses
    of the callees the few-rows entry calls (CALLEES; 0 in the blocked path's)."""
    return ready(table(dtype, exact, few))


def table(dtype, exact: bool, few: bool = False) -> np.ndarray:
    """The array ``kernels`` gives, one per process and key, possibly still all 0: a plan
    takes it when it is made, and ``ready`` fills it before the first call that passes it
    (neither the micro-kernels' compile nor the entry's then stops the plan: on a cold
    first run the helper process, asked for the entry when the session was made, has
    usually put both in the cache by then)."""
    return micro_ir.once(_KERNELS, _KERNELS_LOCK,
                         (np.dtype(dtype), bool(exact), "few" if few else "block"), _blank)


def _blank(dtype: np.dtype, exact: bool, path: str) -> np.ndarray:
    kt = np.zeros(BLOCKED_AT + 1 + len(CALLEES), np.int64)
    if (dtype, path) in _ADDRESSES:
        _fill(kt, dtype, exact, path)
    else:
        with _FILL_LOCK:
            _UNFILLED[id(kt)] = (kt, (dtype, exact, path))
    return kt


def ready(kt: np.ndarray) -> np.ndarray:
    """``kt`` with its entry and callee addresses in place (compiled or loaded now where
    they are missing); any other array is returned as it is."""
    if id(kt) in _UNFILLED:
        with _FILL_LOCK:
            key = _unfilled_key(kt)
            if key is not None:
                _fill(kt, *key)
                del _UNFILLED[id(kt)]
    return kt


def _unfilled_key(kt: np.ndarray):
    """The (dtype, exact, path) ``kt`` is still to be filled for, else None."""
    item = _UNFILLED.get(id(kt))
    return item[1] if item is not None and item[0] is kt else None


def micro_ahead(kt: np.ndarray) -> None:
    """Load, or compile into the cache, the micro-kernels an unfilled ``kt`` will hold,
    without filling it: a first run waiting for the helper process's blocked entry does this
    share itself (the helper, compiling the entry and its blocked path first, then loads
    them from the cache)."""
    key = _unfilled_key(kt)
    if key is not None:
        micro_ir.kernels(key[0], key[1])


def passed(kt: np.ndarray) -> np.ndarray:
    """``kt`` as a call made now passes it: filled (``ready``), unless the run making its
    calls fills the tables once they are all made (``DEFER``)."""
    return kt if DEFER.get() else ready(kt)


def unfilled() -> list:
    """(table, helper) of each table ``ready`` has not filled yet: ``helper`` the Event the
    helper process sets when it has compiled that table's entry (prefetch_tiles), else None."""
    out = []
    with _FILL_LOCK:
        items = list(_UNFILLED.values())
    for kt, (dtype, exact, path) in items:
        pending = PENDING.get((dtype, exact)) if path == "block" else None
        out.append((kt, None if pending is None else pending[0]))
    return out


def _fill(kt: np.ndarray, dtype: np.dtype, exact: bool, path: str) -> None:
    entry = _entry(dtype, exact, path)      # first: it may wait for the helper's compile
    sigs = _signatures(numba.from_dtype(dtype))
    kt[BLOCKED_AT + 1:] = [by_address.address(fn, sigs[name]) if path == "few" else 0
                           for name, fn in CALLEES.items()]
    kt[:TILE] = micro_ir.kernels(dtype, exact)
    kt[BLOCKED_AT] = driver_ir.address(dtype)       # (tile_product's blocked path: any table)
    kt[TILE] = entry


# (dtype, exact) -> (an Event set when the helper process has compiled the blocked entry of
# that type into the cache or given up, when it was asked: plan/compile_share.prefetch_tiles).
# _entry waits for it, then loads, where the helper has had WAIT_AFTER seconds already;
# earlier (a small model planned at once) the helper is still starting and this process
# compiles it itself.
PENDING: dict = {}
WAIT_AFTER = float(os.environ.get("GRAPHRT_TILE_WAIT_AFTER") or 2.0)


def _entry_name(dtype, path: str) -> str:
    return f"tile_entry_{np.dtype(dtype).name}_{path}_{SOURCE_TAG}"


def entry_cached(dtype) -> bool:
    """Whether the kernel cache holds an index of the blocked tile entry of ``dtype`` (a
    guess: the entry may still be missing for this CPU, then it is compiled as always)."""
    pattern = os.path.join(folder_of(__file__), f"*{_entry_name(dtype, 'block')}*.nbi")
    return bool(glob.glob(pattern))


def _entry(dtype: np.dtype, exact: bool, path: str) -> int:
    """The address of the tile entry of ``path`` for ``dtype`` (both modes: ``exact`` is an
    argument of its calls), compiled or loaded once per process."""
    with _ENTRY_LOCK:
        address = _ADDRESSES.get((dtype, path))
        if address is not None:
            return address
        pending = PENDING.get((dtype, exact))
        if path == "block" and pending is not None and \
                time.monotonic() - pending[1] >= WAIT_AFTER:
            pending[0].wait(300)    # (a helper that hangs: then this process compiles it)
        entry = cfunc(_entry_signature(numba.from_dtype(dtype)), cache=True, nogil=True,
                      error_model="numpy")(
            rebind(_tile_entry, _entry_name(dtype, path), {"TILE_PRODUCT": _INLINED[path]}))
        _ENTRIES.append(entry)
        address = _ADDRESSES[dtype, path] = int(entry.address)
        return address


_ADDRESSES: dict = {}
_ENTRY_LOCK = threading.RLock()
_ENTRIES: list = []         # the compiled entries, kept alive


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


def carve(work, rows, cols, kk):
    """The A, B and edge scratch a tile product needs for a rows x cols tile over kk, as views
    of ``work`` (at least work_size(itemsize) elements); the B block holds a whole number of
    NR-column panels."""
    nr = 2 * VBYTES // work.itemsize
    kc = max(1, min(KC, kk))
    nc = max(1, NC_BYTES // (KC * nr * work.itemsize)) * nr
    nc = min(nc, (cols + nr - 1) // nr * nr)
    mc = min(MC, (rows + MR - 1) // MR * MR)
    sa = max(1, mc) * kc
    sb = kc * max(nr, nc)
    return work[:sa], work[sa:sa + sb], work[sa + sb:sa + sb + MR * nr]


# (the tile entries inline it: compiled as a callee of its own, it cost about 0.2 s)
_carve_inlined = njit(nogil=True, inline="always")(carve)
carve = njit(cache=True, nogil=True, no_cfunc_wrapper=True)(carve)


def work_size(itemsize: int) -> int:
    """Elements of scratch one tile product call needs at most (see carve)."""
    nr = nr_of(itemsize)
    nc = max(1, NC_BYTES // (KC * nr * itemsize)) * nr
    return MC * KC + KC * max(nr, nc) + MR * nr


def work_for(dtype, holder: dict | None = None) -> np.ndarray:
    """Tile scratch: one row of work_size elements per numba pool thread (kernels take row
    numba.get_thread_id()), kept in ``holder`` (a run state's, else the Python thread's:
    core/held.py), so warm runs allocate nothing and concurrent runs never share one."""
    dt = np.dtype(dtype)
    return held_buffer(dt, (numba.config.NUMBA_NUM_THREADS, work_size(dt.itemsize)), holder)
