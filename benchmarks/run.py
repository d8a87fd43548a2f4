"""graphrt next to onnxruntime, in one process, on the same inputs.

    python -m benchmarks.run [--quick] [--models bert-b1 resnet50 ...] [--threads 1 2]

For every model and thread count both runtimes get a session of their own (graphrt:
SessionOptions(intra_op_threads=n); onnxruntime: intra_op_num_threads=n, inter_op 1,
sequential execution, default graph optimisations), a first run that is timed with the
session's creation (graphrt's includes numba's compile or cache load), then warm runs in
alternating blocks (A...B...A...B...) whose median is reported. Peak memory is the rise of
the process's resident set (VmHWM after resetting it through /proc/self/clear_refs) over
session creation, the first run and two more; where that is not available, tracemalloc's
peak, which sees numpy's allocations but not onnxruntime's. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import gc
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import tracemalloc

import numpy as np

from . import models as M

ROWS = 1_000_000            # rows of the batch-scoring case
ENV_SHOWN = ("OPENBLAS_CORETYPE", "GRAPHRT_GEMM", "NUMBA_NUM_THREADS")
SCORE_BATCH = 10_000


# ----------------------------------------------------------------------------- cases

class Case:
    """One model with its inputs: ``score`` cases time a whole pass over ROWS rows."""

    def __init__(self, name, make, feeds, score=False, note=""):
        self.name, self.make, self.feeds, self.score, self.note = name, make, feeds, score, note


def _normal(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _light_case(name, path):
    def feeds():
        import onnx
        m = onnx.load(path, load_external_data=False)
        inits = {t.name for t in m.graph.initializer}
        out = {}
        for i in m.graph.input:
            if i.name not in inits:
                dims = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
                out[i.name] = _normal(dims)
        return out
    return Case(name, lambda: open(path, "rb").read(), feeds)


def all_cases(quick: bool) -> list[Case]:
    cases = [_light_case(name, path) for name, path in M.light_models().items()]
    bert = M.bert_encoder()
    cases += [
        Case("bert-b1", bert.SerializeToString, lambda: {"x": _normal((1, 128, 768))},
             note="hidden 768, 12 heads, 4 layers, seq 128"),
        Case("bert-b8", bert.SerializeToString, lambda: {"x": _normal((8, 128, 768))}),
        Case("gpt-block", lambda: M.gpt_block().SerializeToString(),
             lambda: {"x": _normal((1, 128, 768))}, note="one decoder block, seq 128"),
        Case("mlp-1M-rows", lambda: M.mlp().SerializeToString(),
             lambda: {"x": _normal((ROWS, 32))}, score=True,
             note=f"32-128-128-8 Gemm/Relu, {ROWS:,} rows in batches of {SCORE_BATCH:,}"),
        Case("tiny", lambda: M.tiny().SerializeToString(), lambda: {"x": _normal((1, 16))},
             note="5 small ops"),
    ]
    return cases


QUICK = ("resnet50", "squeezenet", "bert-b1", "gpt-block", "mlp-1M-rows", "tiny")


# ----------------------------------------------------------------------------- runtimes

class GraphRT:
    label = "graphrt"

    def __init__(self, data, threads, mode="fast"):
        import graphrt
        self.model = graphrt.load(data, intra_op_threads=threads, mode=mode)
        self.names = [i.name for i in self.model.inputs]

    def run(self, feeds):
        return self.model.session.run(None, feeds)[0]

    def score(self, x, out):
        for i in range(0, len(x), SCORE_BATCH):
            self.model.run_into(x[i:i + SCORE_BATCH], out[i:i + SCORE_BATCH])

    def settle(self, case, feeds) -> None:
        """graphrt's steady state before the timed runs (settled)."""
        if case.score:
            x = feeds[self.names[0]]
            settled(self.model.session,
                    lambda: self.score(x[:SCORE_BATCH], np.empty((SCORE_BATCH, 8), np.float32)))
        else:
            settled(self.model.session, lambda: self.run(feeds))


def settled(session, run) -> None:
    """Runs (``run()``) and waits until graphrt's background compiles are done and a run
    changes nothing: a reused plan compiles its jitted schedule in the background, and after
    a cold first run the parallel kernels are compiled, planned with at the next run, whose
    plan then compiles its own schedule."""
    for _ in range(4):
        built = session.plans_built
        session.wait_for_schedules(600)
        run()
        run()
        session.wait_for_schedules(600)
        if session.plans_built == built:
            return


def ort_session(data, threads):
    """onnxruntime as both benchmarks run it: n intra-op threads, sequential, CPU."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


class RunRow:
    """One runtime's measurements of one case: first run, runs 2-5, run MiB, steady times."""

    def __init__(self):
        self.error = None
        self.first = self.early = self.mib = None
        self.times: list[float] = []
        self.outs = None

    @property
    def steady(self):
        return statistics.median(self.times) if self.times else None


def start_runs(cls, data, feeds, threads, mem, early: int = 0, more: int = 0):
    """A runner ``cls(data, threads)``, its first run (timed with its creation), ``early``
    timed runs after it (their median: RunRow.early) and ``more`` untimed ones, all inside
    the memory measure ``mem`` (PeakMemory); then the runner settles (graphrt: its jitted
    schedules). Returns (runner or None, RunRow): a model a runtime cannot run is a row with
    its error, not a crash."""
    row = RunRow()
    measuring = False
    try:
        t0 = time.perf_counter()
        rt = cls(data, threads)
        t1 = time.perf_counter()
        mem.start()
        measuring = True
        t1b = time.perf_counter()
        row.outs = rt.run(feeds)
        row.first = (t1 - t0) + (time.perf_counter() - t1b)
        times = []
        for _ in range(early):
            t = time.perf_counter()
            rt.run(feeds)
            times.append(time.perf_counter() - t)
        row.early = statistics.median(times) if times else None
        for _ in range(more):
            rt.run(feeds)
        row.mib = mem.stop()
        measuring = False
        rt.settle(feeds)
        return rt, row
    except Exception as e:  # a model a runtime cannot run is a row, not a crash
        row.error = f"{type(e).__name__}: {e}".splitlines()[0][:200]
        if measuring:
            mem.stop()
        return None, row


class OrtRunner:
    """onnxruntime for the zoo and trees runners: every output of a run, nothing to settle."""

    def __init__(self, data, threads):
        self.sess = ort_session(data, threads)

    def run(self, feeds):
        return self.sess.run(None, feeds)

    def settle(self, feeds):
        pass


class OnnxRuntime:
    label = "onnxruntime"

    def __init__(self, data, threads, mode=None):
        self.sess = ort_session(data, threads)
        self.name = self.sess.get_inputs()[0].name

    def run(self, feeds):
        return self.sess.run(None, feeds)[0]

    def score(self, x, out):
        for i in range(0, len(x), SCORE_BATCH):
            out[i:i + SCORE_BATCH] = self.sess.run(None, {self.name: x[i:i + SCORE_BATCH]})[0]


# ----------------------------------------------------------------------------- measures

class PeakMemory:
    """Peak resident-set rise (Linux: VmHWM reset by clear_refs), else tracemalloc's peak."""

    def __init__(self):
        self.rss = _can_reset_hwm()
        self.what = "peak RSS rise" if self.rss else "tracemalloc peak (numpy only)"

    def start(self):
        gc.collect()
        _trim()
        if self.rss:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.base = _status("VmRSS")
        else:
            tracemalloc.start()
            tracemalloc.reset_peak()
            self.base = tracemalloc.get_traced_memory()[0]

    def stop(self) -> float:
        """MiB."""
        if self.rss:
            return (_status("VmHWM") - self.base) / 1024
        peak = tracemalloc.get_traced_memory()[1] - self.base
        tracemalloc.stop()
        return peak / 2**20


def _trim() -> None:
    """Give freed heap pages back (glibc), so that memory reused by the next session shows
    up in the resident set again instead of hiding in the allocator's free lists."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _status(key) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])     # kB
    raise KeyError(key)


def _can_reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        _status("VmHWM")
        return True
    except OSError:
        return False


class Result:
    def __init__(self):
        self.error = None
        self.first = self.peak = None
        self.times = []

    @property
    def median(self):
        return statistics.median(self.times) if self.times else None


def start(cls, case, data, feeds, threads, mem, mode="fast") -> tuple:
    """(runtime or None, Result with first-run time and peak memory, first output)."""
    res = Result()
    mem.start()
    try:
        t0 = time.perf_counter()
        rt = cls(data, threads, mode)
        if case.score:
            x = feeds["x"][:SCORE_BATCH]
            out = np.empty((len(x), 8), np.float32)
            rt.score(x, out)
        else:
            out = rt.run(feeds)
        res.first = time.perf_counter() - t0
        for _ in range(2 if not case.score else 0):
            rt.run(feeds)
    except Exception as e:   # a model the runtime cannot run is a row, not a crash
        res.error = f"{type(e).__name__}: {e}".splitlines()[0][:160]
        mem.stop()
        return None, res, None
    res.peak = mem.stop()
    return rt, res, out


def time_block(rt, case, feeds, budget, min_runs, out) -> list:
    times = []
    t_end = time.perf_counter() + budget
    while len(times) < min_runs or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        if case.score:
            rt.score(feeds["x"], out)
        else:
            rt.run(feeds)
        times.append(time.perf_counter() - t0)
        if case.score and len(times) >= min_runs:
            break
    return times


def measure(case, threads, quick, mem, exact=False) -> dict:
    data = case.make()
    feeds = case.feeds()
    rows = {}
    runtimes = [("graphrt", GraphRT, "fast"), ("onnxruntime", OnnxRuntime, None)]
    if exact:
        runtimes.append(("graphrt-exact", GraphRT, "exact"))
    live, outs = [], {}
    for key, cls, mode in runtimes:
        rt, res, out = start(cls, case, data, feeds, threads, mem, mode)
        rows[key] = res
        if rt is not None:
            live.append((key, rt))
            outs[key] = out
    for key, rt in live:
        if hasattr(rt, "settle"):
            rt.settle(case, feeds)
    rounds = 3
    budget = (0.3 if quick else 2.0) / rounds
    min_runs = (1 if case.score else 2) if quick else (1 if case.score else 4)
    score_out = np.empty((ROWS, 8), np.float32) if case.score else None
    for _ in range(rounds):
        for key, rt in live:
            rows[key].times += time_block(rt, case, feeds, budget, min_runs, score_out)
    if "graphrt" in outs and "onnxruntime" in outs:
        a, b = outs["graphrt"], outs["onnxruntime"]
        rows["diff"] = float(np.max(np.abs(a - b)) / max(1e-30, float(np.max(np.abs(b)))))
    return rows


# ----------------------------------------------------------------------------- report

def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def header(argv, mem, load_start) -> str:
    import numba
    import onnxruntime
    import graphrt
    from graphrt.kernels.gemm import blas
    lines = [
        f"Command: `{shlex.join(['python', '-m', 'benchmarks.run', *argv])}`"
        + (f" with {', '.join(f'{k}={os.environ[k]}' for k in ENV_SHOWN if k in os.environ)}"
           if any(k in os.environ for k in ENV_SHOWN) else ""),
        f"Date: {datetime.datetime.now().isoformat(timespec='minutes')}; CPU: {cpu_model()}, "
        f"{os.cpu_count()} logical cores; Python {platform.python_version()}, "
        f"graphrt {graphrt.__version__}, onnxruntime {onnxruntime.__version__}, "
        f"numba {numba.__version__}, numpy {np.__version__}; BLAS kernels: {blas.corename()}. "
        f"The machine is shared with other jobs: timings are noisy (load average 1/5/15 min: "
        f"{load_start} at the start, {load()} at the end; {os.cpu_count()} cores).",
        f"Latency: median of warm runs, ms (scoring rows: one pass over all rows, ms). "
        f"First run: session creation + first run, ms. Memory: {mem.what}, MiB.",
    ]
    return "\n".join(lines)


def fmt(x, digits=None):
    if x is None:
        return "–"
    if digits is None:
        digits = 3 if x < 1 else (2 if x < 10 else (1 if x < 100 else 0))
    return f"{x:.{digits}f}"


def progress(name, threads, g, o, seconds, error=None) -> None:
    """One line on stderr per measured row (seconds: the row's wall time)."""
    print(f"# {name} x{threads}: graphrt {fmt(g and g * 1e3)} ms, onnxruntime "
          f"{fmt(o and o * 1e3)} ms ({seconds:.1f} s)" + (f" {error}" if error else ""),
          file=sys.stderr, flush=True)


def publish(report: str, output: str | None) -> None:
    print(report)
    if output:
        with open(output, "w") as f:
            f.write(report + "\n")


def tail_cells(g_first, o_first, g_mib, o_mib, rows, notes) -> list[str]:
    """The cells both tables end with: first runs (s -> ms), memory (MiB), the outputs'
    difference and the notes."""
    return [fmt(g_first and g_first * 1e3), fmt(o_first and o_first * 1e3), fmt(g_mib, 1),
            fmt(o_mib, 1), f"{rows['diff']:.1e}" if "diff" in rows else "–", "; ".join(notes)]


def markdown(cols, rows) -> str:
    """A markdown table of string cells; '|' in a cell is written as '/'."""
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values))


def table(results, exact) -> str:
    cols = ["model", "threads", "graphrt ms", "onnxruntime ms", "ratio"]
    if exact:
        cols += ["exact ms", "exact ratio"]
    cols += ["graphrt first run ms", "onnxruntime first run ms", "graphrt MiB",
             "onnxruntime MiB", "max rel diff", "note"]
    lines = []
    for name, threads, rows, note in results:
        g, o = rows["graphrt"], rows["onnxruntime"]
        gm = g.median * 1e3 if g.median else None
        om = o.median * 1e3 if o.median else None
        ratio = gm / om if gm and om else None
        cells = [name, str(threads), fmt(gm), fmt(om), fmt(ratio, 2)]
        if exact:
            e = rows["graphrt-exact"]
            em = e.median * 1e3 if e.median else None
            cells += [fmt(em), fmt(em / om if em and om else None, 2)]
        notes = [note] if note else []
        for key in rows:
            if isinstance(rows[key], Result) and rows[key].error:
                notes.append(f"{key}: {rows[key].error}")
        lines.append(cells + tail_cells(g.first, o.first, g.peak, o.peak, rows, notes))
    return markdown(cols, lines)


def geomeans(results) -> str:
    out = []
    for threads in sorted({t for _, t, _, _ in results}):
        ratios = [r["graphrt"].median / r["onnxruntime"].median
                  for name, t, r, _ in results
                  if t == threads and not name.startswith(("mlp", "tiny", "gpt"))
                  and r["graphrt"].median and r["onnxruntime"].median]
        if ratios:
            gm = geomean(ratios)
            out.append(f"geometric-mean ratio graphrt/onnxruntime at {threads} thread(s) over "
                       f"the {len(ratios)} light/BERT rows that ran in both: {gm:.2f}")
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"fewer runs and only {', '.join(QUICK)} (under 2 minutes)")
    ap.add_argument("--models", nargs="+", help="model names (default: all, or the quick set)")
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--exact", action="store_true", help="also time graphrt's exact mode")
    ap.add_argument("--output", help="also write the report to this file")
    args = ap.parse_args(argv)
    cases = all_cases(args.quick)
    names = [c.name for c in cases]
    wanted = args.models or (list(QUICK) if args.quick else names)
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        ap.error(f"unknown models {unknown}; known: {names}")
    mem = PeakMemory()
    load_start = load()
    results = []
    for case in cases:
        if case.name not in wanted:
            continue
        for threads in args.threads:
            t0 = time.perf_counter()
            rows = measure(case, threads, args.quick, mem, args.exact)
            results.append((case.name, threads, rows, case.note))
            progress(case.name, threads, rows["graphrt"].median, rows["onnxruntime"].median,
                     time.perf_counter() - t0)
    publish("\n\n".join([header(argv, mem, load_start), table(results, args.exact),
                         geomeans(results)]), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
