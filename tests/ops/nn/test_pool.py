"""The pools (MaxPool, AveragePool, LpPool and the global pools) and MaxUnpool through
graphrt.Session, compared with onnx's reference evaluator or numpy."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind

from ...helpers import EXACT, bits, close, expect_error, i64, ours, rand, reference, salted, threads


F32 = np.float32


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
        y, idx = ours("MaxPool", [x], attrs, outs=[F32, np.int64])
        wy, widx = reference("MaxPool", [x], attrs, outs=[F32, np.int64])
        close(y, wy)
        np.testing.assert_array_equal(idx, widx)
    # 3-d, column-major indices address X's elements as x.transpose(0, 1, 4, 3, 2) would
    x = rand((1, 2, 4, 5, 6), seed=23)
    y, idx = ours("MaxPool", [x], {"kernel_shape": [2, 2, 2], "storage_order": 1},
                  outs=[F32, np.int64])
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
                  outs=[F32, np.int64])
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
                       outs=[F32, np.int64])
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    y = ours("MaxUnpool", [pooled, idx], attrs)
    close(y, reference("MaxUnpool", [pooled, idx], attrs))
    assert y.shape == x.shape and np.array_equal(y.reshape(-1)[idx.reshape(-1)],
                                                 pooled.reshape(-1))
    big = ours("MaxUnpool", [pooled, idx, i64(2, 3, 7, 8)], attrs, consts=(2,))
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
