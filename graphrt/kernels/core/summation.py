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
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .broadcast import row_offset
from .jit import _hash_of, rebind

BLOCK = 64
LANES = 8
DEPTH = 64      # partial sums a binary counter can hold: far above log2 of any extent

MAP = None      # rebound per summer
RUN_SUM = None


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


class Summer:
    """The summation helpers of one MAP(v, p) (an njit scalar function): ``set`` for one
    output's set, ``cols`` for ``w`` outputs side by side, ``run`` for one contiguous run,
    ``strided`` for one run of any stride."""

    __slots__ = ("run", "strided", "set", "cols")

    def __init__(self, map_, name: str):
        tag = "".join(_hash_of({"MAP": map_} if t in (_run, _strided) else {}, t)[:4]
                      for t in (_run, _strided, _set, _cols))

        def jit(template, part, **consts):
            return njit(rebind(template, f"sum_{name}_{part}_{tag}", dict(consts, MAP=map_)),
                        cache=True, nogil=True, fastmath=False, error_model="numpy",
                        no_cfunc_wrapper=True,
                        no_cpython_wrapper=True)

        self.run = jit(_run, "run")
        self.strided = jit(_strided, "strided")
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


VALUES = Summer(_value, "values")                       # sum v
MAGNITUDES = Summer(_magnitude, "magnitudes")           # sum |v|
SQUARES = Summer(_square, "squares")                    # sum v*v
DEVIATION_SQUARES = Summer(_deviation_square, "dev_squares")         # sum (v - p)**2
DEVIATION_MAGNITUDES = Summer(_deviation_magnitude, "dev_magnitudes")  # sum |v - p|
