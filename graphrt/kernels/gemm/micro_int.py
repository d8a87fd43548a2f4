"""The integer product of MatMulInteger-like operators on x86: 16-bit operands, pairs of
products added by the CPU's multiply-add instruction (pmaddwd), sums in int32.

    C[i, j] = sum over k of A[i, k] * B[k, j]      A, B int16 (8-bit values minus their zero
                                                    points: |A|, |B| <= 255), C int32

Every product and sum is an exact integer (|C| <= 255 * 255 * K < 2**31 for K below 33,025),
so the order does not matter and the result is the int32 product's, in both modes and at
any thread count.

Layouts, padded with zeros so that every tile is full (``pack_a``, ``pack_b``):
- A: rows of Kp = K rounded up to even int16, Mp = M rounded up to ROWS rows;
- B: for each pair of rows (2p, 2p + 1) of B, Np = N rounded up to NR columns, each column's
  two values side by side (b[2p, j], b[2p + 1, j]): one vector load gives a pair of rows
  for LANES columns.
A tile is ROWS rows by NR = 2 * LANES columns of int32 accumulators (AVX2: 6 x 16 in twelve
registers; AVX-512: 12 x 32): for each pair p, A's two values of row r, broadcast as one
32-bit word, times a vector of B's pairs, through pmaddwd, added to the row's accumulators.
The tile kernel is LLVM IR of this module's own, compiled once and kept in graphrt's kernel
cache like the float micro-kernels (micro_ir.py), and called through its address.

On CPUs with AVX512-VNNI (``VNNI``) a second form takes bytes: one operand unsigned (the
8-bit input plus 128 when it is int8), the other signed (constant weights minus their zero
points, where every value fits int8), four products a lane added into int32 by vpdpbusd:
twice the pairs' work an instruction, and no separate add. Rows are K rounded up to 4
bytes; B's quads of rows are laid out like the pairs (four values of a column side by
side). The unsigned operand's zero point is taken out afterwards, exactly:
sum_k s[k] * (u[k] - z) = sum_k s[k] * u[k] - z * sum_k s[k] (the signed operand's sums are
made when it is packed). Which operand is broadcast is the form's: ``SIGNED_ROWS`` (A signed:
a convolution's weights) or ``UNSIGNED_ROWS`` (A unsigned: a product's activations).
"""
from __future__ import annotations

import functools
import threading

import llvmlite.binding as llb
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from ...aligned import aligned_copy
from ..core.jit import Variants, file_tag
from ..core.objcode import compiled_object, loaded, target_features
from .micro_ir import VBYTES, call_codegen, counted_loop, once

I8, I16, I32, I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
LANES = VBYTES // 4             # int32 accumulators per vector
NR = 2 * LANES                  # columns per tile
MAX_K = 33_024                  # 255 * 255 * K stays below 2**31
NAME = "graphrt_int16_tile"
_PMADD = {16: "llvm.x86.sse2.pmadd.wd", 32: "llvm.x86.avx2.pmadd.wd",
          64: "llvm.x86.avx512.pmaddw.d.512"}
AVAILABLE = llb.get_process_triple().startswith("x86_64") and VBYTES in _PMADD
PAIRS, SIGNED_ROWS, UNSIGNED_ROWS = "int16", "s8-rows", "u8-rows"   # the tile forms
STEP = {PAIRS: 2, SIGNED_ROWS: 4, UNSIGNED_ROWS: 4}     # k values a 32-bit word holds
# rows a tile: 2 * rows accumulators beside B's two vectors and a broadcast (AVX-512 has 32
# registers); the byte forms take 8, a divisor of the channel counts networks have (12 left
# a quarter of a 64-row product's last tile empty) at the same throughput
ROWS = {PAIRS: 12 if VBYTES == 64 else 6, SIGNED_ROWS: 8, UNSIGNED_ROWS: 8}

SOURCE_TAG = file_tag(__file__)


@functools.cache
def vnni() -> bool:
    """Whether the byte forms run here: AVX-512 with VNNI in numba's target (a forced
    portable target has neither)."""
    return AVAILABLE and VBYTES == 64 and "avx512vnni" in target_features()


def _signature(form: str) -> ir.FunctionType:
    e = (I16 if form == PAIRS else I8).as_pointer()
    #                            a  lda  b  ldb  c                  ldc  steps
    return ir.FunctionType(ir.VoidType(), [e, I64, e, I64, I32.as_pointer(), I64, I64])


def _name(form: str) -> str:
    return NAME if form == PAIRS else f"graphrt_int8_tile_{form[:2]}"


def module_text(form: str = PAIRS) -> str:
    """One ROWS[form] x NR tile: c[r*ldc + j] = sum over p < steps, t < STEP of
    a[r*lda + STEP*p + t] * b[p*ldb + STEP*j + t] (int16 pairs through pmaddwd, or bytes
    through vpdpbusd: A's signed with SIGNED_ROWS, else B's)."""
    step, mr = STEP[form], ROWS[form]
    mod = ir.Module(name=_name(form))
    mod.triple = llb.get_process_triple()
    fn = ir.Function(mod, _signature(form), _name(form))
    a, lda, b, ldb, c, ldc, steps = fn.args
    vi32 = ir.VectorType(I32, LANES)
    if form == PAIRS:
        vop = ir.VectorType(I16, 2 * LANES)
        pmadd = ir.Function(mod, ir.FunctionType(vi32, [vop, vop]), _PMADD[VBYTES])
    else:
        dot = ir.Function(mod, ir.FunctionType(vi32, [vi32] * 3),
                          "llvm.x86.avx512.vpdpbusd.512")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(vi32, [0] * LANES)
    p, accs, finish = counted_loop(builder, steps, [zero] * (mr * 2))
    brow = builder.gep(b, [builder.mul(p, ldb)])
    bv = [builder.load(builder.bitcast(builder.gep(brow, [ir.Constant(I64, h * step * LANES)]),
                                       vi32.as_pointer()), align=1) for h in range(2)]
    undef = ir.Constant(vi32, ir.Undefined)
    splat = ir.Constant(ir.VectorType(I32, LANES), [0] * LANES)
    at_p = builder.mul(p, ir.Constant(I64, step))
    new = []
    for r in range(mr):
        at = builder.gep(a, [builder.add(builder.mul(lda, ir.Constant(I64, r)), at_p)])
        word = builder.load(builder.bitcast(at, I32.as_pointer()), align=1)
        word = builder.shuffle_vector(builder.insert_element(undef, word, ir.Constant(I32, 0)),
                                      undef, splat)
        for h in range(2):
            if form == PAIRS:
                new.append(builder.add(accs[2 * r + h], builder.call(
                    pmadd, [builder.bitcast(word, vop), builder.bitcast(bv[h], vop)])))
            else:       # vpdpbusd(acc, unsigned bytes, signed bytes)
                u, s_ = (bv[h], word) if form == SIGNED_ROWS else (word, bv[h])
                new.append(builder.call(dot, [accs[2 * r + h], u, s_]))
    outs = finish(new)
    for r in range(mr):
        row = builder.gep(c, [builder.mul(ldc, ir.Constant(I64, r))])
        for h in range(2):
            ptr = builder.bitcast(builder.gep(row, [ir.Constant(I64, h * LANES)]),
                                  vi32.as_pointer())
            builder.store(outs[2 * r + h], ptr, align=4)
    builder.ret_void()
    return str(mod)


_TABLE: dict = {}
_LOCK = threading.Lock()


def _load(form):
    return loaded(compiled_object(f"{form}-tile", [SOURCE_TAG, str(VBYTES), form],
                                  lambda: module_text(form), "gemm"), [_name(form)])


def address(form: str = PAIRS) -> int:
    """The address of the tile kernel of ``form``, loaded once per process."""
    return int(once(_TABLE, _LOCK, (form,), _load)[0])


@intrinsic
def tile(typingctx, addr, a, a_off, lda, b, b_off, ldb, c, c_off, ldc, steps):
    """One tile (module_text) of the kernel at ``addr`` on a[a_off:], b[b_off:]
    (int16, or 8-bit for the byte forms) into c[c_off:] (int32)."""
    sig = types.void(addr, a, a_off, lda, b, b_off, ldb, c, c_off, ldc, steps)
    form = PAIRS if a.dtype.bitwidth == 16 else SIGNED_ROWS
    codegen = call_codegen(lambda context, sig: _signature(form),
                           [(1, 2), 3, (4, 5), 6, (7, 8), 9, 10])
    return sig, codegen


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def pack_a(x, zp, m, k, mp, kp, out):
    """out (mp x kp int16) = x (m x k, 8-bit) minus row i's zero point (zp[0] for one value,
    else zp[i % zp.size]: per row of each batch entry); zeros pad. (Rows are slices indexed
    from 0: through i * kp + q numba keeps its negative-index test and the loop scalar.)"""
    nz = zp.size
    for i in range(mp):
        row = out[i * kp:(i + 1) * kp]
        row[:] = 0
        if i < m:
            z = np.int16(zp[0] if nz == 1 else zp[i % nz])
            src = x[i * k:(i + 1) * k]
            for q in range(k):
                row[q] = np.int16(src[q]) - z


def shifted_b(b: np.ndarray, zp: np.ndarray | None, k: int, n: int) -> np.ndarray:
    """B (k x n, 8-bit) minus its per-column or single zero point, as int16."""
    z = np.zeros(1, np.int16) if zp is None else np.asarray(zp, np.int16).reshape(-1)
    return b.reshape(k, n).astype(np.int16) - z


def fits_int8(shifted: np.ndarray) -> bool:
    """Whether every value (8-bit values minus zero points) fits the byte forms' signed
    operand."""
    return shifted.size == 0 or (int(shifted.min()) >= -128 and int(shifted.max()) <= 127)


def _words(wide: np.ndarray, step: int) -> np.ndarray:
    """``wide`` (Kp x Np) laid out as words of ``step`` rows: for each group of ``step``
    rows, every column's ``step`` values side by side (aligned, flat)."""
    kp, np_ = wide.shape
    return aligned_copy(wide.reshape(kp // step, step, np_).transpose(0, 2, 1)).reshape(-1)


def pack_b(b: np.ndarray, zp: np.ndarray | None, k: int, n: int) -> tuple[np.ndarray, int]:
    """B (k x n, 8-bit) minus its per-column or single zero point, laid out as pairs of rows
    (see the module docstring); returns (the int16 array, its padded column count Np)."""
    kp, np_ = k + (k & 1), -(-n // NR) * NR
    wide = np.zeros((kp, np_), np.int16)
    wide[:k, :n] = shifted_b(b, zp, k, n)
    return _words(wide, 2), np_


def _product(addr, a, b, c, mr, mp, kp, np_, step, tiles_n, by_columns, tiles):
    """c (mp x np_) = a @ b (rows of kp values, ``step`` a word: STEP of the tile's form),
    one mr x NR tile (ROWS of the form) a task, ``tiles`` = (mp / mr) * tiles_n; tasks walk
    a row of tiles (by_columns False: A's mr rows stay in cache while B streams) or a column
    (True: B's NR columns stay while A, the smaller operand there, is read from cache
    again)."""
    tiles_m = mp // mr
    for t in prange(tiles):
        if by_columns:
            i0, j0 = (t % tiles_m) * mr, (t // tiles_m) * NR
        else:
            i0, j0 = (t // tiles_n) * mr, (t % tiles_n) * NR
        tile(addr, a, i0 * kp, kp, b, step * j0, step * np_, c, i0 * np_ + j0, np_,
             kp // step)


# serial and parallel forms under names of their own (numba's cache would take one for
# the other: it keys on the function, not on the decorator's options)
PRODUCT = Variants(_product, "int16_product", parallel=True)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def unpack(c, np_, m, n, out):
    """out (m x n) = the first m rows and n columns of c (rows of np_); rows as slices, as in
    pack_a, copied by a loop: numba's slice assignment compiles its shape-mismatch message
    (string formatting, 2.9 s in a cold process)."""
    for i in range(m):
        src, dst = c[i * np_:i * np_ + n], out[i * n:(i + 1) * n]
        for j in range(n):
            dst[j] = src[j]


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def pack_a8(x, shift, m, k, mp, kq, out):
    """out (mp x kq uint8) = x (m x k, 8-bit) + shift (128 for int8 x, else 0); zeros pad;
    rows as slices, as in pack_a."""
    sh = np.int32(shift)
    for i in range(mp):
        row = out[i * kq:(i + 1) * kq]
        row[:] = 0
        if i < m:
            src = x[i * k:(i + 1) * k]
            for q in range(k):
                row[q] = np.uint8(np.int32(src[q]) + sh)


def pack_b8(b: np.ndarray, zp: np.ndarray | None, k: int, n: int):
    """B (k x n, 8-bit) minus its zero points as the signed operand of UNSIGNED_ROWS (quads
    of rows, Np = N rounded up to NR columns): (the int8 array, Np, each column's sum over k
    as int32), or None where a value of B - zp does not fit int8."""
    shifted = shifted_b(b, zp, k, n)
    if not fits_int8(shifted):
        return None
    kq, np_ = -(-k // 4) * 4, -(-n // NR) * NR
    wide = np.zeros((kq, np_), np.int8)
    wide[:k, :n] = shifted
    return _words(wide, 4), np_, wide.sum(axis=0, dtype=np.int32)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def unpack8(c, np_, m, n, zp, shift, sums, out):
    """out (m x n) = c's first m rows and n columns minus (row i's zero point + shift) times
    each column's sum of B (zp[0] for one value, else zp[i % zp.size]); rows as slices, as
    in pack_a."""
    nz = zp.size
    s = sums[:n]
    for i in range(m):
        z = np.int32(zp[0] if nz == 1 else zp[i % nz]) + np.int32(shift)
        src, dst = c[i * np_:i * np_ + n], out[i * n:(i + 1) * n]
        for j in range(n):
            dst[j] = src[j] - z * s[j]
