"""Per-step cost: models of a few hundred tiny operators, graphrt beside onnxruntime.

    python -m benchmarks.steps [--steps 300] [--threads 1]

Each model is a chain of ``--steps`` blocks of one kind on a 4 x 4 float32 tensor: a
1 x 8 x 6 x 6 image for convolutions and pools; for LSTM and GRU a sequence of 4 steps of 8
features, each block the recurrence and the Squeeze of its direction axis; Cast16 casts to
float16 and back on alternate steps. A run is almost all dispatch, so the time a run takes
divided by the number of blocks is what a block costs beyond its (tiny) kernels.
graphrt's runs are timed after its jitted schedule compiled (Session.wait_for_schedules),
onnxruntime's with its graph optimisations off; both runtimes run in one process,
alternating blocks of runs, and the best block of each counts. The models are made with
onnx.helper (this measures dispatch, not an exporter's graph).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import graphrt

from .run import settled

SHAPE = [4, 4]
IMAGE = [1, 8, 6, 6]
CONVS = {"Conv1x1": (1, 1), "Conv3x3": (3, 1), "DepthwiseConv": (3, 8)}     # kernel, group


SEQUENCE = [4, 1, 8]             # (steps, batch, features) of the recurrences' blocks
RECURRENT = ("LSTM", "GRU")


def shape_of(kind: str) -> list:
    if kind in RECURRENT:
        return SEQUENCE
    return IMAGE if kind in CONVS or kind.endswith("Pool") else SHAPE


def _chain(kind: str, steps: int):
    """(nodes, initializers, output name) of ``steps`` operators of ``kind`` on "x"."""
    nodes, inits, prev = [], [], "x"
    if kind == "Gemm":
        w = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32) / 4
        inits.append(numpy_helper.from_array(w, "w"))
    if kind in CONVS:
        k, group = CONVS[kind]
        c = IMAGE[1]
        w = np.random.default_rng(0).standard_normal((c, c // group, k, k)).astype(np.float32)
        inits += [numpy_helper.from_array(w / (k * k * c // group), "w"),
                  numpy_helper.from_array(np.zeros(c, np.float32), "b")]
    if kind in RECURRENT:
        gates, hidden = (4 if kind == "LSTM" else 3), SEQUENCE[2]
        rng = np.random.default_rng(0)
        for name, cols in (("w", hidden), ("r", hidden)):
            v = rng.standard_normal((1, gates * hidden, cols)).astype(np.float32) / hidden
            inits.append(numpy_helper.from_array(v, name))
        inits.append(numpy_helper.from_array(np.array([1], np.int64), "axis"))
    if kind == "LayerNormalization":
        inits += [numpy_helper.from_array(np.ones(4, np.float32), "g"),
                  numpy_helper.from_array(np.zeros(4, np.float32), "b")]
    for i in range(steps):
        out = f"t{i}"
        if kind == "Split+Concat":
            if i % 2 == 0:
                nodes.append(helper.make_node("Split", [prev], [out + "a", out + "b"], axis=1,
                                              num_outputs=2))
            else:
                nodes.append(helper.make_node("Concat", [f"t{i - 1}b", f"t{i - 1}a"], [out],
                                              axis=1))
        elif kind == "Transpose":
            nodes.append(helper.make_node("Transpose", [prev], [out], perm=[1, 0]))
        elif kind in CONVS:
            k = CONVS[kind][0]
            nodes.append(helper.make_node("Conv", [prev, "w", "b"], [out], group=CONVS[kind][1],
                                          pads=[k // 2] * 4))
        elif kind.endswith("Pool"):
            nodes.append(helper.make_node(kind, [prev], [out], kernel_shape=[3, 3],
                                          pads=[1, 1, 1, 1]))
        elif kind in RECURRENT:            # the block: a recurrence and the Squeeze after it
            nodes += [helper.make_node(kind, [prev, "w", "r"], [out + "y"],
                                       hidden_size=SEQUENCE[2]),
                      helper.make_node("Squeeze", [out + "y", "axis"], [out])]
        elif kind == "Cast16":              # float32 -> float16, and back on the next step
            to = TensorProto.FLOAT16 if i % 2 == 0 else TensorProto.FLOAT
            nodes.append(helper.make_node("Cast", [prev], [out], to=to))
        elif kind == "Gemm":
            nodes.append(helper.make_node("Gemm", [prev, "w"], [out]))
        elif kind == "LayerNormalization":
            nodes.append(helper.make_node(kind, [prev, "g", "b"], [out]))
        else:
            nodes.append(helper.make_node(kind, [prev], [out]))
        prev = out
    return nodes, inits, prev


def model(kind: str, steps: int) -> bytes:
    steps += steps % 2 if kind in PAIRED else 0
    nodes, inits, out = _chain(kind, steps)
    shape = shape_of(kind)
    g = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, shape)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


def _best(fn, runs: int, blocks: int) -> float:
    best = float("inf")
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(runs):
            fn()
        best = min(best, (time.perf_counter() - t0) / runs)
    return best


KINDS = ["Relu", "Softmax", "LayerNormalization", "Transpose", "Split+Concat", "Gemm",
         *CONVS, "MaxPool", "AveragePool", "Cast16", *RECURRENT]
PAIRED = ("Split+Concat", "Cast16")     # kinds whose steps come in pairs


def main(argv=None) -> int:
    import onnxruntime as ort
    ap = argparse.ArgumentParser(prog="python -m benchmarks.steps")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--kinds", nargs="*", default=KINDS)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    print(f"| operator | steps | graphrt µs/run | graphrt µs/step | onnxruntime µs/step | ratio |")
    print("|---|---|---|---|---|---|")
    for kind in args.kinds:
        x = np.random.default_rng(1).standard_normal(shape_of(kind)).astype(np.float32)
        data = model(kind, args.steps)
        g = graphrt.Session(data, graphrt.SessionOptions(intra_op_threads=args.threads))
        settled(g, lambda: g.run(None, {"x": x}))
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        o = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        tg, to = float("inf"), float("inf")
        for _ in range(3):
            tg = min(tg, _best(lambda: g.run(None, {"x": x}), 300, 1))
            to = min(to, _best(lambda: o.run(None, {"x": x}), 300, 1))
        n = args.steps + (args.steps % 2 if kind in PAIRED else 0)
        print(f"| {kind} | {n} | {tg * 1e6:.1f} | {tg * 1e6 / n:.2f} | {to * 1e6 / n:.2f} | "
              f"{tg / to:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
