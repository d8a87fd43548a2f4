"""The run sums written as LLVM IR (graphrt/kernels/core/summation.py, ``_define``), called
from a fast-math kernel as graphrt's kernels call them: the bits of the blocked pairwise
order written again with numpy (tests/helpers.tree_sum) over the mapped values, for every
map, both float types, contiguous and strided runs, at lengths around the block and lane
boundaries; and the numba-compiled template they stand for gives the same bits."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from numba import njit
from numba.core import serialize

from graphrt.kernels.core import summation as S

from .helpers import bits, tree_sum

MAPS = {
    "values": (S.VALUES, lambda v, p: v),
    "magnitudes": (S.MAGNITUDES, lambda v, p: np.abs(v)),
    "squares": (S.SQUARES, lambda v, p: v * v),
    "dev_squares": (S.DEVIATION_SQUARES, lambda v, p: (v - p) * (v - p)),
    "dev_magnitudes": (S.DEVIATION_MAGNITUDES, lambda v, p: np.abs(v - p)),
}
LENGTHS = [1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 71, 72, 127, 128, 129, 191, 192, 193,
           1000, 4096, 4097 + 64]


def same(got, want, dt, n):
    np.testing.assert_array_equal(bits(np.asarray(got, dt)), bits(np.asarray(want, dt)),
                                  err_msg=f"{np.dtype(dt)}, n = {n}")


@pytest.mark.parametrize("kind", sorted(MAPS))
def test_ir_run_sums_are_the_pairwise_order(kind):
    summer, fn = MAPS[kind]
    run, strided = summer.run, summer.strided
    template_run = run.hashed_with[1]

    @njit(fastmath=True)
    def ir_run(x, off, n, p):
        return run(x, off, n, p)

    @njit(fastmath=True)
    def ir_strided(x, off, n, step, p):
        return strided(x, off, n, step, p)

    @njit
    def numba_run(x, off, n, p):
        return template_run(x, off, n, p)

    rng = np.random.default_rng(7)
    for dt in (np.float32, np.float64):
        p = dt(0.37)
        for n in LENGTHS:
            x = (rng.standard_normal(3 * n + 4) * 100).astype(dt)
            want = tree_sum(fn(x[2:2 + n], p).astype(dt))
            got = ir_run(x, 2, n, p)
            same(got, want, dt, n)
            same(numba_run(x, 2, n, p), got, dt, n)
            want = tree_sum(fn(x[1:1 + 3 * n:3], p).astype(dt))
            got = ir_strided(x, 1, n, 3, p)
            same(got, want, dt, n)


@pytest.mark.parametrize("kind", sorted(MAPS))
def test_kernels_pickled_for_the_helper_refer_to_the_ir_stubs(kind):
    """A kernel sent to the helper process is pickled by value, its globals with it: the
    stubs must be found by name (a copy would have no overload, and the helper's compile of
    every kernel summing through one would fail)."""
    for stub in (MAPS[kind][0].run, MAPS[kind][0].strided):
        assert pickle.loads(serialize.dumps(stub)) is stub
