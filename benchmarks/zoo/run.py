"""The zoo (benchmarks/zoo/make.py) run by graphrt and onnxruntime in one process.

    python -m benchmarks.zoo.run [--models bert yolo ...] [--threads 1 2] [--output t.md]

Per model and thread count, each runtime gets a session of its own. Reported:
- steady: the median of warm runs in three alternating blocks per runtime (graphrt after its
  jitted schedule compiled, Session.wait_for_schedules);
- first: session creation + the first run;
- runs 2-5: the median of the four runs right after the first, as a user who has just
  loaded the model meets them (graphrt's schedule may still be compiling);
- run MiB: how far the resident set's peak rose above its level after session creation,
  over the first run and the next ten (scratch, arena, slab, compiled code loaded);
- max rel diff over all outputs: max |graphrt - onnxruntime| / max |onnxruntime|.
The geometric mean and the worst ratio are taken over the models of this issue (float32);
quantized, float16 and tree-ensemble models are listed apart (other issues' work).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from ..run import (OrtRunner, PeakMemory, RunRow, cpu_model, fmt, geomean, load, markdown,
                   progress, publish, settled, start_runs, tail_cells)
from . import make

BLOCKS = 3


class _GraphRT:
    def __init__(self, data, threads):
        import graphrt
        self.model = graphrt.load(data, intra_op_threads=threads)

    def run(self, feeds):
        return self.model.session.run(None, feeds)

    def settle(self, feeds):
        settled(self.model.session, lambda: self.run(feeds))


def measure(name, threads, budget, mem) -> dict:
    data, feeds = make.load(name)
    rows, live = {}, []
    for key, cls in (("graphrt", _GraphRT), ("onnxruntime", OrtRunner)):
        rt, row = start_runs(cls, data, feeds, threads, mem, early=4, more=6)
        rows[key] = row
        if rt is not None:
            live.append((key, rt))
    for _ in range(BLOCKS):
        for key, rt in live:
            end = time.perf_counter() + budget / BLOCKS
            while len(rows[key].times) < 3 or time.perf_counter() < end:
                t = time.perf_counter()
                rt.run(feeds)
                rows[key].times.append(time.perf_counter() - t)
    g, o = rows["graphrt"].outs, rows["onnxruntime"].outs
    if g is not None and o is not None:
        worst = 0.0
        for a, b in zip(g, o):
            a, b = np.asarray(a), np.asarray(b)
            if a.dtype.kind in "fc" or b.dtype.kind in "fc":
                d = np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0)
                worst = max(worst, float(d / max(1e-30, float(np.max(np.abs(b), initial=0.0)))))
            elif not np.array_equal(a, b):
                worst = max(worst, float(np.mean(a != b)))
        rows["diff"] = worst
    return rows


def table(results) -> str:
    cols = ["model", "threads", "graphrt ms", "onnxruntime ms", "ratio", "graphrt runs 2-5 ms",
            "runs 2-5 / steady", "graphrt first ms", "onnxruntime first ms", "graphrt run MiB",
            "onnxruntime run MiB", "max rel diff", "note"]
    lines = []
    for name, threads, rows in results:
        g, o = rows["graphrt"], rows["onnxruntime"]
        gs, os_ = g.steady, o.steady
        notes = [f"{k}: {r.error}" for k, r in rows.items() if isinstance(r, RunRow) and r.error]
        if name in make.OTHER_ISSUES:
            notes.insert(0, "other issue")
        cells = [name, str(threads), fmt(gs and gs * 1e3), fmt(os_ and os_ * 1e3),
                 fmt(gs / os_ if gs and os_ else None, 2), fmt(g.early and g.early * 1e3),
                 fmt(g.early / gs if g.early and gs else None, 2)]
        lines.append(cells + tail_cells(g.first, o.first, g.mib, o.mib, rows, notes))
    return markdown(cols, lines)


def summary(results) -> str:
    out = []
    for threads in sorted({t for _, t, _ in results}):
        ratios = {n: r["graphrt"].steady / r["onnxruntime"].steady for n, t, r in results
                  if t == threads and n not in make.OTHER_ISSUES
                  and r["graphrt"].steady and r["onnxruntime"].steady}
        failed = [n for n, t, r in results if t == threads and n not in make.OTHER_ISSUES
                  and not (r["graphrt"].steady and r["onnxruntime"].steady)]
        if ratios:
            gm = geomean(ratios.values())
            worst = max(ratios, key=ratios.get)
            early = [r["graphrt"].early / r["graphrt"].steady for n, t, r in results
                     if t == threads and n in ratios]
            out.append(f"{threads} thread(s): geometric-mean ratio {gm:.2f} over {len(ratios)} "
                       f"models, worst {worst} {ratios[worst]:.2f}; runs 2-5 / steady: worst "
                       f"{max(early):.1f}, median {statistics.median(early):.2f}"
                       + (f"; not run by both: {', '.join(failed)}" if failed else ""))
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m benchmarks.zoo.run",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", choices=sorted(make.MODELS))
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--budget", type=float, default=1.5, help="seconds of timed runs per runtime")
    ap.add_argument("--output")
    a = ap.parse_args(argv)
    names = [n for n in (a.models or make.MODELS) if n in make.available()]
    missing = sorted(set(a.models or make.MODELS) - set(names))
    if missing:
        print(f"# not generated (python -m benchmarks.zoo.make): {missing}", file=sys.stderr)
    mem = PeakMemory()
    load_start = load()
    import graphrt
    import onnxruntime
    results = []
    for name in names:
        for threads in a.threads:
            t0 = time.perf_counter()
            rows = measure(name, threads, a.budget, mem)
            results.append((name, threads, rows))
            progress(name, threads, rows["graphrt"].steady, rows["onnxruntime"].steady,
                     time.perf_counter() - t0, rows["graphrt"].error)
    head = (f"Command: `python -m benchmarks.zoo.run {' '.join(argv)}`; CPU: {cpu_model()}; "
            f"graphrt {graphrt.__version__}, onnxruntime {onnxruntime.__version__}; load "
            f"average {load_start} at the start, {load()} at the end. Times in ms.")
    publish("\n\n".join([head, table(results), summary(results)]), a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
