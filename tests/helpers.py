"""Helpers shared by the operator tests: one-node models compared with onnx's reference
evaluator, error expectations naming the node, and small input makers."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import graphrt
from graphrt import SessionError, SessionOptions

from .models import make

NODE = "the_node"                       # the name every one-node model gives its node
EXACT = SessionOptions(mode="exact")


def i64(*v):
    return np.array(v, dtype=np.int64)


def rand(shape, dtype=np.float32, seed=0):
    """Standard normal values."""
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def expect_error(kind, fn, *args, match=None, **kw):
    """fn(*args, **kw) raises a SessionError of ``kind`` naming NODE (and containing
    ``match``); returns it."""
    with pytest.raises(SessionError) as info:
        fn(*args, **kw)
    assert info.value.kind == kind, info.value
    assert info.value.node == NODE
    if match is not None:
        assert match in str(info.value), str(info.value)
    return info.value


# ---- one node with named inputs and outputs ----------------------------------------------

def model_of(op, inputs, outputs, attrs=None, opset=27, inits=(), domain=""):
    """One node; ``inputs`` maps names to arrays (None: omitted), ``outputs`` lists names
    ('' for an output not asked for) with their element types; inputs named by ``inits``
    are initializers, not graph inputs."""
    node = helper.make_node(op, [n if x is not None else "" for n, x in inputs.items()],
                            [n for n, _ in outputs], name=NODE, domain=domain, **(attrs or {}))
    init_names = {t.name for t in inits}
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
           for n, x in inputs.items() if x is not None and n not in init_names]
    outs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(t)), None)
            for n, t in outputs if n]
    m = make([node], ins, outs, inits, opset=opset)
    if domain:
        m.opset_import.append(helper.make_opsetid(domain, 1))
    m.ir_version = 10
    return m


def feeds_of(model, inputs):
    fed = {i.name for i in model.graph.input}
    return {n: x for n, x in inputs.items() if x is not None and n in fed}


def compare(op, inputs, outputs, attrs=None, opset=27, rtol=1e-5, atol=1e-6, options=None,
            inits=(), domain=""):
    """graphrt's outputs (returned) have the reference's types and shapes and values within
    rtol/atol."""
    model = model_of(op, inputs, outputs, attrs, opset, inits, domain)
    feeds = feeds_of(model, inputs)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = graphrt.Session(model, options).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=atol)
    return got


def error(kind, op, inputs, outputs, attrs=None, opset=27, options=None, domain=""):
    """Running the node raises a SessionError of ``kind`` naming it; returns its text."""
    model = model_of(op, inputs, outputs, attrs, opset, domain=domain)
    return str(expect_error(kind, lambda: graphrt.Session(model, options).run(
        None, feeds_of(model, inputs))))



def wait_for_schedules(sess, timeout=120.0):
    """Until no plan of ``sess`` is still compiling its jitted schedule (so a measurement
    sees the steady state, not the compiler)."""
    assert sess.wait_for_schedules(timeout)
