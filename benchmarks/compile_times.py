"""What a cold first run compiles: every kernel with its compile seconds (numba's event API).

    python -m benchmarks.compile_times [--models bert resnet18 ...] [--top 15]

Each model runs in a fresh process with an empty cache folder of its own; the table lists
the kernels compiled at top level (a kernel's time includes the helpers compiled for it) in
session creation and in the first run, longest first, and the totals.
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
import json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
from numba.core import event
records, stack, phase = [], [], ["import"]
class Timer(event.Listener):
    def on_start(self, e):
        stack.append(time.perf_counter())
    def on_end(self, e):
        t = time.perf_counter() - stack.pop()
        if not stack:
            d = e.data["dispatcher"]
            name = d.py_func.__module__.replace("graphrt.kernels.", "") + "." + d.py_func.__qualname__
            records.append([round(t, 3), phase[0], name, str(e.data["args"][0])[:40]])
event.register("numba:compile", Timer())
import graphrt
feeds = dict(np.load(sys.argv[2]))
phase[0] = "session"
t0 = time.perf_counter()
sess = graphrt.Session(sys.argv[1])
phase[0] = "run"
t1 = time.perf_counter()
sess.run(None, feeds)
t2 = time.perf_counter()
print(json.dumps({"session": t1 - t0, "run": t2 - t1, "records": records}))
"""


def profile(name: str) -> dict:
    path, _ = make.load(name)
    folder = tempfile.mkdtemp(prefix="graphrt-compile-times-")
    env = dict(os.environ, GRAPHRT_CACHE_DIR=folder, GRAPHRT_JIT_SCHEDULE="0")
    env.pop("NUMBA_CACHE_DIR", None)
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, path,
                               os.path.join(make.zoo_dir(), name + ".npz")],
                              env=env, capture_output=True, text=True, timeout=3600)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*", default=["bert"])
    p.add_argument("--top", type=int, default=15)
    a = p.parse_args(argv)
    for name in a.models:
        rec = profile(name)
        recs = sorted(rec["records"], reverse=True)
        total = sum(r[0] for r in recs)
        print(f"\n{name}: session {rec['session']:.1f} s, first run {rec['run']:.1f} s; "
              f"{len(recs)} kernels compiled in {total:.1f} s\n")
        print("| kernel | first argument | when | s |\n|---|---|---|---:|")
        for t, when, kernel, arg in recs[:a.top]:
            print(f"| {kernel} | {arg} | {when} | {t:.2f} |")
        rest = recs[a.top:]
        if rest:
            print(f"| {len(rest)} more | | | {sum(r[0] for r in rest):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
