"""kernels/core/by_address.py: a numba function calling another through an address table."""
import numpy as np
import pytest
from numba import njit, types
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
