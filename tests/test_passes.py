"""Graph passes: each fires on its pattern and not on a near miss, and the optimised graph
gives the unoptimised graph's results (bits for bit-preserving passes)."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import graphrt
from graphrt.passes.table import ALL as PASSES

from .helpers import RECORD_COMPILES
from .models import F, const, make, tensor

n = helper.make_node
rng = np.random.default_rng(11)
PRESERVES = {p.name: p.preserves_bits for p in PASSES}


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def scalar(name, v):
    return const(name, np.array(v, np.float32))


def case(name):
    """(model, feeds) for each pass: 'hit' has the pattern, 'miss' nearly has it."""
    x = tensor("x", F, [2, 3, 4])
    y = tensor("y", F, None)
    xv = {"x": r(2, 3, 4)}
    if name == "fold_constants":
        hit = make([n("Add", ["a", "b"], ["c"]), n("Mul", ["x", "c"], ["y"])], [x], [y],
                   [const("a", r(4)), const("b", r(4))])
        miss = make([n("Add", ["x", "a"], ["c"]), n("Mul", ["x", "c"], ["y"])], [x], [y], [const("a", r(4))])
    elif name == "eliminate_identities":
        hit = make([n("Identity", ["x"], ["i"]), n("Relu", ["i"], ["y"])], [x], [y])
        miss = make([n("Relu", ["x"], ["i"]), n("Identity", ["i"], ["y"])], [x], [y])
    elif name == "collapse_transposes":
        hit = make([n("Transpose", ["x"], ["t"], perm=[1, 0, 2]), n("Transpose", ["t"], ["y"], perm=[0, 2, 1])],
                   [x], [y])
        miss = make([n("Transpose", ["x"], ["t"]), n("Transpose", ["t"], ["y"], perm=[0, 2, 1])], [x], [y])
    elif name == "collapse_reshapes":
        s1, s2 = const("s1", np.array([6, 4])), const("s2", np.array([2, 12]))
        hit = make([n("Reshape", ["x", "s1"], ["t"]), n("Reshape", ["t", "s2"], ["u"]), n("Relu", ["u"], ["y"])],
                   [x], [y], [s1, s2])
        miss = make([n("Reshape", ["x", "s1"], ["t"]), n("Reshape", ["t", "s0"], ["u"]), n("Relu", ["u"], ["y"])],
                    [x], [y], [s1, const("s0", np.array([0, 2, 2]))])
    elif name == "fold_conv_batchnorm":
        x = tensor("x", F, [1, 3, 8, 8])
        xv = {"x": r(1, 3, 8, 8)}
        bn = [const("sc", 1 + 0.1 * r(4)), const("bi", r(4)), const("mu", r(4)),
              const("var", np.abs(r(4)) + 0.5)]
        conv = [const("W", r(4, 3, 3, 3)), const("B", r(4))]
        hit = make([n("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
                    n("BatchNormalization", ["c", "sc", "bi", "mu", "var"], ["y"])], [x], [y], conv + bn)
        miss = make([n("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
                     n("BatchNormalization", ["c", "scale_in", "bi", "mu", "var"], ["y"])],
                    [x, tensor("scale_in", F, [4])], [y], conv + bn[1:])
        xv = dict(xv, scale_in=1 + 0.1 * r(4))
    elif name == "recognize_gelu":
        def gelu(one):
            return make([n("Div", ["x", "s2"], ["d"]), n("Erf", ["d"], ["e"]), n("Add", ["e", "one"], ["a"]),
                         n("Mul", ["x", "a"], ["m"]), n("Mul", ["m", "half"], ["y"])], [x], [y],
                        [scalar("s2", np.sqrt(2)), scalar("one", one), scalar("half", 0.5)])
        hit, miss = gelu(1.0), gelu(2.0)
    elif name == "recognize_swish":
        z = tensor("z", F, [2, 3, 4])
        xv = dict(xv, z=r(2, 3, 4))

        def silu(other):
            return make([n("Sigmoid", ["x"], ["s"]), n("Mul", ["s", other], ["y"])], [x, z], [y])
        hit, miss = silu("x"), silu("z")
    elif name == "recognize_layernorm":
        def ln(axes):
            return make([n("ReduceMean", ["x"], ["m"], axes=axes), n("Sub", ["x", "m"], ["d"]),
                         n("Pow", ["d", "two"], ["p"]), n("ReduceMean", ["p"], ["v"], axes=axes),
                         n("Add", ["v", "eps"], ["ve"]), n("Sqrt", ["ve"], ["s"]), n("Div", ["d", "s"], ["nrm"]),
                         n("Mul", ["nrm", "g"], ["ng"]), n("Add", ["ng", "b"], ["y"])], [x], [y],
                        [scalar("two", 2.0), scalar("eps", 1e-5), const("g", r(4)), const("b", r(4))], opset=17)
        hit, miss = ln([-1]), ln([1])
    elif name == "recognize_attention":
        q, k, v = tensor("q", F, [1, 2, 4, 8]), tensor("k", F, [1, 4, 2, 8]), tensor("v", F, [1, 2, 4, 8])
        xv = {"q": r(1, 2, 4, 8), "k": r(1, 4, 2, 8), "v": r(1, 2, 4, 8)}

        def attention(axis):
            return make([n("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]), n("MatMul", ["q", "kt"], ["s"]),
                         n("Div", ["s", "c"], ["sc"]), n("Softmax", ["sc"], ["p"], axis=axis),
                         n("MatMul", ["p", "v"], ["y"])], [q, k, v], [y], [scalar("c", np.sqrt(8))])
        hit, miss = attention(-1), attention(2)
    elif name == "sink_constant_nodes":
        # a (1, 5120) constant expanded to 80 KiB: Expand is not folded (more elements than
        # its inputs, and over 64 KiB); listed first it would keep its result alive from the start
        row = const("row", r(1, 5120))
        shape = const("shape", np.array([4, 5120]))

        def dq(first):
            deq = n("Expand", ["row", "shape"], ["w"])
            body = [n("Relu", ["x"], ["a"]), n("Reshape", ["a", "s"], ["b"])]
            rest = [n("MatMul", ["b", "w"], ["y"])]
            return make(([deq] + body if first else body + [deq]) + rest, [x], [y],
                        [row, shape, const("s", np.array([6, 4]))])
        hit, miss = dq(True), dq(False)
    elif name == "recognize_qdq":
        x = tensor("x", F, [2, 5, 7, 7])
        xv = {"x": r(2, 5, 7, 7), "ws": np.array(0.02, np.float32)}
        hit, miss = (qdq_conv(weight_scale_known) for weight_scale_known in (True, False))
    elif name == "pack_weights":
        # W read once by a product: taken; read by two products (a shared weight): kept
        hit = make([n("MatMul", ["x", "W"], ["y"])], [x], [y], [const("W", r(4, 5))])
        miss = make([n("MatMul", ["x", "W"], ["m"]), n("Relu", ["x"], ["rx"]),
                     n("MatMul", ["rx", "W"], ["m2"]), n("Add", ["m", "m2"], ["y"])], [x], [y],
                    [const("W", r(4, 5))])
    else:  # fuse_epilogues
        hit = make([n("MatMul", ["x", "W"], ["m"]), n("Add", ["m", "B"], ["a"]), n("Relu", ["a"], ["y"])],
                   [x], [y], [const("W", r(4, 5)), const("B", r(5))])
        miss = make([n("MatMul", ["x", "W"], ["m"]), n("Add", ["m", "bias"], ["y"])],
                    [x, tensor("bias", F, [5])], [y], [const("W", r(4, 5))])
        xv = dict(xv, bias=r(5))
    return hit, miss, xv


QDQ_STEP = 0.05       # the output quantization step of the QDQ cases: fused groups may
#                       round a value next to a rounding boundary the other way (one step)


def qdq_conv(weight_scale_known=True, relu=True, bias="int", matmul=False, per_channel=True):
    """x -> QuantizeLinear -> DequantizeLinear -> Conv (weights: int8 dequantized per output
    channel; bias: int32 dequantized at x_s * w_s, "shared" at another scale, "float" a float
    constant, or None) [-> Relu] -> QuantizeLinear -> DequantizeLinear -> y; ``matmul``: a
    MatMul of (2, 5, 7, 7) by (7, 16) weights instead; a weight scale that is a graph input
    (not ``weight_scale_known``) keeps the group from being rewritten."""
    g = np.random.default_rng(5)
    m = 16
    wq = g.integers(-127, 128, (7, m) if matmul else (m, 5, 3, 3)).astype(np.int8)
    ws = (g.random(m if per_channel else ()) * 0.02 + 0.01).astype(np.float32)
    inits = [const("wq", wq), scalar("xs", 0.03), const("xz", np.array(7, np.uint8)),
             scalar("ys", QDQ_STEP), const("yz", np.array(120, np.uint8))]
    inputs = [tensor("x", F, [2, 5, 7, 7])]
    if weight_scale_known:
        inits.append(const("ws", ws))
    else:
        inputs.append(tensor("ws", F, []))
    nodes = [n("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             n("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
             n("DequantizeLinear", ["wq", "ws"], ["wf"], axis=1 if matmul else 0)]
    conv_in = ["xf", "wf"]
    if bias and not matmul:
        bq = g.integers(-3000, 3000, m).astype(np.int32)
        bs = 0.03 * ws if bias == "int" else np.float32(1e-4)
        if bias == "float":
            inits.append(const("bf", (bq * 1e-4).astype(np.float32)))
        else:
            inits += [const("bq", bq), const("bs", np.asarray(bs, np.float32))]
            nodes.append(n("DequantizeLinear", ["bq", "bs"], ["bf0"], axis=0))
            nodes.append(n("Identity", ["bf0"], ["bf"]))
        conv_in.append("bf")
    nodes.append(n("MatMul", conv_in, ["c"]) if matmul else
                 n("Conv", conv_in, ["c"], pads=[1, 1, 1, 1]))
    last = "c"
    if relu:
        nodes.append(n("Relu", ["c"], ["rc"]))
        last = "rc"
    nodes += [n("QuantizeLinear", [last, "ys", "yz"], ["yq"]),
              n("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    return make(nodes, inputs, [tensor("y", F, None)], inits, opset=21)


def run(model, level, feeds, mode="fast"):
    sess = graphrt.Session(model, graphrt.SessionOptions(optimization_level=level, mode=mode))
    names = {i.name for i in sess.inputs}
    return sess, sess.run(None, {k: v for k, v in feeds.items() if k in names})[0]


@pytest.mark.parametrize("name", [p.name for p in PASSES])
def test_pass_fires_on_pattern_and_keeps_results(name):
    hit, miss, feeds = case(name)
    _, base = run(hit, "none", feeds)
    sess, got = run(hit, "all", feeds)
    assert sess.pass_counts[name] >= 1, sess.pass_counts
    if PRESERVES[name]:
        assert np.array_equal(got.view(np.uint32), base.view(np.uint32))
    else:
        step = QDQ_STEP * 1.001 if name == "recognize_qdq" else 1e-5
        np.testing.assert_allclose(got, base, rtol=1e-5, atol=step)
    sess_m, got_m = run(miss, "all", feeds)
    assert sess_m.pass_counts.get(name, 0) == 0, sess_m.pass_counts
    np.testing.assert_allclose(got_m, run(miss, "none", feeds)[1], rtol=1e-5, atol=1e-5)


def test_gelu_spelled_by_the_dynamo_exporter():
    """x * (0.5 * (1 + erf(x / sqrt 2))): 0.5 first, then x (torch.onnx's dynamo exporter)."""
    x, y = tensor("x", F, [2, 3, 4]), tensor("y", F, None)
    feeds = {"x": r(2, 3, 4)}

    def gelu(half):
        return make([n("Div", ["x", "s2"], ["d"]), n("Erf", ["d"], ["e"]), n("Add", ["e", "one"], ["a"]),
                     n("Mul", ["half", "a"], ["m"]), n("Mul", ["x", "m"], ["y"])], [x], [y],
                    [scalar("s2", np.sqrt(2)), scalar("one", 1.0), scalar("half", half)])
    _, base = run(gelu(0.5), "none", feeds)
    sess, got = run(gelu(0.5), "all", feeds)
    assert sess.pass_counts.get("recognize_gelu") == 1, sess.pass_counts
    np.testing.assert_allclose(got, base, rtol=1e-5, atol=1e-5)
    assert run(gelu(0.25), "all", feeds)[0].pass_counts.get("recognize_gelu", 0) == 0


@pytest.mark.parametrize("type_name", ["float16", "bfloat16"])
def test_gelu_of_a_16_bit_graph_is_recognised_by_its_rounded_sqrt_2(type_name):
    """A converter narrows the exporter's sqrt 2 to 1.4140625: still GELU (fast mode), within
    the 16-bit type's rounding of the spelled-out form; 1.4150390625 (the next float16
    above) is not."""
    from graphrt.kernels.core.floats import BF16
    dt = np.dtype(np.float16) if type_name == "float16" else BF16
    if dt is None:
        pytest.skip("ml_dtypes is not installed")
    code = helper.np_dtype_to_tensor_dtype(dt)
    x, y = tensor("x", code, [4, 64]), tensor("y", code, None)
    feeds = {"x": (4 * r(4, 64)).astype(dt)}

    def gelu(root):
        consts = [numpy_helper.from_array(np.array(v, np.float32).astype(dt), name)
                  for name, v in (("s2", root), ("one", 1.0), ("half", 0.5))]
        return make([n("Div", ["x", "s2"], ["d"]), n("Erf", ["d"], ["e"]),
                     n("Add", ["e", "one"], ["a"]), n("Mul", ["x", "a"], ["m"]),
                     n("Mul", ["m", "half"], ["y"])], [x], [y], consts)
    _, base = run(gelu(np.sqrt(2)), "none", feeds)
    sess, got = run(gelu(np.sqrt(2)), "all", feeds)
    assert sess.pass_counts.get("recognize_gelu") == 1, sess.pass_counts
    step = 2.0 ** (-10 if type_name == "float16" else -7)     # one unit in the last place at 1
    np.testing.assert_allclose(got.astype(np.float32), base.astype(np.float32),
                               rtol=2 * step, atol=2 * step)
    exact, _ = run(gelu(np.sqrt(2)), "all", feeds, mode="exact")
    assert exact.pass_counts.get("recognize_gelu", 0) == 0
    if type_name == "float16":
        assert run(gelu(1.4150390625), "all", feeds)[0].pass_counts.get("recognize_gelu", 0) == 0


@pytest.mark.parametrize("after_conv", [False, True])
@pytest.mark.parametrize("order", ["x s", "s x"])
def test_silu_runs_as_one_swish_with_the_two_nodes_bits(after_conv, order):
    """x * Sigmoid(x) (yolo's SiLU; after a Conv it joins the Conv's epilogue) runs as one
    Swish in fast mode with the bits of Sigmoid then Mul, the extremes included; exact mode
    keeps the two nodes (its Swish rounds once)."""
    rng = np.random.default_rng(13)
    xv = (rng.standard_normal((2, 4, 6, 6)) * 12).astype(np.float32)
    xv.reshape(-1)[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.5, -104.0, 1e-30]
    nodes = [n("Sigmoid", ["c"], ["s"]), n("Mul", order.replace("x", "c").split(), ["y"])]
    inits = []
    if after_conv:
        nodes.insert(0, n("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]))
        inits = [const("W", r(4, 4, 3, 3)), const("B", r(4))]
    else:
        nodes.insert(0, n("Identity", ["x"], ["c"]))
    model = make(nodes, [tensor("x", F, [2, 4, 6, 6])], [tensor("y", F, None)], inits)
    _, base = run(model, "none", {"x": xv})
    sess, got = run(model, "all", {"x": xv})
    assert sess.pass_counts.get("recognize_swish") == 1, sess.pass_counts
    assert not after_conv or sess.pass_counts.get("fuse_epilogues") == 1, sess.pass_counts
    assert got.tobytes() == base.tobytes()
    exact, _ = run(model, "all", {"x": xv}, mode="exact")
    assert exact.pass_counts.get("recognize_swish", 0) == 0


def test_levels_and_exact_mode_skip_what_they_must():
    hit, _, feeds = case("fold_conv_batchnorm")
    none_exact = run(hit, "none", feeds, "exact")[1]
    sess, all_exact = run(hit, "all", feeds, "exact")
    assert "fold_conv_batchnorm" not in sess.pass_counts            # not bit-preserving
    assert np.array_equal(all_exact.view(np.uint32), none_exact.view(np.uint32))
    basic, _ = run(hit, "basic", feeds)
    assert set(basic.pass_counts) == {p.name for p in PASSES if p.min_level.value == "basic"}
    assert run(hit, "none", feeds)[0].pass_counts == {}


def test_fused_node_keeps_the_model_node_name(tmp_path):
    hit, _, feeds = case("fuse_epilogues")
    sess, _ = run(hit, "all", feeds)
    (node,) = sess._graph.nodes
    assert node.info.op_type in {"Relu", "Add", "MatMul"}          # an operator of the model
    path = tmp_path / "opt.onnx"
    sess.save_optimized(str(path))
    saved = onnx.load(str(path))
    assert [(x.domain, x.op_type) for x in saved.graph.node] == [("graphrt", "FusedEpilogue")]
    assert dict((a.name, a.s) for a in saved.graph.node[0].attribute)["stages"] == b"MatMul+Add+Relu"


def test_saved_basic_graph_runs_elsewhere(tmp_path):
    hit, _, feeds = case("collapse_transposes")
    sess, got = run(hit, "basic", feeds)
    path = tmp_path / "opt.onnx"
    sess.save_optimized(str(path))
    from onnx.reference import ReferenceEvaluator
    assert [x.op_type for x in onnx.load(str(path)).graph.node] == ["Transpose"]
    assert np.array_equal(ReferenceEvaluator(str(path)).run(None, feeds)[0], got)


RELU_CASES = {
    "MatMul": ([n("MatMul", ["x", "W"], ["m"])], [const("W", r(40, 70))], (300, 40)),
    "Gemm": ([n("Gemm", ["x", "W", "B"], ["m"], transB=1)],
             [const("W", r(70, 40)), const("B", r(70))], (300, 40)),
    "Conv+B": ([n("Conv", ["x", "W", "B"], ["m"], pads=[1, 1, 1, 1])],
               [const("W", r(12, 5, 3, 3)), const("B", r(12))], (2, 5, 9, 9)),
    "Conv": ([n("Conv", ["x", "W"], ["m"], strides=[2, 2])], [const("W", r(12, 5, 3, 3))],
             (2, 5, 9, 9)),
}


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("name", sorted(RELU_CASES))
def test_relu_absorbed_by_the_product_keeps_bits(name, mode):
    """A Relu after MatMul/Gemm/Conv runs inside the product's tiles or bias pass (fused.py):
    the bits of the unfused nodes, NaN and -0.0 included."""
    nodes, inits, shape = RELU_CASES[name]
    x = tensor("x", F, list(shape))
    model = make(nodes + [n("Relu", ["m"], ["y"])], [x], [tensor("y", F, None)], inits)
    xv = r(*shape)
    flat = xv.reshape(-1)
    flat[7] = np.nan        # one row/window: NaN must reach the output, not all of it
    flat[1::19] = -0.0
    _, base = run(model, "none", {"x": xv}, mode)
    sess, got = run(model, "all", {"x": xv}, mode)
    assert sess.pass_counts["fuse_epilogues"] == 1
    assert got.tobytes() == base.tobytes()
    assert np.isnan(got).any() and (got == 0).any()


AFFINE_CASES = {  # a primary, then per-channel scale-and-shift stages, then Relu
    "Conv+BN": ([n("Conv", ["x", "W", "B"], ["m"], pads=[1, 1, 1, 1]),
                 n("BatchNormalization", ["m", "s", "b", "mu", "v"], ["a"])],
                [const("W", r(12, 5, 3, 3)), const("B", r(12)), const("s", r(12)), const("b", r(12)),
                 const("mu", r(12)), const("v", np.abs(r(12)) + 0.5)]),
    "Conv+Mul+Add": ([n("Conv", ["x", "W"], ["m"], strides=[2, 2]), n("Mul", ["m", "k"], ["p"]),
                      n("Add", ["q", "p"], ["a"])],
                     [const("W", r(12, 5, 3, 3)), const("k", r(12, 1, 1)), const("q", r(1, 12, 1, 1))]),
    "BN+Mul+Sub": ([n("BatchNormalization", ["x", "s", "b", "mu", "v"], ["m"]),
                    n("Mul", ["m", "k"], ["p"]), n("Sub", ["p", "q"], ["a"])],
                   [const("s", r(5)), const("b", r(5)), const("mu", r(5)),
                    const("v", np.abs(r(5)) + 0.5), const("k", r(5, 1, 1)), const("q", r(1))]),
}


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("name", sorted(AFFINE_CASES))
def test_scale_and_shift_stages_fold_into_the_primary(name, mode):
    """Conv or BatchNormalization followed by per-channel BatchNormalization/Mul/Add/Sub and
    Relu: one fused node; fast mode folds the stages into one scale and shift per channel
    (values within rounding of the unfused nodes), exact mode runs them as they are (bits)."""
    nodes, inits = AFFINE_CASES[name]
    x = tensor("x", F, [2, 5, 9, 9])
    model = make(nodes + [n("Relu", ["a"], ["y"])], [x], [tensor("y", F, None)], inits)
    xv = r(2, 5, 9, 9)
    _, base = run(model, "none", {"x": xv}, mode)
    sess, got = run(model, "all", {"x": xv}, mode)
    assert sess.pass_counts["fuse_epilogues"] == 1
    if mode == "exact":
        assert got.tobytes() == base.tobytes()
    else:
        np.testing.assert_allclose(got, base, rtol=1e-5, atol=1e-5)
        assert got.tobytes() != base.tobytes()      # folded: rounded differently somewhere


def test_a_channel_constant_that_broadcasts_further_is_not_folded():
    """A Mul by a (12, 1) constant after a 4-D Conv is per row, not per channel: not folded
    (the fused node runs it as a stage and gives the unfused values)."""
    nodes = [n("Conv", ["x", "W"], ["m"]), n("Mul", ["m", "k"], ["a"])]
    x = tensor("x", F, [2, 5, 12, 12])
    model = make(nodes + [n("Relu", ["a"], ["y"])], [x], [tensor("y", F, None)],
                 [const("W", r(12, 5, 1, 1)), const("k", r(12, 1))])
    xv = r(2, 5, 12, 12)
    _, base = run(model, "none", {"x": xv}, "fast")
    _, got = run(model, "all", {"x": xv}, "fast")
    assert got.tobytes() == base.tobytes()


@pytest.mark.parametrize("form", ["int bias", "shared bias", "float bias", "no bias",
                                  "no relu", "per tensor", "matmul"])
def test_qdq_groups_run_as_integer_operators(form):
    """Each QDQ form becomes one integer operator (QLinearConv / QLinearMatMul) in fast mode;
    the results are the unfused graph's (exact mode) within one output step, and
    onnxruntime's (which fuses these groups too) within one step."""
    kw = {"int bias": {}, "shared bias": {"bias": "shared"}, "float bias": {"bias": "float"},
          "no bias": {"bias": None}, "no relu": {"relu": False},
          "per tensor": {"per_channel": False}, "matmul": {"matmul": True}}[form]
    model = qdq_conv(**kw)
    feeds = {"x": r(2, 5, 7, 7) * 2}
    sess, got = run(model, "all", feeds)
    assert sess.pass_counts.get("recognize_qdq") == 1
    kinds = {type(nd.kernel).__name__ for nd in sess._graph.nodes}
    assert ("QLinearMatMul" if form == "matmul" else "QLinearConv") in kinds
    assert not kinds & {"Conv", "MatMul", "Relu"}
    _, exact = run(model, "all", feeds, "exact")
    assert np.abs(got - exact).max() <= QDQ_STEP * 1.001
    assert np.mean(got != exact) < 0.05
    ort = pytest.importorskip("onnxruntime")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    for options in (so, None):
        if options is None and not _int8_products_exact():
            break
        want = ort.InferenceSession(model.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        assert np.abs(got - want).max() <= QDQ_STEP * 1.001


def _int8_products_exact() -> bool:
    """Whether onnxruntime's fused int8 kernels sum their products exactly here: on x86
    without VNNI they multiply-add pairs into int16 (vpmaddubsw), which saturates (on an
    AVX2 Zen 3 its QLinearConv gave 3.15 where its own unfused graph and graphrt gave 3.25)."""
    import platform

    import llvmlite.binding as llb
    feats = llb.get_host_cpu_features()
    return platform.machine() not in ("x86_64", "AMD64") or bool(
        feats.get("avx512vnni") or feats.get("avxvnni"))


def _payload_nans(*shape):
    """float32 values with NaNs of several payloads and signs (bits a copy must keep)."""
    bits = rng.integers(0, 2**32, shape, dtype=np.uint64).astype(np.uint32)
    bits[..., 0] = 0x7FC00001
    bits[..., -1] = 0xFFA00003
    return bits.view(np.float32)


def _folds():
    from graphrt.kernels.elementwise import arithmetic as ar, cast, compare as cp, select
    from graphrt.kernels.elementwise import unary_math as um, variadic
    from graphrt.kernels.tensor import expand, gather, layout
    i64 = np.array([[2**62, 3, -5, 2**63 - 1]]), np.array([[4], [7], [-2**62]])
    big = np.array([2**62 + 2**38 + 1, -(2**53) - 1, 300, -129, 2**31, 16777217])
    return [
        (ar.Mul, i64, {}), (ar.Add, i64, {}), (ar.Sub, i64, {}),
        (ar.Add, (np.array([100, -128, 7], np.int8), np.array(100, np.int8)), {}),
        (ar.Sub, (np.array([0, 5], np.uint32), np.array([[1], [9]], np.uint32)), {}),
        (cp.Equal, i64, {}), (cp.GreaterOrEqual, i64, {}),
        (cp.Less, (np.array([0, 200, 255], np.uint8), np.array([[1], [255]], np.uint8)), {}),
        (cp.And, (rng.random((2, 3)) < 0.5, rng.random(3) < 0.5), {}),
        (cp.Xor, (rng.random((2, 3)) < 0.5, rng.random((2, 1)) < 0.5), {}),
        (cp.BitwiseAnd, (np.array([-1, 0x1234], np.int16), np.array([0x0FF0], np.int16)), {}),
        (select.Where, (rng.random((2, 1)) < 0.5, _payload_nans(2, 3), _payload_nans(1, 3)), {}),
        (expand.Expand, (_payload_nans(3, 1), np.array([2, 1, 4])), {}),
        (gather.Gather, (_payload_nans(4, 5), np.array([[-1, 0], [2, -5]])), {"axis": 1}),
        (gather.GatherElements, (rng.integers(-9, 9, (3, 4)), np.array([[-1, 0, 2, 1], [0, -3, 1, 2]])),
         {"axis": 0}),
        (layout.Transpose, (rng.integers(0, 2**16, (2, 3, 4)).astype(np.uint16),), {"perm": [2, 0, 1]}),
        (layout.Concat, (_payload_nans(2, 1), _payload_nans(2, 3)), {"axis": -1}),
        (um.Abs, (np.array([-2**63, -3, 0, 2**63 - 1]),), {}),
        (um.Abs, (np.array([-128, -1, 127], np.int8),), {}),
        (um.Neg, (np.array([-2**31, -3, 0, 2**31 - 1], np.int32),), {}),
        (variadic.Min, (i64[0], i64[1]), {}),
        (variadic.Max, (np.array([0, 200, 255], np.uint8), np.array([[1], [255]], np.uint8),
                        np.array([7], np.uint8)), {}),
        (variadic.Min, (np.array([[5, -9]], np.int16),), {}),
    ] + [(cast.Cast, (x,), {"to": onnx.helper.np_dtype_to_tensor_dtype(np.dtype(to))})
         for x, to in [(big, np.int8), (big, np.float32), (big, np.float64), (big, np.uint32),
                       (np.array([0, 3, -1], np.int32), np.bool_),
                       (np.array([True, False]), np.int64), (np.array([True, False]), np.float32),
                       (np.array([2**32 - 1, 2**24 + 1], np.uint32), np.float32),
                       (np.array([65535, 3], np.uint16), np.float64)]]


@pytest.mark.parametrize("index", range(len(_folds())))
def test_a_fold_numpy_computes_has_the_kernels_bits(index):
    """Constant folds of integer and bool arithmetic (Abs, Neg, Min and Max too), comparisons
    and element moves are computed by numpy (no kernel compiled for them): the same bits as
    the kernel's run."""
    from .helpers import kernel_run
    cls, inputs, attrs = _folds()[index]
    run = kernel_run(cls, list(inputs), attrs)
    folded = kernel_run(cls, list(inputs), attrs, fold=True)
    assert folded.dtype == run.dtype and folded.shape == run.shape
    assert folded.tobytes() == run.tobytes()


SHAPE_ARITHMETIC = RECORD_COMPILES + r"""
import json
import numpy as np
from onnx import TensorProto, helper, numpy_helper
import graphrt
n = helper.make_node
c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
nodes = [n("Mul", ["a", "b"], ["m"]), n("Equal", ["m", "b"], ["e"]), n("Not", ["e"], ["ne"]),
         n("GreaterOrEqual", ["m", "a"], ["ge"]), n("And", ["ge", "e"], ["both"]),
         n("Abs", ["m"], ["am"]), n("Max", ["am", "a", "b"], ["mx"]),
         n("Where", ["both", "mx", "a"], ["w"]), n("Expand", ["w", "s"], ["x2"]),
         n("Transpose", ["x2"], ["t"], perm=[1, 0]), n("Concat", ["t", "t"], ["cc"], axis=0),
         n("Gather", ["cc", "i"], ["g"], axis=1), n("GatherElements", ["g", "j"], ["ge2"], axis=0),
         n("Cast", ["ge2"], ["f"], to=TensorProto.FLOAT), n("Add", ["x", "f"], ["y"])]
graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [c("a", [3, -1, 2]), c("b", [1, 1, 2]), c("s", [2, 3]), c("i", [-1]),
                           c("j", [[0], [1]])])
sess = graphrt.Session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
print(json.dumps({"compiled": compiled, "pass_counts": sess.pass_counts}))
"""


def test_shape_arithmetic_folds_without_compiling(tmp_path):
    """A fresh process folds integer shape arithmetic and element moves at session creation
    without compiling a kernel (it compiled 0.1-0.4 s per operator and element type)."""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, GRAPHRT_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", SHAPE_ARITHMETIC], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["pass_counts"]["fold_constants"] >= 13
    assert [f for f in report["compiled"] if "fast" in f or "exact" in f] == []


def _weights_model(half: bool):
    """A dynamic-batch MLP: Gemm (transB, bias), MatMul + Add + Relu (fused), a MatMul of a
    data-dependent number of rows (Compress: a dynamic step), and a MatMul of a constant of
    the input's shape (folded when a plan is made)."""
    t = np.float16 if half else np.float32
    w = {k: (rng.standard_normal(s) / 4).astype(t) for k, s in
         (("W1", (24, 16)), ("W2", (24, 20)), ("W3", (20, 8)), ("W4", (16, 8)))}
    elem = onnx.TensorProto.FLOAT16 if half else F
    nodes = [n("Gemm", ["x", "W1", "B1"], ["g"], transB=1),
             n("MatMul", ["g", "W2"], ["m"]), n("Add", ["m", "B2"], ["a"]), n("Relu", ["a"], ["h"]),
             n("ReduceSum", ["h", "s1"], ["rs"], keepdims=0),
             n("Greater", ["rs", "zero"], ["keep"]), n("Compress", ["h", "keep"], ["hk"], axis=0),
             n("MatMul", ["hk", "W3"], ["y"]),
             n("Shape", ["x"], ["sx"]), n("ConstantOfShape", ["sx"], ["ones"],
                                           value=numpy_helper.from_array(np.ones(1, t))),
             n("Slice", ["ones", "s0", "s16"], ["o16"], axes=[1]), n("MatMul", ["o16", "W4"], ["z"])]
    inits = [const(k, v) for k, v in w.items()] + [
        const("B1", rng.standard_normal(24).astype(t)), const("B2", rng.standard_normal(20).astype(t)),
        const("zero", np.zeros((), t)), const("s0", np.array([0])), const("s16", np.array([16])),
        const("s1", np.array([1]))]
    model = make(nodes, [tensor("x", elem, ["n", 16])], [tensor("y", elem, None), tensor("z", elem, None)],
                 inits, opset=13)
    return model, w


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("half", [False, True], ids=["float32", "float16"])
def test_packed_weights_are_held_once_with_the_same_bits(tmp_path, mode, half):
    """The products' weights live only in their packed layouts (no longer constants of the
    graph); every plan -- two batch sizes, a dynamic step, a product folded when the plan
    is made -- gives the bits of the graph that keeps them; the optimised model written
    out holds them as the model had them; asking for one by name is refused."""
    model, w = _weights_model(half)
    opts = dict(mode=mode, intra_op_threads=1)
    packed = graphrt.Session(model, graphrt.SessionOptions(optimization_level="all", **opts))
    kept = graphrt.Session(model, graphrt.SessionOptions(optimization_level="basic", **opts))
    assert packed.pass_counts["pack_weights"] == 4
    names = packed._graph.value_names
    assert not {names[v] for v in packed._graph.constants} & set(w)
    for rows in (7, 130, 7):
        x = rng.standard_normal((rows, 16)).astype(np.float16 if half else np.float32)
        for got, want in zip(packed.run(None, {"x": x}), kept.run(None, {"x": x})):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    path = tmp_path / "opt.onnx"
    packed.save_optimized(str(path))
    saved = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    for k, v in w.items():
        assert saved[k].dtype == v.dtype and np.array_equal(saved[k], v), k
    with pytest.raises(graphrt.SessionError, match="W2"):
        packed.run(["W2"], {"x": x})


def test_a_session_holds_a_product_s_weights_once():
    """After a run, the memory a session holds (numpy's allocations, traced) holds one copy
    of a 4 MiB weight with pack_weights (the packed layout), two without it (the model's
    array and the layout); besides, the product's scratch for its rows (0.3 of the weight)."""
    import gc
    import tracemalloc
    w = rng.standard_normal((1024, 1024)).astype(np.float32)
    model = make([n("MatMul", ["x", "W"], ["y"])], [tensor("x", F, [2, 1024])], [tensor("y", F, None)],
                 [const("W", w)]).SerializeToString()
    x = rng.standard_normal((2, 1024)).astype(np.float32)
    held = {}
    for level in ("basic", "all"):
        gc.collect()
        tracemalloc.start()
        sess = graphrt.Session(model, graphrt.SessionOptions(optimization_level=level))
        sess.run(None, {"x": x})
        gc.collect()
        held[level] = tracemalloc.get_traced_memory()[0] / w.nbytes
        tracemalloc.stop()
        del sess
    assert held["basic"] - held["all"] > 0.9 and held["all"] < 1.5, held


def test_a_packed_weight_is_laid_out_again_for_another_gemm_path(monkeypatch):
    """GRAPHRT_GEMM, read when a plan is made, changed after the session packed its
    weights: the next plan lays them out again from the layout it has (the model's array is
    gone) and gives the bits of the graph that kept them."""
    model, _ = _weights_model(False)
    opts = dict(intra_op_threads=1)
    packed = graphrt.Session(model, graphrt.SessionOptions(optimization_level="all", **opts))
    kept = graphrt.Session(model, graphrt.SessionOptions(optimization_level="basic", **opts))
    packed.run(None, {"x": rng.standard_normal((9, 16)).astype(np.float32)})
    monkeypatch.setenv("GRAPHRT_GEMM", "loop")
    x = rng.standard_normal((33, 16)).astype(np.float32)
    for got, want in zip(packed.run(None, {"x": x}), kept.run(None, {"x": x})):
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def _recurrent_model(op: str, hidden: int, dtype):
    """A bidirectional LSTM or GRU of dynamic sequence length and batch over constant W, R
    and B, its Y and last state out."""
    gates = {"LSTM": 4, "GRU": 3}[op]
    w = {"W": rng.standard_normal((2, gates * hidden, 12)) / 4,
         "R": rng.standard_normal((2, gates * hidden, hidden)) / 4,
         "B": rng.standard_normal((2, 2 * gates * hidden)) / 4}
    w = {k: v.astype(dtype) for k, v in w.items()}
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = make([n(op, ["x", "W", "R", "B"], ["y", "h"], hidden_size=hidden,
                    direction="bidirectional")],
                 [tensor("x", elem, ["s", "b", 12])], [tensor("y", elem, None), tensor("h", elem, None)],
                 [const(k, v) for k, v in w.items()], opset=14)
    return model, w


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("op, dtype", [("LSTM", np.float32), ("GRU", np.float32),
                                       ("LSTM", np.float64)])
def test_recurrent_weights_are_held_once_with_the_same_bits(tmp_path, monkeypatch, mode, op,
                                                            dtype):
    """A recurrence's W (as its product's panels) and R (as R^T) live only in the kernel's
    layouts; plans of a few rows (W^T inline in the step) and of many (x W^T one product)
    give the bits of the graph that keeps them, and so does a plan made after GRAPHRT_GEMM
    changed; the optimised model written out holds them as the model had them."""
    model, w = _recurrent_model(op, 24, dtype)
    opts = dict(mode=mode, intra_op_threads=1)
    packed = graphrt.Session(model, graphrt.SessionOptions(optimization_level="all", **opts))
    kept = graphrt.Session(model, graphrt.SessionOptions(optimization_level="basic", **opts))
    assert packed.pass_counts["pack_weights"] == 2
    names = packed._graph.value_names
    assert not {names[v] for v in packed._graph.constants} & {"W", "R"}

    def same(shape):
        x = rng.standard_normal(shape).astype(dtype)
        for got, want in zip(packed.run(None, {"x": x}), kept.run(None, {"x": x})):
            assert got.shape == want.shape and np.array_equal(got.view(np.uint8), want.view(np.uint8))

    for shape in ((2, 1, 12), (9, 5, 12), (2, 1, 12)):
        same(shape)
    path = tmp_path / "opt.onnx"
    packed.save_optimized(str(path))
    saved = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    for k in ("W", "R"):
        assert saved[k].dtype == w[k].dtype and np.array_equal(saved[k], w[k]), k
    monkeypatch.setenv("GRAPHRT_GEMM", "loop")
    same((7, 3, 12))
