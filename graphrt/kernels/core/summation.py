"""Blocked pairwise summation: the one order of graphrt's floating-point sums.

Adding n values one after another has an error bound that grows like n (about 400 ulp for
4,096 values of one sign); a pairwise tree's grows like log2 n. graphrt's reductions,
normalisation statistics and softmax denominators all sum in the tree below, in both modes
(every helper here is compiled without fast-math, so a fast kernel that calls one gets the
exact mode's bits for that sum).

A **run** is n >= 1 values v_0 .. v_{n-1} (MAP applied to the elements read, e.g. v = x,
|x|, x*x, (x - mean)**2 or exp(x - max)):

- it is cut into blocks of BLOCK = 64 consecutive values, the last one shorter;
- a block of m < 8 values is added left to right, starting from its first value; a longer
  block has eight lane sums, lane l = v_l + v_{l+8} + v_{l+16} + ... (left to right) over
  the first 8 * (m // 8) values, then the m % 8 values left, v_{8q+j}, added to lane j in
  turn, and the block sum is ((l_0 + l_1) + (l_2 + l_3)) + ((l_4 + l_5) + (l_6 + l_7));
- block sums are combined like a binary counter: after the b-th block (b = 1, 2, ...) the
  two newest partial sums are replaced by (older + newer), once for each trailing zero bit
  of b; at the end the partials left, p_0 (oldest) .. p_t (newest), are added newest first:
  p_0 + (p_1 + (... + p_t)).

A **set** (the reduced elements of one output, in row-major order of the reduced axes) is
one run per run of the innermost reduced axis after contiguous axes are merged
(reduce.split_axes); the run sums are combined by the same binary counter.

Error (first order, u = 2**-24 for float32): a value takes part in at most 8 + 3 additions
inside its block and ceil(log2(blocks)) + 1 after, so |error| <= (12 + log2(n / 64)) u
sum|v|; for 4,096 values of one sign at most 18 u, about 1.1e-6 relative (measured in
docs/exact-mode.md, "Summation").
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .broadcast import row_offset
from .jit import _hash_of, file_tag, rebind

BLOCK = 64
LANES = 8
DEPTH = 64      # partial sums a binary counter can hold: far above log2 of any extent

MAP = None      # rebound per summer
RUN_SUM = None

SOURCE_TAG = file_tag(__file__)[:12]


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, no_cpython_wrapper=True)
def push(stack, top, b, s):
    """Put the b-th partial sum (b from 1) on ``stack`` holding ``top`` entries, merge as
    the binary counter says; the new number of entries."""
    stack[top] = s
    top += 1
    while b & 1 == 0:
        stack[top - 2] = stack[top - 2] + stack[top - 1]
        top -= 1
        b >>= 1
    return top


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, no_cpython_wrapper=True)
def fold(stack, top):
    """p_0 + (p_1 + (... + p_top-1)): the partial sums left, newest first."""
    s = stack[top - 1]
    for i in range(top - 2, -1, -1):
        s = stack[i] + s
    return s


@intrinsic
def _stack_of(typingctx, v):
    """A pointer to DEPTH values of v's type on the machine stack of the calling function:
    the binary counter's partial sums, without a heap allocation (and without compiling
    np.full into every summer)."""
    sig = types.CPointer(v)(v)

    def codegen(context, builder, sig, args):
        return cgutils.alloca_once(builder, context.get_value_type(v), size=DEPTH)

    return sig, codegen


def _run(x, off, n, p):
    """The run x[off], x[off + 1], ..., x[off + n - 1]: its blocks in one loop, a block's
    lanes in an array of the machine stack, lane l taking v_l, v_(l+8), ... and then value
    8q + l of the block's tail, if any; every lane index a constant once LLVM unrolls the
    loops over the eight lanes, so the lanes live in registers (the tail as a loop of
    variable length kept them in memory: 2x slower on runs under 64; as eight locals
    written out, the same speed for 45 % more compile time). Read through the view
    x[off:off + n], whose indices LLVM can prove non-negative: numba's wraparound of a
    negative index kept the eight loads of a step scalar (2.4x slower over long rows)."""
    v = x[off:off + n]
    first = MAP(v[0], p)
    stack = carray(_stack_of(first), DEPTH)
    lanes = carray(_stack_of(first), LANES)
    top = 0
    b = 0
    for k0 in range(0, n, BLOCK):
        m = min(BLOCK, n - k0)
        if m < LANES:
            s = MAP(v[k0], p)
            for i in range(1, m):
                s = s + MAP(v[k0 + i], p)
        else:
            for j in range(LANES):
                lanes[j] = MAP(v[k0 + j], p)
            q = m // LANES
            for r in range(1, q):
                o = k0 + r * LANES
                for j in range(LANES):
                    lanes[j] = lanes[j] + MAP(v[o + j], p)
            o = k0 + q * LANES
            t = m - q * LANES
            for j in range(LANES):
                if j < t:
                    lanes[j] = lanes[j] + MAP(v[o + j], p)
            s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + \
                ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
        b += 1
        top = push(stack, top, b, s)
    return fold(stack, top)


def _strided(x, off, n, step, p):
    """The run x[off], x[off + step], ..., x[off + (n - 1) * step] (any step): _run's
    blocks and lanes, read with the stride. (One block loop over a view serving both, a
    C-contiguous view here and a strided one there, was a third function linked into both:
    LayerNormalization's rows then compiled in 1.9-2.2 s against 1.4.)"""
    first = MAP(x[off], p)
    stack = carray(_stack_of(first), DEPTH)
    lanes = carray(_stack_of(first), LANES)
    top = 0
    b = 0
    for k0 in range(0, n, BLOCK):
        m = min(BLOCK, n - k0)
        o = off + k0 * step
        if m < LANES:
            s = MAP(x[o], p)
            for i in range(1, m):
                s = s + MAP(x[o + i * step], p)
        else:
            for j in range(LANES):
                lanes[j] = MAP(x[o + j * step], p)
            q = m // LANES
            for r in range(1, q):
                o8 = o + r * LANES * step
                for j in range(LANES):
                    lanes[j] = lanes[j] + MAP(x[o8 + j * step], p)
            o8 = o + q * LANES * step
            for j in range(m - q * LANES):
                lanes[j] = lanes[j] + MAP(x[o8 + j * step], p)
            s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + \
                ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
        b += 1
        top = push(stack, top, b, s)
    return fold(stack, top)


def _set(x, base, rshape, rstride, runs, p):
    nr = rshape.size
    rin = rshape[nr - 1]
    rs = rstride[nr - 1]
    first = RUN_SUM(x, base, rin, rs, p)
    if runs == 1:
        return first
    stack = carray(_stack_of(first), DEPTH)
    stack[0] = first
    top = 1
    for ro in range(1, runs):
        off = base + row_offset(ro, rshape, rstride)
        top = push(stack, top, ro + 1, RUN_SUM(x, off, rin, rs, p))
    return fold(stack, top)


def cols_work(rshape, count) -> int:
    """Rows of the scratch ``work`` that _cols needs (by as many columns as outputs)."""
    rin = int(rshape[-1]) if count else 1
    blocks = -(-rin // BLOCK)
    return LANES + blocks.bit_length() + 1 + (count // rin).bit_length() + 1


def _cols(x, base, w, rshape, rstride, runs, p, out, work):
    """out[j] = the set sum of output j for j < w, where output j's elements sit at
    base + j + (offset of the reduced index): the same tree as _set, with the lanes and
    partial sums of w outputs side by side so that every read is a contiguous row.
    ``work``: cols_work(...) rows of at least w columns, this call's own."""
    nr = rshape.size
    rin = rshape[nr - 1]
    rs = rstride[nr - 1]
    lanes = work[:LANES]
    nb = (rin + BLOCK - 1) // BLOCK
    depth = 1
    while nb >> (depth - 1):
        depth += 1
    blocks = work[LANES:LANES + depth]
    sets = work[LANES + depth:]
    stop = 0
    for ro in range(runs):
        off = base + row_offset(ro, rshape, rstride)
        btop = 0
        b = 0
        for k0 in range(0, rin, BLOCK):
            m = min(BLOCK, rin - k0)
            dst = blocks[btop]
            if m < LANES:
                src = x[off + k0 * rs:off + k0 * rs + w]
                for j in range(w):
                    dst[j] = MAP(src[j], p[j])
                for i in range(1, m):
                    src = x[off + (k0 + i) * rs:off + (k0 + i) * rs + w]
                    for j in range(w):
                        dst[j] = dst[j] + MAP(src[j], p[j])
            else:
                for i in range(m):
                    src = x[off + (k0 + i) * rs:off + (k0 + i) * rs + w]
                    lane = lanes[i % LANES]
                    if i < LANES:
                        for j in range(w):
                            lane[j] = MAP(src[j], p[j])
                    else:
                        for j in range(w):
                            lane[j] = lane[j] + MAP(src[j], p[j])
                for j in range(w):
                    dst[j] = (((lanes[0, j] + lanes[1, j]) + (lanes[2, j] + lanes[3, j]))
                              + ((lanes[4, j] + lanes[5, j]) + (lanes[6, j] + lanes[7, j])))
            b += 1
            btop = _push_rows(blocks, btop + 1, b)
        _fold_rows(blocks, btop, sets[stop])
        stop = _push_rows(sets, stop + 1, ro + 1)
    _fold_rows(sets, stop, out[:w])


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _push_rows(stack, top, b):
    """push() for rows of partial sums, the newest already written at stack[top - 1]."""
    while b & 1 == 0:
        a = stack[top - 2]
        c = stack[top - 1]
        for j in range(a.size):
            a[j] = a[j] + c[j]
        top -= 1
        b >>= 1
    return top


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _fold_rows(stack, top, out):
    """fold() for rows of partial sums, into ``out``."""
    s = stack[top - 1]
    for j in range(out.size):
        out[j] = s[j]
    for i in range(top - 2, -1, -1):
        a = stack[i]
        for j in range(out.size):
            out[j] = a[j] + out[j]


# ----------------------------------------------------------------------------- as LLVM IR
# The run sums of the maps below for the common case (a 1-D C-contiguous float32 or float64
# array, p of its type) are LLVM IR, one internal function per map, type and form in the
# calling kernel's module, called through an intrinsic: numba compiling _run or _strided for
# a map cost 1.2-1.8 s of a kernel's compile, the IR 0.3-0.5 s, for the same operations in the
# same order. Every instruction carries the flag ``afn`` (no effect on +, -, *): numba's
# fast-math pass flags only instructions without flags, so a fast caller leaves them exact.

_I64 = ir.IntType(64)
_EXACT = ("afn",)


class _Ops:
    """Exact float arithmetic at a builder's position (see above)."""

    def __init__(self, builder):
        self.b = builder

    def add(self, a, c):
        return self.b.fadd(a, c, flags=_EXACT)

    def sub(self, a, c):
        return self.b.fsub(a, c, flags=_EXACT)

    def mul(self, a, c):
        return self.b.fmul(a, c, flags=_EXACT)

    def fabs(self, a):
        width = "f32" if a.type == ir.FloatType() else "f64"
        fn = cgutils.get_or_insert_function(self.b.module, ir.FunctionType(a.type, [a.type]),
                                            f"llvm.fabs.{width}")
        return self.b.call(fn, [a])


def _const(v):
    return ir.Constant(_I64, v)


def _loop(b, name: str, start: list, test, step) -> list:
    """A loop at the builder's position carrying the values ``start``: while ``test(values)``
    (an i1), ``step(values)`` writes the body (any blocks) and gives the next values. The
    builder is left after the loop; returns the values it ended with."""
    fn = b.function
    head, body, end = (fn.append_basic_block(f"{name}_{part}") for part in ("head", "body", "end"))
    before = b.block
    b.branch(head)
    b.position_at_end(head)
    values = [b.phi(v.type) for v in start]
    for phi, v in zip(values, start):
        phi.add_incoming(v, before)
    b.cbranch(test(values), body, end)
    b.position_at_end(body)
    following = step(values)
    for phi, v in zip(values, following):
        phi.add_incoming(v, b.block)
    b.branch(head)
    b.position_at_end(end)
    return values


def _define(module, map_ir, kind: str, vt, strided: bool):
    """``vt name(vt* v, i64 n, i64 step, vt p)``: the blocked pairwise sum of MAP(v[i * step],
    p) for i < n (step 1 when not ``strided``), 0 for n < 1; defined once per module."""
    name = f"graphrt_sum_{kind}_{'strided' if strided else 'run'}_{str(vt)}"
    fnty = ir.FunctionType(vt, [vt.as_pointer(), _I64, _I64, vt])
    fn = cgutils.get_or_insert_function(module, fnty, name)
    if not fn.is_declaration:
        return fn
    fn.linkage = "internal"
    v, n, step, p = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    o = _Ops(b)
    stack = cgutils.alloca_once(b, vt, size=DEPTH)
    lanes = cgutils.alloca_once(b, vt, size=LANES)

    def at(ptr, i):
        return b.gep(ptr, [i])

    def value(blk, i):
        """MAP of element i (an i64 value) of the block at ``blk``."""
        return map_ir(o, b.load(at(blk, b.mul(i, step) if strided else i)), p)

    def lane_sums(blk, m):
        """m >= 8: eight lanes, then the tail's values added to lanes 0 .. m % 8 - 1."""
        for j in range(LANES):
            b.store(value(blk, _const(j)), at(lanes, _const(j)))

        def add(base, j):
            b.store(o.add(b.load(at(lanes, _const(j))), value(blk, b.add(base, _const(j)))),
                    at(lanes, _const(j)))

        def step8(r):
            base = b.shl(r[0], _const(3))
            for j in range(LANES):
                add(base, j)
            return [b.add(r[0], _const(1))]

        q = b.lshr(m, _const(3))
        _loop(b, "wide", [_const(1)], lambda r: b.icmp_signed("<", r[0], q), step8)
        base = b.shl(q, _const(3))
        t = b.sub(m, base)
        tail_end = fn.append_basic_block("tail_end")
        for j in range(LANES - 1):
            add_j = fn.append_basic_block(f"tail_{j}")
            b.cbranch(b.icmp_signed("<", _const(j), t), add_j, tail_end)
            b.position_at_end(add_j)
            add(base, j)
        b.branch(tail_end)
        b.position_at_end(tail_end)
        ls = [b.load(at(lanes, _const(j))) for j in range(LANES)]
        return o.add(o.add(o.add(ls[0], ls[1]), o.add(ls[2], ls[3])),
                     o.add(o.add(ls[4], ls[5]), o.add(ls[6], ls[7])))

    def block(state):
        """One block (m values from element k0) summed and pushed on the binary counter,
        merged once per trailing zero bit of the block count."""
        k0, top, count = state
        rest = b.sub(n, k0)
        m = b.select(b.icmp_signed("<", rest, _const(BLOCK)), rest, _const(BLOCK))
        blk = b.gep(v, [b.mul(k0, step)] if strided else [k0])
        short = b.icmp_signed("<", m, _const(LANES))
        with b.if_else(short) as (then, otherwise):
            with then:      # m < 8: left to right
                _, s_short = _loop(b, "short", [_const(1), value(blk, _const(0))],
                                   lambda c: b.icmp_signed("<", c[0], m),
                                   lambda c: [b.add(c[0], _const(1)),
                                              o.add(c[1], value(blk, c[0]))])
                short_end = b.block
            with otherwise:
                s_wide = lane_sums(blk, m)
                wide_end = b.block
        s = b.phi(vt)
        s.add_incoming(s_short, short_end)
        s.add_incoming(s_wide, wide_end)
        b.store(s, at(stack, top))
        count = b.add(count, _const(1))

        def merge(c):
            older, newer = at(stack, b.sub(c[0], _const(2))), at(stack, b.sub(c[0], _const(1)))
            b.store(o.add(b.load(older), b.load(newer)), older)
            return [b.sub(c[0], _const(1)), b.lshr(c[1], _const(1))]

        top, _ = _loop(b, "push", [b.add(top, _const(1)), count],
                       lambda c: b.icmp_unsigned("==", b.and_(c[1], _const(1)), _const(0)),
                       merge)
        return [b.add(k0, _const(BLOCK)), top, count]

    _, top, _ = _loop(b, "blocks", [_const(0), _const(0), _const(0)],
                      lambda state: b.icmp_signed("<", state[0], n), block)

    # p_0 + (p_1 + (... + p_top-1)); 0 for no value
    with b.if_then(b.icmp_signed("==", top, _const(0))):
        b.ret(ir.Constant(vt, 0.0))
    last = b.load(at(stack, b.sub(top, _const(1))))
    _, total = _loop(b, "fold", [b.sub(top, _const(2)), last],
                     lambda c: b.icmp_signed(">=", c[0], _const(0)),
                     lambda c: [b.sub(c[0], _const(1)), o.add(b.load(at(stack, c[0])), c[1])])
    b.ret(total)
    return fn


def _plain(x, p, *ints) -> bool:
    """Whether the IR serves: x a 1-D C-contiguous float32/float64 array, p of its type."""
    return (isinstance(x, types.Array) and x.ndim == 1 and x.layout == "C"
            and x.dtype in (types.float32, types.float64) and p == x.dtype
            and all(isinstance(i, types.Integer) for i in ints))


def _ir_sums(map_ir, kind: str):
    """Intrinsics (x, off, n, p) and (x, off, n, step, p): the run sums as IR (_define)."""
    def codegen_for(strided):
        def codegen(context, builder, sig, args):
            x = context.make_array(sig.args[0])(context, builder, args[0])
            ints = [context.cast(builder, a, t, types.int64)
                    for a, t in zip(args[1:-1], sig.args[1:-1])]
            step = ints[2] if strided else _const(1)
            vt = context.get_value_type(sig.return_type)
            fn = _define(builder.module, map_ir, kind, vt, strided)
            return builder.call(fn, [builder.gep(x.data, [ints[0]]), ints[1], step, args[-1]])
        return codegen

    @intrinsic
    def run(typingctx, x, off, n, p):
        if _plain(x, p, off, n):
            return x.dtype(x, off, n, p), codegen_for(False)
        return None

    @intrinsic
    def strided(typingctx, x, off, n, step, p):
        if _plain(x, p, off, n, step):
            return x.dtype(x, off, n, step, p), codegen_for(True)
        return None

    return run, strided


def _stubs(name: str, map_ir, run_fn, strided_fn):
    """Plain functions standing for a summer's ``run`` and ``strided`` in kernels: the IR
    where _plain holds, the numba-compiled template otherwise."""
    ir_run, ir_strided = _ir_sums(map_ir, name)

    def run(x, off, n, p):
        return run_fn(x, off, n, p)

    def strided(x, off, n, step, p):
        return strided_fn(x, off, n, step, p)

    @overload(run, inline="always")
    def _run_impl(x, off, n, p):
        if _plain(x, p, off, n):
            return lambda x, off, n, p: ir_run(x, off, n, p)
        return lambda x, off, n, p: run_fn(x, off, n, p)

    @overload(strided, inline="always")
    def _strided_impl(x, off, n, step, p):
        if _plain(x, p, off, n, step):
            return lambda x, off, n, step, p: ir_strided(x, off, n, step, p)
        return lambda x, off, n, step, p: strided_fn(x, off, n, step, p)

    for stub, part, fallback in ((run, "run", run_fn), (strided, "strided", strided_fn)):
        stub.__name__ = stub.__qualname__ = f"sum_{name}_{part}"
        # jit.Variants cannot follow an overload: kernels calling one are named by this
        # file's hash and the template's, so an edit renames them in numba's cache
        stub.hashed_with = (SOURCE_TAG, fallback)
        # found by name in this module: a kernel pickled for the helper process
        # (schedule_worker.pickled_kernel) then refers to it, overload and all, not to a copy
        globals()[stub.__name__] = stub
    return run, strided


class Summer:
    """The summation helpers of one MAP(v, p) (an njit scalar function): ``set`` for one
    output's set, ``cols`` for ``w`` outputs side by side, ``run`` for one contiguous run,
    ``strided`` for one run of any stride. With ``map_ir`` (MAP written at an _Ops: v, p ->
    value), ``run`` and ``strided`` are IR where the arguments allow (_stubs)."""

    __slots__ = ("run", "strided", "set", "cols")

    def __init__(self, map_, name: str, map_ir=None):
        tag = "".join(_hash_of({"MAP": map_} if t in (_run, _strided) else {}, t)[:4]
                      for t in (_run, _strided, _set, _cols))

        def jit(template, part, **consts):
            return njit(rebind(template, f"sum_{name}_{part}_{tag}", dict(consts, MAP=map_)),
                        cache=True, nogil=True, fastmath=False, error_model="numpy",
                        no_cfunc_wrapper=True, no_cpython_wrapper=True)

        self.run = jit(_run, "run")
        self.strided = jit(_strided, "strided")
        if map_ir is not None:
            self.run, self.strided = _stubs(name, map_ir, self.run, self.strided)
        # (runs with the stride: a set's run of stride 1 compiled beside it cost every
        # reduction a second linked helper; single contiguous runs take reduce._runs)
        self.set = jit(_set, "set", RUN_SUM=self.strided)
        self.cols = jit(_cols, "cols")


# ----------------------------------------------------------------------------- the maps

@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _value(v, p):
    return v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _magnitude(v, p):
    return abs(v)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _square(v, p):
    return v * v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _deviation_square(v, p):
    d = v - p
    return d * d


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _deviation_magnitude(v, p):
    return abs(v - p)


def _squared(o, d):
    return o.mul(d, d)


VALUES = Summer(_value, "values", lambda o, v, p: v)                     # sum v
MAGNITUDES = Summer(_magnitude, "magnitudes", lambda o, v, p: o.fabs(v))  # sum |v|
SQUARES = Summer(_square, "squares", lambda o, v, p: o.mul(v, v))         # sum v*v
DEVIATION_SQUARES = Summer(_deviation_square, "dev_squares",              # sum (v - p)**2
                           lambda o, v, p: _squared(o, o.sub(v, p)))
DEVIATION_MAGNITUDES = Summer(_deviation_magnitude, "dev_magnitudes",     # sum |v - p|
                              lambda o, v, p: o.fabs(o.sub(v, p)))
