"""graphrt.dask on a real local cluster: 2 worker processes, one session per process, results
equal to single-process scoring (bit for bit in exact mode)."""
import os

import numpy as np
import pytest

import graphrt

from . import models

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")

import graphrt.dask as gdask  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def client():
    # Worker processes import graphrt: make this checkout importable there too.
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, old) if p)
    try:
        with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                      dashboard_address=None, silence_logs=40) as cluster, \
                distributed.Client(cluster) as c:
            yield c
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def test_million_rows_on_two_workers_equal_single_process(client):
    model = models.mlp()
    n = 1_000_000
    rows = da.random.default_rng(7).standard_normal((n, 16), chunks=(62_500, 16), dtype=np.float32)
    lazy = gdask.score_array(model, rows, batch_size=20_000, mode="exact", intra_op_threads=1)
    assert lazy.shape == (n, 4) and lazy.dtype == np.float32 and lazy.numblocks == (16, 1)
    x, got = dask.compute(rows, lazy)         # the rows are made on the workers
    assert x.shape == (n, 16) and x.dtype == np.float32
    expected = graphrt.score(model, x, batch_size=50_000, progress=False, mode="exact",
                             intra_op_threads=1)
    assert got.shape == expected.shape
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    # One cached session per worker process, and both workers took part.
    per_worker = client.run(gdask.cached_sessions)
    assert len(per_worker) == 2 and sorted(per_worker.values()) == [1, 1]
    assert gdask.cached_sessions() == 0      # nothing was scored through the cache here


def test_dataframe_partitions_on_the_cluster(client):
    model = models.mlp(sizes=(16, 32, 3), seed=3)
    x = np.random.default_rng(8).standard_normal((20_000, 16))          # float64 columns
    df = pd.DataFrame(x, columns=[f"f{i}" for i in range(16)], index=np.arange(20_000) * 2)
    out = gdask.score_frame(model, dd.from_pandas(df, npartitions=5), batch_size=1500,
                            mode="exact").compute()
    expected = graphrt.score(model, x.astype(np.float32), progress=False, mode="exact")
    assert list(out.columns) == ["y_0", "y_1", "y_2"]
    assert np.array_equal(out.index.to_numpy(), df.index.to_numpy())
    assert np.array_equal(out.to_numpy(), expected)


def test_intermediate_value_and_shape_change_in_process():
    """Without a cluster (dask's threaded scheduler): a named intermediate value, uneven
    chunks, a column-chunked input rechunked to whole rows."""
    model = models.mlp(sizes=(8, 5, 1))
    x = np.random.default_rng(9).standard_normal((1001, 8)).astype(np.float32)
    h0 = gdask.score_array(model, da.from_array(x, chunks=(300, 4)), output_name="r0")
    assert h0.chunks[1] == (5,)
    sess = graphrt.Session(model)
    np.testing.assert_array_equal(h0.compute(scheduler="threads"), sess.run(["r0"], {"x": x})[0])
    assert gdask.cached_sessions() == 1
    gdask.clear_cache()
    assert gdask.cached_sessions() == 0


def test_a_model_with_several_outputs_needs_a_name():
    from onnx import helper
    model = models.make([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Identity", ["x"], ["b"])],
                        [models.tensor("x", models.F, ["n", 2])],
                        [models.tensor("a", models.F, ["n", 2]), models.tensor("b", models.F, ["n", 2])])
    with pytest.raises(ValueError, match="output_name"):
        gdask.score_array(model, da.ones((4, 2), dtype=np.float32, chunks=2))
    b = gdask.score_array(model, da.ones((4, 2), dtype=np.float32, chunks=2), output_name="b")
    assert np.array_equal(b.compute(scheduler="threads"), np.ones((4, 2), np.float32))


def test_rank_changes_drop_and_add_axes():
    from onnx import helper
    squeeze = models.make([helper.make_node("Squeeze", ["x", "axes"], ["y"])],
                          [models.tensor("x", models.F, ["n", 1])], [models.tensor("y", models.F, ["n"])],
                          [models.const("axes", np.array([1], np.int64))])
    x = np.arange(10, dtype=np.float32).reshape(10, 1)
    y = gdask.score_array(squeeze, da.from_array(x, chunks=3))
    assert y.ndim == 1 and y.chunks == ((3, 3, 3, 1),)
    assert np.array_equal(y.compute(scheduler="threads"), x[:, 0])
    unsqueeze = models.make([helper.make_node("Unsqueeze", ["x", "axes"], ["y"])],
                            [models.tensor("x", models.F, ["n"])], [models.tensor("y", models.F, ["n", 1])],
                            [models.const("axes", np.array([1], np.int64))])
    z = gdask.score_array(unsqueeze, da.from_array(x[:, 0], chunks=4))
    assert z.chunks == ((4, 4, 2), (1,))
    assert np.array_equal(z.compute(scheduler="threads"), x)
