"""ai.onnx.ml operators beside the trees: maps (ZipMap, DictVectorizer, CastMap), encoders
(CategoryMapper, OneHotEncoder), feature transforms (Scaler, Normalizer, Imputer,
FeatureVectorizer), linear models and SVMs with every kernel, com.microsoft.Tokenizer and
StringNormalizer's locales: against onnx's reference evaluator where it implements the
operator, onnxruntime where it is installed, or values worked out by hand.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphrt
from graphrt import ErrorKind, SessionError

from ...helpers import (EXACT, check, fails, one_node, onnxruntime_outputs, reference, run,
                        strings)

ML = "ai.onnx.ml"
MS = "com.microsoft"


def _map_model(op, attrs, key, value, out_type, domain=ML):
    """One node whose input is a map(key, value)."""
    inp = helper.make_value_info("m", helper.make_map_type_proto(
        key, helper.make_tensor_type_proto(value, None)))
    out = helper.make_tensor_value_info("y", out_type, None)
    node = helper.make_node(op, ["m"], ["y"], name="the_node", domain=domain, **attrs)
    model = helper.make_model(helper.make_graph([node], "g", [inp], [out]),
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid(domain, 1)])
    model.ir_version = 10
    return model


# ---- maps ----------------------------------------------------------------------------------

@pytest.mark.parametrize("labels", [{"classlabels_int64s": [3, 7, 9]},
                                    {"classlabels_strings": ["a", "b", "c"]}])
def test_zip_map_gives_a_list_of_dicts(labels):
    x = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32)
    model = one_node("ZipMap", [x], labels, opset=17, outs=[None], domain=ML)
    model.graph.output[0].CopyFrom(helper.make_value_info("y0", helper.make_sequence_type_proto(
        helper.make_map_type_proto(TensorProto.INT64 if "classlabels_int64s" in labels
                                   else TensorProto.STRING,
                                   helper.make_tensor_type_proto(TensorProto.FLOAT, None)))))
    got = graphrt.Session(model).run(None, {"x0": x})[0]
    keys = next(iter(labels.values()))
    assert got == [dict(zip(keys, row.tolist())) for row in x]
    assert got == onnxruntime_outputs(model, {"x0": x})[0]


def test_dict_vectorizer_takes_a_dict():
    model = _map_model("DictVectorizer", {"string_vocabulary": ["b", "a", "z", "a"]},
                       TensorProto.STRING, TensorProto.FLOAT, TensorProto.FLOAT)
    sess = graphrt.Session(model)
    got = sess.run(None, {"m": {"a": 1.5, "b": -2.0, "q": 9.0}})[0]
    assert got.dtype == np.float32 and got.tolist() == [[-2.0, 1.5, 0.0, 1.5]]
    with pytest.raises(SessionError, match="dict with str keys"):
        sess.run(None, {"m": {1: 2.0}})
    with pytest.raises(SessionError, match="a dict"):
        sess.run(None, {"m": [1.0]})
    model = _map_model("DictVectorizer", {"int64_vocabulary": [5, 1]}, TensorProto.INT64,
                       TensorProto.INT64, TensorProto.INT64)
    assert graphrt.Session(model).run(None, {"m": {1: 4, 9: 2}})[0].tolist() == [[0, 4]]


@pytest.mark.parametrize("attrs, value, want", [
    ({}, TensorProto.FLOAT, [[2.5, -1.0, 7.0]]),
    ({"cast_to": "TO_INT64"}, TensorProto.FLOAT, [[2, -1, 7]]),
    ({"cast_to": "TO_STRING"}, TensorProto.FLOAT, [["2.500000", "-1.000000", "7.000000"]]),
    ({"map_form": "SPARSE", "max_map": 5}, TensorProto.FLOAT, [[2.5, 0, -1.0, 0, 7.0]]),
    ({"map_form": "SPARSE", "max_map": 4}, TensorProto.FLOAT, [[2.5, 0, -1.0, 0]]),
    ({"map_form": "SPARSE", "max_map": 3, "cast_to": "TO_STRING"}, TensorProto.STRING,
     [["2.5", "0.f", "-1"]]),
])
def test_cast_map(attrs, value, want):
    out = {"TO_INT64": TensorProto.INT64, "TO_STRING": TensorProto.STRING}.get(
        attrs.get("cast_to"), TensorProto.FLOAT)
    model = _map_model("CastMap", attrs, TensorProto.INT64, value, out)
    m = {4: 7.0, 0: 2.5, 2: -1.0} if value == TensorProto.FLOAT else {2: "-1", 0: "2.5", 4: "7"}
    got = graphrt.Session(model).run(None, {"m": m})[0]
    assert got.tolist() == want


# ---- encoders and feature transforms -------------------------------------------------------

def test_category_mapper_both_ways():
    attrs = {"cats_strings": ["x", "y"], "cats_int64s": [4, 9], "default_string": "?"}
    got = run("CategoryMapper", [strings("y", "q", "x", shape=(1, 3))], attrs, opset=17,
              outs=[np.int64], domain=ML)[0]
    assert got.tolist() == [[9, -1, 4]]
    got = run("CategoryMapper", [np.array([9, 5], np.int64)], attrs, opset=17, outs=[object],
              domain=ML)[0]
    assert got.tolist() == ["y", "?"]


def test_one_hot_encoder():
    got = run("OneHotEncoder", [np.array([[1.7, 3.0], [9.0, -1.0]], np.float32)],
              {"cats_int64s": [1, 3, -1]}, opset=17, outs=[np.float32], domain=ML)[0]
    assert got.shape == (2, 2, 3)
    assert got.tolist() == [[[1, 0, 0], [0, 1, 0]], [[0, 0, 0], [0, 0, 1]]]
    got = run("OneHotEncoder", [strings("b", "zz", shape=(2, 1))], {"cats_strings": ["a", "b"]},
              opset=17, outs=[np.float32], domain=ML)[0]
    assert got.tolist() == [[[0, 1]], [[0, 0]]]
    fails(ErrorKind.INVALID_INPUT, "OneHotEncoder", [strings("zz")],
          {"cats_strings": ["a"], "zeros": 0}, opset=17, outs=[np.float32], domain=ML)


@pytest.mark.parametrize("op, attrs, x", [
    ("Scaler", {"offset": [1.0, -2.0, 0.5], "scale": [2.0, 0.5, -1.0]},
     np.arange(12, dtype=np.float32).reshape(4, 3) / 3),
    ("Normalizer", {"norm": "L1"}, np.array([[1, -3, 2], [0, 0, 0]], np.float32)),
    ("Normalizer", {"norm": "L2"}, np.array([[3, 4, 0], [1, 1, 1]], np.float64)),
    ("Normalizer", {"norm": "MAX"}, np.array([[1, -3, 2], [-1, -2, -4]], np.float32)),
    ("Imputer", {"imputed_value_floats": [9.0, 8.0, 7.0], "replaced_value_float": float("nan")},
     np.array([[np.nan, 1, 2], [3, np.nan, 0]], np.float32)),
    ("Imputer", {"imputed_value_int64s": [5], "replaced_value_int64": -1},
     np.array([[-1, 1], [3, -1]], np.int64)),
    ("Binarizer", {"threshold": 0.5}, np.array([[0.5, 0.6, -1]], np.float32)),
])
def test_feature_transforms_vs_reference(op, attrs, x):
    """(The reference evaluator keeps the input's type where the spec says float32.)"""
    out = x.dtype if op in ("Imputer", "Binarizer") else np.dtype(np.float32)
    got = run(op, [x], attrs, opset=17, outs=[out], domain=ML, options=EXACT)[0]
    want = reference(op, [x], attrs, opset=17, outs=[out], domain=ML)
    assert got.dtype == out and got.shape == want.shape
    np.testing.assert_allclose(got, want.astype(out), rtol=1e-6, atol=1e-7)


def test_scaler_on_integers_computes_in_float():
    got = run("Scaler", [np.array([1, 2, 3], np.int64)], {"offset": [0.5], "scale": [2.0]},
              opset=17, outs=[np.float32], domain=ML)[0]
    assert got.dtype == np.float32 and got.tolist() == [1.0, 3.0, 5.0]


def test_feature_vectorizer_cuts_and_pads():
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.array([[5, 6], [7, 8]], np.float32)
    got = run("FeatureVectorizer", [a, b], {"inputdimensions": [3, 1]}, opset=17,
              outs=[np.float32], domain=ML)[0]
    assert got.tolist() == [[1, 2, 0, 5], [3, 4, 0, 7]]


# ---- linear models and SVMs ----------------------------------------------------------------

@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("rows", [1, 3])        # one coefficient row (two-class) or three
def test_linear_classifier_vs_onnxruntime(post, rows):
    rng = np.random.default_rng(rows)
    f = 4
    attrs = {"coefficients": rng.normal(size=rows * f).tolist(),
             "intercepts": rng.normal(size=rows).tolist(),
             "classlabels_ints": [0, 1] if rows == 1 else [10, 20, 30], "post_transform": post}
    x = rng.normal(size=(20, f)).astype(np.float32)
    if post == "PROBIT":
        x *= 0.01                                # scores inside (0, 1)
    labels, scores = run("LinearClassifier", [x], attrs, opset=17, outs=[np.int64, np.float32],
                         domain=ML)
    model = one_node("LinearClassifier", [x], attrs, opset=17, outs=[np.int64, np.float32],
                     domain=ML)
    want_labels, want_scores = onnxruntime_outputs(model, {"x0": x})
    assert labels.tolist() == want_labels.tolist()
    if rows == 1 and post == "PROBIT":
        # onnxruntime writes the N probits into the first N of the 2N places; both columns
        # hold probit(s) here
        scipy = pytest.importorskip("scipy.special")
        s = x.astype(np.float64) @ np.array(attrs["coefficients"]) + attrs["intercepts"][0]
        for col in (0, 1):
            np.testing.assert_allclose(scores[:, col], np.sqrt(2) * scipy.erfinv(2 * s - 1),
                                       rtol=1e-5, atol=1e-6)
        return
    # onnxruntime's PROBIT is Winitzki's approximation of erfinv alone (about 1e-3 off)
    tol = 2e-3 if post == "PROBIT" else 2e-5
    np.testing.assert_allclose(scores, want_scores, rtol=tol, atol=tol / 10)


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("rows", [1, 3])
def test_scaler_and_linear_classifier_compiled_runs_give_the_first_runs_bits(mode, rows):
    """A scaler + logistic regression pipeline (skl2onnx's form) runs as one block from the
    plan's second run: labels, and scores with a NaN row, bit for bit those of its first
    (Python) run."""
    from graphrt.plan import program

    from ...models import make
    from ...test_blocks import plain_program
    rng = np.random.default_rng(rows)
    f = 5
    nodes = [helper.make_node("Scaler", ["x"], ["z"], domain=ML,
                              offset=rng.normal(size=f).tolist(),
                              scale=(1 + rng.random(f)).tolist()),
             helper.make_node("LinearClassifier", ["z"], ["label", "p"], domain=ML,
                              coefficients=rng.normal(size=rows * f).tolist(),
                              intercepts=rng.normal(size=rows).tolist(),
                              classlabels_ints=[0, 1] if rows == 1 else [10, 20, 30],
                              post_transform="LOGISTIC")]
    m = make(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", f])],
             [helper.make_tensor_value_info("label", TensorProto.INT64, None),
              helper.make_tensor_value_info("p", TensorProto.FLOAT, None)], opset=17)
    m.opset_import.append(helper.make_opsetid(ML, 1))
    sess = graphrt.Session(m, graphrt.SessionOptions(mode=mode))
    x = rng.normal(size=(33, f)).astype(np.float32)
    x[4, 2] = np.nan
    want = sess.run(None, {"x": x})
    for _ in range(3):
        got = sess.run(None, {"x": x})
        assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    _plan, prog = plain_program(sess)
    assert len(prog) == 1 and isinstance(prog[0][0], program.Block)


@pytest.mark.parametrize("kernel, params", [("LINEAR", [0.0, 0.0, 0.0]), ("POLY", [0.5, 1.0, 3.0]),
                                            ("RBF", [0.3, 0.0, 0.0]), ("SIGMOID", [0.2, 0.1, 0.0])])
@pytest.mark.parametrize("probability", [False, True])
def test_svm_classifier_kernels(kernel, params, probability):
    rng = np.random.default_rng(len(kernel))
    f, per_class = 3, [2, 3, 2]
    n = sum(per_class)
    attrs = {"kernel_type": kernel, "support_vectors": rng.normal(size=n * f).tolist(), "vectors_per_class": per_class,
             "coefficients": rng.normal(size=2 * n).tolist(), "rho": rng.normal(size=3).tolist(),
             "classlabels_ints": [0, 1, 2]}
    if params:
        attrs["kernel_params"] = params
    if probability:
        attrs.update(prob_a=(-rng.random(3) - 0.5).tolist(), prob_b=rng.normal(size=3).tolist())
    x = rng.normal(size=(25, f)).astype(np.float32)
    kw = dict(opset=17, outs=[np.int64, np.float32], domain=ML)
    got = run("SVMClassifier", [x], attrs, **kw)
    exact = run("SVMClassifier", [x], attrs, options=EXACT, **kw)
    want = onnxruntime_outputs(one_node("SVMClassifier", [x], attrs, **kw), {"x0": x})
    for g in (got, exact):
        assert g[0].tolist() == want[0].tolist()
        np.testing.assert_allclose(g[1], want[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {"kernel_type": "RBF", "kernel_params": [0.5, 0.0, 0.0], "n_supports": 3},
    {"kernel_type": "POLY", "kernel_params": [0.5, 1.0, 2.0], "n_supports": 3, "one_class": 1},
    {"n_supports": 0, "kernel_params": [0.0, 0.0, 0.0]},
])
def test_svm_regressor(attrs):
    rng = np.random.default_rng(2)
    f = 4
    n = attrs["n_supports"]
    attrs = dict(attrs, coefficients=rng.normal(size=n or f).tolist(), rho=[0.25])
    if n:
        attrs["support_vectors"] = rng.normal(size=n * f).tolist()
    x = rng.normal(size=(10, f)).astype(np.float32)
    check("SVMRegressor", [x], attrs, opset=17, outs=[np.float32], domain=ML, rtol=1e-5,
          atol=1e-6)
    want = onnxruntime_outputs(one_node("SVMRegressor", [x], attrs, opset=17,
                                        outs=[np.float32], domain=ML), {"x0": x})[0]
    np.testing.assert_allclose(run("SVMRegressor", [x], attrs, opset=17, outs=[np.float32],
                                   domain=ML)[0], want, rtol=1e-5, atol=1e-6)


def test_linear_model_errors():
    fails(ErrorKind.INVALID_MODEL, "LinearClassifier", [np.zeros((1, 2), np.float32)],
          {"coefficients": [1.0, 2.0], "intercepts": [0.0], "classlabels_ints": [1, 2, 3]},
          opset=17, outs=[np.int64, np.float32], domain=ML, match="two class labels")
    fails(ErrorKind.INVALID_MODEL, "LinearRegressor", [np.zeros((1, 2), np.float32)],
          {"coefficients": [1.0, 2.0, 3.0], "targets": 2}, opset=17, outs=[np.float32],
          domain=ML, match="coefficients")
    with pytest.raises(SessionError, match="features"):
        run("LinearRegressor", [np.zeros((1, 3), np.float32)], {"coefficients": [1.0, 2.0]},
            opset=17, outs=[np.float32], domain=ML)


# ---- text ------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs, x, want", [
    ({"mark": 1, "pad_value": "#", "mincharnum": 1, "separators": [" ", ",", ";"]},
     ["Hello world", "a, bb;ccc"],
     [["\x02", "Hello", "world", "\x03", "#"], ["\x02", "a", "bb", "ccc", "\x03"]]),
    ({"mark": 0, "pad_value": "#", "mincharnum": 2, "separators": [" ", ",", ";"]},
     ["Hello world", "a, bb;ccc"], [["Hello", "world"], ["bb", "ccc"]]),
    ({"mark": 0, "pad_value": "#", "mincharnum": 1, "tokenexp": "[a-z]+"},
     ["Hello world"], [["ello", "world"]]),
    ({"mark": 0, "pad_value": "#", "mincharnum": 1, "tokenexp": "."}, ["ab", "c"],
     [["a", "b"], ["c", "#"]]),
])
def test_tokenizer(attrs, x, want):
    got = run("Tokenizer", [strings(*x)], attrs, opset=17, outs=[object], domain=MS)[0]
    assert got.tolist() == want


def test_tokenizer_with_no_tokens_has_an_empty_last_axis():
    got = run("Tokenizer", [strings("", shape=(1, 1))],
              {"mark": 1, "pad_value": "#", "mincharnum": 1, "separators": [" "]},
              opset=17, outs=[object], domain=MS)[0]
    assert got.shape == (1, 1, 0)


@pytest.mark.parametrize("locale, want", [("C", ["Ünïcode abc"]), ("en_US.UTF-8", ["ünïcode abc"]),
                                          (None, ["ünïcode abc"])])
def test_string_normalizer_does_not_need_installed_locales(locale, want):
    attrs = {"case_change_action": "LOWER"}
    if locale:
        attrs["locale"] = locale
    got = run("StringNormalizer", [strings("Ünïcode ABC")], attrs, opset=17, outs=[object])[0]
    assert got.tolist() == want
