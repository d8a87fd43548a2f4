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

from .microkernel import VBYTES


@intrinsic
def _piece(typingctx, dst, d, src, s, m):
    """dst[d + j] = src[s + j] for j < min(m, LANES) (LANES = one vector register of the
    element type), one masked load and store; returns LANES."""
    sig = types.int64(dst, types.uint64, src, types.uint64, types.int64)

    def codegen(context, builder, sig, args):
        dst_a, d_, src_a, s_, m_ = args
        ety = context.get_data_type(sig.args[0].dtype)
        size = context.get_abi_sizeof(ety)
        lanes = max(1, VBYTES // size)
        vty = ir.VectorType(ety, lanes)
        i64, i32 = ir.IntType(64), ir.IntType(32)
        mty = ir.VectorType(ir.IntType(1), lanes)
        wide = ir.VectorType(i64, lanes)
        mv = builder.insert_element(ir.Constant(wide, ir.Undefined), m_, ir.Constant(i32, 0))
        mv = builder.shuffle_vector(mv, ir.Constant(wide, ir.Undefined),
                                    ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))
        mask = builder.icmp_signed("<", ir.Constant(wide, list(range(lanes))), mv)
        kind = f"v{lanes}{'f' if isinstance(ety, (ir.FloatType, ir.DoubleType)) else 'i'}" \
               f"{size * 8}"
        pty = vty.as_pointer()
        load = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vty, [pty, i32, mty, vty]),
            f"llvm.masked.load.{kind}.p0")
        store = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [vty, pty, i32, mty]),
            f"llvm.masked.store.{kind}.p0")
        sp = builder.bitcast(builder.gep(context.make_array(sig.args[2])(
            context, builder, src_a).data, [s_]), pty)
        dp = builder.bitcast(builder.gep(context.make_array(sig.args[0])(
            context, builder, dst_a).data, [d_]), pty)
        align = ir.Constant(i32, size)
        v = builder.call(load, [sp, align, mask, ir.Constant(vty, ir.Undefined)])
        builder.call(store, [v, dp, align, mask])
        return ir.Constant(i64, lanes)

    return sig, codegen




@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True, inline="always")
def zero_run(dst, d0, n):
    if n <= 0:
        return
    d = np.uint64(d0)
    for j in range(np.uint64(n)):
        dst[d + j] = 0
