"""Models from the real converters: scikit-learn estimators and pipelines through skl2onnx,
LightGBM and XGBoost through onnxmltools, trained on small random data (fixed seeds) and run
by graphrt.Session.

Each case is checked twice, as its own test id: against the estimator itself (``predict``,
``predict_proba``, ``transform``, ``decision_function``) and against onnxruntime (skipped when
onnxruntime is not installed, without hiding the first check). Labels must be equal; float
values agree within a tolerance derived from float32 arithmetic (``_f32``). Classifiers
converted with skl2onnx's default ZipMap return their probabilities as a list of dicts (one per
row, class -> probability), as onnxruntime does; those are compared key by key.

Conversions are cached per case, so each estimator is trained and converted once per process.
"""
from __future__ import annotations

import contextlib
import functools
import warnings
from typing import Any, NamedTuple
from unittest import mock

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")

import graphrt  # noqa: E402

# Opsets the converters are asked for: the default domain at 17 and ai.onnx.ml at 3 (skl2onnx
# then imports the lowest ai.onnx.ml version each of its nodes needs).
TARGET = {"": 17, "ai.onnx.ml": 3}
OPSET = 15                      # onnxmltools takes one number, and supports at most 15

N_TRAIN, N_TEST = 240, 120

# ---- tolerances -----------------------------------------------------------------------------
#
# The converted models compute in float32, the estimators (mostly) in float64.
# A float32 sum or dot product of n terms whose partial sums stay below s in magnitude is off
# from the exact value by at most about n * eps32 * s (eps32 = 2**-23: each addition rounds once,
# with a relative error of at most eps32 / 2, and the errors add up). Sigmoid, softmax and the
# Platt/probability steps are 1-Lipschitz or flatter in their scores, so a probability is off by
# no more than its scores are. ``_f32(n, s)`` is twice that bound (for the float32 rounding of
# the weights and inputs themselves); rtol covers values that are large compared with s.

EPS32 = float(np.finfo(np.float32).eps)


def _f32(n_terms: int, scale: float) -> dict:
    return {"rtol": 4 * EPS32, "atol": 2.0 * n_terms * EPS32 * scale}


# ---- what a case produces -------------------------------------------------------------------

class Want(NamedTuple):
    """One output's expected value: kind "exact" (labels: equal values, dtype kind, shape),
    "close" (floats within rtol/atol) or "zipmap" (a list of {class: probability} dicts
    compared with the columns of ``value`` under ``classes``)."""
    kind: str
    value: Any
    rtol: float = 0.0
    atol: float = 0.0
    classes: Any = None


def exact(value):
    return Want("exact", np.asarray(value))


def close(value, tol):
    return Want("close", np.asarray(value), tol["rtol"], tol["atol"])


def zipmap(proba, classes, tol):
    return Want("zipmap", np.asarray(proba), tol["rtol"], tol["atol"], list(classes))


class Converted(NamedTuple):
    """The model and its runs: each run is (feeds, {output index: Want})."""
    onx: Any
    runs: list


def _run_graphrt(onx, feeds):
    """graphrt's outputs of ``onx`` (all of them, in the graph's order)."""
    return graphrt.Session(onx.SerializeToString()).run(None, feeds)


def _run_onnxruntime(onx, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


# ---- data -----------------------------------------------------------------------------------

def _features(d, seed, n=N_TRAIN + N_TEST):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def _classification(d=8, classes=2, seed=0):
    """Features and integer labels of a noisy linear rule; (X_train, y_train, X_test)."""
    rng = np.random.default_rng(seed + 1000)
    X = _features(d, seed)
    scores = X.astype(np.float64) @ rng.standard_normal((d, classes))
    y = (scores + 0.7 * rng.standard_normal(scores.shape)).argmax(axis=1).astype(np.int64)
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:]


def _regression(d=8, seed=0):
    rng = np.random.default_rng(seed + 2000)
    X = _features(d, seed)
    X64 = X.astype(np.float64)
    y = X64 @ rng.standard_normal(d) + np.sin(2 * X64[:, 0]) + 0.3 * rng.standard_normal(len(X))
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:]


def _with_nan(X, seed, fraction=0.1):
    X = X.copy()
    X[np.random.default_rng(seed).random(X.shape) < fraction] = np.nan
    return X


def _quiet(fit):
    """Fit without convergence chatter (small max_iter on purpose)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit()


# ---- converters -----------------------------------------------------------------------------

def _skl(model, X, options=None, target_opset=TARGET, **kw):
    from skl2onnx import to_onnx
    return to_onnx(model, X[:1] if X is not None else None, target_opset=target_opset,
                   options=options, **kw)


def _no_zipmap(model):
    return {id(model): {"zipmap": False}}


def _float_input(n_features):
    # onnxmltools' own type (its shape calculators refuse skl2onnx's)
    from onnxmltools.convert.common.data_types import FloatTensorType
    return [("X", FloatTensorType([None, n_features]))]


def _lightgbm(model, n_features, zipmap=False):
    from onnxmltools import convert_lightgbm
    return convert_lightgbm(model, initial_types=_float_input(n_features), target_opset=OPSET,
                            zipmap=zipmap)


def _xgboost(model, n_features):
    from onnxmltools import convert_xgboost
    return convert_xgboost(model, initial_types=_float_input(n_features), target_opset=OPSET)


def _input_name(onx):
    return onx.graph.input[0].name


def _one_run(onx, X, wants):
    return Converted(onx, [({_input_name(onx): X}, wants)])


# ---- the cases ------------------------------------------------------------------------------

CASES: dict = {}


def case(name, needs=()):
    """Register ``fn() -> Converted`` as case ``name``; ``needs`` are modules it skips without."""
    def register(fn):
        CASES[name] = (fn, tuple(needs))
        return fn
    return register


def _classifier(model, X, y, Xt, tol, zip_map=False):
    """A classifier fitted and converted with or without ZipMap: outputs (label, probabilities)."""
    model.fit(X, y)
    onx = _skl(model, X, options=None if zip_map else _no_zipmap(model))
    label = exact(model.predict(Xt))
    p = model.predict_proba(Xt)
    return _one_run(onx, Xt, {0: label, 1: zipmap(p, model.classes_, tol) if zip_map
                              else close(p.astype(np.float32), tol)})


def _regressor(model, X, y, Xt, tol, options=None):
    model.fit(X, y)
    onx = _skl(model, X, options=options)
    return _one_run(onx, Xt, {0: close(model.predict(Xt).astype(np.float32).reshape(-1, 1), tol)})


def _transformer(model, X, Xt, tol):
    model.fit(X)
    onx = _skl(model, X)
    return _one_run(onx, Xt, {0: close(model.transform(Xt).astype(np.float32), tol)})


# -- linear models

@case("LinearRegression")
def _():
    from sklearn.linear_model import LinearRegression
    X, y, Xt = _regression(d=10)
    # 10 products; the partial sums stay below about 30
    return _regressor(LinearRegression(), X, y, Xt, _f32(11, 30))


@case("Ridge")
def _():
    from sklearn.linear_model import Ridge
    X, y, Xt = _regression(d=12, seed=1)
    return _regressor(Ridge(alpha=2.0), X, y, Xt, _f32(13, 30))


@case("LogisticRegression-binary")
def _():
    from sklearn.linear_model import LogisticRegression
    X, y, Xt = _classification(d=8, classes=2, seed=2)
    # scores: 8 products below about 20
    return _classifier(LogisticRegression(), X, y, Xt, _f32(9, 20))


@case("LogisticRegression-multiclass")
def _():
    from sklearn.linear_model import LogisticRegression
    X, y, Xt = _classification(d=10, classes=4, seed=3)
    return _classifier(LogisticRegression(max_iter=500), X, y, Xt, _f32(11, 20))


@case("LogisticRegression-binary-zipmap")
def _():
    from sklearn.linear_model import LogisticRegression
    X, y, Xt = _classification(d=8, classes=2, seed=4)
    return _classifier(LogisticRegression(), X, y, Xt, _f32(9, 20), zip_map=True)


@case("Pipeline-StandardScaler-LogisticRegression-zipmap")
def _():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    X, y, Xt = _classification(d=6, classes=3, seed=5)
    X, Xt = 3 * X + 5, 3 * Xt + 5                     # something for the scaler to undo
    pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(X, y)
    onx = _skl(pipe, X)                                # ZipMap: skl2onnx's default
    # scaling: one subtraction and one multiplication of values below 20, then 6 products
    return _one_run(onx, Xt, {0: exact(pipe.predict(Xt)),
                              1: zipmap(pipe.predict_proba(Xt), pipe.classes_, _f32(12, 20))})


@case("LinearSVC")
def _():
    from sklearn.svm import LinearSVC
    X, y, Xt = _classification(d=8, classes=3, seed=6)
    model = LinearSVC().fit(X, y)
    onx = _skl(model, X)            # no ZipMap option: the scores come out as a tensor
    return _one_run(onx, Xt, {0: exact(model.predict(Xt)),
                              1: close(model.decision_function(Xt).astype(np.float32),
                                       _f32(9, 10))})


# -- preprocessing

@case("MinMaxScaler")
def _():
    from sklearn.preprocessing import MinMaxScaler
    X = _features(7, seed=7)
    # one multiply-add per value, values below 5
    return _transformer(MinMaxScaler(), X[:N_TRAIN], X[N_TRAIN:], _f32(2, 5))


@case("Normalizer")
def _():
    from sklearn.preprocessing import Normalizer
    X = _features(9, seed=8)
    # a norm of 9 squares (below 30) and a division: relative errors of a few eps32
    return _transformer(Normalizer(norm="l2"), X[:N_TRAIN], X[N_TRAIN:], _f32(10, 1))


@case("SimpleImputer")
def _():
    from sklearn.impute import SimpleImputer
    X = _with_nan(_features(6, seed=9), seed=9)
    # values are copied or replaced by a float32-rounded mean
    return _transformer(SimpleImputer(strategy="mean"), X[:N_TRAIN], X[N_TRAIN:], _f32(1, 5))


@case("PCA")
def _():
    from sklearn.decomposition import PCA
    X = _features(10, seed=10)
    # centring and 10 products below about 10
    return _transformer(PCA(n_components=4), X[:N_TRAIN], X[N_TRAIN:], _f32(12, 10))


@case("DictVectorizer")
def _():
    from sklearn.feature_extraction import DictVectorizer
    from skl2onnx.common.data_types import DictionaryType, FloatTensorType, StringTensorType
    rng = np.random.default_rng(11)
    keys = ["alpha", "beta", "gamma", "delta", "eps"]
    rows = [{k: float(np.float32(rng.standard_normal())) for k in keys if rng.random() < 0.6}
            for _ in range(40)]
    model = DictVectorizer(sparse=False).fit(rows)
    onx = _skl(model, None, initial_types=[("X", DictionaryType(StringTensorType([]),
                                                                 FloatTensorType([])))])
    # one map per run (the ONNX input is a single map); values are copied, so they must match
    runs = [({"X": row}, {0: close(model.transform([row]).astype(np.float32), _f32(0, 1))})
            for row in rows[:8]]
    return Converted(onx, runs)


# -- support vector machines

@case("SVC-rbf")
def _():
    from sklearn.svm import SVC
    X, y, Xt = _classification(d=6, classes=3, seed=12)
    model = SVC(kernel="rbf", gamma=0.2).fit(X, y)
    onx = _skl(model, X, options=_no_zipmap(model))
    # one-vs-one decisions: ~150 support vectors, coefficients |a| <= C = 1, kernel values <= 1;
    # the ovr shape of decision_function adds votes and rescaled sums of those
    return _one_run(onx, Xt, {0: exact(model.predict(Xt)),
                              1: close(model.decision_function(Xt).astype(np.float32),
                                       _f32(len(model.support_) + 6, 3))})


@case("SVC-rbf-probability")
def _():
    from sklearn.svm import SVC
    X, y, Xt = _classification(d=6, classes=2, seed=13)
    model = SVC(kernel="rbf", gamma=0.2, probability=True, random_state=0).fit(X, y)
    onx = _skl(model, X, options=_no_zipmap(model))
    # the decision value as for SVC-rbf, then Platt's sigmoid (slope |A| below 5)
    return _one_run(onx, Xt, {0: exact(model.predict(Xt)),
                              1: close(model.predict_proba(Xt).astype(np.float32),
                                       _f32(5 * len(model.support_), 1))})


@case("NuSVC")
def _():
    from sklearn.svm import NuSVC
    X, y, Xt = _classification(d=6, classes=2, seed=14)
    model = NuSVC(nu=0.4, gamma=0.2).fit(X, y)
    onx = _skl(model, X, options=_no_zipmap(model))
    d = model.decision_function(Xt).astype(np.float32)
    # binary: the second output holds (d, -d), d = decision_function (what skl2onnx's
    # SVMClassifier gives, onnxruntime included); coefficients |a| <= 1 per vector
    scale = float(np.abs(model.dual_coef_).max())
    return _one_run(onx, Xt, {0: exact(model.predict(Xt)),
                              1: close(np.stack([d, -d], axis=1),
                                       _f32(len(model.support_) + 1, max(scale, 1.0)))})


@case("SVR")
def _():
    from sklearn.svm import SVR
    X, y, Xt = _regression(d=6, seed=15)
    model = SVR(kernel="rbf", C=3.0, gamma=0.2)
    model.fit(X, y)
    onx = _skl(model, X)
    # |coefficients| <= C = 3 over the support vectors, kernel values <= 1
    return _one_run(onx, Xt, {0: close(model.predict(Xt).astype(np.float32).reshape(-1, 1),
                                       _f32(len(model.support_) + 1, 3))})


@case("OneClassSVM")
def _():
    from sklearn.svm import OneClassSVM
    X = _features(5, seed=16)
    model = OneClassSVM(nu=0.2, gamma=0.3).fit(X[:N_TRAIN])
    onx = _skl(model, X)
    Xt = X[N_TRAIN:]
    # labels (+1 inlier, -1 outlier) and scores both come out as (N, 1)
    return _one_run(onx, Xt, {0: exact(model.predict(Xt).reshape(-1, 1)),
                              1: close(model.decision_function(Xt).astype(np.float32)
                                       .reshape(-1, 1), _f32(len(model.support_) + 1, 1))})


# -- trees and forests: thresholds compare float32 inputs, leaf values are summed in float32

@case("DecisionTreeClassifier")
def _():
    from sklearn.tree import DecisionTreeClassifier
    X, y, Xt = _classification(d=8, classes=3, seed=17)
    # one leaf: its class fractions, rounded to float32
    return _classifier(DecisionTreeClassifier(max_depth=6, random_state=0), X, y, Xt,
                       _f32(1, 1))


@case("DecisionTreeRegressor")
def _():
    from sklearn.tree import DecisionTreeRegressor
    X, y, Xt = _regression(d=8, seed=18)
    return _regressor(DecisionTreeRegressor(max_depth=6, random_state=0), X, y, Xt,
                      _f32(1, 10))


@case("RandomForestClassifier-zipmap")
def _():
    from sklearn.ensemble import RandomForestClassifier
    X, y, Xt = _classification(d=8, classes=3, seed=20)
    # an average of 15 leaves' class fractions (each below 1)
    return _classifier(RandomForestClassifier(n_estimators=15, max_depth=5, random_state=0),
                       X, y, Xt, _f32(15, 1), zip_map=True)


@case("RandomForestRegressor")
def _():
    from sklearn.ensemble import RandomForestRegressor
    X, y, Xt = _regression(d=8, seed=21)
    return _regressor(RandomForestRegressor(n_estimators=15, max_depth=5, random_state=0),
                      X, y, Xt, _f32(15, 10 * 15))


@case("ExtraTreesClassifier")
def _():
    from sklearn.ensemble import ExtraTreesClassifier
    X, y, Xt = _classification(d=8, classes=2, seed=22)
    return _classifier(ExtraTreesClassifier(n_estimators=15, max_depth=6, random_state=0),
                       X, y, Xt, _f32(15, 1))


@case("GradientBoostingClassifier-binary")
def _():
    from sklearn.ensemble import GradientBoostingClassifier
    X, y, Xt = _classification(d=8, classes=2, seed=23)
    # a raw score of 30 trees (partial sums below about 10), then a sigmoid
    return _classifier(GradientBoostingClassifier(n_estimators=30, max_depth=3, random_state=0),
                       X, y, Xt, _f32(31, 10))


@case("GradientBoostingClassifier-multiclass")
def _():
    from sklearn.ensemble import GradientBoostingClassifier
    X, y, Xt = _classification(d=8, classes=3, seed=24)
    return _classifier(GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0),
                       X, y, Xt, _f32(21, 10))


@case("GradientBoostingRegressor")
def _():
    from sklearn.ensemble import GradientBoostingRegressor
    X, y, Xt = _regression(d=8, seed=25)
    return _regressor(GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0),
                      X, y, Xt, _f32(31, 15))


@contextlib.contextmanager
def _int_missing_flags():
    """skl2onnx 1.20 passes its histogram-gradient-boosting leaves'
    nodes_missing_value_tracks_true as Python booleans, which onnx's make_attribute refuses in
    an INTS attribute since onnx 1.19; the flags are handed on as 0/1 (nothing else changes)."""
    from skl2onnx.common import tree_ensemble
    add_node = tree_ensemble.add_node

    def add_node_with_int_flags(*args, nodes_missing_value_tracks_true=0, **kw):
        return add_node(*args, nodes_missing_value_tracks_true=int(
            nodes_missing_value_tracks_true), **kw)

    with mock.patch.object(tree_ensemble, "add_node", add_node_with_int_flags):
        yield


@case("HistGradientBoostingClassifier-nan")
def _():
    from sklearn.ensemble import HistGradientBoostingClassifier
    X, y, Xt = _classification(d=8, classes=3, seed=26)
    X, Xt = _with_nan(X, seed=26), _with_nan(Xt, seed=27)   # missing values take learned sides
    with _int_missing_flags():
        return _classifier(HistGradientBoostingClassifier(max_iter=20, max_leaf_nodes=8,
                                                          random_state=0),
                           X, y, Xt, _f32(21, 10))


@case("HistGradientBoostingRegressor-nan")
def _():
    from sklearn.ensemble import HistGradientBoostingRegressor
    X, y, Xt = _regression(d=8, seed=28)
    X, Xt = _with_nan(X, seed=28), _with_nan(Xt, seed=29)
    with _int_missing_flags():
        return _regressor(HistGradientBoostingRegressor(max_iter=30, max_leaf_nodes=8,
                                                        random_state=0),
                          X, y, Xt, _f32(31, 15))


@case("TreeEnsemble-ai.onnx.ml-5")
def _():
    from sklearn.tree import DecisionTreeRegressor
    X, y, Xt = _regression(d=6, seed=30)
    model = DecisionTreeRegressor(max_depth=5, random_state=0).fit(X, y)
    onx = _skl(model, X, target_opset={"": 21, "ai.onnx.ml": 5})
    if not any(n.op_type == "TreeEnsemble" for n in onx.graph.node):
        pytest.skip("skl2onnx emits TreeEnsembleRegressor (not ai.onnx.ml 5's TreeEnsemble) "
                    "even when asked for ai.onnx.ml 5")
    return _one_run(onx, Xt, {0: close(model.predict(Xt).astype(np.float32).reshape(-1, 1),
                                       _f32(1, 10))})


# -- LightGBM and XGBoost (onnxmltools)

LGBM = ("lightgbm", "onnxmltools")
XGB = ("xgboost", "onnxmltools")


def _lgbm_classifier(classes, seed, zip_map):
    from lightgbm import LGBMClassifier
    X, y, Xt = _classification(d=8, classes=classes, seed=seed)
    model = LGBMClassifier(n_estimators=20, num_leaves=8, min_child_samples=5, verbose=-1,
                           random_state=0).fit(X, y)
    # (onnxmltools declares the label output's shape as [1]; it holds one label per row, as
    # onnxruntime returns it)
    onx = _lightgbm(model, X.shape[1], zipmap=zip_map)
    p = model.predict_proba(Xt)
    # 20 trees per class, raw scores below about 10; then a sigmoid or softmax
    tol = _f32(21, 10)
    return _one_run(onx, Xt, {0: exact(model.predict(Xt)),
                              1: zipmap(p, model.classes_, tol) if zip_map
                              else close(p.astype(np.float32), tol)})


@case("LGBMClassifier-binary-zipmap", needs=LGBM)
def _():
    return _lgbm_classifier(2, seed=31, zip_map=True)


@case("LGBMClassifier-multiclass", needs=LGBM)
def _():
    return _lgbm_classifier(3, seed=32, zip_map=False)


@case("LGBMRegressor", needs=LGBM)
def _():
    from lightgbm import LGBMRegressor
    X, y, Xt = _regression(d=8, seed=33)
    model = LGBMRegressor(n_estimators=30, num_leaves=8, min_child_samples=5, verbose=-1,
                          random_state=0).fit(X, y)
    onx = _lightgbm(model, X.shape[1])
    return _one_run(onx, Xt, {0: close(model.predict(Xt).astype(np.float32).reshape(-1, 1),
                                       _f32(31, 15))})


def _xgb_classifier(classes, seed):
    from xgboost import XGBClassifier
    X, y, Xt = _classification(d=8, classes=classes, seed=seed)
    model = XGBClassifier(n_estimators=20, max_depth=3, learning_rate=0.3, n_jobs=1,
                          random_state=0).fit(X, y)
    onx = _xgboost(model, X.shape[1])
    # xgboost itself sums in float32 too, in its own order: 20 trees per class below about 10
    tol = _f32(21, 10)
    return _one_run(onx, Xt, {0: exact(model.predict(Xt)),
                              1: close(model.predict_proba(Xt).astype(np.float32), tol)})


@case("XGBClassifier-binary", needs=XGB)
def _():
    return _xgb_classifier(2, seed=34)


@case("XGBClassifier-multiclass", needs=XGB)
def _():
    return _xgb_classifier(3, seed=35)


@case("XGBRegressor", needs=XGB)
def _():
    from xgboost import XGBRegressor
    X, y, Xt = _regression(d=8, seed=36)
    model = XGBRegressor(n_estimators=30, max_depth=3, learning_rate=0.3, n_jobs=1,
                         random_state=0).fit(X, y)
    onx = _xgboost(model, X.shape[1])
    return _one_run(onx, Xt, {0: close(model.predict(Xt).astype(np.float32).reshape(-1, 1),
                                       _f32(31, 15))})


# -- other estimators

@case("KMeans")
def _():
    from sklearn.cluster import KMeans
    X = _features(6, seed=37)
    model = KMeans(n_clusters=4, n_init=3, random_state=0).fit(X[:N_TRAIN])
    onx = _skl(model, X)
    Xt = X[N_TRAIN:]
    distances = model.transform(Xt)
    # distances as sqrt(|x|^2 - 2 x.c + |c|^2): 6-term sums of squares below about 40, whose
    # cancellation is then passed through a square root (distances are above 0.1 here)
    assert distances.min() > 0.1 and (np.square(Xt).sum(axis=1) < 40).all()
    return _one_run(onx, Xt, {0: exact(model.predict(Xt)),
                              1: close(distances.astype(np.float32), _f32(20, 40 / 0.1))})


@case("KNeighborsClassifier")
def _():
    from sklearn.neighbors import KNeighborsClassifier
    X, y, Xt = _classification(d=5, classes=3, seed=38)
    # vote fractions of 5 neighbours: k/5, exact up to float32 rounding
    return _classifier(KNeighborsClassifier(n_neighbors=5), X, y, Xt, _f32(5, 1))


@case("MLPClassifier")
def _():
    from sklearn.neural_network import MLPClassifier
    X, y, Xt = _classification(d=8, classes=3, seed=39)
    model = MLPClassifier(hidden_layer_sizes=(16,), max_iter=300, random_state=0)
    _quiet(lambda: model.fit(X, y))
    # 8 products into 16 hidden units, 16 products into the scores (below about 20)
    return _fitted_classifier(model, X, Xt, _f32(25, 20))


def _fitted_classifier(model, X, Xt, tol):
    onx = _skl(model, X, options=_no_zipmap(model))
    return _one_run(onx, Xt, {0: exact(model.predict(Xt)),
                              1: close(model.predict_proba(Xt).astype(np.float32), tol)})


@case("DecisionTreeClassifier-string-labels-zipmap")
def _():
    from sklearn.tree import DecisionTreeClassifier
    X, y, Xt = _classification(d=6, classes=3, seed=40)
    names = np.array(["cat", "dog", "emu"], dtype=object)
    model = DecisionTreeClassifier(max_depth=5, random_state=0).fit(X, names[y])
    onx = _skl(model, X)                               # string labels, ZipMap with string keys
    return _one_run(onx, Xt, {0: exact(model.predict(Xt).astype(object)),
                              1: zipmap(model.predict_proba(Xt), model.classes_, _f32(1, 1))})


@case("LogisticRegression-string-labels")
def _():
    from sklearn.linear_model import LogisticRegression
    X, y, Xt = _classification(d=6, classes=3, seed=41)
    names = np.array(["high", "low", "mid"], dtype=object)
    model = LogisticRegression(max_iter=500).fit(X, names[y])
    onx = _skl(model, X, options=_no_zipmap(model))
    return _one_run(onx, Xt, {0: exact(model.predict(Xt).astype(object)),
                              1: close(model.predict_proba(Xt).astype(np.float32),
                                       _f32(7, 20))})


_WORDS = ["red", "green", "blue", "apple", "pear", "plum", "sweet", "sour", "ripe", "fresh",
          "old", "big", "small"]


def _documents(n, seed):
    rng = np.random.default_rng(seed)
    docs = [" ".join(rng.choice(_WORDS, size=rng.integers(2, 6))) for _ in range(n)]
    labels = np.array([int("sweet" in d or "ripe" in d) + int("plum" in d) for d in docs])
    return docs, labels


@case("TfidfVectorizer-LogisticRegression")
def _():
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from skl2onnx.common.data_types import StringTensorType
    docs, y = _documents(N_TRAIN + N_TEST, seed=42)
    lr = LogisticRegression(max_iter=500)
    pipe = make_pipeline(TfidfVectorizer(), lr).fit(docs[:N_TRAIN], y[:N_TRAIN])
    tfidf = pipe.steps[0][1]
    # StringNormalizer's locale: skl2onnx's default, en_US.UTF-8, is not installed everywhere
    # (onnxruntime then refuses the model); the words are ASCII, so "C" lowers them the same
    onx = _skl(pipe, None, options={id(lr): {"zipmap": False}, id(tfidf): {"locale": "C"}},
               initial_types=[("text", StringTensorType([None, 1]))])
    test = docs[N_TRAIN:]
    # tf-idf weights (a norm over at most 5 words), then 13 products below about 10
    return Converted(onx, [({"text": np.array(test, dtype=object).reshape(-1, 1)},
                            {0: exact(pipe.predict(test)),
                             1: close(pipe.predict_proba(test).astype(np.float32),
                                      _f32(20, 10))})])


@case("ColumnTransformer-OneHot-Imputer-Scaler-LogisticRegression")
def _():
    pd = pytest.importorskip("pandas")
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline, make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    rng = np.random.default_rng(43)
    n = N_TRAIN + N_TEST
    num = _with_nan(rng.standard_normal((n, 3)).astype(np.float32), seed=43)
    colour = rng.choice(["red", "green", "blue"], size=n)
    size = rng.choice(["S", "M", "L", "XL"], size=n)
    frame = pd.DataFrame({"a": num[:, 0], "b": num[:, 1], "c": num[:, 2],
                          "colour": colour.astype(object), "size": size.astype(object)})
    score = (np.nan_to_num(num[:, 0]) - np.nan_to_num(num[:, 1]) + (colour == "red")
             - 0.8 * (size == "XL") + 0.5 * rng.standard_normal(n))
    y = (score > 0).astype(np.int64)
    lr = LogisticRegression(max_iter=500)
    pipe = Pipeline([
        ("columns", ColumnTransformer([
            ("categories", OneHotEncoder(handle_unknown="ignore"), ["colour", "size"]),
            ("numbers", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()),
             ["a", "b", "c"]),
        ])),
        ("classifier", lr),
    ]).fit(frame[:N_TRAIN], y[:N_TRAIN])
    onx = _skl(pipe, frame[:1], options=_no_zipmap(lr))
    test = frame[N_TRAIN:]
    numeric = pd.api.types.is_numeric_dtype
    feeds = {c: (test[c].to_numpy(dtype=np.float32) if numeric(test[c])
                 else test[c].to_numpy(dtype=object)).reshape(-1, 1) for c in test.columns}
    # scaling, then 10 products below about 10
    return Converted(onx, [(feeds, {0: exact(pipe.predict(test)),
                                    1: close(pipe.predict_proba(test).astype(np.float32),
                                             _f32(14, 10))})])


# ---- checks ---------------------------------------------------------------------------------

@functools.cache
def _converted(name) -> Converted:
    build, _ = CASES[name]
    with warnings.catch_warnings():
        # sklearn 1.9 deprecates SVC(probability=True) and its probA_/probB_, which skl2onnx reads
        warnings.simplefilter("ignore", FutureWarning)
        return build()


def _case(name) -> Converted:
    for module in CASES[name][1]:
        pytest.importorskip(module)
    return _converted(name)


def _check_labels(got, want, what):
    got = np.asarray(got)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if want.dtype.kind in "OUS":
        assert got.dtype == object, (what, got.dtype)
        assert [str(v) for v in got.ravel()] == [str(v) for v in want.ravel()], what
    else:
        assert got.dtype.kind in "iu", (what, got.dtype)
        np.testing.assert_array_equal(got, want, err_msg=what)


def _check_close(got, want, rtol, atol, what):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, \
        (what, got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol, err_msg=what)


def _zipmap_rows(rows, classes, what):
    """A list of {class: probability} dicts as an array whose columns follow ``classes``."""
    assert isinstance(rows, list) and all(isinstance(r, dict) for r in rows), \
        (what, type(rows), type(rows[0]) if rows else None)
    keys = [c.item() if isinstance(c, np.generic) else c for c in classes]
    for r in rows:
        assert sorted(r, key=str) == sorted(keys, key=str), (what, list(r), keys)
    return np.array([[float(r[k]) for k in keys] for r in rows], dtype=np.float64)


def _check(got, wants, what):
    for k, want in wants.items():
        label = f"{what}: output {k}"
        if want.kind == "exact":
            _check_labels(got[k], want.value, label)
        elif want.kind == "close":
            _check_close(got[k], want.value, want.rtol, want.atol, label)
        else:
            table = _zipmap_rows(got[k], want.classes, label)
            assert table.shape == want.value.shape, (label, table.shape, want.value.shape)
            np.testing.assert_allclose(table, want.value, rtol=want.rtol, atol=want.atol,
                                       err_msg=label)


def _same_as(got, other, want: Want, what):
    """graphrt's output ``got`` against onnxruntime's ``other`` for the same feeds."""
    if want.kind == "zipmap":
        a, b = (_zipmap_rows(v, want.classes, what) for v in (got, other))
        np.testing.assert_allclose(a, b, rtol=want.rtol, atol=want.atol, err_msg=what)
        return
    got, other = np.asarray(got), np.asarray(other)
    assert got.dtype == other.dtype and got.shape == other.shape, \
        (what, got.dtype, other.dtype, got.shape, other.shape)
    if want.kind == "exact":
        assert got.tolist() == other.tolist(), what
    else:
        np.testing.assert_allclose(got.astype(np.float64), other.astype(np.float64),
                                   rtol=want.rtol, atol=want.atol, err_msg=what)


NAMES = list(CASES)


@pytest.mark.parametrize("name", NAMES)
def test_matches_estimator(name):
    conv = _case(name)
    n_outputs = len(conv.onx.graph.output)
    for i, (feeds, wants) in enumerate(conv.runs):
        got = _run_graphrt(conv.onx, feeds)
        assert len(got) == n_outputs
        _check(got, wants, f"{name} run {i}")


@pytest.mark.parametrize("name", NAMES)
def test_matches_onnxruntime(name):
    conv = _case(name)
    for i, (feeds, wants) in enumerate(conv.runs):
        other = _run_onnxruntime(conv.onx, feeds)          # skips first without onnxruntime
        got = _run_graphrt(conv.onx, feeds)
        assert len(got) == len(other)
        for k, want in wants.items():
            _same_as(got[k], other[k], want, f"{name} run {i}: output {k}")
