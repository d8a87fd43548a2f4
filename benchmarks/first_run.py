"""First run: how long a fresh process takes from `import` to its first result.

    python -m benchmarks.first_run [--models bert crnn ...] [--threads 2] [--output t.md]

For each zoo model (benchmarks/zoo/make.py), fresh processes:
- graphrt cold: an empty cache folder (GRAPHRT_CACHE_DIR) of its own, so every kernel the
  model needs is compiled, as on a new machine, container or CI job;
- graphrt warm: the same folder again, every kernel loaded from it;
- onnxruntime: its import, session creation and first run.
Each process reports import, session creation and first-run seconds and (graphrt) the kernels
it compiled. One process at a time: compiling uses the cores the measurement is about.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from .zoo import make

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
runtime, path, feeds_path, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
feeds = dict(np.load(feeds_path))
t1 = time.perf_counter()
if runtime == "graphrt":
    import graphrt
    from graphrt.compiling import compiled
    t2 = time.perf_counter()
    sess = graphrt.Session(path, graphrt.SessionOptions(intra_op_threads=threads))
    t3 = time.perf_counter()
    sess.run(None, feeds)
    n = compiled()
else:
    import onnxruntime as ort
    t2 = time.perf_counter()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    t3 = time.perf_counter()
    sess.run(None, feeds)
    n = 0
t4 = time.perf_counter()
print(json.dumps({"import": t2 - t1, "session": t3 - t2, "run": t4 - t3,
                  "total": t4 - t1, "compiled": n}))
"""


def child(runtime: str, name: str, threads: int, cache: str | None) -> dict:
    path, _ = make.load(name)
    feeds = os.path.join(make.zoo_dir(), name + ".npz")
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    if cache is not None:
        env["GRAPHRT_CACHE_DIR"] = cache
    proc = subprocess.run([sys.executable, "-c", CHILD, runtime, path, feeds, str(threads)],
                          env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:120]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cell(rec: dict, detail: bool = True) -> str:
    if "error" in rec:
        return "error: " + rec["error"]
    if not detail:
        return f"{rec['total']:.2f}"
    return (f"{rec['total']:.2f} ({rec['import']:.1f} + {rec['session']:.1f} + {rec['run']:.1f})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--output", help="also write the table to this markdown file")
    a = p.parse_args(argv)
    names = a.models or make.available()
    lines = [f"First result of a fresh process, seconds (import + session + first run), "
             f"{a.threads} threads:", "",
             "| model | onnxruntime | graphrt cold | kernels compiled | graphrt warm |",
             "|---|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    for name in names:
        folder = tempfile.mkdtemp(prefix="graphrt-first-run-")
        try:
            ort = child("onnxruntime", name, a.threads, None)
            cold = child("graphrt", name, a.threads, folder)
            warm = child("graphrt", name, a.threads, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        line = (f"| {name} | {_cell(ort, False)} | {_cell(cold)} | {cold.get('compiled', '-')} | "
                f"{_cell(warm)} |")
        lines.append(line)
        print(line, flush=True)
    if a.output:
        with open(a.output, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
