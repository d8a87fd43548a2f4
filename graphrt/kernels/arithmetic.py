"""Add, Sub, Mul, Div: one correctly rounded operation per element (exact by construction).

Integer arithmetic wraps around; integer Div truncates toward zero (x / 0 gives 0 rather than
a trap, ONNX leaves it undefined).
"""
from __future__ import annotations

from numba import njit

from .. import dtypes as _dt
from .elementwise import BinaryKernel, binary_variants


@njit(cache=True, nogil=True, fastmath=False)
def _add(x, y):
    return x + y


@njit(cache=True, nogil=True, fastmath=False)
def _sub(x, y):
    return x - y


@njit(cache=True, nogil=True, fastmath=False)
def _mul(x, y):
    return x * y


@njit(cache=True, nogil=True, fastmath=False, error_model="numpy")
def _fdiv(x, y):
    return x / y


@njit(cache=True, nogil=True, fastmath=False, error_model="numpy")
def _idiv(x, y):
    if y == 0:
        return x - x
    if y == -1:             # x // -1 would trap for the most negative x
        return -x
    q = x // y
    if q < 0 and q * y != x:
        q += 1
    return q


_ADD = binary_variants(_add, "add")
_SUB = binary_variants(_sub, "sub")
_MUL = binary_variants(_mul, "mul")
_FDIV = binary_variants(_fdiv, "fdiv")
_IDIV = binary_variants(_idiv, "idiv")


class Add(BinaryKernel):
    supports_exact = True

    def variants_for(self, dtype):
        return _ADD


class Sub(BinaryKernel):
    supports_exact = True

    def variants_for(self, dtype):
        return _SUB


class Mul(BinaryKernel):
    supports_exact = True

    def variants_for(self, dtype):
        return _MUL


class Div(BinaryKernel):
    supports_exact = True

    def variants_for(self, dtype):
        return _FDIV if dtype in _dt.FLOATS else _IDIV
