"""String operators (strings, tfidf) and the ai.onnx.ml operators (ml) through
graphrt.Session, compared with onnx's reference evaluator, onnxruntime (TreeEnsemble's
MIN/MAX, which the reference fills differently) or plain numpy/Python.

Inputs given as ``Const(array)`` become initializers (values known when the plan is made).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphrt
from graphrt import ErrorKind, SessionError, SessionOptions

NODE = "the_node"
ML = "ai.onnx.ml"
EXACT = SessionOptions(mode="exact")
S = np.dtype(object)


class Const:
    def __init__(self, value):
        self.value = np.asarray(value)


def strings(*items, shape=None):
    a = np.array(list(items), dtype=object)
    return a.reshape(shape) if shape is not None else a


def model_of(op, inputs, out_types, attrs=None, domain="", opset=None):
    names, ins, inits = [], [], []
    for i, x in enumerate(inputs):
        name = f"x{i}"
        names.append(name)
        if isinstance(x, Const):
            inits.append(numpy_helper.from_array(x.value, name))
        else:
            ins.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape))
    outs = [f"y{k}" for k in range(len(out_types))]
    node = helper.make_node(op, names, outs, name=NODE, domain=domain, **(attrs or {}))
    vi = [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(np.dtype(t)), None)
          for o, t in zip(outs, out_types)]
    graph = helper.make_graph([node], "g", ins, vi, inits)
    opsets = [helper.make_opsetid("", 21)]
    if domain:
        opsets.append(helper.make_opsetid(domain, opset))
    elif opset:
        opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model


def feeds_of(inputs):
    return {f"x{i}": x for i, x in enumerate(inputs) if not isinstance(x, Const)}


def run(op, inputs, out_types, attrs=None, domain="", opset=None, options=None):
    model = model_of(op, inputs, out_types, attrs, domain, opset)
    return graphrt.Session(model, options).run(None, feeds_of(inputs))


def reference(op, inputs, out_types, attrs=None, domain="", opset=None):
    model = model_of(op, inputs, out_types, attrs, domain, opset)
    return ReferenceEvaluator(model).run(None, feeds_of(inputs))


def check(got, want, exact=True):
    for g, w in zip(got, want):
        w = np.asarray(w)
        if w.dtype.kind == "U":
            w = w.astype(object)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if exact or w.dtype.kind not in "f":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def compare(op, inputs, out_types, attrs=None, domain="", opset=None, options=None):
    got = run(op, inputs, out_types, attrs, domain, opset, options)
    check(got, reference(op, inputs, out_types, attrs, domain, opset))
    return got


def fails(kind, op, inputs, out_types, attrs=None, domain="", opset=None):
    with pytest.raises(SessionError) as e:
        run(op, inputs, out_types, attrs, domain, opset)
    assert e.value.kind == kind and e.value.node == NODE, e.value
    return e.value


# ---- StringConcat, StringSplit, StringNormalizer, RegexFullMatch -------------------------

@pytest.mark.parametrize("a, b", [
    (strings("ab", "", "é中", shape=(3, 1)), strings("x", "yz")),       # broadcast both ways
    (np.array("cat", dtype=object), np.array("s", dtype=object)),      # 0-d
    (strings(shape=(0, 2)), strings("a", "b")),                         # empty
])
def test_string_concat(a, b):
    got = compare("StringConcat", [a, b], [S], options=EXACT)[0]
    assert got.shape == np.broadcast_shapes(a.shape, b.shape)


def test_string_concat_constant_inputs_fold():
    got = run("StringConcat", [Const(strings("a", "b")), strings("c")], [S])[0]
    assert got.tolist() == ["ac", "bc"]


@pytest.mark.parametrize("attrs", [{}, {"delimiter": ""}, {"delimiter": "-"}, {"delimiter": "ab"},
                                   {"maxsplit": 1}, {"delimiter": "-", "maxsplit": 0},
                                   {"delimiter": "-", "maxsplit": 2}])
def test_string_split(attrs):
    x = strings(" a  b c ", "a-b--c-", "", "xabyabz", "-", shape=(5, 1))
    got = compare("StringSplit", [x], [S, np.int64], attrs)
    assert got[0].shape[:2] == (5, 1)


def test_string_split_empty_and_one_output():
    y, z = run("StringSplit", [strings(shape=(2, 0))], [S, np.int64])
    assert y.shape == (2, 0, 0) and z.shape == (2, 0)
    y, = run("StringSplit", [strings("a.b", "c")], [S], {"delimiter": "."})
    assert y.tolist() == [["a", "b"], ["c", ""]]


def test_string_split_bad_maxsplit():
    fails(ErrorKind.INVALID_MODEL, "StringSplit", [strings("a")], [S, np.int64], {"maxsplit": -1})


@pytest.mark.parametrize("attrs, x, want", [
    ({"case_change_action": "UPPER", "stopwords": ["monday"]},
     strings("Monday", "tuesday", "MONDAY", "wed"), ["TUESDAY", "WED"]),
    ({"case_change_action": "LOWER", "stopwords": ["monday"], "is_case_sensitive": 1},
     strings("Monday", "monday", "Tue"), ["monday", "tue"]),
    ({"stopwords": ["a", "b"], "locale": "en_US"}, strings("a", "B", shape=(1, 2)), [[""]]),
    ({}, strings("Ab", "cD", shape=(1, 2)), [["Ab", "cD"]]),
    ({"case_change_action": "LOWER"}, strings(), [""]),
])
def test_string_normalizer(attrs, x, want):
    got = run("StringNormalizer", [x], [S], attrs, opset=10, options=EXACT)[0]
    assert got.dtype == S and got.tolist() == want


def test_string_normalizer_errors():
    fails(ErrorKind.INVALID_INPUT, "StringNormalizer", [strings("a", "b", shape=(2, 1))], [S],
          opset=10)
    fails(ErrorKind.INVALID_MODEL, "StringNormalizer", [strings("a")], [S],
          {"case_change_action": "TITLE"}, opset=10)


def test_regex_full_match():
    x = strings("www.a.com", "www.a.com.", "WWW.b.com", "", shape=(2, 2))
    compare("RegexFullMatch", [x], [np.bool_], {"pattern": r"www\.[\w.-]+\.com"}, options=EXACT)
    compare("RegexFullMatch", [strings(shape=(0, 3))], [np.bool_], {"pattern": "a*"})


def test_regex_full_match_is_ascii_like_re2():
    got = run("RegexFullMatch", [strings("abc", "é", "a1_")], [np.bool_], {"pattern": r"\w+"})[0]
    assert got.tolist() == [True, False, True]


def test_regex_full_match_errors():
    fails(ErrorKind.UNSUPPORTED, "RegexFullMatch", [strings("a")], [np.bool_], {"pattern": "(a"})
    fails(ErrorKind.INVALID_MODEL, "RegexFullMatch", [strings("a")], [np.bool_])
    fails(ErrorKind.UNSUPPORTED, "RegexFullMatch", [np.zeros(2, np.float32)], [np.bool_],
          {"pattern": "a"})


# ---- TfIdfVectorizer ---------------------------------------------------------------------

_POOL = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 2, 3, 5]        # 4 1-grams, 3 2-grams, 1 3-gram
_TFIDF = {"ngram_counts": [0, 4, 10], "ngram_indexes": [0, 1, 2, 3, 4, 5, 6, 7],
          "pool_int64s": _POOL}


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("grams, skip", [((1, 1), 0), ((1, 3), 2), ((2, 3), 5), ((3, 3), 1)])
def test_tfidf_int(mode, grams, skip):
    rng = np.random.default_rng(sum(grams) + skip)
    x = rng.integers(1, 9, (3, 17)).astype(np.int64)
    attrs = dict(_TFIDF, mode=mode, min_gram_length=grams[0], max_gram_length=grams[1],
                 max_skip_count=skip, weights=list(np.linspace(0.5, 2.0, 8)))
    compare("TfIdfVectorizer", [x], [np.float32], attrs, opset=9)
    compare("TfIdfVectorizer", [x[0].astype(np.int32)], [np.float32], attrs, opset=9)


def test_tfidf_strings_and_permuted_columns():
    pool = ["a", "b", "c", "a", "b", "b", "c"]
    attrs = {"mode": "TFIDF", "min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 1,
             "ngram_counts": [0, 3], "ngram_indexes": [4, 0, 2, 1, 3], "pool_strings": pool,
             "weights": [1.0, 2.0, 3.0, 4.0, 5.0]}
    x = strings("a", "b", "a", "x", "b", "c", "c", shape=(1, 7))
    compare("TfIdfVectorizer", [x], [np.float32], attrs, opset=9, options=EXACT)


def test_tfidf_empty():
    attrs = dict(_TFIDF, mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=1)
    assert run("TfIdfVectorizer", [np.zeros((0, 4), np.int64)], [np.float32], attrs,
               opset=9)[0].shape == (0, 8)
    got = run("TfIdfVectorizer", [np.zeros((2, 0), np.int64)], [np.float32], attrs, opset=9)[0]
    assert got.shape == (2, 8) and not got.any()


@pytest.mark.parametrize("change, kind", [
    ({"ngram_counts": [0, 4, 9]}, ErrorKind.INVALID_MODEL),     # 5 items are not 2-grams
    ({"mode": "BM25"}, ErrorKind.INVALID_MODEL),
    ({"pool_strings": ["a"]}, ErrorKind.INVALID_MODEL),           # both pools
    ({"min_gram_length": 3, "max_gram_length": 2}, ErrorKind.INVALID_MODEL),
    ({"weights": [1.0]}, ErrorKind.INVALID_MODEL),
])
def test_tfidf_bad_attributes(change, kind):
    attrs = dict(_TFIDF, mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0)
    attrs.update(change)
    fails(kind, "TfIdfVectorizer", [np.zeros(4, np.int64)], [np.float32], attrs, opset=9)


def test_tfidf_bad_input():
    attrs = dict(_TFIDF, mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0)
    fails(ErrorKind.UNSUPPORTED, "TfIdfVectorizer", [strings("a")], [np.float32], attrs, opset=9)
    fails(ErrorKind.INVALID_MODEL, "TfIdfVectorizer", [np.zeros((1, 2, 2), np.int64)],
          [np.float32], attrs, opset=9)


# ---- LabelEncoder ------------------------------------------------------------------------

def test_label_encoder_opset1_both_ways():
    attrs = {"classes_strings": ["a", "b", "c"], "default_int64": 7, "default_string": "?"}
    got = run("LabelEncoder", [strings("c", "z", "a", shape=(3, 1))], [np.int64], attrs, ML, 1)
    assert got[0].tolist() == [[2], [7], [0]]
    got = run("LabelEncoder", [np.array([1, 5, -1, 0], np.int64)], [S], attrs, ML, 1)
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
    compare("LabelEncoder", [x], [_value_type(attrs)], attrs, ML, 2, options=EXACT)


def _value_type(attrs):
    return {"values_floats": np.float32, "values_int64s": np.int64,
            "values_strings": object}[next(k for k in attrs if k.startswith("values"))]


def test_label_encoder_tensors_nan_and_defaults():
    keys = np.array([1.0, np.nan, 2.0, 1.0], np.float64)
    values = np.array([1, 2, 3, 4], np.int32)
    attrs = {"keys_tensor": numpy_helper.from_array(keys),
             "values_tensor": numpy_helper.from_array(values)}
    x = np.array([np.nan, 1.0, 2.0, 5.0, -0.0], np.float64)
    got = run("LabelEncoder", [x], [np.int32], attrs, ML, 4)[0]
    assert got.dtype == np.int32 and got.tolist() == [2, 4, 3, -1, -1]   # -1: the default
    attrs["default_tensor"] = numpy_helper.from_array(np.array([9], np.int32))
    assert run("LabelEncoder", [x], [np.int32], attrs, ML, 4)[0].tolist() == [2, 4, 3, 9, 9]
    attrs = {"keys_tensor": numpy_helper.from_array(np.array([3, 4], np.int16)),
             "values_tensor": numpy_helper.from_array(np.array(["p", "q"], dtype=object))}
    got = run("LabelEncoder", [np.array([4, 0], np.int16)], [S], attrs, ML, 4)[0]
    assert got.tolist() == ["q", "_Unused"]


def test_label_encoder_errors():
    fails(ErrorKind.INVALID_MODEL, "LabelEncoder", [strings("a")], [np.int64],
          {"keys_strings": ["a"], "values_int64s": [1, 2]}, ML, 2)
    fails(ErrorKind.INVALID_MODEL, "LabelEncoder", [strings("a")], [np.int64],
          {"values_int64s": [1]}, ML, 2)
    fails(ErrorKind.INVALID_MODEL, "LabelEncoder", [np.zeros(2, np.int64)], [np.int64],
          {"keys_strings": ["a"], "values_int64s": [1]}, ML, 2)


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
    got = run("TreeEnsemble", [x], [dtype], attrs, ML, 5, options=EXACT)[0]
    check([got], reference("TreeEnsemble", [x], [dtype], attrs, ML, 5), exact=agg == 1)


@pytest.mark.parametrize("agg", [2, 3])
def test_tree_ensemble_min_max_vs_onnxruntime(agg):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(agg)
    attrs = forest(rng, n_targets=4)
    attrs["aggregate_function"] = agg
    x = features(rng)
    model = model_of("TreeEnsemble", [x], [np.float32], attrs, ML, 5)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x0": x})[0]
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
    raw = run("TreeEnsemble", [x], [np.float64], attrs, ML, 5)[0]
    got = run("TreeEnsemble", [x], [np.float64], dict(attrs, post_transform=post), ML, 5)[0]
    with np.errstate(all="ignore"):
        want = {1: lambda y: _softmax(y), 2: lambda y: 1 / (1 + np.exp(-y)),
                3: lambda y: _softmax(y, zero=True),
                4: lambda y: np.sqrt(2) * scipy.erfinv(2 * y - 1)}[post](raw)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    with pytest.raises(SessionError) as e:
        run("TreeEnsemble", [x], [np.float64], dict(attrs, post_transform=post), ML, 5,
            options=EXACT)
    assert e.value.kind == ErrorKind.EXACT_MODE_UNAVAILABLE


def test_tree_ensemble_float16_and_single_leaf_tree():
    attrs = {"tree_roots": [0], "nodes_featureids": [0], "nodes_modes":
             numpy_helper.from_array(np.array([0], np.uint8)), "nodes_splits":
             numpy_helper.from_array(np.array([0.0], np.float16)),
             "nodes_truenodeids": [0], "nodes_falsenodeids": [0], "nodes_trueleafs": [1],
             "nodes_falseleafs": [1], "leaf_targetids": [1],
             "leaf_weights": numpy_helper.from_array(np.array([0.1], np.float16))}
    got = run("TreeEnsemble", [np.ones((2, 1), np.float16)], [np.float16], attrs, ML, 5)[0]
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
          [np.float32], attrs, ML, 5)


def test_tree_ensemble_feature_out_of_range():
    attrs = forest(np.random.default_rng(0), n_features=3)
    fails(ErrorKind.INVALID_MODEL, "TreeEnsemble", [np.zeros((2, 2), np.float32)],
          [np.float32], attrs, ML, 5)


# ---- Binarizer, ArrayFeatureExtractor ----------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_binarizer(dtype):
    x = np.array([[-2, 0, 1, 3], [2, 1, 0, 5]], dtype)
    got = run("Binarizer", [x], [dtype], {"threshold": 1.0}, ML, 1, options=EXACT)[0]
    np.testing.assert_array_equal(got, (x > 1).astype(dtype))
    assert got.dtype == dtype


def test_binarizer_nan_and_fraction():
    x = np.array([np.nan, 0.5, 0.51, np.inf], np.float64)
    got = run("Binarizer", [x], [np.float64], {"threshold": 0.5}, ML, 1)[0]
    assert got.tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize("x, idx", [
    (np.arange(5, dtype=np.float32), np.array([4, 0, -1], np.int64)),
    (np.arange(24, dtype=np.int64).reshape(2, 3, 4), np.array([[3, 1]], np.int64)),
    (strings("a", "b", "c", "d", shape=(2, 2)), np.array([1, 1, 0], np.int64)),
])
def test_array_feature_extractor(x, idx):
    compare("ArrayFeatureExtractor", [x, idx], [x.dtype], domain=ML, opset=1, options=EXACT)
    compare("ArrayFeatureExtractor", [x, Const(idx)], [x.dtype], domain=ML, opset=1)


def test_array_feature_extractor_out_of_range():
    x = np.zeros((2, 3), np.float32)
    fails(ErrorKind.INVALID_INPUT, "ArrayFeatureExtractor", [x, np.array([3], np.int64)],
          [np.float32], domain=ML, opset=1)
    fails(ErrorKind.INVALID_INPUT, "ArrayFeatureExtractor", [x, Const(np.array([-4], np.int64))],
          [np.float32], domain=ML, opset=1)
