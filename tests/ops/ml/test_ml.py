"""The ai.onnx.ml operators (ml: LabelEncoder, TreeEnsemble (opset 5), Binarizer,
ArrayFeatureExtractor) through graphrt.Session, compared with onnx's reference evaluator,
onnxruntime (TreeEnsemble's MIN/MAX, which the reference fills differently) or plain
numpy/Python.

Inputs given as ``Const(array)`` become initializers (values known when the plan is made).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import numpy_helper

import graphrt
from graphrt import ErrorKind

from ...helpers import (Const, EXACT, check, fails, one_node, onnxruntime_outputs, reference, run,
                        same, strings)


ML = "ai.onnx.ml"


S = np.dtype(object)


# ---- LabelEncoder ------------------------------------------------------------------------

def test_label_encoder_opset1_both_ways():
    attrs = {"classes_strings": ["a", "b", "c"], "default_int64": 7, "default_string": "?"}
    got = run("LabelEncoder", [strings("c", "z", "a", shape=(3, 1))], attrs, opset=21,
              outs=[np.int64], domain=ML, domain_opset=1)
    assert got[0].tolist() == [[2], [7], [0]]
    got = run("LabelEncoder", [np.array([1, 5, -1, 0], np.int64)], attrs, opset=21, outs=[S],
              domain=ML, domain_opset=1)
    assert got[0].tolist() == ["b", "?", "?", "a"]


@pytest.mark.parametrize("attrs, x", [
    ({"keys_strings": ["a", "b", "a"], "values_floats": [1.5, 2.5, 3.5]},
     strings("a", "b", "q", shape=(1, 3))),
    ({"keys_int64s": [3, 1, 2], "values_strings": ["x", "y", "z"], "default_string": "d"},
     np.array([[1, 2], [9, 3]], np.int64)),
    ({"keys_floats": [0.5, -1.0], "values_int64s": [10, 20], "default_int64": 0},
     np.array([-1.0, 0.5, 0.25], np.float32)),
])
def test_label_encoder_lists(attrs, x):
    check("LabelEncoder", [x], attrs, opset=21, outs=[_value_type(attrs)], domain=ML,
          domain_opset=2, options=EXACT)


def _value_type(attrs):
    return {"values_floats": np.float32, "values_int64s": np.int64,
            "values_strings": object}[next(k for k in attrs if k.startswith("values"))]


def test_label_encoder_tensors_nan_and_defaults():
    keys = np.array([1.0, np.nan, 2.0, 1.0], np.float64)
    values = np.array([1, 2, 3, 4], np.int32)
    attrs = {"keys_tensor": numpy_helper.from_array(keys),
             "values_tensor": numpy_helper.from_array(values)}
    x = np.array([np.nan, 1.0, 2.0, 5.0, -0.0], np.float64)
    got = run("LabelEncoder", [x], attrs, opset=21, outs=[np.int32], domain=ML, domain_opset=4)[0]
    assert got.dtype == np.int32 and got.tolist() == [2, 4, 3, -1, -1]   # -1: the default
    attrs["default_tensor"] = numpy_helper.from_array(np.array([9], np.int32))
    assert run("LabelEncoder", [x], attrs, opset=21, outs=[np.int32], domain=ML,
               domain_opset=4)[0].tolist() == [2, 4, 3, 9, 9]
    attrs = {"keys_tensor": numpy_helper.from_array(np.array([3, 4], np.int16)),
             "values_tensor": numpy_helper.from_array(np.array(["p", "q"], dtype=object))}
    got = run("LabelEncoder", [np.array([4, 0], np.int16)], attrs, opset=21, outs=[S], domain=ML,
              domain_opset=4)[0]
    assert got.tolist() == ["q", "_Unused"]


def test_label_encoder_errors():
    fails(ErrorKind.INVALID_MODEL, "LabelEncoder", [strings("a")],
          {"keys_strings": ["a"], "values_int64s": [1, 2]}, opset=21, outs=[np.int64], domain=ML, domain_opset=2)
    fails(ErrorKind.INVALID_MODEL, "LabelEncoder", [strings("a")], {"values_int64s": [1]},
          opset=21, outs=[np.int64], domain=ML, domain_opset=2)
    fails(ErrorKind.INVALID_MODEL, "LabelEncoder", [np.zeros(2, np.int64)],
          {"keys_strings": ["a"], "values_int64s": [1]}, opset=21, outs=[np.int64], domain=ML, domain_opset=2)


# ---- TreeEnsemble ------------------------------------------------------------------------

def forest(rng, n_trees=4, depth=3, n_features=3, n_targets=3, member=False):
    """Random complete trees; returns the attributes."""
    a = {k: [] for k in ("nodes_featureids", "nodes_modes", "nodes_splits", "nodes_truenodeids",
                         "nodes_falsenodeids", "nodes_trueleafs", "nodes_falseleafs",
                         "nodes_missing_value_tracks_true", "leaf_targetids", "leaf_weights")}
    roots, members = [], []

    def grow(d):
        i = len(a["nodes_featureids"])
        mode = int(rng.integers(0, 7 if member else 6))
        a["nodes_featureids"].append(int(rng.integers(0, n_features)))
        a["nodes_modes"].append(mode)
        a["nodes_splits"].append(float(np.round(rng.normal() * 4) / 2))
        a["nodes_missing_value_tracks_true"].append(int(rng.integers(0, 2)))
        if mode == 6:
            # whole non-zero members (the reference ends a set at a 0, onnxruntime takes ints)
            members.extend([float(v) for v in rng.choice([-3, -2, -1, 1, 2, 3], 3)] + [math.nan])
        for side in ("true", "false"):
            a[f"nodes_{side}nodeids"].append(0)
            a[f"nodes_{side}leafs"].append(0)
        for side in ("true", "false"):
            if d == depth:
                a[f"nodes_{side}leafs"][i] = 1
                a[f"nodes_{side}nodeids"][i] = len(a["leaf_weights"])
                a["leaf_targetids"].append(int(rng.integers(0, n_targets)))
                a["leaf_weights"].append(float(np.round(rng.normal(), 2)))
            else:
                a[f"nodes_{side}nodeids"][i] = grow(d + 1)
        return i

    for _ in range(n_trees):
        roots.append(grow(1))
    a["nodes_modes"] = numpy_helper.from_array(np.array(a["nodes_modes"], np.uint8))
    a["nodes_splits"] = numpy_helper.from_array(np.array(a["nodes_splits"], np.float32))
    a["leaf_weights"] = numpy_helper.from_array(np.array(a["leaf_weights"], np.float32))
    if members:
        a["membership_values"] = numpy_helper.from_array(np.array(members, np.float32))
    a.update(tree_roots=roots, n_targets=n_targets)
    return a


def features(rng, n=40, f=3, dtype=np.float32):
    x = np.round(rng.normal(size=(n, f)) * 4) / 2       # halves: EQ and MEMBER nodes match
    x[rng.random((n, f)) < 0.1] = np.nan
    return x.astype(dtype)


@pytest.mark.parametrize("agg", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tree_ensemble_vs_reference(agg, dtype):
    rng = np.random.default_rng(agg)
    attrs = forest(rng, member=True)
    attrs["aggregate_function"] = agg
    x = features(rng, dtype=dtype)
    got = run("TreeEnsemble", [x], attrs, opset=21, outs=[dtype], domain=ML, domain_opset=5,
              options=EXACT)[0]
    want = reference("TreeEnsemble", [x], attrs, opset=21, outs=[dtype], domain=ML, domain_opset=5)
    if agg == 1:
        same(got, want)
    else:
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("agg", [2, 3])
def test_tree_ensemble_min_max_vs_onnxruntime(agg):
    rng = np.random.default_rng(agg)
    attrs = forest(rng, n_targets=4)
    attrs["aggregate_function"] = agg
    x = features(rng)
    model = one_node("TreeEnsemble", [x], attrs, opset=21, outs=[np.float32], domain=ML,
                     domain_opset=5)
    want = onnxruntime_outputs(model, {"x0": x})[0]
    np.testing.assert_array_equal(graphrt.Session(model).run(None, {"x0": x})[0], want)


def _softmax(y, zero=False):
    keep = (y != 0) if zero else np.ones_like(y, bool)
    e = np.where(keep, np.exp(y - np.max(np.where(keep, y, -np.inf), 1, keepdims=True)), 0)
    return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("post", [1, 2, 3, 4])
def test_tree_ensemble_post_transforms(post):
    scipy = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(post)
    attrs = forest(rng)
    x = features(rng, dtype=np.float64)
    raw = run("TreeEnsemble", [x], attrs, opset=21, outs=[np.float64], domain=ML, domain_opset=5)[0]
    got = run("TreeEnsemble", [x], dict(attrs, post_transform=post), opset=21, outs=[np.float64],
              domain=ML, domain_opset=5)[0]
    with np.errstate(all="ignore"):
        want = {1: lambda y: _softmax(y), 2: lambda y: 1 / (1 + np.exp(-y)),
                3: lambda y: _softmax(y, zero=True),
                4: lambda y: np.sqrt(2) * scipy.erfinv(2 * y - 1)}[post](raw)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    exact = run("TreeEnsemble", [x], dict(attrs, post_transform=post), opset=21,
                outs=[np.float64], domain=ML, domain_opset=5, options=EXACT)[0]
    np.testing.assert_allclose(exact, want, rtol=1e-12, atol=1e-12)


def test_tree_ensemble_float16_and_single_leaf_tree():
    attrs = {"tree_roots": [0], "nodes_featureids": [0], "nodes_modes":
             numpy_helper.from_array(np.array([0], np.uint8)), "nodes_splits":
             numpy_helper.from_array(np.array([0.0], np.float16)),
             "nodes_truenodeids": [0], "nodes_falsenodeids": [0], "nodes_trueleafs": [1],
             "nodes_falseleafs": [1], "leaf_targetids": [1],
             "leaf_weights": numpy_helper.from_array(np.array([0.1], np.float16))}
    got = run("TreeEnsemble", [np.ones((2, 1), np.float16)], attrs, opset=21, outs=[np.float16],
              domain=ML, domain_opset=5)[0]
    assert got.dtype == np.float16 and got.tolist() == [[0, np.float16(0.1)]] * 2


@pytest.mark.parametrize("change", [
    {"nodes_truenodeids": [0]},                        # node 0 -> node 0: a cycle
    {"nodes_falsenodeids": [5]},                       # a leaf that does not exist
    {"leaf_targetids": [3]},                           # target out of range
    {"tree_roots": [1]},
    {"nodes_modes": numpy_helper.from_array(np.array([6], np.uint8))},   # no member set
    {"aggregate_function": 7},
])
def test_tree_ensemble_bad_attributes(change):
    attrs = {"tree_roots": [0], "nodes_featureids": [0], "nodes_modes":
             numpy_helper.from_array(np.array([0], np.uint8)), "nodes_splits":
             numpy_helper.from_array(np.array([0.0], np.float32)),
             "nodes_truenodeids": [0], "nodes_falsenodeids": [1], "nodes_trueleafs": [1],
             "nodes_falseleafs": [1], "leaf_targetids": [0, 1], "n_targets": 2,
             "leaf_weights": numpy_helper.from_array(np.array([1, 2], np.float32))}
    if "nodes_truenodeids" in change:
        attrs["nodes_trueleafs"] = [0]
    attrs.update(change)
    fails(ErrorKind.INVALID_MODEL, "TreeEnsemble", [np.zeros((1, 1), np.float32)],
          attrs, opset=21, outs=[np.float32], domain=ML, domain_opset=5)


def test_tree_ensemble_feature_out_of_range():
    attrs = forest(np.random.default_rng(0), n_features=3)
    fails(ErrorKind.INVALID_MODEL, "TreeEnsemble", [np.zeros((2, 2), np.float32)],
          attrs, opset=21, outs=[np.float32], domain=ML, domain_opset=5)


# ---- Binarizer, ArrayFeatureExtractor ----------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_binarizer(dtype):
    x = np.array([[-2, 0, 1, 3], [2, 1, 0, 5]], dtype)
    got = run("Binarizer", [x], {"threshold": 1.0}, opset=21, outs=[dtype], domain=ML,
              domain_opset=1, options=EXACT)[0]
    np.testing.assert_array_equal(got, (x > 1).astype(dtype))
    assert got.dtype == dtype


def test_binarizer_nan_and_fraction():
    x = np.array([np.nan, 0.5, 0.51, np.inf], np.float64)
    got = run("Binarizer", [x], {"threshold": 0.5}, opset=21, outs=[np.float64], domain=ML,
              domain_opset=1)[0]
    assert got.tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize("x, idx", [
    (np.arange(5, dtype=np.float32), np.array([4, 0, -1], np.int64)),
    (np.arange(24, dtype=np.int64).reshape(2, 3, 4), np.array([[3, 1]], np.int64)),
    (strings("a", "b", "c", "d", shape=(2, 2)), np.array([1, 1, 0], np.int64)),
])
def test_array_feature_extractor(x, idx):
    check("ArrayFeatureExtractor", [x, idx], opset=21, outs=[x.dtype], domain=ML, domain_opset=1,
          options=EXACT)
    check("ArrayFeatureExtractor", [x, Const(idx)], opset=21, outs=[x.dtype], domain=ML,
          domain_opset=1)


def test_array_feature_extractor_out_of_range():
    x = np.zeros((2, 3), np.float32)
    fails(ErrorKind.INVALID_INPUT, "ArrayFeatureExtractor", [x, np.array([3], np.int64)],
          opset=21, outs=[np.float32], domain=ML, domain_opset=1)
    fails(ErrorKind.INVALID_INPUT, "ArrayFeatureExtractor", [x, Const(np.array([-4], np.int64))],
          opset=21, outs=[np.float32], domain=ML, domain_opset=1)
