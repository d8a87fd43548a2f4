"""A random fuzzer for bad models and inputs: every case must end in a result or a
SessionError (never a crash, a hang or another exception).

    python -m tests.fuzz 5000          # longer run; prints the outcome counts

tests/test_fuzz.py runs a bounded number of cases in CI.
"""
from __future__ import annotations

import collections
import sys

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import graphrt

from . import models
from .models import F, make, tensor

I64 = TensorProto.INT64
SEEDS = [models.mlp().SerializeToString(), models.transformer_block().SerializeToString(),
         models.shapes_model().SerializeToString()]
FEEDS = [{"x": np.ones((2, 16), np.float32)}, {"x": np.ones((1, 3, 32), np.float32)},
         {"x": np.ones((2, 3, 4), np.float32)}]


def _indexing_model(rng):
    """One index-taking node with random (often out-of-range) indices or sizes."""
    n = helper.make_node
    data = tensor("x", F, [3, 4])
    pick = rng.integers(0, 9)
    idx = rng.integers(-12, 12, size=rng.integers(1, 4)).astype(np.int64)
    big = np.array([rng.choice([-5, 0, 3, 1 << 40])], np.int64)
    consts = {"i": idx, "big": big, "k": np.array([rng.integers(-2, 9)], np.int64)}
    node = [n("Gather", ["x", "i"], ["y"], axis=int(rng.integers(-3, 3))),
            n("GatherElements", ["x", "i2"], ["y"], axis=int(rng.integers(-2, 2))),
            n("ScatterND", ["x", "i3", "u"], ["y"]),
            n("OneHot", ["i", "k", "v"], ["y"]),
            n("Slice", ["x", "i", "i"], ["y"]),
            n("TopK", ["x", "k"], ["y", "yi"]),
            n("Expand", ["x", "big2"], ["y"]),
            n("Tile", ["x", "big2"], ["y"]),
            n("Range", ["s", "l", "d"], ["y"])][pick]
    consts["i2"] = rng.integers(-6, 6, size=(3, 4)).astype(np.int64)
    consts["i3"] = rng.integers(-5, 5, size=(2, 1)).astype(np.int64)
    consts["u"] = np.ones((2, 4), np.float32)
    consts["v"] = np.array([0, 1], np.float32)
    consts["big2"] = np.array([rng.choice([1, 3, -1, 1 << 31]), rng.choice([1, 4, 0, 1 << 33])], np.int64)
    consts["s"] = np.array(0, np.float32)
    consts["l"] = np.array(rng.choice([5.0, 1e12, np.nan, np.inf]), np.float32)
    consts["d"] = np.array(rng.choice([1.0, 0.0, -1.0, 1e-30]), np.float32)
    inits = [helper.make_tensor(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape, v.reshape(-1).tolist())
             for k, v in consts.items() if k in node.input]
    outs = [tensor(o, 0, None) for o in node.output]
    return make([node], [data], outs, inits), {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}


def _mutated_bytes(rng):
    k = int(rng.integers(0, len(SEEDS)))
    raw = bytearray(SEEDS[k])
    kind = rng.integers(0, 3)
    if kind == 0:
        raw = raw[:rng.integers(0, len(raw))]
    elif kind == 1:
        for _ in range(rng.integers(1, 9)):
            raw[rng.integers(0, len(raw))] = rng.integers(0, 256)
    else:
        i = rng.integers(0, len(raw))
        raw[i:i] = rng.bytes(int(rng.integers(1, 17)))
    return bytes(raw), FEEDS[k]


def _odd_input(rng):
    dtype = rng.choice([np.float32, np.float64, np.int64, np.bool_])
    shape = tuple(int(d) for d in rng.integers(0, 20, size=rng.integers(0, 4)))
    with np.errstate(invalid="ignore"):
        x = np.full(shape, rng.choice([0.0, np.nan, np.inf, -1e38, 1.0])).astype(dtype)
    return models.mlp().SerializeToString(), {"x": x}


def one_case(rng) -> str:
    maker = [_indexing_model, _mutated_bytes, _odd_input][int(rng.integers(0, 3))]
    src, feeds = maker(rng)
    try:
        sess = graphrt.Session(src)
        names = {i.name for i in sess.inputs}
        got = sess.run(None, {k: v for k, v in feeds.items() if k in names})
    except graphrt.SessionError as e:
        return f"SessionError({e.kind})"
    if maker is not _indexing_model:
        return "result"
    try:                                    # a result must be the right one
        with np.errstate(all="ignore"):
            want = ReferenceEvaluator(src).run(None, feeds)
    except Exception:  # noqa: BLE001 - the reference refuses what graphrt computed
        return "result (the reference evaluator raised)"
    same = all(np.array_equal(g, w, equal_nan=g.dtype.kind == "f") for g, w in zip(got, want))
    return "result equal to the reference" if same else "MISMATCH with the reference"


def run(n: int, seed: int = 0) -> collections.Counter:
    rng = np.random.default_rng(seed)
    return collections.Counter(one_case(rng) for _ in range(n))


if __name__ == "__main__":
    counts = run(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
    for outcome, k in counts.most_common():
        print(f"{k:6d}  {outcome}")
    print(f"{sum(counts.values())} cases, no crash and no other exception")
