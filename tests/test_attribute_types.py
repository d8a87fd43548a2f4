"""The importer's table of attribute types (graphrt/attribute_types.py) against onnx's own
schemas, and a node whose attribute has the wrong type refused."""
import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper

import graphrt
from graphrt import attribute_types


def test_the_table_is_onnx_s_schemas_for_every_operator_and_version():
    """Every operator onnx knows at every opset version (up to the newest schema the table
    was made from, for an onnx installed since) gets the attribute types onnx's schema in
    force there declares."""
    known = {d: max(s for entries in ops.values() for s, _ in entries)
             for d, ops in attribute_types._TABLE.items()}
    checked = 0
    for schema in onnx.defs.get_all_schemas_with_history():
        d, newest = schema.domain, known.get(schema.domain, 0)
        for version in range(schema.since_version, newest + 1):
            want = onnx.defs.get_schema(schema.name, version, d)
            if want.since_version != schema.since_version:
                continue            # a later schema is in force there
            got = attribute_types.declared(d, schema.name, version)
            assert got == {a: int(s.type) for a, s in want.attributes.items()}, \
                (d, schema.name, version)
            checked += 1
    assert checked > 1000


def test_an_operator_before_its_first_version_or_unknown_is_not_checked():
    assert attribute_types.declared("", "Attention", 22) is None
    assert attribute_types.declared("", "NoSuchOperator", 17) is None
    assert attribute_types.declared("com.example", "Relu", 1) is None
    assert attribute_types.declared("", "Cast", 5) == {"to": AttributeProto.STRING}
    assert attribute_types.declared("", "Cast", 6)["to"] == AttributeProto.INT


def _model(attr):
    node = helper.make_node("Softmax", ["x"], ["y"])
    node.attribute.append(attr)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_an_attribute_of_another_type_is_a_bad_model_naming_the_node():
    with pytest.raises(graphrt.SessionError) as e:
        graphrt.Session(_model(helper.make_attribute("axis", 1.5)))
    assert e.value.kind is graphrt.ErrorKind.INVALID_MODEL
    assert "attribute 'axis' must be INT, got FLOAT" in str(e.value) and "Softmax" in str(e.value)
    s = graphrt.Session(_model(helper.make_attribute("axis", 0)))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0].sum(axis=0), np.ones(3), rtol=1e-6)
