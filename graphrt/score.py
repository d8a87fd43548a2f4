"""Batch scoring: rows along axis 0, in batches, with a progress bar.

    y = graphrt.score("model.onnx", x, batch_size=4096)           # numpy in, numpy out
    y = graphrt.score(model, "rows.parquet", mode="exact")          # a path: .npy/.npz/.parquet
    outs = graphrt.score(model, {"a": a, "b": b}, output_names=["y", "h0"])   # dict out

This module also holds the one reader of data files (:func:`load_data`), the writer of
results (:func:`save_outputs`) and the rule that turns data into feeds (:func:`to_feeds`);
the command line and :mod:`graphrt.dask` use them too.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from .errors import ErrorKind, SessionError
from .model import Model
from .options import SessionOptions
from .session import Session

DATA_SUFFIXES = (".npy", ".npz", ".parquet")


def as_session(model, **options) -> Session:
    """A Session from a Session, a Model, or anything ``graphrt.load`` reads (then
    ``options`` are SessionOptions fields: mode="exact", intra_op_threads=1, ...)."""
    if isinstance(model, (Session, Model)):
        if options:
            raise TypeError(f"options {sorted(options)} apply only when the model is loaded here")
        return model.session if isinstance(model, Model) else model
    return Session(model, SessionOptions(**options))


def load_data(path):
    """Read a data file: .npy -> array, .npz -> dict of arrays, .parquet -> DataFrame."""
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in DATA_SUFFIXES:
        raise SessionError(ErrorKind.INVALID_INPUT,
                           f"cannot read {path!r}: expected one of {', '.join(DATA_SUFFIXES)}")
    if not os.path.isfile(path):
        raise SessionError(ErrorKind.INVALID_INPUT, f"no data file at {path!r}")
    try:
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        import pandas as pd
        return pd.read_parquet(path)
    except ImportError as e:
        raise SessionError(ErrorKind.UNSUPPORTED,
                           f"reading {path!r} needs {e.name} (pip install graphrt[score])") from None
    except Exception as e:   # corrupt files, pickled object arrays, ...
        raise SessionError(ErrorKind.INVALID_INPUT, f"cannot read {path!r}: {e}") from None


def save_outputs(path, outputs: Mapping[str, np.ndarray]) -> None:
    """Write named results: .npz (one array per name), .npy (one result only) or .parquet
    (columns from :func:`to_frame`)."""
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".npz":
        np.savez(path, **outputs)
    elif suffix == ".npy":
        if len(outputs) != 1:
            raise SessionError(ErrorKind.INVALID_INPUT,
                               f"a .npy file holds one array; there are {len(outputs)} results "
                               f"({', '.join(outputs)}): write a .npz instead")
        np.save(path, next(iter(outputs.values())))
    elif suffix == ".parquet":
        to_frame(outputs).to_parquet(path)
    else:
        raise SessionError(ErrorKind.INVALID_INPUT,
                           f"cannot write {path!r}: expected one of {', '.join(DATA_SUFFIXES)}")


def to_frame(outputs: Mapping[str, np.ndarray], index=None):
    """A pandas DataFrame of row-wise results: a result of one value per row is column
    ``name``; wider ones are flattened per row (C order) into ``name_0``, ``name_1``, ...;
    a list of maps gives a column ``name_<key>`` per key."""
    import pandas as pd
    columns = {}
    for name, arr in outputs.items():
        if isinstance(arr, list):                # maps (ZipMap): a column per key
            keys = list(arr[0]) if arr else []
            columns.update((f"{name}_{k}", [row.get(k) for row in arr]) for k in keys)
            continue
        flat = arr.reshape(arr.shape[0], -1) if arr.ndim != 1 else arr.reshape(-1, 1)
        if flat.shape[1] == 1:
            columns[name] = flat[:, 0]
        else:
            columns.update((f"{name}_{j}", flat[:, j]) for j in range(flat.shape[1]))
    return pd.DataFrame(columns, index=index)


def to_feeds(session: Session, data) -> dict[str, np.ndarray]:
    """Feeds for ``session`` from an array (one-input models), a dict of arrays (by input
    name; a lone array feeds a one-input model whatever its key), a pandas DataFrame (the
    inputs' named columns, or all columns as one matrix for a one-input model) or a data
    file path. Arrays are cast to the input's element type when numpy calls that cast
    "same kind" (float64 -> float32, int -> float); other mismatches are errors."""
    if isinstance(data, (str, os.PathLike)):
        data = load_data(data)
    infos = session.inputs
    if isinstance(data, Mapping):
        if len(data) == 1 and len(infos) == 1:
            data = {infos[0].name: next(iter(data.values()))}
        raw = dict(data)
    elif _is_frame(data):
        raw = _frame_columns(data, infos)
    else:
        if len(infos) != 1:
            raise SessionError(ErrorKind.INVALID_INPUT,
                               f"the model takes {len(infos)} inputs ({', '.join(i.name for i in infos)}): "
                               "give a dict of arrays or a DataFrame with those columns")
        raw = {infos[0].name: data}
    by_name = {i.name: i for i in infos}
    return {name: _coerce(by_name.get(name), name, value) for name, value in raw.items()}


def row_count(feeds: Mapping[str, np.ndarray]) -> int:
    """The number of rows shared by every feed (axis 0)."""
    counts = {}
    for name, a in feeds.items():
        if a.ndim == 0:
            raise SessionError(ErrorKind.INVALID_INPUT, f"input {name!r} is a scalar: scoring needs rows "
                               "along axis 0")
        counts[name] = a.shape[0]
    if len(set(counts.values())) > 1:
        raise SessionError(ErrorKind.INVALID_INPUT, f"the inputs have different numbers of rows: {counts}")
    return next(iter(counts.values()), 0)


def score(model, data, batch_size: int = 1024, progress: bool = True, *, output_names=None,
          **options):
    """Run ``model`` over ``data`` ``batch_size`` rows at a time and concatenate the results.

    ``model``: a Model, a Session, or a path / bytes / onnx.ModelProto (loaded with
    ``options``, e.g. ``mode="exact"``). ``data``: see :func:`to_feeds`. ``output_names``
    may name graph outputs or intermediate values (default: the graph outputs). Returns an
    array when one value is asked for, else a dict name -> array; a sequence of maps (a
    ZipMap's probabilities) comes as one list of dicts over all rows. ``progress`` shows a tqdm
    bar when tqdm is installed. Every output must have one row per input row."""
    session = as_session(model, **options)
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise SessionError(ErrorKind.INVALID_INPUT, f"batch_size must be a positive int, got {batch_size!r}")
    feeds = to_feeds(session, data)
    n = row_count(feeds)
    if n == 0:
        raise SessionError(ErrorKind.INVALID_INPUT, "there are no rows to score")
    names = [o.name for o in session.outputs] if output_names is None else list(output_names)
    results: dict = {}
    with _progress_bar(n, progress) as bar:
        for start in range(0, n, batch_size):
            stop = min(n, start + batch_size)
            batch = {k: v[start:stop] for k, v in feeds.items()}
            out = {k: v[start:stop] for k, v in results.items() if isinstance(v, np.ndarray)}
            for name, got in zip(names, session.run(names, batch, out=out)):
                _check_rows(name, got, stop - start)
                if isinstance(got, list):               # a sequence of maps: ZipMap's rows
                    results.setdefault(name, []).extend(got)
                elif name not in results:
                    results[name] = np.empty((n,) + got.shape[1:], got.dtype)
                    results[name][:stop] = got
            bar.update(stop - start)
    return results[names[0]] if len(names) == 1 else results


def _is_frame(data) -> bool:
    return type(data).__module__.startswith("pandas") and hasattr(data, "columns")


def _frame_columns(df, infos) -> dict:
    names = [i.name for i in infos]
    if all(name in df.columns for name in names):
        out = {}
        for info in infos:
            col = df[info.name].to_numpy()
            if info.dtype == np.dtype(object):    # a string column
                col = np.asarray(col.astype(str), dtype=object)
            elif col.dtype == object:             # cells holding arrays or lists
                col = np.stack([np.asarray(v) for v in col])
            if info.dims is not None and len(info.dims) == col.ndim + 1:
                col = col.reshape(col.shape + (1,))
            out[info.name] = col
        return out
    if len(infos) == 1:
        info = infos[0]
        return {info.name: df.to_numpy(dtype=info.dtype)}
    raise SessionError(ErrorKind.INVALID_INPUT,
                       f"the DataFrame has no columns named after the model's inputs {names}")


def _coerce(info, name: str, value) -> np.ndarray:
    if info is None:
        raise SessionError(ErrorKind.INVALID_INPUT, f"the model has no input {name!r}")
    if info.kind != "tensor":
        raise SessionError(ErrorKind.UNSUPPORTED, f"input {name!r} is a {info.kind}: batch data "
                           "can only feed tensor inputs")
    arr = np.asarray(value)
    if arr.dtype != info.dtype:
        if not np.can_cast(arr.dtype, info.dtype, "same_kind"):
            raise SessionError(ErrorKind.INVALID_INPUT,
                               f"input {name!r} takes {info.dtype}; the data is {arr.dtype}, "
                               "which does not cast safely")
        arr = arr.astype(info.dtype)
    return arr if arr.flags.c_contiguous else arr.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)


def _check_rows(name: str, got, rows: int) -> None:
    shape = [len(got)] if isinstance(got, list) else list(np.shape(got))
    if not shape or shape[0] != rows:
        raise SessionError(ErrorKind.INVALID_INPUT,
                           f"value {name!r} has shape {shape} for a batch of {rows} rows: "
                           "scoring needs one result row per input row")


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int) -> None:
        pass


def _progress_bar(total: int, enabled: bool):
    if enabled:
        try:
            from tqdm import tqdm
        except ImportError:
            pass
        else:
            return tqdm(total=total, unit="rows", unit_scale=True, desc="graphrt score")
    return _NoBar()
