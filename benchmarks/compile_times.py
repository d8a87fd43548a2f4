"""What a cold first run compiles: every kernel with its compile seconds (numba's event API).

    python -m benchmarks.compile_times [--models bert resnet18 ...] [--top 15]

Each model runs in a fresh process with an empty cache folder of its own; the table lists
the kernels compiled at top level (a kernel's time includes the helpers compiled for it) in
session creation and in the first run, longest first, and the totals, each against issue
41's budget (0.5 s serial, 1 s parallel) with the reason where one is over (REASONS).
The GEMM tile entries are numba cfuncs, which the event API does not report.
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
records, stack, phase, firsts = [], [], ["import"], []
class Timer(event.Listener):
    def on_start(self, e):
        if not stack:
            firsts.append(not firsts)
        stack.append(time.perf_counter())
    def on_end(self, e):
        t = time.perf_counter() - stack.pop()
        if not stack:
            d = e.data["dispatcher"]
            name = d.py_func.__module__.replace("graphrt.kernels.", "") + "." + d.py_func.__qualname__
            records.append([round(t, 3), phase[0], name, str(e.data["args"][0])[:40],
                            firsts[-1]])
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


# Issue 41's budget: a kernel's cold compile, callees included
BUDGET = {"serial": 0.5, "parallel": 1.0}

# Why a kernel is over budget, by a fragment of its name (first match); measured with this
# benchmark and numba's event API (a kernel's time includes the callees compiled for it)
REASONS = (
    ("_par_", "a parallel form: numba outlines the prange body and compiles it a second "
              "time (its serial twin is compiled first: plan/warm.py)"),
    ("microkernel.block_", "the GEMM's blocked tile driver: A and B packing, three row "
                           "heights, three column forms, the edge buffer; compiled once per "
                           "element type (both modes) and called by address"),
    ("normalization.norm_layer_rows", "two blocked pairwise sums (values, then squared "
                                      "deviations; LLVM IR) and the affine row, a callee "
                                      "linked in"),
    ("recurrent.lstm_step", "the gate activations, rnn_apply and the few-rows product "
                            "linked in"),
    ("recurrent.gru_step", "the gate activations, rnn_apply and the few-rows product "
                           "linked in"),
    ("softmax.softmax", "the row maximum, exp and the blocked sum linked in"),
    ("conv.conv_depthwise", "the phase split (split_phases, copy_phases) compiled as its "
                            "callees and linked in beside the tap chains (nine taps a pass "
                            "for 3x3 windows, else five)"),
    ("conv.conv_split_planes", "the phase split (split_phases, copy_phases) compiled as its "
                               "callees and linked in"),
    ("reduce.reduce_", "the blocked pairwise sum over a set of runs (its set and run "
                       "helpers) compiled as callees and linked in"),
    ("pool.maxpool_plane", "the phase split (copy_phases), the NaN check and the output "
                           "copy linked in beside three tap loops (plain max, NaN-aware max, "
                           "the fill); which max loop runs depends on the data"),
    ("product.matmul_tiles", "one tile template for every product: the epilogue, Relu and "
                             "NaN passes beside the tile loop"),
    ("product.gemm_tiles", "one tile template for every product: the epilogue, Relu and "
                           "NaN passes beside the tile loop"),
)


FIRST = ("the process's first compile, which carries numba's first-use setup (its typing and "
         "lowering registries imported and installed: about 0.3 s)")


def verdict(kernel: str, seconds: float, first: bool = False) -> str:
    """'' within budget, else the reason it is over (or that none is recorded yet)."""
    form = "parallel" if "_par_" in kernel else "serial"
    if seconds <= BUDGET[form]:
        return ""
    reason = FIRST if first else \
        next((why for frag, why in REASONS if frag in kernel), "not analysed yet")
    return f"over the {form} budget ({BUDGET[form]} s): {reason}"


def profile(name: str) -> dict:
    path, _ = make.load(name)
    folder = tempfile.mkdtemp(prefix="graphrt-compile-times-")
    env = dict(os.environ, GRAPHRT_CACHE_DIR=folder)
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
        print("| kernel | first argument | when | s | budget |\n|---|---|---|---:|---|")
        for t, when, kernel, arg, first in recs[:a.top]:
            print(f"| {kernel} | {arg} | {when} | {t:.2f} | {verdict(kernel, t, first)} |")
        rest = recs[a.top:]
        if rest:
            over = sum(bool(verdict(r[2], r[0], r[4])) for r in rest)
            print(f"| {len(rest)} more | | | {sum(r[0] for r in rest):.2f} | "
                  f"{over} of them over |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
