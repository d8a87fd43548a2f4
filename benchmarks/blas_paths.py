"""Fast-mode GEMM paths next to onnxruntime, in one process.

    python -m benchmarks.blas_paths [bert-b1 bert-b8 mlp-1M-rows] [--threads 1 2] [--rounds 5]

Four sessions per model and thread count: graphrt with each GRAPHRT_GEMM path (loop: the
blocked numba kernel; blas: OpenBLAS tiles; tiles: graphrt's micro-kernel, the default) and
onnxruntime; timed in alternating blocks, medians in ms. GRAPHRT_GEMM is read when a plan is
made (the first run).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from . import models as M
from .run import ROWS, SCORE_BATCH, GraphRT, OnnxRuntime, cpu_model, load


def _x(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


CASES = {
    "bert-b1": (M.bert_encoder, lambda: _x(1, 128, 768), False),
    "bert-b8": (M.bert_encoder, lambda: _x(8, 128, 768), False),
    "mlp-1M-rows": (M.mlp, lambda: _x(ROWS, 32), True),
}


PATHS = ("loop", "blas", "tiles")


def measure(name, threads, rounds):
    make, feed, score = CASES[name]
    data, x = make().SerializeToString(), feed()
    feeds = {"x": x}
    out = np.empty((len(x), 8), np.float32) if score else None
    rts = {}
    for key in PATHS:
        os.environ["GRAPHRT_GEMM"] = key
        rts[key] = GraphRT(data, threads)
        for _ in range(2):      # the second run starts the jitted schedule's compile
            rts[key].score(x[:SCORE_BATCH], out) if score else rts[key].run(feeds)
        rts[key].model.session.wait_for_schedules(600)
    os.environ.pop("GRAPHRT_GEMM")
    rts["onnxruntime"] = OnnxRuntime(data, threads)
    times = {k: [] for k in rts}
    for _ in range(rounds):
        for key, rt in rts.items():
            for _ in range(1 if score else 3):
                t0 = time.perf_counter()
                rt.score(x, out) if score else rt.run(feeds)
                times[key].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.blas_paths")
    ap.add_argument("models", nargs="*", help=f"some of {', '.join(CASES)} (default: all)")
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    unknown = sorted(set(args.models) - set(CASES))
    if unknown:
        ap.error(f"unknown models {unknown}")
    from graphrt.kernels.gemm import blas
    start = load()
    lines = ["| model | threads | loop ms | blas ms | tiles ms | onnxruntime ms | "
             "loop / ort | blas / ort | tiles / ort |", "|---|---|---|---|---|---|---|---|---|"]
    for name in args.models or list(CASES):
        for threads in args.threads:
            m = measure(name, threads, args.rounds)
            o = m["onnxruntime"]
            lines.append(f"| {name} | {threads} | " + " | ".join(
                f"{m[k]:.1f}" for k in PATHS + ("onnxruntime",)) + " | " +
                " | ".join(f"{m[k] / o:.2f}" for k in PATHS) + " |")
            print(lines[-1], file=sys.stderr, flush=True)
    print(f"BLAS kernels: {blas.corename()}; CPU: {cpu_model()}; load average {start} at the "
          f"start, {load()} at the end (shared machine).\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
