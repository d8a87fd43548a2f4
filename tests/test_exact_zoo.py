"""Exact-mode sessions can be made for every model of onnx's light zoo and for a BERT-style
encoder (no operator in them lacks an exact kernel)."""
import pytest

import graphrt

from benchmarks import models as bench_models

from . import conformance

LIGHT = sorted(n for n in conformance.data_cases() if n.startswith("light/"))


@pytest.mark.parametrize("name", LIGHT)
def test_light_model_has_exact_kernels(name):
    sess = graphrt.Session(conformance.data_cases()[name].model, graphrt.SessionOptions(mode="exact"))
    assert sess.inputs


def test_bert_encoder_has_exact_kernels():
    sess = graphrt.Session(bench_models.bert_encoder(), graphrt.SessionOptions(mode="exact"))
    assert sess.inputs
    assert len(LIGHT) == 9
