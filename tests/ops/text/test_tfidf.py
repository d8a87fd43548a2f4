"""TfIdfVectorizer through graphrt.Session, compared with onnx's reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind

from ...helpers import EXACT, check, fails, run, strings


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
    check("TfIdfVectorizer", [x], attrs, opset=9, outs=[np.float32])
    check("TfIdfVectorizer", [x[0].astype(np.int32)], attrs, opset=9, outs=[np.float32])


def test_tfidf_strings_and_permuted_columns():
    pool = ["a", "b", "c", "a", "b", "b", "c"]
    attrs = {"mode": "TFIDF", "min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 1,
             "ngram_counts": [0, 3], "ngram_indexes": [4, 0, 2, 1, 3], "pool_strings": pool,
             "weights": [1.0, 2.0, 3.0, 4.0, 5.0]}
    x = strings("a", "b", "a", "x", "b", "c", "c", shape=(1, 7))
    check("TfIdfVectorizer", [x], attrs, opset=9, outs=[np.float32], options=EXACT)


def test_tfidf_empty():
    attrs = dict(_TFIDF, mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=1)
    assert run("TfIdfVectorizer", [np.zeros((0, 4), np.int64)], attrs, opset=9,
               outs=[np.float32])[0].shape == (0, 8)
    got = run("TfIdfVectorizer", [np.zeros((2, 0), np.int64)], attrs, opset=9, outs=[np.float32])[0]
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
    fails(kind, "TfIdfVectorizer", [np.zeros(4, np.int64)], attrs, opset=9, outs=[np.float32])


def test_tfidf_bad_input():
    attrs = dict(_TFIDF, mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0)
    fails(ErrorKind.UNSUPPORTED, "TfIdfVectorizer", [strings("a")], attrs, opset=9,
          outs=[np.float32])
    fails(ErrorKind.INVALID_MODEL, "TfIdfVectorizer", [np.zeros((1, 2, 2), np.int64)],
          attrs, opset=9, outs=[np.float32])
