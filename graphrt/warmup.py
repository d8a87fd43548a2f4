"""Compiling ahead of time: fill the kernel cache for given models or a common operator set.

    graphrt warmup model.onnx [more.onnx ...] [--ops common] [--mode fast|exact|both]
    graphrt.warmup(["model.onnx"], ops="common", modes=("fast",))

A model is warmed by running it on random inputs of its declared types, symbolic dims set to
each of ``sizes`` in turn (default 1, then 64: the one-row and the many-row kernel paths,
serial and parallel variants), at ``threads`` (0: one per core, as sessions default to). The common set is one
single-operator model per entry of COMMON, run at the same sizes. Everything compiled lands
in the on-disk cache (cache.py) that later processes load from: run it when a Docker image,
a CI job or a cluster starts, with the cache folder (GRAPHRT_CACHE_DIR) shared or kept.
"""
from __future__ import annotations

import time

from .compare import random_feeds
from .compiling import compiled
from .errors import SessionError
from .onnx_proto import TensorProto
from .options import SessionOptions
from .plan import warm
from .session import Session

SIZES = (1, 64)
F = TensorProto.FLOAT
I64 = TensorProto.INT64

# (operator, attributes, inputs as (dims, element type); "n" is the size), opset 20
COMMON = [
    ("MatMul", {}, [(("n", 64), F), ((64, 64), F)]),
    ("Gemm", {"transB": 1}, [(("n", 64), F), ((48, 64), F), ((48,), F)]),
    ("Conv", {"pads": [1, 1, 1, 1]}, [(("n", 8, 16, 16), F), ((8, 8, 3, 3), F), ((8,), F)]),
    ("Conv", {"group": 8}, [(("n", 8, 16, 16), F), ((8, 1, 3, 3), F)]),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}, [(("n", 8, 16, 16), F)]),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, [(("n", 8, 16, 16), F)]),
    ("GlobalAveragePool", {}, [(("n", 8, 16, 16), F)]),
    ("BatchNormalization", {}, [(("n", 8, 4, 4), F)] + [((8,), F)] * 4),
    ("LayerNormalization", {"axis": -1}, [(("n", 64), F), ((64,), F), ((64,), F)]),
    ("Softmax", {"axis": -1}, [(("n", 64), F)]),
    ("Add", {}, [(("n", 64), F), ((64,), F)]),
    ("Sub", {}, [(("n", 64), F), (("n", 64), F)]),
    ("Mul", {}, [(("n", 64), F), ((1,), F)]),
    ("Div", {}, [(("n", 64), F), ((64,), F)]),
    ("Relu", {}, [(("n", 64), F)]),
    ("Sigmoid", {}, [(("n", 64), F)]),
    ("Tanh", {}, [(("n", 64), F)]),
    ("Erf", {}, [(("n", 64), F)]),
    ("Sqrt", {}, [(("n", 64), F)]),
    ("Exp", {}, [(("n", 64), F)]),
    ("ReduceMean", {"keepdims": 1}, [(("n", 64), F)]),
    ("Transpose", {"perm": [1, 0, 2]}, [(("n", 4, 16), F)]),
    ("Concat", {"axis": 1}, [(("n", 32), F), (("n", 32), F)]),
    ("Gather", {"axis": 0}, [((100, 64), F), (("n",), I64)]),
    ("Where", {}, [(("n", 64), TensorProto.BOOL), (("n", 64), F), ((64,), F)]),
    ("Gelu", {}, [(("n", 64), F)]),
    ("HardSwish", {}, [(("n", 64), F)]),
    ("HardSigmoid", {}, [(("n", 64), F)]),
    ("Pow", {}, [(("n", 64), F), ((1,), F)]),
    ("Cast", {"to": I64}, [(("n", 64), F)]),
    ("Cast", {"to": F}, [(("n", 64), I64)]),
    ("Transpose", {"perm": [1, 0, 2]}, [(("n", 4, 16), I64)]),
    ("LSTM", {"hidden_size": 16}, [(("n", 1, 8), F), ((1, 64, 8), F), ((1, 64, 16), F)]),
    ("GRU", {"hidden_size": 16}, [(("n", 1, 8), F), ((1, 48, 8), F), ((1, 48, 16), F)]),
    ("Add", {}, [(("n",), I64), ((1,), I64)]),
    ("Mul", {}, [(("n",), I64), ((1,), I64)]),
    ("Equal", {}, [(("n",), I64), ((1,), I64)]),
    ("And", {}, [(("n", 64), TensorProto.BOOL), (("n", 64), TensorProto.BOOL)]),
]
SETS = {"common": COMMON}


def common_model(op: str, attrs: dict, inputs):
    """One node of ``op`` over inputs named x0, x1, ... (dims with "n" symbolic), as an
    onnx.ModelProto (onnx imported here, not with graphrt)."""
    from onnx import helper
    names = [f"x{i}" for i in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], **attrs)
    ins = [helper.make_tensor_value_info(n, t, list(d)) for n, (d, t) in zip(names, inputs)]
    out = helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)
    graph = helper.make_graph([node], f"warmup_{op}", ins, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def _warm(src, label: str, mode: str, sizes, dims: dict | None, threads) -> dict:
    t0, k0 = time.perf_counter(), compiled()
    error = None
    try:
        sess = Session(src, SessionOptions(mode=mode, intra_op_threads=threads))
        symbolic = {d for info in sess.inputs for d in (info.dims or ()) if isinstance(d, str)}
        for size in sizes:
            feeds = random_feeds(sess, {**{d: size for d in symbolic}, **(dims or {})})
            for _ in range(2):      # (the second run builds what later runs run: its blocks)
                sess.run(None, feeds)
    except SessionError as e:
        error = str(e)
    return {"model": label, "mode": mode, "seconds": time.perf_counter() - t0,
            "compiled": compiled() - k0, "error": error}


def warmup(models=(), *, ops: str | None = None, modes=("fast",), sizes=SIZES,
           dims: dict | None = None, threads: int = 0, report=None) -> list[dict]:
    """Compile (or load from the cache) what ``models`` (paths, bytes or ModelProtos) need,
    and with ``ops`` ("common") the operator set of that name, in each of ``modes``; one
    record per model and mode: seconds, kernels compiled (0 when all came from the cache),
    the SessionError if it could not run. ``report(record)`` is called as each finishes."""
    if ops is not None and ops not in SETS:
        raise ValueError(f"unknown operator set {ops!r} (known: {', '.join(SETS)})")
    jobs = [(m, m if isinstance(m, str) else f"model {i}") for i, m in enumerate(models)]
    if ops is not None:
        for k, (op, attrs, inputs) in enumerate(SETS[ops]):
            jobs.append((common_model(op, attrs, inputs), f"{ops}[{k}] {op}"))
    records = []
    with warm.turned_off():     # every kernel here, parallel ones too (plan/warm.py)
        for mode in modes:
            for src, label in jobs:
                rec = _warm(src, label, mode, sizes, dims, threads)
                records.append(rec)
                if report is not None:
                    report(rec)
    return records
