"""If, Loop, Scan, SequenceMap, sequences and optionals (contract section 8), checked against
onnx's reference evaluator."""
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import graphrt
from graphrt import ErrorKind, SessionError

from ...models import F, const, make, tensor

I64, B = TensorProto.INT64, TensorProto.BOOL
n = helper.make_node


def graph(nodes, inputs, outputs, name="body", inits=()):
    return helper.make_graph(nodes, name, inputs, outputs, list(inits))


def same_as_reference(model, feeds):
    got = graphrt.Session(model).run(None, feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, list):
            assert len(g) == len(w) and all(np.array_equal(a, b) for a, b in zip(g, w))
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6)
    return got


def if_model():
    """y = cond ? (x + w) * k : x - w, where both branches read outer values x, w, k."""
    then = graph([n("Add", ["x", "w"], ["t0"]), n("Mul", ["t0", "k"], ["t"])], [], [tensor("t", F, [3])])
    other = graph([n("Sub", ["x", "w"], ["e"])], [], [tensor("e", F, [3])])
    return make([n("Relu", ["x0"], ["x"]),
                 n("If", ["c"], ["y"], then_branch=then, else_branch=other, name="choose")],
                [tensor("x0", F, [3]), tensor("c", B, [])], [tensor("y", F, [3])],
                [const("w", np.array([1, 2, 3], np.float32)), const("k", np.array(2, np.float32))])


@pytest.mark.parametrize("cond", [True, False])
def test_if_reads_outer_values(cond):
    x = np.array([-1, 0.5, 2], np.float32)
    same_as_reference(if_model(), {"x0": x, "c": np.array(cond)})


def test_captured_values_stay_alive_in_checked_mode(monkeypatch):
    monkeypatch.setenv("GRAPHRT_CHECKED", "1")      # dead blocks are poisoned at once
    sess = graphrt.Session(if_model())
    cap = sess._graph.nodes[-1]
    assert cap.info.n_inputs == 1 and len(cap.inputs) == 4       # cond, then x, w, k captured
    x = np.array([-1, 0.5, 2], np.float32)
    assert np.array_equal(sess.run(None, {"x0": x, "c": np.array(True)})[0],
                          (np.maximum(x, 0) + [1, 2, 3]) * 2)


def loop_model():
    """Sums x into acc while i < M and acc < limit; scan output: acc after each step. The
    body's If reads `limit` two scopes up."""
    inner_then = graph([n("Identity", ["limit"], ["l"])], [], [tensor("l", F, [])], "t")
    inner_else = graph([n("Identity", ["zero"], ["z"])], [], [tensor("z", F, [])], "e")
    body = graph([n("Add", ["acc", "x"], ["acc_new"]),
                  n("If", ["cond_in"], ["lim"], then_branch=inner_then, else_branch=inner_else),
                  n("Sub", ["lim", "acc_new"], ["room"]),
                  n("Relu", ["room"], ["room_pos"]),
                  n("Cast", ["room_pos"], ["cond_out"], to=B),
                  n("Identity", ["acc_new"], ["scan"])],
                 [tensor("i", I64, []), tensor("cond_in", B, []), tensor("acc", F, [])],
                 [tensor("cond_out", B, []), tensor("acc_new", F, []), tensor("scan", F, [])])
    return make([n("Loop", ["M", "", "a0"], ["acc", "steps"], body=body, name="loop")],
                [tensor("M", I64, []), tensor("a0", F, []), tensor("x", F, [])],
                [tensor("acc", F, []), tensor("steps", F, ["n"])],
                [const("limit", np.array(10, np.float32)), const("zero", np.array(0, np.float32))])


@pytest.mark.parametrize("m,x", [(100, 3.0), (2, 3.0), (0, 1.0)])
def test_loop_trip_count_condition_and_scan_outputs(m, x):
    acc, steps = graphrt.Session(loop_model()).run(None, {"M": np.array(m, np.int64), "a0": np.array(0, np.float32),
                                                            "x": np.array(x, np.float32)})
    # onnx's reference evaluator stacks scalar scan outputs as [n, 1]: compare with a plain loop
    want, seen, cond, i = np.float32(0), [], True, 0
    while i < m and cond:
        want = np.float32(want + np.float32(x))
        seen.append(want)
        cond = bool(max(np.float32(10) - want, 0))
        i += 1
    assert acc == want and acc.shape == ()
    assert steps.dtype == np.float32 and np.array_equal(steps, np.array(seen, np.float32).reshape(len(seen)))


def test_loop_is_cancelled_between_iterations():
    body = graph([n("Add", ["acc", "one"], ["acc2"]), n("Identity", ["cond_in"], ["c"])],
                 [tensor("i", I64, []), tensor("cond_in", B, []), tensor("acc", F, [])],
                 [tensor("c", B, []), tensor("acc2", F, [])])
    model = make([n("Loop", ["", "", "a0"], ["acc"], body=body, name="forever")],
                 [tensor("a0", F, [])], [tensor("acc", F, [])], [const("one", np.array(1, np.float32))])
    sess = graphrt.Session(model)
    token = graphrt.CancelToken()
    threading.Timer(0.3, token.cancel).start()
    with pytest.raises(SessionError) as e:
        sess.run(None, {"a0": np.array(0, np.float32)}, cancel=token)
    assert e.value.kind is ErrorKind.CANCELLED and e.value.node in ("forever", "Add_0", "Identity_1")


def scan_body():
    return graph([n("Add", ["s", "xt"], ["s2"]), n("Mul", ["s2", "xt"], ["y"])],
                 [tensor("s", F, [2]), tensor("xt", F, [2])], [tensor("s2", F, [2]), tensor("y", F, [2])])


def test_scan_axes_and_directions():
    model = make([n("Scan", ["s0", "x"], ["s", "ys"], body=scan_body(), num_scan_inputs=1,
                    scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[-1],
                    scan_output_directions=[1])],
                 [tensor("s0", F, [2]), tensor("x", F, [2, 4])], [tensor("s", F, [2]), tensor("ys", F, [2, 4])])
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    s, ys = graphrt.Session(model).run(None, {"s0": np.ones(2, np.float32), "x": x})
    # onnx's reference evaluator has no reversed Scan: a plain loop is the oracle
    acc, outs = np.ones(2, np.float32), []
    for t in range(3, -1, -1):             # input read backwards along axis 1
        acc = acc + x[:, t]
        outs.append(acc * x[:, t])
    assert np.array_equal(s, acc)
    assert np.array_equal(ys, np.stack(outs[::-1], axis=-1))     # output written backwards, axis -1


def test_scan_opset8_batch_and_sequence_lengths():
    model = make([n("Scan", ["lens", "s0", "x"], ["s", "ys"], body=scan_body(), num_scan_inputs=1)],
                 [tensor("lens", I64, [2]), tensor("s0", F, [2, 2]), tensor("x", F, [2, 3, 2])],
                 [tensor("s", F, [2, 2]), tensor("ys", F, [2, 3, 2])], opset=8)
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    s, ys = graphrt.Session(model).run(None, {"lens": np.array([3, 2]), "s0": np.zeros((2, 2), np.float32),
                                              "x": x})
    acc = np.zeros(2, np.float32)
    for t in range(2):                     # batch 1 runs two steps only
        acc = acc + x[1, t]
        assert np.array_equal(ys[1, t], acc * x[1, t])
    assert np.array_equal(s[1], acc) and np.all(ys[1, 2] == 0)


def test_sequences_in_and_out():
    seq_in = helper.make_tensor_sequence_value_info("xs", F, None)
    model = make([n("SequenceInsert", ["xs", "t"], ["s1"]),
                  n("SequenceLength", ["s1"], ["len"]),
                  n("SequenceAt", ["s1", "minus1"], ["last"]),
                  n("SequenceErase", ["s1", "zero"], ["s2"]),
                  n("ConcatFromSequence", ["s2"], ["cat"], axis=0)],
                 [seq_in, tensor("t", F, [2])],
                 [tensor("len", I64, []), tensor("last", F, [2]), helper.make_tensor_sequence_value_info("s2", F, None),
                  tensor("cat", F, ["n"])],
                 [const("minus1", np.array(-1, np.int64)), const("zero", np.array(0, np.int64))])
    sess = graphrt.Session(model)
    assert sess.inputs[0].kind == "sequence" and sess.outputs[2].kind == "sequence"
    xs = [np.array([1, 2], np.float32), np.array([3, 4], np.float32)]
    t = np.array([5, 6], np.float32)
    length, last, s2, cat = same_as_reference(model, {"xs": xs, "t": t})
    assert length == 3 and np.array_equal(last, t) and len(s2) == 2
    count = make([n("SequenceLength", ["xs"], ["len"])], [seq_in], [tensor("len", I64, [])])
    assert graphrt.Session(count).run(None, {"xs": []})[0] == 0


def test_sequence_map_and_split_to_sequence():
    body = graph([n("Mul", ["e", "e"], ["sq"])], [tensor("e", F, None)], [tensor("sq", F, None)])
    model = make([n("SplitToSequence", ["x"], ["parts"], axis=0, keepdims=0),
                  n("SequenceMap", ["parts"], ["squares"], body=body)],
                 [tensor("x", F, [3, 2])], [helper.make_tensor_sequence_value_info("squares", F, None)])
    (sq,) = same_as_reference(model, {"x": np.arange(6, dtype=np.float32).reshape(3, 2)})
    assert [s.shape for s in sq] == [(2,)] * 3


def test_optionals():
    opt = helper.make_tensor_type_proto(F, [2])
    model = make([n("OptionalHasElement", ["o"], ["has"])],
                 [helper.make_value_info("o", helper.make_optional_type_proto(opt))], [tensor("has", B, [])])
    sess = graphrt.Session(model)
    assert sess.inputs[0].kind == "optional"
    assert sess.run(None, {"o": None})[0] == np.array(False)
    assert sess.run(None, {"o": np.ones(2, np.float32)})[0] == np.array(True)
    model2 = make([n("Optional", ["x"], ["o"]), n("OptionalGetElement", ["o"], ["y"])],
                  [tensor("x", F, [2])], [tensor("y", F, [2])])
    assert np.array_equal(graphrt.load(model2)(np.array([1, 2], np.float32)), [1, 2])


def test_body_with_missing_operator_fails_the_model():
    then = graph([n("NoSuchOp", ["x"], ["t"], name="bad")], [], [tensor("t", F, [3])])
    other = graph([n("Identity", ["x"], ["e"])], [], [tensor("e", F, [3])])
    model = make([n("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                 [tensor("x", F, [3]), tensor("c", B, [])], [tensor("y", F, [3])])
    with pytest.raises(SessionError) as e:
        graphrt.Session(model)
    assert e.value.kind is ErrorKind.UNSUPPORTED_OPERATOR and e.value.operators == ("NoSuchOp (opset 17)",)


def test_body_without_exact_kernel_fails_exact_mode():
    then = graph([n("RandomUniformLike", ["x"], ["t"])], [], [tensor("t", F, [3])])
    other = graph([n("Identity", ["x"], ["e"])], [], [tensor("e", F, [3])])
    model = make([n("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                 [tensor("x", F, [3]), tensor("c", B, [])], [tensor("y", F, [3])])
    with pytest.raises(SessionError) as e:
        graphrt.Session(model, graphrt.SessionOptions(mode="exact"))
    assert e.value.kind is ErrorKind.EXACT_MODE_UNAVAILABLE
    assert "RandomUniformLike" in e.value.operators


def test_wrong_sequence_input_is_invalid_input():
    model = make([n("SequenceLength", ["xs"], ["len"])],
                 [helper.make_tensor_sequence_value_info("xs", F, None)], [tensor("len", I64, [])])
    with pytest.raises(SessionError) as e:
        graphrt.Session(model).run(None, {"xs": np.ones(3, np.float32)})
    assert e.value.kind is ErrorKind.INVALID_INPUT


def test_exact_mode_through_a_body_is_bit_identical_at_1_and_2_threads():
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
    body = graph([n("MatMul", ["h", "w"], ["m"]), n("Relu", ["m"], ["r"]), n("Add", ["r", "h"], ["h2"]),
                  n("Identity", ["cond_in"], ["c"])],
                 [tensor("i", I64, []), tensor("cond_in", B, []), tensor("h", F, [64, 256])],
                 [tensor("c", B, []), tensor("h2", F, [64, 256])])
    model = make([n("Loop", ["M", "", "h0"], ["h"], body=body)],
                 [tensor("M", I64, []), tensor("h0", F, [64, 256])], [tensor("h", F, [64, 256])],
                 [const("w", w)])
    feeds = {"M": np.array(4, np.int64), "h0": rng.standard_normal((64, 256)).astype(np.float32)}
    one = graphrt.Session(model, graphrt.SessionOptions(mode="exact", intra_op_threads=1)).run(None, feeds)[0]
    two = graphrt.Session(model, graphrt.SessionOptions(mode="exact", intra_op_threads=2)).run(None, feeds)[0]
    assert np.array_equal(one.view(np.uint32), two.view(np.uint32))
    h = feeds["h0"]
    for _ in range(4):
        acc = np.zeros((64, 256), np.float32)
        for k in range(256):               # the exact MatMul's order: k ascending, no FMA
            acc = acc + h[:, k:k + 1] * w[k:k + 1, :]
        h = np.where(acc <= 0, np.float32(0), acc) + h
    assert np.array_equal(one.view(np.uint32), h.view(np.uint32))


@pytest.mark.parametrize("sign,trips", [(1, 3), (-1, 2), (1, 0), (-1, 0)])
def test_model_exported_by_pytorch_with_if_and_loop(sign, trips):
    """tests/data/torch_control_flow.onnx comes from examples/export_control_flow.py."""
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "data", "torch_control_flow.onnx")
    x = sign * np.abs(np.random.default_rng(trips).standard_normal((5, 4))).astype(np.float32)
    feeds = {"x": x, "n": np.array(trips, np.int64)}
    got = graphrt.Session(path).run(None, feeds)[0]
    want = ReferenceEvaluator(path).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    if trips == 0:                         # no iteration: the branch's value comes through
        assert np.array_equal(got, x * 2 if sign > 0 else x - 1)


def test_loop_with_no_iteration_hands_back_a_copy_of_its_input(monkeypatch):
    """With zero iterations Loop returns its carried input: the planner may reuse that
    input's slab block right after, so the output must not alias it (checked mode poisons
    the block as soon as it dies)."""
    monkeypatch.setenv("GRAPHRT_CHECKED", "1")
    body = graph([n("Identity", ["cond_in"], ["c"]), n("Add", ["h", "h"], ["h2"])],
                 [tensor("i", I64, []), tensor("cond_in", B, []), tensor("h", F, [4])],
                 [tensor("c", B, []), tensor("h2", F, [4])])
    model = make([n("Relu", ["x"], ["r"]), n("Loop", ["M", "", "r"], ["h"], body=body),
                  n("Add", ["x", "x"], ["other"]), n("Add", ["h", "other"], ["y"])],
                 [tensor("M", I64, []), tensor("x", F, [4])], [tensor("y", F, [4])])
    x = np.array([1, -2, 3, -4], np.float32)
    y = graphrt.Session(model).run(None, {"M": np.array(0, np.int64), "x": x})[0]
    assert np.array_equal(y, np.maximum(x, 0) + 2 * x)


def test_loop_whose_carried_value_grows_changes_plans_between_iterations():
    """Each iteration appends to the carried value: the held plan and run state are given
    back and another taken whenever the shapes change, and the iterations stay in order."""
    body = graph([n("Concat", ["acc", "row"], ["acc2"], axis=0),
                  n("Identity", ["cond_in"], ["c"]),
                  n("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
                  n("Add", ["row", "fi"], ["row2"])],
                 [tensor("i", I64, []), tensor("cond_in", B, []), tensor("acc", F, None),
                  tensor("row", F, [1, 2])],
                 [tensor("c", B, []), tensor("acc2", F, None), tensor("row2", F, [1, 2])])
    model = make([n("Loop", ["M", "", "a0", "r0"], ["acc", "row"], body=body)],
                 [tensor("M", I64, []), tensor("a0", F, [0, 2]), tensor("r0", F, [1, 2])],
                 [tensor("acc", F, None), tensor("row", F, None)])
    feeds = {"M": np.array(5, np.int64), "a0": np.zeros((0, 2), np.float32),
             "r0": np.array([[1, 2]], np.float32)}
    want = np.array([[1, 2], [1, 2], [2, 3], [4, 5], [7, 8]], np.float32)   # row += i
    sess = graphrt.Session(model)
    for _ in range(2):          # the second run reuses the body's plans
        acc, row = sess.run(None, feeds)
        np.testing.assert_array_equal(acc, want)
        np.testing.assert_array_equal(row, [[11, 12]])


def test_a_captured_constant_is_the_bodys_own_and_gives_the_same_bits():
    """A body reading an outer initializer holds it as a constant (nothing copied in per
    call, its plans fold what depends on it); fed as a graph input instead, the same bits."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    body = graph([n("MatMul", ["h", "W"], ["m"]), n("Tanh", ["m"], ["h2"]),
                  n("Identity", ["cond_in"], ["c"])],
                 [tensor("i", I64, []), tensor("cond_in", B, []), tensor("h", F, [1, 8])],
                 [tensor("c", B, []), tensor("h2", F, [1, 8])])
    loop = n("Loop", ["M", "", "h0"], ["h"], body=body)
    x = {"M": np.array(6, np.int64), "h0": rng.standard_normal((1, 8)).astype(np.float32)}
    held = make([loop], [tensor("M", I64, []), tensor("h0", F, [1, 8])], [tensor("h", F, None)],
                [const("W", w)])
    fed = make([loop], [tensor("M", I64, []), tensor("h0", F, [1, 8]), tensor("W", F, [8, 8])],
               [tensor("h", F, None)])
    for mode in ("fast", "exact"):
        opts = graphrt.SessionOptions(mode=mode, optimization_level="none")
        a = graphrt.Session(held, opts)
        b = graphrt.Session(fed, opts)
        body_graph = a._graph.nodes[0].kernel.body.graph
        assert body_graph.dropped and not b._graph.nodes[0].kernel.body.graph.dropped
        assert a.run(None, x)[0].tobytes() == b.run(None, dict(x, W=w))[0].tobytes()


def _two_carried_loop(outs_nodes, outs):
    body = graph(outs_nodes + [n("Identity", ["cond_in"], ["c"])],
                 [tensor("i", I64, []), tensor("cond_in", B, []), tensor("ai", F, [4]),
                  tensor("bi", F, [4])],
                 [tensor("c", B, [])] + [tensor(o, F, [4]) for o in outs])
    return make([n("Loop", ["M", "", "a0", "b0"], ["a", "b"], body=body)],
                [tensor("M", I64, []), tensor("a0", F, [4]), tensor("b0", F, [4])],
                [tensor("a", F, [4]), tensor("b", F, [4])])


def trading_loop(kind: str):
    """Two carried values that trade places each iteration ("swap"), or whose second is
    their sum ("fibonacci")."""
    second = n("Identity", ["ai"], ["b2"]) if kind == "swap" else n("Add", ["ai", "bi"], ["b2"])
    return _two_carried_loop([n("Identity", ["bi"], ["a2"]), second], ["a2", "b2"])


@pytest.mark.parametrize("trips", [1, 2, 5])
@pytest.mark.parametrize("kind", ["swap", "fibonacci"])
def test_loop_carried_values_that_trade_places(kind, trips):
    """An iteration's outputs may be views of (or lie in the blocks of) other carried inputs:
    writing the next iteration's inputs must not overwrite an output still to be read."""
    model = trading_loop(kind)
    a, b = np.arange(4, dtype=np.float32), np.arange(10, 14, dtype=np.float32)
    feeds = {"M": np.array(trips, np.int64), "a0": a, "b0": b}
    for _ in range(trips):      # (onnx's reference evaluator hands back a0 and b0 here)
        a, b = b, (a if kind == "swap" else a + b)
    sess = graphrt.Session(model)
    for _ in range(2):
        got = sess.run(None, feeds)
        np.testing.assert_array_equal(got[0], a)
        np.testing.assert_array_equal(got[1], b)


def test_loop_keeps_captured_values_that_a_step_could_overwrite():
    """Neg is the last reader of the captured `x` and may run in place: the body's plan
    keeps captured values alive, since later iterations read them again."""
    body = graph([n("Neg", ["x"], ["nx"]), n("Add", ["acc", "nx"], ["acc2"]),
                  n("Identity", ["cond_in"], ["c"])],
                 [tensor("i", I64, []), tensor("cond_in", B, []), tensor("acc", F, [3])],
                 [tensor("c", B, []), tensor("acc2", F, [3])])
    model = make([n("Relu", ["x0"], ["x"]), n("Loop", ["M", "", "a0"], ["acc"], body=body)],
                 [tensor("M", I64, []), tensor("a0", F, [3]), tensor("x0", F, [3])],
                 [tensor("acc", F, [3])])
    x = np.array([1, 2, 3], np.float32)
    acc, = graphrt.Session(model).run(None, {"M": np.array(4, np.int64),
                                             "a0": np.zeros(3, np.float32), "x0": x})
    np.testing.assert_array_equal(acc, -4 * x)


def _if_of(then_nodes, else_nodes, out_dims):
    then = graph(then_nodes, [], [tensor("t", F, None)], "t")
    other = graph(else_nodes, [], [tensor("e", F, None)], "e")
    return make([n("Relu", ["x0"], ["x"]),
                 n("If", ["c"], ["y"], then_branch=then, else_branch=other, name="choose")],
                [tensor("x0", F, [3]), tensor("c", B, [])], [tensor("y", F, out_dims)],
                [const("w", np.ones((5, 2), np.float32))])


@pytest.mark.parametrize("cond", [True, False])
def test_if_whose_branches_differ_in_shape_runs_the_taken_one(cond):
    model = _if_of([n("Identity", ["x"], ["t"])], [n("Concat", ["x", "x"], ["e"], axis=0)], None)
    same_as_reference(model, {"x0": np.array([-1, 0.5, 2], np.float32), "c": np.array(cond)})


def test_if_whose_untaken_branch_cannot_run_on_these_shapes():
    """The else branch multiplies [3] by [5, 2]: the plan is made all the same (the branch
    is planned when taken), and taking it is a SessionError naming the node."""
    model = _if_of([n("Neg", ["x"], ["t"])], [n("MatMul", ["x", "w"], ["e"])], [3])
    sess = graphrt.Session(model)
    x = np.array([-1, 0.5, 2], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x0": x, "c": np.array(True)})[0],
                                  -np.maximum(x, 0))
    with pytest.raises(SessionError):
        sess.run(None, {"x0": x, "c": np.array(False)})


def test_if_with_branches_of_one_shape_is_a_static_step():
    """Both branches give float32 [3] here: the If's output has a place in the slab and the
    step is not dynamic; the outputs are still the taken branch's."""
    sess = graphrt.Session(if_model())
    x = np.array([-1, 0.5, 2], np.float32)
    for cond in (True, False, True):
        same = sess.run(None, {"x0": x, "c": np.array(cond)})[0]
        want = ReferenceEvaluator(if_model()).run(None, {"x0": x, "c": np.array(cond)})[0]
        np.testing.assert_array_equal(same, want)
    plan = sess._plans._entries[0][1].plan
    step = next(st for st in plan.steps if st.node.info.op_type == "If")
    assert not step.dynamic


def test_a_static_ifs_branch_sees_the_runs_cancel_token():
    """The then-branch holds a Python step that cancels the token its run was given (as
    another thread would, mid-run): the branch's next step does not run, and the error
    names it; the session runs on without a token."""
    from ...test_program import OPS
    then = graph([n("Cancels", ["x"], ["t0"], domain="com.example"),
                  n("Neg", ["t0"], ["t"], name="after")], [], [tensor("t", F, [3])])
    other = graph([n("Sub", ["x", "w"], ["e"])], [], [tensor("e", F, [3])])
    model = make([n("Relu", ["x0"], ["x"]),
                  n("If", ["c"], ["y"], then_branch=then, else_branch=other, name="choose")],
                 [tensor("x0", F, [3]), tensor("c", B, [])], [tensor("y", F, [3])],
                 [const("w", np.array([1, 2, 3], np.float32))])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    sess = graphrt.Session(model, operators=OPS)
    feeds = {"x0": np.array([-1, 0.5, 2], np.float32), "c": np.array(True)}
    want = sess.run(None, feeds)[0]
    for _ in range(2):
        with pytest.raises(SessionError) as e:
            sess.run(None, feeds, cancel=graphrt.CancelToken())
        assert e.value.kind is ErrorKind.CANCELLED and e.value.node == "after"
        np.testing.assert_array_equal(sess.run(None, feeds)[0], want)
