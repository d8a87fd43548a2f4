"""Accuracy of float32 sums: graphrt (fast and exact), onnxruntime and numpy against an
exactly rounded reference, per operator, length and kind of input.

    python -m benchmarks.accuracy [--markdown]

Each case is one row of n float32 values reduced by one node (ReduceSum, ReduceMean,
ReduceL2, ReduceLogSumExp over the row; LayerNormalization's output, which depends on the
mean and variance of the row; Softmax's largest output, which depends on its denominator).
The reference evaluates the same formula in exact rational arithmetic where it is a sum
(math.fsum of the float64 values, which are the float32 values exactly) and in float64
elsewhere, and the error reported is the largest relative error |y - ref| / |ref| over
eight rows of different seeds (LayerNormalization: the largest absolute error, its outputs
being of order 1). Kinds of input: "same sign" uniform on [0.5, 1.5), "constant" every
value 0.1 (the case that adds one rounding error after another in one direction), "mixed"
standard normal, "offset" 1000 + standard normal (a large mean: the variance is
ill-conditioned).
"""
from __future__ import annotations

import argparse
import math

import numpy as np
from onnx import TensorProto, helper

import graphrt

LENGTHS = (64, 1024, 4096, 65536)
KINDS = ("same sign", "constant", "mixed", "offset")


def _values(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "same sign":
        return (rng.random(n) + 0.5).astype(np.float32)
    if kind == "constant":
        return np.full(n, 0.1, np.float32)
    if kind == "mixed":
        return rng.standard_normal(n).astype(np.float32)
    return (1000 + rng.standard_normal(n)).astype(np.float32)


def _model(op: str, n: int) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = []
    if op == "LayerNormalization":
        inits = [helper.make_tensor("s", TensorProto.FLOAT, [n], np.ones(n, np.float32)),
                 helper.make_tensor("b", TensorProto.FLOAT, [n], np.zeros(n, np.float32))]
        node = helper.make_node(op, ["x", "s", "b"], ["y"], axis=-1)
    elif op == "Softmax":
        node = helper.make_node(op, ["x"], ["y"], axis=-1)
    else:
        inits = [helper.make_tensor("a", TensorProto.INT64, [1], [1])]
        node = helper.make_node(op, ["x", "a"], ["y"], keepdims=0)
    g = helper.make_graph([node], "g", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


def _reference(op: str, row: np.ndarray) -> np.ndarray:
    v = row.astype(np.float64)
    n = v.size
    if op == "ReduceSum":
        return np.float64(math.fsum(v))
    if op == "ReduceMean":
        return np.float64(math.fsum(v) / n)
    if op == "ReduceL2":
        return np.float64(math.sqrt(math.fsum(v * v)))      # v*v exact in float64
    if op == "ReduceLogSumExp":
        m = v.max()
        return np.float64(m + math.log(math.fsum(np.exp(v - m))))
    if op == "Softmax":
        e = np.exp(v - v.max())
        return np.float64(e.max() / math.fsum(e))
    mean = math.fsum(v) / n
    var = math.fsum((v - mean) ** 2) / n
    return (v - mean) / math.sqrt(var + 1e-5)


def _pick(op: str, y: np.ndarray) -> np.ndarray:
    return y.max(axis=-1) if op == "Softmax" else y


def measure(op: str, kind: str, n: int, runners: dict) -> dict:
    x = np.stack([_values(kind, n, seed) for seed in range(8)])
    ref = np.stack([_reference(op, row) for row in x])
    errors = {}
    for name, run in runners.items():
        y = _pick(op, np.asarray(run(_model(op, n), x), np.float64))
        if op == "LayerNormalization":
            errors[name] = float(np.max(np.abs(y - ref)))
        else:
            errors[name] = float(np.max(np.abs(y - ref) / np.abs(ref)))
    return errors


def _numpy(op: str):
    def run(_model_bytes, x):
        if op == "ReduceSum":
            return x.sum(axis=1)
        if op == "ReduceMean":
            return x.mean(axis=1)
        if op == "ReduceL2":
            return np.sqrt((x * x).sum(axis=1))
        if op == "ReduceLogSumExp":
            m = x.max(axis=1, keepdims=True)
            return (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]
        if op == "Softmax":
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
        return (x - mean) / np.sqrt(var + np.float32(1e-5))
    return run


def runners(op: str) -> dict:
    out = {}
    for mode in ("fast", "exact"):
        def run(m, x, mode=mode):
            return graphrt.Session(m, graphrt.SessionOptions(mode=mode)).run(None, {"x": x})[0]
        out[f"graphrt {mode}"] = run
    try:
        import onnxruntime as ort

        def run_ort(m, x):
            return ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(
                None, {"x": x})[0]
        out["onnxruntime"] = run_ort
    except ImportError:
        pass
    out["numpy"] = _numpy(op)
    return out


OPERATORS = ("ReduceSum", "ReduceMean", "ReduceL2", "ReduceLogSumExp", "Softmax",
             "LayerNormalization")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", nargs="*", default=list(OPERATORS))
    p.add_argument("--lengths", nargs="*", type=int, default=list(LENGTHS))
    args = p.parse_args(argv)
    header = None
    for op in args.ops:
        run = runners(op)
        if header is None:
            header = ["operator", "n", "input"] + list(run)
            print("| " + " | ".join(header) + " |")
            print("|" + " --- |" * len(header))
        for n in args.lengths:
            for kind in KINDS:
                if op == "LayerNormalization" and kind == "constant":
                    continue        # variance 0: the output is 0 / sqrt(eps) for everyone
                e = measure(op, kind, n, run)
                print(f"| {op} | {n} | {kind} | " + " | ".join(f"{e[k]:.1e}" for k in run) + " |",
                      flush=True)


if __name__ == "__main__":
    main()
