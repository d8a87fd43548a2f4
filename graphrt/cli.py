"""The ``graphrt`` command: run, info, bench and score a model from the shell.

    graphrt run model.onnx --input x.npy --output out.npz
    graphrt info model.onnx
    graphrt bench model.onnx --dim batch=8 --runs 100
    graphrt score model.onnx rows.parquet --batch-size 4096 --output scores.parquet
    graphrt compare model.onnx --input x.npz --against onnxruntime
    graphrt warmup model.onnx --ops common --mode both
    graphrt cache info

Errors are printed as one line (the SessionError message) with exit status 2; ``compare``
exits with 1 when the results differ beyond tolerance.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter

import numpy as np

from . import cache, dtypes as _dt
from .compare import PEERS, compare, describe, random_feeds
from .errors import SessionError
from .importer import read_model
from .kernels.table import DEFAULT
from .options import SessionOptions
from .score import load_data, save_outputs, score, to_feeds
from .session import Session
from .warmup import SETS, warmup


def main(argv=None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except SessionError as e:
        print(f"graphrt: error: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"graphrt: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("graphrt: interrupted", file=sys.stderr)
        return 130
    except Exception as e:     # a graphrt bug: still one line, with what to report
        print(f"graphrt: internal error ({type(e).__name__}): {e}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="graphrt", description="Run ONNX models with graphrt.")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name, func, help_):
        c = sub.add_parser(name, help=help_, description=help_)
        c.add_argument("model", help="an .onnx file")
        c.add_argument("--mode", choices=("fast", "exact"), default="fast",
                       help="fast (default) or exact (the same bits on every machine)")
        c.add_argument("--threads", type=int, default=0,
                       help="intra-op threads (0: one per core; changes speed only)")
        c.add_argument("--opt", choices=("none", "basic", "all"), default="all",
                       help="graph optimization level ('basic' keeps every intermediate value)")
        c.set_defaults(func=func)
        return c

    c = command("run", _run, "Run a model once on inputs from .npy/.npz/.parquet files.")
    c.add_argument("--input", "-i", required=True,
                   help=".npy (one-input models), .npz (arrays named after the inputs) or .parquet")
    c.add_argument("--output", "-o", help="write the results to .npz, .npy or .parquet")
    c.add_argument("--value", action="append", default=None, metavar="NAME",
                   help="a value to return instead of the graph outputs (repeatable; any "
                        "intermediate value of the graph by its ONNX name)")

    command("info", _info, "Describe a model: inputs, outputs, opsets, operators, what graphrt lacks.")

    c = command("bench", _bench, "Time a model on random inputs (first run and median latency).")
    c.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="the extent of a symbolic dimension (repeatable; unset ones are 1)")
    c.add_argument("--runs", type=int, default=50, help="timed runs after the first (default 50)")
    c.add_argument("--seed", type=int, default=0, help="random inputs' seed")
    c.add_argument("--no-ort", action="store_true", help="skip the onnxruntime comparison")

    c = command("score", _score, "Score a data file in batches, with a progress bar.")
    c.add_argument("data", help=".npy, .npz or .parquet rows (axis 0)")
    c.add_argument("--batch-size", "-b", type=int, default=1024)
    c.add_argument("--output", "-o", help="write the results to .npz, .npy or .parquet")
    c.add_argument("--value", action="append", default=None, metavar="NAME",
                   help="a value to score instead of the graph outputs (repeatable)")
    c.add_argument("--no-progress", action="store_true", help="no progress bar")

    c = command("compare", _compare, "Compare graphrt's results with onnxruntime's or onnx's reference "
                "evaluator's; where they differ, name the first node whose output differs.")
    c.add_argument("--input", "-i", help=".npy, .npz or .parquet inputs (default: random ones)")
    c.add_argument("--against", choices=PEERS, default="onnxruntime",
                   help="the other runtime: onnxruntime (default) or reference (onnx.reference)")
    c.add_argument("--rtol", type=float, default=None,
                   help="relative tolerance (default by element type: float32 1e-4, float64 1e-9, "
                        "float16 1e-2)")
    c.add_argument("--atol", type=float, default=None,
                   help="absolute tolerance (default by element type: float32 1e-5, float64 1e-12, "
                        "float16 1e-3)")
    c.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="random inputs: the extent of a symbolic dimension (repeatable; unset ones are 1)")
    c.add_argument("--seed", type=int, default=0, help="random inputs' seed")
    c.add_argument("--no-walk", action="store_true",
                   help="compare the outputs only, not the intermediate values")

    c = sub.add_parser("warmup", help="Compile ahead of time: fill the kernel cache for models "
                       "or a common operator set.",
                       description="Compile ahead of time: run each model on random inputs "
                       "(symbolic dims 1, then 64) and/or the common operator set, so that "
                       "later processes load the kernels from the cache (GRAPHRT_CACHE_DIR).")
    c.add_argument("models", nargs="*", help=".onnx files to warm (run on random inputs)")
    c.add_argument("--ops", choices=sorted(SETS), default=None,
                   help="also warm this operator set")
    c.add_argument("--mode", choices=("fast", "exact", "both"), default="fast")
    c.add_argument("--threads", type=int, default=0,
                   help="intra-op threads as the sessions will use them (0: one per core)")
    c.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="a symbolic dimension's extent (repeatable; others take each of the "
                        "sizes 1 and 64 in turn)")
    c.set_defaults(func=_warmup)

    c = sub.add_parser("cache", help="Show or clear graphrt's compiled-code cache.",
                       description="graphrt's compiled kernels (GRAPHRT_CACHE_DIR, "
                       "default ~/.cache/graphrt).")
    c.add_argument("action", choices=("info", "clear"))
    c.set_defaults(func=_cache)
    return p


def _warmup(args) -> int:
    if not args.models and args.ops is None:
        print("graphrt: error: give models to warm, or --ops common", file=sys.stderr)
        return 2
    modes = ("fast", "exact") if args.mode == "both" else (args.mode,)
    t0 = time.perf_counter()

    def report(rec):
        state = f"error: {rec['error']}" if rec["error"] else f"{rec['compiled']} compiled"
        print(f"{rec['seconds']:7.2f} s  {rec['mode']:5s}  {rec['model']}  ({state})", flush=True)

    records = warmup(args.models, ops=args.ops, modes=modes, dims=_parse_dims(args.dim),
                     threads=args.threads, report=report)
    print(f"warmed {len(records)} in {time.perf_counter() - t0:.1f} s: "
          f"{sum(r['compiled'] for r in records)} kernels compiled")
    return 1 if any(r["error"] for r in records) else 0


def _cache(args) -> None:
    if args.action == "clear":
        gone = cache.clear()
        print("removed " + (", ".join(gone) if gone else "nothing (the cache was empty)"))
        return
    for part, rec in cache.info().items():
        print(f"{part:9s} {rec['folder']}: {rec['files']} files, {rec['bytes'] / 2**20:.1f} MiB"
              + (f", {rec['compiled']} compiled specialisations" if part == "kernels" else ""))


def _session(args) -> Session:
    return Session(args.model, SessionOptions(mode=args.mode, intra_op_threads=args.threads,
                                              optimization_level=args.opt))


def _run(args) -> None:
    sess = _session(args)
    feeds = to_feeds(sess, load_data(args.input))
    names = args.value or [o.name for o in sess.outputs]
    _emit(dict(zip(names, sess.run(names, feeds))), args.output)


def _score(args) -> None:
    sess = _session(args)
    names = args.value or [o.name for o in sess.outputs]
    out = score(sess, load_data(args.data), args.batch_size, progress=not args.no_progress,
                output_names=names)
    _emit(out if isinstance(out, dict) else {names[0]: out}, args.output)


def _compare(args) -> int:
    result = compare(args.model, args.input, against=args.against, mode=args.mode,
                     rtol=args.rtol, atol=args.atol, dims=_parse_dims(args.dim), seed=args.seed,
                     threads=args.threads, optimization_level=args.opt, walk=not args.no_walk)
    print(result.report())
    return 0 if result.agree else 1


def _emit(outputs: dict, path) -> None:
    if path:
        save_outputs(path, outputs)
        print(f"wrote {', '.join(f'{k} {_shape(v)}' for k, v in outputs.items())} to {path}")
        return
    for name, value in outputs.items():
        if not isinstance(value, np.ndarray):
            print(f"{name}: {value!r}")
            continue
        print(f"{name}: {_dt.name_of(value.dtype)} {_shape(value)}")
        print(np.array2string(value, precision=6, threshold=40, edgeitems=3))


def _info(args) -> None:
    model, _ = read_model(args.model)
    g = model.graph
    print(f"model: {os.path.basename(args.model)} ({os.path.getsize(args.model) / 1024:.1f} KiB, "
          f"ir {model.ir_version}"
          f"{', producer ' + model.producer if model.producer else ''})")
    print("opsets: " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(model.opsets.items())))
    print("inputs:")
    for info in g.inputs:
        if info.name not in g.initializers:
            print(f"  {info.name}: {describe(info)}")
    print("outputs:")
    for info in g.outputs:
        print(f"  {info.name}: {describe(info)}")
    weights = sum(a.nbytes for a in g.initializers.values())
    print(f"weights: {len(g.initializers)} initializers, {weights / 1024:.1f} KiB")
    counts = Counter()
    _count_ops(g, counts)
    print(f"operators ({sum(counts.values())} nodes, subgraphs included):")
    missing, inexact = [], []
    for (domain, op), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        label = f"{domain}.{op}" if domain else op
        opset = model.opsets.get(domain)
        opdef = DEFAULT.resolve(domain, op, opset) if opset is not None else None
        note = ""
        if opdef is None:
            missing.append(f"{label} (opset {opset})")
            note = "  (not in graphrt)"
        elif not getattr(opdef.resolve(), "supports_exact", False):
            inexact.append(label)
            note = "  (fast mode only)"
        print(f"  {label:<28}{n:>6}{note}")
    print("graphrt lacks: " + (", ".join(missing) if missing else "nothing"))
    if inexact:
        print("no exact-mode kernel: " + ", ".join(inexact))


def _count_ops(g, counts: Counter) -> None:
    for n in g.nodes:
        counts[(n.domain, n.op_type)] += 1
        for value in n.attrs.values():
            for body in value if isinstance(value, list) else [value]:
                if hasattr(body, "nodes") and hasattr(body, "initializers"):
                    _count_ops(body, counts)


def _bench(args) -> None:
    dims = _parse_dims(args.dim)
    if args.runs < 1:
        raise ValueError("--runs must be at least 1")
    t0 = time.perf_counter()
    sess = _session(args)
    created = time.perf_counter() - t0
    feeds = random_feeds(sess, dims, args.seed)
    print(f"graphrt: mode {args.mode}, threads {args.threads or 'all'}, kernel path {sess.kernel_path}")
    print("inputs: " + ", ".join(f"{k} {_dt.name_of(v.dtype)} {_shape(v)}" for k, v in feeds.items()))
    t0 = time.perf_counter()
    first = sess.run(None, feeds)
    first_s = time.perf_counter() - t0
    times = _timed(lambda: sess.run(None, feeds), args.runs)
    print(f"session created  {created * 1e3:10.3f} ms")
    print(f"first run        {first_s * 1e3:10.3f} ms  (plan, and compiling kernels not cached yet)")
    print(f"median           {statistics.median(times) * 1e3:10.3f} ms  over {args.runs} runs "
          f"(min {min(times) * 1e3:.3f}, max {max(times) * 1e3:.3f})")
    if not args.no_ort:
        _compare_ort(args, feeds, first, times)


def _compare_ort(args, feeds, ours, our_times) -> None:
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime: not installed (no comparison)")
        return
    opts = ort.SessionOptions()
    if args.threads:
        opts.intra_op_num_threads = args.threads
    try:
        sess = ort.InferenceSession(args.model, opts, providers=["CPUExecutionProvider"])
        theirs = sess.run(None, feeds)
    except Exception as e:   # onnxruntime's own errors: report, do not fail the bench
        print(f"onnxruntime: could not run the model ({str(e).splitlines()[0]})")
        return
    times = _timed(lambda: sess.run(None, feeds), args.runs)
    ratio = statistics.median(times) / statistics.median(our_times)
    print(f"onnxruntime      {statistics.median(times) * 1e3:10.3f} ms  median "
          f"(graphrt is {ratio:.2f}x its speed)")
    for name, a, b in zip([o.name for o in sess.get_outputs()], ours, theirs):
        if isinstance(a, np.ndarray) and a.dtype.kind in "fc" and a.shape == np.shape(b):
            diff = float(np.max(np.abs(a - b))) if a.size else 0.0
            print(f"  {name}: max |graphrt - onnxruntime| = {diff:.3g}")


def _timed(fn, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _parse_dims(items) -> dict[str, int]:
    dims = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value.strip().isdigit():
            raise ValueError(f"--dim takes NAME=VALUE with a non-negative integer value, got {item!r}")
        dims[name.strip()] = int(value)
    return dims


def _shape(a) -> str:
    return "[" + ", ".join(map(str, np.shape(a))) + "]"
