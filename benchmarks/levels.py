"""What each optimisation level buys: graphrt at levels none, basic and all on the same
inputs, one process, median latencies, the passes' rewrite counts, and onnxruntime's
median for reference.

    python -m benchmarks.levels [--models resnet50 bert-b1 ...] [--threads 1] [--runs 10]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import graphrt

from .run import OnnxRuntime, all_cases, cpu_model, settled

DEFAULT = ("resnet50", "inception_v1", "squeezenet", "bert-b1", "gpt-block")
LEVELS = ("none", "basic", "all")


def median_ms(fn, runs: int, session=None) -> float:
    fn()                                    # warm: plan made, kernels compiled
    if session is not None:                 # graphrt: its background compiles done too
        settled(session, fn)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.levels", description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=list(DEFAULT))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args(argv)
    cases = {c.name: c for c in all_cases(False)}
    print(f"# {' '.join(['python -m benchmarks.levels'] + (argv or sys.argv[1:]))}  ({time.strftime('%Y-%m-%d %H:%M')}, "
          f"{cpu_model()}, {args.threads} thread(s), median of {args.runs})\n")
    print("| model | " + " | ".join(f"level {lv} ms" for lv in LEVELS)
          + " | none/all | onnxruntime ms | rewrites at all |")
    print("|---|" + "---|" * (len(LEVELS) + 3))
    for name in args.models:
        case = cases[name]
        data, feeds = case.make(), case.feeds()
        row, counts = [], {}
        for level in LEVELS:
            sess = graphrt.Session(data, graphrt.SessionOptions(intra_op_threads=args.threads,
                                                                optimization_level=level))
            row.append(median_ms(lambda: sess.run(None, feeds), args.runs, sess))
            counts = {k: v for k, v in sess.pass_counts.items() if v}
        ort = OnnxRuntime(data, args.threads)
        ort_ms = median_ms(lambda: ort.run(feeds), args.runs)
        print(f"| {name} | " + " | ".join(f"{t:.2f}" for t in row) + f" | {row[0] / row[-1]:.2f} | "
              f"{ort_ms:.2f} | {', '.join(f'{k} {v}' for k, v in counts.items())} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
