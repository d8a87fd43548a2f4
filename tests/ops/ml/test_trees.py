"""Tree ensembles (ml: TreeEnsembleRegressor, TreeEnsembleClassifier, TreeEnsemble) on the
flat, branch-free walk: against onnx's reference evaluator, onnxruntime's documented
two-class conventions, and bit-identity over batch sizes and thread counts.

The converter-made models (scikit-learn, LightGBM, XGBoost) are in test_converters.py.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

import graphrt
from graphrt import ErrorKind, SessionError

from ...helpers import (EXACT, check, fails, one_node, onnxruntime_outputs, reference, run,
                        same)

ML = "ai.onnx.ml"
MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def legacy_forest(rng, n_trees=5, depth=4, n_features=4, n_targets=2, modes=4, per_leaf=1,
                  leaf_prob=0.2):
    """Random trees in the (tree id, node id) form of opsets 1 and 3: node ids shuffled
    within a tree (so the layout's renumbering is exercised), splits on halves (so inputs
    hit them exactly), random missing-value tracking; ``per_leaf`` weights a leaf."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                         "nodes_values", "nodes_truenodeids", "nodes_falsenodeids",
                         "nodes_missing_value_tracks_true", "target_treeids", "target_nodeids",
                         "target_ids", "target_weights")}
    for t in range(n_trees):
        nodes = []                      # (interior?, depth) in breadth-first order

        def grow(d):
            i = len(nodes)
            nodes.append(None)
            leaf = d == depth or (d > 0 and rng.random() < leaf_prob)
            nodes[i] = (None, None) if leaf else (grow(d + 1), grow(d + 1))
            return i

        grow(0)
        ids = rng.permutation(len(nodes)) + 10 * t           # shuffled, tree-local ids
        for i, kids in enumerate(nodes):
            leaf = kids[0] is None
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(int(ids[i]))
            a["nodes_featureids"].append(0 if leaf else int(rng.integers(0, n_features)))
            a["nodes_modes"].append("LEAF" if leaf else MODES[int(rng.integers(0, modes))])
            a["nodes_values"].append(0.0 if leaf else float(np.round(rng.normal() * 4) / 2))
            a["nodes_truenodeids"].append(0 if leaf else int(ids[kids[0]]))
            a["nodes_falsenodeids"].append(0 if leaf else int(ids[kids[1]]))
            a["nodes_missing_value_tracks_true"].append(int(rng.integers(0, 2)))
            if leaf:
                for j in rng.choice(n_targets, per_leaf, replace=False):
                    a["target_treeids"].append(t)
                    a["target_nodeids"].append(int(ids[i]))
                    a["target_ids"].append(int(j))
                    a["target_weights"].append(float(np.round(rng.normal(), 3)))
    a["n_targets"] = n_targets
    return a


def features(rng, n=64, f=4, dtype=np.float32):
    x = np.round(rng.normal(size=(n, f)) * 4) / 2
    x[rng.random((n, f)) < 0.1] = np.nan
    return x.astype(dtype)


def regress(x, attrs, **kw):
    return run("TreeEnsembleRegressor", [x], attrs, opset=17, outs=[np.float32], domain=ML,
               domain_opset=3, **kw)[0]


@pytest.mark.parametrize("modes", [4, 6])        # 4: the fast walk; 6: EQ/NEQ, the interpreter
@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("per_leaf", [1, 2])     # one weight a leaf, or dense rows of them
def test_regressor_vs_reference_and_onnxruntime(modes, agg, per_leaf):
    """The reference evaluator is the oracle for SUM and AVERAGE, except for NaNs at EQ and
    NEQ tests (it does not send them where onnxruntime and the spec do) and MIN/MAX of a
    target no leaf feeds (it leaves the float max); onnxruntime is the oracle for those,
    except where it leaves out a target's base value in rows that no leaf feeding the
    target reaches (the spec adds it always)."""
    rng = np.random.default_rng(modes * 10 + per_leaf)
    attrs = dict(legacy_forest(rng, modes=modes, per_leaf=per_leaf), aggregate_function=agg)
    if agg == "SUM":
        attrs["base_values"] = [0.25, -1.5]
    x = features(rng)
    got = regress(x, attrs, options=EXACT)
    if agg in ("SUM", "AVERAGE"):
        ref_x = x if modes == 4 else np.nan_to_num(x, nan=0.25)
        check("TreeEnsembleRegressor", [ref_x], attrs, opset=17, outs=[np.float32], domain=ML,
              domain_opset=3, rtol=1e-6, atol=1e-6, options=EXACT)
    if per_leaf == 2 or "base_values" not in attrs:
        model = one_node("TreeEnsembleRegressor", [x], attrs, opset=17, outs=[np.float32],
                         domain=ML, domain_opset=3)
        want = onnxruntime_outputs(model, {"x0": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tree_ensemble_opset5_fast_walk_vs_reference(dtype):
    from .test_ml import forest
    rng = np.random.default_rng(3)
    attrs = forest(rng)
    modes = np.array(numpy_helper.to_array(attrs["nodes_modes"])) % 4     # LEQ LT GTE GT only
    attrs["nodes_modes"] = numpy_helper.from_array(modes.astype(np.uint8))
    x = features(rng, f=3, dtype=dtype)
    check("TreeEnsemble", [x], attrs, opset=21, outs=[dtype], domain=ML, domain_opset=5,
          options=EXACT)


def test_splits_are_compared_in_the_input_type():
    """A float64 split between two float32 values: x <= t, x < t, x >= t, x > t as in
    float64, for float32 and float64 inputs; -inf and NaN splits."""
    t = float(np.float32(0.1)) + 1e-12        # just above a float32 value
    lo = np.float32(0.1)
    for mode, want in (("BRANCH_LEQ", 1), ("BRANCH_LT", 1), ("BRANCH_GTE", 0), ("BRANCH_GT", 0)):
        attrs = {"nodes_treeids": [0, 0, 0], "nodes_nodeids": [0, 1, 2],
                 "nodes_featureids": [0, 0, 0], "nodes_modes": [mode, "LEAF", "LEAF"],
                 "nodes_values_as_tensor": numpy_helper.from_array(np.array([t, 0, 0])),
                 "nodes_truenodeids": [1, 0, 0], "nodes_falsenodeids": [2, 0, 0],
                 "target_treeids": [0, 0], "target_nodeids": [1, 2], "target_ids": [0, 0],
                 "target_weights": [1.0, 0.0]}
        for dtype in (np.float32, np.float64):
            x = np.array([[lo], [np.nextafter(lo, np.float32(1))]], dtype)
            got = regress(x, attrs)[:, 0]
            exact = [float(v) for v in x[:, 0]]
            ops = {"BRANCH_LEQ": lambda v: v <= t, "BRANCH_LT": lambda v: v < t,
                   "BRANCH_GTE": lambda v: v >= t, "BRANCH_GT": lambda v: v > t}[mode]
            assert got.tolist() == [float(ops(v)) for v in exact], (mode, dtype)
            assert got[0] == want
    attrs["nodes_modes"] = ["BRANCH_LT", "LEAF", "LEAF"]
    x = np.array([[-np.inf], [0.0], [np.nan]], np.float32)
    for split in (-np.inf, np.nan):
        attrs["nodes_values_as_tensor"] = numpy_helper.from_array(np.array([split, 0, 0]))
        attrs.pop("nodes_missing_value_tracks_true", None)
        assert regress(x, attrs)[:, 0].tolist() == [0.0] * 3
        # a test no number passes that sends NaN to the true child (the walk's NaN copy
        # cannot express it: the interpreter takes the ensemble)
        attrs["nodes_missing_value_tracks_true"] = [1, 0, 0]
        assert regress(x, attrs)[:, 0].tolist() == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("large", [False, True])
def test_bits_do_not_depend_on_batch_or_threads(large, monkeypatch):
    """``large``: the longer row blocks of ensembles that pass the level-2 cache, and
    batches of any size in parallel."""
    if large:
        from graphrt.kernels.ml import forest
        monkeypatch.setattr(forest, "CACHED_NODES_BYTES", 0)
        monkeypatch.setattr(forest, "PARALLEL_WORK", 0)
    rng = np.random.default_rng(7)
    attrs = legacy_forest(rng, n_trees=60, depth=7, n_features=6, n_targets=3, per_leaf=1,
                          leaf_prob=0.1)
    x = features(rng, n=2000, f=6)
    model = one_node("TreeEnsembleRegressor", [x], attrs, opset=17, outs=[np.float32],
                     domain=ML, domain_opset=3)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    whole = {}
    for t in (1, 2):
        sess = graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=t))
        whole[t] = sess.run(None, {"x0": x})[0]
        for step in (1, 7, 333):
            parts = [sess.run(None, {"x0": x[i:i + step]})[0] for i in range(0, 400, step)]
            same(np.concatenate(parts)[:400], whole[t][:400])
    same(whole[1], whole[2])
    fast = graphrt.Session(model).run(None, {"x0": x})[0]
    same(fast, whole[1])                      # no transform: fast and exact agree too


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("per_leaf", [1, 2])
def test_leaf_mask_scan_gives_the_walks_bits(dtype, per_leaf, monkeypatch):
    """Trees of at most 64 leaves scanned by leaf bitmasks (leafmasks.py) against the
    lockstep walk, forced either way: the same bits for every batch size (groups of 16 rows
    and the rows short of one), over both thread counts and parallel blocks; splits on
    halves that the inputs hit, NaN sent either way, a test that never holds (LT -inf) and
    one that always does (LEQ +inf), one and two weights a leaf."""
    from graphrt.kernels.ml import forest, leafmasks
    monkeypatch.setattr(forest, "PARALLEL_WORK", 0)
    monkeypatch.setattr(leafmasks, "NODE_COST", 0.0)      # the scan for any ensemble that fits
    monkeypatch.setattr(leafmasks, "TREE_COST", 0.0)
    rng = np.random.default_rng(11)
    attrs = legacy_forest(rng, n_trees=300, depth=6, n_features=5, n_targets=3,
                          per_leaf=per_leaf, leaf_prob=0.15)
    interior = [i for i, m in enumerate(attrs["nodes_modes"]) if m != "LEAF"]
    for i, (mode, value) in zip(interior[:2], [("BRANCH_LT", -np.inf), ("BRANCH_LEQ", np.inf)]):
        attrs["nodes_modes"][i], attrs["nodes_values"][i] = mode, value
        attrs["nodes_missing_value_tracks_true"][i] = 0
    x = features(rng, n=1000, f=5, dtype=dtype)
    model = one_node("TreeEnsembleRegressor", [x], attrs, opset=17, outs=[np.float32],
                     domain=ML, domain_opset=3)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    scanned = []
    tables = forest.Forest.mask_tables
    monkeypatch.setattr(forest.Forest, "mask_tables",
                        lambda self, dt: scanned.append(dt) or tables(self, dt))
    got = {}
    for use in (False, True):
        monkeypatch.setattr(leafmasks, "USE", use)
        for t in (1, 2):
            sess = graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=t))
            got[use, t] = [sess.run(None, {"x0": x[:n]})[0] for n in (1000, 37, 16, 15, 3)]
        assert bool(scanned) == use          # the scan ran only where asked for
    for key, outs in got.items():
        for a, b in zip(outs, got[False, 1]):
            assert a.tobytes() == b.tobytes(), key


# onnxruntime 1.32's readings of two classes with one class id (checked against it):
# one tree whose leaves weigh 0.3 (x <= 0) and 0.8, classlabels [10, 20]
@pytest.mark.parametrize("class_id, weights, base, post, want_labels, want_scores", [
    (0, [0.3, 0.8], None, "NONE", [10, 20], [[0.7, 0.3], [0.2, 0.8]]),
    (0, [0.3, 0.8], None, "LOGISTIC", [10, 20], [[0.42555748, 0.57444252],
                                                 [0.31002552, 0.68997448]]),
    (0, [0.3, 0.8], None, "SOFTMAX", [10, 20], [[0.7, 0.3], [0.2, 0.8]]),
    (1, [0.3, 0.8], None, "NONE", [10, 20], [[0.0, 0.3], [0.0, 0.8]]),
    (0, [0.3, 0.8], [0.5], "NONE", [20, 20], [[0.2, 0.8], [-0.3, 1.3]]),
    (0, [-0.3, 0.8], None, "NONE", [10, 20], [[0.3, -0.3], [-0.8, 0.8]]),
])
def test_two_classes_one_score_column(class_id, weights, base, post, want_labels, want_scores):
    attrs = {"nodes_treeids": [0, 0, 0], "nodes_nodeids": [0, 1, 2],
             "nodes_featureids": [0, 0, 0], "nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF"],
             "nodes_values": [0.0, 0, 0], "nodes_truenodeids": [1, 0, 0],
             "nodes_falsenodeids": [2, 0, 0], "class_treeids": [0, 0], "class_nodeids": [1, 2],
             "class_ids": [class_id] * 2, "class_weights": weights,
             "classlabels_int64s": [10, 20], "post_transform": post}
    if base:
        attrs["base_values"] = base
    x = np.array([[-1.0], [1.0]], np.float32)
    labels, scores = run("TreeEnsembleClassifier", [x], attrs, opset=17,
                         outs=[np.int64, np.float32], domain=ML, domain_opset=1)
    assert labels.tolist() == want_labels
    np.testing.assert_allclose(scores, want_scores, rtol=1e-6, atol=1e-7)
    model = one_node("TreeEnsembleClassifier", [x], attrs, opset=17,
                     outs=[np.int64, np.float32], domain=ML, domain_opset=1)
    ort_labels, ort_scores = onnxruntime_outputs(model, {"x0": x})
    assert ort_labels.tolist() == want_labels
    np.testing.assert_allclose(ort_scores, want_scores, rtol=1e-6, atol=1e-7)


def test_classifier_many_classes_string_labels_exact():
    rng = np.random.default_rng(11)
    a = legacy_forest(rng, n_targets=4, per_leaf=2)
    attrs = {k.replace("target_", "class_"): v for k, v in a.items() if k != "n_targets"}
    attrs.update(classlabels_strings=["a", "b", "c", "d"], post_transform="SOFTMAX")
    x = features(rng)
    kw = dict(opset=17, outs=[object, np.float32], domain=ML, domain_opset=3)
    fast = run("TreeEnsembleClassifier", [x], attrs, **kw)
    exact = run("TreeEnsembleClassifier", [x], attrs, options=EXACT, **kw)
    want = reference("TreeEnsembleClassifier", [x], attrs, **kw)
    for got in (fast, exact):
        assert got[0].dtype == object and got[0].tolist() == want[0].tolist()
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("change, match", [
    ({"nodes_truenodeids": [0, 0, 0]}, "cycle"),                     # node 0 -> node 0
    ({"nodes_falsenodeids": [9, 0, 0]}, "names no node"),
    ({"nodes_modes": ["BRANCH_LE", "LEAF", "LEAF"]}, "unknown modes"),
    ({"target_ids": [0, 5]}, "outside"),
    ({"target_nodeids": [1, 1]}, "no weight"),                      # leaf 2 has no weight
    ({"target_nodeids": [0, 2]}, "no leaf"),                         # a weight on a branch
    ({"aggregate_function": "MEDIAN"}, "aggregate_function"),
    ({"post_transform": "EXP"}, "post_transform"),
    ({"base_values": [1.0, 2.0]}, "base_values"),
    ({"nodes_nodeids": [0, 1, 1]}, "share"),
])
def test_bad_attributes_fail_at_load(change, match):
    attrs = {"nodes_treeids": [0, 0, 0], "nodes_nodeids": [0, 1, 2],
             "nodes_featureids": [0, 0, 0], "nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF"],
             "nodes_values": [0.0, 0, 0], "nodes_truenodeids": [1, 0, 0],
             "nodes_falsenodeids": [2, 0, 0], "target_treeids": [0, 0],
             "target_nodeids": [1, 2], "target_ids": [0, 0], "target_weights": [1.0, 2.0]}
    attrs.update(change)
    fails(ErrorKind.INVALID_MODEL, "TreeEnsembleRegressor", [np.zeros((1, 1), np.float32)],
          attrs, opset=17, outs=[np.float32], domain=ML, domain_opset=3, match=match)


def test_feature_out_of_range_is_an_error():
    attrs = legacy_forest(np.random.default_rng(0), n_features=4)
    with pytest.raises(SessionError, match="feature"):
        regress(np.zeros((2, 2), np.float32), attrs)


def _compiled_runs(model, x, options=None):
    """Three runs of a one-node model: from the plan's second run its step is compiled calls
    only (asserted); the runs' outputs, each run's bits the first's (asserted)."""
    sess = graphrt.Session(model, options or graphrt.SessionOptions(intra_op_threads=1))
    runs = [sess.run(None, {"x0": x}) for _ in range(3)]
    (_key, entry), = sess._plans._entries
    plain = entry.pool._idle[0].program.plain
    assert plain and all(fn is not None for fn, _args, _i in plain)    # no Python step
    for outs in runs[1:]:
        assert [o.tobytes() for o in outs] == [o.tobytes() for o in runs[0]]
    return runs[0]


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("post, kind", [("NONE", "SUM"), ("LOGISTIC", "AVERAGE"),
                                        ("SOFTMAX", "SUM"), ("PROBIT", "SUM"),
                                        ("SOFTMAX_ZERO", "MIN")])
def test_tree_steps_are_compiled_calls(post, kind, mode):
    """Regressors and classifiers with integer labels run as compiled calls (the walk, then
    one kernel from raw sums to labels and scores): the values of the first run's Python
    step, and of the string-label classifier (which keeps labels in Python)."""
    rng = np.random.default_rng(21)
    options = graphrt.SessionOptions(mode=mode, intra_op_threads=1)
    a = legacy_forest(rng, n_targets=3, per_leaf=2)
    x = features(rng, n=9)
    if post == "PROBIT":
        x = np.abs(x) / 40          # scores in (0, 1)
    reg = dict(a, aggregate_function=kind, post_transform=post, base_values=[0.5, -1, 0.25])
    model = one_node("TreeEnsembleRegressor", [x], reg, opset=17, outs=[np.float32],
                     domain=ML, domain_opset=3)
    got = _compiled_runs(model, x, options)[0]
    if post == "NONE" and kind != "MIN":
        check("TreeEnsembleRegressor", [x], reg, opset=17, outs=[np.float32], domain=ML,
              domain_opset=3, rtol=1e-6, atol=1e-6)
    assert got.shape == (9, 3)
    cls = {k.replace("target_", "class_"): v for k, v in a.items() if k != "n_targets"}
    cls.update(classlabels_int64s=[7, 8, 9], post_transform=post, base_values=[0.5, -1, 0.25])
    kw = dict(opset=17, outs=[np.int64, np.float32], domain=ML, domain_opset=3)
    labels, scores = _compiled_runs(one_node("TreeEnsembleClassifier", [x], cls, **kw), x,
                                    options)
    strings = dict(cls, classlabels_strings=["7", "8", "9"])
    del strings["classlabels_int64s"]
    want = run("TreeEnsembleClassifier", [x], strings, options=options, opset=17,
               outs=[object, np.float32], domain=ML, domain_opset=3)
    assert labels.astype(str).tolist() == want[0].tolist()
    assert scores.tobytes() == want[1].tobytes()


@pytest.mark.parametrize("class_id", [0, 1])
def test_two_class_tree_steps_are_compiled_calls(class_id):
    """The two-class forms (one score column) as compiled calls: onnxruntime's readings
    (test_two_classes_one_score_column's first case) from the second run on."""
    attrs = {"nodes_treeids": [0, 0, 0], "nodes_nodeids": [0, 1, 2],
             "nodes_featureids": [0, 0, 0], "nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF"],
             "nodes_values": [0.0, 0, 0], "nodes_truenodeids": [1, 0, 0],
             "nodes_falsenodeids": [2, 0, 0], "class_treeids": [0, 0], "class_nodeids": [1, 2],
             "class_ids": [class_id] * 2, "class_weights": [0.3, 0.8],
             "classlabels_int64s": [10, 20], "post_transform": "LOGISTIC"}
    x = np.array([[-1.0], [1.0]], np.float32)
    model = one_node("TreeEnsembleClassifier", [x], attrs, opset=17,
                     outs=[np.int64, np.float32], domain=ML, domain_opset=1)
    labels, scores = _compiled_runs(model, x)
    ort_labels, ort_scores = onnxruntime_outputs(model, {"x0": x})
    assert labels.tolist() == ort_labels.tolist() == [10, 20]
    np.testing.assert_allclose(scores, ort_scores, rtol=1e-6, atol=1e-7)


def test_classifier_ties_take_the_first_class():
    """Equal best scores give the first of them (np.argmax's choice, onnxruntime's too), in
    the compiled calls as in the first run."""
    attrs = {"nodes_treeids": [0, 0, 0], "nodes_nodeids": [0, 1, 2],
             "nodes_featureids": [0, 0, 0], "nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF"],
             "nodes_values": [0.0, 0, 0], "nodes_truenodeids": [1, 0, 0],
             "nodes_falsenodeids": [2, 0, 0], "class_treeids": [0] * 6,
             "class_nodeids": [1, 1, 1, 2, 2, 2], "class_ids": [0, 1, 2] * 2,
             "class_weights": [0.5, 0.5, 0.1, 0.1, 0.7, 0.7],
             "classlabels_int64s": [10, 20, 30]}
    x = np.array([[-1.0], [1.0]], np.float32)
    model = one_node("TreeEnsembleClassifier", [x], attrs, opset=17,
                     outs=[np.int64, np.float32], domain=ML, domain_opset=1)
    labels, _scores = _compiled_runs(model, x)
    assert labels.tolist() == onnxruntime_outputs(model, {"x0": x})[0].tolist() == [10, 20]
