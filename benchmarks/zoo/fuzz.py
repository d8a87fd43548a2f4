"""Bad models made from the zoo's real ones: every case must end in a result or a
SessionError, never a crash, a hang or another exception.

    python -m benchmarks.zoo.fuzz 100000 [--seed 0] [--max-mb 3] [--timeout 60]

The seeds are the zoo models (benchmarks/zoo/make.py) of at most --max-mb megabytes, with
external data read in, and their saved inputs. A case picks a model and one mutation:
- bytes: truncate the serialized model, overwrite 1-8 bytes, or insert 1-16 random bytes;
- attribute: one attribute of one node gets another value (an int from a list of edge
  values, a float among NaN/inf/0/-1/1e30, an ints list shuffled, cut or filled with edge
  values, a string replaced);
- shape: an extent of a graph input changed (0, -1, 1, 7, 10**6), or an input fed with another
  shape than the saved one;
- type: a graph input's or an initializer's element type changed, or an input fed with
  another element type.
Cases run in a child process (so a crash is seen as a crash), each with a time limit; the
counts of outcomes are printed, and the first examples of any crash, hang or other
exception are saved under ./fuzz-failures/.
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import sys
import time

import numpy as np
import onnx

from .make import zoo_dir

EDGE_INTS = [0, 1, -1, 2, 3, 7, -7, 1 << 31, -(1 << 40), 1 << 62]
EDGE_FLOATS = [float("nan"), float("inf"), -float("inf"), 0.0, -1.0, 1e30, 1e-45]


def seeds(max_mb: float) -> list[tuple[str, bytes, dict]]:
    out = []
    folder = zoo_dir()
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".onnx"):
            continue
        path = os.path.join(folder, name)
        size = os.path.getsize(path) + (os.path.getsize(path + ".data")
                                        if os.path.exists(path + ".data") else 0)
        if size > max_mb * 2 ** 20:
            continue
        proto = onnx.load(path)             # external data read in
        npz = path[:-5] + ".npz"
        feeds = dict(np.load(npz)) if os.path.exists(npz) else {}
        out.append((name[:-5], proto.SerializeToString(), feeds))
    return out


def _mutate_bytes(raw: bytes, rng) -> bytes:
    b = bytearray(raw)
    kind = rng.integers(0, 3)
    if kind == 0:
        return bytes(b[:rng.integers(0, len(b))])
    if kind == 1:
        for _ in range(rng.integers(1, 9)):
            b[rng.integers(0, len(b))] = rng.integers(0, 256)
        return bytes(b)
    i = rng.integers(0, len(b))
    b[i:i] = rng.bytes(int(rng.integers(1, 17)))
    return bytes(b)


def _mutate_attribute(proto: onnx.ModelProto, rng) -> bool:
    nodes = [n for n in proto.graph.node if n.attribute]
    if not nodes:
        return False
    node = nodes[rng.integers(0, len(nodes))]
    a = node.attribute[rng.integers(0, len(node.attribute))]
    T = onnx.AttributeProto
    if a.type == T.INT:
        a.i = int(rng.choice(EDGE_INTS + [a.i + 1, a.i - 1]))
    elif a.type == T.FLOAT:
        a.f = float(rng.choice(EDGE_FLOATS))
    elif a.type == T.INTS:
        v = list(a.ints)
        how = rng.integers(0, 3)
        if how == 0 and v:
            rng.shuffle(v)
        elif how == 1 and v:
            v = v[:rng.integers(0, len(v))]
        else:
            v = [int(rng.choice(EDGE_INTS)) for _ in range(rng.integers(0, 6))]
        del a.ints[:]
        a.ints.extend(v)
    elif a.type == T.FLOATS:
        v = [float(rng.choice(EDGE_FLOATS)) for _ in range(rng.integers(0, 4))]
        del a.floats[:]
        a.floats.extend(v)
    elif a.type == T.STRING:
        a.s = rng.choice([b"", b"NOTHING", b"\xff\xfe", a.s[::-1]])
    else:
        return False
    return True


def _mutate_shape(proto: onnx.ModelProto, rng) -> bool:
    tensors = [i for i in proto.graph.input if i.type.HasField("tensor_type")
               and i.type.tensor_type.HasField("shape") and i.type.tensor_type.shape.dim]
    if not tensors:
        return False
    dims = tensors[rng.integers(0, len(tensors))].type.tensor_type.shape.dim
    d = dims[rng.integers(0, len(dims))]
    d.dim_value = int(rng.choice([0, -1, 1, 7, 10 ** 6]))
    return True


def _mutate_type(proto: onnx.ModelProto, rng) -> bool:
    codes = [1, 2, 3, 5, 6, 7, 9, 10, 11, 16, 8]
    if proto.graph.initializer and rng.integers(0, 2):
        t = proto.graph.initializer[rng.integers(0, len(proto.graph.initializer))]
        t.data_type = int(rng.choice(codes))
        return True
    tensors = [i for i in proto.graph.input if i.type.HasField("tensor_type")]
    if not tensors:
        return False
    tensors[rng.integers(0, len(tensors))].type.tensor_type.elem_type = int(rng.choice(codes))
    return True


def _odd_feeds(feeds: dict, rng) -> dict:
    out = dict(feeds)
    if not out:
        return out
    k = list(out)[rng.integers(0, len(out))]
    v = out[k]
    if rng.integers(0, 2) and v.ndim:
        shape = list(v.shape)
        shape[rng.integers(0, len(shape))] = int(rng.choice([0, 1, 3, 17]))
        if rng.integers(0, 4) == 0:
            shape = shape[:-1]
        out[k] = np.resize(v, shape) if np.prod(shape) else np.zeros(shape, v.dtype)
    else:
        dtype = rng.choice([np.float32, np.float64, np.int64, np.int32, np.bool_, np.float16])
        with np.errstate(all="ignore"):
            out[k] = v.astype(dtype)
    return out


def make_case(seed_models, rng):
    """(what, model bytes, feeds) for one case."""
    name, raw, feeds = seed_models[rng.integers(0, len(seed_models))]
    kind = ["bytes", "attribute", "shape", "type", "feeds"][rng.integers(0, 5)]
    if kind == "bytes":
        return f"{name}/bytes", _mutate_bytes(raw, rng), feeds
    if kind == "feeds":
        return f"{name}/feeds", raw, _odd_feeds(feeds, rng)
    proto = onnx.ModelProto.FromString(raw)
    changed = {"attribute": _mutate_attribute, "shape": _mutate_shape,
               "type": _mutate_type}[kind](proto, rng)
    if not changed:
        return f"{name}/bytes", _mutate_bytes(raw, rng), feeds
    if kind == "shape" and rng.integers(0, 2):
        feeds = _odd_feeds(feeds, rng)
    return f"{name}/{kind}", proto.SerializeToString(), feeds


def _worker(conn):
    import graphrt
    while True:
        job = conn.recv()
        if job is None:
            return
        raw, feeds = job
        try:
            sess = graphrt.Session(raw)
            names = {i.name for i in sess.inputs}
            sess.run(None, {k: v for k, v in feeds.items() if k in names})
            conn.send("result")
        except graphrt.SessionError as e:
            conn.send(f"SessionError({e.kind.value})")
        except BaseException as e:      # noqa: BLE001 - what the fuzzer is looking for
            conn.send(f"OTHER EXCEPTION {type(e).__name__}: {str(e)[:200]}")


class Runner:
    """One child process running cases; restarted after a crash or a hang."""

    def __init__(self):
        self.proc = None
        self._start()

    def _start(self):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()

    def run(self, raw, feeds, timeout: float) -> str:
        try:
            self.conn.send((raw, feeds))
        except (BrokenPipeError, OSError):
            self._restart()
            return "CRASH (the worker was gone)"
        if self.conn.poll(timeout):
            try:
                return self.conn.recv()
            except EOFError:
                pass
            self._restart()
            return f"CRASH (exit code {self.proc.exitcode})"
        if not self.proc.is_alive():
            self._restart()
            return f"CRASH (exit code {self.proc.exitcode})"
        self._restart()
        return f"HANG (no answer in {timeout:.0f} s)"

    def _restart(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self._start()

    def close(self):
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(5)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", type=int, nargs="?", default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-mb", type=float, default=3.0)
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds a case may take (the first ones compile kernels)")
    args = p.parse_args(argv)
    seed_models = seeds(args.max_mb)
    print(f"{len(seed_models)} zoo models: {', '.join(n for n, _, _ in seed_models)}", flush=True)
    rng = np.random.default_rng(args.seed)
    runner = Runner()
    counts = collections.Counter()
    by_kind = collections.Counter()
    bad = 0
    t0 = time.time()
    for i in range(args.cases):
        what, raw, feeds = make_case(seed_models, rng)
        outcome = runner.run(raw, feeds, args.timeout)
        counts[outcome.split(":")[0] if outcome.startswith("OTHER") else outcome] += 1
        by_kind[what.split("/")[1]] += 1
        if outcome.startswith(("CRASH", "HANG", "OTHER")):
            bad += 1
            os.makedirs("fuzz-failures", exist_ok=True)
            if bad <= 50:
                stem = os.path.join("fuzz-failures", f"case{i}")
                with open(stem + ".onnx", "wb") as f:
                    f.write(raw)
                np.savez(stem + ".npz", **feeds)
                with open(stem + ".txt", "w") as f:
                    f.write(f"{what}\n{outcome}\n")
            print(f"case {i} {what}: {outcome}", flush=True)
        if (i + 1) % 1000 == 0:
            print(f"{i + 1} cases, {time.time() - t0:.0f} s, {bad} bad", flush=True)
    runner.close()
    for outcome, k in counts.most_common():
        print(f"{k:7d}  {outcome}")
    print("mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(by_kind.items())))
    print(f"{sum(counts.values())} cases in {time.time() - t0:.0f} s; "
          f"{bad} crashes, hangs or other exceptions")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
