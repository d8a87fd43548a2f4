"""The GEMM micro-kernels as machine code of their own, reached through addresses.

    c[r*ldc + j] = (load ? c[r*ldc + j] : 0) + sum_{k < kc} a[k*a_k + r*a_r] * b[row_k + j]
                   (r < rows, j < NR, or j < w for an edge), row_k = k*ldb or tab[k]

then Gemm's epilogue (``flags``, EPI_C / EPI_ROW / EPI_RELU) on the sums before they are
stored. Every form a tile product needs -- MR, 8 or 4 rows; full, masked (w < NR columns) or
half (w in one vector); B's rows ldb apart or by a table -- is one function of a single LLVM
module per (element type, mode), written here with llvmlite, optimised once, and kept as
object code in graphrt's kernel cache (cache.kernels_dir()/gemm, named by a hash of this file
and the target): a process loads it in milliseconds. Numba code calls a form through
``call(kernels(dtype, exact)[slot(...)], ...)``, an indirect call, so no numba function
inlines (and compiles again) any of them: before, each call site of the tile product
carried the whole family and took about 20 s to compile.

Fast mode: each step is one fused multiply-add (llvm.fma); exact mode: a multiply and an
add, each rounded, with no fast-math flags anywhere in the module, so nothing is contracted:
the operations of graphrt's blocked kernel (product._product), the same bits everywhere.
"""
from __future__ import annotations

import threading

import llvmlite.binding as llb
import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ..core.jit import file_tag
from ..core.objcode import compiled_object, loaded


def _vector_bytes() -> int:
    if numba.config.CPU_NAME:           # a forced target (e.g. "generic"): stay portable
        return 16
    feats = llb.get_host_cpu_features()
    return 64 if feats.get("avx512f") else 32 if feats.get("avx2") else 16


VBYTES = _vector_bytes()
# The kernel path, chosen once per process from the CPU's features: the vector width the
# micro-kernel (and LLVM's code for every other kernel) is built for. Fast-mode bits may
# depend on it; exact-mode bits never do.
KERNEL_PATH = {64: "avx512", 32: "avx2"}.get(VBYTES, "generic")
# Rows of accumulators: 2 * MR vector registers must fit beside 3 more (32 with AVX-512, 16
# below).
MR = 12 if VBYTES == 64 else 6
HEIGHTS = (MR, 8, 4)        # the tile heights with a kernel of their own
FULL, MASKED, HALF = range(3)
# kernels(...)[GEMV]: the one-row product (_emit_gemv), after the micro-kernels' slots
GEMV = 3 * 2 * len(HEIGHTS)
SLOTS = GEMV + 1
# the one-row product's shape: GEMV_ROWS rows of B (values of k) a pass over its row of
# sums, GEMV_VECTORS vectors of columns an iteration of that pass
GEMV_ROWS = 2
GEMV_VECTORS = 4

# The epilogue is partly x86 AVX assembly (see _epilogue); elsewhere the tile product leaves
# it to its caller's pass.
FUSED_EPILOGUE = llb.get_process_triple().startswith("x86_64") and VBYTES >= 32
if FUSED_EPILOGUE:
    llb.initialize_native_asmparser()       # (numba does not: instructions in asm need it)
# epilogue flags, applied in this order to a finished sum v
EPI_C = 1       # v = v + e[r*e_si + j] (Gemm's C with alpha = beta = 1)
EPI_RELU = 2    # v = v if not v <= 0 else 0 (NaN kept)
EPI_ROW = 4     # v = v + e[r*e_si], one value a row (a convolution's bias; never with EPI_C)

I64 = ir.IntType(64)
I32 = ir.IntType(32)

# The cached object code is named by this file's content (the generator) and the target.
SOURCE_TAG = file_tag(__file__)


@njit(nogil=True, inline="always")
def slot(form: int, table: bool, height: int) -> int:
    """Where kernels() keeps a form: FULL, MASKED or HALF columns, B's rows by a table or
    not, HEIGHTS[height] rows."""
    return (form * 2 + table) * len(HEIGHTS) + height


def _signature(fty) -> ir.FunctionType:
    p = fty.as_pointer()
    #                             a  a_k  a_r  b  ldb  tab            c  ldc  kc   load w    e  e_si flags
    return ir.FunctionType(ir.VoidType(), [p, I64, I64, p, I64, I64.as_pointer(), p, I64, I64,
                                           I64, I64, p, I64, I64])


def _intrinsic(mod, name, fnty):
    try:
        return mod.get_global(name)
    except KeyError:
        return ir.Function(mod, fnty, name)


def vector_ops(mod, fty):
    """(vector type, its lane count, llvm.fma, llvm.masked.load, llvm.masked.store) of the
    widest vectors of ``fty`` (the intrinsics declared once in ``mod``)."""
    double = isinstance(fty, ir.DoubleType)
    lanes = VBYTES // (8 if double else 4)
    vty = ir.VectorType(fty, lanes)
    pty, mty = vty.as_pointer(), ir.VectorType(ir.IntType(1), lanes)
    suffix = f"v{lanes}f{64 if double else 32}"
    return (vty, lanes,
            _intrinsic(mod, f"llvm.fma.{suffix}", ir.FunctionType(vty, [vty] * 3)),
            _intrinsic(mod, f"llvm.masked.load.{suffix}.p0",
                       ir.FunctionType(vty, [pty, I32, mty, vty])),
            _intrinsic(mod, f"llvm.masked.store.{suffix}.p0",
                       ir.FunctionType(ir.VoidType(), [vty, pty, I32, mty])))


def splat(builder, value, vty):
    """A vector of type ``vty`` with ``value`` in every lane."""
    undef = ir.Constant(vty, ir.Undefined)
    return builder.shuffle_vector(builder.insert_element(undef, value, ir.Constant(I32, 0)),
                                  undef, ir.Constant(ir.VectorType(I32, vty.count),
                                                     [0] * vty.count))


def live_lanes(builder, n, lanes, first=0):
    """The mask of lanes j with first + j < n (n an int64)."""
    wide = ir.VectorType(I64, lanes)
    return builder.icmp_signed("<", ir.Constant(wide, [first + j for j in range(lanes)]),
                               splat(builder, n, wide))


def vector_memory(builder, vty, mload, mstore, align: int):
    """(load(ptr, mask), store(v, ptr, mask)) of vectors of ``vty`` at a pointer to an
    element: masked (llvm.masked.*, lanes off the mask neither read nor written) unless
    mask is None."""
    a = ir.Constant(I32, align)
    zero = ir.Constant(vty, [0.0] * vty.count)

    def load(ptr, mask):
        ptr = builder.bitcast(ptr, vty.as_pointer())
        if mask is None:
            return builder.load(ptr, align=align)
        return builder.call(mload, [ptr, a, mask, zero])

    def store(v, ptr, mask):
        ptr = builder.bitcast(ptr, vty.as_pointer())
        if mask is None:
            builder.store(v, ptr, align=align)
        elif VBYTES == 64:
            builder.call(mstore, [v, ptr, a, mask])
        else:
            # without AVX-512 a masked store is vmaskmovps, microcoded on AMD's Zen 1-3
            # (tens of cycles even with every lane set): a whole vector takes a plain one
            mty = mask.type
            every = _intrinsic(builder.module, f"llvm.vector.reduce.and.v{mty.count}i1",
                               ir.FunctionType(ir.IntType(1), [mty]))
            with builder.if_else(builder.call(every, [mask])) as (whole, part):
                with whole:
                    builder.store(v, ptr, align=align)
                with part:
                    builder.call(mstore, [v, ptr, a, mask])
    return load, store


def _emit(mod, name, fty, rows, fused, form, table):
    """One kernel: ``rows`` rows of accumulators, two vectors of columns (one for HALF),
    masked loads and stores of C, E and B for the first w columns (MASKED, HALF)."""
    fn = ir.Function(mod, _signature(fty), name)
    a_base, a_k, a_r, b_base, ldb, t_base, c_base, ldc, kc, load, w, e_base, e_si, flags = \
        fn.args
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    vty, lanes, fma, mload, mstore = vector_ops(mod, fty)
    nv = 1 if form == HALF else 2
    masked = form != FULL
    zero_v = ir.Constant(vty, [0.0] * lanes)
    read, write = vector_memory(builder, vty, mload, mstore,
                                 8 if isinstance(fty, ir.DoubleType) else 4)
    # lane j of vector h is live when h * lanes + j < w
    masks = [live_lanes(builder, w, lanes, h * lanes) if masked else None for h in range(nv)]

    def vload(ptr, h=0):
        return read(ptr, masks[h])

    def vstore(v, ptr, h):
        write(v, ptr, masks[h])

    # initial accumulators: C's tile when ``load``, else zeros
    loading = builder.icmp_unsigned("!=", load, ir.Constant(I64, 0))
    init = []
    for r in range(rows):
        row = builder.gep(c_base, [builder.mul(ldc, ir.Constant(I64, r))])
        for h in range(nv):
            v = vload(builder.gep(row, [ir.Constant(I64, h * lanes)]), h)
            init.append(builder.select(loading, v, zero_v))
    # A's rows as groups of three, each group one pointer stepping by a_k, its rows at +0,
    # +a_r, +2*a_r (x86 addressing: base + scaled index). LLVM's loop strength reduction
    # would otherwise walk the rows with a chain of dependent adds (twelve per step of k, the
    # kernel's bottleneck); an empty asm statement hides a_r's invariance from it.
    groups = [builder.gep(a_base, [builder.mul(a_r, ir.Constant(I64, 3 * q))])
              for q in range((rows + 2) // 3)]
    k, carried, finish = counted_loop(builder, kc, init + groups)
    accs, gptr = carried[:len(init)], carried[len(init):]
    bk = builder.gep(b_base, [builder.load(builder.gep(t_base, [k])) if table
                              else builder.mul(k, ldb)])
    bv = [vload(builder.gep(bk, [ir.Constant(I64, h * lanes)]), h) for h in range(nv)]
    a_r1 = builder.asm(ir.FunctionType(I64, [I64]), "", "=r,0", [a_r], True)
    a_r2 = builder.add(a_r1, a_r1)
    new = []
    for r in range(rows):
        g, m = gptr[r // 3], r % 3
        s = builder.load(g if m == 0 else builder.gep(g, [a_r1 if m == 1 else a_r2]))
        sv = splat(builder, s, vty)
        for h in range(nv):
            if fused:
                new.append(builder.call(fma, [sv, bv[h], accs[nv * r + h]]))
            else:   # acc + a * b, two roundings (no fast-math flags: never contracted)
                new.append(builder.fadd(accs[nv * r + h], builder.fmul(sv, bv[h])))
    outs = finish(new + [builder.gep(p, [a_k]) for p in gptr])[:len(init)]
    outs = _epilogue(builder, e_base, e_si, flags, outs, rows, nv, vty, vload)
    for r in range(rows):
        row = builder.gep(c_base, [builder.mul(ldc, ir.Constant(I64, r))])
        for h in range(nv):
            vstore(outs[nv * r + h], builder.gep(row, [ir.Constant(I64, h * lanes)]), h)
    builder.ret_void()


def _gemv_signature(fty) -> ir.FunctionType:
    p = fty.as_pointer()
    #                                          a  a_k  b  ldb  c  kc   cols
    return ir.FunctionType(ir.VoidType(), [p, I64, p, I64, p, I64, I64])


def _emit_gemv(mod, name, fty, fused):
    """The one-row product c[j] = sum_{k < kc} a[k*a_k] * b[k*ldb + j] for j < cols, each
    c[j] one chain over k ascending (0, then one FMA a step; exact: a rounded multiply and a
    rounded add), as the micro-kernels and microkernel.few_rows make it: the row of sums
    waits in c, each pass over it adds GEMV_ROWS values of k, GEMV_VECTORS vectors of
    columns an iteration, then single vectors, then one masked vector for the last columns.
    Compiled once, this has none of the per-k alias checks and remainder set-up that numba's
    loop with run-time extents pays (128 x 512: 1.4 against 2.2 µs)."""
    fn = ir.Function(mod, _gemv_signature(fty), name)
    a, a_k, b, ldb, c, kc, cols = fn.args
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    vty, lanes, fma, mload, mstore = vector_ops(mod, fty)
    load, store = vector_memory(builder, vty, mload, mstore,
                                 8 if isinstance(fty, ir.DoubleType) else 4)
    zero = ir.Constant(vty, [0.0] * lanes)

    def const(v):
        return ir.Constant(I64, v)

    def at(base, off):
        return builder.gep(base, [off])

    def columns(update):
        """update(offset, mask) for each vector of columns: full blocks, single vectors,
        then the masked rest (mask None for full vectors)."""
        width = GEMV_VECTORS * lanes
        blocks = builder.udiv(cols, const(width))
        jb, _, finish = counted_loop(builder, blocks, [])
        j0 = builder.mul(jb, const(width))
        for h in range(GEMV_VECTORS):
            update(builder.add(j0, const(h * lanes)), None)
        finish([])
        done = builder.mul(blocks, const(width))
        singles = builder.udiv(builder.sub(cols, done), const(lanes))
        js, _, finish = counted_loop(builder, singles, [])
        update(builder.add(done, builder.mul(js, const(lanes))), None)
        finish([])
        last = builder.add(done, builder.mul(singles, const(lanes)))
        rest = builder.sub(cols, last)
        with builder.if_then(builder.icmp_signed(">", rest, const(0))):
            update(last, live_lanes(builder, rest, lanes))

    def add_rows(k0, count):
        """c += the products of rows k0 .. k0 + count - 1, in that order."""
        terms = []
        for u in range(count):
            k = builder.add(k0, const(u))
            x = builder.load(builder.gep(a, [builder.mul(k, a_k)]))
            terms.append((splat(builder, x, vty), builder.gep(b, [builder.mul(k, ldb)])))

        def update(off, mask):
            ptr = at(c, off)
            acc = load(ptr, mask)
            for xv, row in terms:
                v = load(at(row, off), mask)
                acc = builder.call(fma, [xv, v, acc]) if fused else \
                    builder.fadd(acc, builder.fmul(xv, v))
            store(acc, ptr, mask)
        columns(update)

    columns(lambda off, mask: store(zero, at(c, off), mask))
    passes = builder.udiv(kc, const(GEMV_ROWS))
    kp, _, finish = counted_loop(builder, passes, [])
    add_rows(builder.mul(kp, const(GEMV_ROWS)), GEMV_ROWS)
    finish([])
    k = builder.mul(passes, const(GEMV_ROWS))
    for u in range(GEMV_ROWS - 1):      # the last kc % GEMV_ROWS rows, one a pass
        ku = builder.add(k, const(u))
        with builder.if_then(builder.icmp_signed("<", ku, kc)):
            add_rows(ku, 1)
    builder.ret_void()


def counted_loop(builder, count, inits):
    """Opens ``for i in range(count)`` carrying the values ``inits``: returns (i, the carried
    values in the body, finish). ``finish(next values)`` closes the loop and leaves the
    builder after it; it returns the values after the loop (``inits`` when count <= 0)."""
    entry = builder.block
    loop = builder.append_basic_block("loop")
    done = builder.append_basic_block("done")
    builder.cbranch(builder.icmp_signed(">", count, ir.Constant(I64, 0)), loop, done)
    builder.position_at_end(loop)
    i = builder.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), entry)
    carried = []
    for v in inits:
        p = builder.phi(v.type)
        p.add_incoming(v, entry)
        carried.append(p)

    def finish(new):
        i_next = builder.add(i, ir.Constant(I64, 1))
        end = builder.block
        i.add_incoming(i_next, end)
        for p, v in zip(carried, new):
            p.add_incoming(v, end)
        builder.cbranch(builder.icmp_signed("<", i_next, count), loop, done)
        builder.position_at_end(done)
        outs = []
        for v0, v in zip(inits, new):
            out = builder.phi(v0.type)
            out.add_incoming(v0, entry)
            out.add_incoming(v, end)
            outs.append(out)
        return outs

    return i, carried, finish


def _epilogue(builder, e_base, e_si, flags, outs, rows, nv, vty, vload):
    """The values to store: ``outs`` (row-major, nv vectors a row) through the epilogue
    ``flags`` ask for: one straight-line block per combination of flags, chosen by a switch
    (flags 0: none); the bits of the product's separate epilogue pass."""
    if not FUSED_EPILOGUE:
        return outs
    lanes = vty.count
    zero = ir.Constant(vty, [0.0] * lanes)
    # Relu is assembly, so no optimiser can turn the compare and select into a max that
    # keeps -0, or drop the add of +0.
    sfx = "pd" if vty.element == ir.DoubleType() else "ps"
    relu_asm = f"vmax{sfx} $1, $2, $0\n\tvadd{sfx} $2, $0, $0"

    def relu(v):
        """max(0, v) keeping a NaN v (x86 returns the second operand), then + 0 for -0."""
        return builder.asm(ir.FunctionType(vty, [vty, vty]), relu_asm, "=&v,v,v", [v, zero],
                           False)

    before = builder.block
    after = builder.append_basic_block("store")
    switch = builder.switch(flags, after)
    incoming = [(before, outs)]
    for fl in (EPI_C, EPI_RELU, EPI_C | EPI_RELU, EPI_ROW, EPI_ROW | EPI_RELU):
        block = builder.append_basic_block(f"epilogue{fl}")
        switch.add_case(ir.Constant(I64, fl), block)
        builder.position_at_end(block)
        done = []
        for r in range(rows):
            row = builder.gep(e_base, [builder.mul(e_si, ir.Constant(I64, r))])
            if fl & EPI_ROW:
                bias = splat(builder, builder.load(row), vty)
            for h in range(nv):
                v = outs[nv * r + h]
                if fl & EPI_C:
                    v = builder.fadd(v, vload(builder.gep(row, [ir.Constant(I64, h * lanes)]), h))
                if fl & EPI_ROW:
                    v = builder.fadd(v, bias)
                if fl & EPI_RELU:
                    v = relu(v)
                done.append(v)
        incoming.append((builder.block, done))
        builder.branch(after)
    builder.position_at_end(after)
    res = []
    for i in range(len(outs)):
        p = builder.phi(vty)
        for block, vals in incoming:
            p.add_incoming(vals[i], block)
        res.append(p)
    return res


def _names(dtype: np.dtype, exact: bool) -> list[str]:
    tag = f"{dtype.name}_{'exact' if exact else 'fast'}"
    names = [""] * SLOTS
    for form, fname in ((FULL, "full"), (MASKED, "masked"), (HALF, "half")):
        for table in (False, True):
            for hi, rows in enumerate(HEIGHTS):
                names[slot.py_func(form, table, hi)] = \
                    f"graphrt_micro_{tag}_{fname}{'_table' if table else ''}_{rows}"
    names[GEMV] = f"graphrt_gemv_{tag}"
    return names


def module_text(dtype: np.dtype, exact: bool) -> str:
    """The family's LLVM IR (unoptimised)."""
    mod = ir.Module(name=f"graphrt_micro_{dtype.name}")
    mod.triple = llb.get_process_triple()
    fty = ir.DoubleType() if dtype == np.float64 else ir.FloatType()
    names = _names(dtype, exact)
    for form in (FULL, MASKED, HALF):
        for table in (False, True):
            for hi, rows in enumerate(HEIGHTS):
                _emit(mod, names[slot.py_func(form, table, hi)], fty, rows, not exact, form,
                      table)
    _emit_gemv(mod, names[GEMV], fty, not exact)
    return str(mod)


def _object(dtype: np.dtype, exact: bool) -> bytes:
    """The family's object code: from the cache, else compiled now and saved there."""
    return compiled_object(f"micro-{dtype.name}-{'exact' if exact else 'fast'}",
                           [SOURCE_TAG, dtype.name, str(exact), str(VBYTES)],
                           lambda: module_text(dtype, exact), "gemm")


_LOCK = threading.Lock()
_TABLES: dict = {}


def once(store: dict, lock, key: tuple, make):
    """store[key], made by make(*key) the first time only (under ``lock``)."""
    value = store.get(key)
    if value is None:
        with lock:
            value = store.get(key)
            if value is None:
                value = store[key] = make(*key)
    return value


def _load(dtype: np.dtype, exact: bool) -> np.ndarray:
    return loaded(_object(dtype, exact), _names(dtype, exact))


def kernels(dtype, exact: bool) -> np.ndarray:
    """The addresses of one family's kernels (int64, by slot), loaded once per process."""
    return once(_TABLES, _LOCK, (np.dtype(dtype), bool(exact)), _load)


def call_codegen(signature_of, layout):
    """The codegen of an intrinsic that calls the function at its first argument (an
    address) with the arguments ``layout`` lists: an index (that argument as an int64), or
    (array index, offset index) (a pointer into that array at that offset; None: its
    start).
    ``signature_of(context, sig)``: the callee's ir.FunctionType."""
    def codegen(context, builder, sig, args):
        def integer(i):
            return context.cast(builder, args[i], sig.args[i], types.int64)

        def at(i, off):
            data = context.make_array(sig.args[i])(context, builder, args[i]).data
            return data if off is None else builder.gep(data, [integer(off)])

        fn = builder.inttoptr(integer(0), signature_of(context, sig).as_pointer())
        builder.call(fn, [at(*x) if isinstance(x, tuple) else integer(x) for x in layout])
        return context.get_dummy_value()
    return codegen


@intrinsic
def call(typingctx, addr, a, a_off, a_k, a_r, b, b_off, ldb, tab, t_off, c, c_off, ldc, kc,
         load, w, e, e_off, e_si, flags):
    """The kernel at ``addr`` on a[a_off:], b[b_off:], tab[t_off:], c[c_off:], e[e_off:]
    (arrays of the family's element type; tab int64), the other arguments as integers."""
    sig = types.void(addr, a, a_off, a_k, a_r, b, b_off, ldb, tab, t_off, c, c_off, ldc, kc,
                     load, w, e, e_off, e_si, flags)
    layout = [(1, 2), 3, 4, (5, 6), 7, (8, 9), (10, 11), 12, 13, 14, 15, (16, 17), 18, 19]
    codegen = call_codegen(lambda context, sig: _signature(
        context.get_value_type(sig.args[1].dtype)), layout)
    return sig, codegen


@intrinsic
def gemv(typingctx, addr, a, a_off, a_k, b, b_off, ldb, c, c_off, kc, cols):
    """The one-row product at ``addr`` (kernels(...)[GEMV]) on a[a_off:], b[b_off:],
    c[c_off:] (arrays of the family's element type), the other arguments integers."""
    sig = types.void(addr, a, a_off, a_k, b, b_off, ldb, c, c_off, kc, cols)
    layout = [(1, 2), 3, (4, 5), 6, (7, 8), 9, 10]
    codegen = call_codegen(lambda context, sig: _gemv_signature(
        context.get_value_type(sig.args[1].dtype)), layout)
    return sig, codegen
