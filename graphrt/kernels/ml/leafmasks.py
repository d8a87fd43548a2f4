"""Tree walks by leaf bitmasks, for ensembles whose trees have at most 64 leaves (LightGBM's
and scikit-learn's histogram boosting by default): the scan of the QuickScorer algorithm
(Lucchese et al., SIGIR 2015), sixteen rows at a time.

Number the leaves of a tree 0, 1, ... from left to right (a node's first child, the one
``x[f] <= t'`` sends a row to, before its second; forest.py). Give each interior node n the
mask m_n of 64 bits with the bits of the leaves under its first child cleared. For a row x,

    v(x) = AND of m_n over the nodes n whose test fails (x[f_n] <= t'_n is false),

and the leaf x reaches is the lowest set bit of v(x). Proof: every leaf left of the reached
leaf e lies under the first child of a node on e's path where the row went to the second
child, i.e. whose test failed, so its bit is cleared; e's bit is never cleared, since a node
whose first subtree holds e is on e's path with its test holding. The leaf's weights are
then added exactly as the lockstep walk adds them (tree by tree in the trees' order), so the
two give the same bits. A NaN fails every ``<=``, as in the walk; nodes that send NaN to
their first child read the row's second copy (NaN as -inf) through their feature word, as in
the walk; a node whose t' is NaN always fails and its mask is part of the tree's initial v.

For one feature word the tests ``x <= t'`` that fail are those with t' < x: a prefix of the
word's nodes sorted by t'. The scan (LLVM IR of its own, below) takes the words in turn and
their nodes in ascending t', sixteen rows in vector lanes: a compare gives the lanes whose
test fails, those lanes' v of the node's tree are ANDed with m_n, and the word is done at
the first node whose test holds in all sixteen lanes. Each v is one 64-bit lane: a chunk of
256 trees keeps its 16 x 256 v words (32 KiB) in the level-1 cache. The work is about the
nodes of the ensemble per sixteen rows (the fraction scanned grows towards 1 with the
lanes), against the lockstep walk's levels times rows, which for leaf-wise trees is
dominated by the longest of eight paths: LightGBM's 500 trees of 63 leaves, 100,000 rows,
one thread: 0.45 s walked, 0.31 s scanned; 5 x 100 trees of 31 leaves 0.47 -> 0.15 s.
"""
from __future__ import annotations

import threading

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..core.jit import file_tag
from ..core.objcode import compiled_object, loaded
from ..gemm.micro_ir import KERNEL_PATH, call_codegen, once

GROUP = 16          # rows scanned together (vector lanes)
CHUNK = 256         # trees whose v words are held at once (GROUP x CHUNK x 8 bytes)
MOST_LEAVES = 64
# Where the scan is used when a tree ensemble fits (measured faster than the lockstep walk
# on AVX-512; the scan itself is portable LLVM IR, and the tests run it everywhere)
USE = KERNEL_PATH == "avx512"
SOURCE_TAG = file_tag(__file__)
_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


# The scan's costs in steps of the lockstep walk (one row one level down one tree), as
# measured on this machine's AVX-512 (100,000 rows, LightGBM and histogram-boosting
# ensembles, 1 and 2 threads): a node scanned for GROUP rows about 1.8, a tree's v words set
# up and read out about 1.5 a row.
NODE_COST, TREE_COST = 1.8, 1.5


def pays(leaf: np.ndarray, roots: np.ndarray, lockstep_levels: int) -> bool:
    """Whether the trees (nodes roots[k]..roots[k+1], ``leaf`` per node) all have at most 64
    leaves and their scan costs a row less than walking ``lockstep_levels`` (the levels the
    lockstep walk takes at least, over all trees). Balanced trees cost the walk no more
    than their depth and stay with it (scikit-learn's histogram boosting, depth 6: 149 ms
    walked, 158 scanned); trees deep along a few paths are walked to the deepest of eight
    rows' paths."""
    if not roots.size or int(np.add.reduceat(leaf.astype(np.int64), roots).max()) > MOST_LEAVES:
        return False
    interior = leaf.size - int(leaf.sum())
    return interior / GROUP * NODE_COST + TREE_COST * roots.size < lockstep_levels


def tables(kids, leaf, level, roots, words, t, row: int) -> tuple:
    """The scan's tables for trees in forest.py's numbering (``kids`` [2 n] children in
    walking order, ``leaf`` and ``level`` per node, ``roots``), ``words`` the nodes' feature
    words (< ``row``) and ``t`` their t' in the input's type: (start [chunks * row + 1]:
    where each (chunk, word)'s nodes begin; t' [m], tree within the chunk (uint32 [m]) and
    mask (uint64 [m]) of the interior nodes so ordered, by ascending t' within a word; the
    initial v of each tree (uint64); leaf_at [trees * 64]: the leaf (node number) numbered
    i of tree k at 64 k + i)."""
    n = leaf.size
    first, second = kids[0::2], kids[1::2]
    tree = np.repeat(np.arange(roots.size), np.diff(np.append(roots, n)))
    # leaves under each node (children before parents, level by level from the deepest),
    # then each node's first leaf number within its tree (parents before children)
    by_level = np.argsort(level, kind="stable")
    ends = np.searchsorted(level[by_level], np.arange(int(level.max(initial=0)) + 2))
    count = leaf.astype(np.int64)
    for d in range(ends.size - 2, -1, -1):
        at = by_level[ends[d]:ends[d + 1]]
        at = at[~leaf[at]]
        count[at] = count[first[at]] + count[second[at]]
    lo = np.zeros(n, np.int64)
    for d in range(ends.size - 1):
        at = by_level[ends[d]:ends[d + 1]]
        at = at[~leaf[at]]
        lo[first[at]] = lo[at]
        lo[second[at]] = lo[at] + count[first[at]]
    one = np.uint64(1)
    under_first = ((one << count[first].astype(np.uint64)) - one) << lo[first].astype(np.uint64)
    mask = ~under_first
    interior = ~leaf
    never = interior & np.isnan(t)
    init = np.full(roots.size, ~np.uint64(0), np.uint64)
    np.bitwise_and.at(init, tree[never], mask[never])
    chunks = -(-roots.size // CHUNK)
    take = np.nonzero(interior & ~never)[0]
    key = (tree[take] // CHUNK) * row + words[take].astype(np.int64)
    order = np.lexsort((t[take], key))
    take = take[order]
    start = np.searchsorted(key[order], np.arange(chunks * row + 1)).astype(np.int64)
    leaves = np.nonzero(leaf)[0]
    leaf_at = np.zeros(roots.size * MOST_LEAVES, np.int64)
    leaf_at[tree[leaves] * MOST_LEAVES + lo[leaves]] = leaves
    return (start, np.ascontiguousarray(t[take]), (tree[take] % CHUNK).astype(np.uint32),
            mask[take], init, leaf_at)


def _scan_text(dtype: np.dtype) -> str:
    """scan(xt, row, start, t, tree, mask, v): for each word c < row, xt[16 c : 16 c + 16]
    the sixteen rows' values, the nodes p in start[c]..start[c + 1] in turn until one whose
    test holds in every lane: v[16 tree[p] + j] &= mask[p] in the lanes j where
    xt[16 c + j] <= t[p] fails. v is stored whole (a masked store would stop the next load
    of the same words from taking the stored value in flight)."""
    ft = _TYPES[dtype]
    g = GROUP
    vx, vi, vm = f"<{g} x {ft}>", f"<{g} x i64>", f"<{g} x i1>"
    return f"""
define void @graphrt_leafmask_scan_{dtype.name}(ptr noalias %xt, i64 %row, ptr noalias %start,
    ptr noalias %thr, ptr noalias %tree, ptr noalias %mask, ptr noalias %v) {{
entry:
  %some = icmp sgt i64 %row, 0
  br i1 %some, label %word, label %exit
word:
  %c = phi i64 [0, %entry], [%c1, %next]
  %xo = mul i64 %c, {g}
  %xp = getelementptr {ft}, ptr %xt, i64 %xo
  %x = load {vx}, ptr %xp, align 4
  %sp = getelementptr i64, ptr %start, i64 %c
  %s = load i64, ptr %sp
  %ep = getelementptr i64, ptr %sp, i64 1
  %e = load i64, ptr %ep
  %nodes = icmp slt i64 %s, %e
  br i1 %nodes, label %node, label %next
node:
  %p = phi i64 [%s, %word], [%p1, %fail]
  %tp = getelementptr {ft}, ptr %thr, i64 %p
  %t = load {ft}, ptr %tp
  %t0 = insertelement {vx} poison, {ft} %t, i64 0
  %tv = shufflevector {vx} %t0, {vx} poison, <{g} x i32> zeroinitializer
  %holds = fcmp ole {vx} %x, %tv
  %hb = bitcast {vm} %holds to i{g}
  %all = icmp eq i{g} %hb, -1
  br i1 %all, label %next, label %fail
fail:
  %kp = getelementptr i32, ptr %tree, i64 %p
  %k = load i32, ptr %kp
  %k64 = zext i32 %k to i64
  %vo = mul i64 %k64, {g}
  %vp = getelementptr i64, ptr %v, i64 %vo
  %vv = load {vi}, ptr %vp, align 8
  %mp = getelementptr i64, ptr %mask, i64 %p
  %m = load i64, ptr %mp
  %m0 = insertelement {vi} poison, i64 %m, i64 0
  %mv = shufflevector {vi} %m0, {vi} poison, <{g} x i32> zeroinitializer
  %keep = sext {vm} %holds to {vi}
  %mk = or {vi} %mv, %keep
  %nv = and {vi} %vv, %mk
  store {vi} %nv, ptr %vp, align 8
  %p1 = add i64 %p, 1
  %more = icmp slt i64 %p1, %e
  br i1 %more, label %node, label %next
next:
  %c1 = add i64 %c, 1
  %words = icmp slt i64 %c1, %row
  br i1 %words, label %word, label %exit
exit:
  ret void
}}
"""


def _names() -> list[str]:
    return [f"graphrt_leafmask_scan_{d.name}" for d in _TYPES]


def _load() -> np.ndarray:
    obj = compiled_object("leafmask", [SOURCE_TAG, str(GROUP)],
                          lambda: "\n".join(_scan_text(d) for d in _TYPES), "trees")
    return loaded(obj, _names())


_LOCK = threading.Lock()
_LOADED: dict = {}


def scan_address(dtype) -> int:
    """The address of the scan for inputs of ``dtype``, loaded once per process."""
    table = once(_LOADED, _LOCK, (), _load)
    return int(table[list(_TYPES).index(np.dtype(dtype))])


def _signature(context, sig):
    """The scan's function type: pointers to the element types of the arrays passed."""
    def at(i):
        return context.get_value_type(sig.args[i].dtype).as_pointer()
    return ir.FunctionType(ir.VoidType(), [at(1), ir.IntType(64), at(3), at(5), at(6), at(7),
                                           at(8)])


@intrinsic
def scan(typingctx, addr, xt, row, start, start_off, t, tree, mask, v):
    """The scan at ``addr`` on xt, start[start_off:], t, tree, mask and v."""
    sig = types.void(addr, xt, row, start, start_off, t, tree, mask, v)
    layout = [(1, None), 2, (3, 4), (5, None), (6, None), (7, None), (8, None)]
    return sig, call_codegen(_signature, layout)
