"""Depthwise Conv read in place: the output plane's rows computed a vector of positions at a
time straight from the input plane, with no copy of it.

    y[n, m, oh, ow] = sum_{kh, kw} w[m, kh, kw] * x[n, m // mg, oh * sh + kh * dh - ph,
                                                   ow * sw + kw * dw - pw]      (+ b[m], Relu)

for 2-d windows of column stride 1 or 2 (the depthwise layers of MobileNet- and
EfficientNet-like networks). ROWS output rows by one vector of V positions (two on rows wider
than V; V = a vector register of the element type) are that many chains held in registers (a
tap's FMA for one row does not wait on another's). Tap (kh, kw) loads, for each of those rows,
the input elements it reads from its input row: a row above or below the plane is read from a
row of zeros, columns left or right of it as 0 by the load's mask (lanes off the mask touch no
memory); stride 2 takes the even lanes of two loads. So each output element's chain is the
plane kernel's and the GEMM path's: from 0, the taps in row-major order, padding taps as
products with 0 (an infinite weight still gives NaN there), one FMA a step (exact: a rounded
multiply, then a rounded add, NaN canonical); the bias and an absorbed Relu are then applied
to the plane while it is in cache, by the function the bias pass uses: the same bits.

The plane kernel (conv.py _depthwise) first copies the plane into a zero-bordered buffer and
copies each output row out again; on the 14 x 14 planes of a MobileNet those copies and their
loops cost more than the arithmetic (240 planes of 14 x 14, 5 x 5 windows, one thread: 57 us
by planes, 42 by rows, onnxruntime 22).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..core.broadcast import put
from ..core.jit import Variants, file_tag
from ..core.pointwise import scale_shift_relu
from ..gemm import micro_ir
from ..gemm.micro_ir import I64, VBYTES, splat, vector_memory, vector_ops
from .window import C, D, DH, DW, H, KD, KH, KW, OD, OH, OW, PH, PW, SH, SW, W

EXACT = False
ROWS = 7            # output rows a call: chains in flight; maps of 7 x 2^k rows split evenly
KW_LIT = 0          # the window's width, unrolled (0: read from the geometry; bound per family)
SW_LIT = 1          # the column stride, 1 or 2 (bound per family)


def fits(g) -> bool:
    """Whether the window geometry ``g`` is this kernel's: 2-d (or 1-d), column stride 1 or
    2."""
    return g[D] == g[KD] == g[OD] == 1 and g[SW] in (1, 2) and g[OH] > 0 and g[OW] > 0


def _each(builder, count, body):
    """body(i) for i < count: unrolled where count is a Python int, else a loop."""
    if isinstance(count, int):
        for i in range(count):
            body(ir.Constant(I64, i))
        return
    with cgutils.for_range(builder, count) as loop:
        body(loop.index)


@intrinsic
def _rows(typingctx, y, yo, x, xo, zeros, w, wo, g, oh0, ow0, exact, rows, cols, sw_lit,
          kw_lit):
    """y[yo + oh * OW + ow0 + j] for oh0 <= oh < min(oh0 + rows, OH) and j < cols * V with
    ow0 + j < OW: each the chain over the window's taps in row-major order (see the module's
    docstring), rows x cols vectors of chains at once (``rows``, ``cols``: literals). A
    tap's row above or below the input is read from ``zeros`` (at least W zeros), its columns
    left or right of it as 0 by the load's mask: every padding tap is a product with 0, as
    in the GEMM path. ``sw_lit``: the column stride, 1 or 2 (the even lanes of two loads);
    ``kw_lit``: the window's width as a literal (a window row's taps unrolled), or 0 (read
    from g). (The window's rows stay a loop: unrolled, LLVM hoists every tap's weight out of
    the caller's loops, 25 vectors beside the chains, and spills them.)"""
    if not (y.dtype == x.dtype == zeros.dtype == w.dtype
            and isinstance(exact, types.BooleanLiteral)
            and all(isinstance(a, types.IntegerLiteral) for a in (rows, cols, sw_lit, kw_lit))
            and sw_lit.literal_value in (1, 2)):
        return None
    sig = types.none(y, types.int64, x, types.int64, zeros, w, types.int64, g, types.int64,
                     types.int64, exact, rows, cols, sw_lit, kw_lit)

    def codegen(context, builder, sig, args):
        y_a, yo_, x_a, xo_, z_a, w_a, wo_, g_a, oh0_, ow0_ = args[:10]
        exact_, n_rows, n_cols, sw_n, kw_n = (a.literal_value for a in sig.args[10:])
        ety = context.get_data_type(sig.args[0].dtype)
        vty, lanes, fma, mload, mstore = vector_ops(builder.module, ety)
        load, store = vector_memory(builder, vty, mload, mstore, context.get_abi_sizeof(ety))
        i32 = ir.IntType(32)
        lane32 = ir.VectorType(i32, lanes)
        iota = ir.Constant(lane32, list(range(lanes)))
        evens = ir.Constant(lane32, list(range(0, 2 * lanes, 2)))
        zero = ir.Constant(vty, [0.0] * lanes)

        def data(i, arr):
            return context.make_array(sig.args[i])(context, builder, arr).data

        yd, xd, zd, wd, gd = (data(0, y_a), data(2, x_a), data(4, z_a), data(5, w_a),
                              data(7, g_a))

        def geo(i):
            return builder.load(builder.gep(gd, [ir.Constant(I64, i)]))

        h_, w_, oh_, ow_ = geo(H), geo(W), geo(OH), geo(OW)
        sh_, dh_, dw_, ph_, pw_ = geo(SH), geo(DH), geo(DW), geo(PH), geo(PW)
        kw_ = ir.Constant(I64, kw_n) if kw_n else geo(KW)
        w32 = splat(builder, builder.trunc(w_, i32), lane32)
        plane = builder.gep(xd, [xo_])
        accs = [[cgutils.alloca_once(builder, vty) for _ in range(n_cols)]
                for _ in range(n_rows)]
        for row in accs:
            for acc in row:
                builder.store(zero, acc)
        # the input row each output row reads at kh = 0
        tops = [builder.sub(builder.mul(builder.add(oh0_, ir.Constant(I64, r)), sh_), ph_)
                for r in range(n_rows)]

        def row_of_taps(kh):
            down = builder.mul(kh, dh_)
            bases = []
            for top in tops:
                ih = builder.add(top, down)
                inside = builder.and_(builder.icmp_signed(">=", ih, ir.Constant(I64, 0)),
                                      builder.icmp_signed("<", ih, h_))
                bases.append(builder.select(inside, builder.gep(plane, [builder.mul(ih, w_)]),
                                            zd))

            def in_row(c0):
                """The mask of lanes j with 0 <= c0 + j < W."""
                at = builder.add(splat(builder, builder.trunc(c0, i32), lane32), iota)
                return builder.and_(builder.icmp_signed(">=", at, ir.Constant(lane32, 0)),
                                    builder.icmp_signed("<", at, w32))

            def tap(kw):
                wv = splat(builder, builder.load(builder.gep(
                    wd, [builder.add(wo_, builder.add(builder.mul(kh, kw_), kw))])), vty)
                first = builder.sub(builder.add(builder.mul(ow0_, ir.Constant(I64, sw_n)),
                                                builder.mul(kw, dw_)), pw_)
                for c in range(n_cols):
                    # the input columns of this vector's lanes start at c0, sw_n apart
                    c0 = builder.add(first, ir.Constant(I64, c * lanes * sw_n))
                    parts = [builder.add(c0, ir.Constant(I64, h * lanes)) for h in range(sw_n)]
                    masks = [in_row(at) for at in parts]
                    for base, row in zip(bases, accs):
                        xv = load(builder.gep(base, [parts[0]]), masks[0])
                        if sw_n == 2:       # the even lanes of two vectors
                            xv = builder.shuffle_vector(xv, load(builder.gep(
                                base, [parts[1]]), masks[1]), evens)
                        a = builder.load(row[c])
                        if exact_:
                            v = builder.fadd(a, builder.fmul(wv, xv))
                        else:
                            v = builder.call(fma, [wv, xv, a])
                        builder.store(v, row[c])

            _each(builder, kw_n or kw_, tap)

        _each(builder, geo(KH), row_of_taps)
        keeps = [builder.icmp_signed("<", builder.add(splat(builder, builder.trunc(
            builder.add(ow0_, ir.Constant(I64, c * lanes)), i32), lane32), iota),
            splat(builder, builder.trunc(ow_, i32), lane32)) for c in range(n_cols)]
        for r, row in enumerate(accs):
            oh = builder.add(oh0_, ir.Constant(I64, r))
            with builder.if_then(builder.icmp_signed("<", oh, oh_)):
                for c, (acc, keep) in enumerate(zip(row, keeps)):
                    v = builder.load(acc)
                    if exact_:       # NaN canonical
                        v = builder.select(builder.fcmp_unordered("uno", v, v),
                                           ir.Constant(vty, [float("nan")] * lanes), v)
                    at = builder.add(yo_, builder.add(builder.mul(oh, ow_), builder.add(
                        ow0_, ir.Constant(I64, c * lanes))))
                    store(v, builder.gep(yd, [at]), keep)
        return context.get_dummy_value()

    return sig, codegen


def _depthwise_rows(x, w, y, b, zeros, g, mg, relu, planes):
    """Depthwise Conv (one input channel per group, multiplier mg) by rows (see the module's
    docstring): task t = output plane t = (image, output channel m), reading input channel
    m // mg; then + b[m] where b has M values, and Relu's function where ``relu``. ``zeros``:
    at least W zeros (the rows of the padding)."""
    lanes = np.int64(VBYTES // x.itemsize)
    oh_, ow_ = g[OH], g[OW]
    m_all = g[C] * mg
    p_ = oh_ * ow_
    kk = g[KH] * g[KW]
    for t in prange(planes):
        tt = np.int64(t)
        img = tt // m_all
        m = tt - img * m_all
        xo = (img * g[C] + m // mg) * g[H] * g[W]
        for oh0 in range(0, oh_, ROWS):
            if ow_ <= lanes:
                _rows(y, tt * p_, x, xo, zeros, w, m * kk, g, oh0, 0, EXACT, ROWS, 1, SW_LIT,
                      KW_LIT)
            else:       # wide rows: two vectors of positions a row (more chains a call)
                for ow0 in range(0, ow_, 2 * lanes):
                    _rows(y, tt * p_, x, xo, zeros, w, m * kk, g, oh0, ow0, EXACT, ROWS, 2,
                          SW_LIT, KW_LIT)
        shifted = b.size > 0
        if shifted or relu:
            plane = y[tt * p_:(tt + 1) * p_]
            bv = b[m] if shifted else plane[0]
            for j in range(plane.size):
                put(plane, j, scale_shift_relu(plane[j], bv, bv, False, shifted, relu), EXACT)


# by column stride and window width (3 and 5 unrolled, any other read from the geometry);
# named by this file's and micro_ir's content (numba's cache does not follow an intrinsic)
FAMILIES = {(sw, kw): Variants(_depthwise_rows, f"conv_depthwise_rows_{sw}_{kw}",
                               parallel=True, IR=file_tag(__file__), MK=micro_ir.SOURCE_TAG,
                               SW_LIT=sw, KW_LIT=kw)
            for sw in (1, 2) for kw in (3, 5, 0)}


def variants(g) -> Variants:
    """The family of the geometry's column stride and window width."""
    sw = int(g[SW])
    return FAMILIES.get((sw, int(g[KW])), FAMILIES[sw, 0])
