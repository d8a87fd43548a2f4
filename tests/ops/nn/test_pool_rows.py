"""The plane pooling kernel (pool._pool_plane, planes split by stride phase and pooled a
group at a time) against the per-window one and against the tap order it promises: MaxPool without Indices gives the bits MaxPool with Indices (the
per-window kernel) gives; AveragePool gives the sum of its taps in row-major order, in the
element type, divided by the count."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import graphrt

from ...helpers import EXACT, model_of, rand

CASES = [  # (spatial, kernel, strides, pads, dilations, ceil_mode)
    ((9, 11), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 0),
    ((8, 8), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 0),
    ((13, 10), (3, 2), (1, 3), (1, 0, 2, 1), (1, 1), 1),
    ((12, 12), (3, 3), (2, 1), (0, 1, 1, 0), (2, 2), 0),
    ((7, 9), (5, 3), (3, 2), (2, 1, 2, 1), (1, 2), 1),
    ((20,), (4,), (3,), (1, 2), (1,), 1),
    ((5, 6, 7), (2, 3, 2), (2, 1, 2), (0, 1, 1, 1, 0, 1), (1, 1, 1), 0),
]


def _attrs(kernel, strides, pads, dil, ceil, **kw):
    return dict(kernel_shape=list(kernel), strides=list(strides), pads=list(pads),
                dilations=list(dil), ceil_mode=ceil, **kw)


def _input(spatial, dtype, seed, channels=3):
    x = rand((2, channels, *spatial), np.float32, seed)
    flat = x.reshape(-1)
    flat[:-1:7] = flat[1::7]                     # ties
    if dtype == np.float32:
        flat[::11] = -np.inf
        flat[5::13] = np.nan
    return (x * 40).astype(dtype) if dtype == np.int8 else x.astype(dtype)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8])
@pytest.mark.parametrize("channels", [3, 61])     # one group of planes; many, the last short
def test_maxpool_rows_equal_the_window_kernel(case, dtype, channels):
    spatial, kernel, strides, pads, dil, ceil = case
    x = _input(spatial, dtype, 1, channels)
    attrs = _attrs(kernel, strides, pads, dil, ceil)
    tt = x.dtype
    rows = model_of("MaxPool", {"X": x}, [("Y", tt)], attrs)
    windows = model_of("MaxPool", {"X": x}, [("Y", tt), ("I", np.int64)], attrs)
    for options in (None, EXACT):
        a = graphrt.Session(rows, options).run(None, {"X": x})[0]
        b = graphrt.Session(windows, options).run(None, {"X": x})[0]
        assert a.tobytes() == b.tobytes()


def _avg_in_tap_order(x, kernel, strides, pads, dil, ceil, cip):
    """Sum of the taps inside the input, taps in row-major order, then / count."""
    r = len(kernel)
    sp = x.shape[2:]
    outs = []
    for i in range(r):
        ek = (kernel[i] - 1) * dil[i] + 1
        span = sp[i] + pads[i] + pads[i + r] - ek
        o = (-(-span // strides[i]) if ceil else span // strides[i]) + 1
        if ceil and (o - 1) * strides[i] >= sp[i] + pads[i]:
            o -= 1
        outs.append(o)
    acc = np.zeros(x.shape[:2] + tuple(outs), x.dtype)
    cnt = np.zeros(outs, np.int64)
    padded_cnt = np.zeros(outs, np.int64)
    for taps in itertools.product(*[range(k) for k in kernel]):
        for pos in itertools.product(*[range(o) for o in outs]):
            idx = [p * s - pb + t * d for p, s, pb, t, d in zip(pos, strides, pads, taps, dil)]
            inside = all(0 <= v < n for v, n in zip(idx, sp))
            in_pad = all(-pads[i] <= idx[i] < sp[i] + pads[i + r] for i in range(r))
            if inside:
                acc[(slice(None), slice(None)) + pos] += x[(slice(None), slice(None)) + tuple(idx)]
                cnt[pos] += 1
            if in_pad:
                padded_cnt[pos] += 1
    return acc / (padded_cnt if cip else cnt).astype(x.dtype)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("cip", [0, 1])
@pytest.mark.parametrize("channels", [3, 61])
def test_averagepool_rows_sum_taps_in_order(case, cip, channels):
    spatial, kernel, strides, pads, dil, ceil = case
    x = rand((2, channels, *spatial), np.float32, 2)
    attrs = _attrs(kernel, strides, pads, dil, ceil, count_include_pad=cip)
    model = model_of("AveragePool", {"X": x}, [("Y", np.float32)], attrs, opset=19)
    want = _avg_in_tap_order(x, kernel, strides, pads, dil, ceil, cip)
    for options in (None, EXACT, graphrt.SessionOptions(intra_op_threads=2)):
        got = graphrt.Session(model, options).run(None, {"X": x})[0]
        assert got.tobytes() == want.astype(np.float32).tobytes()
