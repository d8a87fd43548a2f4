"""GridSample and AffineGrid through graphrt.Session, compared with onnx's reference
evaluator."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from graphrt import ErrorKind

from ...helpers import EXACT, bits, close, expect_error, i64, ours, rand, reference, threads


F32 = np.float32


# ----------------------------------------------------------------------------- GridSample

@pytest.mark.parametrize("nd,mode", [(1, "linear"), (1, "nearest"), (2, "nearest"),
                                     (2, "linear"), (2, "cubic"), (3, "linear"),
                                     (3, "nearest")])
def test_grid_sample_matches_reference(nd, mode):
    rng = np.random.default_rng(9)
    x = rand((2, 3) + (4, 5, 6)[:nd], seed=10)
    grid = (rng.standard_normal((2,) + (3, 4, 2)[:nd] + (nd,)) * 0.9).astype(F32)
    grid.reshape(-1)[:4] = [-1.7, 2.4, 0.0, 1.0]
    for pad, align in itertools.product(["zeros", "border", "reflection"], [0, 1]):
        attrs = {"mode": mode, "padding_mode": pad, "align_corners": align}
        close(ours("GridSample", [x, grid], attrs, opset=22),
              reference("GridSample", [x, grid], attrs, opset=22), 1e-5, 1e-6)


def test_grid_sample_opset16_nan_exact_and_errors():
    x = rand((1, 2, 5, 6), seed=11)
    grid = rand((1, 3, 4, 2), seed=12)
    want = reference("GridSample", [x, grid], {"mode": "cubic"}, opset=22)
    close(ours("GridSample", [x, grid], {"mode": "bicubic"}, opset=16), want, 1e-5, 1e-6)
    close(ours("GridSample", [x, grid], {"mode": "bicubic"}, opset=16, options=EXACT), want,
          1e-5, 1e-6)
    grid[0, 1, 2, 0] = np.nan
    got = ours("GridSample", [x, grid], opset=22)
    where = np.zeros(got.shape, bool)
    where[0, :, 1, 2] = True
    np.testing.assert_array_equal(np.isnan(got), where)
    big_x, big_grid = rand((2, 8, 30, 30), seed=13), rand((2, 40, 40, 2), seed=14)
    one, two = (ours("GridSample", [big_x, big_grid], {"mode": "cubic"}, opset=22,
                     options=threads(n)) for n in (1, 2))
    np.testing.assert_array_equal(bits(one), bits(two))
    expect_error(ErrorKind.INVALID_MODEL, ours, "GridSample", [x, grid], {"mode": "linear"},
                 opset=16)
    expect_error(ErrorKind.UNSUPPORTED, ours, "GridSample", [rand((1, 1, 2, 2, 2)),
                                                             rand((1, 1, 1, 1, 3))], opset=16)
    expect_error(ErrorKind.INVALID_MODEL, ours, "GridSample", [x, rand((1, 3, 4, 3))],
                 opset=22, match="Grid of shape")
    expect_error(ErrorKind.INVALID_MODEL, ours, "GridSample", [x, grid],
                 {"padding_mode": "wrap"}, opset=22)


# ----------------------------------------------------------------------------- AffineGrid

@pytest.mark.parametrize("nd,align", [(2, 0), (2, 1), (3, 0), (3, 1)])
def test_affine_grid(nd, align):
    theta = rand((2, nd, nd + 1), seed=15)
    size = i64(2, 3, 4, 5) if nd == 2 else i64(2, 3, 4, 5, 6)
    want = reference("AffineGrid", [theta, size], {"align_corners": align}, opset=20)
    close(ours("AffineGrid", [theta, size], {"align_corners": align}, opset=20, consts=(1,)),
          want, 1e-6, 1e-6)
    # size known only at run time; exact mode
    close(ours("AffineGrid", [theta, size], {"align_corners": align}, opset=20, options=EXACT),
          want, 1e-6, 1e-6)
    expect_error(ErrorKind.INVALID_MODEL, ours, "AffineGrid", [theta[:1], size], opset=20,
                 match="theta of shape")
