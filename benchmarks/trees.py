"""Tree ensembles made by the real converters, run by graphrt and onnxruntime in one process.

    python -m benchmarks.trees [--rows 1 1000 100000 1000000] [--threads 1 2]
                               [--models rf_clf lgbm_reg ...] [--budget SECONDS]
                               [--repeat] [--peer-only] [--rebuild] [--output table.md]

Models (built once, with random data, into $GRAPHRT_TREES_DIR, default
~/.cache/graphrt/trees: <name>.onnx and meta.json; --rebuild makes them again):
- rf_clf: scikit-learn RandomForestClassifier, 200 trees, max_depth 12, 20 features,
  3 classes (skl2onnx, zipmap off);
- rf_reg: RandomForestRegressor, 300 trees, max_depth 10, 30 features, max_features 1/3
  (skl2onnx);
- hgb_clf: HistGradientBoostingClassifier, binary, 300 trees, max_depth 6, 10 features,
  trained and run with NaNs (skl2onnx, zipmap off);
- lgbm_reg: LightGBM LGBMRegressor, 500 trees, num_leaves 63, 20 features, NaNs (onnxmltools);
- lgbm_clf: LGBMClassifier, 5 classes x 100 rounds = 500 trees, num_leaves 31, 20 features,
  NaNs (onnxmltools, zipmap off);
- xgb_clf: XGBoost XGBClassifier, binary, 300 trees, max_depth 8, 16 features, NaNs
  (onnxmltools).
Each is trained on 20,000 rows (n_jobs=1; about a minute for all on two cores) of standard
normal float32 features whose target is a random non-linear function of them; the models
marked NaNs get 3% missing values in training and at run time. At build time the onnxruntime
output is checked against the native model's predictions (meta.json: "native_max_abs_diff").
The converters write ai.onnx.ml TreeEnsembleClassifier / TreeEnsembleRegressor (opset 1;
LightGBM's classifier adds Cast/Mul/Identity). skl2onnx 1.20 cannot convert a
HistGradientBoosting model as it is (a bool in an int attribute): _skl2onnx_int_missing_flags
casts that flag while converting.

Per model, thread count and row count (float32 rows drawn like the training data, another
seed; each timed run takes the next of max(1, 4,096 // rows) distinct batches, the same
sequence for both runtimes, as a scoring service gets new rows each call: a walk that branches
on the data runs several times faster on a batch it has seen many times, whose branches the CPU
has learnt, and at 1 row such a batch is a few thousand branches; --repeat runs every time on
the first batch, as this benchmark did before 2026-12-07), each runtime gets a session of its own (graphrt: graphrt.Session(bytes,
SessionOptions(intra_op_threads=t)); onnxruntime: benchmarks.run.ort_session, t intra-op
threads, sequential). Reported:
- steady latency: the median of warm runs in three alternating blocks per runtime within
  --budget seconds each (default 1; at least one run per block, so at 1,000,000 rows it is
  the median of three runs), graphrt after its jitted schedule compiled
  (Session.wait_for_schedules);
- speed-up: onnxruntime ms / graphrt ms (above 1: graphrt is faster);
- first: session creation + the first run;
- run MiB: how far the resident set's peak rose above its level after session creation over
  the first run and the next ones (10 up to 1,000 rows, 4 up to 100,000, then 1), as
  benchmarks.zoo.run measures it (outputs, scratch, compiled code loaded);
- max abs diff of the float outputs (probabilities, scores) between the runtimes, and how many
  labels differ (note).
Then, per thread count, the minimum and geometric-mean speed-up over the models at 100,000
rows and at 1 row (and at the other row counts measured).

--peer-only runs onnxruntime alone (graphrt is not imported): to check the script and see the
targets without graphrt. Time: onnxruntime alone takes 10-40 s a run at 1,000,000 rows on this
2-core machine, so the default run (6 models x 2 thread counts x 4 row counts) takes about
20-25 minutes with --peer-only and about twice that with graphrt; `--rows 1 1000 100000` skips
most of it.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import sys
import time
import warnings

import numpy as np

from .run import (OrtRunner, PeakMemory, RunRow, cpu_model, fmt, geomean, load, markdown,
                  ort_session, progress, publish, settled, start_runs, tail_cells)

ROWS = (1, 1_000, 100_000, 1_000_000)
TRAIN_ROWS = 20_000
NAN_FRACTION = 0.03
BLOCKS = 3
DISTINCT_ROWS = 4_096       # rows in the distinct batches a case cycles through
OPSETS = {"": 17, "ai.onnx.ml": 3}      # skl2onnx: TreeEnsembleClassifier / Regressor v3
ONNXMLTOOLS_OPSET = 15                   # the highest onnxmltools 1.16 converts to


def trees_dir() -> str:
    return os.environ.get("GRAPHRT_TREES_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "graphrt", "trees")


# ----------------------------------------------------------------------------- data

def features(n, d, nan, seed) -> np.ndarray:
    """n standard-normal float32 rows of d features; a NAN_FRACTION of the cells NaN if nan."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d), dtype=np.float32)
    if nan:
        x[rng.random((n, d), dtype=np.float32) < NAN_FRACTION] = np.nan
    return x


def target(x, outputs, seed):
    """A random non-linear function of the features: (n, outputs) float64 scores."""
    rng = np.random.default_rng(seed + 1)
    z = np.nan_to_num(x.astype(np.float64))
    z = np.concatenate([z, z * z - 1, np.sin(2 * z), z[:, :1] * z[:, 1:]], axis=1)
    w = rng.standard_normal((z.shape[1], outputs)) * (rng.random((z.shape[1], 1)) < 0.3)
    s = z @ w
    return s / s.std(axis=0) + 0.3 * rng.standard_normal(s.shape)


def labels(x, classes, seed) -> np.ndarray:
    s = target(x, classes, seed)
    if classes == 2:
        s = s[:, :1] - s[:, 1:]
        return (s[:, 0] > np.median(s)).astype(np.int64)
    return np.argmax(s, axis=1).astype(np.int64)


# ----------------------------------------------------------------------------- models

class Spec:
    """A model to build: name, estimator factory, converter, features, classes (0: a
    regressor), whether it is trained and run with NaNs, and a line for the table."""

    def __init__(self, name, make, converter, d, classes, nan, note):
        self.name, self.make, self.converter = name, make, converter
        self.d, self.classes, self.nan, self.note = d, classes, nan, note


def _sklearn_rf_clf():
    from sklearn.ensemble import RandomForestClassifier
    return RandomForestClassifier(200, max_depth=12, n_jobs=1, random_state=0)


def _sklearn_rf_reg():
    from sklearn.ensemble import RandomForestRegressor
    return RandomForestRegressor(300, max_depth=10, max_features=1 / 3, n_jobs=1, random_state=0)


def _sklearn_hgb_clf():
    from sklearn.ensemble import HistGradientBoostingClassifier
    return HistGradientBoostingClassifier(max_iter=300, max_depth=6, max_leaf_nodes=None,
                                          early_stopping=False, random_state=0)


def _lgbm_reg():
    from lightgbm import LGBMRegressor
    return LGBMRegressor(n_estimators=500, num_leaves=63, n_jobs=1, random_state=0, verbose=-1)


def _lgbm_clf():
    from lightgbm import LGBMClassifier
    return LGBMClassifier(n_estimators=100, num_leaves=31, n_jobs=1, random_state=0, verbose=-1)


def _xgb_clf():
    from xgboost import XGBClassifier
    return XGBClassifier(n_estimators=300, max_depth=8, tree_method="hist", n_jobs=1,
                         random_state=0)


SPECS = {s.name: s for s in (
    Spec("rf_clf", _sklearn_rf_clf, "skl2onnx", 20, 3, False,
         "sklearn RandomForestClassifier 200 trees depth 12, 20 features, 3 classes"),
    Spec("rf_reg", _sklearn_rf_reg, "skl2onnx", 30, 0, False,
         "sklearn RandomForestRegressor 300 trees depth 10, 30 features"),
    Spec("hgb_clf", _sklearn_hgb_clf, "skl2onnx", 10, 2, True,
         "sklearn HistGradientBoostingClassifier 300 trees depth 6, 10 features, binary, NaNs"),
    Spec("lgbm_reg", _lgbm_reg, "onnxmltools", 20, 0, True,
         "LightGBM LGBMRegressor 500 trees 63 leaves, 20 features, NaNs"),
    Spec("lgbm_clf", _lgbm_clf, "onnxmltools", 20, 5, True,
         "LightGBM LGBMClassifier 5 classes x 100 trees 31 leaves, 20 features, NaNs"),
    Spec("xgb_clf", _xgb_clf, "onnxmltools", 16, 2, True,
         "XGBoost XGBClassifier 300 trees depth 8, 16 features, binary, NaNs"),
)}


@contextlib.contextmanager
def _skl2onnx_int_missing_flags():
    """skl2onnx 1.20 gives HistGradientBoosting leaves nodes_missing_value_tracks_true=False
    (a bool), which onnx's int attribute refuses; while converting, pass it as an int."""
    from skl2onnx.common import tree_ensemble as te
    add_node = te.add_node

    def add_node_int(*args, nodes_missing_value_tracks_true=0, **kw):
        return add_node(*args, nodes_missing_value_tracks_true=int(nodes_missing_value_tracks_true),
                        **kw)
    te.add_node = add_node_int
    try:
        yield
    finally:
        te.add_node = add_node


def _convert(spec, model):
    if spec.converter == "skl2onnx":
        from skl2onnx import to_onnx
        options = {id(model): {"zipmap": False}} if spec.classes else None
        with _skl2onnx_int_missing_flags():
            return to_onnx(model, np.zeros((1, spec.d), np.float32), target_opset=OPSETS,
                           options=options)
    from onnxmltools.convert.common.data_types import FloatTensorType
    types = [("input", FloatTensorType([None, spec.d]))]
    if spec.name.startswith("lgbm"):
        from onnxmltools import convert_lightgbm
        kw = {"zipmap": False} if spec.classes else {}
        return convert_lightgbm(model, initial_types=types, target_opset=ONNXMLTOOLS_OPSET, **kw)
    from onnxmltools import convert_xgboost
    return convert_xgboost(model, initial_types=types, target_opset=ONNXMLTOOLS_OPSET)


def _native(spec, model, x):
    """The native model's scores on x, shaped as the converted model's float output."""
    if spec.classes:
        return model.predict_proba(x)
    return model.predict(x).reshape(-1, 1)


def build(spec, folder) -> dict:
    """Train, convert and check one model; write <name>.onnx; return its metadata."""
    t0 = time.perf_counter()
    x = features(TRAIN_ROWS, spec.d, spec.nan, seed=0)
    y = labels(x, spec.classes, 0) if spec.classes else target(x, 1, 0)[:, 0]
    model = spec.make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(x, y)
        train_s = time.perf_counter() - t0
        onx = _convert(spec, model)
    data = onx.SerializeToString()
    path = os.path.join(folder, spec.name + ".onnx")
    with open(path, "wb") as f:
        f.write(data)
    check = features(1000, spec.d, spec.nan, seed=7)
    sess = ort_session(data, 1)
    outs = sess.run(None, {sess.get_inputs()[0].name: check})
    score = next(o for o in outs if np.asarray(o).dtype.kind == "f")
    native = _native(spec, model, check)
    ops = sorted({f"{n.domain or 'ai.onnx'}:{n.op_type}" for n in onx.graph.node})
    trees = [n for n in onx.graph.node if n.op_type.startswith("TreeEnsemble")]
    n_nodes = sum(len(next(a.ints for a in n.attribute if a.name == "nodes_treeids"))
                  for n in trees if any(a.name == "nodes_treeids" for a in n.attribute))
    n_trees = sum(len(set(next(a.ints for a in n.attribute if a.name == "nodes_treeids")))
                  for n in trees if any(a.name == "nodes_treeids" for a in n.attribute))
    return {
        "name": spec.name, "note": spec.note, "converter": spec.converter,
        "estimator": type(model).__module__.split(".")[0] + "." + type(model).__name__,
        "features": spec.d, "classes": spec.classes,
        "nan_fraction": NAN_FRACTION if spec.nan else 0,
        "train_rows": TRAIN_ROWS, "input": sess.get_inputs()[0].name,
        "outputs": [o.name for o in sess.get_outputs()], "ops": ops,
        "opsets": {i.domain or "ai.onnx": i.version for i in onx.opset_import},
        "trees": n_trees, "tree_nodes": n_nodes, "bytes": len(data),
        "native_max_abs_diff": float(np.max(np.abs(np.asarray(score, np.float64) - native))),
        "build_seconds": round(time.perf_counter() - t0, 1), "train_seconds": round(train_s, 1),
        "versions": _versions(), "made": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def _versions() -> dict:
    import importlib.metadata as md
    out = {}
    for pkg in ("scikit-learn", "skl2onnx", "onnxmltools", "lightgbm", "xgboost", "onnx",
                "onnxruntime"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def ensure(names, folder, rebuild) -> dict:
    """meta.json's entries for names, building the models that are missing."""
    os.makedirs(folder, exist_ok=True)
    meta_path = os.path.join(folder, "meta.json")
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    for name in names:
        if rebuild or name not in meta or not os.path.exists(os.path.join(folder, name + ".onnx")):
            t0 = time.perf_counter()
            print(f"# building {name} ...", file=sys.stderr, flush=True)
            meta[name] = build(SPECS[name], folder)
            print(f"# built {name}: {meta[name]['trees']} trees, {meta[name]['tree_nodes']:,} "
                  f"nodes, {meta[name]['bytes'] / 2**20:.1f} MiB, native max abs diff "
                  f"{meta[name]['native_max_abs_diff']:.1e} ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
            with open(meta_path, "w") as f:
                json.dump(meta, f, indent=1)
    return meta


# ----------------------------------------------------------------------------- runtimes

class _GraphRT:
    def __init__(self, data, threads):
        import graphrt
        self.sess = graphrt.Session(data, graphrt.SessionOptions(intra_op_threads=threads))

    def run(self, feeds):
        return self.sess.run(None, feeds)

    def settle(self, feeds):
        settled(self.sess, lambda: self.run(feeds))


def memory_runs(rows: int) -> int:
    """Runs after the first one inside the memory measure (fewer where a run is long)."""
    return 10 if rows <= 1_000 else (4 if rows <= 100_000 else 1)


def compare(g, o) -> tuple[float | None, int, str]:
    """(max abs diff over the float outputs, labels that differ, a note on shape trouble)."""
    worst, wrong, notes = 0.0, 0, []
    for i, (a, b) in enumerate(zip(g, o)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            notes.append(f"output {i}: shape {a.shape} vs {b.shape}")
            continue
        if a.dtype.kind in "fc" or b.dtype.kind in "fc":
            d = np.abs(a.astype(np.float64) - b.astype(np.float64))
            nan_a, nan_b = np.isnan(a.astype(np.float64)), np.isnan(b.astype(np.float64))
            if (nan_a != nan_b).any():
                notes.append(f"output {i}: NaN in one runtime only")
            worst = max(worst, float(np.max(np.where(nan_a | nan_b, 0.0, d), initial=0.0)))
        else:
            wrong += int(np.sum(a != b))
    if len(g) != len(o):
        notes.append(f"{len(g)} outputs vs {len(o)}")
    return worst, wrong, "; ".join(notes)


def measure(data, pool, threads, budget, mem, peer_only) -> dict:
    """Both runtimes (or onnxruntime alone) on the feeds of ``pool``, cycled through from its
    first: a Row by runtime, and where both ran 'diff' (max abs diff, on pool[0]), 'labels'
    (how many differ) and 'note'."""
    runtimes = [("onnxruntime", OrtRunner)] if peer_only else [("graphrt", _GraphRT),
                                                          ("onnxruntime", OrtRunner)]
    rows, live = {"graphrt": RunRow()}, []
    n = len(next(iter(pool[0].values())))
    for key, cls in runtimes:
        rt, row = start_runs(cls, data, pool[0], threads, mem, more=memory_runs(n))
        rows[key] = row
        if rt is not None:
            live.append((key, rt))
    if peer_only:
        rows["graphrt"].error = "not run (--peer-only)"
    min_block = 1 if n >= 1_000_000 else 2
    for _ in range(BLOCKS):
        for key, rt in live:
            times = rows[key].times
            n0, end = len(times), time.perf_counter() + budget / BLOCKS
            k = 0
            while len(times) - n0 < min_block or time.perf_counter() < end:
                feeds = pool[k % len(pool)]
                k += 1
                t = time.perf_counter()
                rt.run(feeds)
                times.append(time.perf_counter() - t)
    del live
    g, o = rows["graphrt"].outs, rows["onnxruntime"].outs
    if g is not None and o is not None:
        rows["diff"], rows["labels"], rows["note"] = compare(g, o)
    rows["graphrt"].outs = rows["onnxruntime"].outs = None
    return rows


# ----------------------------------------------------------------------------- report

def speedup(rows):
    g, o = rows["graphrt"].steady, rows["onnxruntime"].steady
    return o / g if g and o else None


def table(results) -> str:
    cols = ["model", "rows", "threads", "graphrt ms", "onnxruntime ms", "speed-up",
            "graphrt first ms", "onnxruntime first ms", "graphrt run MiB", "onnxruntime run MiB",
            "max abs diff", "note"]
    lines = []
    for name, n, threads, rows in results:
        g, o = rows["graphrt"], rows["onnxruntime"]
        notes = [f"{k}: {r.error}" for k, r in rows.items() if isinstance(r, RunRow) and r.error]
        if rows.get("labels"):
            notes.insert(0, f"{rows['labels']:,} labels differ")
        if rows.get("note"):
            notes.insert(0, rows["note"])
        cells = [name, f"{n:,}", str(threads), fmt(g.steady and g.steady * 1e3),
                 fmt(o.steady and o.steady * 1e3), fmt(speedup(rows), 2)]
        lines.append(cells + tail_cells(g.first, o.first, g.mib, o.mib, rows, notes))
    return markdown(cols, lines)


def _rows(n) -> str:
    return f"{n:,} row" + ("" if n == 1 else "s")


def summary(results, row_counts, threads_list) -> str:
    out = []
    order = [n for n in (100_000, 1) if n in row_counts] + [
        n for n in row_counts if n not in (100_000, 1)]
    for n in order:
        for threads in threads_list:
            ups = {name: speedup(r) for name, k, t, r in results if k == n and t == threads}
            ran = {name: s for name, s in ups.items() if s}
            failed = sorted(set(ups) - set(ran))
            if not ups:
                continue
            if not ran:
                peer = [f"{name} {fmt(r['onnxruntime'].steady * 1e3)}" for name, k, t, r in results
                        if k == n and t == threads and r["onnxruntime"].steady]
                out.append(f"{_rows(n)}, {threads} thread(s): no model ran in both runtimes; "
                           f"onnxruntime ms: {', '.join(peer) or '–'}")
                continue
            worst = min(ran, key=ran.get)
            out.append(f"{_rows(n)}, {threads} thread(s): speed-up onnxruntime/graphrt geometric "
                       f"mean {geomean(ran.values()):.2f}, min {ran[worst]:.2f} ({worst}) over "
                       f"{len(ran)} models" + (f"; not run by both: {', '.join(failed)}"
                                               if failed else ""))
    return "\n".join(out)


def models_table(meta, names) -> str:
    cols = ["model", "what", "trees", "tree nodes", "MiB", "ops", "native max abs diff"]
    return markdown(cols, [[n, meta[n]["note"], str(meta[n]["trees"]), f"{meta[n]['tree_nodes']:,}",
                            f"{meta[n]['bytes'] / 2**20:.1f}", ", ".join(meta[n]["ops"]),
                            f"{meta[n]['native_max_abs_diff']:.1e}"] for n in names])


def header(argv, mem, load_start, peer_only, repeat) -> str:
    import onnxruntime
    versions = f"onnxruntime {onnxruntime.__version__}"
    if not peer_only:
        import graphrt
        versions = f"graphrt {graphrt.__version__}, " + versions
    return (f"Command: `python -m benchmarks.trees {' '.join(argv)}`; date "
            f"{datetime.datetime.now().isoformat(timespec='minutes')}; CPU: {cpu_model()}, "
            f"{os.cpu_count()} logical cores; Python {platform.python_version()}, {versions}, "
            f"numpy {np.__version__}; load average {load_start} at the start, {load()} at the "
            f"end. Times: median of warm runs, ms, "
            f"{'each on one batch' if repeat else f'each on the next of max(1, {DISTINCT_ROWS} // rows) distinct batches'}"
            f"; speed-up: onnxruntime ms / graphrt ms; "
            f"run MiB: {mem.what} over the runs after session creation.")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m benchmarks.trees",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="+", type=int, default=list(ROWS))
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--models", nargs="+", choices=list(SPECS), default=list(SPECS))
    ap.add_argument("--budget", type=float, default=1.0,
                    help="seconds of timed runs per runtime and case (default 1)")
    ap.add_argument("--repeat", action="store_true",
                    help="time every run on one batch (default: distinct batches in turn)")
    ap.add_argument("--peer-only", action="store_true",
                    help="run onnxruntime alone; graphrt is not imported")
    ap.add_argument("--rebuild", action="store_true", help="train and convert the models again")
    ap.add_argument("--build-only", action="store_true", help="build the models, measure nothing")
    ap.add_argument("--output", help="also write the report to this file")
    a = ap.parse_args(argv)
    folder = trees_dir()
    meta = ensure(a.models, folder, a.rebuild)
    if a.build_only:
        print(json.dumps({"folder": folder, "models": a.models}))
        return 0
    mem = PeakMemory()
    load_start = load()
    results = []
    for name in a.models:
        with open(os.path.join(folder, name + ".onnx"), "rb") as f:
            data = f.read()
        info = meta[name]
        x_all = features(max(*a.rows, DISTINCT_ROWS), info["features"],
                         info["nan_fraction"] > 0, seed=1)
        for n in a.rows:
            batches = 1 if a.repeat else max(1, DISTINCT_ROWS // n)
            pool = [{info["input"]: x_all[i * n:(i + 1) * n]} for i in range(batches)]
            for threads in a.threads:
                t0 = time.perf_counter()
                rows = measure(data, pool, threads, a.budget, mem, a.peer_only)
                results.append((name, n, threads, rows))
                progress(f"{name} {_rows(n)}", threads, rows["graphrt"].steady,
                         rows["onnxruntime"].steady, time.perf_counter() - t0,
                         None if a.peer_only else rows["graphrt"].error)
                gc.collect()
        del x_all
    publish("\n\n".join([header(argv, mem, load_start, a.peer_only, a.repeat), models_table(meta, a.models),
                         table(results), summary(results, a.rows, a.threads)]), a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
