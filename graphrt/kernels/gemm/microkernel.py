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

The inner loop is a micro-kernel written in LLVM IR (``_micro_ir``): MR rows by NR columns of
accumulators held in vector registers (NR = two vectors of the widest registers the target
has), one broadcast of A and two loads of B per row and k. A and B are packed into
zero-padded panels (MR-row panels of A, NR-column panels of B, k-major) only where they are not
already rows with contiguous k (A) or contiguous columns (B), which are read in place;
padded lanes are computed and thrown away, edge tiles go through a small buffer.
"""
from __future__ import annotations

import hashlib
import threading

import llvmlite.binding as llb
import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..core.jit import rebind


# Kernels that call into this module bind SOURCE_TAG (jit.Variants hashes it into their
# names), so an edit here (the IR generator included) renames them in numba's cache.
with open(__file__, "rb") as _f:
    SOURCE_TAG = hashlib.sha1(_f.read()).hexdigest()[:12]


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
# below). Both are compile-time constants of the kernels below.
MR = 12 if VBYTES == 64 else 6
KC = 256                    # k per block: an A panel and a B panel stay in L1
MC = 8 * MR                 # rows per packed block of A (stays in L2)
NC_BYTES = 1 << 19          # a packed block of B (KC x NC) stays in L2
FEW_ROWS = 4                # fewer rows: _dot_rows (B transposed) or few_rows (no packing of B)


def nr_of(itemsize: int) -> int:
    """Columns of a micro-tile: two vectors."""
    return 2 * VBYTES // itemsize



def _make_micro(rows: int, fused: bool = True, masked: bool = False, half: bool = False):
    """The micro-kernel for ``rows`` rows (at most MR) of a packed A panel; ``fused``: each
    step one FMA (fast mode), else a multiply and an add, each rounded (exact mode: the
    operations of graphrt's blocked kernel, so the same bits on every machine); ``masked``:
    it takes one more argument, w, and touches only the first w < NR columns of B and C
    (masked loads and stores), so an edge tile needs neither a packed B nor a buffer;
    ``half`` (masked only): one vector of columns instead of two, for an edge of at most
    NR / 2 columns (half the multiply-adds of the two-vector kernel there)."""
    if masked:
        def kernel(typingctx, ap, a_off, a_k, a_r, bp, b_off, ldb, c, c_off, ldc, kc, load, w,
                   epi):
            return _micro_ir(rows, fused, ap, a_off, a_k, a_r, bp, b_off, ldb, c, c_off, ldc,
                             kc, load, epi, w, 1 if half else 2)
    else:
        def kernel(typingctx, ap, a_off, a_k, a_r, bp, b_off, ldb, c, c_off, ldc, kc, load,
                   epi):
            return _micro_ir(rows, fused, ap, a_off, a_k, a_r, bp, b_off, ldb, c, c_off, ldc,
                             kc, load, epi)

    kernel.__name__ = kernel.__qualname__ = \
        f"micro{rows}{'' if fused else '_exact'}{'_masked' if masked else ''}" \
        f"{'_half' if half else ''}"
    return intrinsic(kernel)


def _micro_ir(rows, fused, ap, a_off, a_k, a_r, bp, b_off, ldb, c, c_off, ldc, kc, load,
              epi, w=None, nv=2):
    """c[c_off + r*ldc + j] (r < rows, j < NR, or j < w when masked) = (load ? c : 0) + sum
    over k < kc of ap[a_off + k*a_k + r*a_r] * bp[b_off + k*ldb + j], each step one fused
    multiply-add (a packed A panel has a_k = MR, a_r = 1). An ldb given as a pair (tab,
    t_off) reads B's row k at bp[b_off + tab[t_off + k]] instead: rows anywhere, as an
    implicit-GEMM convolution finds them in its input planes. ``nv``: vectors of columns
    (NR = 2 of them; 1 for a narrow masked edge). ``epi`` = (e, e_off, e_si, flags): Gemm's
    epilogue on the sums before they are stored (see EPI_C), the same operations as its
    separate pass; flags 0: none."""
    dt = ap.dtype
    masked = w is not None
    table = isinstance(ldb, types.BaseTuple)
    sig = types.void(ap, types.intp, types.intp, types.intp, bp, types.intp,
                     ldb if table else types.intp, c, types.intp, types.intp, types.intp,
                     types.boolean, *((types.intp,) if masked else ()), epi)

    def codegen(context, builder, sig, args):
        a_arr, a_off, a_k, a_r, b_arr, b_off, ldb, c_arr, c_off, ldc, kc, load = args[:12]
        fty = context.get_value_type(dt)
        lanes = VBYTES // (4 if dt == types.float32 else 8)
        vty = ir.VectorType(fty, lanes)
        mod = builder.module
        suffix = f"v{lanes}f{32 if dt == types.float32 else 64}"
        fma = cgutils.get_or_insert_function(mod, ir.FunctionType(vty, [vty] * 3),
                                             f"llvm.fma.{suffix}")
        a_base = builder.gep(context.make_array(sig.args[0])(context, builder, a_arr).data,
                             [a_off])
        b_base = builder.gep(context.make_array(sig.args[4])(context, builder, b_arr).data,
                             [b_off])
        c_base = builder.gep(context.make_array(sig.args[7])(context, builder, c_arr).data,
                             [c_off])
        if table:
            tab = context.make_array(sig.args[6].types[0])(
                context, builder, builder.extract_value(ldb, 0))
            t_base = builder.gep(tab.data, [builder.extract_value(ldb, 1)])
        i64 = ir.IntType(64)
        zero_v = ir.Constant(vty, [0.0] * lanes)

        align = 4 if dt == types.float32 else 8
        i32 = ir.IntType(32)
        if masked:
            # lane j of vector h is live when h * lanes + j < w
            mty = ir.VectorType(ir.IntType(1), lanes)
            wide = ir.VectorType(i64, lanes)
            wv = builder.insert_element(ir.Constant(wide, ir.Undefined), args[12],
                                        ir.Constant(i32, 0))
            wv = builder.shuffle_vector(wv, ir.Constant(wide, ir.Undefined),
                                        ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))
            masks = [builder.icmp_signed("<", ir.Constant(wide, [h * lanes + j for j in range(lanes)]), wv)
                     for h in range(nv)]
            pty = vty.as_pointer()
            mload = cgutils.get_or_insert_function(
                mod, ir.FunctionType(vty, [pty, i32, mty, vty]), f"llvm.masked.load.{suffix}.p0")
            mstore = cgutils.get_or_insert_function(
                mod, ir.FunctionType(ir.VoidType(), [vty, pty, i32, mty]),
                f"llvm.masked.store.{suffix}.p0")

        def vload(ptr, h=0):
            ptr = builder.bitcast(ptr, vty.as_pointer())
            if masked:
                return builder.call(mload, [ptr, ir.Constant(i32, align), masks[h], zero_v])
            return builder.load(ptr, align=align)

        def vstore(v, ptr, h):
            ptr = builder.bitcast(ptr, vty.as_pointer())
            if masked:
                builder.call(mstore, [v, ptr, ir.Constant(i32, align), masks[h]])
            else:
                builder.store(v, ptr, align=align)

        # initial accumulators: C's tile when ``load``, else zeros
        init = []
        for r in range(rows):
            row = builder.gep(c_base, [builder.mul(ldc, ir.Constant(i64, r))])
            for h in range(nv):
                v = vload(builder.gep(row, [ir.Constant(i64, h * lanes)]), h)
                init.append(builder.select(load, v, zero_v))
        # A's rows as groups of three, each group one pointer stepping by a_k, its rows at
        # +0, +a_r, +2*a_r (x86 addressing: base + scaled index). LLVM's loop strength
        # reduction would otherwise walk the rows with a chain of dependent adds (twelve per
        # step of k, the kernel's bottleneck); an empty asm statement hides a_r's
        # invariance from it.
        groups = [builder.gep(a_base, [builder.mul(a_r, ir.Constant(i64, 3 * q))])
                  for q in range((rows + 2) // 3)]
        entry = builder.block
        loop = builder.append_basic_block("micro_loop")
        done = builder.append_basic_block("micro_done")
        has_work = builder.icmp_signed(">", kc, ir.Constant(i64, 0))
        builder.cbranch(has_work, loop, done)

        builder.position_at_end(loop)
        k = builder.phi(i64)
        k.add_incoming(ir.Constant(i64, 0), entry)
        accs = []
        for v in init:
            p = builder.phi(vty)
            p.add_incoming(v, entry)
            accs.append(p)
        gptr = []
        for g in groups:
            p = builder.phi(g.type)
            p.add_incoming(g, entry)
            gptr.append(p)
        bk = builder.gep(b_base, [builder.load(builder.gep(t_base, [k])) if table
                                  else builder.mul(k, ldb)])
        bv = [vload(builder.gep(bk, [ir.Constant(i64, h * lanes)]), h) for h in range(nv)]
        a_r1 = builder.asm(ir.FunctionType(i64, [i64]), "", "=r,0", [a_r], True)
        a_r2 = builder.add(a_r1, a_r1)
        new = []
        undef = ir.Constant(vty, ir.Undefined)
        mask = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)
        for r in range(rows):
            g, m = gptr[r // 3], r % 3
            s = builder.load(g if m == 0 else builder.gep(g, [a_r1 if m == 1 else a_r2]))
            sv = builder.shuffle_vector(builder.insert_element(undef, s, ir.Constant(
                ir.IntType(32), 0)), undef, mask)
            for h in range(nv):
                if fused:
                    new.append(builder.call(fma, [sv, bv[h], accs[nv * r + h]]))
                else:   # acc + a * b, two roundings (no fast-math flags: never contracted)
                    new.append(builder.fadd(accs[nv * r + h], builder.fmul(sv, bv[h])))
        k_next = builder.add(k, ir.Constant(i64, 1))
        k.add_incoming(k_next, builder.block)
        for p in gptr:
            p.add_incoming(builder.gep(p, [a_k]), builder.block)
        for p, v in zip(accs, new):
            p.add_incoming(v, builder.block)
        builder.cbranch(builder.icmp_signed("<", k_next, kc), loop, done)

        builder.position_at_end(done)
        outs = []
        for i, v in enumerate(init):
            out = builder.phi(vty)
            out.add_incoming(v, entry)
            out.add_incoming(new[i], loop)
            outs.append(out)
        outs = _epilogue_ir(context, builder, sig.args[-1], args[-1], outs, rows, nv, vty,
                            vload)
        for r in range(rows):
            row = builder.gep(c_base, [builder.mul(ldc, ir.Constant(i64, r))])
            for h in range(nv):
                vstore(outs[nv * r + h], builder.gep(row, [ir.Constant(i64, h * lanes)]), h)
        return context.get_dummy_value()

    return sig, codegen


# The epilogue in the micro-kernel is partly x86 AVX assembly (see _epilogue_ir); elsewhere
# tile_product leaves it to its caller's pass.
FUSED_EPILOGUE = llb.get_process_triple().startswith("x86_64") and VBYTES >= 32
if FUSED_EPILOGUE:
    llb.initialize_native_asmparser()       # (numba does not: instructions in asm need it)
# epilogue flags (micro-kernel ``epi``), applied in this order to a finished sum v
EPI_C = 1       # v = v + e[e_off + r*e_si + j] (Gemm's C with alpha = beta = 1)
EPI_RELU = 2    # v = v if not v <= 0 else 0 (NaN kept)


def _epilogue_ir(context, builder, ety, epi, outs, rows, nv, vty, vload):
    """The values to store: ``outs`` (row-major, nv vectors a row) through the epilogue that
    ``epi``'s flags ask for: one straight-line block per combination of flags, chosen by a
    switch (flags 0: none); the bits of matmul's separate epilogue pass, in fast mode too."""
    if not FUSED_EPILOGUE:
        return outs
    i64 = ir.IntType(64)
    lanes = vty.count
    e = context.make_array(ety.types[0])(context, builder, builder.extract_value(epi, 0))
    e_base = builder.gep(e.data, [builder.extract_value(epi, 1)])
    e_si = builder.extract_value(epi, 2)
    zero = ir.Constant(vty, [0.0] * lanes)
    # Relu is assembly: a fast variant's module gets fast-math flags (jit.FAST_MATH) on every
    # float instruction, these included, and under nsz a compare and select may become a max
    # that keeps -0, and an add of +0 is dropped.
    sfx = "pd" if vty.element == ir.DoubleType() else "ps"
    relu_asm = f"vmax{sfx} $1, $2, $0\n\tvadd{sfx} $2, $0, $0"

    def relu(v):
        """max(0, v) keeping a NaN v (x86 returns the second operand), then + 0 for -0."""
        return builder.asm(ir.FunctionType(vty, [vty, vty]), relu_asm, "=&v,v,v", [v, zero],
                           False)

    before = builder.block
    after = builder.append_basic_block("micro_store")
    switch = builder.switch(builder.extract_value(epi, 3), after)
    incoming = [(before, outs)]
    for flags in (EPI_C, EPI_RELU, EPI_C | EPI_RELU):
        block = builder.append_basic_block(f"micro_epi{flags}")
        switch.add_case(ir.Constant(i64, flags), block)
        builder.position_at_end(block)
        done = []
        for r in range(rows):
            row = builder.gep(e_base, [builder.mul(e_si, ir.Constant(i64, r))])
            for h in range(nv):
                v = outs[nv * r + h]
                if flags & EPI_C:
                    cv = vload(builder.gep(row, [ir.Constant(i64, h * lanes)]), h)
                    v = builder.fadd(v, cv)
                if flags & EPI_RELU:
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


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def step(exact, x, y, acc):
    """One step of an element's chain: acc + x * y rounded twice (exact) or once (FMA)."""
    if exact:
        return acc + x * y
    return fma(x, y, acc)


_ARGS = "ap, a_off, a_k, a_r, bp, b_off, ldb, c, c_off, ldc, kc, load"


def _pick(fused: bool, masked: bool = False, half: bool = False):
    """An inlined numba function pick(exact, h, <_ARGS>[, w], epi) that runs the micro-kernel
    for h rows (MR, 8 or 4; any other h reads MR rows of a padded panel) in one mode's
    arithmetic, ``fused`` (fast mode) or not (see _make_micro for ``masked`` and ``half``);
    ``exact`` is there for the callers' signature: the families are built per mode."""
    ns, lines = {}, []
    args = _ARGS + (", w" if masked else "") + ", epi"
    lines.append(f"def pick(exact, h, {args}):")
    for i, rows in enumerate((8, 4, MR)):
        name = f"k_{rows}"
        ns[name] = _make_micro(rows, fused, masked, half)
        lines.append("    " + (f"if h == {rows}:", f"elif h == {rows}:", "else:")[i])
        lines.append(f"        {name}({args})")
    exec("\n".join(lines), ns)
    return njit(nogil=True, error_model="numpy", inline="always")(ns["pick"])


# The kernel families are built per mode (_family): a kernel built for both would carry
# both modes' micro-kernels at each call site, and compile twice as long.
# micro(exact, h, ...): full NR-column tiles; ldb an int, or a pair (tab, t_off) (_micro_ir);
# _edge: the first w < NR columns; _narrow: the first w columns, w fitting one vector.
micro = _edge = _narrow = None


def micro_cols(exact, h, ap, a_off, a_k, a_r, bp, b_off, ldb, c, c_off, ldc, kc, load, w,
               epi):
    """``micro`` over the first w < NR columns only (h = MR, 8 or 4); one vector of columns
    where w fits in one."""
    if w * c.itemsize <= VBYTES:
        _narrow(exact, h, ap, a_off, a_k, a_r, bp, b_off, ldb, c, c_off, ldc, kc, load, w,
                epi)
    else:
        _edge(exact, h, ap, a_off, a_k, a_r, bp, b_off, ldb, c, c_off, ldc, kc, load, w, epi)


@njit(cache=True, nogil=True, error_model="numpy")
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


@njit(cache=True, nogil=True, error_model="numpy")
def few_rows(a, ao, a_si, a_sk, b, bo, b_sk, out, oo, ldo, rows, cols, kk, exact):
    """The few-rows case with B's rows contiguous (b_sj = 1: a k-major B): for each row of
    A, all its columns' chains advance together over k ascending -- the micro-kernel's
    operations, vectorised over the columns, read without packing."""
    for i in range(rows):
        ai = ao + i * a_si
        acc = out[oo + i * ldo:oo + i * ldo + cols]     # slices: no wrap-around test
        acc[:] = 0
        for k in range(kk):
            x = a[ai + k * a_sk]
            row = b[bo + k * b_sk:bo + k * b_sk + cols]
            for j in range(cols):
                acc[j] = step(exact, x, row[j], acc[j])


def _tile_product(a, ao, a_si, a_sk, b, bo, b_sk, b_sj, out, oo, ldo, rows, cols, kk,
                 ap, bp, cb, exact, btab, epi):
    """out[oo + i*ldo + j] = A[i, :] @ B[:, j] for i < rows, j < cols (module docstring),
    NC columns at a time. ``ap``, ``bp``, ``cb``: scratch from carve(work, rows, cols, kk).
    A non-empty ``btab`` (B's columns contiguous) places B's row k at b[bo + btab[k]]
    (NO_TABLE: at b[bo + k*b_sk]). ``epi`` = (e, e_off, e_si, flags): the
    epilogue the micro-kernel applies as it stores (_micro_ir; e_off for the tile's
    element (0, 0), e's columns contiguous); flags 0: none. Returns whether it was applied:
    not where some rows fall to the padded edge path (then the caller makes its pass)."""
    if kk == 0:
        for i in range(rows):
            for j in range(cols):
                out[oo + i * ldo + j] = 0
        return False
    if rows < FEW_ROWS and b_sk == 1 and b_sj != 1 and btab.size == 0:
        _dot_rows(a, ao, a_si, a_sk, b, bo, b_sj, out, oo, ldo, rows, cols, kk, cb, exact)
        return False
    if rows < FEW_ROWS and b_sj == 1 and btab.size == 0:
        few_rows(a, ao, a_si, a_sk, b, bo, b_sk, out, oo, ldo, rows, cols, kk, exact)
        return False
    fuse = FUSED_EPILOGUE and epi[3] != 0 and rows % MR in (0, 8, 4)
    nc = bp.size // max(1, min(KC, kk))
    for jc in range(0, cols, nc):
        _block(a, ao, a_si, a_sk, b, bo + jc * b_sj, b_sk, b_sj, out, oo + jc, ldo, rows,
               min(nc, cols - jc), kk, ap, bp, cb, exact, btab,
               (epi[0], epi[1] + jc, epi[2], epi[3] if fuse else 0))
    return fuse



NO_TABLE = np.zeros(0, dtype=np.int64)


def _block(a, ao, a_si, a_sk, b, bo, b_sk, b_sj, out, oo, ldo, rows, cols, kk, ap, bp, cb,
           exact, btab, epi):
    nr = cb.size // MR
    table = btab.size > 0
    # B's rows are read in place where its columns are contiguous (only edge panels are
    # packed): packing would cost a copy per element for little gain at these sizes
    direct = b_sj == 1
    # A's rows are read in place too where its k is contiguous (only edge panels of other
    # heights are packed): measured faster at every size, and much faster for narrow
    # products, where a packed A element would serve only ``cols`` multiply-adds
    direct_a = a_sk == 1
    npan = (cols + nr - 1) // nr
    # Only the last row panel can have a height without a kernel (rows % MR). Above four
    # rows, with A read in place, it runs as an 8- or 4-row piece and then its last four
    # rows (split_h below); else through a padded panel of A and a buffer (padded), and then
    # an edge panel of B (w < nr columns) is packed too: elsewhere it goes to the masked
    # kernel in place.
    tail = rows % MR
    padded = tail not in (0, 8, 4) and (tail < 4 or not direct_a)
    none = (epi[0], epi[1], epi[2], 0)     # (tile_product fuses no epilogue with such rows)
    for pc in range(0, kk, KC):
        kc = min(KC, kk - pc)
        for jp in range(npan):
            j0 = jp * nr
            w = min(nr, cols - j0)
            if direct and (w == nr or not padded):
                continue
            base = jp * kc * nr
            for k in range(kc):
                s = bo + (btab[pc + k] if table else (pc + k) * b_sk) + j0 * b_sj
                d = base + k * nr
                if b_sj == 1:
                    for jj in range(w):
                        bp[d + jj] = b[s + jj]
                else:
                    for jj in range(w):
                        bp[d + jj] = b[s + jj * b_sj]
                for jj in range(w, nr):
                    bp[d + jj] = 0
        for ic in range(0, rows, MC):
            mc = min(MC, rows - ic)
            mpan = (mc + MR - 1) // MR
            for ip in range(mpan):
                i0 = ic + ip * MR
                h = min(MR, rows - i0)
                if direct_a and h >= 4:
                    continue
                base = ip * kc * MR
                for k in range(kc):
                    d = base + k * MR
                    s = ao + i0 * a_si + (pc + k) * a_sk
                    for ii in range(h):
                        ap[d + ii] = a[s + ii * a_si]
                    for ii in range(h, MR):
                        ap[d + ii] = 0
            for jp in range(npan):
                j0 = jp * nr
                w = min(nr, cols - j0)
                for ip in range(mpan):
                    i0 = ic + ip * MR
                    h = min(MR, rows - i0)
                    co = oo + i0 * ldo + j0
                    full_h = h == MR or h == 8 or h == 4
                    split_h = direct_a and not full_h and h > 4
                    in_place = direct and (w == nr or full_h or split_h)
                    if in_place:
                        bsrc, boff, ldb = b, bo + (0 if table else pc * b_sk) + j0, b_sk
                    else:
                        bsrc, boff, ldb = bp, jp * kc * nr, nr
                    rows_at = in_place and table     # B's rows by the table
                    # the epilogue with the last block of k, on the sums in registers
                    ep = (epi[0], epi[1] + i0 * epi[2] + j0, epi[2],
                          epi[3] if pc + kc == kk else 0)
                    if direct_a and (full_h or split_h):
                        asrc, aoff, a_k, a_r = a, ao + i0 * a_si + pc, 1, a_si
                    else:
                        asrc, aoff, a_k, a_r = ap, ip * kc * MR, MR, 1
                    if full_h:
                        _micro_at(exact, h, asrc, aoff, a_k, a_r, bsrc, boff, ldb, rows_at,
                                  btab, pc, out, co, ldo, kc, pc > 0, w, nr, ep)
                        continue
                    # Other heights share one call site (each inlines the whole kernel
                    # family). A split panel is two pieces: 8 or 4 rows, then its last four
                    # rows; rows both cover get the same bits again, except where partial
                    # sums wait in out (pc > 0): there the second piece goes through the
                    # buffer and only its new rows are kept. A padded panel goes through the
                    # buffer.
                    first = 8 if h > 8 else 4
                    for piece in range(2 if split_h else 1):
                        kh, r0, keep, n_in = h, 0, 0, h
                        if split_h:
                            kh = first if piece == 0 else 4
                            r0 = 0 if piece == 0 else h - 4
                            keep, n_in = first - r0, 4
                        buffered = not split_h or (piece == 1 and pc > 0)
                        if buffered:
                            if pc > 0:
                                for ii in range(n_in):
                                    for jj in range(w):
                                        cb[ii * nr + jj] = out[co + (r0 + ii) * ldo + jj]
                            ct, cto, ctl, wk = cb, 0, nr, nr if not split_h else w
                        else:
                            ct, cto, ctl, wk = out, co + r0 * ldo, ldo, w
                        _micro_at(exact, kh, asrc, aoff + r0 * a_r, a_k, a_r, bsrc, boff, ldb,
                                  rows_at, btab, pc, ct, cto, ctl, kc, pc > 0, wk, nr, none)
                        if buffered:
                            for ii in range(keep, n_in):
                                for jj in range(w):
                                    out[co + (r0 + ii) * ldo + jj] = cb[ii * nr + jj]


def _micro_at(exact, h, asrc, aoff, a_k, a_r, bsrc, boff, ldb, rows_at, btab, pc, c, co, ldc,
              kc, load, w, nr, ep):
    """micro (w = nr) or micro_cols (the first w columns) on h rows into c at co, B's rows
    by btab from pc (rows_at) or ldb apart."""
    if w == nr and rows_at:
        micro(exact, h, asrc, aoff, a_k, a_r, bsrc, boff, (btab, pc), c, co, ldc, kc, load, ep)
    elif w == nr:
        micro(exact, h, asrc, aoff, a_k, a_r, bsrc, boff, ldb, c, co, ldc, kc, load, ep)
    elif rows_at:
        micro_cols(exact, h, asrc, aoff, a_k, a_r, bsrc, boff, (btab, pc), c, co, ldc, kc,
                   load, w, ep)
    else:
        micro_cols(exact, h, asrc, aoff, a_k, a_r, bsrc, boff, ldb, c, co, ldc, kc, load, w,
                   ep)


def _family(only: str):
    """tile_product for one mode's arithmetic ("fast" or "exact"): the templates above bound
    to that mode's micro-kernels."""
    fused = only == "fast"
    g = {"micro": _pick(fused), "_edge": _pick(fused, masked=True),
         "_narrow": _pick(fused, masked=True, half=True)}
    inline = dict(nogil=True, error_model="numpy", inline="always")
    g["micro_cols"] = njit(**inline)(rebind(micro_cols, f"micro_cols_{only}", g))
    g["_micro_at"] = njit(**inline)(rebind(_micro_at, f"micro_at_{only}", g))
    g["_block"] = njit(cache=True, nogil=True, error_model="numpy")(
        rebind(_block, f"block_{only}", g))
    return njit(cache=True, nogil=True, error_model="numpy")(
        rebind(_tile_product, f"tile_product_{only}", g))


tile_product_fast = _family("fast")
tile_product_exact = _family("exact")


@njit(cache=True, nogil=True)
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


def work_size(itemsize: int) -> int:
    """Elements of scratch one tile product call needs at most (see carve)."""
    nr = nr_of(itemsize)
    nc = max(1, NC_BYTES // (KC * nr * itemsize)) * nr
    return MC * KC + KC * max(nr, nc) + MR * nr


_WORK = threading.local()


def work_for(dtype) -> np.ndarray:
    """Per-thread tile scratch: one row of work_size elements per numba pool thread (kernels
    take row numba.get_thread_id()), kept per Python thread and reused, so warm runs allocate
    nothing and concurrent runs (each on its own Python thread) never share one."""
    cache = getattr(_WORK, "cache", None)
    if cache is None:
        cache = _WORK.cache = {}
    dt = np.dtype(dtype)
    buf = cache.get(dt)
    if buf is None:
        buf = cache[dt] = np.empty((numba.config.NUMBA_NUM_THREADS, work_size(dt.itemsize)), dt)
    return buf
