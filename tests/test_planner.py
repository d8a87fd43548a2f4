"""The slab planner: a property test over random step lists, the checked mode catching a
planted stale read, and a dynamic view keeping its source's block alive."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import graphrt
from graphrt import SessionOptions
from graphrt.plan.memory import plan_slab

from .helpers import uniform
from .models import F, make, tensor


@st.composite
def programs(draw):
    """Random step lists: each step reads earlier values and makes one new value, a view
    of an earlier value, or an in-place candidate over its first read."""
    n_steps = draw(st.integers(1, 30))
    made, reads, nbytes, dtypes, views, in_place = [[0]], [[]], {0: draw(st.integers(0, 5000))}, {0: "f"}, {}, {}
    next_id = 1
    for s in range(1, n_steps + 1):
        existing = [v for vs in made for v in vs]
        r = draw(st.lists(st.sampled_from(existing), min_size=1, max_size=3))
        v = next_id
        next_id += 1
        kind = draw(st.sampled_from(["new", "view", "inplace"]))
        if kind == "view":
            views[v] = r[0]
            nbytes[v] = nbytes[r[0]]
            dtypes[v] = dtypes[r[0]]
        else:
            nbytes[v] = draw(st.integers(0, 5000))
            dtypes[v] = draw(st.sampled_from(["f", "i"]))
            if kind == "inplace":
                in_place[s] = (v, r[0])
        made.append([v])
        reads.append(r)
    keep = set(draw(st.lists(st.sampled_from(sorted(nbytes)), max_size=3)))
    return len(made), made, reads, nbytes, dtypes, views, in_place, keep


@settings(max_examples=300, deadline=None)
@given(programs())
def test_no_two_live_values_overlap(prog):
    n_steps, made, reads, nbytes, dtypes, views, in_place, keep = prog
    layout = plan_slab(n_steps, made, reads, nbytes, dtypes, views, in_place, keep)

    def root(v):
        while v in views:
            v = views[v]
        return v
    # liveness computed here, independently of the planner
    start, end = {}, {}
    for s in range(n_steps):
        for v in made[s]:
            start[v] = s
            end[v] = s
    for s in range(n_steps):
        for v in reads[s]:
            end[v] = max(end[v], s)
    for v in keep:
        end[v] = n_steps
    blocks = {}
    for v in start:
        r = root(v)
        lo, hi = blocks.get(r, (start[r], start[r]))
        blocks[r] = (lo, max(hi, end[v]))
    for v in start:
        assert layout.offsets[v] + nbytes[v] <= layout.size
        assert layout.offsets[v] % 64 == 0
        if v in views:
            assert layout.offsets[v] == layout.offsets[root(v)]
    took = layout.in_place          # out -> input whose block it took over
    for out, src in took.items():
        s = start[out]
        assert in_place[s] == (out, src) and blocks[src][1] == s and dtypes[out] == dtypes[src]
        assert not any(root(w) == src for w in start if w != src)       # alone in its block
    roots = sorted(blocks)
    for i, a in enumerate(roots):
        for b in roots[i + 1:]:
            if nbytes[a] == 0 or nbytes[b] == 0:
                continue
            (la, ha), (lb, hb) = blocks[a], blocks[b]
            alive_together = la <= hb and lb <= ha
            oa, ob = layout.offsets[a], layout.offsets[b]
            overlap = oa < ob + nbytes[b] and ob < oa + nbytes[a]
            if alive_together and overlap:
                assert took.get(b) == a or took.get(a) == b, (a, b, blocks[a], blocks[b])


def test_blocks_are_reused():
    # a chain: each value dies when the next is made, so two blocks serve ten values
    n = 10
    made = [[i] for i in range(n)]
    reads = [[]] + [[i - 1] for i in range(1, n)]
    layout = plan_slab(n, made, reads, {i: 1000 for i in range(n)}, {i: "f" for i in range(n)},
                       {}, {}, {n - 1})
    assert layout.size == 2 * 1024


def test_checked_mode_catches_a_stale_read(monkeypatch):
    nd = helper.make_node
    model = make([nd("Add", ["x", "x"], ["a"], name="a"), nd("Mul", ["a", "a"], ["b"], name="b"),
                  nd("Mul", ["b", "x"], ["c"], name="c"), nd("Add", ["c", "a"], ["y"], name="y")],
                 [tensor("x", F, [64])], [tensor("y", F, [64])])
    x = np.arange(64, dtype=np.float32)
    a = x + x
    expected = (a * a) * x + a
    monkeypatch.setenv("GRAPHRT_CHECKED", "1")
    sound = graphrt.Session(model)
    assert np.array_equal(sound.run(None, {"x": x})[0], expected)        # poisoning is harmless
    planted = graphrt.Session(model)
    planted._plans.early_free = "a"      # the planner frees a's block while y still reads it
    got = planted.run(None, {"x": x})[0]
    assert not np.array_equal(got, expected)
    assert np.isnan(got).all()           # the stale read saw the poison


def test_dynamic_view_keeps_its_source_alive():
    # k2 = Unsqueeze(k, axes) with axes a graph input is a dynamic view of k's slab block;
    # k's block must not be reused (here by a) while k2 is still read.
    n = helper.make_node
    nodes = [n("Neg", ["x"], ["k"]), n("Unsqueeze", ["k", "axes"], ["k2"]),
             n("Add", ["x", "x"], ["a"]), n("Mul", ["a", "k2"], ["y"])]
    model = make(nodes, [tensor("x", TensorProto.FLOAT, [64]),
                         tensor("axes", TensorProto.INT64, [1])],
                 [tensor("y", TensorProto.FLOAT, None)], opset=17)
    x = uniform((64,))
    got = graphrt.Session(model, SessionOptions(optimization_level="none")).run(
        None, {"x": x, "axes": np.array([0], np.int64)})[0]
    np.testing.assert_allclose(got, ((x + x) * -x)[None], rtol=1e-6)


def _after_an_if():
    """y = Reshape(MatMul(If(c, x, [-x; -x]), w), s): the branches differ in shape, so the If's
    output and every step after it are dynamic; MatMul reads only a constant (w), Reshape
    reads the run-time value s."""
    n = helper.make_node
    then = helper.make_graph([n("Identity", ["x"], ["b"])], "then", [], [tensor("b", F, None)])
    other = helper.make_graph([n("Neg", ["x"], ["nx"]), n("Concat", ["nx", "nx"], ["b"], axis=0)],
                              "else", [], [tensor("b", F, None)])
    w = helper.make_tensor("w", F, [4, 3], uniform((4, 3), seed=3).reshape(-1).tolist())
    nodes = [n("If", ["c"], ["v"], then_branch=then, else_branch=other),
             n("MatMul", ["v", "w"], ["m"]), n("Reshape", ["m", "s"], ["y"])]
    return make(nodes, [tensor("c", TensorProto.BOOL, []), tensor("x", F, ["n", 4]),
                        tensor("s", TensorProto.INT64, [2])], [tensor("y", F, None)], [w], opset=17)


def test_dynamic_steps_infer_again_when_what_they_read_changes():
    """A dynamic step's inference is reused across runs only while its inputs' shapes are
    the same and it read no run-time value (plan/execute._infer_dynamic)."""
    sess = graphrt.Session(_after_an_if(), SessionOptions(optimization_level="none"))
    w = uniform((4, 3), seed=3)
    for rows, cond, shape in [(6, True, (2, 9)), (6, False, (4, 9)), (6, True, (9, 2)),
                              (2, False, (3, 4)), (6, True, (2, 9)), (6, True, (18, 1))]:
        x = uniform((rows, 4), seed=rows)
        feeds = {"c": np.array(cond), "x": x, "s": np.array(shape, np.int64)}
        want = ((x if cond else np.concatenate([-x, -x])) @ w).reshape(shape)
        got = sess.run(None, feeds)[0]
        assert got.shape == shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    steps = {st.node.info.op_type: st for _, entry in sess._plans._entries for st in entry.plan.steps}
    assert steps["MatMul"].dynamic and steps["MatMul"].memo is not None    # kept: it read only w
    assert steps["Reshape"].dynamic and steps["Reshape"].memo is None       # it read s


def test_in_place_needs_an_input_of_the_output_size():
    """A broadcast first input smaller than the output fits the output's 64-byte block but
    must not be taken over: later rows still read it (Mul of (2, 1) by (2, 5) gave x * 1
    for the second row)."""
    n = helper.make_node
    for op, fn in (("Mul", np.multiply), ("Add", np.add), ("Sub", np.subtract)):
        for sa, sb in [((2, 1), (2, 5)), ((5, 1), (5, 3)), ((2, 1, 1), (2, 1, 8)), ((2, 1), (2, 2))]:
            model = make([n(op, ["a", "b"], ["y"])], [tensor("a", F, list(sa)), tensor("b", F, list(sb))],
                         [tensor("y", F, None)], opset=17)
            a, b = uniform(sa, seed=1), uniform(sb, seed=2)
            got = graphrt.Session(model).run(None, {"a": a, "b": b})[0]
            np.testing.assert_array_equal(got, fn(a, b))


def test_a_static_steps_scratch_is_free_for_the_next_step():
    """Eight float16 Tanh steps, each widening its input into float32 scratch and computing
    into more (2 x 400 KB): the arena needs one step's scratch, not the run's sum (3.2 MB),
    so a 1 MB arena limit holds, run after run, and the results are those of one step."""
    size = 100_000
    nodes = [helper.make_node("Tanh", [f"v{i}"], [f"v{i + 1}"], name=f"tanh{i}") for i in range(8)]
    model = make(nodes, [tensor("v0", TensorProto.FLOAT16, [size])],
                 [tensor("v8", TensorProto.FLOAT16, None)])
    x = uniform((size,), np.float16, seed=3)
    want = x
    for _ in range(8):
        want = np.tanh(want.astype(np.float32)).astype(np.float16)
    sess = graphrt.Session(model, SessionOptions(max_arena_bytes=1 << 20))
    for _ in range(3):
        np.testing.assert_allclose(sess.run(None, {"v0": x})[0].astype(np.float32),
                                   want.astype(np.float32), rtol=2e-3, atol=2e-3)
