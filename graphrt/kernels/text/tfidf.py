"""TfIdfVectorizer: counts of the pool's n-grams in each row of x, weighted.

x is [C] or [N, C] (int32/int64 with ``pool_int64s``, strings with ``pool_strings``); y is
[W] or [N, W] float32 with W = max(ngram_indexes) + 1. The pool lists the 1-grams, then the
2-grams..., level k (n = k + 1) starting at ``ngram_counts[k]``; the g-th n-gram of the pool
is counted in column ngram_indexes[g]. Only n-grams with min_gram_length <= n <=
max_gram_length count.

An n-gram of x with skip s (0 <= s <= max_skip_count) takes the items at i, i + (s+1), ...,
i + (n-1)(s+1); 1-grams are counted once per position, not once per skip. Then per column j:
TF: y = count; IDF: y = weights[j] if count > 0 else 0; TFIDF: y = count * weights[j]
(weights default to 1). The weights are indexed by output column, as onnxruntime and
onnx's reference do (the same as the spec's n-gram order when ngram_indexes is 0, 1, ...).

The pool is a trie whose edges are token ids (the pool's distinct items, sorted); x is
mapped to token ids (-1: not in the pool), then walked from every start position. Counts
are float32 sums of 1 (exact up to 2**24) and one multiply: exact.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN
from ..core.jit import Variants

EXACT = False

_MODES = {"TF": 1, "IDF": 2, "TFIDF": 3}
_INTS = frozenset(np.dtype(t) for t in (np.int32, np.int64))
_STRING = np.dtype(object)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def find_sorted(keys, lo, hi, v):
    """Position of v in the sorted keys[lo:hi], or -1."""
    while lo < hi:
        mid = (lo + hi) >> 1
        k = keys[mid]
        if k < v:
            lo = mid + 1
        elif v < k:
            hi = mid
        else:
            return mid
    return -1


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _token_ids(x, vocab, ids):
    for i in range(x.size):
        ids[i] = find_sorted(vocab, 0, vocab.size, x[i])


def _tfidf(ids, rows, c, first_child, child_tok, child_node, node_col, min_n, max_n,
           max_skip, mode, weights, out, w):
    for r in prange(rows):
        x = ids[r * c:(r + 1) * c]
        y = out[r * w:(r + 1) * w]
        for j in range(w):
            y[j] = 0
        start_n = min_n
        for step in range(1, max_skip + 2):
            for i in range(c):
                if i + step * (start_n - 1) >= c:
                    break
                node = 0
                pos = i
                for size in range(1, max_n + 1):
                    if pos >= c or x[pos] < 0:
                        break
                    k = find_sorted(child_tok, first_child[node], first_child[node + 1], x[pos])
                    if k < 0:
                        break
                    node = child_node[k]
                    if size >= start_n and node_col[node] >= 0:
                        y[node_col[node]] += 1
                    pos += step
            if start_n == 1:        # 1-grams: once per position, whatever the skip
                start_n = 2
                if start_n > max_n:
                    break
        for j in range(w):
            if mode == 2:
                y[j] = weights[j] if y[j] > 0 else 0
            elif mode == 3:
                y[j] = y[j] * weights[j]


_TFIDF = Variants(_tfidf, "tfidf", parallel=True)


class TfIdfVectorizer(OpKernel):
    """The pool's n-gram counts per row of x, weighted by ``mode`` (module docstring)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        mode = node.attr("mode")
        if mode not in _MODES:
            node.fail(f"mode must be one of {sorted(_MODES)}, got {mode!r}")
        self.mode = _MODES[mode]
        self.min_n = int(node.attr("min_gram_length", 0))
        self.max_n = int(node.attr("max_gram_length", 0))
        self.max_skip = int(node.attr("max_skip_count", 0))
        if not 1 <= self.min_n <= self.max_n or self.max_skip < 0:
            node.fail(f"need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, "
                      f"got {self.min_n}, {self.max_n}, {self.max_skip}")
        ints, strs = node.attr("pool_int64s"), node.attr("pool_strings")
        if (ints is None) == (strs is None):
            node.fail("exactly one of pool_int64s and pool_strings must be given")
        self.strings = strs is not None
        pool = list(strs) if self.strings else [int(v) for v in ints]
        cols = [int(v) for v in node.attr("ngram_indexes") or []]
        if any(v < 0 for v in cols):
            node.fail("ngram_indexes must be >= 0")
        self.width = max(cols, default=-1) + 1
        self._build_trie(pool, [int(v) for v in node.attr("ngram_counts") or []], cols)
        weights = node.attr("weights")
        if weights is not None and len(weights) < self.width:
            node.fail(f"weights has {len(weights)} values, the output has {self.width} columns")
        self.weights = (np.ones(self.width, np.float32) if weights is None
                        else np.array(weights, np.float32))

    def _build_trie(self, pool: list, starts: list, cols: list) -> None:
        """Token ids for the pool's items and the trie of its n-grams in the length range,
        as flat arrays: node v's children are child_tok/child_node[first_child[v]:
        first_child[v+1]] (sorted by token), node_col[v] the column of the n-gram ending
        at v (-1: none)."""
        node = self.node
        vocab = sorted(set(pool))
        tok = {v: i for i, v in enumerate(vocab)}
        self.vocab = tok if self.strings else np.array(vocab, np.int64)
        children: list[dict] = [{}]
        col_of = [-1]
        g = 0
        for k, start in enumerate(starts):
            n = k + 1
            end = starts[k + 1] if k + 1 < len(starts) else len(pool)
            if not 0 <= start <= end <= len(pool) or (end - start) % n:
                node.fail(f"ngram_counts {starts} does not split the pool of {len(pool)} items "
                          f"into whole {n}-grams")
            for at in range(start, end, n):
                if g >= len(cols):
                    node.fail(f"ngram_indexes has {len(cols)} values, the pool more n-grams")
                if self.min_n <= n <= self.max_n:
                    v = 0
                    for item in pool[at:at + n]:
                        t = tok[item]
                        if t not in children[v]:
                            children[v][t] = len(children)
                            children.append({})
                            col_of.append(-1)
                        v = children[v][t]
                    col_of[v] = cols[g]     # a repeated n-gram: the last one counts
                g += 1
        first = [0]
        toks, nodes = [], []
        for ch in children:
            for t in sorted(ch):
                toks.append(t)
                nodes.append(ch[t])
            first.append(len(toks))
        self.trie = (np.array(first, np.int64), np.array(toks, np.int64),
                     np.array(nodes, np.int64), np.array(col_of, np.int64))

    def infer(self, ctx: InferContext) -> None:
        if self.strings:
            ctx.check_dtype(0, {_STRING}, " (pool_strings needs strings)")
        else:
            ctx.check_dtype(0, _INTS, " (pool_int64s needs int32 or int64)")
        shape = ctx.shape(0)
        if len(shape) not in (1, 2):
            ctx.fail(f"the input must have shape [C] or [N, C], got {list(shape)}")
        rows, c = (1, shape[0]) if len(shape) == 1 else shape
        ctx.set_output(0, np.float32, shape[:-1] + (self.width,))
        parallel = rows > 1 and rows * c * (self.max_skip + 1) * self.max_n >= PARALLEL_MIN
        ctx.prepared = (rows, c, _TFIDF.get(ctx.exact, parallel))

    def run(self, ctx: RunContext) -> None:
        rows, c, fn = ctx.prepared
        x = ctx.flat_in[0]
        ids = scratch(ctx, np.int64, (x.size,))
        if self.strings:
            get = self.vocab.get
            ids[:] = np.fromiter((get(s, -1) for s in x), np.int64, count=x.size)
        else:
            _token_ids(x, self.vocab, ids)
        fn(ids, rows, c, *self.trie, self.min_n, self.max_n, self.max_skip, self.mode,
           self.weights, ctx.flat_out[0], self.width)

