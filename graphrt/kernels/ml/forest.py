"""Tree ensembles laid out flat for fast walking: the engine behind TreeEnsemble,
TreeEnsembleRegressor and TreeEnsembleClassifier.

A ``Forest`` is built once per node from any of the three attribute forms. Every test
``x[f] <mode> t`` with mode LEQ, LT, GTE or GT is rewritten as ``x[f] <= t'`` in the input's
element type, swapping the two children where the test was a "greater" one:

    LEQ: t' = down(t)         GT:  t' = down(t), children swapped
    LT:  t' = below(t)        GTE: t' = below(t), children swapped

with ``down(t)`` the largest value of the input type <= t and ``below(t)`` the largest < t
(NaN for t = -inf, so that the test never holds). For x of that type these are the same tests,
bit for bit, as comparing in float64. A NaN fails every ``<=`` and so takes the second child,
unless the node's NaN flag (the sign bit of its feature word) sends it to the first: the
child that the original test and ``nodes_missing_value_tracks_true`` name.

Nodes are renumbered tree by tree in breadth-first order with the two children side by side,
so node i goes on to ``first[i] + 1 - (test holds)``. A leaf's split is NaN (its test never
holds) and its ``first`` is itself - 1, so a leaf goes on to itself: every tree is walked a
fixed number of levels, with no branch that depends on the data: its depth, or for a tree
deep along a few paths only, the levels that finish 99% of the walks that go left or right
at even odds, after which a group that is not all at leaves walks on until it is. Rows go
through a tree eight at a time, eight independent chains of loads in flight; blocks of 256
rows go through all the trees, in parallel over blocks for large batches. Fewer than eight
rows go through eight trees at a time instead. Each row adds its leaves'
weights into an accumulator of the input's type tree by tree in the order of the trees, so the result does
not depend on the batch, the block or the thread count.

Ensembles with EQ, NEQ or set-membership tests, and MIN/MAX aggregation, are walked by the
general interpreter (``_interpret``), a row at a time, testing in float64.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ..core.jit import rebind

LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
AVERAGE, SUM, MIN, MAX = range(4)
NAN_FLAGS = False                              # rebound per walk variant, as are
STEP = LANES_OF = FINISH = DONE = None         # the step, the lane bundles, the leaf check
NAN_FIRST = -2 ** 31                           # the NaN flag in a node's feature word
FEATURE = np.int32(2 ** 31 - 1)
BLOCK = 256                                    # rows that go through all the trees together
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
        self.nan_flags = bool(np.any(nan_first))
        word = np.where(leaf, 0, feature[order]).astype(np.int64)
        self.meta = np.where(nan_first[order], word | NAN_FIRST, word).astype(np.int32)
        self.first = np.where(leaf, np.arange(order.size) - 1, kids[0::2]).astype(np.int32)
        self.slot = np.where(leaf, np.cumsum(leaf) - 1, 0).astype(np.int32)
        self._order, self._kids, self._leaf = order, kids, leaf
        self._split, self._mode = split[order], mode[order]
        self._nan_to_true, self._members = nan_to_true, members
        self._threshold, self._weights, self._general = {}, {}, None
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
        """t' per renumbered node for inputs of ``dtype`` (float32 or float64)."""
        dtype = np.dtype(dtype)
        got = self._threshold.get(dtype)
        if got is None:
            m, s = self._mode, self._split
            strict = (m == LT) | (m == GTE)
            got = np.where(strict, below(s, dtype), down(s, dtype)).astype(dtype)
            got[self._leaf] = np.nan
            self._threshold[dtype] = got
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
                (self.meta & FEATURE).astype(np.int64), mode, self._split.astype(np.float64),
                np.where(greater, back[:, 1], back[:, 0]).astype(np.int64),
                np.where(greater, back[:, 0], back[:, 1]).astype(np.int64),
                self._nan_to_true[self._order].astype(np.bool_), self._leaf.astype(np.bool_),
                member_start.astype(np.int64), np.asarray(values, np.float64)[take])
        return self._general

    def interprets(self, agg: int) -> bool:
        """Whether :meth:`scores` walks with the general interpreter (which needs ``got``)."""
        return self.tests_equality or agg in (MIN, MAX)

    def check_features(self, ctx, n_features: int) -> None:
        if self.max_feature >= n_features:
            ctx.fail(f"the trees test feature {self.max_feature}; the input has {n_features}")

    def scores(self, x: np.ndarray, agg: int, acc: np.ndarray, got: np.ndarray) -> None:
        """acc[r, t] = the aggregate (before base values) of the weights for target t of the
        leaves that row r of ``x`` [rows, F] (C-contiguous) reaches, added in acc's type
        (that of x, as onnxruntime does); MIN/MAX leave a target no leaf feeds at 0. ``got``
        [rows, targets] bool is scratch for the interpreter (None unless
        :meth:`interprets`)."""
        rows, f = x.shape
        if self.interprets(agg):
            _interpret(x, self.roots, *self.general(), self.pair_start, self.pair_target,
                       self.weights(acc.dtype, pairs=True), agg, acc, got)
            return
        if rows < LANES:
            how = "trees"
        else:
            how = rows >= 2 * BLOCK and rows * max(self.n_trees, 1) >= PARALLEL_WORK and \
                numba.get_num_threads() > 1
        _WALKS[self.nan_flags, how](
            x.reshape(-1), f, rows, self.roots, self.depth, self.common, self.meta,
            self.thresholds(x.dtype),
            self.first, self.slot, self.weights(acc.dtype), self.target, self.dense,
            acc.reshape(-1), self.n_targets)

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


@njit(cache=True, nogil=True)
def _layout(roots, is_leaf, first, second, limit):
    """Breadth-first renumbering tree by tree: (old number of each new node, children
    [2 n] in new numbers, level of each new node, depth per tree, nodes per tree, n); n = -1
    when ``limit`` new nodes do not suffice (a cycle, or subtrees shared too widely)."""
    order = np.empty(limit, np.int64)
    kids = np.empty(2 * limit, np.int64)
    level = np.empty(limit, np.int64)
    depth = np.zeros(roots.size, np.int64)
    sizes = np.zeros(roots.size, np.int64)
    n = 0
    for k in range(roots.size):
        if n >= limit:
            return order[:0], kids[:0], level[:0], depth, sizes, -1
        start = n
        order[n] = roots[k]
        level[n] = 0
        n += 1
        head = start
        while head < n:
            old = order[head]
            if is_leaf[old]:
                kids[2 * head] = head
                kids[2 * head + 1] = head
                depth[k] = max(depth[k], level[head])
            else:
                if n + 2 > limit:
                    return order[:0], kids[:0], level[:0], depth, sizes, -1
                order[n] = first[old]
                order[n + 1] = second[old]
                level[n] = level[head] + 1
                level[n + 1] = level[head] + 1
                kids[2 * head] = n
                kids[2 * head + 1] = n + 1
                n += 2
            head += 1
        sizes[k] = n - start
    return order[:n], kids[:2 * n], level[:n], depth, sizes, n


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


def _step(x, base, i, meta, thr, first):
    """One level: where node i sends the row at x[base:]."""
    word = meta[i]
    v = x[base + (word & FEATURE)]
    if NAN_FLAGS:
        stay = np.int32(v <= thr[i]) | (np.int32(word < 0) & np.int32(v != v))
    else:
        stay = np.int32(v <= thr[i])
    return first[i] + 1 - stay


@njit(cache=True, nogil=True, inline="always")
def _add(acc, r, t, dense, s, weight, target):
    """Leaf slot s's weights into row r's accumulator (``dense``: t weights a leaf)."""
    if dense:
        for j in range(t):
            acc[r * t + j] += weight[s * dense + j]
    else:
        acc[r * t + target[s]] += weight[s]


def _walk(x, f, rows, roots, depth, common, meta, thr, first, slot, weight, target, dense, acc,
          t):
    """Blocks of rows through all the trees, LANES rows of a block at a time."""
    n_blocks = (rows + BLOCK - 1) // BLOCK
    for b in prange(n_blocks):
        lo = b * BLOCK
        hi = min(rows, lo + BLOCK)
        for q in range(lo * t, hi * t):
            acc[q] = 0.0
        for k in range(roots.size):
            root = roots[k]
            d = depth[k]
            r = lo
            while r + LANES <= hi:
                ends = LANES_OF(x, r * f, f, roots, k, common[k], meta, thr, first)
                if not DONE(ends, first):
                    ends = FINISH(x, r * f, f, ends, meta, thr, first)
                for j in range(LANES):
                    _add(acc, r + j, t, dense, slot[ends[j]], weight, target)
                r += LANES
            while r < hi:
                i = root
                for _ in range(d):
                    i = STEP(x, r * f, i, meta, thr, first)
                _add(acc, r, t, dense, slot[i], weight, target)
                r += 1


def _walk_trees(x, f, rows, roots, depth, common, meta, thr, first, slot, weight, target,
                dense, acc, t):
    """A few rows, each through LANES trees at a time (their leaves added in tree order)."""
    n = roots.size
    for r in range(rows):
        for q in range(r * t, (r + 1) * t):
            acc[q] = 0.0
        k = 0
        while k < n:
            if k + LANES <= n:
                d = 0
                for j in range(LANES):
                    d = max(d, common[k + j])
                ends = LANES_OF(x, r * f, 0, roots, k, d, meta, thr, first)
                if not DONE(ends, first):
                    ends = FINISH(x, r * f, 0, ends, meta, thr, first)
                for j in range(LANES):
                    _add(acc, r, t, dense, slot[ends[j]], weight, target)
                k += LANES
            else:
                i = roots[k]
                for _ in range(depth[k]):
                    i = STEP(x, r * f, i, meta, thr, first)
                _add(acc, r, t, dense, slot[i], weight, target)
                k += 1


def _lanes(step, over_trees: bool):
    """(lanes, finish, done) for LANES walks stepped together: the rows at x[base:],
    x[base + f:], ... from roots[k], or (``over_trees``) the row at x[base:] from roots[k],
    roots[k + 1], ... lanes(x, base, f, roots, k, d, meta, thr, first) gives the nodes they
    reach in d levels; done(ends, first) whether all are leaves; finish(x, base, f, ends,
    meta, thr, first) steps them on until all are (not inlined: rarely called, and inlined
    its loop slowed the lockstep loop about twofold). Numba keeps the lanes' node numbers in
    registers only as separate variables, hence the unrolled source."""
    ids = [f"i{j}" for j in range(LANES)]
    lines = ["def lanes(x, base, f, roots, k, d, meta, thr, first):"]
    lines += [f"    {v} = roots[k + {j if over_trees else 0}]" for j, v in enumerate(ids)]
    lines.append("    for _ in range(d):")
    lines += [f"        {v} = step(x, base + {0 if over_trees else j} * f, {v}, meta, thr, first)"
              for j, v in enumerate(ids)]
    lines.append(f"    return {', '.join(ids)}")
    lines.append("def finish(x, base, f, ends, meta, thr, first):")
    lines.append(f"    {', '.join(ids)} = ends")
    cond = " & ".join(f"(first[{v}] + 1 == {v})" for v in ids)
    lines.append(f"    while not ({cond}):")
    lines += [f"        {v} = step(x, base + {0 if over_trees else j} * f, {v}, meta, thr, first)"
              for j, v in enumerate(ids)]
    lines.append(f"    return {', '.join(ids)}")
    lines.append("def done(ends, first):")
    lines.append(f"    {', '.join(ids)} = ends")
    lines.append(f"    return {cond}")
    scope = {"step": step}
    exec("\n".join(lines), scope)      # noqa: S102 (our own template)
    return (njit(nogil=True, inline="always")(scope["lanes"]), njit(nogil=True)(scope["finish"]),
            njit(nogil=True, inline="always")(scope["done"]))


def _walk_variant(nan_flags: bool, how):
    """The walk for ``how`` = False (serial), True (parallel over row blocks) or "trees"."""
    kind = "nan" if nan_flags else "plain"
    step = njit(cache=True, nogil=True, inline="always")(
        rebind(_step, f"forest_step_{kind}", {"NAN_FLAGS": nan_flags}))
    template = _walk_trees if how == "trees" else _walk
    suffix = {False: "", True: "_par", "trees": "_trees"}[how]
    lanes, finish, done = _lanes(step, how == "trees")
    fn = rebind(template, f"forest_walk_{kind}{suffix}",
                {"STEP": step, "LANES_OF": lanes, "FINISH": finish, "DONE": done})
    return njit(cache=True, nogil=True, parallel=how is True)(fn)


_WALKS = {(n, how): _walk_variant(n, how) for n in (False, True) for how in (False, True, "trees")}


@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True)
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
