"""Operators of the ai.onnx.ml domain: LabelEncoder, TreeEnsemble, Binarizer,
ArrayFeatureExtractor.

- LabelEncoder: y = values[i] where keys[i] == x (the last such i), else the default.
  Opset 1 maps strings to their index in ``classes_strings`` (default ``default_int64``)
  or int64 indices to those strings (default ``default_string``), as the input's type
  says; opset 2 on takes keys_* / values_* lists, opset 4 also 1-D tensors. Float keys
  compare as IEEE numbers (-0 == 0), a NaN key matches every NaN.
- TreeEnsemble (opset 5): y[n, t] = aggregate over the trees of the weights of the leaves
  that row n reaches and that feed target t, then ``post_transform``.
- Binarizer: y = 1 where x > threshold, else 0 (NaN: 0).
- ArrayFeatureExtractor: y[..., j] = x[..., idx[j]] over the last axis (idx flattened;
  a 1-D x gives [1, len(idx)]).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN
from ..core.floats import compute_dtype, narrow, result_buffer, widen
from ..core.jit import Variants
from ..core.pointwise import Unary, scalar_op, unary_param_variants
from ..tensor.gather import Gather, Take, check_range
from ..text.tfidf import find_sorted

EXACT = False

_F32, _F64, _I64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)
_STRING = np.dtype(object)


# ---- LabelEncoder ----------------------------------------------------------------------

_KEY_TYPES = frozenset({_STRING, _I64, _F32, _F64, np.dtype(np.int32), np.dtype(np.int16)})
# list attribute -> element type of the tensor it makes
_KEYS = {"keys_strings": _STRING, "keys_int64s": _I64, "keys_floats": _F32}
# list attribute -> (element type, its default attribute, that attribute's default)
_VALUES = {"values_strings": (_STRING, "default_string", "_Unused"),
           "values_int64s": (_I64, "default_int64", -1),
           "values_floats": (_F32, "default_float", -0.0)}


def _tensor_default(dtype):
    """The default for values_tensor when default_tensor is not given."""
    return "_Unused" if dtype == _STRING else (-1 if dtype.kind in "iu" else -0.0)


@njit(cache=True, nogil=True, fastmath=False)
def _positions(x, keys, pos, nan_pos, miss, out):
    """out[i] = pos[k] where keys[k] == x[i] (keys sorted), nan_pos for a NaN, else miss."""
    for i in range(x.size):
        v = x[i]
        if v != v:
            out[i] = nan_pos
            continue
        k = find_sorted(keys, 0, keys.size, v)
        out[i] = miss if k < 0 else pos[k]


class _Map:
    """One key -> value mapping: positions into ``table`` (values, then the default)."""

    def __init__(self, node, keys: np.ndarray, values: np.ndarray, default):
        if keys.size != values.size:
            node.fail(f"keys and values have different lengths ({keys.size} and {values.size})")
        if keys.dtype not in _KEY_TYPES or values.dtype not in _KEY_TYPES:
            node.fail(f"keys of element type {_dt.name_of(keys.dtype)} and values of "
                      f"{_dt.name_of(values.dtype)} are not among the allowed types")
        self.keys_dtype = keys.dtype
        self.table = np.concatenate([values, np.array([default]).astype(values.dtype)])
        self.miss = values.size
        if keys.dtype == _STRING:
            self.lookup = {k: i for i, k in enumerate(keys.tolist())}   # the last key wins
            return
        nan = np.isnan(keys) if keys.dtype.kind == "f" else np.zeros(keys.size, bool)
        self.nan_pos = int(np.flatnonzero(nan)[-1]) if nan.any() else self.miss
        where = np.flatnonzero(~nan)[::-1]                              # the last key wins
        self.sorted, first = np.unique(keys[where], return_index=True)
        self.pos = where[first].astype(np.int64)

    def positions(self, ctx: RunContext, x: np.ndarray) -> np.ndarray:
        idx = scratch(ctx, np.int64, (x.size,))
        if self.keys_dtype == _STRING:
            get, miss = self.lookup.get, self.miss
            idx[:] = np.fromiter((get(s, miss) for s in x), np.int64, count=x.size)
        else:
            _positions(x, self.sorted, self.pos, self.nan_pos, self.miss, idx)
        return idx


class LabelEncoder(OpKernel):
    """y = the value of x's key, or the default (module docstring)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        maps = self._opset1_maps() if node.opset < 2 else [self._map()]
        self.maps = {m.keys_dtype: m for m in maps}

    def _opset1_maps(self) -> list:
        node = self.node
        classes = np.array(list(node.attr("classes_strings") or []), dtype=object)
        index = np.arange(classes.size, dtype=np.int64)
        return [_Map(node, classes, index, int(node.attr("default_int64", -1))),
                _Map(node, index, classes, node.attr("default_string", "_Unused"))]

    def _map(self) -> _Map:
        node = self.node
        keys = self._one_of("keys", {**_KEYS, "keys_tensor": None})
        values = self._one_of("values", {**{k: v[0] for k, v in _VALUES.items()},
                                         "values_tensor": None})
        given = next(k for k in [*_VALUES, "values_tensor"] if node.attr(k) is not None)
        if given != "values_tensor":
            _, name, default = _VALUES[given]
            default = node.attr(name, default)
        elif node.attr("default_tensor") is not None:
            d = np.asarray(node.attr("default_tensor"))
            if d.size != 1 or d.dtype != values.dtype:
                node.fail(f"default_tensor must hold one {_dt.name_of(values.dtype)} value")
            default = d.reshape(-1)[0]
        else:
            default = _tensor_default(values.dtype)
        return _Map(node, keys, values, default)

    def _one_of(self, what: str, forms: dict) -> np.ndarray:
        given = [k for k in forms if self.node.attr(k) is not None]
        if len(given) != 1:
            self.node.fail(f"exactly one {what}_* attribute is required, got {given or 'none'}")
        value = self.node.attr(given[0])
        dtype = forms[given[0]]
        arr = np.asarray(value) if dtype is None else np.array(list(value), dtype=dtype)
        return arr.reshape(-1)

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.dtype(0)
        m = self.maps.get(dt)
        if m is None:
            ctx.fail(f"input of element type {_dt.name_of(dt)} does not match the keys ("
                     + ", ".join(_dt.name_of(k) for k in self.maps) + ")")
        ctx.set_output(0, m.table.dtype, ctx.shape(0))
        ctx.prepared = m

    def run(self, ctx: RunContext) -> None:
        m = ctx.prepared
        np.take(m.table, m.positions(ctx, ctx.flat_in[0]), out=ctx.flat_out[0], mode="clip")


# ---- TreeEnsemble ----------------------------------------------------------------------

_MEMBER = 6                                  # nodes_modes: LEQ LT GTE GT EQ NEQ MEMBER
_AVERAGE, _SUM, _MIN, _MAX = range(4)        # aggregate_function
_NONE, _SOFTMAX, _LOGISTIC, _SOFTMAX_ZERO, _PROBIT = range(5)   # post_transform
_TREE_FLOATS = _dt.FLOATS


@njit(cache=True, nogil=True, fastmath=False)
def _leaf_of(row, node, feature, mode, split, true_id, false_id, true_leaf, false_leaf,
             nan_true, member_start, members):
    """The leaf ``row`` reaches from interior node ``node`` (comparisons in float64)."""
    while True:
        v = np.float64(row[feature[node]])
        m = mode[node]
        s = split[node]
        if m == 0:
            c = v <= s
        elif m == 1:
            c = v < s
        elif m == 2:
            c = v >= s
        elif m == 3:
            c = v > s
        elif m == 4:
            c = v == s
        elif m == 5:
            c = v != s
        else:
            c = False
            for k in range(member_start[node], member_start[node + 1]):
                if v == members[k]:
                    c = True
                    break
        if not c and v != v and nan_true[node]:
            c = True
        if c:
            if true_leaf[node]:
                return true_id[node]
            node = true_id[node]
        else:
            if false_leaf[node]:
                return false_id[node]
            node = false_id[node]


@njit(cache=True, nogil=True, fastmath=False)
def _erfinv(z):
    """erf^-1(z): Winitzki's approximation refined by Newton steps on erf."""
    if z != z or z < -1.0 or z > 1.0:
        return np.nan
    if z == 1.0 or z == -1.0:
        return z * np.inf
    ln = math.log((1.0 - z) * (1.0 + z))
    t = 2.0 / (math.pi * 0.147) + 0.5 * ln
    x = math.copysign(math.sqrt(math.sqrt(t * t - ln / 0.147) - t), z)
    for _ in range(3):
        x -= (math.erf(x) - z) / (2.0 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


def _forest(x, rows, f, roots, feature, mode, split, true_id, false_id, true_leaf, false_leaf,
            nan_true, member_start, members, leaf_target, leaf_weight, agg, post, seen, out, t):
    n_trees = roots.size
    for r in prange(rows):
        row = x[r * f:(r + 1) * f]
        y = out[r * t:(r + 1) * t]
        got = seen[r * t:(r + 1) * t]
        for j in range(t):
            y[j] = 0
            got[j] = False
        for k in range(n_trees):
            leaf = _leaf_of(row, roots[k], feature, mode, split, true_id, false_id, true_leaf,
                            false_leaf, nan_true, member_start, members)
            j = leaf_target[leaf]
            w = leaf_weight[leaf]
            if agg == 2:
                if not got[j] or w < y[j]:
                    y[j] = w
            elif agg == 3:
                if not got[j] or w > y[j]:
                    y[j] = w
            else:
                y[j] += w
            got[j] = True
        if agg == 0 and n_trees > 0:
            for j in range(t):
                y[j] = y[j] / n_trees
        if post == 1 or post == 3:          # softmax (3: over the non-zero scores only)
            m = -np.inf
            for j in range(t):
                if post == 1 or y[j] != 0:
                    m = max(m, y[j])
            s = 0.0
            for j in range(t):
                if post == 1 or y[j] != 0:
                    y[j] = np.exp(y[j] - m)
                    s += y[j]
            for j in range(t):
                y[j] = y[j] / s if s > 0 else 0
        elif post == 2:
            for j in range(t):
                y[j] = 1 / (1 + np.exp(-y[j]))
        elif post == 4:
            for j in range(t):
                y[j] = math.sqrt(2.0) * _erfinv(2.0 * y[j] - 1.0)
        if EXACT:
            for j in range(t):
                if y[j] != y[j]:
                    y[j] = np.nan


_FOREST = Variants(_forest, "tree_ensemble", parallel=True)


def _ints(node, name: str, required: bool = True) -> np.ndarray | None:
    v = node.attr(name)
    if v is None:
        if required:
            node.fail(f"attribute {name} is required")
        return None
    return np.array(v, dtype=np.int64).reshape(-1)


def _floats(node, name: str) -> np.ndarray:
    v = node.attr(name)
    if v is None:
        node.fail(f"attribute {name} is required")
    return np.asarray(v).reshape(-1)


class TreeEnsemble(OpKernel):
    """Tree-ensemble regression (module docstring). Node comparisons are made in float64
    (x and the splits widen exactly); leaf weights are accumulated in x's compute type
    (float32 for float16), tree by tree in ``tree_roots`` order; AVERAGE divides the sum
    by the tree count; MIN/MAX leave a target no leaf feeds at 0. ``post_transform``:
    SOFTMAX, LOGISTIC, SOFTMAX_ZERO (softmax over the non-zero scores, zeros stay 0) and
    PROBIT (sqrt(2) erfinv(2y - 1)) use exp/erf: exact mode only without one."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.agg = int(node.attr("aggregate_function", _SUM))
        self.post = int(node.attr("post_transform", _NONE))
        if not _AVERAGE <= self.agg <= _MAX:
            node.fail(f"aggregate_function must be 0..3, got {self.agg}")
        if not _NONE <= self.post <= _PROBIT:
            node.fail(f"post_transform must be 0..4, got {self.post}")
        self.supports_exact = self.post == _NONE
        self.roots = _ints(node, "tree_roots")
        feature = _ints(node, "nodes_featureids")
        n = feature.size
        mode = _floats(node, "nodes_modes").astype(np.int64)
        split = _floats(node, "nodes_splits").astype(np.float64)
        links = [_ints(node, k) for k in ("nodes_truenodeids", "nodes_falsenodeids",
                                          "nodes_trueleafs", "nodes_falseleafs")]
        nan_true = _ints(node, "nodes_missing_value_tracks_true", False)
        nan_true = np.zeros(n, np.int64) if nan_true is None else nan_true
        targets = _ints(node, "leaf_targetids")
        weights = _floats(node, "leaf_weights")
        lengths = {a.size for a in (mode, split, nan_true, *links)}
        if lengths != {n} or targets.size != weights.size:
            node.fail("the nodes_* attributes (and the leaf_* ones) must all have one length")
        if mode.size and (mode.min() < 0 or mode.max() > _MEMBER):
            node.fail("nodes_modes must be 0..6")
        if feature.size and feature.min() < 0:
            node.fail("nodes_featureids must be >= 0")
        n_targets = node.attr("n_targets")
        self.n_targets = int(n_targets) if n_targets is not None else \
            int(targets.max(initial=-1)) + 1
        if targets.size and (targets.min() < 0 or targets.max() >= self.n_targets):
            node.fail(f"leaf_targetids must lie in [0, {self.n_targets})")
        true_id, false_id, true_leaf, false_leaf = links
        for ids, leaf in ((true_id, true_leaf), (false_id, false_leaf)):
            limit = np.where(leaf != 0, targets.size, n)
            if np.any((ids < 0) | (ids >= limit)):
                node.fail("a nodes_truenodeids/nodes_falsenodeids entry is out of range")
        if np.any((self.roots < 0) | (self.roots >= n)):
            node.fail("a tree_roots entry is out of range")
        _check_acyclic(node, self.roots, links)
        self.tree = (feature, mode, split, true_id, false_id, true_leaf, false_leaf, nan_true,
                     *self._members(mode))
        self.targets = targets
        self.weights = {dt: weights.astype(dt) for dt in (_F32, _F64)}

    def _members(self, mode):
        """Offsets of each node's set (empty unless BRANCH_MEMBER) into the members array:
        the sets of membership_values, split at NaNs, in node order."""
        values = self.node.attr("membership_values")
        values = np.zeros(0) if values is None else np.asarray(values, np.float64).reshape(-1)
        cuts = np.flatnonzero(np.isnan(values))
        is_member = mode == _MEMBER
        if cuts.size != int(is_member.sum()):
            self.node.fail(f"membership_values holds {cuts.size} NaN-terminated sets for "
                           f"{int(is_member.sum())} BRANCH_MEMBER nodes")
        start = np.zeros(mode.size + 1, np.int64)
        members, k, prev = [], 0, 0
        for i in range(mode.size):
            if is_member[i]:
                members.extend(values[prev:cuts[k]])
                prev = cuts[k] + 1
                k += 1
            start[i + 1] = len(members)
        return start, np.array(members, np.float64)

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _TREE_FLOATS)
        shape = ctx.shape(0)
        if len(shape) != 2:
            ctx.fail(f"the input must have shape [N, F], got {list(shape)}")
        rows, f = shape
        feature = self.tree[0]
        if feature.size and rows and feature.max() >= f:
            ctx.fail(f"nodes_featureids refers to feature {int(feature.max())}, the input has {f}")
        ctx.set_output(0, dt, (rows, self.n_targets))
        parallel = rows > 1 and rows * max(self.roots.size, 1) * 16 >= PARALLEL_MIN
        ctx.prepared = (rows, f, _FOREST.get(ctx.exact, parallel), compute_dtype(dt))

    def run(self, ctx: RunContext) -> None:
        rows, f, fn, cdt = ctx.prepared
        out = ctx.flat_out[0]
        buf = result_buffer(ctx, out)
        seen = scratch(ctx, np.bool_, (out.size,))
        fn(widen(ctx, ctx.flat_in[0]), rows, f, self.roots, *self.tree, self.targets,
           self.weights[cdt], self.agg, self.post, seen, buf, self.n_targets)
        narrow(out, buf)


def _check_acyclic(node, roots, links) -> None:
    """Every walk from a root must end at a leaf: no interior node may lead back to itself
    (numba would loop forever)."""
    true_id, false_id, true_leaf, false_leaf = links
    state = np.zeros(true_id.size, np.int8)        # 0 unseen, 1 on the current path, 2 done
    for root in roots:
        stack = [int(root)]
        while stack:
            v = stack[-1]
            if state[v] == 0:
                state[v] = 1
                for child, leaf in ((true_id[v], true_leaf[v]), (false_id[v], false_leaf[v])):
                    if not leaf:
                        if state[child] == 1:
                            node.fail(f"the nodes form a cycle through node {int(child)}")
                        if state[child] == 0:
                            stack.append(int(child))
            else:
                stack.pop()
                state[v] = 2


# ---- Binarizer, ArrayFeatureExtractor --------------------------------------------------

@scalar_op
def _binarize(x, threshold, _):
    return 1 if x > threshold else 0


class Binarizer(Unary):
    """y = 1 where x > threshold else 0, in x's type (compared in float64: exact)."""

    supports_exact = True
    ALLOWED = frozenset({_F32, _F64, np.dtype(np.int32), _I64})
    VARIANTS = unary_param_variants(_binarize, "binarizer")

    def params(self, ctx: InferContext, dtype: np.dtype) -> tuple:
        return np.float64(np.float32(self.node.attr("threshold", 0.0))), np.float64(0)


class ArrayFeatureExtractor(Gather):
    """y[..., j] = x[..., idx[j]] (Gather's run, along the last axis)."""

    ALLOWED = frozenset({_F32, _F64, np.dtype(np.int32), _I64, _STRING})

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, self.ALLOWED)
        ctx.check_dtype(1, {_I64}, " (indices)")
        shape = tuple(ctx.shape(0))
        if not shape:
            ctx.fail("the input must have rank >= 1")
        m = math.prod(ctx.shape(1))
        ctx.set_output(0, dt, (1, m) if len(shape) == 1 else shape[:-1] + (m,))
        known = ctx.value(1)
        if known is not None:
            check_range(ctx.node, known, shape[-1], "index")
        ctx.prepared = (Take(dt, math.prod(shape[:-1]), shape[-1], 1, m), known is not None)

