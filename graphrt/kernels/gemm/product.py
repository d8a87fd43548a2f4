"""Matrix products: one planning and calling API for every kernel that multiplies.

    out[b] = A_b @ B_b                         (b < batches; an m x n C-order block each)
    A_b[i, k] = a[offa[b] + i * a_si + k * a_sk],  B_b[k, j] = b[offb[b] + k * b_sk + j * b_sj]

and, in Gemm's form, out = alpha * (A @ B) + beta * C with C read at c[i * c_si + j * c_sj].
For every output element acc starts at 0 and for k ascending acc = acc + a[i, k] * b[k, j],
in the element type (a float32 accumulator for float32).

``Product(...)`` plans a product once (per plan) from its shapes and strides; calling it
runs it. The path is chosen by one rule: float32 and float64 products run as tiles of
graphrt's register-blocked micro-kernel (microkernel.py) in both modes -- in fast mode every
element is one FMA chain, in exact mode a rounded multiply then a rounded add, the blocked
kernel's bits -- or, with GRAPHRT_GEMM=blas, as single-threaded ?gemm calls per tile
(blas.py); everything else (integers, GRAPHRT_GEMM=loop) runs the blocked kernel below.
Tiles and blocks are cut by the shapes only, and work is split over them, so the bits do
not depend on the thread count. The paths and what each guarantees: docs/kernels-gemm.md.

The blocked kernel walks a row block of the output, a block of columns and a block of k at
a time and keeps the partial sums in the output itself, so blocking changes where sums
wait, never their order. Its fast variant may contract each step into an FMA; the exact
variant has none, and rewrites NaN results to the canonical quiet NaN. Integer products
wrap around. Gemm's epilogue is two correctly rounded multiplies and an add in both modes
(``_epilogue``).
"""
from __future__ import annotations

import os

import numba
import numpy as np
from numba import njit, prange

from ...errors import ErrorKind, SessionError
from ...threads import ensure_layer
from ...aligned import aligned_copy
from ..core.held import held_buffer
from ..core.jit import Variants
from ..core.pointwise import relu_float
from . import blas, microkernel
from .driver_ir import FEW_ROWS

EXACT = False
GEMM = False
EPILOGUE = None
SCALE = None
PACKED = False

PARALLEL_WORK = 1 << 18     # multiply-adds (batch * M * N * K) from which rows go parallel
RB = 8                      # rows per task
RB_PACKED = 32              # rows per task when B is packed (they share each panel)
JB = 1024                   # columns per block: one output row block stays in L1
JB_PACKED = 256             # columns per block when B is read across rows (transB)
KB = 64                     # k per block: the B panel (KB x JB) stays in L2

# geometry vector layout (int64), filled by infer
_M, _N, _K, _A_SI, _A_SK, _B_SK, _B_SJ, _C_SI, _C_SJ, _HAS_C, _RB = range(11)


# fastmath=False must be explicit: a callee with no fastmath option inherits its first
# caller's flags (numba's ConfigStack), and the fast variant would then contract the
# epilogue into an FMA for every caller, the exact variant included. Fastmath flags are per
# instruction, so these stay two multiplies and an add when inlined into a fast variant.
@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _epilogue(alpha, acc, beta, c):
    return alpha * acc + beta * c


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, error_model="numpy", fastmath=False)
def _scale(alpha, acc):
    return alpha * acc


def _product(a, b, c, out, offa, offb, geo, alpha, beta, tasks, panels):
    m = geo[_M]
    n = geo[_N]
    kk = geo[_K]
    a_si = geo[_A_SI]
    a_sk = geo[_A_SK]
    b_sk = geo[_B_SK]
    b_sj = geo[_B_SJ]
    c_si = geo[_C_SI]
    c_sj = geo[_C_SJ]
    has_c = geo[_HAS_C] != 0
    jb = JB_PACKED if PACKED else JB
    # B read across its rows (transB) is first copied, one KB x jb panel at a time, into
    # a per-thread panel (a row of ``panels``, see panels_for) laid out like an untransposed
    # B, so the j loops stay contiguous.
    rb = geo[_RB]
    blocks = (m + rb - 1) // rb
    for t in prange(tasks):
        batch = t // blocks
        r0 = (t - batch * blocks) * rb
        r1 = min(m, r0 + rb)
        ao = offa[batch]
        bo = offb[batch]
        oo = batch * m * n
        for j0 in range(0, n, jb):
            w = min(n, j0 + jb) - j0
            for i in range(r0, r1):
                # Row slices (rather than o + j indexing) let LLVM drop the negative-index
                # wrap-around and vectorise the j loops.
                row = out[oo + i * n + j0:oo + i * n + j0 + w]
                for j in range(w):
                    row[j] = 0
            for k0 in range(0, kk, KB):
                k1 = min(kk, k0 + KB)
                if PACKED:
                    src = panels[numba.get_thread_id()]
                    for j in range(w):
                        bj = bo + (j0 + j) * b_sj
                        for k in range(k0, k1):
                            src[(k - k0) * w + j] = b[bj + k * b_sk]
                    s0 = -k0 * w
                    sk = w
                else:
                    src = b
                    s0 = bo + j0
                    sk = b_sk
                for i in range(r0, r1):
                    row = out[oo + i * n + j0:oo + i * n + j0 + w]
                    ai = ao + i * a_si
                    for k in range(k0, k1):
                        x = a[ai + k * a_sk]
                        bs = s0 + k * sk
                        brow = src[bs:bs + w]
                        for j in range(w):
                            row[j] = row[j] + x * brow[j]
            for i in range(r0, r1):
                row = out[oo + i * n + j0:oo + i * n + j0 + w]
                if GEMM:
                    cs = i * c_si + j0 * c_sj
                    for j in range(w):
                        if has_c:
                            row[j] = EPILOGUE(alpha, row[j], beta, c[cs + j * c_sj])
                        else:
                            row[j] = SCALE(alpha, row[j])
                if EXACT:
                    for j in range(w):
                        v = row[j]
                        if v != v:
                            row[j] = np.nan


_MATMUL = Variants(_product, "matmul", parallel=True, GEMM=False)
_GEMM = Variants(_product, "gemm", parallel=True, GEMM=True, EPILOGUE=_epilogue, SCALE=_scale)
_GEMM_PACKED = Variants(_product, "gemm_packed", parallel=True, GEMM=True, EPILOGUE=_epilogue,
                        SCALE=_scale, PACKED=True)


# ------------------------------------- tiles: the micro-kernel (both modes) or the BLAS (fast)

BLAS_MIN_WORK = 1 << 17     # multiply-adds from which a product goes to the BLAS: below,
                            # the call's fixed cost (a few us) outweighs its speed
TILE_WORK = 1 << 20         # multiply-adds per tile, at least (about 10 us): the convs of
                            # the small CNNs then split in two or more, for a second thread
MAX_TASKS = 16              # tiles per product, at most (the split is cut before this)
MIN_ROWS, MIN_COLS = 48, 64     # a tile is not cut below these (4 row panels, 2 column panels)
# cuts fall on whole micro-tiles (rows of MR, columns of NR = float32's 2 vectors, a whole
# number of float64's), so no tile gets an edge panel the product does not have
MR, NR = microkernel.MR, microkernel.nr_of(4)
DOT_SLOWER = 16             # scalar FMA chains against two vectors of them a cycle
ROW_SLOWER = 8              # a row alone over panels: the 4-row kernel (a quarter of its work
                            # used) from memory, measured about 8x a blocked tile's time

# tile geometry vector layout (int64), filled by _plan_tiles
(_T_M, _T_N, _T_K, _T_MB, _T_NB, _T_TM, _T_TN, _T_KIND, _T_TA, _T_LDA, _T_A_SI, _T_TB, _T_LDB,
 _T_B_SJ, _T_C_SI, _T_C_SJ, _T_HAS_C, _T_A_SK, _T_B_SK, _T_RELU, _T_PANELS, _T_ROW) = range(22)
OWN = True
MK = None    # microkernel.SOURCE_TAG where OWN (renames the variants when it changes)
RELU = None


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _epilogue_of(gemm, g, c, out, o, r0, j0, alpha, beta, one):
    """The micro-kernel's epilogue (the tile products' ``epi``) for a tile at row r0,
    column j0 of the output (element o of out): Gemm's C where alpha = beta = 1 and C's
    columns are contiguous, or a product's value a row (_T_ROW: c[r], a convolution's bias),
    then an absorbed Relu; none where Gemm scales (the pass does it, the Relu after it)."""
    if gemm and (alpha != one or (g[_T_HAS_C] != 0 and (beta != one or g[_T_C_SJ] != 1))):
        return (out, o, g[_T_N], 0)
    flags = microkernel.EPI_RELU if g[_T_RELU] != 0 else 0
    if not gemm and g[_T_ROW] != 0:
        return (c, r0, 1, flags | microkernel.EPI_ROW)
    if gemm and g[_T_HAS_C] != 0:
        return (c, r0 * g[_T_C_SI] + j0, g[_T_C_SI], flags | microkernel.EPI_C)
    return (out, o, g[_T_N], flags)


def _tiles(a, b, c, out, offa, offb, g, alpha, beta, unit, tasks, work, btab, kt):
    """Task t: batch entry t // (tm * tn), then a row block and a column block of it;
    out[rows, cols] = A'[rows] B'[:, cols] by graphrt's micro-kernel (OWN) or one ?gemm call
    (alpha 1, beta 0: unit holds those two) on the calling thread, then Gemm's epilogue on
    the tile while it is in cache; ``btab``: where B's rows are, ``kt``: the micro-kernels
    (microkernel's tile products, OWN only). For the BLAS, row-major out = A'B' is column-major
    out^T = B'^T A'^T, so B is its first operand."""
    m = g[_T_M]
    n = g[_T_N]
    kk = g[_T_K]
    mb = g[_T_MB]
    nb = g[_T_NB]
    tm = g[_T_TM]
    tn = g[_T_TN]
    kind = np.int8(g[_T_KIND])
    ta = np.int8(g[_T_TA])
    tb = np.int8(g[_T_TB])
    lda = g[_T_LDA]
    ldb = g[_T_LDB]
    a_si = g[_T_A_SI]
    b_sj = g[_T_B_SJ]
    c_si = g[_T_C_SI]
    c_sj = g[_T_C_SJ]
    has_c = g[_T_HAS_C] != 0
    per = tm * tn
    for t in prange(tasks):
        batch = t // per
        r = t - batch * per
        ti = r // tn
        r0 = ti * mb
        r1 = min(m, r0 + mb)
        j0 = (r - ti * tn) * nb
        w = min(n, j0 + nb) - j0
        oo = batch * m * n
        fused = False
        if OWN:
            e, e_off, e_si, flags = _epilogue_of(GEMM, g, c, out, oo + r0 * n + j0, r0, j0,
                                                 alpha, beta, unit[0])
            fused = microkernel.call_tile(kt, (
                a, offa[batch] + r0 * a_si, a_si, g[_T_A_SK], b, offb[batch] + j0 * b_sj,
                g[_T_B_SK], b_sj, out, oo + r0 * n + j0, n, r1 - r0, w, kk,
                work[numba.get_thread_id()], EXACT, btab, g[_T_PANELS], e, e_off, e_si, flags,
                kt)) != 0
        else:
            blas.XXGEMM(kind, tb, ta, w, r1 - r0, kk, blas.ptr(unit, 0),
                        blas.ptr(b, offb[batch] + j0 * b_sj), ldb,
                        blas.ptr(a, offa[batch] + r0 * a_si), lda, blas.ptr(unit, 1),
                        blas.ptr(out, oo + r0 * n + j0), n)
        if GEMM and not fused and (has_c or alpha != unit[0]):   # (alpha 1, no C: y = acc)
            for i in range(r0, r1):
                row = out[oo + i * n + j0:oo + i * n + j0 + w]
                cs = i * c_si + j0 * c_sj
                if not has_c:
                    for j in range(w):
                        row[j] = SCALE(alpha, row[j])
                elif c_sj == 1:         # C's rows contiguous (a bias row, a full C): vectorised
                    crow = c[cs:cs + w]
                    for j in range(w):
                        row[j] = EPILOGUE(alpha, row[j], beta, crow[j])
                else:
                    for j in range(w):
                        row[j] = EPILOGUE(alpha, row[j], beta, c[cs + j * c_sj])
        if not GEMM and g[_T_ROW] != 0 and not fused:      # the value of each row
            for i in range(r0, r1):
                row = out[oo + i * n + j0:oo + i * n + j0 + w]
                for j in range(w):
                    row[j] = row[j] + c[i]
        if g[_T_RELU] != 0 and not fused:    # a Relu node absorbed (FusedEpilogue), on the tile in cache
            for i in range(r0, r1):
                row = out[oo + i * n + j0:oo + i * n + j0 + w]
                for j in range(w):
                    row[j] = RELU(row[j])
        if EXACT:
            for i in range(r0, r1):
                row = out[oo + i * n + j0:oo + i * n + j0 + w]
                for j in range(w):
                    v = row[j]
                    if v != v:
                        row[j] = np.nan


# Fast mode only: the exact variants are never compiled.
_BLAS_MATMUL = Variants(_tiles, "matmul_blas", parallel=True, GEMM=False, OWN=False,
                        RELU=relu_float)
_BLAS_GEMM = Variants(_tiles, "gemm_blas", parallel=True, GEMM=True, EPILOGUE=_epilogue,
                      SCALE=_scale, OWN=False, RELU=relu_float)
_OWN_MATMUL = Variants(_tiles, "matmul_tiles", parallel=True, GEMM=False, OWN=True,
                       MK=microkernel.SOURCE_TAG, RELU=relu_float)
_OWN_GEMM = Variants(_tiles, "gemm_tiles", parallel=True, GEMM=True, EPILOGUE=_epilogue,
                     SCALE=_scale, OWN=True, MK=microkernel.SOURCE_TAG, RELU=relu_float)
_OWN = {_BLAS_MATMUL: _OWN_MATMUL, _BLAS_GEMM: _OWN_GEMM}


class _TileCall:
    """One plan's tiled product; a BLAS call holds the BLAS at one thread. ``batches`` (at
    most the planned count) runs the first batch entries only."""

    __slots__ = ("fn", "offa", "offb", "geo", "tasks", "alpha", "beta", "unit", "own", "btab",
                 "kt")

    def _tasks(self, batches: int | None) -> int:
        return self.tasks if batches is None else \
            min(batches, len(self.offa)) * int(self.geo[_T_TM] * self.geo[_T_TN])

    def call_of(self, a, b, c, out, batches: int | None = None, holder: dict | None = None):
        """(kernel, args) of the product on graphrt's micro-kernel, its scratch kept in
        ``holder`` (core/held.py); None for the BLAS (held at one thread around the call:
        Python work)."""
        if not self.own:
            return None
        return self.fn, (a, b, c, out, self.offa, self.offb, self.geo, self.alpha, self.beta,
                         self.unit, self._tasks(batches), microkernel.work_for(out.dtype, holder),
                         self.btab, microkernel.passed(self.kt))

    def __call__(self, a, b, c, out, batches: int | None = None) -> None:
        call = self.call_of(a, b, c, out, batches)
        if call is not None:
            call[0](*call[1])
            return
        blas.enter()
        try:
            self.fn(a, b, c, out, self.offa, self.offb, self.geo, self.alpha, self.beta,
                    self.unit, self._tasks(batches), self.unit, self.btab, self.kt)
        finally:
            blas.leave()


def gemm_path() -> str:
    """The fast-mode float product, from GRAPHRT_GEMM (read when a plan is made): 'tiles'
    (the default: graphrt's micro-kernel), 'blas' (scipy's BLAS per tile where it is usable,
    else the micro-kernel) or 'loop' (the blocked kernel above)."""
    path = os.environ.get("GRAPHRT_GEMM", "tiles")
    if path not in ("tiles", "blas", "loop"):
        raise SessionError(ErrorKind.UNSUPPORTED,
                           f"GRAPHRT_GEMM={path!r}: expected tiles, blas or loop")
    return path


def tiling(nb: int, m: int, n: int, k: int) -> tuple[int, int]:
    """Row and column block sizes: halve the longer side (relative to its minimum) while
    each tile keeps TILE_WORK and there are at most MAX_TASKS tasks. A function of the
    shapes only, never of the thread count."""
    mb, cb = m, n
    while True:
        tasks = nb * -(-m // mb) * -(-n // cb)
        if 2 * tasks > MAX_TASKS or nb * m * n * k < 2 * tasks * TILE_WORK:
            return mb, cb
        if mb >= 2 * MIN_ROWS and mb * MIN_COLS >= cb * MIN_ROWS:
            mb = -(-mb // (2 * MR)) * MR
        elif cb >= 2 * MIN_COLS:
            cb = -(-cb // (2 * NR)) * NR
        elif mb >= 2 * MIN_ROWS:
            mb = -(-mb // (2 * MR)) * MR
        else:
            return mb, cb


def _operand(s_outer, s_inner, outer, inner):
    """BLAS transpose flag and leading dimension of an operand read at
    x[o * s_outer + i * s_inner] (o < outer, i < inner), or None when one of the strides
    is not 1 or the leading dimension would be invalid."""
    if s_inner == 1 and s_outer >= max(1, inner):
        return blas.NOTRANS, max(1, s_outer)
    if s_outer == 1 and s_inner >= max(1, outer):
        return blas.TRANS, max(1, s_inner)
    return None


def own_tiles(dtype, exact: bool) -> bool:
    """Whether a float product of this type runs as graphrt's tiles (see gemm_path)."""
    path = gemm_path()
    if blas.KIND.get(np.dtype(dtype)) is None or path == "loop":
        return False
    return exact or path == "tiles" or not blas.available()


def _plan_tiles(variants, dt, nb, offa, offb, geo, alpha=1.0, beta=1.0, fold=True, exact=False,
               btab=None, panels=False):
    """The tiled form of a float product (gemm_path), or None where it does not apply
    (other types, and GRAPHRT_GEMM=loop, use the kernel above). Exact mode: the micro-kernel's
    exact arithmetic, never the BLAS (the blocked kernel's bits, faster)."""
    kind = blas.KIND.get(dt)
    path = gemm_path()
    m, n, k = int(geo[_M]), int(geo[_N]), int(geo[_K])
    if kind is None or path == "loop" or nb * m * n == 0:
        return None             # (an empty output: the blocked kernel has nothing to do)
    own = own_tiles(dt, exact)
    if not own and (nb * m * n * k < BLAS_MIN_WORK or btab is not None):
        return None
    offa = np.asarray(offa, dtype=np.int64)
    offb = np.asarray(offb, dtype=np.int64)
    if fold and nb > 1 and not offb.any() and geo[_A_SK] == 1 and geo[_A_SI] == k and \
            np.array_equal(offa, np.arange(nb, dtype=np.int64) * (m * k)):
        # a stack of row-major A over one B: one product of nb * m rows
        m, nb, offa, offb = nb * m, 1, offa[:1], offb[:1]
    fa = _operand(int(geo[_A_SI]), int(geo[_A_SK]), m, k)
    fb = _operand(int(geo[_B_SK]), int(geo[_B_SJ]), k, n)
    if not own and (fa is None or fb is None or max(m, n, k, fa[1], fb[1]) > blas.INT_MAX):
        return None
    # a few rows over a transposed B run as scalar chains (driver_ir._dot_rows), about
    # DOT_SLOWER times the micro-kernel's time a multiply-add: tiles of the same time
    # (and a few rows over panels at about ROW_SLOWER times)
    dot = own and m < FEW_ROWS and geo[_B_SK] == 1 and geo[_B_SJ] != 1
    rows = own and m < FEW_ROWS and bool(panels)
    mb, cb = tiling(nb, m, n, k * (DOT_SLOWER if dot else ROW_SLOWER if rows else 1))
    g = np.zeros(22, dtype=np.int64)
    g[_T_PANELS] = panels
    g[_T_M], g[_T_N], g[_T_K], g[_T_MB], g[_T_NB] = m, n, k, mb, cb
    g[_T_TM], g[_T_TN] = -(-m // max(1, mb)), -(-n // max(1, cb))
    g[_T_KIND] = kind
    if not own:
        g[_T_TA], g[_T_LDA] = fa
        g[_T_TB], g[_T_LDB] = fb
    g[_T_A_SI], g[_T_B_SJ] = geo[_A_SI], geo[_B_SJ]
    g[_T_A_SK], g[_T_B_SK] = geo[_A_SK], geo[_B_SK]
    g[_T_C_SI], g[_T_C_SJ], g[_T_HAS_C] = geo[_C_SI], geo[_C_SJ], geo[_HAS_C]
    call = _TileCall()
    call.own = own
    call.tasks = int(nb * g[_T_TM] * g[_T_TN])
    call.fn = (_OWN[variants] if own else variants).get(
        exact, call.tasks > 1 and nb * m * n * k >= PARALLEL_WORK)
    if call.tasks > 1 or own:
        # own tiles take their scratch by numba.get_thread_id, which links against the
        # threading layer even in serial code: the layer must run before the kernel does
        ensure_layer()
    call.offa, call.offb, call.geo = offa, offb, g
    call.alpha, call.beta = dt.type(alpha), dt.type(beta)
    call.unit = np.array([1, 0], dtype=dt)
    call.btab = microkernel.NO_TABLE if btab is None else np.asarray(btab, dtype=np.int64)
    call.kt = microkernel.table(dt, exact) if own else call.btab
    return call


def panels_for(dtype, slots: int, holder: dict | None = None) -> np.ndarray:
    """The packing panels a product needs: ``slots`` rows (one per pool thread) of KB x
    JB_PACKED elements, kept like microkernel.work_for's scratch."""
    return held_buffer(dtype, (slots, KB * JB_PACKED), holder)


def batch_offsets(shape, batch, matrix_size) -> np.ndarray:
    """Element offset of each batch matrix of a C-contiguous operand, in output batch order."""
    index = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    return np.broadcast_to(index, batch).reshape(-1) * matrix_size


class ConstantB:
    """A kernel's constant 2-D B' (B, or B^T where ``trans``), laid out once for the
    product: where graphrt's tiles run it (own_tiles), as the micro-kernel's NR-column
    panels (microkernel.pack_panels: b_strides (NR, K), ``panels``); elsewhere as k-major
    rows (a copy only where B is transposed or of another type). Made on first use and kept
    while the kernel's input is the same array (its plans share it); each element's chain
    is the same as over the input itself, so are the bits.

    ``take`` makes it the only copy (the weight-packing pass, OpKernel.take_constant): the
    layout is made now, the model's array let go, and the kernel's infer finds in its
    place ``stand_in``, an array of B's type and shape that holds no data (every element
    NaN, through a zero stride) and that ``of`` answers with the layout."""

    __slots__ = ("_of", "_flat", "strides", "panels", "_taken")

    def __init__(self):
        self._of = self._flat = self._taken = None

    def of(self, b: np.ndarray, trans: bool, dtype, exact: bool) -> np.ndarray:
        """The flat layout; ``strides`` and ``panels`` then describe it for Product."""
        key = (np.dtype(dtype), own_tiles(dtype, exact))
        if self._of is None or self._of[0] is not b or self._of[1:] != key:
            source = b
            if self._taken is not None and b is self._taken[1]:
                # another layout of a taken B (GRAPHRT_GEMM changed): from the one it has,
                # the stand-in holding no data
                source = self.taken()[1]
            bk = np.asarray(source).T if trans else np.asarray(source)
            k, n = bk.shape
            self.panels = key[1]
            if self.panels:
                self._flat = microkernel.pack_panels(bk, dtype)
                self.strides = (microkernel.nr_of(np.dtype(dtype).itemsize), k)
            else:
                self._flat = aligned_copy(bk, dtype).reshape(-1)
                self.strides = (n, 1)
            self._of = (b,) + key
        return self._flat

    @staticmethod
    def can_take(b: np.ndarray) -> bool:
        """A float matrix (a stand-in of NaN can take its place)."""
        return b.ndim == 2 and b.dtype.kind == "f"

    def take(self, b: np.ndarray, trans: bool, dtype, exact: bool, name: str) -> None:
        """Lay ``b`` out now and keep only the layout (see the class docstring)."""
        self.of(b, trans, dtype, exact)
        stand_in = np.broadcast_to(np.full((), np.nan, b.dtype), b.shape)
        self._taken = (name, stand_in, trans, b.dtype)
        self._of = (stand_in,) + self._of[1:]

    def supply(self, ctx, i: int) -> None:
        """Give infer's ``ctx`` the taken B as input ``i`` (InferContext.supply)."""
        if self._taken is not None:
            stand_in = self._taken[1]
            ctx.supply(i, stand_in.dtype, stand_in.shape, stand_in)

    def taken(self) -> tuple | None:
        """(name, B as the model had it, rebuilt from the layout) once taken, else None."""
        if self._taken is None:
            return None
        name, stand_in, trans, dtype = self._taken
        k, n = stand_in.shape[::-1] if trans else stand_in.shape
        if self.panels:
            bk = microkernel.unpack_panels(self._flat, k, n)
        else:
            bk = self._flat.reshape(k, n)
        return name, np.ascontiguousarray(bk.T if trans else bk).astype(dtype)


# ----------------------------------------------------------------------- the product API

class Product:
    """One planned product (see the module docstring): ``dtype`` the element type computed
    in, ``offa``/``offb`` the batch entries' offsets, ``a_strides`` (a_si, a_sk),
    ``b_strides`` (b_sk, b_sj). Gemm's form: ``gemm=True`` with ``alpha``, ``beta`` and
    ``c_strides`` (c_si, c_sj; None without C). ``fold``: a stack of row-major A over one B
    may become one product of all the rows (then call it for all batch entries). ``btab``:
    B's row k lies at b[offb[b] + btab[k]] (the micro-kernel's row table; None where that
    path does not serve). ``min_parallel``: the blocked kernel's rows go parallel from this
    much work (multiply-adds per call) at least, for products called many times in a row.
    ``panels``: B is laid out as microkernel.pack_panels makes it (ConstantB; b_strides
    (NR, K)), for graphrt's tiles only."""

    __slots__ = ("tiles", "fn", "fn_serial", "offa", "offb", "geo", "blocks", "work", "alpha",
                 "beta", "slots", "batches", "min_parallel", "gemm")

    def __init__(self, dtype, m, n, k, a_strides, b_strides, offa=(0,), offb=(0,), *,
                 exact: bool, gemm: bool = False, alpha=1.0, beta=1.0, c_strides=None,
                 fold: bool = False, btab=None, min_parallel: int = 0, panels: bool = False):
        dt = np.dtype(dtype)
        geo = [0] * 11
        geo[_M], geo[_N], geo[_K] = m, n, k
        geo[_A_SI], geo[_A_SK] = a_strides
        geo[_B_SK], geo[_B_SJ] = b_strides
        if n <= 1:
            geo[_B_SJ] = 1      # one column: the j stride is never used, skip packing
        if c_strides is not None:
            geo[_C_SI], geo[_C_SJ] = c_strides
            geo[_HAS_C] = 1
        nb = len(offa)
        self.batches = nb
        self.gemm = gemm
        self.offa = np.asarray(offa, dtype=np.int64)
        self.offb = np.asarray(offb, dtype=np.int64)
        self.alpha, self.beta = dt.type(alpha), dt.type(beta)
        self.tiles = _plan_tiles(_BLAS_GEMM if gemm else _BLAS_MATMUL, dt, nb, self.offa,
                                 self.offb, geo, alpha, beta, fold=fold, exact=exact, btab=btab,
                                 panels=panels)
        assert not panels or self.tiles is not None or nb * m * n == 0, "panels off the tiles"
        packed = geo[_B_SJ] != 1
        variants = _GEMM_PACKED if packed else (_GEMM if gemm else _MATMUL)
        # one packing panel per pool thread: numba thread ids are below the pool size
        self.slots = numba.config.NUMBA_NUM_THREADS if packed else 0
        if packed:
            # numba.get_thread_id links against the threading layer, even in serial code
            # loaded from the cache: the layer must be running before the kernel is
            ensure_layer()
        geo[_RB] = RB_PACKED if packed else RB
        self.geo = np.asarray(geo, dtype=np.int64)
        self.blocks = -(-m // geo[_RB])
        self.work = m * n * k
        self.min_parallel = max(PARALLEL_WORK, min_parallel)
        self.fn = variants.get(exact, True)
        self.fn_serial = variants.get(exact, False)

    def call_of(self, a, b, out, c=None, batches: int | None = None,
                holder: dict | None = None):
        """(kernel, args) when the product of the first ``batches`` batch entries (all by
        default) is one compiled call, else None (the BLAS path, an empty product). Its
        scratch is kept in ``holder``: a run state's for calls replayed later (core/held.py),
        the Python thread's by default."""
        c = out if c is None else c
        if self.tiles is not None:
            return self.tiles.call_of(a, b, c, out, batches, holder)
        nb = self.batches if batches is None else min(batches, self.batches)
        if nb * self.blocks == 0:
            return None
        fn = self.fn if nb * self.work >= self.min_parallel else self.fn_serial
        return fn, (a, b, c, out, self.offa, self.offb, self.geo, self.alpha, self.beta,
                    nb * self.blocks, panels_for(out.dtype, self.slots, holder))

    def __call__(self, a, b, out, c=None, batches: int | None = None) -> None:
        """out = A @ B (Gemm: the epilogue with ``c``) for the first ``batches`` batch
        entries (all by default)."""
        call = self.call_of(a, b, out, c, batches)
        if call is not None:
            call[0](*call[1])
        elif self.tiles is not None:
            self.tiles(a, b, out if c is None else c, out, batches)     # the BLAS

    def absorb_relu(self) -> bool:
        """Let the tiles apply Relu as they store (a FusedEpilogue's next stage): on the
        tiled paths only; False where the blocked kernel runs."""
        if self.tiles is None:
            return False
        self.tiles.geo[_T_RELU] = 1
        return True

    def absorb_row_values(self) -> bool:
        """Let graphrt's tiles add one value a row as they store, before an absorbed Relu:
        ``c[r]`` for output row r of every batch entry (a MatMul-form product's ``c``, a
        convolution's bias: the same rounded add as a separate pass); False on other paths."""
        if self.tiles is None or not self.tiles.own or self.gemm:
            return False
        self.tiles.geo[_T_ROW] = 1
        return True
