"""Einsum: a contraction planned in Python, its pairwise products through gemm/product.py.

Einsum: out[output labels] = sum over the other labels of the product of the operands, each
read at its labels (numpy's einsum: a label repeated in one term reads the diagonal, "..."
stands for broadcast axes, an implicit output is "..." then the labels used once, in ASCII
order). The equation is parsed and planned in Python; operands are contracted pairwise from
left to right, each step keeping the labels the output or a later operand still needs.

A step is a batched matrix product (gemm/product.py) when it can be (two operands,
no repeated or broadcast labels, no label summed away inside one operand, a dtype the kernel
has): labels group into batch (both operands and kept), m (first only), n (second only) and k
(both, summed), and an operand not already laid out as (batch, m, k) / (batch, k, n) or their
transposes is copied into that order first. Any other step is the generic contraction below.
Accumulation order: the products' (k ascending); for the generic step the summed
labels are walked in row-major order of their first appearance, and each output's terms are
added left to right in blocks of 8, the block sums combined by core/summation.py's binary
counter (error growing like log2 of the number of terms). No transcendental functions, so both paths are exact-mode kernels. float16 and
bfloat16 are computed in float32 and rounded once at the end.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from ... import dtypes as _dt
from ...threads import ensure_layer
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN, put
from ..core.floats import FLOATS, compute_dtype, widen
from ..core.jit import Variants
from ..core.summation import DEPTH, fold, push
from ..gemm.matmul import MatMul
from ..gemm.product import Product

EXACT = False
TERMS = 8       # terms added left to right before a block sum joins the binary counter

# ----------------------------------------------------------------------------- generic step

def _contract(x0, x1, out, sizes, s0, s1, n_out, two, zero, tasks, stacks):
    """out[t] = sum over the summed labels of x0[.] (* x1[.]): ``sizes`` are the label extents,
    output labels first (row-major over ``out``), ``s0``/``s1`` each operand's element stride
    per label (0 where it lacks the label; a repeated label's strides add up)."""
    nl = sizes.size
    total = 1
    for d in range(n_out, nl):
        total *= sizes[d]
    for t in prange(tasks):
        o0 = 0
        o1 = 0
        rem = np.int64(t)   # a copy: numba's parfor pass refuses reassigning the loop index
        for d in range(n_out - 1, -1, -1):
            q = rem // sizes[d]
            idx = rem - q * sizes[d]
            rem = q
            o0 += idx * s0[d]
            o1 += idx * s1[d]
        stack = stacks[numba.get_thread_id()]      # this thread's partial sums
        top = 0
        b = 0
        part = zero
        for r in range(total):
            a0 = o0
            a1 = o1
            rem = r
            for d in range(nl - 1, n_out - 1, -1):
                q = rem // sizes[d]
                idx = rem - q * sizes[d]
                rem = q
                a0 += idx * s0[d]
                a1 += idx * s1[d]
            v = x0[a0] * x1[a1] if two else x0[a0]
            part = v if r % TERMS == 0 else part + v
            if r % TERMS == TERMS - 1 or r == total - 1:
                b += 1
                top = push(stack, top, b, part)
        put(out, t, fold(stack, top) if total > 0 else zero, EXACT)


_CONTRACT = Variants(_contract, "einsum_contract", parallel=True)


# ----------------------------------------------------------------------------- equation

def parse(equation: str, ranks, fail):
    """The terms as label lists (letters; ellipsis axes become ints 0..E-1, right-aligned)
    and the output labels."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        fail(f"equation {equation!r} has {len(terms)} operand terms for {len(ranks)} inputs")
    n_ell = 0
    parsed = []
    for term, rank in zip(terms, ranks):
        head, dots, tail = term.partition("...")
        if "." in head or "." in tail:
            fail(f"equation {equation!r}: misplaced '.'")
        for c in head + tail:
            if not c.isascii() or not c.isalpha():
                fail(f"equation {equation!r}: {c!r} is not a label")
        letters = len(head) + len(tail)
        e = rank - letters
        if e < 0 or (e > 0 and not dots):
            fail(f"term {term!r} does not match an input of rank {rank}")
        n_ell = max(n_ell, e)
        parsed.append((list(head), e if dots else 0, list(tail)))
    terms_out = [h + list(range(n_ell - e, n_ell)) + t for h, e, t in parsed]
    uses_ell = any("..." in t for t in terms)
    if arrow:
        head, dots, tail = rhs.partition("...")
        if "." in head or "." in tail or (dots and not uses_ell and n_ell):
            fail(f"equation {equation!r}: misplaced '.'")
        out = list(head) + (list(range(n_ell)) if dots else []) + list(tail)
        if not dots and n_ell:
            fail(f"equation {equation!r}: the output must keep the '...' axes")
        seen = {x for t in terms_out for x in t}
        for c in out:
            if isinstance(c, str) and (c not in seen or out.count(c) > 1):
                fail(f"equation {equation!r}: output label {c!r} is not an input label "
                     "or is repeated")
    else:
        counts = {}
        for t in terms_out:
            for c in t:
                if isinstance(c, str):
                    counts[c] = counts.get(c, 0) + 1
        out = list(range(n_ell)) + sorted(c for c, n in counts.items() if n == 1)
    return terms_out, out


def label_sizes(terms, shapes, fail):
    """Extent of every label; an ellipsis axis of extent 1 broadcasts."""
    sizes = {}
    for term, shape in zip(terms, shapes):
        for c, d in zip(term, shape):
            old = sizes.get(c)
            if old is None or old == d:
                sizes[c] = d
            elif isinstance(c, int) and (old == 1 or d == 1):
                sizes[c] = max(old, d)
            else:
                fail(f"label {'...' if isinstance(c, int) else repr(c)} has extents {old} and {d}")
    return sizes


def _strides(term, shape, sizes):
    """label -> element stride of a C-contiguous operand (repeated labels add up; a
    broadcast axis reads with stride 0)."""
    out = {}
    step = 1
    for c, d in zip(term[::-1], shape[::-1]):
        out[c] = out.get(c, 0) + (step if d == sizes[c] or d != 1 else 0)
        step *= d
    return out


# ----------------------------------------------------------------------------- plan

class _Generic:
    """One generic contraction step of one or two operands into ``labels``."""

    def __init__(self, exact, terms, shapes, sizes, labels, dtype):
        order = list(labels)
        for t in terms:
            for c in t:
                if c not in order:
                    order.append(c)
        st = [_strides(t, s, sizes) for t, s in zip(terms, shapes)]
        self.sizes = np.array([sizes[c] for c in order], dtype=np.int64)
        self.s0 = np.array([st[0].get(c, 0) for c in order], dtype=np.int64)
        self.s1 = np.array([st[-1].get(c, 0) if len(st) > 1 else 0 for c in order],
                           dtype=np.int64)
        self.n_out = len(labels)
        self.two = len(terms) == 2
        self.tasks = math.prod(sizes[c] for c in labels)
        work = self.tasks * max(1, math.prod(int(s) for s in self.sizes[self.n_out:]))
        self.fn = _CONTRACT.get(exact, work >= PARALLEL_MIN and self.tasks > 1)

    def __call__(self, ctx, x0, x1, out):
        ensure_layer()          # numba.get_thread_id needs the threading layer running
        stacks = scratch(ctx, out.dtype, (numba.config.NUMBA_NUM_THREADS, DEPTH))
        self.fn(x0, x0 if x1 is None else x1, out, self.sizes, self.s0, self.s1, self.n_out,
                self.two, out.dtype.type(0), self.tasks, stacks)


def _matrix_layout(term, batch, rows, cols, extents, shape) -> tuple:
    """How an operand labelled ``term`` is read as ``extents`` = (nb, r, c) stacked r x c
    matrices over the labels batch, rows, cols: (element strides of a matrix, None) when
    its labels come in that order or with rows and cols swapped; otherwise ((c, 1), the copy
    (permutation, stacked shape, operand shape) that puts them in that order first)."""
    nb, r, c = extents
    if term == batch + rows + cols:
        return (c, 1), None
    if term == batch + cols + rows:
        return (1, r), None
    return (c, 1), ([term.index(x) for x in batch + rows + cols], extents, shape)


def _in_order(ctx, dtype, copy, x):
    """``x``, or its copy in arena scratch with its axes permuted as ``copy`` says."""
    if copy is None:
        return x
    perm, stacked, src = copy
    a = scratch(ctx, dtype, (math.prod(stacked),))
    np.copyto(a.reshape([src[p] for p in perm]), x.reshape(src).transpose(perm))
    return a


class _PairProduct:
    """Two operands as a batched matrix product (see the module docstring)."""

    def __init__(self, exact, terms, shapes, sizes, labels, dtype):
        ta, tb = terms
        batch = [c for c in labels if c in ta and c in tb]
        ms = [c for c in labels if c in ta and c not in tb]
        ns = [c for c in labels if c in tb and c not in ta]
        ks = [c for c in ta if c in tb and c not in labels]
        nb, m, n, k = (math.prod(sizes[c] for c in g) for g in (batch, ms, ns, ks))
        sa, self.copy_a = _matrix_layout(ta, batch, ms, ks, (nb, m, k), shapes[0])
        sb, self.copy_b = _matrix_layout(tb, batch, ks, ns, (nb, k, n), shapes[1])
        made = batch + ms + ns
        self.reorder = None if made == list(labels) else (
            [sizes[c] for c in made], [made.index(c) for c in labels], (nb, m, n))
        offa = np.arange(nb, dtype=np.int64) * (m * k)
        offb = np.arange(nb, dtype=np.int64) * (k * n)
        self.product = Product(dtype, m, n, k, sa, sb, offa, offb, exact=exact)
        self.dtype = dtype

    @staticmethod
    def eligible(terms, shapes, sizes, labels, dtype) -> bool:
        if len(terms) != 2 or dtype not in MatMul.ALLOWED:
            return False
        for t, s in zip(terms, shapes):
            if len(set(t)) != len(t) or any(sizes[c] != d for c, d in zip(t, s)):
                return False
        ta, tb = terms
        return all(c in labels or c in tb for c in ta) and all(c in labels or c in ta for c in tb)

    def __call__(self, ctx, x0, x1, out):
        a = _in_order(ctx, self.dtype, self.copy_a, x0)
        b = _in_order(ctx, self.dtype, self.copy_b, x1)
        if self.reorder is None:
            self.product(a, b, out)
            return
        made_shape, perm, flat = self.reorder
        tmp = scratch(ctx, self.dtype, (math.prod(flat),))
        self.product(a, b, tmp)
        np.copyto(out.reshape([made_shape[p] for p in perm]),
                  tmp.reshape(made_shape).transpose(perm))


class Einsum(OpKernel):
    tile_products = True
    supports_exact = True
    ALLOWED = FLOATS | _dt.INTEGERS

    def __init__(self, node):
        super().__init__(node)
        eq = node.attr("equation")
        if eq is None:
            node.fail("attribute 'equation' is required")
        self.equation = eq.decode() if isinstance(eq, bytes) else str(eq)

    def infer(self, ctx: InferContext) -> None:
        n = ctx.n_inputs
        if n == 0:
            ctx.fail("at least one input is required")
        dt = ctx.same_dtype(*range(n))
        ctx.check_dtype(0, self.ALLOWED)
        shapes = [tuple(ctx.shape(i)) for i in range(n)]
        terms, out = parse(self.equation, [len(s) for s in shapes], ctx.fail)
        sizes = label_sizes(terms, shapes, ctx.fail)
        ctx.set_output(0, dt, [sizes[c] for c in out])
        work = compute_dtype(dt)
        if n == 1 and terms[0] == out and len(set(out)) == len(out):
            ctx.prepared = ([(None, 0)], work)
            return
        steps = []
        cur_t, cur_s = terms[0], shapes[0]
        for i in range(1, max(n, 2)):
            step_terms, step_shapes = [cur_t] + terms[i:i + 1], [cur_s] + shapes[i:i + 1]
            if i >= n - 1:
                labels = list(out)
            else:
                later = set(out).union(*terms[i + 1:])
                labels = []
                for c in cur_t + terms[i]:
                    if c in later and c not in labels:
                        labels.append(c)
            cls = _PairProduct if _PairProduct.eligible(step_terms, step_shapes, sizes, labels,
                                                        work) else _Generic
            steps.append((cls(ctx.exact, step_terms, step_shapes, sizes, labels, work),
                          math.prod(sizes[c] for c in labels)))
            cur_t, cur_s = labels, tuple(sizes[c] for c in labels)
        ctx.prepared = (steps, work)

    def run(self, ctx: RunContext) -> None:
        steps, work = ctx.prepared
        out = ctx.flat_out[0]
        ins = ctx.flat_in
        ins = [widen(ctx, x, work) for x in ins]
        final = out if out.dtype == work else scratch(ctx, work, out.shape)
        cur = ins[0]
        for i, (step, size) in enumerate(steps):
            if step is None:
                np.copyto(final, cur)
                break
            dst = final if i == len(steps) - 1 else scratch(ctx, work, (size,))
            other = ins[i + 1] if len(ins) > 1 else None
            step(ctx, cur, other, dst)
            cur = dst
        if final is not out:
            np.copyto(out, final, casting="unsafe")

