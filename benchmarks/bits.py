"""A fingerprint of graphrt's output bits over the benchmark models, for changes that must
not change them (refactorings, schedule work): run it before and after, compare the files.

    python -m benchmarks.bits [--modes exact fast] [--threads 1 2] [--models ...] > bits.json

For every model, mode and thread count: the sha256 of every output's bytes, on the
benchmark's fixed inputs, from a first run (plan just made) and from a third (plan reused,
jitted schedule compiled); and, at optimization level basic, of every value the graph
computes (the light models' weights are constant fills, so their outputs alone say little).
The MLP case scores 20,000 rows instead of a million.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys

import numpy as np
import onnx

from .run import all_cases

SCORE_ROWS = 20_000


def fingerprint(case, mode: str, threads: int) -> dict:
    import graphrt
    sess = graphrt.Session(case.make(), graphrt.SessionOptions(mode=mode,
                                                               intra_op_threads=threads))
    feeds = case.feeds()
    if case.score:
        feeds = {k: v[:SCORE_ROWS] for k, v in feeds.items()}
    first = sess.run(None, feeds)
    sess.run(None, feeds)
    sess.wait_for_schedules(600)
    reused = sess.run(None, feeds)
    basic = graphrt.Session(case.make(), graphrt.SessionOptions(
        mode=mode, intra_op_threads=threads, optimization_level="basic"))
    names = [o for n in onnx.load_from_string(_bytes(case.make())).graph.node
             for o in n.output if o and _computed(basic, o)]
    values = basic.run(names, feeds)
    return {"first": _digest(first), "reused": _digest(reused), "values": _digest(values)}


def _computed(sess, name: str) -> bool:
    """Whether the session computes value ``name`` (dead nodes are dropped at creation)."""
    import graphrt
    try:
        sess._value_id(sess._live_graph(), name)
        return True
    except graphrt.SessionError:
        return False


def _bytes(model) -> bytes:
    return model if isinstance(model, bytes) else model.SerializeToString()


def _digest(outs) -> str:
    h = hashlib.sha256()
    for o in outs:
        a = np.ascontiguousarray(o)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", nargs="+", default=["exact", "fast"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--models", nargs="+")
    args = ap.parse_args(argv)
    cases = [c for c in all_cases(quick=False) if not args.models or c.name in args.models]
    result = {}
    for case in cases:
        for mode in args.modes:
            for threads in args.threads:
                key = f"{case.name}/{mode}/{threads}"
                result[key] = fingerprint(case, mode, threads)
                print(key, result[key], file=sys.stderr, flush=True)
    json.dump(result, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
