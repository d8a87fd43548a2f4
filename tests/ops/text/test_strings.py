"""The string operators (text/strings.py: StringConcat, StringSplit, StringNormalizer,
RegexFullMatch) through graphrt.Session, compared with onnx's reference evaluator or plain
Python.

Inputs given as ``Const(array)`` become initializers (values known when the plan is made).
"""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind

from ...helpers import Const, EXACT, check, fails, run, strings


S = np.dtype(object)


# ---- StringConcat, StringSplit, StringNormalizer, RegexFullMatch -------------------------

@pytest.mark.parametrize("a, b", [
    (strings("ab", "", "é中", shape=(3, 1)), strings("x", "yz")),       # broadcast both ways
    (np.array("cat", dtype=object), np.array("s", dtype=object)),      # 0-d
    (strings(shape=(0, 2)), strings("a", "b")),                         # empty
])
def test_string_concat(a, b):
    got = check("StringConcat", [a, b], opset=21, outs=[S], options=EXACT)
    assert got.shape == np.broadcast_shapes(a.shape, b.shape)


def test_string_concat_constant_inputs_fold():
    got = run("StringConcat", [Const(strings("a", "b")), strings("c")], opset=21, outs=[S])[0]
    assert got.tolist() == ["ac", "bc"]


@pytest.mark.parametrize("attrs", [{}, {"delimiter": ""}, {"delimiter": "-"}, {"delimiter": "ab"},
                                   {"maxsplit": 1}, {"delimiter": "-", "maxsplit": 0},
                                   {"delimiter": "-", "maxsplit": 2}])
def test_string_split(attrs):
    x = strings(" a  b c ", "a-b--c-", "", "xabyabz", "-", shape=(5, 1))
    got = check("StringSplit", [x], attrs, opset=21, outs=[S, np.int64])
    assert got[0].shape[:2] == (5, 1)


def test_string_split_empty_and_one_output():
    y, z = run("StringSplit", [strings(shape=(2, 0))], opset=21, outs=[S, np.int64])
    assert y.shape == (2, 0, 0) and z.shape == (2, 0)
    y, = run("StringSplit", [strings("a.b", "c")], {"delimiter": "."}, opset=21, outs=[S])
    assert y.tolist() == [["a", "b"], ["c", ""]]


def test_string_split_bad_maxsplit():
    fails(ErrorKind.INVALID_MODEL, "StringSplit", [strings("a")], {"maxsplit": -1}, opset=21,
          outs=[S, np.int64])


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
    got = run("StringNormalizer", [x], attrs, opset=10, outs=[S], options=EXACT)[0]
    assert got.dtype == S and got.tolist() == want


def test_string_normalizer_errors():
    fails(ErrorKind.INVALID_INPUT, "StringNormalizer", [strings("a", "b", shape=(2, 1))], opset=10,
          outs=[S])
    fails(ErrorKind.INVALID_MODEL, "StringNormalizer", [strings("a")],
          {"case_change_action": "TITLE"}, opset=10, outs=[S])


def test_regex_full_match():
    x = strings("www.a.com", "www.a.com.", "WWW.b.com", "", shape=(2, 2))
    check("RegexFullMatch", [x], {"pattern": r"www\.[\w.-]+\.com"}, opset=21, outs=[np.bool_],
          options=EXACT)
    check("RegexFullMatch", [strings(shape=(0, 3))], {"pattern": "a*"}, opset=21, outs=[np.bool_])


def test_regex_full_match_is_ascii_like_re2():
    got = run("RegexFullMatch", [strings("abc", "é", "a1_")], {"pattern": r"\w+"}, opset=21,
              outs=[np.bool_])[0]
    assert got.tolist() == [True, False, True]


def test_regex_full_match_errors():
    fails(ErrorKind.UNSUPPORTED, "RegexFullMatch", [strings("a")], {"pattern": "(a"}, opset=21,
          outs=[np.bool_])
    fails(ErrorKind.INVALID_MODEL, "RegexFullMatch", [strings("a")], opset=21, outs=[np.bool_])
    fails(ErrorKind.UNSUPPORTED, "RegexFullMatch", [np.zeros(2, np.float32)], {"pattern": "a"},
          opset=21, outs=[np.bool_])
