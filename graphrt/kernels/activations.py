"""Relu: max(x, 0) as a compare and select. -0 gives +0; NaN passes through."""
from __future__ import annotations

from numba import njit

from .. import dtypes as _dt
from .elementwise import UnaryKernel, unary_variants


@njit(cache=True, nogil=True, fastmath=False)
def _relu_float(x):
    return x if not (x <= 0) else 0.0


@njit(cache=True, nogil=True, fastmath=False)
def _relu_int(x):
    return x if x > 0 else 0


_RELU_FLOAT = unary_variants(_relu_float, "relu_float")
_RELU_INT = unary_variants(_relu_int, "relu_int")


class Relu(UnaryKernel):
    supports_exact = True
    ALLOWED = _dt.FLOATS | _dt.SIGNED

    def variants_for(self, dtype):
        return _RELU_FLOAT if dtype in _dt.FLOATS else _RELU_INT
