"""Steps that give compiled calls (OpKernel.jit_calls): convolutions, pools, recurrences and
float16 casts. Their calls, made once per run state and replayed, give the bits of the
kernel's own run, in both modes; they are compiled (no Python step) where the issue of one
run path asks for it."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphrt
from graphrt.kernels.core.base import make_calls, step_calls
from graphrt.kernels.rnn import recurrent

from .models import F, const, make, tensor

n = helper.make_node


def _image_model():
    rng = np.random.default_rng(0)
    c = 8

    def w(m, cg, k):
        return (rng.standard_normal((m, cg, k, k)) / (k * k * cg)).astype(np.float32)

    nodes = [n("Conv", ["x", "w1", "b"], ["a"]),
             n("Conv", ["a", "w3", "b"], ["b3"], pads=[1, 1, 1, 1]),
             n("Conv", ["b3", "wd", "b"], ["d"], group=c, pads=[1, 1, 1, 1]),
             n("Conv", ["d", "w3"], ["s"], strides=[2, 2], pads=[1, 1, 1, 1]),
             n("MaxPool", ["d"], ["mp"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("AveragePool", ["mp"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
               count_include_pad=1),
             n("AveragePool", ["ap"], ["ap2"], kernel_shape=[2, 2], strides=[2, 2]),
             n("MaxPool", ["ap"], ["mp2"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
             n("Add", ["ap2", "mp2"], ["y"])]
    inits = [const("w1", w(c, c, 1)), const("w3", w(c, c, 3)), const("wd", w(c, 1, 3)),
             const("b", rng.standard_normal(c).astype(np.float32))]
    x = rng.standard_normal((2, c, 9, 9)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    return make(nodes, [tensor("x", F, [2, c, 9, 9])], [tensor("y", F, None), tensor("s", F, None)],
                inits), x


def _recurrent_model(kind, layout=0, direction="bidirectional", lbr=0):
    rng = np.random.default_rng(1)
    seq, batch, isz, hs = 5, 3, 6, 4
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    dirs = 2 if direction == "bidirectional" else 1
    inits = [const("w", (rng.standard_normal((dirs, gates * hs, isz)) / isz).astype(np.float32)),
             const("r", (rng.standard_normal((dirs, gates * hs, hs)) / hs).astype(np.float32)),
             const("bias", rng.standard_normal((dirs, 2 * gates * hs)).astype(np.float32) / 4)]
    ins = ["x", "w", "r", "bias", "", "h0"]
    state = (batch, dirs, hs) if layout else (dirs, batch, hs)
    graph_ins = [tensor("x", F, [batch, seq, isz] if layout else [seq, batch, isz]),
                 tensor("h0", F, list(state))]
    attrs = dict(hidden_size=hs, direction=direction, layout=layout)
    outs = ["y", "yh"]
    if kind == "LSTM":
        ins += ["c0", "p"]
        graph_ins.append(tensor("c0", F, list(state)))
        inits.append(const("p", rng.standard_normal((dirs, 3 * hs)).astype(np.float32) / 4))
        outs.append("yc")
    if kind == "GRU":
        attrs["linear_before_reset"] = lbr
    nodes = [n(kind, ins, outs, **attrs)]
    model = make(nodes, graph_ins, [tensor(o, F, None) for o in outs], inits, opset=14)
    feeds = {"x": rng.standard_normal((batch, seq, isz) if layout else (seq, batch, isz)),
             "h0": rng.standard_normal(state), "c0": rng.standard_normal(state)}
    names = {i.name for i in model.graph.input}
    return model, {k: v.astype(np.float32) for k, v in feeds.items() if k in names}


def _cast_model():
    nodes = [n("Cast", ["x"], ["h"], to=TensorProto.FLOAT16), n("Cast", ["h"], ["y"], to=F)]
    x = np.random.default_rng(2).standard_normal((3, 7)).astype(np.float32) * 1e3
    x[0, :3] = [np.nan, np.inf, 1e5]         # (beyond float16's range: inf)
    return make(nodes, [tensor("x", F, [3, 7])], [tensor("y", F, None)]), x


def _half_model():
    """float16 throughout, as onnxconverter-common leaves a model: its steps compute in
    float32 between conversions."""
    rng = np.random.default_rng(3)
    c = 4

    def h(*shape):
        return (rng.standard_normal(shape) / 4).astype(np.float16)

    nodes = [n("Conv", ["x", "w", "b"], ["a"], pads=[1, 1, 1, 1]), n("Relu", ["a"], ["r"]),
             n("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
             n("AveragePool", ["m"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Reshape", ["p", "shape"], ["f"]), n("MatMul", ["f", "k"], ["q"]),
             n("Add", ["q", "kb"], ["s"]),
             n("LayerNormalization", ["s", "g", "beta"], ["l"], axis=-1),
             n("MatMul", ["l", "l2"], ["ll"]), n("Softmax", ["ll"], ["sm"]),
             n("Gemm", ["f", "k", "kb"], ["gm"]), n("Mul", ["gm", "sm"], ["y"]),
             n("GlobalAveragePool", ["p"], ["gp"])]
    inits = [const("w", h(c, c, 3, 3)), const("b", h(c)), const("k", h(16, 16)),
             const("kb", h(16)), const("g", h(16)), const("beta", h(16)),
             const("shape", np.array([c * 2, 16], np.int64))]
    model = make(nodes, [tensor("x", TensorProto.FLOAT16, [2, c, 8, 8]),
                         tensor("l2", TensorProto.FLOAT16, [16, 16])],
                 [tensor("y", TensorProto.FLOAT16, None), tensor("gp", TensorProto.FLOAT16, None)],
                 inits)
    return model, {"x": h(2, c, 8, 8), "l2": h(16, 16)}


def _each_step_calls_and_run(model, feeds, mode, compiled_ops):
    """Run once; then, on the run state's buffers, each step's replayed calls and its own
    run give the same bits, and the steps of ``compiled_ops`` (all steps when None) give
    calls (no Python)."""
    sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode, intra_op_threads=1))
    sess.run(None, feeds)
    (key, entry), = sess._plans._entries
    state = entry.take()
    try:
        seen = set()
        for st, ctx in zip(entry.plan.steps, state.contexts):
            if st.view or st.dynamic or ctx is None:
                continue
            op = st.node.info.op_type
            calls = step_calls(st.node.kernel, ctx)
            if compiled_ops is None or op in compiled_ops:
                assert calls is not None, op
                seen.add(op)
            if calls is None:
                continue
            # inputs restored before each way of running (a step may run in place)
            saved = [None if i is None else i.copy() for i in ctx.inputs]

            def restore():
                for i, v in zip(ctx.inputs, saved):
                    if i is not None:
                        np.copyto(i, v)

            make_calls(calls)
            got = [o.tobytes() for o in ctx.outputs if o is not None]
            for replay in (False, True):        # the run; the calls replayed
                restore()
                for o in ctx.outputs:
                    if o is not None and o.dtype.kind == "f" and \
                            not any(np.shares_memory(o, i) for i in ctx.inputs if i is not None):
                        o.fill(np.nan)
                if replay:
                    make_calls(calls)
                else:
                    st.node.kernel.run(ctx)
                assert [o.tobytes() for o in ctx.outputs if o is not None] == got, op
        assert seen and seen == (seen if compiled_ops is None else set(compiled_ops))
    finally:
        entry.give(state)


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_convolutions_and_pools_are_compiled_calls_with_their_runs_bits(mode):
    model, x = _image_model()
    _each_step_calls_and_run(model, {"x": x}, mode, {"Conv", "MaxPool", "AveragePool"})


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("case", [("LSTM", 0, "bidirectional", 0), ("LSTM", 1, "forward", 0),
                                  ("GRU", 0, "reverse", 0), ("GRU", 1, "bidirectional", 1),
                                  ("RNN", 0, "forward", 0)])
@pytest.mark.parametrize("fused", [True, False])
def test_recurrences_are_compiled_calls_with_their_runs_bits(case, fused, mode, monkeypatch):
    """The whole sequence as calls: the fused call, or (forced here) a product and a gate
    call per step."""
    if not fused:
        monkeypatch.setattr(recurrent, "FUSED_BATCH", 0)
        monkeypatch.setattr(recurrent, "FUSED_WEIGHTS", 0)
    model, feeds = _recurrent_model(*case)
    _each_step_calls_and_run(model, feeds, mode, {case[0]})


def test_float16_casts_are_compiled_calls_in_fast_mode():
    """float32 <-> float16 in fast mode: numpy's bits (NaN, infinity, overflow) from LLVM's
    conversions; exact mode keeps numpy's conversion and the canonical NaN."""
    from graphrt.kernels.core.floats import F16C
    model, x = _cast_model()
    _each_step_calls_and_run(model, {"x": x}, "fast", {"Cast"} if F16C else set())
    sess = graphrt.Session(model)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want)


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_float16_steps_convert_by_calls_with_their_runs_bits(mode):
    """A float16 step's calls convert its operands to float32 buffers held by the run state
    and round its results back (floats.wide_calls), with the bits of its run (widen, compute,
    narrow)."""
    from graphrt.kernels.core.floats import F16C
    if not F16C:
        pytest.skip("no compiled float16 conversion on this CPU")
    model, feeds = _half_model()
    _each_step_calls_and_run(model, feeds, mode, None)     # (fast mode fuses Conv + Relu)


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_dynamic_quantization_steps_are_compiled_calls_with_their_runs_bits(mode):
    """The steps onnxruntime's quantize_dynamic writes around a MatMul: DynamicQuantizeLinear,
    MatMulInteger (constant uint8 weights: the integer path), Cast, Mul, and a
    DequantizeLinear of int32; the integer ones give calls too."""
    rng = np.random.default_rng(7)
    wq = rng.integers(0, 256, (16, 12), dtype=np.uint8)
    nodes = [n("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             n("MatMulInteger", ["xq", "wq", "xz", "wz"], ["acc"]),
             n("DequantizeLinear", ["acc", "s", "z"], ["y"]),
             n("Mul", ["y", "xs"], ["out"])]
    inits = [const("wq", wq), const("wz", np.array(128, np.uint8)),
             const("s", np.array(0.02, np.float32)), const("z", np.array(0, np.int32))]
    model = make(nodes, [tensor("x", F, [5, 16])], [tensor("out", F, None)], inits)
    x = rng.standard_normal((5, 16)).astype(np.float32)
    from graphrt.kernels.gemm import micro_int
    compiled = {"DynamicQuantizeLinear", "DequantizeLinear", "Mul"} | \
        ({"MatMulInteger"} if micro_int.AVAILABLE else set())   # (else the float path)
    _each_step_calls_and_run(model, {"x": x}, mode, compiled)


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_integer_convolutions_are_compiled_calls_with_their_runs_bits(mode):
    """ConvInteger with constant weights (the integer-tile path): one call per image and
    group, its scratch the run state's."""
    rng = np.random.default_rng(8)
    nodes = [n("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1], group=2)]
    inits = [const("w", rng.integers(0, 256, (32, 4, 3, 3), dtype=np.uint8)),
             const("xz", np.array(7, np.uint8)), const("wz", np.array(128, np.uint8))]
    model = make(nodes, [tensor("x", TensorProto.UINT8, [2, 8, 6, 6])], [tensor("y", 6, None)],
                 inits)
    x = rng.integers(0, 256, (2, 8, 6, 6), dtype=np.uint8)
    from graphrt.kernels.gemm import micro_int
    if not micro_int.AVAILABLE:
        pytest.skip("no integer tiles on this CPU: ConvInteger takes the float path")
    _each_step_calls_and_run(model, {"x": x}, mode, {"ConvInteger"})


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_pad_expand_and_tile_are_compiled_calls_with_their_runs_bits(mode):
    """Data movement of every element width, a float64 pad value whose bits have the sign
    bit set (-0.0: a uint64 word above 2**63 in the call's row)."""
    rng = np.random.default_rng(9)
    nodes = [n("Pad", ["x", "pads", "v"], ["p"], mode="constant"),
             n("Expand", ["x", "shape"], ["e"]),
             n("Tile", ["x", "reps"], ["t"]),
             n("Pad", ["x", "pads"], ["r"], mode="reflect")]
    inits = [const("pads", np.array([1, 0, 2, 1], np.int64)), const("v", np.array(-0.0)),
             const("shape", np.array([2, 3, 4], np.int64)),
             const("reps", np.array([2, 3], np.int64))]
    model = make(nodes, [tensor("x", TensorProto.DOUBLE, [3, 4])],
                 [tensor(o, TensorProto.DOUBLE, None) for o in ("p", "e", "t", "r")], inits)
    x = rng.standard_normal((3, 4))
    _each_step_calls_and_run(model, {"x": x}, mode, {"Pad", "Expand", "Tile"})
    got = graphrt.Session(model).run(None, {"x": x})[0]
    assert np.signbit(got[0, 0]) and got[0, 0] == 0 and np.array_equal(got[1:4, :4], x)


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_static_quantization_steps_are_compiled_calls_with_their_runs_bits(mode):
    """QuantizeLinear (one float32 scale, an 8-bit zero point), QLinearConv with constant
    scales and zero points (the integer tiles, requantized in their epilogue) and
    DequantizeLinear."""
    rng = np.random.default_rng(10)
    nodes = [n("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             n("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["yq"],
               pads=[1, 1, 1, 1]),
             n("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    inits = [const("xs", np.array(0.05, np.float32)), const("xz", np.array(120, np.uint8)),
             const("w", rng.integers(-100, 100, (16, 8, 3, 3), dtype=np.int8)),
             const("ws", np.array(0.01, np.float32)), const("wz", np.array(0, np.int8)),
             const("ys", np.array(0.2, np.float32)), const("yz", np.array(128, np.uint8))]
    model = make(nodes, [tensor("x", F, [1, 8, 6, 6])], [tensor("y", F, None)], inits)
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    from graphrt.kernels.gemm import micro_int
    compiled = {"QuantizeLinear", "DequantizeLinear"} | \
        ({"QLinearConv"} if micro_int.AVAILABLE else set())     # (else the float path)
    _each_step_calls_and_run(model, {"x": x}, mode, compiled)


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_attention_steps_are_compiled_calls_with_their_runs_bits(mode):
    """Attention (3-d heads with a float mask, 4-d causal with a bool mask) and
    com.microsoft Attention's expansion (MaskBias from key counts, then Attention)."""
    rng = np.random.default_rng(11)
    b, s, heads, size = 2, 5, 2, 4
    hidden = heads * size
    mask = rng.standard_normal((b, 1, s, s)).astype(np.float32)
    nodes = [n("Attention", ["q", "k", "v", "m"], ["y3"], q_num_heads=heads, kv_num_heads=heads),
             n("Reshape", ["y3", "shape4"], ["y34"]),
             n("Transpose", ["y34"], ["q4"], perm=[0, 2, 1, 3]),
             n("Attention", ["q4", "q4", "q4", "bm"], ["y4"], is_causal=1),
             n("Attention", ["x", "w", "bias", "lengths"], ["ym"], domain="com.microsoft",
               num_heads=heads)]
    inits = [const("m", mask), const("shape4", np.array([b, s, heads, size], np.int64)),
             const("bm", rng.random((b, heads, s, s)) > 0.3),
             const("w", (rng.standard_normal((hidden, 3 * hidden)) / hidden).astype(np.float32)),
             const("bias", rng.standard_normal(3 * hidden).astype(np.float32)),
             const("lengths", np.array([3, 5], np.int32))]
    qkv = [tensor(name, F, [b, s, hidden]) for name in ("q", "k", "v", "x")]
    graph = helper.make_graph(nodes, "g", qkv, [tensor(o, F, None) for o in ("y4", "ym")],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    feeds = {name: rng.standard_normal((b, s, hidden)).astype(np.float32)
             for name in ("q", "k", "v", "x")}
    feeds["q"][1, 2, 3] = np.nan
    _each_step_calls_and_run(model, feeds, mode, {"Attention", "MaskBias"})
