"""MatMul and Gemm: matrix products with one fixed accumulation order.

For every output element, acc starts at 0 and for k ascending acc = acc + a[i, k] * b[k, j],
in the element type (a float32 accumulator for float32). The kernel walks a row block of
the output, a block of columns and a block of k at a time and keeps the partial sums in the
output itself, so blocking changes where sums wait, never their order. Work is split over
row blocks only, so the bits do not depend on the thread count. In the fast variant each
step may be an FMA; the exact variant has none, and rewrites NaN results to the canonical
quiet NaN. Integer products wrap around.

Gemm: y = alpha * (A' B') + beta * C with A' = A or A^T, B' = B or B^T and C broadcast
unidirectionally to (M, N). The epilogue is two correctly rounded multiplies and an add in
both modes (see ``_epilogue``).

Fast mode, float32 and float64: the product goes to the BLAS behind scipy.linalg instead
(``blas.py``), cut into tiles whose sizes depend on the shapes only; each tile is one
single-threaded ``?gemm`` call and numba's threads share the tiles, so the bits do not
depend on the thread count (they do depend on how many rows are multiplied together). The
paths and what each guarantees: docs/kernels-gemm.md.
"""
from __future__ import annotations

import os
import threading

import numba
import numpy as np
from numba import njit, prange

from ..errors import ErrorKind, SessionError
from ..threads import ensure_layer
from . import blas, microkernel
from .base import InferContext, OpKernel, RunContext
from .broadcast import broadcast_shape, element_strides
from .pointwise import BF16, F16, compute_dtype, narrow, relu_float, result_buffer, widen
from .jit import Variants

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
@njit(cache=True, nogil=True, error_model="numpy", fastmath=False)
def _epilogue(alpha, acc, beta, c):
    return alpha * acc + beta * c


@njit(cache=True, nogil=True, error_model="numpy", fastmath=False)
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


# ---------------------------------------------------------------- fast mode: BLAS tiles

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

# BLAS geometry vector layout (int64), filled by _plan_blas
(_T_M, _T_N, _T_K, _T_MB, _T_NB, _T_TM, _T_TN, _T_KIND, _T_TA, _T_LDA, _T_A_SI, _T_TB, _T_LDB,
 _T_B_SJ, _T_C_SI, _T_C_SJ, _T_HAS_C, _T_A_SK, _T_B_SK, _T_RELU) = range(20)
OWN = True
MK = None    # microkernel.SOURCE_TAG where OWN (renames the variants when it changes)
RELU = None


@njit(cache=True, nogil=True, inline="always")
def _epilogue_of(gemm, g, c, out, o, r0, j0, alpha, beta, one):
    """The micro-kernel's epilogue (microkernel.tile_product's ``epi``) for a tile at row r0,
    column j0 of the output (element o of out): Gemm's C where alpha = beta = 1 and C's
    columns are contiguous, then an absorbed Relu; none where Gemm scales (the pass does it,
    the Relu after it)."""
    if gemm and (alpha != one or (g[_T_HAS_C] != 0 and (beta != one or g[_T_C_SJ] != 1))):
        return (out, o, g[_T_N], 0)
    flags = microkernel.EPI_RELU if g[_T_RELU] != 0 else 0
    if gemm and g[_T_HAS_C] != 0:
        return (c, r0 * g[_T_C_SI] + j0, g[_T_C_SI], flags | microkernel.EPI_C)
    return (out, o, g[_T_N], flags)


def _tiles(a, b, c, out, offa, offb, g, alpha, beta, unit, tasks, work, btab):
    """Task t: batch entry t // (tm * tn), then a row block and a column block of it;
    out[rows, cols] = A'[rows] B'[:, cols] by graphrt's micro-kernel (OWN) or one ?gemm call
    (alpha 1, beta 0: unit holds those two) on the calling thread, then Gemm's epilogue on
    the tile while it is in cache; ``btab``: where B's rows are (microkernel.tile_product,
    OWN only). For the BLAS, row-major out = A'B' is column-major
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
            ap, bp, cb = microkernel.carve(work[numba.get_thread_id()], r1 - r0, w, kk)
            args = (a, offa[batch] + r0 * a_si, a_si, g[_T_A_SK], b, offb[batch] + j0 * b_sj,
                    g[_T_B_SK], b_sj, out, oo + r0 * n + j0, n, r1 - r0, w, kk, ap, bp, cb,
                    EXACT, btab, _epilogue_of(GEMM, g, c, out, oo + r0 * n + j0, r0, j0, alpha,
                                              beta, unit[0]))
            if EXACT:       # (a constant: only this mode's kernels are compiled)
                fused = microkernel.tile_product_exact(*args)
            else:
                fused = microkernel.tile_product_fast(*args)
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

    __slots__ = ("fn", "offa", "offb", "geo", "tasks", "alpha", "beta", "unit", "own", "btab")

    def __call__(self, a, b, c, out, batches: int | None = None) -> None:
        tasks = self.tasks if batches is None else \
            min(batches, len(self.offa)) * int(self.geo[_T_TM] * self.geo[_T_TN])
        if self.own:
            self.fn(a, b, c, out, self.offa, self.offb, self.geo, self.alpha, self.beta,
                    self.unit, tasks, microkernel.work_for(out.dtype), self.btab)
            return
        blas.enter()
        try:
            self.fn(a, b, c, out, self.offa, self.offb, self.geo, self.alpha, self.beta,
                    self.unit, tasks, self.unit, self.btab)
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


def fast_product(dtype, m, n, k, a_strides, b_strides, offa, offb, exact=False, btab=None):
    """For other kernels' products in fast mode: out[b] (an m x n C-order block at b*m*n) =
    A_b @ B_b for b < len(offa), A_b[i, k] = a[offa[b] + i*a_si + k*a_sk], B_b[k, j] =
    b[offb[b] + k*b_sk + j*b_sj], as tiles (gemm_path). Call it as ``call(a, b, out, out,
    batches)``. None where the tiles do not apply (use _MATMUL then). ``btab``: B's row k at
    b[offb[b] + btab[k]] instead (graphrt's micro-kernel only: None where that is not the
    path)."""
    geo = [0] * 11
    geo[_M], geo[_N], geo[_K] = m, n, k
    geo[_A_SI], geo[_A_SK] = a_strides
    geo[_B_SK], geo[_B_SJ] = b_strides
    return _plan_blas(_BLAS_MATMUL, np.dtype(dtype), len(offa), offa, offb, geo, fold=False,
                      exact=exact, btab=btab)


def _tiling(nb: int, m: int, n: int, k: int) -> tuple[int, int]:
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


def _plan_blas(variants, dt, nb, offa, offb, geo, alpha=1.0, beta=1.0, fold=True, exact=False,
               btab=None):
    """The tiled form of a float product (gemm_path), or None where it does not apply
    (other types, and GRAPHRT_GEMM=loop, use the kernel above). Exact mode: the micro-kernel's
    exact arithmetic, never the BLAS (the blocked kernel's bits, faster)."""
    kind = blas.KIND.get(dt)
    path = gemm_path()
    m, n, k = int(geo[_M]), int(geo[_N]), int(geo[_K])
    if kind is None or path == "loop" or nb * m * n == 0:
        return None             # (an empty output: the blocked kernel has nothing to do)
    own = exact or path == "tiles" or not blas.available()
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
    # a few rows over a transposed B run as scalar chains (microkernel._dot_rows), about
    # DOT_SLOWER times the micro-kernel's time a multiply-add: tiles of the same time
    dot = own and m < microkernel.FEW_ROWS and geo[_B_SK] == 1 and geo[_B_SJ] != 1
    mb, cb = _tiling(nb, m, n, k * DOT_SLOWER if dot else k)
    g = np.zeros(20, dtype=np.int64)
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
    return call


# ----------------------------------------------------------------------- the operators

class _Prepared:
    __slots__ = ("fn", "offa", "offb", "geo", "tasks", "alpha", "beta", "slots", "blas", "narrow")


_PANELS = threading.local()


def panels_for(dtype, slots: int) -> np.ndarray:
    """The packing panels a product needs: ``slots`` rows (one per pool thread) of KB x
    JB_PACKED elements, kept per Python thread and reused, so warm runs allocate nothing and
    concurrent runs (each on its own Python thread) never share one."""
    cache = getattr(_PANELS, "cache", None)
    if cache is None:
        cache = _PANELS.cache = {}
    key = (np.dtype(dtype), slots)
    buf = cache.get(key)
    if buf is None:
        buf = cache[key] = np.empty((slots, KB * JB_PACKED), key[0])
    return buf


def _prepare(ctx, variants, dt, nb, offa, offb, geo, alpha=1, beta=1):
    m, n, k = int(geo[_M]), int(geo[_N]), int(geo[_K])
    p = _Prepared()
    parallel = nb * m * n * k >= PARALLEL_WORK
    packed = geo[_B_SJ] != 1
    # One packing panel per pool thread: numba thread ids are below the pool size.
    p.slots = numba.config.NUMBA_NUM_THREADS if packed else 0
    if packed:
        variants = _GEMM_PACKED
        # numba.get_thread_id links against the threading layer, even in serial code
        # loaded from the cache: the layer must be running before the kernel is.
        ensure_layer()
    p.fn = variants.get(ctx.exact, parallel)
    p.offa = np.asarray(offa, dtype=np.int64)
    p.offb = np.asarray(offb, dtype=np.int64)
    geo[_RB] = RB_PACKED if packed else RB
    p.geo = np.asarray(geo, dtype=np.int64)
    p.tasks = nb * (-(-m // geo[_RB]))
    p.alpha = dt.type(alpha)
    p.beta = dt.type(beta)
    p.blas = None
    p.narrow = False
    ctx.prepared = p
    return p


class MatMul(OpKernel):
    """numpy matmul: a 1-D A is a row (1, K), a 1-D B a column (K, 1), and the added axis
    is dropped from the result; leading (batch) axes broadcast. float16 and bfloat16 are
    computed in float32 (inputs widened exactly, the result rounded once)."""

    supports_exact = True
    ALLOWED = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64,
                                             np.uint32, np.uint64)) | {F16} | BF16

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.same_dtype(0, 1)
        ctx.check_dtype(0, self.ALLOWED)
        sa, sb = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        if not sa or not sb:
            ctx.fail(f"operands must have rank 1 or more, got shapes {list(sa)} and {list(sb)}")
        a2 = (1,) + sa if len(sa) == 1 else sa
        b2 = sb + (1,) if len(sb) == 1 else sb
        m, k = a2[-2:]
        k2, n = b2[-2:]

        def bad(_msg=None):
            ctx.fail(f"shapes {list(sa)} and {list(sb)} cannot be multiplied")

        if k != k2:
            bad()
        batch = broadcast_shape([a2[:-2], b2[:-2]], bad)
        shape = batch + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
        ctx.set_output(0, dt, shape)
        nb = int(np.prod(batch, dtype=np.int64))
        offa = _batch_offsets(a2[:-2], batch, m * k)
        offb = _batch_offsets(b2[:-2], batch, k * n)
        geo = [0] * 11
        geo[_M], geo[_N], geo[_K] = m, n, k
        geo[_A_SI], geo[_A_SK], geo[_B_SK], geo[_B_SJ] = k, 1, n, 1
        wd = compute_dtype(dt)
        p = _prepare(ctx, _MATMUL, wd, nb, offa, offb, geo)
        p.narrow = wd != dt
        p.blas = _plan_blas(_BLAS_MATMUL, wd, nb, offa, offb, geo, exact=ctx.exact)

    def absorb_relu(self, prepared) -> bool:
        return absorb_relu(prepared)

    def run(self, ctx: RunContext) -> None:
        p = ctx.prepared
        a, b = ctx.flat_in
        out = ctx.flat_out[0]
        buf = out
        if p.narrow:
            a, b, buf = widen(ctx, a), widen(ctx, b), result_buffer(ctx, out)
        if p.blas is not None:
            p.blas(a, b, buf, buf)
        else:
            p.fn(a, b, buf, buf, p.offa, p.offb, p.geo, p.alpha, p.beta, p.tasks,
                 panels_for(buf.dtype, p.slots))
        if p.narrow:
            narrow(out, buf)


def absorb_relu(p) -> bool:
    """Let the tiles of a planned product apply Relu (a FusedEpilogue's next stage): on the
    tiled paths only, and not where the result is narrowed afterwards (float16)."""
    if p.blas is None or p.narrow:
        return False
    p.blas.geo[_T_RELU] = 1
    return True


def _batch_offsets(shape, batch, matrix_size) -> np.ndarray:
    """Element offset of each batch matrix of a C-contiguous operand, in output batch order."""
    index = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    return np.broadcast_to(index, batch).reshape(-1) * matrix_size


class Gemm(OpKernel):
    """Y = alpha * A' B' + beta * C (opset 7+; C optional from opset 11)."""

    supports_exact = True
    ALLOWED = frozenset(np.dtype(t) for t in (np.float32, np.float64))

    def __init__(self, node):
        super().__init__(node)
        self.trans_a = int(node.attr("transA", 0)) != 0
        self.trans_b = int(node.attr("transB", 0)) != 0
        self.alpha = float(node.attr("alpha", 1.0))
        self.beta = float(node.attr("beta", 1.0))

    def infer(self, ctx: InferContext) -> None:
        has_c = ctx.has_input(2)
        dt = ctx.same_dtype(0, 1, 2) if has_c else ctx.same_dtype(0, 1)
        ctx.check_dtype(0, self.ALLOWED)
        if not has_c and self.node.opset < 11:
            ctx.fail("input C is required before opset 11")
        sa, sb = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        if len(sa) != 2 or len(sb) != 2:
            ctx.fail(f"A and B must be matrices, got shapes {list(sa)} and {list(sb)}")
        m, k = (sa[1], sa[0]) if self.trans_a else sa
        k2, n = (sb[1], sb[0]) if self.trans_b else sb
        if k != k2:
            ctx.fail(f"shapes {list(sa)} (transA={int(self.trans_a)}) and {list(sb)} "
                     f"(transB={int(self.trans_b)}) cannot be multiplied")
        geo = [0] * 11
        if has_c:
            sc = tuple(ctx.shape(2))
            if len(sc) > 2 or any(d not in (1, e) for d, e in zip(sc[::-1], (n, m))):
                ctx.fail(f"C of shape {list(sc)} does not broadcast to {[m, n]}")
            geo[_C_SI], geo[_C_SJ] = element_strides(sc, (m, n))
            geo[_HAS_C] = 1
        ctx.set_output(0, dt, (m, n))
        geo[_M], geo[_N], geo[_K] = m, n, k
        geo[_A_SI], geo[_A_SK] = (1, m) if self.trans_a else (k, 1)
        geo[_B_SK], geo[_B_SJ] = (1, k) if self.trans_b else (n, 1)
        p = _prepare(ctx, _GEMM, dt, 1, [0], [0], geo, self.alpha, self.beta)
        p.blas = _plan_blas(_BLAS_GEMM, dt, 1, [0], [0], geo, self.alpha, self.beta,
                            exact=ctx.exact)

    def absorb_relu(self, prepared) -> bool:
        return absorb_relu(prepared)

    def run(self, ctx: RunContext) -> None:
        p = ctx.prepared
        a, b = ctx.flat_in[0], ctx.flat_in[1]
        out = ctx.flat_out[0]
        c = ctx.flat_in[2] if len(ctx.flat_in) > 2 and ctx.flat_in[2] is not None else out
        if p.blas is not None:
            p.blas(a, b, c, out)
        else:
            p.fn(a, b, c, out, p.offa, p.offb, p.geo, p.alpha, p.beta, p.tasks,
                 panels_for(out.dtype, p.slots))
