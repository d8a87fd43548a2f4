"""The GEMM's tile product as machine code of its own (LLVM IR written here): the entry
that compiled kernels call through its address (microkernel.call_tile), its few-rows paths
and the blocked driver.

    out[oo + i*ldo + j] = sum_k a[ao + i*a_si + k*a_sk] * b[bo + row_k + j*b_sj]
                          (i < rows, j < cols; row_k = tab[k] where the row table ``tab``
                          is not empty, else k*b_sk)

Every sum is a micro-kernel's (micro_ir; microkernel's docstring: one chain over k
ascending per element), so the bits depend only on the element's row, column and K. The
blocked driver walks blocks of KC values of k (the partial sums waiting in ``out`` between
blocks), packs the panels of B and A that cannot be read in place into scratch carved from
the caller's work row (zero-padded: MR-row panels of A, NR-column panels of B, k-major; B
given as microkernel.pack_panels lays it out is read in place), and calls a micro-kernel for
each MR x NR piece through the addresses of the table ``kt``. The last row panel, of a
height without a kernel (rows % MR), runs as two pieces with A in place (the least kernel
height of at least h - 4 rows, then its last four rows), merged with the panel before it
where it has fewer than four rows, or else through a padded panel of A and an edge buffer.
Tiles of fewer than FEW_ROWS rows take a path of their own where one fits (_emit_entry):
the same operations, so the same bits, faster.

Written as numba code, this took about 4.5 s to compile in a cold process (the blocked
driver alone 2.0-2.8 s: its many loops typed, lowered and optimised by LLVM twice; the
entries, _dot_rows and the micro-kernel dispatcher the rest): this module is built once
per element type in about 0.3 s and kept as object code in the kernel cache.
"""
from __future__ import annotations

import contextlib
import os
import threading

import numpy as np
from llvmlite import ir

from ..core.jit import file_tag
from ..core.objcode import compiled_object, loaded, object_path
from . import micro_ir
from .micro_ir import (EPI_ROW, FULL, FUSED_EPILOGUE, GEMV, HALF, HEIGHTS, I64, MASKED, MR,
                       VBYTES, counted_loop, once)

KC = 256                    # k per block: an A panel and a B panel stay in L1
MC = 8 * MR                 # rows per packed block of A (stays in L2)
NC_BYTES = 1 << 19          # a packed block of B (KC x NC) stays in L2
FEW_ROWS = 4                # fewer rows: the few-rows paths (_emit_entry)

SOURCE_TAG = file_tag(__file__)


def _signature(fty) -> ir.FunctionType:
    p, t = fty.as_pointer(), I64.as_pointer()
    #                             a  a_si a_sk b  b_sk b_sj out ldo rows cols kk
    return ir.FunctionType(ir.VoidType(), [p, I64, I64, p, I64, I64, p, I64, I64, I64, I64,
                                           p, p, p, t, I64, I64, p, I64, I64, t])
    #                                      ap bp cb tab tab_n panels e e_si flags kt


class _Code:
    """Structured code over an IRBuilder: int64 variables as stack slots (the optimiser
    keeps them in registers), counted loops and branches."""

    def __init__(self, builder: ir.IRBuilder):
        self.b = builder

    @staticmethod
    def c(v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    def var(self, init) -> ir.AllocaInstr:
        with self.b.goto_entry_block():
            slot = self.b.alloca(init.type)
        self.b.store(init, slot)
        return slot

    @contextlib.contextmanager
    def loop(self, start, stop, step=None):
        """for i in range(start, stop, step) (step > 0), the body under the ``with``."""
        b = self.b
        i = self.var(start)
        head = b.append_basic_block("head")
        body = b.append_basic_block("body")
        end = b.append_basic_block("end")
        b.branch(head)
        b.position_at_end(head)
        iv = b.load(i)
        b.cbranch(b.icmp_signed("<", iv, stop), body, end)
        b.position_at_end(body)
        yield iv
        b.store(b.add(iv, self.c(1) if step is None else step), i)
        b.branch(head)
        b.position_at_end(end)

    def min(self, x, y):
        return self.b.select(self.b.icmp_signed("<", x, y), x, y)

    def pick(self, cond, x, y):
        return self.b.select(cond, x, y)

    def eq(self, x, v):
        return self.b.icmp_signed("==", x, v if isinstance(v, ir.Value) else self.c(v))

    def lt(self, x, y):
        return self.b.icmp_signed("<", x, y if isinstance(y, ir.Value) else self.c(y))

    def le(self, x, y):
        return self.b.icmp_signed("<=", x, y if isinstance(y, ir.Value) else self.c(y))

    def any(self, *conds):
        out = conds[0]
        for c in conds[1:]:
            out = self.b.or_(out, c)
        return out

    def all(self, *conds):
        out = conds[0]
        for c in conds[1:]:
            out = self.b.and_(out, c)
        return out

    def at(self, ptr, *offsets):
        """ptr + the sum of ``offsets``."""
        off = offsets[0]
        for o in offsets[1:]:
            off = self.b.add(off, o)
        return self.b.gep(ptr, [off])

    def copy(self, dst, d_row, d_col, src, s_row, s_col, rows_lo, rows, cols):
        """dst[ii*d_row + jj*d_col] = src[ii*s_row + jj*s_col] for rows_lo <= ii < rows,
        jj < cols."""
        b = self.b
        with self.loop(rows_lo, rows) as ii:
            with self.loop(self.c(0), cols) as jj:
                b.store(b.load(self.at(src, b.mul(ii, s_row), b.mul(jj, s_col))),
                        self.at(dst, b.mul(ii, d_row), b.mul(jj, d_col)))


def _itemsize(fty) -> int:
    return 8 if isinstance(fty, ir.DoubleType) else 4


def _micro(x: _Code, fty, kt, h, a, a_k, a_r, b, ldb, rows_at, tab, c, ldc, kc, load, w, e,
           e_si, flags) -> None:
    """A call of the micro-kernel of ``kt`` for h rows (MR, 8 or 4; any other: MR) and w
    columns (w = NR: a full tile; else the first w, in one vector where they fit), B's rows
    by ``tab`` (rows_at, an i1) or ldb apart (micro_ir's signature)."""
    bl, k = x.b, x.c
    itemsize = _itemsize(fty)
    nr = k(2 * VBYTES // itemsize)
    form = x.pick(x.eq(w, nr), k(FULL),
                  x.pick(x.le(bl.mul(w, k(itemsize)), VBYTES), k(HALF), k(MASKED)))
    height = x.pick(x.eq(h, 8), k(1), x.pick(x.eq(h, 4), k(2), k(0)))
    slot = bl.add(bl.mul(bl.add(bl.mul(form, k(2)), bl.zext(rows_at, I64)), k(len(HEIGHTS))),
                  height)
    target = bl.inttoptr(bl.load(bl.gep(kt, [slot])), micro_ir._signature(fty).as_pointer())
    bl.call(target, [a, a_k, a_r, b, ldb, tab, c, ldc, kc, load, w, e, e_si, flags])


def _emit_blocked(mod: ir.Module, name: str, fty) -> None:
    """The blocked driver (module docstring) on a tile whose operands start at a, b, out
    and e (the epilogue's operand; its ``flags`` applied with the last block of k), the
    scratch ap, bp and cb carved by the entry."""
    fn = ir.Function(mod, _signature(fty), name)
    (a, a_si, a_sk, b, b_sk, b_sj, out, ldo, rows, cols, kk, ap, bp, cb, tab, tab_n, panels,
     e, e_si, flags, kt) = fn.args
    bl = ir.IRBuilder(fn.append_basic_block("entry"))
    x = _Code(bl)
    c, mul, add, sub = x.c, bl.mul, bl.add, bl.sub
    itemsize = _itemsize(fty)
    nr = 2 * VBYTES // itemsize
    NR, cMR, zero = c(nr), c(MR), ir.Constant(fty, 0.0)
    one = c(1)
    no = ir.Constant(ir.IntType(1), 0)

    def micro(h, a_ptr, a_k, a_r, b_ptr, ldb, rows_at, pc, c_ptr, ldc, kc, w, e_ptr, fl):
        _micro(x, fty, kt, h, a_ptr, a_k, a_r, b_ptr, ldb, rows_at, bl.gep(tab, [pc]), c_ptr,
               ldc, kc, bl.zext(x.lt(c(0), pc), I64), w, e_ptr, e_si, fl)

    table = x.lt(c(0), tab_n)
    in_panels = bl.icmp_signed("!=", panels, c(0))
    # B's rows are read in place where its columns are contiguous (only edge panels are
    # packed); A's rows where its k is contiguous (only edge panels of other heights packed)
    direct = x.eq(b_sj, 1)
    direct_a = x.eq(a_sk, 1)
    npan = bl.sdiv(add(cols, c(nr - 1)), NR)
    tail = bl.srem(rows, cMR)
    merge = x.all(direct_a, x.lt(c(0), tail), x.lt(tail, 4), x.lt(cMR, rows))
    padded = x.all(bl.not_(x.any(x.eq(tail, 0), x.eq(tail, 8), x.eq(tail, 4))),
                   x.any(bl.not_(direct_a), x.all(x.lt(tail, 4), bl.not_(merge))))
    with x.loop(c(0), kk, c(KC)) as pc:
        kc = x.min(c(KC), sub(kk, pc))
        first_block = x.eq(pc, 0)
        # the B panels not read in place, packed
        with x.loop(c(0), npan) as jp:
            j0 = mul(jp, NR)
            w = x.min(NR, sub(cols, j0))
            skip = x.any(in_panels, x.all(direct, x.any(x.eq(w, NR), bl.not_(padded))))
            with bl.if_then(bl.not_(skip)):
                base = mul(mul(jp, kc), NR)
                with x.loop(c(0), kc) as k:
                    row = x.var(mul(add(pc, k), b_sk))
                    with bl.if_then(table):
                        bl.store(bl.load(bl.gep(tab, [add(pc, k)])), row)
                    d = add(base, mul(k, NR))
                    src = x.at(b, bl.load(row), mul(j0, b_sj))
                    x.copy(bl.gep(bp, [d]), c(0), one, src, c(0), b_sj, c(0), one, w)
                    with x.loop(w, NR) as jj:
                        bl.store(zero, x.at(bp, d, jj))
        # A read in place needs no L2 block of its rows: all rows share each B panel while
        # it is in L1 (only the last panel may be packed, into the scratch's first)
        with x.loop(c(0), rows, x.pick(direct_a, rows, c(MC))) as ic:
            mc = x.pick(direct_a, sub(rows, ic), x.min(c(MC), sub(rows, ic)))
            mpan = bl.sdiv(add(mc, c(MR - 1)), cMR)
            with x.loop(c(0), mpan) as ip:
                i0 = add(ic, mul(ip, cMR))
                h = x.min(cMR, sub(rows, i0))
                with bl.if_then(bl.not_(x.all(direct_a, x.any(x.le(c(4), h), merge)))):
                    base = x.pick(direct_a, c(0), mul(mul(ip, kc), cMR))
                    with x.loop(c(0), kc) as k:
                        d = add(base, mul(k, cMR))
                        src = x.at(a, mul(i0, a_si), mul(add(pc, k), a_sk))
                        x.copy(bl.gep(ap, [d]), one, c(0), src, a_si, c(0), c(0), h, one)
                        with x.loop(h, cMR) as ii:
                            bl.store(zero, x.at(ap, d, ii))
            with x.loop(c(0), npan) as jp:
                j0 = mul(jp, NR)
                w = x.min(NR, sub(cols, j0))
                with x.loop(c(0), x.pick(merge, sub(mpan, one), mpan)) as ip:
                    i0 = add(ic, mul(ip, cMR))
                    h = x.pick(x.all(merge, x.eq(ip, sub(mpan, c(2)))), sub(rows, i0),
                               x.min(cMR, sub(rows, i0)))
                    co = add(mul(i0, ldo), j0)
                    # (eight rows have a kernel of their own only where 16 accumulators leave
                    # registers to spare: AVX-512's)
                    full_h = x.any(x.eq(h, MR), x.eq(h, 4), x.eq(h, 8) if MR > 8 else no)
                    split_h = x.all(direct_a, bl.not_(full_h), x.lt(c(4), h))
                    in_place = x.all(direct, x.any(x.eq(w, NR), full_h, split_h))
                    b_ptr = x.pick(in_panels, x.at(b, mul(j0, kk), mul(pc, NR)),
                                   x.pick(in_place,
                                          x.at(b, x.pick(table, c(0), mul(pc, b_sk)), j0),
                                          x.at(bp, mul(mul(jp, kc), NR))))
                    ldb = x.pick(in_panels, NR, x.pick(in_place, b_sk, NR))
                    rows_at = x.all(in_place, table)
                    a_here = x.all(direct_a, x.any(full_h, split_h))
                    a_ptr = x.pick(a_here, x.at(a, mul(i0, a_si), pc),
                                   x.at(ap, x.pick(direct_a, c(0), mul(mul(ip, kc), cMR))))
                    a_k = x.pick(a_here, one, cMR)
                    a_r = x.pick(a_here, a_si, one)
                    with bl.if_else(full_h) as (whole, pieces):
                        with whole:
                            # the epilogue with the last block of k, on the sums in registers
                            e_col = x.pick(bl.icmp_signed("!=", bl.and_(flags, c(EPI_ROW)),
                                                          c(0)), c(0), j0)
                            fl = x.pick(x.eq(add(pc, kc), kk), flags, c(0))
                            micro(h, a_ptr, a_k, a_r, b_ptr, ldb, rows_at, pc,
                                  bl.gep(out, [co]), ldo, kc, w,
                                  x.at(e, mul(i0, e_si), e_col), fl)
                        with pieces:
                            # a split panel: two pieces, rows both cover getting the same
                            # bits again, except where partial sums wait in out (pc > 0):
                            # there the second goes through the buffer and keeps only its
                            # new rows; a padded panel goes through the buffer
                            first = x.pick(x.le(h, 8), c(4),
                                           x.pick(x.le(h, 12), c(8), cMR) if MR > 8 else cMR)
                            with x.loop(c(0), x.pick(split_h, c(2), one)) as piece:
                                p0 = x.eq(piece, 0)
                                kh = x.pick(split_h, x.pick(p0, first, c(4)), h)
                                r0 = x.pick(split_h, x.pick(p0, c(0), sub(h, c(4))), c(0))
                                keep = x.pick(split_h, sub(first, r0), c(0))
                                n_in = x.pick(split_h, c(4), h)
                                buffered = x.any(bl.not_(split_h),
                                                 x.all(bl.not_(p0), bl.not_(first_block)))
                                here = x.at(out, co, mul(r0, ldo))
                                with bl.if_then(x.all(buffered, bl.not_(first_block))):
                                    x.copy(cb, NR, one, here, ldo, one, c(0), n_in, w)
                                micro(kh, x.at(a_ptr, mul(r0, a_r)), a_k, a_r, b_ptr, ldb,
                                      rows_at, pc, x.pick(buffered, cb, here),
                                      x.pick(buffered, NR, ldo), kc,
                                      x.pick(x.all(buffered, bl.not_(split_h)), NR, w), e,
                                      c(0))
                                with bl.if_then(buffered):
                                    x.copy(here, ldo, one, cb, NR, one, keep, n_in, w)
    bl.ret_void()


def _entry_signature(fty) -> ir.FunctionType:
    p, t = fty.as_pointer(), I64.as_pointer()
    #                    a  a_n  ao   a_si a_sk b  b_n  bo   b_sk b_sj o  o_n  oo   ldo
    return ir.FunctionType(I64, [p, I64, I64, I64, I64, p, I64, I64, I64, I64, p, I64, I64, I64,
                                 I64, I64, I64, p, I64, I64, t, I64, I64, p, I64, I64, I64, I64,
                                 t, I64])
    #                            rows cols kk w w_n exact tab t_n panels e e_n e_off e_si flags
    #                            kt k_n


def _emit_entry(mod: ir.Module, name: str, fty, driver: ir.Function) -> None:
    """The tile product (microkernel.call_tile's callee): out[oo + i*ldo + j] = A[i, :] @
    B[:, j] for i < rows, j < cols, its scratch carved from the work row ``w``; returns 1
    where it applied the epilogue (``flags``), else 0 (the caller then makes its pass).
    Tiles of fewer than FEW_ROWS rows take a few-rows path where one fits (the same bits as
    the blocked path, faster): B laid out in panels, each row by the 4-row micro-kernel
    reading it four times and storing its four equal results at one place (ldc = 0);
    B's columns contiguous in k (B transposed), eight columns' chains at a time (_dot_rows);
    B's rows contiguous, each row by the one-row product. Otherwise the blocked driver, NC
    columns at a time."""
    fn = ir.Function(mod, _entry_signature(fty), name)
    (a, _, ao, a_si, a_sk, b, _, bo, b_sk, b_sj, out, _, oo, ldo, rows, cols, kk, work, _,
     exact, tab, tab_n, panels, e, _, e_off, e_si, flags, kt, _) = fn.args
    bl = ir.IRBuilder(fn.append_basic_block("entry"))
    x = _Code(bl)
    c, mul, add, sub = x.c, bl.mul, bl.add, bl.sub
    itemsize = _itemsize(fty)
    nr = 2 * VBYTES // itemsize
    NR, zero, one = c(nr), ir.Constant(fty, 0.0), c(1)
    a0, b0, o0, e0 = bl.gep(a, [ao]), bl.gep(b, [bo]), bl.gep(out, [oo]), bl.gep(e, [e_off])
    no_table = x.eq(tab_n, 0)

    def done(value):
        """Return ``value`` (the last thing in a branch)."""
        bl.ret(c(value))

    with bl.if_then(x.eq(kk, 0)):
        with x.loop(c(0), rows) as i:
            with x.loop(c(0), cols) as j:
                bl.store(zero, x.at(o0, mul(i, ldo), j))
        done(0)
    few = x.lt(rows, FEW_ROWS)
    with bl.if_then(x.all(few, bl.icmp_signed("!=", panels, c(0)))):
        with x.loop(c(0), rows) as i:
            with x.loop(c(0), cols, NR) as j0:
                _micro(x, fty, kt, c(4), x.at(a0, mul(i, a_si)), a_sk, c(0),
                       x.at(b0, mul(j0, kk)), NR, ir.Constant(ir.IntType(1), 0), tab,
                       x.at(o0, mul(i, ldo), j0), c(0), kk, c(0), x.min(NR, sub(cols, j0)), e0,
                       e_si, c(0))
        done(0)
    with bl.if_then(x.all(few, x.eq(b_sk, 1), bl.not_(x.eq(b_sj, 1)), no_table)):
        with bl.if_else(bl.icmp_signed("!=", exact, c(0))) as (exact_mode, fast_mode):
            for mode, fused in ((exact_mode, False), (fast_mode, True)):
                with mode:
                    _dot_rows(x, fty, fused, a0, a_si, a_sk, b0, b_sj, o0, ldo, rows, cols, kk)
        done(0)
    with bl.if_then(x.all(few, x.eq(b_sj, 1), no_table)):
        gemv_fn = micro_ir._gemv_signature(fty).as_pointer()
        target = bl.inttoptr(bl.load(bl.gep(kt, [c(GEMV)])), gemv_fn)
        with x.loop(c(0), rows) as i:
            bl.call(target, [x.at(a0, mul(i, a_si)), a_sk, b0, b_sk, x.at(o0, mul(i, ldo)), kk,
                             cols])
        done(0)
    # the scratch (microkernel.carve): A's block, B's block of NC columns, the edge buffer
    kc = x.min(c(KC), kk)
    nc = c(max(1, NC_BYTES // (KC * nr * itemsize)) * nr)
    nc = x.min(nc, mul(bl.sdiv(add(cols, c(nr - 1)), NR), NR))
    mc = x.min(c(MC), mul(bl.sdiv(add(rows, c(MR - 1)), c(MR)), c(MR)))
    sa = mul(x.pick(x.lt(mc, 1), one, mc), kc)
    ncols = x.pick(x.lt(nc, nr), NR, nc)
    bp = bl.gep(work, [sa])
    cb = bl.gep(bp, [mul(kc, ncols)])
    tail = bl.srem(rows, c(MR))
    fuse = ir.Constant(ir.IntType(1), 0)
    if FUSED_EPILOGUE:
        fuse = x.all(bl.icmp_signed("!=", flags, c(0)),
                     x.any(x.eq(tail, 0), x.eq(tail, 8), x.eq(tail, 4)))
    row_bias = bl.icmp_signed("!=", bl.and_(flags, c(EPI_ROW)), c(0))
    with x.loop(c(0), cols, ncols) as jc:
        bl.call(driver, [a0, a_si, a_sk, x.at(b0, mul(jc, b_sj)), b_sk, b_sj, bl.gep(o0, [jc]),
                         ldo, rows, x.min(ncols, sub(cols, jc)), kk, work, bp, cb, tab, tab_n,
                         panels, bl.gep(e0, [x.pick(row_bias, c(0), jc)]), e_si,
                         x.pick(fuse, flags, c(0)), kt])
    bl.ret(bl.zext(fuse, I64))


def _dot_rows(x: _Code, fty, fused: bool, a, a_si, a_sk, b, b_sj, out, ldo, rows, cols, kk):
    """out[i*ldo + j] = sum_k a[i*a_si + k*a_sk] * b[j*b_sj + k] (B's columns contiguous in
    k), each an FMA chain over k ascending from 0 (exact: a rounded multiply and a rounded
    add), eight columns in flight (an FMA's latency is about four times its rate), then the
    rest one by one."""
    bl = x.b
    c, mul, add = x.c, bl.mul, bl.add
    z = ir.Constant(fty, 0.0)
    fma = micro_ir._intrinsic(bl.module, "llvm.fma.f64" if isinstance(fty, ir.DoubleType)
                              else "llvm.fma.f32", ir.FunctionType(fty, [fty] * 3))

    def step(u, v, acc):
        return bl.call(fma, [u, v, acc]) if fused else bl.fadd(acc, bl.fmul(u, v))

    blocks = bl.sdiv(cols, c(8))
    with x.loop(c(0), rows) as i:
        arow = x.at(a, mul(i, a_si))
        orow = x.at(out, mul(i, ldo))
        with x.loop(c(0), blocks) as jb:
            j0 = mul(jb, c(8))
            cols8 = [x.at(b, mul(add(j0, c(u)), b_sj)) for u in range(8)]
            k, accs, finish = counted_loop(bl, kk, [z] * 8)
            v = bl.load(x.at(arow, mul(k, a_sk)))
            sums = finish([step(v, bl.load(bl.gep(col, [k])), s)
                           for col, s in zip(cols8, accs)])
            for u, s in enumerate(sums):
                bl.store(s, bl.gep(orow, [add(j0, c(u))]))
        with x.loop(mul(blocks, c(8)), cols) as j:
            col = x.at(b, mul(j, b_sj))
            k, (acc,), finish = counted_loop(bl, kk, [z])
            (s,) = finish([step(bl.load(x.at(arow, mul(k, a_sk))), bl.load(bl.gep(col, [k])),
                                acc)])
            bl.store(s, bl.gep(orow, [j]))


def _names(dtype: np.dtype) -> list[str]:
    """The module's functions: the tile product entry, the blocked driver."""
    return [f"graphrt_tile_{dtype.name}", f"graphrt_blocked_{dtype.name}"]


def module_text(dtype: np.dtype) -> str:
    """The entry's and the driver's LLVM IR for ``dtype`` (unoptimised)."""
    entry, blocked = _names(dtype)
    mod = ir.Module(name=blocked)
    mod.triple = micro_ir.llb.get_process_triple()
    fty = ir.DoubleType() if dtype == np.float64 else ir.FloatType()
    _emit_blocked(mod, blocked, fty)
    _emit_entry(mod, entry, fty, mod.get_global(blocked))
    return str(mod)


def _key(dtype: np.dtype) -> tuple:
    return (f"tile-{dtype.name}", [SOURCE_TAG, micro_ir.SOURCE_TAG, dtype.name, str(VBYTES)],
            "gemm")


def _load(dtype: np.dtype) -> np.ndarray:
    name, parts, folder = _key(dtype)
    return loaded(compiled_object(name, parts, lambda: module_text(dtype), folder),
                  _names(dtype))


def cached(dtype: np.dtype) -> bool:
    """Whether the kernel cache holds the module's object code for ``dtype``."""
    return os.path.exists(object_path(*_key(dtype)))


_LOCK = threading.Lock()
_ADDRESSES: dict = {}


def addresses(dtype) -> np.ndarray:
    """(the entry's, the driver's address) for ``dtype`` (float32 or float64), loaded once
    per process (built and cached the first time: about 0.3 s)."""
    return once(_ADDRESSES, _LOCK, (np.dtype(dtype),), _load)
