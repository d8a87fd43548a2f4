"""Tree-ensemble operators of ai.onnx.ml, all walked by :mod:`.forest`.

- TreeEnsembleRegressor (opsets 1, 3): y[n, t] = aggregate over the trees of the weights
  for target t of the leaves row n reaches, plus base_values[t], then post_transform.
  SUM adds, AVERAGE divides that sum by the tree count, MIN and MAX take the extreme weight
  (a target no leaf feeds counts 0). The output is float32.
- TreeEnsembleClassifier (opsets 1, 3): the same scores per class id, and the label of the
  best score (see :mod:`.labels` for the two-class form with one score column).
- TreeEnsemble (opset 5): the regressor's arithmetic with integer attributes, leaves in their
  own arrays, set-membership tests, and the output in the input's element type.

Opsets 1 and 3 name nodes by (tree id, node id); a tree's root is the first node listed for
it, and the trees are summed in the order their ids first appear. Splits and weights come from the float
attributes or, in opset 3, from their ``*_as_tensor`` doubles. Comparisons are those of the
input's type against the split (see :mod:`.forest`); weights add in float32 for float32
(and float16) inputs, else in float64, as onnxruntime does.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ..core.base import InferContext, OpKernel, RunContext, make_calls, scratch
from ..core.held import held_buffer
from . import labels, post
from .forest import AVERAGE, MAX, MEMBER, MIN, SUM, Forest

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
INPUTS = frozenset({_F32, _F64, np.dtype(np.int64), np.dtype(np.int32)})
MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4,
         "BRANCH_NEQ": 5, "LEAF": -1}
AGGREGATES = {"AVERAGE": AVERAGE, "SUM": SUM, "MIN": MIN, "MAX": MAX}


def ints(node, name: str, required: bool = True):
    v = node.attr(name)
    if v is None:
        if required:
            node.fail(f"attribute {name} is required")
        return None
    return np.asarray(v, dtype=np.int64).reshape(-1)


def floats(node, name: str, required: bool = True):
    """A float list attribute or its ``*_as_tensor`` double form (opset 3), as float64."""
    v, t = node.attr(name), node.attr(name + "_as_tensor")
    if v is not None and t is not None:
        node.fail(f"give {name} or {name}_as_tensor, not both")
    v = t if t is not None else v
    if v is None:
        if required:
            node.fail(f"attribute {name} is required")
        return None
    return np.asarray(v, dtype=np.float64).reshape(-1)


def _legacy_forest(node, prefix: str, n_targets: int) -> Forest:
    """A Forest from the (tree id, node id) attributes of opsets 1 and 3; ``prefix`` is
    "target" (regressor) or "class" (classifier)."""
    tree, nid = ints(node, "nodes_treeids"), ints(node, "nodes_nodeids")
    feature = ints(node, "nodes_featureids")
    names = node.attr("nodes_modes")
    if names is None:
        node.fail("attribute nodes_modes is required")
    unknown = sorted(set(names) - set(MODES))
    if unknown:
        node.fail(f"nodes_modes holds unknown modes {unknown}")
    mode = np.array([MODES[m] for m in names], np.int64)
    split = floats(node, "nodes_values", required=False)
    true_id, false_id = ints(node, "nodes_truenodeids"), ints(node, "nodes_falsenodeids")
    nan_true = ints(node, "nodes_missing_value_tracks_true", False)
    n = tree.size
    split = np.zeros(n) if split is None else split
    nan_true = np.zeros(n, np.int64) if nan_true is None else nan_true
    if {a.size for a in (nid, feature, mode, split, true_id, false_id, nan_true)} != {n}:
        node.fail("the nodes_* attributes must all have one length")
    key = (tree << 32) + nid
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    if n and np.any(sorted_key[1:] == sorted_key[:-1]):
        node.fail("two nodes share one (tree id, node id)")

    def find(keys, what):
        pos = np.minimum(np.searchsorted(sorted_key, keys), max(n - 1, 0))
        bad = (sorted_key[pos] != keys) if n else np.ones(keys.size, bool)
        return order[pos], bad

    is_leaf = mode < 0
    t_child, bad_t = find((tree << 32) + true_id, "true")
    f_child, bad_f = find((tree << 32) + false_id, "false")
    if np.any(~is_leaf & (bad_t | bad_f)):
        node.fail("a nodes_truenodeids/nodes_falsenodeids entry names no node of its tree")
    # each tree's root is the first node listed for it; trees go in order of appearance
    _, roots = np.unique(tree, return_index=True)
    roots = np.sort(roots)
    p_tree, p_node = ints(node, f"{prefix}_treeids"), ints(node, f"{prefix}_nodeids")
    p_target, p_weight = ints(node, f"{prefix}_ids"), floats(node, f"{prefix}_weights")
    if {p_tree.size, p_node.size, p_target.size, p_weight.size} != {p_tree.size}:
        node.fail(f"the {prefix}_* attributes must all have one length")
    at, bad = find((p_tree << 32) + p_node, prefix)
    if np.any(bad) or np.any(~is_leaf[at]):
        node.fail(f"a {prefix}_nodeids entry names no leaf of its tree")
    by_node = np.argsort(at, kind="stable")
    start = np.concatenate([[0], np.cumsum(np.bincount(at, minlength=n))])
    return Forest(node, roots, is_leaf, feature, np.maximum(mode, 0), split, t_child, f_child,
                  nan_true, start, p_target[by_node], p_weight[by_node], n_targets)


class _Trees(OpKernel):
    """Shared run: scores [N, targets], base values, post-transform."""

    supports_exact = True
    out_dtype = _F32
    inputs = INPUTS

    def setup(self, forest: Forest, agg: int, post_kind: int, base) -> None:
        node = self.node
        self.forest, self.agg, self.post = forest, agg, post_kind
        t = forest.n_targets
        if base is not None and base.size not in (0, t):
            node.fail(f"base_values holds {base.size} values for {t} targets")
        self.base = base if base is not None and base.size else None

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, self.inputs)
        shape = ctx.shape(0)
        if len(shape) == 1:
            shape = (1, shape[0])
        if len(shape) != 2:
            ctx.fail(f"the input must have shape [N, F], got {list(shape)}")
        rows, f = shape
        self.forest.check_features(ctx, f)
        self.declare(ctx, dt, rows)
        ctx.prepared = (rows, f, _F32 if dt in (_F32, np.dtype(np.float16)) else _F64)

    def declare(self, ctx: InferContext, dtype, rows: int) -> None:
        ctx.set_output(0, self.out_dtype, (rows, self.forest.n_targets))

    def final(self, ctx: RunContext, acc, buffer) -> tuple:
        """The call that makes the raw sums ``acc`` the node's outputs (labels.final_call);
        ``buffer(dtype, shape, use)`` gives scratch."""
        rows, out = ctx.prepared[0], ctx.flat_out[0]
        if out.dtype == np.float16:     # (numba stores no float16: finish_python casts)
            out = buffer(_F32, (acc.size,), "tree scores")
        return labels.final_call(ctx.exact, acc, out, labels.REGRESS, self.post,
                                 rows, self.forest.n_trees if self.agg == AVERAGE else 0,
                                 self.base)

    def calls(self, ctx: RunContext, buffer) -> list | None:
        """The node's run as compiled calls (the walk, then the final scores and labels),
        their scratch from ``buffer(dtype, shape, use)``; None where the input needs a cast
        first."""
        rows, f, cdt = ctx.prepared
        x = ctx.flat_in[0]
        if x.dtype != cdt:
            return None
        acc = buffer(cdt, (rows, self.forest.n_targets), "tree sums")
        walk = self.forest.walk_call(x.reshape(rows, f), self.agg, acc,
                                     lambda dtype, shape: buffer(dtype, shape, "tree walk"))
        return [walk, self.final(ctx, acc.reshape(-1), buffer)]

    def jit_calls(self, ctx: RunContext):
        if ctx.flat_out[0].dtype == np.float16:
            return None
        return self.calls(ctx, lambda dtype, shape, use: held_buffer(dtype, shape, ctx.held,
                                                                     use))

    def run(self, ctx: RunContext) -> None:
        taken = {}

        def buffer(dtype, shape, use):
            taken[use] = scratch(ctx, dtype, shape)
            return taken[use]

        calls = self.calls(ctx, buffer)
        if calls is None:       # the input cast to the compute type first
            rows, f, cdt = ctx.prepared
            x = scratch(ctx, cdt, (rows, f))
            np.copyto(x, ctx.inputs[0].reshape(rows, f), casting="unsafe")
            calls = self.calls(RunContext(ctx.node, [x], ctx.outputs, ctx.prepared, ctx.exact,
                                          ctx.arena, ctx.cancel, ctx.held), buffer)
        make_calls(calls)
        self.finish_python(ctx, taken)

    def finish_python(self, ctx: RunContext, taken: dict) -> None:
        """What the compiled calls leave to Python (string labels, float16 scores);
        ``taken``: their scratch by use."""
        if "tree scores" in taken:
            np.copyto(ctx.flat_out[0], taken["tree scores"], casting="unsafe")


class TreeEnsembleRegressor(_Trees):
    def __init__(self, node):
        super().__init__(node)
        agg = node.choice("aggregate_function", AGGREGATES, "SUM")
        t = int(node.attr("n_targets", 1))
        if t < 1:
            node.fail(f"n_targets must be >= 1, got {t}")
        self.setup(_legacy_forest(node, "target", t), agg,
                   post.parse(node, node.attr("post_transform")),
                   floats(node, "base_values", False))


class TreeEnsembleClassifier(_Trees):
    """Scores per class and the best class's label. Two classes whose weights all name one
    class id make one score s (onnxruntime's reading, which converters rely on): the label
    is classlabels[1] where s > 0.5 if every weight is >= 0 (s reads as a probability), else
    where s > 0 (a margin); class id 0 writes the two-column form of :mod:`.labels`, class
    id 1 the columns [0, s] after post_transform."""

    def __init__(self, node):
        super().__init__(node)
        self.classes = labels.ClassLabels(node)
        c = self.classes.count
        class_ids = ints(node, "class_ids")
        forest = _legacy_forest(node, "class", c)
        base = floats(node, "base_values", False)
        ids = np.unique(class_ids)
        self.binary = int(ids[0]) if c == 2 and ids.size == 1 else None
        if self.binary is not None and base is not None and base.size == 1:
            base = np.array([base[0], 0.0])
        self.setup(forest, SUM, post.parse(node, node.attr("post_transform")), base)
        positive = bool(np.all(forest.pair_weight >= 0))
        self.threshold, self.probability = (0.5 if positive else 0.0), positive

    def declare(self, ctx: InferContext, dtype, rows: int) -> None:
        ctx.set_output(0, self.classes.dtype, (rows,))
        ctx.set_output(1, _F32, (rows, self.classes.count))

    def final(self, ctx: RunContext, acc, buffer) -> tuple:
        rows = ctx.prepared[0]
        kind = {0: labels.ONE_COLUMN, 1: labels.SECOND_COLUMN}.get(self.binary, labels.ARGMAX)
        out = ctx.flat_out[1] if ctx.flat_out[1] is not None else \
            buffer(_F32, (rows * self.classes.count,), "tree scores")
        return labels.final_call(ctx.exact, acc, out, kind, self.post, rows, 0, self.base,
                                 self.threshold, self.probability, self.classes,
                                 buffer(np.int64, (rows,), "tree labels"), ctx.flat_out[0])

    def jit_calls(self, ctx: RunContext):
        return None if self.classes.dtype == np.dtype(object) else super().jit_calls(ctx)

    def finish_python(self, ctx: RunContext, taken: dict) -> None:
        labels.take_labels(ctx, self.classes, taken["tree labels"])


class TreeEnsemble(_Trees):
    """Opset 5 (module docstring); the output has the input's element type."""

    inputs = _dt.FLOATS

    def __init__(self, node):
        super().__init__(node)
        agg = int(node.attr("aggregate_function", 1))
        if not AVERAGE <= agg <= MAX:
            node.fail(f"aggregate_function must be 0..3, got {agg}")
        roots = ints(node, "tree_roots")
        feature = ints(node, "nodes_featureids")
        n = feature.size
        mode = floats(node, "nodes_modes").astype(np.int64)
        split = floats(node, "nodes_splits")
        true_id, false_id, true_leaf, false_leaf = (
            ints(node, k) for k in ("nodes_truenodeids", "nodes_falsenodeids",
                                    "nodes_trueleafs", "nodes_falseleafs"))
        nan_true = ints(node, "nodes_missing_value_tracks_true", False)
        nan_true = np.zeros(n, np.int64) if nan_true is None else nan_true
        targets, weights = ints(node, "leaf_targetids"), floats(node, "leaf_weights")
        if {a.size for a in (mode, split, nan_true, true_id, false_id, true_leaf,
                             false_leaf)} != {n} or targets.size != weights.size:
            node.fail("the nodes_* attributes (and the leaf_* ones) must all have one length")
        n_leaves = targets.size
        if np.any((roots < 0) | (roots >= n)):
            node.fail("a tree_roots entry is out of range")
        for ids, leaf in ((true_id, true_leaf), (false_id, false_leaf)):
            if np.any((ids < 0) | (ids >= np.where(leaf != 0, n_leaves, n))):
                node.fail("a nodes_truenodeids/nodes_falsenodeids entry is out of range")
        t = node.attr("n_targets")
        t = int(t) if t is not None else int(targets.max(initial=-1)) + 1
        is_leaf = np.concatenate([np.zeros(n, bool), np.ones(n_leaves, bool)])
        pad = np.zeros(n_leaves, np.int64)
        forest = Forest(
            node, roots, is_leaf, np.concatenate([feature, pad]),
            np.concatenate([mode, pad]), np.concatenate([split, np.zeros(n_leaves)]),
            np.concatenate([np.where(true_leaf != 0, true_id + n, true_id), pad]),
            np.concatenate([np.where(false_leaf != 0, false_id + n, false_id), pad]),
            np.concatenate([nan_true, pad]),
            np.concatenate([np.zeros(n, np.int64), np.arange(n_leaves + 1)]), targets, weights,
            t, members=self._members(node, mode, n_leaves))
        self.setup(forest, agg, post.parse(node, node.attr("post_transform", 0)), None)

    @staticmethod
    def _members(node, mode, n_leaves):
        """Each node's set (empty unless BRANCH_MEMBER): membership_values split at NaNs,
        in node order, as (start per node, values)."""
        values = node.attr("membership_values")
        values = np.zeros(0) if values is None else np.asarray(values, np.float64).reshape(-1)
        cuts = np.flatnonzero(np.isnan(values))
        is_member = mode == MEMBER
        if cuts.size != int(is_member.sum()):
            node.fail(f"membership_values holds {cuts.size} NaN-terminated sets for "
                      f"{int(is_member.sum())} BRANCH_MEMBER nodes")
        begin = np.zeros(mode.size + n_leaves, np.int64)
        end = np.zeros(mode.size + n_leaves, np.int64)
        starts = np.concatenate([[0], cuts[:-1] + 1]) if cuts.size else cuts
        begin[np.flatnonzero(is_member)] = starts
        end[np.flatnonzero(is_member)] = cuts
        return begin, end, values

    def declare(self, ctx: InferContext, dtype, rows: int) -> None:
        ctx.set_output(0, dtype, (rows, self.forest.n_targets))
