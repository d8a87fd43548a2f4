"""Every SessionError kind, produced by a bad model or a bad input, naming where it is."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphrt
from graphrt import ErrorKind, SessionError

from . import models
from .models import F, make, tensor


def external_tensor(name, dims, location, offset):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(4 * int(np.prod(dims))))):
        t.external_data.add(key=k, value=v)
    return t


def err(fn, *args, **kw) -> SessionError:
    with pytest.raises(SessionError) as info:
        fn(*args, **kw)
    return info.value


def test_unsupported_operators_are_all_reported():
    n = helper.make_node
    model = make([n("Foo", ["x"], ["a"], domain="com.example", name="foo1"),
                  n("Relu", ["a"], ["b"]),
                  n("Bar", ["b"], ["c"], domain="com.example", name="bar1"),
                  n("Foo", ["c"], ["y"], domain="com.example", name="foo2")],
                 [tensor("x", F, [2])], [tensor("y", F, [2])])
    model.opset_import.append(helper.make_opsetid("com.example", 3))
    e = err(graphrt.Session, model)
    assert e.kind is ErrorKind.UNSUPPORTED_OPERATOR
    assert e.operators == ("com.example.Bar (opset 3)", "com.example.Foo (opset 3)")
    assert "foo1" in str(e) and "foo2" in str(e) and "bar1" in str(e)
    assert e.node == "foo1"         # the first offending node in graph order


def test_old_opset_is_named():
    model = make([helper.make_node("Relu", ["x"], ["y"], name="old_relu")],
                 [tensor("x", F, [2])], [tensor("y", F, [2])], opset=5)
    e = err(graphrt.Session, model)
    assert e.kind is ErrorKind.UNSUPPORTED_OPERATOR and e.operators == ("Relu (opset 5)",)


def test_exact_mode_names_every_operator_without_exact_kernel():
    n = helper.make_node
    model = make([n("RandomUniformLike", ["x"], ["s"], name="noise"), n("Relu", ["s"], ["r"]),
                  n("Bernoulli", ["r"], ["y"])],
                 [tensor("x", F, [2])], [tensor("y", F, [2])])
    e = err(graphrt.Session, model, graphrt.SessionOptions(mode="exact"))
    assert e.kind is ErrorKind.EXACT_MODE_UNAVAILABLE
    assert e.operators == ("Bernoulli", "RandomUniformLike") and "RandomUniformLike" in str(e)
    assert e.node == "noise"


@pytest.mark.parametrize("case", ["undefined", "twice", "garbage", "no-output", "bad-axis", "external"])
def test_invalid_models(case, tmp_path):
    n = helper.make_node
    io_ = ([tensor("x", F, [2, 3])], [tensor("y", F, [2, 3])])
    if case == "undefined":
        src = make([n("Add", ["x", "nowhere"], ["y"], name="adder")], *io_)
    elif case == "twice":
        src = make([n("Relu", ["x"], ["y"], name="r1"), n("Relu", ["x"], ["y"], name="r2")], *io_)
    elif case == "garbage":
        src = b"\x08\x07 certainly not protobuf \xff\xff"
    elif case == "no-output":
        src = make([n("Relu", ["x"], ["z"], name="r")], *io_)
    elif case == "bad-axis":
        src = make([n("Concat", ["x", "x"], ["y"], axis=5, name="cat")], *io_)
    else:
        t = external_tensor("w", [2, 3], "../../etc/passwd", 0)
        p = tmp_path / "m.onnx"
        p.write_bytes(make([n("Add", ["x", "w"], ["y"], name="add_w")], *io_, inits=[t]).SerializeToString())
        src = str(p)
    e = err(lambda: graphrt.Session(src).run(None, {"x": np.ones((2, 3), np.float32)}))
    assert e.kind is ErrorKind.INVALID_MODEL, e
    expect = {"undefined": "adder", "twice": "r2", "bad-axis": "cat"}.get(case)
    if expect:
        assert e.node == expect and expect in str(e)
    if case == "external":
        assert "outside the model's folder" in str(e)


def test_external_data_inside_folder_is_read(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 8 + w.tobytes())
    t = external_tensor("w", [2, 3], "weights.bin", 8)
    p = tmp_path / "m.onnx"
    p.write_bytes(make([helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", F, [2, 3])],
                       [tensor("y", F, [2, 3])], inits=[t]).SerializeToString())
    assert np.array_equal(graphrt.load(str(p))(np.ones((2, 3), np.float32)), w + 1)


@pytest.mark.parametrize("case", ["unknown", "missing", "dtype", "rank", "extent", "short", "shape-mismatch",
                                  "not-array", "out-dtype"])
@pytest.mark.parametrize("after_a_run", [False, True])
def test_invalid_inputs(case, after_a_run):
    """Also after a run of the right shape and type (whose checks the session remembers)."""
    sess = graphrt.Session(models.mlp())
    x = np.ones((2, 16), np.float32)
    if after_a_run:
        sess.run(None, {"x": x})
    call = {
        "unknown": lambda: sess.run(None, {"x": x, "z": x}),
        "missing": lambda: sess.run(None, {}),
        "dtype": lambda: sess.run(None, {"x": x.astype(np.float64)}),
        "rank": lambda: sess.run(None, {"x": x[None]}),
        "extent": lambda: sess.run(None, {"x": np.ones((2, 15), np.float32)}),
        "short": lambda: sess.run_into(x, np.empty(7, np.float32)),
        "shape-mismatch": lambda: sess.run(None, {"x": x}, out={"y": np.empty((2, 5), np.float32)}),
        "not-array": lambda: sess.run(None, {"x": [[1.0] * 16]}),
        "out-dtype": lambda: sess.run(None, {"x": x}, out={"y": np.empty((2, 4), np.float64)}),
    }[case]
    e = err(call)
    assert e.kind is ErrorKind.INVALID_INPUT, e
    assert ("'x'" in str(e)) or ("'y'" in str(e)) or case == "missing"


def test_bad_input_is_rejected_before_any_kernel_runs():
    sess = graphrt.Session(models.mlp())
    out = np.full((2, 4), 7, np.float32)
    err(sess.run, None, {"x": np.ones((2, 16), np.float32)}, out={"y": out[:, :3]})
    assert np.all(out == 7)
    (_, entry), = sess._plans._entries
    assert entry.pool.idle == 0     # the plan was made, but no run state was ever used


def test_run_time_value_error_names_the_node():
    n = helper.make_node
    model = make([n("Reshape", ["x", "s"], ["y"], name="reshaper")],
                 [tensor("x", F, [6]), tensor("s", TensorProto.INT64, [2])], [tensor("y", F, None)])
    sess = graphrt.Session(model)
    good = sess.run(None, {"x": np.arange(6, dtype=np.float32), "s": np.array([2, 3])})[0]
    assert good.shape == (2, 3)
    e = err(sess.run, None, {"x": np.arange(6, dtype=np.float32), "s": np.array([4, 4])})
    assert e.kind is ErrorKind.INVALID_INPUT and e.node == "reshaper" and "reshaper" in str(e)


def test_slab_over_two_gib_is_refused():
    n = helper.make_node
    model = make([n("Add", ["x", "x"], ["a"], name="a"), n("Mul", ["a", "x"], ["y"], name="m")],
                 [tensor("x", F, ["n"])], [tensor("y", F, ["n"])])
    sess = graphrt.Session(model)
    huge = np.broadcast_to(np.float32(1), (300_000_000,))     # no memory behind it
    e = err(sess.run, None, {"x": huge})
    assert e.kind is ErrorKind.UNSUPPORTED and "2 GiB" in str(e)


def test_disposed():
    sess = graphrt.Session(models.mlp())
    sess.close()
    e = err(sess.run, None, {"x": np.ones((1, 16), np.float32)})
    assert e.kind is ErrorKind.DISPOSED
    with graphrt.Session(models.mlp()) as s2:
        pass
    assert err(s2.run, None, {"x": np.ones((1, 16), np.float32)}).kind is ErrorKind.DISPOSED


def test_cancelled_at_import_and_in_run_leaves_session_usable():
    token = graphrt.CancelToken()
    token.cancel()
    assert err(graphrt.Session, models.mlp(), None, token).kind is ErrorKind.CANCELLED
    sess = graphrt.Session(models.mlp())
    x = np.ones((1, 16), np.float32)
    e = err(sess.run, None, {"x": x}, cancel=token)
    assert e.kind is ErrorKind.CANCELLED and e.node
    assert sess.run(None, {"x": x})[0].shape == (1, 4)


def test_weight_storage_not_implemented_is_unsupported():
    e = err(graphrt.Session, models.mlp(), graphrt.SessionOptions(weight_storage="binary16"))
    assert e.kind is ErrorKind.UNSUPPORTED


def test_contradicting_value_info_is_ignored_with_a_debug_record(caplog):
    """value_info and output shapes that the real shapes contradict (a stale rank, a fixed
    extent that is dynamic, another element type) do not stop the model."""
    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])]
    model = make(nodes, [helper.make_tensor_value_info("x", F, ["n", 3])],
                 [helper.make_tensor_value_info("y", F, [7, 7, 7])])
    model.graph.value_info.append(helper.make_tensor_value_info("h", TensorProto.INT64, [1]))
    sess = graphrt.Session(model.SerializeToString())
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    with caplog.at_level("DEBUG", logger="graphrt.plan"):
        (y,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, -np.maximum(x, 0))
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "'h'" in said and "'y'" in said and "declaration ignored" in said


def test_protobuf_nesting_deeper_than_the_parser_allows_is_an_invalid_model():
    """If bodies nested 120 deep: protobuf's parser refuses the bytes (its recursion limit);
    graphrt reports an InvalidModel, never the raw DecodeError."""
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "leaf", [],
                             [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(helper.make_graph(
        [], "main", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                     helper.make_tensor_value_info("x", F, [1])],
        [helper.make_tensor_value_info("y", F, None)]), opset_imports=[helper.make_opsetid("", 17)])
    graph = model.graph
    for depth in range(120):        # built in place: copying a deep message parses it again
        node = graph.node.add(op_type="If", input=["c"], output=["y"])
        node.attribute.add(name="else_branch", type=onnx.AttributeProto.GRAPH).g.CopyFrom(leaf)
        graph = node.attribute.add(name="then_branch", type=onnx.AttributeProto.GRAPH).g
        graph.name = f"g{depth}"
        graph.output.add(name="y")
    graph.node.add(op_type="Identity", input=["x"], output=["y"])
    raw = model.SerializeToString()
    with pytest.raises(SessionError) as info:
        graphrt.Session(raw)
    assert info.value.kind == ErrorKind.INVALID_MODEL
    assert "not a readable ONNX model" in str(info.value)


def test_names_that_are_not_utf8_text_are_an_invalid_model():
    """Found by the zoo fuzzer: a flipped byte in a node's domain made protobuf hand over
    bytes where text belongs."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu_node")]
    raw = make(nodes, [helper.make_tensor_value_info("x", F, [2])],
               [helper.make_tensor_value_info("y", F, [2])]).SerializeToString()
    for good, broken in ((b"relu_node", b"relu_nod\xe0"), (b"Relu", b"Rel\xff")):
        with pytest.raises(SessionError) as info:
            graphrt.Session(raw.replace(good, broken))
        assert info.value.kind == ErrorKind.INVALID_MODEL
        assert "not UTF-8 text" in str(info.value)


def test_absurd_output_extents_are_refused_before_any_per_position_work():
    """Found by the zoo fuzzer: MaxPool pads of 2**62 made an output extent of 2**62, and the
    pool's window table was built position by position (a hang). Any kernel's output over
    2 GiB is refused when its shape is stated, before the kernel goes on."""
    model = make([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2],
                                   pads=[1 << 31, 1 << 31, 1 << 62, 1 << 31])],
                 [tensor("x", F, [1, 1, 4, 4])], [tensor("y", F, None)])
    e = err(graphrt.Session(model).run, None, {"x": np.zeros((1, 1, 4, 4), np.float32)})
    assert e.kind is ErrorKind.UNSUPPORTED and "MaxPool" in str(e)
    model = make([helper.make_node("Expand", ["x", "s"], ["y"])], [tensor("x", F, [1])],
                 [tensor("y", F, None)], [helper.make_tensor("s", TensorProto.INT64, [2],
                                                             [1 << 20, 1 << 20])])
    e = err(graphrt.Session(model).run, None, {"x": np.ones(1, np.float32)})
    assert e.kind is ErrorKind.UNSUPPORTED and "2 GiB" in str(e) and "Expand" in str(e)


def test_huge_strides_with_one_output_position_run_and_huge_planes_are_refused():
    """Found by the zoo fuzzer: a Conv stride of 2**31 laid out 2**62 stride phases (a hang).
    One output position does not depend on the stride; reaching over more than 2**31 input
    positions is refused."""
    w = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)

    def conv(**attrs):
        return make([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], **attrs)],
                    [tensor("x", F, [1, 1, 4, 4])], [tensor("y", F, None)],
                    [helper.make_tensor("w", F, [1, 1, 3, 3], w.ravel())])
    (huge,) = graphrt.Session(conv(strides=[1 << 31, 1 << 31])).run(None, {"x": x})
    (one,) = graphrt.Session(conv(strides=[1, 1])).run(None, {"x": x})
    np.testing.assert_array_equal(huge, one[:, :, :1, :1])
    e = err(graphrt.Session(conv(strides=[1 << 40, 1 << 40], pads=[1 << 41] * 4)).run, None,
            {"x": x})
    assert e.kind is ErrorKind.UNSUPPORTED and "Conv" in str(e)


def test_a_body_output_without_a_name_is_an_invalid_model():
    """Found by the zoo fuzzer: a body output named "" was taken for a value the body reads
    from the enclosing graph (a KeyError)."""
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "b", [],
                             [helper.make_tensor_value_info("", F, None)])
    model = make([helper.make_node("If", ["c"], ["z"], then_branch=body, else_branch=body)],
                 [tensor("c", TensorProto.BOOL, []), tensor("x", F, [1])], [tensor("z", F, None)])
    with pytest.raises(SessionError) as info:
        graphrt.Session(model)
    assert info.value.kind == ErrorKind.INVALID_MODEL
