"""Short runs moved by masked vector pieces (graphrt/kernels/core/runs.py): every length around
the vector width, odd offsets, several element types; nothing outside the run is touched."""
from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from graphrt.kernels.core.runs import copy_run, deal_run, zero_run


@njit(cache=False)
def _copy(dst, d0, src, s0, n, step):
    copy_run(dst, d0, src, s0, n, step)


@njit(cache=False)
def _deal(dst, d0, d1, src, s0, n):
    deal_run(dst, d0, d1, src, s0, n)


@njit(cache=False)
def _zero(dst, d0, n):
    zero_run(dst, d0, n)


DTYPES = [np.float32, np.float64, np.int8, np.uint16, np.int64, np.bool_]


@pytest.mark.parametrize("dt", DTYPES)
def test_copy_and_zero_runs(dt):
    rng = np.random.default_rng(0)
    src = (rng.standard_normal(300) * 50).astype(dt)
    for n in [0, 1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100]:
        for step in (1, 2, 3):
            if (n - 1) * step + 5 >= src.size:
                continue
            dst = np.ones(260, dt)
            _copy(dst, 3, src, 5, n, step)
            want = np.ones(260, dt)
            want[3:3 + n] = src[5:5 + (n - 1) * step + 1:step] if n else want[3:3]
            assert dst.tobytes() == want.tobytes(), (n, step)
        dst = np.ones(260, dt)
        _zero(dst, 9, n)
        want = np.ones(260, dt)
        want[9:9 + n] = 0
        assert dst.tobytes() == want.tobytes(), n


@pytest.mark.parametrize("dt", DTYPES)
def test_deal_run_splits_a_row_into_its_two_phases(dt):
    rng = np.random.default_rng(1)
    src = (rng.standard_normal(300) * 50).astype(dt)
    for n in [1, 2, 3, 15, 16, 17, 31, 32, 33, 34, 63, 64, 65, 111, 112, 113]:
        dst = np.ones(400, dt)
        _deal(dst, 7, 200, src, 11, n)
        want = np.ones(400, dt)
        run = src[11:11 + n]
        want[7:7 + (n + 1) // 2] = run[0::2]
        want[200:200 + n // 2] = run[1::2]
        assert dst.tobytes() == want.tobytes(), n
