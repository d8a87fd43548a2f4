"""Tree ensembles laid out flat for fast walking: the engine behind TreeEnsemble,
TreeEnsembleRegressor and TreeEnsembleClassifier.

A ``Forest`` is built once per node from any of the three attribute forms. Every test
``x[f] <mode> t`` with mode LEQ, LT, GTE or GT is rewritten as ``x[f] <= t'`` in the input's
element type, swapping the two children where the test was a "greater" one:

    LEQ: t' = down(t)         GT:  t' = down(t), children swapped
    LT:  t' = below(t)        GTE: t' = below(t), children swapped

with ``down(t)`` the largest value of the input type <= t and ``below(t)`` the largest < t
(NaN for t = -inf, so that the test never holds). For x of that type these are the same tests,
bit for bit, as comparing in float64. A NaN fails every ``<=`` and so takes the second child.
Where the original test and ``nodes_missing_value_tracks_true`` send a NaN to the first child
instead, the node reads its feature from a second copy of the row in which NaNs are -inf
(which passes every ``<=`` that some number passes): the walk copies each block of rows as
[x[:W], x[:W] with NaN as -inf], W the features the trees read, and such a node's feature
word is f + W. So the step is one load, one compare and one subtraction whatever the NaN
routing. (A node that sends NaN first and whose t' is NaN would need a third copy; an
ensemble with one goes to the interpreter.)

Nodes are renumbered tree by tree in breadth-first order with the two children side by side,
so node i goes on to ``second[i] - (test holds)``. A leaf's split is NaN (its test never
holds) and its ``second`` is itself, so a leaf goes on to itself: every tree is walked a
fixed number of levels, with no branch that depends on the data: its depth, or for a tree
deep along a few paths only, the levels that finish 99% of the walks that go left or right
at even odds, after which a group that is not all at leaves walks on until it is. Rows go
through a tree eight at a time, eight independent chains of loads in flight; blocks of 256
rows (8,192 where the nodes take more than a MiB) go through all the trees, in parallel over
blocks for large batches. Fewer than eight
rows go through eight trees at a time instead. Each row adds its leaves' weights into an
accumulator of the input's type tree by tree in the order of the trees, so the result does
not depend on the batch, the block or the thread count.

Ensembles with EQ, NEQ or set-membership tests, and MIN/MAX aggregation, are walked by the
general interpreter (``_interpret``), a row at a time, testing in float64.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange
from numba.cpython.unsafe.numbers import trailing_zeros

from ...threads import ensure_layer
from ..core.jit import rebind, task_forms
from . import leafmasks

LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
AVERAGE, SUM, MIN, MAX = range(4)
LANES_OF = FINISH = DONE = KEEP = None    # rebound per walk variant (see _lanes)
ONE, TWO = np.uint64(1), np.uint64(2)
BLOCK = 256                                    # rows that go through all the trees together
LARGE_BLOCK = 32 * BLOCK                       # the same, nodes over CACHED_NODES_BYTES
CACHED_NODES_BYTES = 1 << 20
LANES = 8                                      # rows stepped through a tree together
PARALLEL_WORK = 1 << 16                        # rows x trees from which blocks go parallel
MAX_COPIES = 4                                 # how far shared subtrees may be unshared


def down(t: np.ndarray, dtype) -> np.ndarray:
    """The largest value of ``dtype`` <= t (t in float64)."""
    dtype = np.dtype(dtype)
    f = t.astype(dtype)
    return np.where(f > t, np.nextafter(f, dtype.type(-np.inf)), f)


def below(t: np.ndarray, dtype) -> np.ndarray:
    """The largest value of ``dtype`` < t; NaN where there is none (t = -inf) or t is NaN."""
    dtype = np.dtype(dtype)
    f = down(t, dtype)
    f = np.where(f == t, np.nextafter(f, dtype.type(-np.inf)), f)
    return np.where(np.isneginf(t), dtype.type(np.nan), f)


class Forest:
    """Trees from flat per-node arrays in any numbering."""

    def __init__(self, node, roots, is_leaf, feature, mode, split, true_id, false_id, nan_true,
                 pair_start, pair_target, pair_weight, n_targets: int, members=None):
        """``roots``: the root of each tree, in summing order; per node: ``is_leaf``,
        ``feature``, ``mode`` (0..6), ``split`` (float64), ``true_id``/``false_id`` (node
        numbers), ``nan_true``; leaf i's (target, weight) pairs are
        ``pair_*[pair_start[i]:pair_start[i + 1]]``. ``members``: (begin, end, values), the
        set of a MEMBER test at node i being ``values[begin[i]:end[i]]``."""
        self.node = node
        self.n_trees = int(roots.size)
        self.n_targets = int(n_targets)
        n = is_leaf.size
        interior = ~is_leaf
        if np.any(interior & ((mode < 0) | (mode > MEMBER))):
            node.fail("a node has an unknown test mode")
        if np.any(interior & (feature < 0)):
            node.fail("a feature id is negative")
        for ids in (true_id, false_id):
            if np.any(interior & ((ids < 0) | (ids >= n))):
                node.fail("a true/false node id does not name a node of the tree")
        if roots.size and (roots.min() < 0 or roots.max() >= n):
            node.fail("a tree root is out of range")
        if pair_target.size and (pair_target.min() < 0 or pair_target.max() >= self.n_targets):
            node.fail(f"a leaf's target/class id lies outside [0, {self.n_targets})")
        if np.any(is_leaf & (pair_start[1:] == pair_start[:-1])):
            node.fail("a leaf has no weight")
        self.max_feature = int(feature[interior].max(initial=-1))
        self.width = max(self.max_feature + 1, 1)      # W of the module docstring
        self.tests_equality = bool(np.any(interior & (mode >= EQ)))
        # the two children in walking order, and where a NaN goes
        swap = interior & ((mode == GT) | (mode == GTE))
        first = np.where(swap, false_id, true_id)
        second = np.where(swap, true_id, false_id)
        nan_to_true = interior & ((nan_true != 0) | (mode == NEQ))
        nan_first = interior & (np.where(nan_to_true, true_id, false_id) == first) & \
            (first != second)
        limit = MAX_COPIES * max(n, 1) + roots.size
        order, kids, level, depth, sizes, count = _layout(
            roots.astype(np.int64), is_leaf.astype(np.bool_), first.astype(np.int64),
            second.astype(np.int64), int(limit))
        if count < 0:
            node.fail("the nodes of a tree form a cycle or share subtrees too widely")
        self.depth = depth.astype(np.int32)
        self.common = _common_depth(level, is_leaf[order], sizes, depth)
        self.roots = (np.cumsum(sizes) - sizes).astype(np.int32)
        leaf = is_leaf[order]
        self.nan_first = bool(np.any(nan_first))
        # trees of at most 64 leaves scanned by leaf bitmasks where that costs less
        # (leafmasks.py)
        self.masks_fit = leafmasks.pays(leaf, self.roots, int(self.common.sum()))
        self._level = level.astype(np.int32) if self.masks_fit else None
        self.row = self.width * (2 if self.nan_first else 1)     # a copied row's length
        self.feature = np.where(leaf, 0, feature[order]).astype(np.int64)
        self._meta = (self.feature + self.width * nan_first[order]).astype(np.uint32)
        strict = (mode == LT) | (mode == GTE)
        self.needs_interpreter = self.tests_equality or bool(np.any(
            nan_first & (np.isnan(split) | (strict & np.isneginf(split)))))
        self._second = np.where(leaf, np.arange(order.size), kids[1::2]).astype(np.uint32)
        self.slot = np.where(leaf, np.cumsum(leaf) - 1, 0).astype(np.int32)
        # every block of rows reads all the trees: many more rows a block where they do
        # not stay in the level-2 cache, so that fewer blocks stream them from memory
        # (BLOCK rows keep their copy in the level-1 cache; a random forest of 7 MB at
        # 100,000 rows took 760 ms in blocks of 1,024 rows, 260 in blocks of 8,192)
        self.block = BLOCK if 16 * order.size <= CACHED_NODES_BYTES else LARGE_BLOCK
        self._order, self._kids, self._leaf = order, kids, leaf
        self._split, self._mode = split[order], mode[order]
        self._nan_to_true, self._members = nan_to_true, members
        self._weights, self._general, self._walk_args, self._masks = {}, None, {}, {}
        # the (target, weight) pairs of each renumbered leaf, in their original order
        self.pair_start, take = _ranges(np.where(is_leaf, pair_start[:-1], 0),
                                        np.where(is_leaf, pair_start[1:], 0), order)
        self.pair_target = pair_target[take].astype(np.int32)
        self.pair_weight = pair_weight[take].astype(np.float64)
        counts = np.diff(self.pair_start)[leaf]
        self.dense = 0 if np.all(counts == 1) else self.n_targets
        if not self.dense:           # one pair a leaf: its weight and target by leaf slot
            self.weight, self.target = self.pair_weight, self.pair_target
        else:                        # a leaf's weights as a row of n_targets (0 where none)
            rows = np.repeat(np.arange(counts.size), counts)
            w = np.zeros((counts.size, self.n_targets))
            np.add.at(w, (rows, self.pair_target), self.pair_weight)
            self.weight, self.target = w.reshape(-1), np.zeros(0, np.int32)

    def thresholds(self, dtype) -> np.ndarray:
        """Each node's t' in ``dtype`` (module docstring; NaN at leaves)."""
        dtype = np.dtype(dtype)
        m, s = self._mode, self._split
        strict = (m == LT) | (m == GTE)
        t = np.where(strict, below(s, dtype), down(s, dtype)).astype(dtype)
        t[self._leaf] = np.nan
        return t

    def nodes(self, dtype) -> tuple:
        """The walk's nodes for inputs of ``dtype`` (float32 or float64): 16 bytes a node,
        so that a step touches one cache line: uint32 words [4 n], node i's feature word at
        4i and its second child at 4i + 1, and its t' in the last 8 bytes (float32 at word
        4i + 2, or a float64 over 4i + 2 and 4i + 3), read as thresholds[(i << shift) +
        offset] from the same memory. Gives (words, thresholds, shift, offset); made once
        per type by :meth:`scores`."""
        dtype = np.dtype(dtype)
        t = self.thresholds(dtype)
        words = np.zeros((t.size, 4), np.uint32)
        words[:, 0], words[:, 1] = self._meta, self._second
        words[:, 2:2 + dtype.itemsize // 4].view(dtype)[:, 0] = t
        flat = words.reshape(-1)
        shift, offset = (2, 2) if dtype.itemsize == 4 else (1, 1)
        return flat, flat.view(dtype), np.uint64(shift), np.uint64(offset)

    def mask_tables(self, dtype) -> tuple:
        """leafmasks.tables for inputs of ``dtype``, with the leaves as weight slots; made
        once per type."""
        dtype = np.dtype(dtype)
        got = self._masks.get(dtype)
        if got is None:
            start, t, tree, mask, init, leaf_at = leafmasks.tables(
                self._kids, self._leaf, self._level, self.roots.astype(np.int64), self._meta,
                self.thresholds(dtype), self.row)
            got = self._masks[dtype] = (leafmasks.scan_address(dtype), start, t, tree, mask,
                                        init, self.slot[leaf_at])
        return got

    def general(self):
        """The interpreter's tables, made on first use: feature, original mode, float64
        split, true and false child, NaN to true, leaf, and the sets of MEMBER tests."""
        if self._general is None:
            back = self._kids.reshape(-1, 2)
            mode = self._mode.astype(np.int64)
            greater = (mode == GT) | (mode == GTE)
            zero = np.zeros(self._nan_to_true.size, np.int64)
            begin, end, values = self._members if self._members is not None else \
                (zero, zero, np.zeros(0))
            member_start, take = _ranges(begin, end, self._order)
            self._general = (
                self.feature, mode, self._split.astype(np.float64),
                np.where(greater, back[:, 1], back[:, 0]).astype(np.int64),
                np.where(greater, back[:, 0], back[:, 1]).astype(np.int64),
                self._nan_to_true[self._order].astype(np.bool_), self._leaf.astype(np.bool_),
                member_start.astype(np.int64), np.asarray(values, np.float64)[take])
        return self._general

    def interprets(self, agg: int) -> bool:
        """Whether :meth:`walk_call` walks with the general interpreter (which needs ``got``)."""
        return self.needs_interpreter or agg in (MIN, MAX)

    def check_features(self, ctx, n_features: int) -> None:
        if self.max_feature >= n_features:
            ctx.fail(f"the trees test feature {self.max_feature}; the input has {n_features}")

    def walk_call(self, x: np.ndarray, agg: int, acc: np.ndarray, take) -> tuple:
        """The compiled call (fn, args) that makes acc[r, t] = the aggregate (before base
        values) of the weights for target t of the leaves that row r of ``x`` [rows, F]
        (C-contiguous) reaches, added in acc's type (that of x, as onnxruntime does); MIN/MAX
        leave a target no leaf feeds at 0. ``take(dtype, shape)`` gives scratch."""
        rows, f = x.shape
        if self.interprets(agg):
            return _interpret, (x, self.roots, *self.general(), self.pair_start,
                                self.pair_target, self.weights(acc.dtype, pairs=True), agg,
                                acc, take(np.bool_, acc.shape))
        block = self.block
        masks = False
        if rows < LANES:
            how = "trees"
        else:
            # the ensemble's trees scanned by leaf bitmasks, sixteen rows at a time
            masks = leafmasks.USE and self.masks_fit and rows >= leafmasks.GROUP
            step = leafmasks.GROUP if masks else LANES
            threads = numba.get_num_threads()
            how = threads > 1 and rows * max(self.n_trees, 1) >= PARALLEL_WORK and \
                rows >= 2 * step
            if how:
                # a batch of fewer than two blocks a thread gets smaller blocks
                block = min(block, -(-rows // (threads * step)) * step)
            # the row walks take their scratch by numba.get_thread_id, which links against
            # the threading layer even in serial code
            ensure_layer()
        key = (x.dtype, acc.dtype)
        fixed = self._walk_args.get(key)
        if fixed is None:
            fixed = self._walk_args[key] = (
                self.roots, self.depth, self.common, self.nodes(x.dtype), self.slot,
                self.weights(acc.dtype), self.target, self.dense)
        tasks = numba.config.NUMBA_NUM_THREADS if how is True else 1
        blocks = () if how == "trees" else (-(-rows // block),)
        if masks:
            roots, depth, _, nodes, slot, weight, target, dense = fixed
            work = take(x.dtype, (tasks, (min(rows, block) + leafmasks.GROUP) * self.row))
            v = take(np.uint64, (tasks, leafmasks.CHUNK * leafmasks.GROUP))
            return _MASK_WALKS[how], (x.reshape(-1), f, rows, self.width, self.nan_first,
                                      work, v, block, roots, depth, nodes, slot, weight,
                                      target, dense, *self.mask_tables(x.dtype),
                                      acc.reshape(-1), self.n_targets, *blocks)
        work = take(x.dtype, (tasks, min(rows, block) * self.row))
        leaves = take(np.uint32, (self.n_trees,)) if how == "trees" else _NO_LEAVES
        return _WALKS[how], (x.reshape(-1), f, rows, self.width, self.nan_first, work, leaves,
                             block, *fixed, acc.reshape(-1), self.n_targets, *blocks)

    def weights(self, dtype, pairs: bool = False) -> np.ndarray:
        """The leaf weights (by slot, or ``pairs``) in the accumulator's type."""
        key = (np.dtype(dtype), pairs)
        got = self._weights.get(key)
        if got is None:
            got = self._weights[key] = (self.pair_weight if pairs else self.weight).astype(dtype)
        return got


def _ranges(begin, end, order):
    """For the ranges [begin[i], end[i]) taken in ``order``: their new starts (one more
    than ``order``) and their old positions, concatenated."""
    counts = (end - begin)[order]
    start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    take = np.repeat(begin[order] - start[:-1], counts) + np.arange(start[-1])
    return start.astype(np.int32), take.astype(np.int64)


def _layout(roots, is_leaf, first, second, limit):
    """Breadth-first renumbering tree by tree: (old number of each new node, children
    [2 n] in new numbers, level of each new node, depth per tree, nodes per tree, n); n = -1
    when ``limit`` new nodes do not suffice (a cycle, or subtrees shared too widely).

    All trees go down together a level at a time (numpy, nothing to compile): level L + 1
    is the children of level L's interior nodes, side by side in level L's order; a stable
    sort by tree then puts each tree's levels one after another."""
    olds, trees, inners = [roots], [np.arange(roots.size)], []
    total = roots.size
    while total <= limit and olds[-1].size:
        inner = ~is_leaf[olds[-1]]
        parents = olds[-1][inner]
        below = np.empty(2 * parents.size, np.int64)
        below[0::2], below[1::2] = first[parents], second[parents]
        olds.append(below)
        trees.append(np.repeat(trees[-1][inner], 2))
        inners.append(inner)
        total += below.size
    if total > limit:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, np.zeros(roots.size, np.int64), \
            np.zeros(roots.size, np.int64), -1
    old, tree = np.concatenate(olds), np.concatenate(trees)
    counts = [o.size for o in olds]                 # nodes per level (the last: none)
    level = np.repeat(np.arange(len(olds)), counts)
    by_tree = np.argsort(tree, kind="stable")       # new node i is found node by_tree[i]
    new = np.empty(total, np.int64)
    new[by_tree] = np.arange(total)
    # the found node of each node's first child (its own number at a leaf)
    child = np.arange(total)
    starts = np.cumsum([0] + counts)
    for k, inner in enumerate(inners):
        child[starts[k]:starts[k + 1]][inner] = starts[k + 1] + np.arange(0, counts[k + 1], 2)
    leaf = is_leaf[old]
    kids = np.empty((total, 2), np.int64)
    kids[:, 0] = new[child]
    kids[:, 1] = new[np.where(leaf, child, child + 1)]
    sizes = np.bincount(tree, minlength=roots.size).astype(np.int64)
    level = level[by_tree]
    depth = level[np.cumsum(sizes) - 1]             # a tree's last node is on its last level
    return old[by_tree], kids[by_tree].reshape(-1), level, depth, sizes, int(total)


COMMON = 0.99       # the share of even-odds walks that the lockstep levels finish


def _common_depth(level, leaf, sizes, depth) -> np.ndarray:
    """Per tree, the levels a group of rows walks in lockstep before it checks whether all
    of them are at leaves (and, if not, walks on until they are): the fewest that end COMMON
    of the walks that go left or right at even odds. A balanced tree's is its depth; trees
    grown leaf-wise (LightGBM) are deep along a few paths only."""
    if not sizes.size:
        return depth.astype(np.int32)
    tree = np.repeat(np.arange(sizes.size), sizes)
    mass = np.zeros((sizes.size, int(depth.max()) + 1))
    np.add.at(mass, (tree[leaf], level[leaf]), np.ldexp(1.0, -level[leaf].astype(np.int64)))
    done = np.cumsum(mass, axis=1) >= COMMON * (1 - 1e-12)
    return np.minimum(np.argmax(done, axis=1), depth).astype(np.int32)


# A call, which LLVM inlines: inlined by numba, each of a walk's dozen calls was typed and
# lowered again (forest_walk 3.3 -> 2.0 s cold, its finish 1.3 -> 0.5 s; the same speed)
@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _step(xb, base, i, nodes):
    """One level: where node i sends the row at xb[base:]. ``nodes`` = (words, thresholds,
    shift, offset) of :meth:`Forest.nodes`. Node numbers and offsets are unsigned, so numba
    indexes without its negative-index wraparound (which made this step about four times
    slower)."""
    words, thr, shift, offset = nodes
    q = i << TWO
    stay = np.uint64(xb[base + np.uint64(words[q])] <= thr[(i << shift) + offset])
    return np.uint64(words[q + ONE]) - stay


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _descend(xb, base, root, d, nodes):
    """The node the row at xb[base:] reaches from ``root`` in d levels."""
    i = np.uint64(root)
    for _ in range(d):
        i = _step(xb, base, i, nodes)
    return i


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _at_leaf(i, nodes):
    """Whether node i is a leaf (it goes on to itself)."""
    return np.uint64(nodes[0][(i << TWO) + ONE]) == i


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _copy_rows(x, f, lo, hi, width, twice, xb):
    """Rows lo..hi of x [.., f] into xb as rows of ``width`` features and, when ``twice``,
    the same features again with NaN as -inf (module docstring)."""
    row = width * (2 if twice else 1)
    for r in range(lo, hi):
        o = (r - lo) * row
        for c in range(width):
            v = x[r * f + c] if c < f else 0.0
            xb[o + c] = v
            if twice:
                xb[o + width + c] = -np.inf if v != v else v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _add(acc, r, t, dense, s, weight, target):
    """Leaf slot s's weights into row r's accumulator (``dense``: t weights a leaf)."""
    if dense:
        for j in range(t):
            acc[r * t + j] += weight[s * dense + j]
    else:
        acc[r * t + target[s]] += weight[s]


def _walk(x, f, rows, width, twice, work, leaves, block, roots, depth, common, nodes, slot,
          weight, target, dense, acc, t, blocks):
    """The ``blocks`` blocks of rows through all the trees, LANES rows of a block at a time;
    ``work``: a scratch row of ``block`` copied rows per thread (``leaves`` is unused)."""
    row = width * (2 if twice else 1)
    for b in prange(blocks):
        lo = b * block
        hi = min(rows, lo + block)
        xb = work[numba.get_thread_id()]
        _copy_rows(x, f, lo, hi, width, twice, xb)
        for q in range(lo * t, hi * t):
            acc[q] = 0.0
        for k in range(roots.size):
            root = np.uint64(roots[k])
            d = depth[k]
            r = lo
            while r + LANES <= hi:
                base = np.uint64((r - lo) * row)
                ends = LANES_OF(xb, base, np.uint64(row), roots, k, common[k], nodes)
                if not DONE(ends, nodes):
                    ends = FINISH(xb, base, np.uint64(row), ends, nodes)
                for j in range(LANES):
                    _add(acc, r + j, t, dense, slot[ends[j]], weight, target)
                r += LANES
            while r < hi:
                i = _descend(xb, np.uint64((r - lo) * row), root, d, nodes)
                _add(acc, r, t, dense, slot[i], weight, target)
                r += 1


def _mask_walk(x, f, rows, width, twice, work, vs, block, roots, depth, nodes, slot, weight,
               target, dense, scan_at, start, thr, tree, mask, init, leaf_slot, acc, t,
               blocks):
    """The ``blocks`` blocks of rows through all the trees by leaf bitmasks (leafmasks.py),
    GROUP rows at a time, the trees CHUNK at a time; a block's last rows short of a GROUP
    walk as in _walk. ``work``: per thread, a block's copied rows and then the GROUP rows'
    values word by word; ``vs``: per thread, a chunk's v words [tree, lane]."""
    row = width * (2 if twice else 1)
    n = roots.size
    for b in prange(blocks):
        lo = b * block
        hi = min(rows, lo + block)
        xb = work[numba.get_thread_id()]
        v = vs[numba.get_thread_id()]
        xt = xb[(hi - lo) * row:]
        _copy_rows(x, f, lo, hi, width, twice, xb)
        for q in range(lo * t, hi * t):
            acc[q] = 0.0
        g = lo
        while g + GROUP <= hi:
            for c in range(row):
                for j in range(GROUP):
                    xt[c * GROUP + j] = xb[(g - lo + j) * row + c]
            for k0 in range(0, n, CHUNK):
                k1 = min(n, k0 + CHUNK)
                for k in range(k0, k1):
                    for j in range(GROUP):
                        v[(k - k0) * GROUP + j] = init[k]
                scan(scan_at, xt, row, start, k0 // CHUNK * row, thr, tree, mask, v)
                for k in range(k0, k1):
                    for j in range(GROUP):
                        e = trailing_zeros(v[(k - k0) * GROUP + j])
                        _add(acc, g + j, t, dense, leaf_slot[k * MOST_LEAVES + e], weight,
                             target)
            g += GROUP
        while g < hi:
            base = np.uint64((g - lo) * row)
            for k in range(n):
                _add(acc, g, t, dense, slot[_descend(xb, base, roots[k], depth[k], nodes)],
                     weight, target)
            g += 1


def _walk_trees(x, f, rows, width, twice, work, leaves, block, roots, depth, common, nodes,
                slot, weight, target, dense, acc, t):
    """A few rows, each through LANES trees at a time. The leaves reached go to ``leaves``
    [trees] first and are added in tree order after the walk: adding them during the walk
    made it about five times slower (each load of the accumulator waited on stores whose
    places the CPU could not yet tell apart, and numba's arrays give the compiler no
    aliasing facts to move loads past them)."""
    n = roots.size
    xb = work[0]
    zero = np.uint64(0)
    for r in range(rows):
        _copy_rows(x, f, r, r + 1, width, twice, xb)
        k = 0
        while k < n:
            if k + LANES <= n:
                d = 0
                for j in range(LANES):
                    d = max(d, common[k + j])
                ends = LANES_OF(xb, zero, zero, roots, k, d, nodes)
                if not DONE(ends, nodes):
                    ends = FINISH(xb, zero, zero, ends, nodes)
                KEEP(leaves, k, ends)
                k += LANES
            else:
                leaves[k] = _descend(xb, zero, roots[k], depth[k], nodes)
                k += 1
        o = r * t
        for q in range(o, o + t):
            acc[q] = 0.0
        if dense:
            for k in range(n):
                _add(acc, r, t, dense, slot[leaves[k]], weight, target)
        else:
            # a run of leaves that feed one target is summed in a register (the same
            # additions in the same order) and stored when the target changes
            cur, sum_ = -1, acc[o]
            for k in range(n):
                sl = slot[leaves[k]]
                j = target[sl]
                if j != cur:
                    if cur >= 0:
                        acc[o + cur] = sum_
                    cur, sum_ = j, acc[o + j]
                sum_ += weight[sl]
            if cur >= 0:
                acc[o + cur] = sum_


def _lanes(step, over_trees: bool):
    """(lanes, finish, done, keep) for LANES walks stepped together: the rows at x[base:],
    x[base + f:], ... from roots[k], or (``over_trees``, f = 0) the row at x[base:] from
    roots[k], roots[k + 1], ... lanes(x, base, f, roots, k, d, nodes) gives the nodes they
    reach in d levels; done(ends, nodes) whether all are leaves; finish(x, base, f, ends,
    nodes) steps them on until all are (not inlined: rarely called, and inlined its loop
    slowed the lockstep loop about twofold); keep(leaves, k, ends) stores lane j's node at
    leaves[k + j] (used over trees). Numba keeps the lanes' node numbers in registers only as separate
    variables, hence the unrolled source."""
    ids = [f"i{j}" for j in range(LANES)]
    bases = [f"b{j}" for j in range(LANES)]
    starts = [f"    {b} = base + np.uint64({j}) * f" for j, b in enumerate(bases)]
    steps = [f"        {v} = step(x, {b}, {v}, nodes)" for v, b in zip(ids, bases)]
    lines = ["def lanes(x, base, f, roots, k, d, nodes):"]
    lines += [f"    {v} = np.uint64(roots[k + {j if over_trees else 0}])"
              for j, v in enumerate(ids)]
    lines += starts
    lines.append("    for _ in range(d):")
    lines += steps
    lines.append(f"    return {', '.join(ids)}")
    lines.append("def finish(x, base, f, ends, nodes):")
    lines.append(f"    {', '.join(ids)} = ends")
    lines += starts
    cond = " & ".join(f"at_leaf({v}, nodes)" for v in ids)
    lines.append(f"    while not ({cond}):")
    lines += steps
    lines.append(f"    return {', '.join(ids)}")
    lines.append("def done(ends, nodes):")
    lines.append(f"    {', '.join(ids)} = ends")
    lines.append(f"    return {cond}")
    lines.append("def keep(leaves, k, ends):")
    lines.append(f"    {', '.join(ids)} = ends")
    lines += [f"    leaves[k + {j}] = {v}" for j, v in enumerate(ids)]
    scope = {"step": step, "at_leaf": _at_leaf, "np": np}
    exec("\n".join(lines), scope)      # noqa: S102 (our own template)
    inline = njit(nogil=True, inline="always")
    return (inline(scope["lanes"]), njit(nogil=True)(scope["finish"]), inline(scope["done"]),
            inline(scope["keep"]))


def _walks() -> dict:
    """The walks by ``how``: False (serial), True (parallel over row blocks: the serial
    walk's task form, core/tasks.py) or "trees"."""
    def lanes(trees: bool) -> dict:
        return dict(zip(("LANES_OF", "FINISH", "DONE", "KEEP"), _lanes(_step, trees)))
    serial, parallel = task_forms(_walk, "forest_walk", **lanes(False))
    return {False: serial, True: parallel,
            "trees": njit(rebind(_walk_trees, "forest_walk_trees", lanes(True)), cache=True,
                          nogil=True, no_cfunc_wrapper=True)}


_WALKS = _walks()
_MASK_WALKS = dict(zip((False, True), task_forms(
    # named by leafmasks' source, whose scan intrinsic numba's cache does not follow
    _mask_walk, f"forest_mask_walk_{leafmasks.SOURCE_TAG[:12]}", GROUP=leafmasks.GROUP,
    CHUNK=leafmasks.CHUNK, MOST_LEAVES=leafmasks.MOST_LEAVES, scan=leafmasks.scan)))
_NO_LEAVES = np.zeros(0, np.uint32)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _add_pairs(r, leaf, pair_start, pair_target, pair_weight, agg, acc, got):
    for p in range(pair_start[leaf], pair_start[leaf + 1]):
        j = pair_target[p]
        w = pair_weight[p]
        if agg == MIN:
            if not got[r, j] or w < acc[r, j]:
                acc[r, j] = w
        elif agg == MAX:
            if not got[r, j] or w > acc[r, j]:
                acc[r, j] = w
        else:
            acc[r, j] += w
        got[r, j] = True


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _interpret(x, roots, feature, mode, split, true_id, false_id, nan_true, is_leaf,
               member_start, members, pair_start, pair_target, pair_weight, agg, acc, got):
    """The general walk, a row at a time, testing in float64 with the original modes."""
    for r in range(x.shape[0]):
        for j in range(acc.shape[1]):
            acc[r, j] = 0.0
            got[r, j] = False
        for k in range(roots.size):
            i = roots[k]
            while not is_leaf[i]:
                v = np.float64(x[r, feature[i]])
                m = mode[i]
                s = split[i]
                if v != v:
                    c = nan_true[i]
                elif m == LEQ:
                    c = v <= s
                elif m == LT:
                    c = v < s
                elif m == GTE:
                    c = v >= s
                elif m == GT:
                    c = v > s
                elif m == EQ:
                    c = v == s
                elif m == NEQ:
                    c = v != s
                else:
                    c = False
                    for q in range(member_start[i], member_start[i + 1]):
                        if v == members[q]:
                            c = True
                            break
                i = true_id[i] if c else false_id[i]
            _add_pairs(r, i, pair_start, pair_target, pair_weight, agg, acc, got)
