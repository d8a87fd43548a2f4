"""graphrt.onnxruntime against onnxruntime's Python API: onnxruntime's own API tests
(onnxruntime_test_python.py, _iobinding.py, _mlops.py), reimplemented on models made here.

Each test that states onnxruntime's behaviour runs on both modules (the ``ort`` fixture): the
real onnxruntime shows that the assertion is onnxruntime's, graphrt.onnxruntime that it
holds there too. The graphrt-only extras run on the shim alone.
"""
from __future__ import annotations

import gc
import json
import os
import pathlib
import threading
import warnings

import numpy as np
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper

import graphrt
import graphrt.onnxruntime as shim

onnxruntime = pytest.importorskip("onnxruntime")

X = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)
MUL_OUT = np.array([[1, 4], [9, 16], [25, 36]], dtype=np.float32)


@pytest.fixture(params=["onnxruntime", "graphrt"])
def ort(request):
    return onnxruntime if request.param == "onnxruntime" else shim


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8, ml=False, **fields):
    opsets = [h.make_opsetid("", opset)] + ([h.make_opsetid("ai.onnx.ml", 3)] if ml else [])
    m = h.make_model(h.make_graph(nodes, fields.pop("graph_name", "g"), inputs, outputs, list(inits)),
                     opset_imports=opsets, ir_version=ir, **fields)
    return m.SerializeToString()


def vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def mul_1():
    w = numpy_helper.from_array(X.copy(), "W")
    return model([h.make_node("Mul", ["X", "W"], ["Y"])], [vi("X", T.FLOAT, [3, 2])],
                 [vi("Y", T.FLOAT, [3, 2])], [w])


def matmul(first=3):
    w = numpy_helper.from_array(np.array([[1], [2]], dtype=np.float32), "W")
    return model([h.make_node("MatMul", ["X", "W"], ["Y"])], [vi("X", T.FLOAT, [first, 2])],
                 [vi("Y", T.FLOAT, [first, 1])], [w])


def identity(elem, shape=(2, 2)):
    return model([h.make_node("Identity", ["input:0"], ["output:0"])], [vi("input:0", elem, list(shape))],
                 [vi("output:0", elem, list(shape))])


@pytest.fixture(scope="module")
def mul_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("ort") / "mul_1.onnx"
    p.write_bytes(mul_1())
    return p


# -- construction, providers, device ---------------------------------------------------------

def test_versions_and_providers(ort, mul_path):
    assert ort.get_version_string() and "Build Info" in ort.get_build_info()
    assert "CPUExecutionProvider" in ort.get_available_providers()
    assert ort.get_all_providers()[-1] == "CPUExecutionProvider"
    sess = ort.InferenceSession(str(mul_path), providers=ort.get_available_providers())
    assert "CPUExecutionProvider" in sess.get_providers()
    assert "CPU" in ort.get_device()
    ort.disable_telemetry_events()
    ort.enable_telemetry_events()


def test_path_object_and_bytes(ort, mul_path):
    for src in (pathlib.Path(mul_path), str(mul_path), mul_path.read_bytes()):
        sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
        assert [(i.name, i.shape, i.type) for i in sess.get_inputs()] == [("X", [3, 2], "tensor(float)")]
        assert [(o.name, o.shape, o.type) for o in sess.get_outputs()] == [("Y", [3, 2], "tensor(float)")]
        np.testing.assert_allclose(sess.run(["Y"], {"X": X})[0], MUL_OUT)
    with pytest.raises(TypeError, match="Unable to load from type"):
        ort.InferenceSession(12)


def test_missing_file_and_bad_bytes(ort, tmp_path):
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.NoSuchFile, match="File doesn't exist"):
        ort.InferenceSession(str(tmp_path / "absent.onnx"))
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidProtobuf, match="INVALID_PROTOBUF"):
        ort.InferenceSession(b"not a model at all")


def test_error_classes_are_session_errors():
    for name in ("Fail", "InvalidArgument", "NoSuchFile", "InvalidGraph", "RuntimeException",
                 "InvalidProtobuf", "NotImplemented", "EPFail", "NotFound"):
        cls = getattr(shim.capi.onnxruntime_pybind11_state, name)
        assert issubclass(cls, graphrt.SessionError) and cls is getattr(shim, name)
    unsupported = model([h.make_node("NoSuchOp", ["x"], ["y"], domain="com.example")],
                        [vi("x", T.FLOAT, [1])], [vi("y", T.FLOAT, [1])])
    with pytest.raises(shim.NotImplemented) as e:
        shim.InferenceSession(unsupported)
    assert e.value.kind is graphrt.ErrorKind.UNSUPPORTED_OPERATOR and "NOT_IMPLEMENTED" in str(e.value)


def test_providers_other_than_cpu(ort, mul_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sess = ort.InferenceSession(str(mul_path), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert any("CUDAExecutionProvider" in str(w.message) for w in caught)
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert sess.get_provider_options()["CPUExecutionProvider"] is not None
    np.testing.assert_allclose(sess.run(None, {"X": X})[0], MUL_OUT)
    with pytest.raises(RuntimeError, match="Unknown Provider Type: InvalidProvider"):
        sess.set_providers(["InvalidProvider"])


def test_provider_tuples(ort, mul_path):
    sess = ort.InferenceSession(str(mul_path),
                                providers=[("CPUExecutionProvider", {"arena_extend_strategy": "kSameAsRequested"})])
    assert sess.get_providers() == ["CPUExecutionProvider"]


# -- run: inputs and outputs -----------------------------------------------------------------

def test_run_model(ort):
    sess = ort.InferenceSession(mul_1())
    np.testing.assert_allclose(sess.run(["Y"], {"X": X})[0], MUL_OUT)
    for names in (None, []):
        np.testing.assert_allclose(sess.run(names, {"X": X})[0], MUL_OUT)


def test_matmul_contiguous_and_symbolic(ort):
    sess = ort.InferenceSession(matmul())
    x = np.array([[2, 1], [4, 3], [6, 5]], dtype=np.float32)[:, [1, 0]]
    want = np.array([[5], [11], [17]], dtype=np.float32)
    np.testing.assert_allclose(sess.run(None, {"X": x})[0], want)
    np.testing.assert_allclose(sess.run(None, {"X": np.ascontiguousarray(x)})[0], want)
    sym = ort.InferenceSession(matmul("None"))
    assert sym.get_inputs()[0].shape == ["None", 2] and sym.get_outputs()[0].shape == ["None", 1]
    np.testing.assert_allclose(sym.run(None, {"X": X})[0], want)


def test_lists_as_input(ort):
    sess = ort.InferenceSession(mul_1())
    np.testing.assert_allclose(sess.run([], {"X": X.tolist()})[0], MUL_OUT)
    strings = ort.InferenceSession(identity(T.STRING))
    x = [["this", "is"], ["identity", "test"]]
    np.testing.assert_equal(strings.run(None, {"input:0": x})[0], np.array(x, dtype=object))


def test_node_arg_text(ort):
    sess = ort.InferenceSession(model([h.make_node("Identity", ["z"], ["w"]), h.make_node("Identity", ["x"], ["y"])],
                                      [vi("z", T.FLOAT, [0, "n", None]), vi("x", T.FLOAT, None)],
                                      [vi("w", T.FLOAT, [0, "n", None]), vi("y", T.FLOAT, None)]))
    z, x = sess.get_inputs()
    assert (z.shape, x.shape) == ([0, "n", None], [])
    assert str(z) == "NodeArg(name='z', type='tensor(float)', shape=[0, 'n', None])"


def test_negative_extent_is_dynamic(ort):
    """paddle2onnx writes -1 for a dynamic extent."""
    sess = ort.InferenceSession(model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [-1, 3])],
                                      [vi("y", T.FLOAT, [-1, 3])]))
    assert sess.get_inputs()[0].shape == [None, 3]
    assert sess.run(None, {"x": np.ones((5, 3), np.float32)})[0].shape == (5, 3)


def test_wrong_inputs(ort):
    Fail = ort.capi.onnxruntime_pybind11_state
    sess = ort.InferenceSession(mul_1())
    with pytest.raises(Fail.InvalidArgument, match=r"Unexpected input data type. Actual: \(tensor\(double\)\) , "
                                                   r"expected: \(tensor\(float\)\)"):
        sess.run(None, {"X": X.astype(np.float64)})
    with pytest.raises(Fail.InvalidArgument, match="Invalid rank for input: X Got: 1 Expected: 2"):
        sess.run(None, {"X": X.reshape(-1)})
    with pytest.raises(Fail.InvalidArgument, match="Got invalid dimensions for input: X for the following indices"
                                                   r"\n index: 0 Got: 2 Expected: 3"):
        sess.run(None, {"X": X[:2]})
    with pytest.raises(Fail.InvalidArgument, match="Invalid input name: Q"):
        sess.run(None, {"X": X, "Q": X})
    with pytest.raises(Fail.InvalidArgument):
        sess.run(["nothing"], {"X": X})


def test_missing_input_is_value_error(ort):
    b = vi("input:0", T.BOOL, [2, 2])
    sess = ort.InferenceSession(model([h.make_node("And", ["input1:0", "input:0"], ["output:0"])],
                                      [vi("input1:0", T.BOOL, [2, 2]), b], [vi("output:0", T.BOOL, [2, 2])]))
    with pytest.raises(ValueError, match=r"Required inputs \(\['input1:0'\]\) are missing from input feed "
                                         r"\(\['input:0'\]\)"):
        sess.run(None, {"input:0": np.ones((2, 2), bool)})


def test_boolean_inputs(ort):
    sess = ort.InferenceSession(model([h.make_node("And", ["input1:0", "input:0"], ["output:0"])],
                                      [vi("input1:0", T.BOOL, [2, 2]), vi("input:0", T.BOOL, [2, 2])],
                                      [vi("output:0", T.BOOL, [2, 2])]))
    assert [(i.name, i.type) for i in sess.get_inputs()] == [("input1:0", "tensor(bool)"), ("input:0", "tensor(bool)")]
    a = np.array([[True, True], [False, False]])
    b = np.array([[True, False], [True, False]])
    np.testing.assert_equal(sess.run(None, {"input1:0": a, "input:0": b})[0], a & b)


@pytest.mark.parametrize("x", [
    np.array([["this", "is"], ["identity", "test"]]),
    np.array([["Olá", "你好"], ["여보세요", "hello"]]),
    np.array([["this", "is"], ["identity", "test"]], dtype=object),
])
def test_string_inputs(ort, x):
    sess = ort.InferenceSession(identity(T.STRING))
    assert sess.get_inputs()[0].type == "tensor(string)" and sess.get_outputs()[0].shape == [2, 2]
    np.testing.assert_equal(sess.run(None, {"input:0": x})[0], x.astype(object))


def test_bytes_and_void_inputs(ort):
    sess = ort.InferenceSession(identity(T.STRING))
    x = np.array([b"this", b"is", b"identity", b"test"]).reshape(2, 2)
    np.testing.assert_equal(sess.run(None, {"input:0": x})[0].astype("|S8"), x)
    v = np.array([b"must", b"have", b"same", b"size"], dtype=np.void).reshape(2, 2)
    np.testing.assert_equal(sess.run(None, {"input:0": v})[0],
                            np.array([["must", "have"], ["same", "size"]], dtype=object))


def test_output_does_not_alias_input(ort):
    ten = numpy_helper.from_array(np.array(10, np.float32), "ten")
    shape = [1, 2, 2, 2]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model([h.make_node("Add", ["input_0", "ten"], ["plus_10"])],
                                      [vi("input_0", T.FLOAT, shape)],
                                      [vi("plus_10", T.FLOAT, shape), vi("input_0", T.FLOAT, shape)], [ten],
                                      opset=21), so)
    kept = []
    for i in range(7):
        x = np.full(shape, i, dtype=np.float32)
        plus, same = sess.run(None, {"input_0": x})
        assert not np.shares_memory(same, x)
        kept.append((i, plus, same))
    for i, plus, same in kept:
        np.testing.assert_equal(plus, i + 10)
        np.testing.assert_equal(same, i)


# -- sequences, optionals, maps -------------------------------------------------------------

def test_sequences(ort):
    seq_f = h.make_tensor_sequence_value_info("X", T.FLOAT, None)
    length = ort.InferenceSession(model([h.make_node("SequenceLength", ["X"], ["Y"])], [seq_f],
                                        [vi("Y", T.INT64, [])]))
    assert length.get_inputs()[0].type == "seq(tensor(float))" and length.get_outputs()[0].type == "tensor(int64)"
    assert length.get_inputs()[0].shape == []
    r = length.run(None, {"X": [np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)]})[0]
    np.testing.assert_equal(r, np.array(2, np.int64))
    construct = ort.InferenceSession(model(
        [h.make_node("SequenceConstruct", ["tensor1", "tensor2"], ["output_sequence"])],
        [vi("tensor1", T.INT64, None), vi("tensor2", T.INT64, None)],
        [h.make_tensor_sequence_value_info("output_sequence", T.INT64, None)]))
    assert construct.get_outputs()[0].type == "seq(tensor(int64))"
    a, b = np.array([[1, 0, 3], [44, 23, 11]]), np.array([[1, 2, 3], [4, 5, 6]])
    got = construct.run(None, {"tensor1": a, "tensor2": b})[0]
    assert isinstance(got, list)
    np.testing.assert_array_equal(got[0], a)
    np.testing.assert_array_equal(got[1], b)
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    insert = ort.InferenceSession(model(
        [h.make_node("SequenceInsert", ["input_seq", "tensor"], ["output_sequence"])],
        [h.make_tensor_sequence_value_info("input_seq", T.INT64, None), vi("tensor", T.INT64, None)],
        [h.make_tensor_sequence_value_info("output_sequence", T.INT64, None)]), so)
    got = insert.run(None, {"input_seq": [], "tensor": a})[0]
    assert len(got) == 1
    np.testing.assert_array_equal(got[0], a)


def test_optional_sequence_input(ort):
    opt = h.make_value_info("X", h.make_optional_type_proto(h.make_sequence_type_proto(
        h.make_tensor_type_proto(T.FLOAT, None))))
    out = h.make_value_info("Y", h.make_optional_type_proto(h.make_sequence_type_proto(
        h.make_tensor_type_proto(T.FLOAT, None))))
    sess = ort.InferenceSession(model([h.make_node("Identity", ["X"], ["Y"])], [opt], [out], opset=18))
    assert sess.get_inputs()[0].type == "optional(seq(tensor(float)))"
    x = np.array([1, 2, 3, 4, 5], np.float32)
    np.testing.assert_allclose(sess.run(None, {"X": [x]})[0][0], x)


@pytest.mark.parametrize("labels, kind", [(["class1", "class2", "class3"], "string"), ([10, 20, 30], "int64")])
def test_zipmap(ort, labels, kind):
    attr = {"classlabels_strings": labels} if kind == "string" else {"classlabels_int64s": labels}
    out = h.make_value_info("Z", h.make_sequence_type_proto(h.make_map_type_proto(
        T.STRING if kind == "string" else T.INT64, h.make_tensor_type_proto(T.FLOAT, None))))
    sess = ort.InferenceSession(model([h.make_node("ZipMap", ["X"], ["Z"], domain="ai.onnx.ml", **attr)],
                                      [vi("X", T.FLOAT, [None, 3])], [out], ml=True))
    assert sess.get_outputs()[0].type == f"seq(map({kind},tensor(float)))"
    got = sess.run(None, {"X": np.array([[1, 0, 3], [44, 23, 11]], np.float32)})[0]
    assert got == [dict(zip(labels, [1.0, 0.0, 3.0])), dict(zip(labels, [44.0, 23.0, 11.0]))]


def test_dict_vectorizer_map_input(ort):
    inp = h.make_value_info("float_input", h.make_map_type_proto(T.INT64, h.make_tensor_type_proto(T.FLOAT, None)))
    sess = ort.InferenceSession(model(
        [h.make_node("DictVectorizer", ["float_input"], ["variable1"], domain="ai.onnx.ml",
                     int64_vocabulary=[0, 1, 2, 3, 4])],
        [inp], [vi("variable1", T.FLOAT, [1, 5])], ml=True))
    arg = sess.get_inputs()[0]
    assert (arg.type, arg.shape) == ("map(int64,tensor(float))", [])
    got = sess.run(None, {"float_input": {0: 25.0, 1: 5.13, 2: 0.0, 3: 0.453, 4: 5.966}})[0]
    np.testing.assert_allclose(got, [[25.0, 5.13, 0.0, 0.453, 5.966]], rtol=1e-6)


# -- SessionOptions -------------------------------------------------------------------------

def test_session_option_defaults(ort):
    so = ort.SessionOptions()
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert so.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    assert (so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level) == (0, 0, -1)
    assert so.enable_cpu_mem_arena and so.enable_mem_pattern and not so.enable_profiling
    assert so.profile_file_prefix == "onnxruntime_profile_" and so.optimized_model_filepath == ""
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    assert so.execution_mode == ort.ExecutionMode.ORT_PARALLEL
    so.add_session_config_entry("CONFIG_KEY", "CONFIG_VAL")
    assert so.get_session_config_entry("CONFIG_KEY") == "CONFIG_VAL"
    with pytest.raises(RuntimeError, match="SessionOptions does not have configuration with key: INVALID_KEY"):
        so.get_session_config_entry("INVALID_KEY")
    sess = ort.InferenceSession(mul_1(), so)
    np.testing.assert_allclose(sess.run(None, {"X": X})[0], MUL_OUT)


def abs_free_dimensions():
    t = h.make_tensor_type_proto(T.FLOAT, ["Dim1", "Dim2", 5])
    t.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    t.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
    return model([h.make_node("Abs", ["x"], ["y"])], [h.make_value_info("x", t)],
                 [h.make_value_info("y", t)])


@pytest.mark.parametrize("how, want", [("denotation", [3, 5, 5]), ("name", [4, 6, 5])])
def test_free_dimension_overrides(ort, how, want):
    so = ort.SessionOptions()
    if how == "denotation":
        so.add_free_dimension_override_by_denotation("DATA_BATCH", 3)
        so.add_free_dimension_override_by_denotation("DATA_CHANNEL", 5)
    else:
        so.add_free_dimension_override_by_name("Dim1", 4)
        so.add_free_dimension_override_by_name("Dim2", 6)
    sess = ort.InferenceSession(abs_free_dimensions(), so)
    assert sess.get_inputs()[0].shape == want
    x = -np.ones(want, np.float32)
    np.testing.assert_equal(sess.run(None, {"x": x})[0], 1)
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument):
        sess.run(None, {"x": np.ones([want[0] + 1] + want[1:], np.float32)})


def test_add_initializer(ort):
    so = ort.SessionOptions()
    w = np.array([[2, 1], [4, 3], [6, 5]], dtype=np.float32)
    value = ort.OrtValue.ortvalue_from_numpy(w)     # onnxruntime needs it alive as long as the session
    so.add_initializer("W", value)
    sess = ort.InferenceSession(mul_1(), so)
    np.testing.assert_equal(sess.run(None, {"X": X})[0], X * w)


def test_add_external_initializers(ort, tmp_path):
    pads = T(name="Pads_not_on_disk", data_type=T.INT64, dims=[4], data_location=T.EXTERNAL)
    for key, value in (("location", "Pads_not_on_disk.bin"), ("offset", "0"), ("length", "32")):
        pads.external_data.add(key=key, value=value)
    path = tmp_path / "pad.onnx"
    path.write_bytes(model([h.make_node("Pad", ["X", "Pads_not_on_disk"], ["Y"], mode="constant")],
                           [vi("X", T.FLOAT, [1, 2]), vi("Pads_not_on_disk", T.INT64, [4])],
                           [vi("Y", T.FLOAT, [1, 4])], [pads]))
    so = ort.SessionOptions()
    value = ort.OrtValue.ortvalue_from_numpy(np.array([0, 1, 0, 1], np.int64))
    so.add_external_initializers(["Pads_not_on_disk"], [value])
    sess = ort.InferenceSession(str(path), so)
    np.testing.assert_equal(sess.run(None, {"X": np.array([[1, 2]], np.float32)})[0], [[0, 1, 2, 0]])


def lora_model():
    w = numpy_helper.from_array(np.arange(1, 17, dtype=np.float32).reshape(4, 4), "weight_x")
    a = numpy_helper.from_array(np.zeros((4, 0), np.float32), "lora_param_a")
    b = numpy_helper.from_array(np.zeros((0, 4), np.float32), "lora_param_b")
    return model([h.make_node("MatMul", ["input_x", "weight_x"], ["mm"]),
                  h.make_node("MatMul", ["input_x", "lora_param_a"], ["t"]),
                  h.make_node("MatMul", ["t", "lora_param_b"], ["low"]),
                  h.make_node("Add", ["mm", "low"], ["output"])],
                 [vi("input_x", T.FLOAT, [4, 4]), vi("lora_param_a", T.FLOAT, [4, "dim"]),
                  vi("lora_param_b", T.FLOAT, ["dim", 4])], [vi("output", T.FLOAT, [4, 4])], [w, a, b])


def test_overridable_initializers(ort):
    sess = ort.InferenceSession(lora_model())
    assert [i.name for i in sess.get_inputs()] == ["input_x"]
    over = sess.get_overridable_initializers()
    assert [(i.name, i.shape) for i in over] == [("lora_param_a", [4, "dim"]), ("lora_param_b", ["dim", 4])]
    x = np.ones((4, 4), np.float32)
    np.testing.assert_equal(sess.run(None, {"input_x": x})[0], np.tile([28, 32, 36, 40], (4, 1)))
    feeds = {"input_x": x, "lora_param_a": np.array([[3], [4], [5], [6]], np.float32),
             "lora_param_b": np.array([[7, 8, 9, 10]], np.float32)}
    np.testing.assert_equal(sess.run(None, feeds)[0], np.tile([154, 176, 198, 220], (4, 1)))
    np.testing.assert_equal(sess.run(None, {"input_x": x})[0], np.tile([28, 32, 36, 40], (4, 1)))


def test_model_metadata(ort):
    bare = ort.InferenceSession(mul_1()).get_modelmeta()
    assert (bare.producer_name, bare.graph_name, bare.domain, bare.description, bare.custom_metadata_map) == \
        ("", "g", "", "", {})
    assert bare.version == 2**63 - 1
    m = h.make_model(h.make_graph([h.make_node("Relu", ["x"], ["y"])], "named", [vi("x", T.FLOAT, [1])],
                                  [vi("y", T.FLOAT, [1])], doc_string="graph doc"),
                     opset_imports=[h.make_opsetid("", 17)], ir_version=8, producer_name="TensorTorch",
                     model_version=12345, domain="ai.onnx.ml", doc_string="This is doc_string")
    h.set_model_props(m, {"I am key 1!": "I am value 1!", "": "Value for empty key!", "Key for empty value!": ""})
    meta = ort.InferenceSession(m.SerializeToString()).get_modelmeta()
    assert (meta.producer_name, meta.graph_name, meta.domain, meta.description, meta.graph_description,
            meta.version) == ("TensorTorch", "named", "ai.onnx.ml", "This is doc_string", "graph doc", 12345)
    assert meta.custom_metadata_map == {"I am key 1!": "I am value 1!", "": "Value for empty key!",
                                        "Key for empty value!": ""}


def test_optimized_model_file(ort, tmp_path):
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(mul_1(), so)
    assert os.path.getsize(so.optimized_model_filepath) > 0


def test_profiling(ort, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    so = ort.SessionOptions()
    so.enable_profiling = True
    sess = ort.InferenceSession(mul_1(), so)
    sess.run(None, {"X": X})
    name = sess.end_profiling()
    lines = open(name).read().strip().split("\n")
    assert "[" in lines[0] and "]" in lines[-1]
    for line in lines[1:-1]:
        for key in ("pid", "dur", "ts", "ph", "X", "name", "args"):
            assert key in line
    assert json.loads("\n".join(lines))
    starts = [ort.InferenceSession(mul_1()).get_profiling_start_time_ns() for _ in range(3)]
    assert starts == sorted(starts)


# -- RunOptions, threads, async --------------------------------------------------------------

def test_run_options(ort):
    sess = ort.InferenceSession(mul_1())
    ro = ort.RunOptions()
    assert (ro.log_severity_level, ro.log_verbosity_level, ro.logid, ro.terminate) == (-1, 0, "", False)
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert ro.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    with pytest.raises(RuntimeError, match="RunOptions does not have configuration with key"):
        ro.get_run_config_entry("nothing")
    np.testing.assert_allclose(sess.run([], {"X": X}, ro)[0], MUL_OUT)
    ro.terminate = True
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail, match="Exiting due to terminate flag"):
        sess.run(None, {"X": X}, ro)
    ro.terminate = False
    np.testing.assert_allclose(sess.run([], {"X": X}, ro)[0], MUL_OUT)


def test_terminate_cancels_a_run_in_progress():
    n = 400
    w = numpy_helper.from_array(np.eye(512, dtype=np.float32), "w")
    m = model([h.make_node("MatMul", [f"x{i}", "w"], [f"x{i + 1}"]) for i in range(n)],
              [vi("x0", T.FLOAT, [256, 512])], [vi(f"x{n}", T.FLOAT, [256, 512])], [w])
    so = shim.SessionOptions()
    so.intra_op_num_threads = 1
    sess = shim.InferenceSession(m, so)
    x = np.ones((256, 512), np.float32)
    np.testing.assert_equal(sess.run(None, {"x0": x})[0], x)
    ro = shim.RunOptions()
    timer = threading.Timer(0.05, lambda: setattr(ro, "terminate", True))
    timer.start()
    with pytest.raises(shim.Fail, match="Exiting due to terminate flag") as e:
        sess.run(None, {"x0": x}, ro)
    timer.join()
    assert e.value.kind is graphrt.ErrorKind.CANCELLED and e.value.node.startswith("MatMul")


def test_threads(ort):
    so = ort.SessionOptions()
    so.log_verbosity_level = 1
    so.logid = "MultiThreadsTest"
    sess = ort.InferenceSession(mul_1(), so)
    results = {}

    def work(tag):
        ro = ort.RunOptions()
        ro.logid = tag
        results[tag] = sess.run(["Y"], {"X": X}, ro)[0]

    workers = [threading.Thread(target=work, args=(f"thread{i}",)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for r in results.values():
        np.testing.assert_allclose(r, MUL_OUT)
    assert len(results) == 2


def test_run_async(ort):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(mul_1(), so)
    done, seen = threading.Event(), {}

    def callback(res, data, err):
        seen.update(res=res, data=data, err=err)
        done.set()

    x = X.copy()
    sess.run_async(["Y"], {"X": x}, callback, "my data")
    del x
    gc.collect()
    assert done.wait(60)
    assert seen["err"] == "" and seen["data"] == "my data" and len(seen["res"]) == 1
    np.testing.assert_allclose(seen["res"][0], MUL_OUT)


# -- OrtValue and IOBinding ----------------------------------------------------------------

def test_ort_value(ort):
    v = ort.OrtValue.ortvalue_from_numpy(X)
    assert (v.device_name(), v.shape(), v.data_type(), v.is_tensor(), v.tensor_size_in_bytes()) == \
        ("cpu", [3, 2], "tensor(float)", True, 24)
    np.testing.assert_equal(v.numpy(), X)
    assert np.shares_memory(v.numpy(), X) and v.data_ptr() == X.ctypes.data
    sess = ort.InferenceSession(mul_1())
    np.testing.assert_equal(sess.run(["Y"], {"X": v})[0], MUL_OUT)
    outs = sess.run_with_ort_values(["Y"], {"X": v})
    np.testing.assert_equal(outs[0].numpy(), MUL_OUT)
    typed = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(X, 1)
    assert typed.is_tensor() and typed.element_type() == 1 and typed.shape() == [3, 2]
    arr = np.asarray(v)
    assert arr.dtype == np.float32 and arr.ctypes.data == v.data_ptr()
    assert np.asarray(v, dtype=np.float64).dtype == np.float64
    empty = ort.OrtValue.ortvalue_from_shape_and_type([2, 2], np.int64)
    assert (empty.shape(), empty.data_type()) == ([2, 2], "tensor(int64)")


def test_io_binding_cpu(ort):
    sess = ort.InferenceSession(mul_1())
    io = sess.io_binding()
    io.bind_cpu_input("X", X)
    io.bind_output("Y")
    sess.run_with_iobinding(io)
    io.synchronize_outputs()
    np.testing.assert_equal(io.copy_outputs_to_cpu()[0], MUL_OUT)
    np.testing.assert_equal(io.get_outputs()[0].numpy(), MUL_OUT)


@pytest.mark.parametrize("elem", [T.FLOAT, T.UINT8, T.INT8, T.UINT16, T.INT16, T.INT32, T.INT64, T.BOOL,
                                  T.FLOAT16, T.DOUBLE, T.UINT32, T.UINT64])
def test_io_binding_types(ort, elem):
    sess = ort.InferenceSession(model([h.make_node("Identity", ["X"], ["Y"])], [vi("X", elem, [None, 2])],
                                      [vi("Y", elem, [None, 2])], ir=7))
    dtype = h.tensor_dtype_to_np_dtype(elem)
    x = np.arange(8).reshape(4, 2).astype(dtype)
    y = ort.OrtValue.ortvalue_from_shape_and_type(x.shape, elem)
    io = sess.io_binding()
    io.bind_input("X", "cpu", 0, dtype, list(x.shape), x.ctypes.data)
    io.bind_ortvalue_output("Y", y)
    sess.run_with_iobinding(io)
    np.testing.assert_equal(y.numpy(), x)
    io.clear_binding_inputs()
    io.bind_ortvalue_input("X", ort.OrtValue.ortvalue_from_numpy(x[::-1].copy()))
    io.clear_binding_outputs()
    io.bind_output("Y", "cpu")
    sess.run_with_iobinding(io)
    np.testing.assert_equal(io.get_outputs()[0].numpy(), x[::-1])


# -- graphrt's extras --------------------------------------------------------------------------

def test_exact_mode_through_config_entry():
    so = shim.SessionOptions()
    so.add_session_config_entry("graphrt.mode", "exact")
    sess = shim.InferenceSession(mul_1(), so)
    assert sess.graphrt_session.options.exact
    np.testing.assert_equal(sess.run(None, {"X": X})[0], MUL_OUT)
    so.add_session_config_entry("graphrt.mode", "fastest")
    with pytest.raises(shim.NotImplemented, match="graphrt.mode"):
        shim.InferenceSession(mul_1(), so)


def test_options_that_change_results_are_refused():
    so = shim.SessionOptions()
    so.add_session_config_entry("session.set_denormal_as_zero", "1")
    with pytest.raises(shim.NotImplemented, match="set_denormal_as_zero"):
        shim.InferenceSession(mul_1(), so)
    with pytest.raises(shim.NotImplemented, match="custom operator libraries"):
        shim.SessionOptions().register_custom_ops_library("libcustom_op_library.so")
    speed_only = shim.SessionOptions()
    speed_only.enable_cpu_mem_arena = False
    speed_only.execution_mode = shim.ExecutionMode.ORT_PARALLEL
    speed_only.inter_op_num_threads = 3
    speed_only.add_session_config_entry("session.intra_op.allow_spinning", "0")
    np.testing.assert_equal(shim.InferenceSession(mul_1(), speed_only).run(None, {"X": X})[0], MUL_OUT)


def test_options_map_onto_graphrt():
    so = shim.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = shim.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts = shim.InferenceSession(mul_1(), so).graphrt_session.options
    assert (opts.intra_op_threads, opts.optimization_level.value) == (1, "none")


def test_load_cancellation_flag():
    so = shim.SessionOptions()
    so.set_load_cancellation_flag(True)
    with pytest.raises(shim.ModelLoadCanceled):
        shim.InferenceSession(mul_1(), so)


def test_same_results_as_onnxruntime_on_a_small_network():
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 4)).astype(np.float32), "w2")
    m = model([h.make_node("MatMul", ["x", "w1"], ["a"]), h.make_node("Relu", ["a"], ["r"]),
               h.make_node("MatMul", ["r", "w2"], ["b"]), h.make_node("Softmax", ["b"], ["y"], axis=-1)],
              [vi("x", T.FLOAT, ["batch", 16])], [vi("y", T.FLOAT, ["batch", 4])], [w1, w2])
    x = rng.standard_normal((8, 16)).astype(np.float32)
    want = onnxruntime.InferenceSession(m).run(None, {"x": x})[0]
    np.testing.assert_allclose(shim.InferenceSession(m).run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-6)
