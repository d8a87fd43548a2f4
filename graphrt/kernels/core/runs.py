"""Runs of elements copied or zeroed, for kernels that move data in short pieces (im2col,
pooling rows, transposes).

dst[d0 + j] = src[s0 + j * step] for 0 <= j < n, and dst[d0 + j] = 0 for 0 <= j < n.

The indices are unsigned on purpose: numba wraps a negative signed index around (adds the
length), and that check, which LLVM cannot drop when it cannot prove the index non-negative,
keeps these loops scalar. With unsigned indices they vectorise (about ten times faster for
runs of 56 float32). Callers pass n <= 0 for nothing to do.

A vectorised loop still leaves a short run (under the 64 elements LLVM's loop takes at a
time) to its scalar remainder: unit-stride copies therefore move a vector register at a time,
the last piece under a lane mask (``_piece``: llvm.masked.load/store, which never touch the
masked-off lanes), so a run of 14 float32 is one masked move. Both are inlined into their
callers (numba's inline="always"): a call, with its array arguments, cost several times a
short run's move.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..gemm.microkernel import VBYTES
from .jit import file_tag

# names the kernels that inline this module's intrinsics (numba's cache does not follow
# their code generation to this file)
SOURCE_TAG = file_tag(__file__)


def _masked_io(context, builder, arr_ty, arr, at, lanes, m, first=0):
    """(vector type, pointer to arr[at], mask of lanes j with first + j < m, load, store);
    load and store move the masked lanes, or with ``whole`` every lane by a plain move."""
    ety = context.get_data_type(arr_ty.dtype)
    size = context.get_abi_sizeof(ety)
    vty = ir.VectorType(ety, lanes)
    i64, i32 = ir.IntType(64), ir.IntType(32)
    wide = ir.VectorType(i64, lanes)
    mv = builder.insert_element(ir.Constant(wide, ir.Undefined), m, ir.Constant(i32, 0))
    mv = builder.shuffle_vector(mv, ir.Constant(wide, ir.Undefined),
                                ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))
    mask = builder.icmp_signed("<", ir.Constant(wide, [first + j for j in range(lanes)]), mv)
    kind = f"v{lanes}{'f' if isinstance(ety, (ir.FloatType, ir.DoubleType)) else 'i'}{size * 8}"
    mty = ir.VectorType(ir.IntType(1), lanes)
    pty = vty.as_pointer()
    load = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vty, [pty, i32, mty, vty]), f"llvm.masked.load.{kind}.p0")
    store = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [vty, pty, i32, mty]),
        f"llvm.masked.store.{kind}.p0")
    ptr = builder.bitcast(builder.gep(context.make_array(arr_ty)(context, builder, arr).data,
                                      [at]), pty)
    align = ir.Constant(i32, size)

    def do_load(whole=False):
        if whole:
            return builder.load(ptr, align=size)
        return builder.call(load, [ptr, align, mask, ir.Constant(vty, ir.Undefined)])

    def do_store(v, whole=False):
        if whole:
            builder.store(v, ptr, align=size)
        else:
            builder.call(store, [v, ptr, align, mask])

    return vty, ptr, mask, do_load, do_store


def _whole_or_part(builder, m, lanes, emit):
    """``emit(True)`` where m >= lanes (every lane live: plain vector moves serve), else
    ``emit(False)`` (masked moves). A masked store costs tens of cycles on AVX2 cores of
    AMD's Zen 1-3 (vmaskmovps to memory is microcoded) even with every lane set; only a
    run's last piece takes it."""
    with builder.if_else(builder.icmp_signed(">=", m, ir.Constant(m.type, lanes))) as \
            (whole, part):
        for block, all_lanes in ((whole, True), (part, False)):
            with block:
                emit(all_lanes)


def _lanes(context, arr_ty) -> int:
    return max(1, VBYTES // context.get_abi_sizeof(context.get_data_type(arr_ty.dtype)))


@intrinsic
def _piece(typingctx, dst, d, src, s, m):
    """dst[d + j] = src[s + j] for j < min(m, LANES) (LANES = one vector register of the
    element type), one masked load and store; returns LANES. Both arrays of one type."""
    if dst.dtype != src.dtype:
        return None
    sig = types.int64(dst, types.uint64, src, types.uint64, types.int64)

    def codegen(context, builder, sig, args):
        dst_a, d_, src_a, s_, m_ = args
        lanes = _lanes(context, sig.args[0])
        load = _masked_io(context, builder, sig.args[2], src_a, s_, lanes, m_)[3]
        store = _masked_io(context, builder, sig.args[0], dst_a, d_, lanes, m_)[4]
        _whole_or_part(builder, m_, lanes, lambda all_lanes: store(load(all_lanes), all_lanes))
        return ir.Constant(ir.IntType(64), lanes)

    return sig, codegen


_piece.hashed_with = (SOURCE_TAG,)


@intrinsic
def _deal(typingctx, dst, d0, d1, src, s, m):
    """For j < min(m, 2 LANES): src[s + j] to dst[d0 + j / 2] (j even) or dst[d1 + j // 2]
    (j odd): two masked loads, two shuffles, two masked stores; returns 2 LANES."""
    if dst.dtype != src.dtype:
        return None
    sig = types.int64(dst, types.uint64, types.uint64, src, types.uint64, types.int64)

    def codegen(context, builder, sig, args):
        dst_a, d0_, d1_, src_a, s_, m_ = args
        lanes = _lanes(context, sig.args[0])
        i32, i64 = ir.IntType(32), ir.IntType(64)
        loads = [_masked_io(context, builder, sig.args[3], src_a, s_, lanes, m_)[3],
                 _masked_io(context, builder, sig.args[3], src_a,
                            builder.add(s_, ir.Constant(i64, lanes)), lanes, m_, lanes)[3]]
        halves = []
        for parity, d_ in ((0, d0_), (1, d1_)):
            # lane j of this half is element 2j + parity: live while 2j + parity < m
            m2 = builder.sdiv(builder.add(m_, ir.Constant(i64, 1 - parity)), ir.Constant(i64, 2))
            halves.append((ir.Constant(ir.VectorType(i32, lanes),
                                       [2 * j + parity for j in range(lanes)]),
                           _masked_io(context, builder, sig.args[0], dst_a, d_, lanes, m2)[4]))

        def deal(all_lanes):
            lo, hi = (load(all_lanes) for load in loads)
            for pick, store in halves:
                store(builder.shuffle_vector(lo, hi, pick), all_lanes)

        _whole_or_part(builder, m_, 2 * lanes, deal)
        return ir.Constant(i64, 2 * lanes)

    return sig, codegen


_deal.hashed_with = (SOURCE_TAG,)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def copy_run(dst, d0, src, s0, n, step):
    if n <= 0:
        return
    d = np.uint64(d0)
    s = np.uint64(s0)
    if step == 1:
        j = 0
        while j < n:
            j += _piece(dst, d + np.uint64(j), src, s + np.uint64(j), n - j)
    else:
        st = np.uint64(step)
        for j in range(np.uint64(n)):
            dst[d + j] = src[s + j * st]


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def deal_run(dst, d0, d1, src, s0, n):
    """dst[d0 + j] = src[s0 + 2j] and dst[d1 + j] = src[s0 + 2j + 1] over the n elements
    src[s0:s0 + n]: a stride-2 split into its two phases, a vector pair at a time."""
    j = 0
    while j < n:
        k = np.uint64(j // 2)
        j += _deal(dst, np.uint64(d0) + k, np.uint64(d1) + k, src, np.uint64(s0 + j), n - j)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def zero_run(dst, d0, n):
    if n <= 0:
        return
    d = np.uint64(d0)
    for j in range(np.uint64(n)):
        dst[d + j] = 0
