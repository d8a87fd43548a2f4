"""Resident memory of a process that loads one model and runs it: graphrt beside onnxruntime.

    python -m benchmarks.memory [--models bert yolo crnn] [--runs 20] [--threads 1]

Each runtime runs in a fresh process per model (warm kernel cache for graphrt: the model is
run once in a process of its own first). The resident set (VmRSS) is read after the import,
after the session is made, after the first run and after ``--runs`` runs: **import** is the
first; **session + runs** what the session and its runs add to it; **runs** what the runs
add to the session's; **process** the last reading. The models are the zoo's
(`python -m benchmarks.zoo.make`).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
runtime, name, runs, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
base = rss()
if runtime == "graphrt":
    import graphrt
else:
    import onnxruntime as ort
imported = rss()
from benchmarks.zoo import make
data, feeds = make.load(name)
if runtime == "graphrt":
    s = graphrt.Session(data, graphrt.SessionOptions(intra_op_threads=threads))
else:
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    s = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
session = rss()
s.run(None, feeds)
first = rss()
for _ in range(runs - 1):
    s.run(None, feeds)
print(json.dumps(dict(base=base, imported=imported, session=session, first=first, last=rss())))
"""


def measure(runtime: str, name: str, runs: int, threads: int) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.getcwd()] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    out = subprocess.run([sys.executable, "-c", CHILD, runtime, name, str(runs), str(threads)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.memory")
    ap.add_argument("--models", nargs="+", default=["bert", "yolo", "crnn"])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    print("| model | runtime | import MiB | session + runs MiB | runs MiB | process MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for name in args.models:
        measure("graphrt", name, 1, args.threads)        # (a warm kernel cache)
        for runtime in ("graphrt", "onnxruntime"):
            m = measure(runtime, name, args.runs, args.threads)
            print(f"| {name} | {runtime} | {m['imported']:.0f} | "
                  f"{m['last'] - m['imported']:.0f} | {m['last'] - m['session']:.0f} | "
                  f"{m['last']:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
