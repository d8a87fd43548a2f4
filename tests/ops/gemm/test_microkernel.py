"""graphrt's fast-mode GEMM micro-kernel (graphrt/kernels/gemm/microkernel.py): values against a
float64 product, and the promise that an element's bits depend on its row of A, its column
of B and K only — not on M, N, where the tile cuts, the operand layout or the path taken."""
from __future__ import annotations

import numpy as np
import pytest

import graphrt
from graphrt.kernels.gemm import microkernel as mk

from ...helpers import model_of


def _conv_then(x, inits, then, **attrs):
    """A model of a Conv of X and the initializers ``inits`` (W, then B if given), then
    the node ``then`` (an op type, or None)."""
    from onnx import helper
    names = ["X"] + [t.name for t in inits]
    nodes = [helper.make_node("Conv", names, ["C" if then else "Y"], **attrs)]
    if then:
        nodes.append(helper.make_node(then, ["C"], ["Y"]))
    et = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "X", et, list(x.shape))], [helper.make_tensor_value_info("Y", et, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _at_both_counts_and_flagged(model, x, mode, monkeypatch, module, **flags):
    """(Y at 1 thread, Y at 2 threads, Y of a session planned with ``module``'s ``flags``)."""
    got = [graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=t, mode=mode)).run(
        None, {"X": x})[0] for t in (1, 2)]
    for name, value in flags.items():
        monkeypatch.setattr(module, name, value)
    return got + [graphrt.Session(model, graphrt.SessionOptions(mode=mode)).run(
        None, {"X": x})[0]]

SHAPES = [(1, 1, 1), (1, 7, 5), (13, 7, 37), (12, 256, 32), (25, 300, 70), (3, 513, 100),
          (40, 0, 9), (97, 1031, 45), (2, 64, 600), (20, 300, 45), (16, 70, 33), (28, 9, 64),
          # last panels of 5 to 11 rows: a piece of a kernel's height, then the last four again
          (10, 300, 45), (22, 40, 70), (7, 520, 33), (17, 9, 64), (35, 257, 96),
          # last panels of 1 to 3 rows after a whole one: the two run as one panel's pieces
          (32, 300, 70), (15, 520, 33), (8, 9, 64), (26, 300, 45), (63, 257, 20)]


def product(a, b, *, transposed_b=False, exact=False, table=False, panels=False):
    m, k = a.shape
    n = b.shape[0] if transposed_b else b.shape[1]
    out = np.full(m * n, np.nan, a.dtype)
    work = mk.work_for(out.dtype)[0]
    plain = (out, 0, 0, 0)        # no epilogue
    kt = mk.kernels(out.dtype, exact)
    if transposed_b:    # b holds B^T (n, k): B[k, j] at j * k + k
        mk.tile_product(a.reshape(-1), 0, k, 1, b.reshape(-1), 0, 1, k, out, 0, n, m, n, k,
                        work, exact, mk.NO_TABLE, False, plain, kt)
    elif table:         # B's rows in reverse order, n + 3 apart, found through the table
        src = np.full((k, n + 3), np.nan, a.dtype)
        src[::-1, 2:n + 2] = b
        tab = np.arange(k - 1, -1, -1, dtype=np.int64) * (n + 3) + 2
        mk.tile_product(a.reshape(-1), 0, k, 1, src.reshape(-1), 0, 0, 1, out, 0, n, m, n, k,
                        work, exact, tab, False, plain, kt)
    elif panels:        # B as NR-column panels laid out once (constant weights)
        mk.tile_product(a.reshape(-1), 0, k, 1, mk.pack_panels(b, a.dtype), 0,
                        mk.nr_of(a.itemsize), k, out, 0, n, m, n, k, work, exact,
                        mk.NO_TABLE, True, plain, kt)
    else:
        mk.tile_product(a.reshape(-1), 0, k, 1, b.reshape(-1), 0, n, 1, out, 0, n, m, n, k,
                        work, exact, mk.NO_TABLE, False, plain, kt)
    return out.reshape(m, n)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_values_and_layouts(m, k, n, dt):
    rng = np.random.default_rng(m * 1000 + k + n)
    a = rng.standard_normal((m, k)).astype(dt)
    b = rng.standard_normal((k, n)).astype(dt)
    y = product(a, b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-5 if dt == np.float32 else 1e-13
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol * max(1, np.sqrt(k)))
    # B transposed in memory (packed panels, or the few-rows path): the same bits
    assert product(a, np.ascontiguousarray(b.T), transposed_b=True).tobytes() == y.tobytes()
    # B's rows found through a table (the implicit-GEMM convolution), or B laid out as
    # panels (constant weights): the same bits
    for exact in (False, True):
        plain = product(a, b, exact=exact).tobytes()
        assert product(a, b, table=True, exact=exact).tobytes() == plain
        assert product(a, b, panels=True, exact=exact).tobytes() == plain


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_bits_do_not_depend_on_m_n_or_position(dt):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((50, 700)).astype(dt)
    b = rng.standard_normal((700, 90)).astype(dt)
    full = product(a, b)
    for i in (0, 11, 12, 49):           # alone, at a panel's last row, first row, the edge
        assert product(a[i:i + 1], b).tobytes() == full[i:i + 1].tobytes()
    assert product(a[5:30], b[:, 3:70]).tobytes() == \
        np.ascontiguousarray(full[5:30, 3:70]).tobytes()
    for i0, i1 in ((1, 11), (3, 10), (0, 21)):     # last panels of 10, 7 and 9 rows (K > KC)
        assert product(a[i0:i1], b).tobytes() == full[i0:i1].tobytes()


def test_identical_rows_give_identical_results():
    """onnx's light models have constant weights: their channels must tie exactly."""
    rng = np.random.default_rng(2)
    w = np.full((100, 300), 0.0123, np.float32)
    x = rng.standard_normal((300, 169)).astype(np.float32)
    y = product(w, x)
    assert (y == y[0]).all()


def test_conv_channels_with_equal_weights_tie_in_fast_mode():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 16, 13, 13)).astype(np.float32)
    w = np.full((40, 16, 3, 3), 0.05, np.float32)
    model = model_of("Conv", {"X": x, "W": w}, [("Y", np.float32)], {"pads": [1, 1, 1, 1]})
    y = graphrt.Session(model).run(None, {"X": x, "W": w})[0]
    assert (y == y[:, :1]).all()


@pytest.mark.parametrize("group,stride,pads", [(1, 1, 1), (2, 2, 0), (1, 3, 2)])
def test_conv_tiles_equal_the_whole_image_path(group, stride, pads, monkeypatch):
    """A large Conv unfolds blocks of output positions per task (conv._conv_tiles); the bits
    are the whole-image column matrix's, at 1 and 2 threads."""
    from graphrt.kernels.nn import conv
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 16, 150, 150)).astype(np.float32)
    w = rng.standard_normal((24, 16 // group, 3, 3)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    attrs = {"pads": [pads] * 4, "strides": [stride] * 2, "group": group}
    model = model_of("Conv", {"X": x, "W": w, "B": b}, [("Y", np.float32)], attrs)
    feeds = {"X": x, "W": w, "B": b}
    monkeypatch.setattr(conv, "WHOLE_COL_BYTES", 1 << 16)
    tiles = [graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=t)).run(
        None, feeds)[0] for t in (1, 2)]
    monkeypatch.setattr(conv, "WHOLE_COL_BYTES", 1 << 40)
    whole = graphrt.Session(model).run(None, feeds)[0]
    assert tiles[0].tobytes() == tiles[1].tobytes() == whole.tobytes()
    from onnx.reference import ReferenceEvaluator
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(whole, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("shape,kernel,attrs", [
    ((2, 5, 11, 13), (7, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 4, 12, 9), (6, 2, 3, 2), {"pads": [0, 2, 1, 0], "strides": [2, 3], "group": 2}),
    ((1, 3, 14, 14), (26, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((2, 8, 9, 9), (16, 8, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 40), (5, 3, 4), {"pads": [3, 1], "strides": [2]})])
def test_implicit_gemm_conv_equals_the_column_matrix(shape, kernel, attrs, mode, monkeypatch):
    """2-d (and 1-d) Convs read the micro-kernel's B rows in place from the stride-phase
    planes (conv._implicit) instead of unfolding a column matrix: the same bits, NaN and
    infinite weights included, at 1 and 2 threads, in both modes."""
    from graphrt.kernels.nn import conv
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(kernel).astype(np.float32)
    b = rng.standard_normal(kernel[0]).astype(np.float32)
    x.reshape(-1)[0] = np.nan
    w.reshape(-1)[-1] = np.inf
    model = model_of("Conv", {"X": x, "W": w, "B": b}, [("Y", np.float32)], attrs)
    feeds = {"X": x, "W": w, "B": b}
    got = [graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=t, mode=mode)).run(
        None, feeds)[0] for t in (1, 2)]
    monkeypatch.setattr(conv, "IMPLICIT", False)     # plans made now unfold a column matrix
    want = graphrt.Session(model, graphrt.SessionOptions(mode=mode)).run(None, feeds)[0]
    assert got[0].tobytes() == got[1].tobytes() == want.tobytes()
    assert np.isnan(want).any() and np.isfinite(want).any()


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("images,channels,out,bias,then,dt", [
    (1, 576, 144, True, "Relu", np.float32), (3, 37, 70, False, None, np.float32),
    (2, 9, 3, True, "HardSigmoid", np.float32), (2, 40, 24, True, None, np.float16)])
def test_convolutions_of_one_output_position_equal_the_tiles(images, channels, out, bias, then,
                                                             dt, mode, monkeypatch):
    """A Conv whose output is one position an image (1 x 1 maps, the squeeze-and-excite
    blocks) multiplies the images' rows by its constant weights laid out as the product's B
    (float16 weights: their float32 copy): the bits of W x through the tiles, at 1 and 2
    threads, in both modes."""
    from onnx import numpy_helper

    from graphrt.kernels.nn import conv
    rng = np.random.default_rng(12)
    x = rng.standard_normal((images, channels, 1, 1)).astype(dt)
    w = rng.standard_normal((out, channels, 1, 1)).astype(dt)
    x[-1, 1] = np.nan if images > 1 else 0.0      # (a NaN image: every output NaN)
    w.reshape(-1)[-1] = np.inf
    inits = [numpy_helper.from_array(w, "W")]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(out).astype(dt), "B"))
    # the last: plans that take W x through the tiles
    one, two, want = _at_both_counts_and_flagged(_conv_then(x, inits, then), x, mode,
                                                 monkeypatch, conv, GEMV=False)
    assert one.tobytes() == two.tobytes() == want.tobytes()
    assert not np.isfinite(want).all() and np.isfinite(want).any()


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("kernel", ["planes", "lanes", "rows"])
@pytest.mark.parametrize("mult,stride,pads,dil,taps,c,hw", [
    (1, 1, 1, 1, (3, 3), 6, (11, 13)), (2, 2, 1, 1, (3, 3), 6, (11, 13)),
    (1, 2, 0, 2, (3, 3), 6, (11, 13)), (3, 1, 2, 1, (3, 3), 6, (11, 13)),
    (1, 1, 2, 1, (5, 5), 6, (11, 13)), (2, 2, 1, 1, (2, 3), 6, (11, 13)),
    (1, 1, 2, 1, (5, 5), 37, (11, 13)), (1, 2, 2, 1, (5, 5), 20, (11, 13)),
    (1, 1, 1, 1, (3, 3), 3, (9, 71)), (1, 2, 1, 1, (3, 3), 3, (16, 67)),
    (2, 1, 3, 2, (3, 4), 2, (15, 40)), (1, 2, 2, 1, (5, 5), 2, (30, 35))])
def test_depthwise_conv_equals_the_gemm_path(mult, stride, pads, dil, taps, c, hw, kernel,
                                             mode, monkeypatch):
    """Depthwise Conv (one input channel per group) runs its own kernels: by planes (windows
    of nine taps in one pass; five taps a pass and the rest), on small planes a vector
    register of channels at a time (_depthwise_lanes: blocks of fewer at the end, positions
    four, two and one a call), or by rows read in place (depthwise_rows: column strides 1
    and 2, rows of one vector or many, windows unrolled or not); their bits are the
    micro-kernel GEMM's in both modes (padding taps as products with 0: an infinite weight
    gives NaN at the border there too; exact mode's NaN canonical)."""
    from graphrt.kernels.nn import conv
    monkeypatch.setattr(conv, "LANES_PLANE", 10 ** 9 if kernel == "lanes" else 0)
    monkeypatch.setattr(conv, "BY_ROWS", kernel == "rows")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, c) + hw).astype(np.float32)
    w = rng.standard_normal((c * mult, 1) + taps).astype(np.float32)
    w[1, 0, 0, 0] = np.inf
    w[-1, 0, 0, -1] = np.inf
    attrs = {"pads": [pads] * 4, "strides": [stride] * 2, "dilations": [dil] * 2, "group": c}
    model = model_of("Conv", {"X": x, "W": w}, [("Y", np.float32)], attrs)
    x[0, 1, 4, 4] = np.nan
    got = [graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=t, mode=mode)).run(
        None, {"X": x, "W": w})[0] for t in (1, 2)]
    monkeypatch.setattr(conv, "DEPTHWISE_ROWS", False)   # plans made now take the GEMM path
    want = graphrt.Session(model, graphrt.SessionOptions(mode=mode)).run(None, {"X": x, "W": w})[0]
    assert got[0].tobytes() == got[1].tobytes() == want.tobytes()
    assert np.isnan(want).any()


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("then", [None, "Relu", "BatchNormalization"])
def test_depthwise_rows_apply_the_bias_and_what_the_conv_absorbed(then, mode, monkeypatch):
    """The row kernel adds the bias and applies an absorbed Relu to each plane it makes; a
    folded scale-and-shift (fast mode) is left to the bias pass: the bits of the plane
    kernel's path, which applies them all in that pass."""
    from onnx import helper, numpy_helper

    from graphrt.kernels.nn import conv
    rng = np.random.default_rng(8)
    c = 24
    x = rng.standard_normal((1, c, 14, 14)).astype(np.float32)
    inits = [numpy_helper.from_array(rng.standard_normal((c, 1, 5, 5)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "B")]
    if then == "BatchNormalization":
        model = _conv_then(x, inits, None, group=c, pads=[2] * 4)
        for name in ("s", "t", "mu", "var"):
            model.graph.initializer.append(numpy_helper.from_array(
                (rng.random(c) + 0.5).astype(np.float32), name))
        model.graph.node[0].output[0] = "C"
        model.graph.node.append(helper.make_node(then, ["C", "s", "t", "mu", "var"], ["Y"]))
    else:
        model = _conv_then(x, inits, then, group=c, pads=[2] * 4)
    one, two, want = _at_both_counts_and_flagged(model, x, mode, monkeypatch, conv,
                                                 BY_ROWS=False, LANES_PLANE=0)
    assert one.tobytes() == two.tobytes() == want.tobytes()
    assert (want < 0).any() == (then != "Relu")


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_exact_arithmetic_gives_the_blocked_kernels_bits(m, k, n, dt, monkeypatch):
    """Exact mode's micro-kernel (a rounded multiply, then a rounded add) against the
    blocked exact kernel (GRAPHRT_GEMM=loop), which does the same operations in the same
    order."""
    from graphrt.kernels.gemm.product import Product
    rng = np.random.default_rng(m + 7 * k + 13 * n)
    a = rng.standard_normal((m, k)).astype(dt)
    b = rng.standard_normal((k, n)).astype(dt)
    monkeypatch.setenv("GRAPHRT_GEMM", "loop")
    blocked = Product(dt, m, n, k, (k, 1), (n, 1), exact=True)
    assert blocked.tiles is None
    want = np.zeros(m * n, dt)
    blocked(a.reshape(-1), b.reshape(-1), want)
    assert product(a, b, exact=True).tobytes() == want.tobytes()
    assert product(a, np.ascontiguousarray(b.T), transposed_b=True,
                   exact=True).tobytes() == want.tobytes()


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("weights", ["constant", "input", "transposed"])
def test_few_rows_entry_gives_the_blocked_entrys_bits(weights, mode):
    """A product whose tiles all have fewer than FEW_ROWS rows takes one of the tile entry's
    few-rows paths (driver_ir), a larger one its blocked path: a row's bits are the same on
    both."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    a = rng.standard_normal((9, 70)).astype(np.float32)
    b = rng.standard_normal((40, 70) if weights == "transposed" else (70, 40)).astype(np.float32)
    node = helper.make_node("Gemm", ["A", "B"], ["Y"], transB=int(weights == "transposed"))
    inputs = [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["m", 70])]
    inits = []
    if weights == "constant":
        inits.append(numpy_helper.from_array(b, "B"))
    else:
        inputs.append(helper.make_tensor_value_info("B", TensorProto.FLOAT, b.shape))
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode))
    feeds = {} if weights == "constant" else {"B": b}
    full = sess.run(None, dict(feeds, A=a))[0]
    for rows in (1, 2, 3):
        few = sess.run(None, dict(feeds, A=a[:rows]))[0]
        assert few.tobytes() == full[:rows].tobytes()
    want = a.astype(np.float64) @ (b.T if weights == "transposed" else b).astype(np.float64)
    np.testing.assert_allclose(full, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_one_row_product_gives_the_micro_kernels_bits(dt, exact):
    """micro_ir's one-row product (the few-rows path over a k-major B, the recurrences'
    steps) on strided A, B rows ldb apart and an offset output: the bits of the blocked
    micro-kernel's tile for that row, for every remainder of columns and rows of k, and
    nothing written outside its columns."""
    from numba import njit

    from graphrt.kernels.gemm import micro_ir

    @njit
    def one_row(addr, a, ao, a_k, b, bo, ldb, c, co, kc, cols):
        micro_ir.gemv(addr, a, ao, a_k, b, bo, ldb, c, co, kc, cols)

    addr = mk.kernels(dt, exact)[micro_ir.GEMV]
    rng = np.random.default_rng(11)
    for k in (0, 1, 2, 3, 8, 37):
        for n in (1, 5, 8, 15, 16, 17, 33, 63, 64, 65, 130, 515):
            a = rng.standard_normal(3 * k + 2).astype(dt)
            b = rng.standard_normal((k, n + 5)).astype(dt)
            c = np.full(n + 9, 7, dt)
            one_row(addr, a, 2, 3, b.reshape(-1), 1, n + 5, c, 4, k, n)
            want = product(np.ascontiguousarray(a[2::3][:k].reshape(1, k)),
                           np.ascontiguousarray(b[:, 1:n + 1]), panels=True, exact=exact)
            assert c[4:4 + n].tobytes() == want.reshape(-1).tobytes(), (k, n)
            assert np.all(c[:4] == 7) and np.all(c[4 + n:] == 7)


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("images,channels,out,hw,bias,then", [
    (1, 16, 16, (12, 13), True, "Relu"), (2, 5, 13, (9, 9), True, None),
    (3, 7, 24, (5, 11), False, "Relu"), (1, 9, 72, (7, 7), True, "Relu"),
    (2, 3, 7, (20, 20), True, "HardSigmoid")])
def test_one_by_one_convs_store_bias_and_relu_as_the_bias_pass(images, channels, out, hw,
                                                               bias, then, mode, monkeypatch):
    """A Conv of 1 x 1 windows (stride 1, no padding) adds its bias and applies an absorbed
    Relu as its tiles store (conv._stores_epilogue; tiles of rows the micro-kernel cannot
    fuse, in their pass while in cache): the bits of the separate bias pass, NaN and
    infinities included, at 1 and 2 threads, in both modes."""
    from onnx import numpy_helper

    from graphrt.kernels.nn import conv
    rng = np.random.default_rng(21)
    x = rng.standard_normal((images, channels) + hw).astype(np.float32)
    w = rng.standard_normal((out, channels, 1, 1)).astype(np.float32)
    x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    w.reshape(-1)[-1] = np.inf
    inits = [numpy_helper.from_array(w, "W")]
    if bias:
        b = rng.standard_normal(out).astype(np.float32)
        b[0] = -np.inf
        inits.append(numpy_helper.from_array(b, "B"))
    # the last: plans that take the bias pass
    one, two, want = _at_both_counts_and_flagged(_conv_then(x, inits, then), x, mode,
                                                 monkeypatch, conv, STORE_EPILOGUE=False)
    assert one.tobytes() == two.tobytes() == want.tobytes()
    assert np.isnan(want).any() and np.isfinite(want).any()
