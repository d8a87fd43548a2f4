"""kernels/core/by_address.py: a numba function calling another through an address table."""
import numpy as np
import pytest
from numba import njit, typeof as numba_typeof, types
from numba.core.errors import TypingError

from graphrt.kernels.core import by_address


@njit(nogil=True)
def _scaled_add(out, x, scale, twice):
    for i in range(out.size):
        out[i] += x[i] * scale * (2 if twice else 1)


def _signature(dt):
    v = types.Array(dt, 1, "C")
    return types.none(v, v, types.int64, types.boolean)


_CALL = by_address.caller(1, _signature)


@njit
def _caller(table, out, x, scale):
    _CALL(table, (out, x, scale, True))     # an int64 and a boolean argument
    _CALL(table, (out, x, 1, False))        # an integer literal, widened


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_callee_runs_at_the_address_in_the_table(dtype):
    import numba
    table = np.array([0, by_address.address(_scaled_add, _signature(numba.from_dtype(dtype)))],
                     dtype=np.int64)
    x = np.arange(5, dtype=dtype)
    out = np.ones(5, dtype=dtype)
    _caller(table, out, x, 3)
    np.testing.assert_array_equal(out, 1 + x * 6 + x)


def test_arguments_of_other_types_are_refused_when_the_caller_compiles():
    @njit
    def wrong(table, out, x):
        _CALL(table, (out, x.astype(np.float64), 1, True))

    table = np.zeros(2, dtype=np.int64)
    with pytest.raises(TypingError, match="by_address"):
        wrong(table, np.zeros(3, np.float32), np.zeros(3, np.float32))


@njit(nogil=True, error_model="numpy")
def _packed_callee(grid, fixed, n, scale, twice, flags, nothing):
    if n > 3:
        raise ValueError("n is more than 3")
    for i in range(n):
        grid[1, i] += fixed[i] * scale * (2 if twice else 1) + flags[i]


@njit
def _packed(table, arrays, ints, floats, c):
    by_address.call_packed(table, 0, arrays, ints, floats, c,
                           "a0:float64:2:w,a3:float32:1:r,i0:int64,f0:float32,b1,c0,n")


def test_call_packed_builds_its_arguments_and_passes_on_exceptions():
    grid = np.zeros((2, 3))
    fixed = np.array([1, 2, 3], np.float32)
    fixed.flags.writeable = False
    flags = np.array([True, False, True])
    sig = types.none(*(numba_typeof(v) for v in (grid, fixed, 2, np.float32(0.5), True, flags, None)))
    table = np.array([by_address.address(_packed_callee, sig)], np.int64)
    arrays = np.array([grid.ctypes.data, 2, 3, fixed.ctypes.data, 3], np.int64)
    _packed(table, arrays, np.array([2, 1]), np.array([0.5]), (flags,))
    assert grid.tolist() == [[0, 0, 0], [2, 2, 0]]
    with pytest.raises(ValueError, match="more than 3"):
        _packed(table, arrays, np.array([4, 0]), np.array([0.5]), (flags,))
    with pytest.raises(TypingError):        # a spec naming an unknown argument kind
        njit(lambda t, a, i, f: by_address.call_packed(t, 0, a, i, f, (), "z0"))(
            table, arrays, np.array([0]), np.array([0.0]))
