"""Fast-mode GEMM paths: the BLAS tiles and the numba kernel give bits that do not depend on
the thread count; batch-size independence where it is promised (docs/kernels-gemm.md)."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphrt
from graphrt.kernels.gemm import blas
from graphrt.kernels.gemm import product

from ...models import make, tensor

F, D = TensorProto.FLOAT, TensorProto.DOUBLE
NP = {F: np.float32, D: np.float64}

needs_blas = pytest.mark.skipif(not blas.available(), reason="no scipy BLAS with a settable pool")

# (A shape, B shape): large K, M and N off multiples of 8, batches, broadcast, 1-D operands
# (the first five are cut into several BLAS tiles: see test_test_shapes_cover_tiling)
MATMUL_SHAPES = [
    ((300, 4099), (4099, 301)),
    ((2, 260, 1000), (1000, 301)),
    ((3, 5001), (5001, 2900)),
    ((513, 257), (257, 517)),
    ((24, 130, 70), (24, 70, 301)),
    ((37, 4099), (4099, 29)),
    ((3, 129, 70), (70, 301)),
    ((2, 1, 67, 33), (3, 33, 45)),
    ((12, 128, 64), (12, 64, 128)),
    ((1, 5000), (5000, 300)),
    ((300,), (300, 77)),
]
# (M, K, N, transA, transB, C shape)
GEMM_SHAPES = [
    (257, 1031, 129, 0, 0, (129,)),
    (65, 4097, 33, 1, 0, (65, 1)),
    (300, 400, 515, 0, 1, (300, 515)),
    (129, 77, 260, 1, 1, ()),
    (100, 300, 200, 0, 1, None),
    (1, 2048, 1000, 0, 1, (1000,)),     # one row, B transposed: scalar chains, in tiles
]


def matmul_model(sa, sb, dt=F):
    return make([helper.make_node("MatMul", ["A", "B"], ["Y"])],
                [tensor("A", dt, list(sa)), tensor("B", dt, list(sb))], [tensor("Y", dt, None)])


def gemm_model(sa, sb, sc, ta, tb, alpha=0.75, beta=1.5, dt=F):
    names = ["A", "B"] + ([] if sc is None else ["C"])
    ins = [tensor("A", dt, list(sa)), tensor("B", dt, list(sb))]
    if sc is not None:
        ins.append(tensor("C", dt, list(sc)))
    node = helper.make_node("Gemm", names, ["Y"], transA=ta, transB=tb, alpha=alpha, beta=beta)
    return make([node], ins, [tensor("Y", dt, None)], opset=13)


def run(model, feeds, threads, mode="fast"):
    s = graphrt.Session(model.SerializeToString(),
                        graphrt.SessionOptions(mode=mode, intra_op_threads=threads))
    return s.run(None, feeds)[0]


def gemm_case(m, k, n, ta, tb, sc, dt, rng):
    np_dt = NP[dt]
    sa, sb = ((k, m) if ta else (m, k)), ((n, k) if tb else (k, n))
    feeds = {"A": rng.standard_normal(sa).astype(np_dt), "B": rng.standard_normal(sb).astype(np_dt)}
    if sc is not None:
        feeds["C"] = rng.standard_normal(sc).astype(np_dt)
    return gemm_model(sa, sb, sc, ta, tb, dt=dt), feeds


def gemm_reference(feeds, ta, tb, alpha=0.75, beta=1.5):
    a = feeds["A"].astype(np.float64)
    b = feeds["B"].astype(np.float64)
    y = alpha * ((a.T if ta else a) @ (b.T if tb else b))
    return y + beta * feeds["C"] if "C" in feeds else y


@pytest.fixture(params=["tiles", "blas", "loop"])
def fast_path(request, monkeypatch):
    """Each fast-mode test runs on the three fast paths (GRAPHRT_GEMM picks one)."""
    if request.param == "blas" and not blas.available():
        pytest.skip("no scipy BLAS with a settable pool")
    monkeypatch.setenv("GRAPHRT_GEMM", request.param)
    return request.param


@pytest.mark.parametrize("dt", [F, D])
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_bits_do_not_depend_on_threads(fast_path, sa, sb, dt):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(sa).astype(NP[dt])
    b = rng.standard_normal(sb).astype(NP[dt])
    model = matmul_model(sa, sb, dt)
    y1 = run(model, {"A": a, "B": b}, 1)
    y2 = run(model, {"A": a, "B": b}, 2)
    assert y1.tobytes() == y2.tobytes()
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    tol = 2e-4 if dt == F else 1e-12
    np.testing.assert_allclose(y1, ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("dt", [F, D])
@pytest.mark.parametrize("m,k,n,ta,tb,sc", GEMM_SHAPES)
def test_gemm_bits_do_not_depend_on_threads(fast_path, m, k, n, ta, tb, sc, dt):
    model, feeds = gemm_case(m, k, n, ta, tb, sc, dt, np.random.default_rng(1))
    y1 = run(model, feeds, 1)
    y2 = run(model, feeds, 2)
    assert y1.tobytes() == y2.tobytes()
    ref = gemm_reference(feeds, ta, tb)
    tol = 2e-4 if dt == F else 1e-12
    np.testing.assert_allclose(y1, ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_concurrent_runs_give_the_same_bits(fast_path):
    """Several Python threads in one session: each result as on its own (the BLAS pool is
    held at one thread while any of them runs, and put back after)."""
    model, feeds = gemm_case(300, 700, 260, 0, 1, (260,), F, np.random.default_rng(2))
    s = graphrt.Session(model.SerializeToString(), graphrt.SessionOptions(intra_op_threads=2))
    want = s.run(None, feeds)[0].tobytes()
    results = []

    def work():
        results.extend(s.run(None, feeds)[0].tobytes() == want for _ in range(5))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 15


@pytest.mark.parametrize("mode", ["exact", "fast-loop", "fast-tiles"])
def test_rows_do_not_depend_on_batch_size(mode, monkeypatch):
    """The numba kernels (exact mode; fast mode's micro-kernel tiles and blocked loop)
    compute each row alone: a batch gives the rows it gives one at a time. The BLAS path
    does not promise this."""
    if mode.startswith("fast-"):
        monkeypatch.setenv("GRAPHRT_GEMM", mode[5:])
    mode = mode.split("-")[0]
    rng = np.random.default_rng(3)
    k, n = 1000, 131
    w = rng.standard_normal((k, n)).astype(np.float32)
    x = rng.standard_normal((37, k)).astype(np.float32)
    batch = run(matmul_model(x.shape, w.shape), {"A": x, "B": w}, 2, mode)
    single = graphrt.Session(matmul_model((1, k), w.shape).SerializeToString(),
                             graphrt.SessionOptions(mode=mode, intra_op_threads=1))
    rows = np.concatenate([single.run(None, {"A": x[i:i + 1], "B": w})[0] for i in range(37)])
    assert rows.tobytes() == batch.tobytes()
    model, feeds = gemm_case(37, 300, 70, 0, 1, (70,), F, rng)
    full = run(model, feeds, 2, mode)
    one = graphrt.Session(gemm_model((1, 300), (70, 300), (70,), 0, 1).SerializeToString(),
                          graphrt.SessionOptions(mode=mode, intra_op_threads=1))
    rows = np.concatenate([one.run(None, {"A": feeds["A"][i:i + 1], "B": feeds["B"],
                                          "C": feeds["C"]})[0] for i in range(37)])
    assert rows.tobytes() == full.tobytes()


@needs_blas
def test_tile_paths_are_taken_for_fast_floats_only(monkeypatch):
    def tiles(dtype, m=64, offa=(0,), offb=(0,)):
        return product.Product(np.dtype(dtype), m, 64, 64, (64, 1), (64, 1), offa, offb,
                               exact=False, fold=True).tiles
    assert tiles(np.float32) is not None
    assert tiles(np.float64) is not None
    assert tiles(np.int32) is None
    # the micro-kernel takes every size (rows stay batch-independent)
    assert tiles(np.float32, m=2).own
    monkeypatch.setenv("GRAPHRT_GEMM", "blas")
    assert not tiles(np.float32).own
    # below BLAS_MIN_WORK a BLAS call costs more than it saves: the blocked kernel runs
    assert tiles(np.float32, m=2) is None
    # a stack of A over one B is one product of all the rows
    call = tiles(np.float32, offa=[0, 4096, 8192], offb=[0, 0, 0])
    assert call.geo[product._T_M] == 192 and len(call.offa) == 1
    monkeypatch.setenv("GRAPHRT_GEMM", "loop")
    assert tiles(np.float32) is None


def test_test_shapes_cover_tiling():
    """The thread tests above mean something only where a product is cut into tiles."""
    cut = [(m, k, n) for m, k, n, *_ in GEMM_SHAPES if np.prod(
        [-(-x // t) for x, t in zip((m, n), product.tiling(1, m, n, k))]) > 1]
    assert len(cut) >= 2
    for sa, sb in MATMUL_SHAPES[:5]:
        batch = int(np.prod(np.broadcast_shapes(sa[:-2], sb[:-2]), dtype=np.int64))
        m, k, n = sa[-2], sa[-1], sb[-1]
        if len(sb) == 2:        # one B for the whole stack: one product of all the rows
            m, batch = m * batch, 1
        mb, cb = product.tiling(batch, m, n, k)
        assert batch * -(-m // mb) * -(-n // cb) > 1, (sa, sb)


@pytest.mark.parametrize("nb,m,n,k", [(1, 128, 768, 768), (8, 128, 3072, 768), (1, 1, 4096, 4096),
                                      (12, 128, 128, 64), (1, 1000, 3, 300), (3, 7, 9, 5)])
def test_tiling_depends_on_shapes_only(nb, m, n, k):
    mb, cb = product.tiling(nb, m, n, k)
    assert 1 <= mb <= m and 1 <= cb <= n
    tasks = nb * -(-m // mb) * -(-n // cb)
    assert tasks <= max(nb, product.MAX_TASKS)
    assert (mb, cb) == product.tiling(nb, m, n, k)


@needs_blas
def test_blas_pool_is_put_back():
    pools = blas._pools()
    before = [p.get() for p in pools]
    model, feeds = gemm_case(200, 300, 100, 0, 0, (100,), F, np.random.default_rng(4))
    run(model, feeds, 2)
    assert [p.get() for p in pools] == before


@pytest.mark.parametrize("alpha,beta", [(0.0, 1.0), (1.0, 0.0), (1.1, 0.7)])
def test_gemm_zero_scale_keeps_nan(fast_path, alpha, beta):
    """alpha = 0 or beta = 0 still propagates NaN/inf from the scaled term (the BLAS
    computes the plain product; the epilogue is graphrt's own on both paths)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((200, 30)).astype(np.float32)
    b = rng.standard_normal((30, 100)).astype(np.float32)
    c = rng.standard_normal((100,)).astype(np.float32)
    (a if alpha == 0 else c)[0] = np.inf
    y = run(gemm_model(a.shape, b.shape, c.shape, 0, 0, alpha, beta), {"A": a, "B": b, "C": c}, 1)
    with np.errstate(invalid="ignore"):
        ref = alpha * (a @ b) + beta * c
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_gemm_epilogue_is_the_same_on_both_fast_paths(monkeypatch):
    """K = 1, so the product is one rounding on any path: the unfused epilogue alpha * acc +
    beta * c then gives the same bits on the BLAS and the numba path."""
    model, feeds = gemm_case(300, 1, 500, 0, 0, (300, 500), F, np.random.default_rng(6))
    y = run(model, feeds, 2)
    for path in ("blas", "loop"):
        monkeypatch.setenv("GRAPHRT_GEMM", path)
        assert run(model, feeds, 2).tobytes() == y.tobytes()


@pytest.mark.parametrize("path", ["tiles", "blas"])
def test_product_for_other_kernels(path, monkeypatch):
    """A Product as Conv plans it: per-entry offsets, A read transposed, and fewer batch
    entries at call time than planned."""
    if path == "blas" and not blas.available():
        pytest.skip("no scipy BLAS with a settable pool")
    monkeypatch.setenv("GRAPHRT_GEMM", path)
    rng = np.random.default_rng(7)
    m, n, k, nb = 70, 300, 260, 3
    a = rng.standard_normal(2 * k * m).astype(np.float32)       # two A^T matrices (k, m)
    b = rng.standard_normal(nb * k * n).astype(np.float32)
    offa = np.array([0, k * m, 0])
    offb = np.arange(nb) * k * n
    call = product.Product(np.float32, m, n, k, (1, m), (n, 1), offa, offb, exact=False)
    assert call.tiles is not None
    out = np.full(nb * m * n, np.nan, np.float32)
    call(a, b, out, batches=2)
    for i in range(2):
        want = a[offa[i]:offa[i] + k * m].reshape(k, m).T.astype(np.float64) @ \
            b[offb[i]:offb[i] + k * n].reshape(k, n)
        np.testing.assert_allclose(out[i * m * n:(i + 1) * m * n].reshape(m, n), want,
                                   rtol=1e-4, atol=1e-3)
    assert np.isnan(out[2 * m * n:]).all()


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("dt", [F, D])
@pytest.mark.parametrize("alpha,beta,c_rows", [(1.0, 1.0, 1), (0.75, 1.5, 1), (1.0, 1.0, None),
                                               (1.0, -2.0, "m"), (-1.5, 1.0, 0), (1.0, 1.0, 0)])
@pytest.mark.parametrize("relu", [False, True])
def test_epilogue_in_the_micro_kernel_gives_the_pass_bits(mode, dt, alpha, beta, c_rows, relu):
    """24 rows (whole micro-tiles: where alpha = beta = 1 the micro-kernel adds C and applies
    Relu as it stores) and the same rows plus one (an edge panel: the separate pass over the
    tile) give the same bits, NaN, infinities and signed zeros included. c_rows: C as a bias
    row (1), a full matrix ("m"), a column (None: read across, never fused) or no C (0)."""
    rng = np.random.default_rng(11)
    k, n = 40, 70
    a = rng.standard_normal((25, k)).astype(NP[dt])
    b = rng.standard_normal((k, n)).astype(NP[dt])
    a[3, 5], a[7, :] = np.inf, 0.0
    b[2, 9] = np.nan
    shape = {1: (n,), "m": (25, n), None: (25, 1), 0: None}[c_rows]
    c = None if shape is None else rng.standard_normal(shape).astype(NP[dt])
    if c is not None:
        c.flat[0] = -0.0
    ys = []
    for m in (24, 25):
        feeds = {"A": a[:m], "B": b}
        if c is not None:
            feeds["C"] = c if c_rows == 1 else c[:m]
        model = gemm_model((m, k), b.shape, None if c is None else feeds["C"].shape, 0, 0,
                           alpha, beta, dt)
        if relu:
            model.graph.node[0].output[0] = "T"
            model.graph.node.append(helper.make_node("Relu", ["T"], ["Y"]))
        ys.append(run(model, feeds, 1, mode))
    assert ys[0].tobytes() == ys[1][:24].tobytes()
    if alpha < 0:       # row 7 is alpha * +0 = -0 (but NaN in column 9); Relu makes it +0
        signs = np.signbit(np.delete(ys[0][7], 9))
        assert not signs.any() if relu else signs.all()
    with np.errstate(invalid="ignore"):
        ref = alpha * (a[:24].astype(np.float64) @ b)
    if c is not None:
        ref = ref + beta * (c if c_rows == 1 else c[:24])
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(ys[0], np.maximum(ref, 0) if relu else ref, rtol=1e-4,
                                   atol=1e-4)
