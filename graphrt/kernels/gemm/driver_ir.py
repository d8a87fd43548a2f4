"""The blocked tile driver of the GEMM as machine code of its own (LLVM IR written here).

For a tile of ``rows`` x ``cols`` outputs over kk values of k, the driver walks blocks of KC
values of k (the partial sums waiting in ``out`` between blocks), packs the panels of B and
A that cannot be read in place into the scratch ``bp`` and ``ap`` (zero-padded: MR-row
panels of A, NR-column panels of B, k-major), and calls a micro-kernel of micro_ir for each
MR x NR piece, through the addresses of the table ``kt``:

    out[i*ldo + j] (+)= sum_{k in the block} a[i*a_si + k*a_sk] * b[row_k + j*b_sj]

row_k = tab[k] where ``tab`` is not empty (B's rows by a table), else k*b_sk; ``panels``: B
is laid out as microkernel.pack_panels makes it. It only decides where each piece is read
and written; every sum is the micro-kernels' (microkernel's docstring), so its bits are
theirs. The last row panel, of a height without a kernel (rows % MR), runs as two pieces
with A in place (the least kernel height of at least h - 4 rows, then its last four rows),
merged with the panel before it where it has fewer than four rows, or else through a padded
panel of A and the buffer ``cb``.

Written as numba code, the same driver took 2.0-2.8 s to compile (its many loops typed,
lowered and optimised by LLVM twice): this module is built once per element type in about
0.1 s and kept as object code in the kernel cache. Compiled code calls it through
``call_blocked`` with the address from the tile table.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..core.jit import file_tag
from ..core.objcode import compiled_object, loaded
from . import micro_ir
from .micro_ir import (EPI_ROW, FULL, HALF, HEIGHTS, I64, MASKED, MR, VBYTES, call_codegen,
                       once)

KC = 256                    # k per block: an A panel and a B panel stay in L1
MC = 8 * MR                 # rows per packed block of A (stays in L2)

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


def _emit_blocked(mod: ir.Module, name: str, fty) -> None:
    """The driver (module docstring); a line by line rendering of the rules in the
    comments."""
    fn = ir.Function(mod, _signature(fty), name)
    (a, a_si, a_sk, b, b_sk, b_sj, out, ldo, rows, cols, kk, ap, bp, cb, tab, tab_n, panels,
     e, e_si, flags, kt) = fn.args
    bl = ir.IRBuilder(fn.append_basic_block("entry"))
    x = _Code(bl)
    c, mul, add, sub = x.c, bl.mul, bl.add, bl.sub
    itemsize = 8 if isinstance(fty, ir.DoubleType) else 4
    nr = 2 * VBYTES // itemsize
    NR, cMR, zero = c(nr), c(MR), ir.Constant(fty, 0.0)
    one = c(1)
    no = ir.Constant(ir.IntType(1), 0)
    micro_fn = micro_ir._signature(fty).as_pointer()

    def micro(h, a_ptr, a_k, a_r, b_ptr, ldb, rows_at, pc, c_ptr, ldc, kc, w, e_ptr, fl):
        """The micro-kernel for h rows (MR, 8 or 4; any other: MR) and w columns."""
        form = x.pick(x.eq(w, NR), c(FULL),
                      x.pick(x.le(mul(w, c(itemsize)), VBYTES), c(HALF), c(MASKED)))
        height = x.pick(x.eq(h, 8), c(1), x.pick(x.eq(h, 4), c(2), c(0)))
        slot = add(mul(add(mul(form, c(2)), bl.zext(rows_at, I64)), c(len(HEIGHTS))), height)
        target = bl.inttoptr(bl.load(bl.gep(kt, [slot])), micro_fn)
        bl.call(target, [a_ptr, a_k, a_r, b_ptr, ldb, bl.gep(tab, [pc]), c_ptr, ldc, kc,
                         bl.zext(x.lt(c(0), pc), I64), w, e_ptr, e_si, fl])

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


def _name(dtype: np.dtype) -> str:
    return f"graphrt_blocked_{dtype.name}"


def module_text(dtype: np.dtype) -> str:
    """The driver's LLVM IR for ``dtype`` (unoptimised)."""
    mod = ir.Module(name=_name(dtype))
    mod.triple = micro_ir.llb.get_process_triple()
    _emit_blocked(mod, _name(dtype), ir.DoubleType() if dtype == np.float64 else ir.FloatType())
    return str(mod)


def _load(dtype: np.dtype) -> int:
    obj = compiled_object(f"blocked-{dtype.name}",
                          [SOURCE_TAG, micro_ir.SOURCE_TAG, dtype.name, str(VBYTES)],
                          lambda: module_text(dtype), "gemm")
    return int(loaded(obj, [_name(dtype)])[0])


_LOCK = threading.Lock()
_ADDRESSES: dict = {}


def address(dtype) -> int:
    """The driver's address for ``dtype`` (float32 or float64), loaded once per process."""
    return once(_ADDRESSES, _LOCK, (np.dtype(dtype),), _load)


@intrinsic
def call_blocked(typingctx, addr, a, ao, a_si, a_sk, b, bo, b_sk, b_sj, out, oo, ldo, rows,
                 cols, kk, ap, bp, cb, tab, tab_n, panels, e, e_off, e_si, flags, kt):
    """The driver at ``addr`` on a[ao:], b[bo:], out[oo:], e[e_off:], the scratch ap, bp, cb,
    the row table tab (int64, tab_n of it used: 0 for none) and the tile table kt (arrays of
    the element type; the other arguments integers or booleans)."""
    sig = types.void(addr, a, ao, a_si, a_sk, b, bo, b_sk, b_sj, out, oo, ldo, rows, cols,
                     kk, ap, bp, cb, tab, tab_n, panels, e, e_off, e_si, flags, kt)
    layout = [(1, 2), 3, 4, (5, 6), 7, 8, (9, 10), 11, 12, 13, 14, (15, None), (16, None),
              (17, None), (18, None), 19, 20, (21, 22), 23, 24, (25, None)]
    codegen = call_codegen(lambda context, sig: _signature(
        context.get_value_type(sig.args[1].dtype)), layout)
    return sig, codegen
