"""Conv, ConvTranspose, DeformConv, the pools, MaxUnpool and LRN through graphrt.Session,
compared with onnx's reference evaluator or numpy."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind, SessionOptions
from graphrt.kernels.nn import conv as conv_module

from .test_reduce_ops import bits, close, expect_error, i64, ours, rand, reference

EXACT = SessionOptions(mode="exact")
F32 = np.float32


def threads(n, exact=True):
    return SessionOptions(mode="exact" if exact else "fast", intra_op_threads=n)


def salted(shape, seed):
    """Normal values with a few NaN, infinities and signed zeros."""
    x = rand(shape, seed=seed)
    flat = x.reshape(-1)
    picks = np.random.default_rng(seed).choice(flat.size, 12, replace=False)
    flat[picks] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40] * 2, F32)
    return x


# ----------------------------------------------------------------------------- Conv

CONV_CASES = [
    # x shape, w shape, attributes
    ((2, 4, 9), (6, 2, 3), {"group": 2, "strides": [2], "pads": [1, 2], "dilations": [2]}),
    ((1, 3, 7, 8), (4, 3, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ((1, 3, 7, 8), (4, 3, 3, 3), {"auto_pad": "SAME_LOWER", "dilations": [1, 2]}),
    ((1, 2, 6, 7), (3, 2, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]}),
    ((2, 4, 5, 6, 7), (4, 1, 2, 3, 2), {"group": 4, "pads": [1, 0, 1, 1, 2, 0]}),
    ((1, 8, 10, 10), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),      # depthwise
    ((3, 5, 6, 6), (7, 5, 1, 1), {}),                                      # direct 1x1
    ((1, 3, 5, 5), (2, 3, 3, 3), {"kernel_shape": [3, 3], "pads": [2, 0, 0, 2]}),
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_matches_reference(xs, ws, attrs, bias):
    x, w = rand(xs, seed=1), rand(ws, seed=2)
    inputs = [x, w] + ([rand(ws[0], seed=3)] if bias else [])
    close(ours("Conv", inputs, attrs), reference("Conv", inputs, attrs), 1e-5, 1e-5)


def test_conv_exact_order_threads_and_nan():
    """Exact mode: per output acc = 0, acc += w * x over channels then kernel positions
    (padding taps included), then the bias; the same bits on 1 and 2 threads."""
    x, w, b = salted((2, 16, 20, 20), 4), rand((32, 16, 3, 3), seed=5), rand(32, seed=6)
    attrs = {"pads": [1, 1, 1, 1]}
    one, two = (ours("Conv", [x, w, b], attrs, options=threads(n)) for n in (1, 2))
    np.testing.assert_array_equal(bits(one), bits(two))
    nan = np.isnan(one)
    assert nan.any() and np.all(one.view(np.uint32)[nan] == 0x7FC00000)
    # the documented order, emulated with float32 numpy operations (each correctly rounded)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = np.zeros((2, 32, 20, 20), F32)
    with np.errstate(invalid="ignore"):
        for c in range(16):
            for kh in range(3):
                for kw in range(3):
                    tap = xp[:, None, c, kh:kh + 20, kw:kw + 20]
                    acc = acc + w[None, :, c, kh, kw, None, None] * tap
        acc = acc + b[None, :, None, None]
    np.testing.assert_array_equal(np.isnan(acc), nan)
    np.testing.assert_array_equal(one[~nan], acc[~nan])
    fast = ours("Conv", [x, w, b], attrs, options=threads(2, exact=False))
    np.testing.assert_allclose(fast[~nan], acc[~nan], 1e-4, 1e-4)


def test_conv_dtypes_chunks_and_empty(monkeypatch):
    x, w, b = rand((3, 4, 6, 6), np.float64, 7), rand((2, 4, 3, 3), np.float64, 8), \
        rand(2, np.float64, 9)
    close(ours("Conv", [x, w, b]), reference("Conv", [x, w, b]), 1e-12, 1e-12)
    h = [a.astype(np.float16) for a in (x, w, b)]
    want = reference("Conv", [a.astype(F32) for a in h]).astype(np.float16)
    close(ours("Conv", h), want, 2e-3, 2e-3)
    # one image per im2col chunk
    monkeypatch.setattr(conv_module, "COL_BYTES", 64)
    close(ours("Conv", [x, w, b], {"pads": [1, 1, 1, 1]}),
          reference("Conv", [x, w, b], {"pads": [1, 1, 1, 1]}), 1e-12, 1e-12)
    empty = ours("Conv", [np.zeros((0, 4, 6, 6), F32), w.astype(F32)])
    assert empty.shape == (0, 2, 4, 4)
    # all inputs constant: folded when the plan is made (no run arena then)
    folded = ours("Conv", [x, w, b], {"pads": [1, 1, 1, 1]}, const=(0, 1, 2))
    close(folded, reference("Conv", [x, w, b], {"pads": [1, 1, 1, 1]}), 1e-12, 1e-12)


def test_conv_errors():
    x, w = rand((1, 2, 4, 4)), rand((3, 2, 3, 3))
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, rand((3, 2, 5, 5))],
                 match="larger than the padded input")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"pads": [-1, 0, 0, 0]},
                 match="below 0")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"strides": [0, 1]})
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"pads": [1, 1]},
                 match="should have 4 values")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"group": 2}, match="group")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"auto_pad": "SAME"})
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"kernel_shape": [2, 2]},
                 match="does not match")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w, rand(2)], match="B of shape")
    expect_error(ErrorKind.UNSUPPORTED, ours, "Conv",
                 [np.ones((1, 2, 4, 4), np.int32), np.ones((3, 2, 3, 3), np.int32)])
    expect_error(ErrorKind.UNSUPPORTED, ours, "Conv", [rand((1, 1, 2, 2, 2, 2)),
                                                       rand((1, 1, 1, 1, 1, 1))])


# ----------------------------------------------------------------------------- ConvTranspose

def conv_transpose_reference(x, w, b, attrs):
    """onnx's reference, one group at a time (it mishandles several channels per group)."""
    g = attrs.get("group", 1)
    single = {k: v for k, v in attrs.items() if k != "group"}
    cx, cw = x.shape[1] // g, w.shape[1]
    parts = [reference("ConvTranspose", [x[:, i * cx:(i + 1) * cx], w[i * cx:(i + 1) * cx]]
                       + ([] if b is None else [b[i * cw:(i + 1) * cw]]), single)
             for i in range(g)]
    return np.concatenate(parts, axis=1)


CT_CASES = [
    ((2, 4, 5), (4, 3, 3), {"group": 2, "strides": [2], "pads": [1, 2], "dilations": [2]}),
    ((1, 3, 4, 5), (3, 2, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 1],
                                  "dilations": [1, 2]}),
    ((2, 4, 3, 4, 3), (4, 1, 2, 3, 2), {"group": 4, "pads": [1, 0, 1, 1, 1, 0],
                                        "strides": [2, 2, 1]}),
    ((1, 2, 3, 3), (2, 3, 3, 3), {"strides": [3, 2], "output_padding": [1, 1]}),
    ((1, 2, 3, 3), (2, 3, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
]


@pytest.mark.parametrize("xs,ws,attrs", CT_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose_matches_reference(xs, ws, attrs, bias):
    x, w = rand(xs, seed=1), rand(ws, seed=2)
    b = rand(ws[1] * attrs.get("group", 1), seed=3) if bias else None
    got = ours("ConvTranspose", [x, w] + ([b] if bias else []), attrs)
    close(got, conv_transpose_reference(x, w, b, attrs), 1e-5, 1e-5)


def test_conv_transpose_exact_threads_and_errors():
    x, w, b = salted((2, 16, 12, 12), 11), rand((16, 8, 3, 3), seed=12), rand(8, seed=13)
    attrs = {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}
    one, two = (ours("ConvTranspose", [x, w, b], attrs, options=threads(n)) for n in (1, 2))
    np.testing.assert_array_equal(bits(one), bits(two))
    assert one.shape == (2, 8, 24, 24)
    clean = rand((2, 16, 12, 12), seed=14)
    close(ours("ConvTranspose", [clean, w, b], attrs, options=EXACT),
          conv_transpose_reference(clean, w, b, attrs), 1e-4, 1e-4)
    expect_error(ErrorKind.INVALID_MODEL, ours, "ConvTranspose", [x, w],
                 {"strides": [2, 2], "output_padding": [2, 0]}, match="output_padding")
    expect_error(ErrorKind.INVALID_MODEL, ours, "ConvTranspose", [x, rand((8, 8, 3, 3))])
    expect_error(ErrorKind.INVALID_MODEL, ours, "ConvTranspose", [rand((1, 1, 2, 2)),
                                                                  rand((1, 1, 3, 3))],
                 {"pads": [3, 3, 3, 3]}, match="not positive")


# ----------------------------------------------------------------------------- DeformConv

@pytest.mark.parametrize("xs,ws,attrs,out", [
    ((2, 4, 6, 7), (6, 2, 3, 2), {"group": 2, "offset_group": 2, "pads": [1, 0, 1, 1],
                                  "strides": [2, 1], "dilations": [1, 2]}, (3, 6)),
    ((1, 3, 5, 5), (2, 3, 2, 2), {}, (4, 4)),
])
def test_deform_conv_matches_reference(xs, ws, attrs, out):
    rng = np.random.default_rng(15)
    og, k = attrs.get("offset_group", 1), ws[2] * ws[3]
    x, w, b = rand(xs, seed=16), rand(ws, seed=17), rand(ws[0], seed=18)
    offset = (rng.standard_normal((xs[0], 2 * og * k, *out)) * 1.5).astype(F32)
    mask = rng.random((xs[0], og * k, *out)).astype(F32)
    for inputs in ([x, w, offset], [x, w, offset, b, mask]):
        close(ours("DeformConv", inputs, attrs, opset=19),
              reference("DeformConv", inputs, attrs, opset=19), 1e-4, 1e-5)
    exact = ours("DeformConv", [x, w, offset, b, mask], attrs, opset=19, options=EXACT)
    close(exact, reference("DeformConv", [x, w, offset, b, mask], attrs, opset=19), 1e-4, 1e-5)
    expect_error(ErrorKind.INVALID_MODEL, ours, "DeformConv", [x, w, offset[:, :2]], attrs,
                 opset=19, match="offset of shape")


# ----------------------------------------------------------------------------- pools

POOL_CASES = [
    ((2, 3, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 3], "dilations": [2, 1],
                    "pads": [1, 0, 2, 1]}),
    ((1, 2, 6, 7), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 3],
                       "auto_pad": "SAME_UPPER"}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER"}),
]


@pytest.mark.parametrize("xs,attrs", POOL_CASES)
def test_max_and_average_pool_match_reference(xs, attrs):
    x = rand(xs, seed=20)
    close(ours("MaxPool", [x], attrs, opset=19), reference("MaxPool", [x], attrs, opset=19))
    for cip in (0, 1):
        a = dict(attrs, count_include_pad=cip)
        close(ours("AveragePool", [x], a, opset=19), reference("AveragePool", [x], a, opset=19))


@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool_matches_reference(p):
    x = rand((1, 2, 7, 8), seed=21)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "p": p}
    close(ours("LpPool", [x], attrs, opset=18), reference("LpPool", [x], attrs, opset=18),
          1e-5, 1e-5)
    g = ours("GlobalLpPool", [x], {"p": p})
    close(g, (np.abs(x.astype(np.float64)) ** p).sum(axis=(2, 3), keepdims=True)
          .__pow__(1 / p).astype(F32), 1e-5, 1e-5)


def test_max_pool_indices_storage_order_and_types():
    for xs, attrs in [((2, 3, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 3],
                                      "pads": [1, 0, 1, 1]}),
                      ((1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                      "pads": [1, 1, 1, 1], "storage_order": 1})]:
        x = rand(xs, seed=22)
        y, idx = ours("MaxPool", [x], attrs, out_dtypes=[F32, np.int64])
        wy, widx = reference("MaxPool", [x], attrs, out_dtypes=[F32, np.int64])
        close(y, wy)
        np.testing.assert_array_equal(idx, widx)
    # 3-d, column-major indices address X's elements as x.transpose(0, 1, 4, 3, 2) would
    x = rand((1, 2, 4, 5, 6), seed=23)
    y, idx = ours("MaxPool", [x], {"kernel_shape": [2, 2, 2], "storage_order": 1},
                  out_dtypes=[F32, np.int64])
    planes = x.transpose(0, 1, 4, 3, 2).reshape(-1)
    np.testing.assert_array_equal(planes[idx], y)
    q = np.random.default_rng(24).integers(-128, 127, (1, 2, 5, 6)).astype(np.int8)
    for ints in (q, q.view(np.uint8)):          # max is exact: compare with float32
        attrs = {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]}
        want = reference("MaxPool", [ints.astype(F32)], attrs).astype(ints.dtype)
        np.testing.assert_array_equal(ours("MaxPool", [ints], attrs), want)
    h = rand((1, 2, 6, 6), np.float16, 25)
    close(ours("AveragePool", [h], {"kernel_shape": [3, 3]}),
          reference("AveragePool", [h.astype(F32)], {"kernel_shape": [3, 3]})
          .astype(np.float16), 1e-3, 1e-3)
    # NaN wins a max window, and its index is reported
    n = rand((1, 1, 4, 4), seed=26)
    n[0, 0, 1, 2] = np.nan
    y, idx = ours("MaxPool", [n], {"kernel_shape": [2, 2], "strides": [2, 2]},
                  out_dtypes=[F32, np.int64])
    assert np.isnan(y[0, 0, 0, 1]) and idx[0, 0, 0, 1] == 6 and not np.isnan(y[0, 0, 1]).any()


def test_global_pools_and_exact_threads():
    x = rand((2, 3, 5, 4, 3), seed=27)
    close(ours("GlobalMaxPool", [x]), x.max(axis=(2, 3, 4), keepdims=True))
    close(ours("GlobalAveragePool", [x]), x.mean(axis=(2, 3, 4), keepdims=True), 1e-5, 1e-6)
    big = salted((4, 16, 40, 40), 28)
    for op, attrs in [("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                       "count_include_pad": 1}),
                      ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}),
                      ("LpPool", {"kernel_shape": [2, 2], "p": 2}),
                      ("GlobalAveragePool", {})]:
        one, two = (ours(op, [big], attrs, options=threads(n)) for n in (1, 2))
        np.testing.assert_array_equal(bits(one), bits(two))
    expect_error(ErrorKind.EXACT_MODE_UNAVAILABLE, ours, "LpPool", [x],
                 {"kernel_shape": [2, 2, 2], "p": 3}, options=EXACT)


def test_pool_errors():
    x = rand((1, 1, 4, 4))
    expect_error(ErrorKind.INVALID_MODEL, ours, "MaxPool", [x], match="kernel_shape")
    expect_error(ErrorKind.INVALID_MODEL, ours, "MaxPool", [x], {"kernel_shape": [5, 5]},
                 match="larger than the padded input")
    expect_error(ErrorKind.INVALID_MODEL, ours, "MaxPool", [x],
                 {"kernel_shape": [2, 2], "storage_order": 2})
    expect_error(ErrorKind.INVALID_MODEL, ours, "AveragePool", [x], {"kernel_shape": [2]},
                 match="should have 2 values")
    expect_error(ErrorKind.UNSUPPORTED, ours, "AveragePool", [x.astype(np.int32)],
                 {"kernel_shape": [2, 2]})
    expect_error(ErrorKind.INVALID_MODEL, ours, "LpPool", [x], {"kernel_shape": [2, 2], "p": 0})


def test_max_unpool():
    x = rand((2, 3, 6, 6), seed=29)
    pooled, idx = ours("MaxPool", [x], {"kernel_shape": [2, 2], "strides": [2, 2]},
                       out_dtypes=[F32, np.int64])
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    y = ours("MaxUnpool", [pooled, idx], attrs)
    close(y, reference("MaxUnpool", [pooled, idx], attrs))
    assert y.shape == x.shape and np.array_equal(y.reshape(-1)[idx.reshape(-1)],
                                                 pooled.reshape(-1))
    big = ours("MaxUnpool", [pooled, idx, i64(2, 3, 7, 8)], attrs, const=(2,))
    close(big, reference("MaxUnpool", [pooled, idx, i64(2, 3, 7, 8)], attrs))
    dyn = ours("MaxUnpool", [pooled, idx, i64(2, 3, 7, 8)], attrs)     # run-time shape
    close(dyn, big)
    bad = idx.copy()
    bad[0, 0, 0, 0] = x.size
    expect_error(ErrorKind.INVALID_INPUT, ours, "MaxUnpool", [pooled, bad], attrs,
                 match="outside")
    expect_error(ErrorKind.INVALID_INPUT, ours, "MaxUnpool", [pooled, idx, i64(2, 3, 5, 8)],
                 attrs, match="output_shape")
    expect_error(ErrorKind.INVALID_MODEL, ours, "MaxUnpool", [pooled, idx[:, :2]], attrs)


# ----------------------------------------------------------------------------- LRN

def lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    x64 = x.astype(np.float64)
    sq = np.zeros_like(x64)
    c = x.shape[1]
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c, i + size // 2 + 1)
        sq[:, i] = (x64[:, lo:hi] ** 2).sum(axis=1)
    return (x64 / (bias + alpha / size * sq) ** beta).astype(x.dtype)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_lrn(size):
    x = rand((2, 6, 5, 4), seed=30)
    attrs = {"size": size, "alpha": 0.3, "beta": 0.7, "bias": 1.5}
    close(ours("LRN", [x], attrs), lrn(x, size, 0.3, 0.7, 1.5), 1e-5, 1e-6)


def test_lrn_types_and_errors():
    x = rand((2, 5, 3), np.float64, 31)
    close(ours("LRN", [x], {"size": 3}), lrn(x, 3), 1e-12, 1e-12)
    close(ours("LRN", [x.astype(np.float16)], {"size": 3}), lrn(x, 3).astype(np.float16),
          2e-3, 2e-3)
    expect_error(ErrorKind.INVALID_MODEL, ours, "LRN", [x], match="size")
    # exact mode: graphrt's own pow, the same sum order; close to the fast (libm) result
    close(ours("LRN", [x], {"size": 3}, options=EXACT), lrn(x, 3), 1e-12, 1e-12)
