"""Batch scoring on Dask (``pip install graphrt[dask]``): one session per worker process.

    import graphrt.dask
    y = graphrt.dask.score_array("model.onnx", x, batch_size=65536, mode="exact")  # dask array
    df_out = graphrt.dask.score_frame(model, ddf)                                     # dask dataframe

The model travels in the task graph once, as the pickled Session (model bytes and options):
one graph key every task depends on. Each worker process unpickles it at most once: the
rebuilt session is cached per process, keyed by a hash of those bytes, and shared by the
worker's threads (``Session.run`` is thread-safe). Blocks and partitions are scored with
:func:`graphrt.score`, so results equal single-process scoring (bit for bit in exact mode).
"""
from __future__ import annotations

import hashlib
import pickle
import threading

import numpy as np

from .score import as_session, score, to_frame

_SESSIONS: dict = {}
_LOCK = threading.Lock()


class ShippedModel:
    """A session in transit: its pickle and that pickle's hash."""

    def __init__(self, session):
        self.blob = pickle.dumps(session)
        self.key = hashlib.sha256(self.blob).hexdigest()

    def session(self):
        """This process's session for the model (built on first use)."""
        sess = _SESSIONS.get(self.key)
        if sess is None:
            with _LOCK:
                sess = _SESSIONS.get(self.key)
                if sess is None:
                    sess = _SESSIONS[self.key] = pickle.loads(self.blob)
        return sess

    def __dask_tokenize__(self):
        return self.key


def cached_sessions() -> int:
    """How many sessions this process holds (for tests and diagnostics)."""
    return len(_SESSIONS)


def clear_cache() -> None:
    """Close and drop this process's cached sessions."""
    with _LOCK:
        sessions = list(_SESSIONS.values())
        _SESSIONS.clear()
    for s in sessions:
        s.close()


def score_array(model, array, *, batch_size: int = 65536, output_name: str | None = None,
                **options):
    """Score a Dask array of rows (axis 0) with a one-input model; returns a Dask array of
    the value ``output_name`` (default: the only graph output), chunked like ``array``
    along axis 0. ``model`` and ``options`` as in :func:`graphrt.score`."""
    import dask
    import dask.array as da

    session = as_session(model, **options)
    name = _one_output(session, output_name)
    if array.ndim > 1:
        array = array.rechunk({i: -1 for i in range(1, array.ndim)})
    sample = score(session, np.zeros((1,) + array.shape[1:], array.dtype), progress=False,
                   output_names=[name])
    tail = sample.shape[1:]
    ndim = 1 + len(tail)
    extra = {}
    if ndim < array.ndim:
        extra["drop_axis"] = list(range(ndim, array.ndim))
    elif ndim > array.ndim:
        extra["new_axis"] = list(range(array.ndim, ndim))
    shipped = dask.delayed(ShippedModel(session), pure=True)
    empty = sample[:0]
    return da.map_blocks(_score_block, array, shipped, batch_size, name, empty,
                         dtype=sample.dtype, chunks=(array.chunks[0],) + tuple((d,) for d in tail),
                         meta=np.empty((0,) * ndim, sample.dtype), **extra)


def score_frame(model, frame, *, batch_size: int = 65536, output_names=None, **options):
    """Score a Dask DataFrame partition by partition (columns as in :func:`graphrt.score`);
    returns a Dask DataFrame of the results (columns as in :func:`graphrt.score.to_frame`)
    with the input's index."""
    import dask
    import pandas as pd

    session = as_session(model, **options)
    names = [o.name for o in session.outputs] if output_names is None else list(output_names)
    row = pd.DataFrame({c: np.zeros(1, dt) for c, dt in frame.dtypes.items()})
    sample = score(session, row, progress=False, output_names=names)
    meta = to_frame(sample if isinstance(sample, dict) else {names[0]: sample}).iloc[:0]
    shipped = dask.delayed(ShippedModel(session), pure=True)
    return frame.map_partitions(_score_partition, shipped, batch_size, names, meta, meta=meta)


def _one_output(session, output_name):
    if output_name is not None:
        return output_name
    if len(session.outputs) != 1:
        raise ValueError(f"the model has {len(session.outputs)} outputs: name one with output_name=")
    return session.outputs[0].name


def _score_block(block, shipped: ShippedModel, batch_size: int, name: str, empty: np.ndarray):
    if block.shape[0] == 0:
        return empty
    return score(shipped.session(), block, batch_size, progress=False, output_names=[name])


def _score_partition(df, shipped: ShippedModel, batch_size: int, names: list, meta):
    if len(df) == 0:
        return meta.set_axis(df.index[:0])
    out = score(shipped.session(), df, batch_size, progress=False, output_names=names)
    return to_frame(out if isinstance(out, dict) else {names[0]: out}, index=df.index)
