"""Steady memory: many runs of one session alternating between input shapes.

    python -m benchmarks.soak [--runs 10000] [--shapes 6] [--cache 16] [--threads 1] [--exact]

One graphrt session over a small BERT-shaped encoder (hidden 128, 2 layers, dynamic batch and
sequence) is run ``--runs`` times, cycling through ``--shapes`` (batch, sequence) pairs —
each pair is its own plan, and the cycle revisits them all, so the plan cache fills and stays
full (with ``--cache`` below ``--shapes``, plans are evicted and built again all the time). Resident memory (VmRSS, Linux) is sampled every 500 runs; the table shows it and its
rise since the first sample taken after every shape has run twice and the jitted schedules
those second runs start have compiled (the warm-up). Steady
memory means that rise stays near zero: plans, their slabs, run states and arenas are made
once and reused, and nothing accumulates per run.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time

import numpy as np

import graphrt

from . import models as M
from .run import _status, _trim

SHAPES = [(1, 16), (2, 32), (4, 8), (1, 64), (3, 24), (8, 16), (2, 48), (5, 40)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.soak")
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--shapes", type=int, default=6, help=f"at most {len(SHAPES)}")
    ap.add_argument("--cache", type=int, default=16, help="SessionOptions.max_cached_plans")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--every", type=int, default=500)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    shapes = SHAPES[:max(1, min(args.shapes, len(SHAPES)))]
    model = M.bert_encoder(hidden=128, heads=4, layers=2, seq="seq")
    sess = graphrt.Session(model.SerializeToString(), graphrt.SessionOptions(
        intra_op_threads=args.threads, mode="exact" if args.exact else "fast",
        max_cached_plans=args.cache))
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((b, s, 128)).astype(np.float32)} for b, s in shapes]
    rows = []
    base = None
    t0 = time.perf_counter()
    warm = 2 * len(feeds)       # every shape twice: plans made, jitted schedules started
    for i in range(args.runs):
        sess.run(None, feeds[i % len(feeds)])
        if i + 1 == warm:
            sess.wait_for_schedules(600)
        if (i + 1) % args.every == 0 or i + 1 == warm:
            gc.collect()
            _trim()
            rss = _status("VmRSS") / 1024
            if base is None and i + 1 >= warm:
                base = rss
            rows.append((i + 1, rss, rss - base))
            print(f"# {i + 1} runs: RSS {rss:.1f} MiB", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - t0
    print(f"Command: `python -m benchmarks.soak {' '.join(sys.argv[1:] if argv is None else argv)}`"
          f"; {args.runs} runs over {len(shapes)} shapes {shapes} of a 2-layer encoder "
          f"(hidden 128), {args.threads} thread(s), {'exact' if args.exact else 'fast'} mode, "
          f"{elapsed:.1f} s; max_cached_plans {args.cache}, plans built {sess.plans_built}.\n")
    print("| runs | RSS MiB | rise since warm-up MiB |\n|---|---|---|")
    for n, rss, rise in rows:
        print(f"| {n} | {rss:.1f} | {rise:+.1f} |")
    late = [r for n, _, r in rows if n >= args.runs // 2]
    print(f"\nrise over the second half of the runs: {max(late) - min(late):.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
