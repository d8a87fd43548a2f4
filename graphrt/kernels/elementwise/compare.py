"""Comparisons, logical and bitwise operators, element-wise with numpy broadcasting.

- Equal, Less, Greater, LessOrEqual, GreaterOrEqual: bool results of IEEE comparisons (a
  NaN compares unequal to everything, -0 equals +0). Equal also takes bool and strings.
- And, Or, Xor, Not: on bool tensors.
- BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot: on the bits of integer tensors.
All exact: no arithmetic is involved.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ..core.base import InferContext, RunContext
from ..core.broadcast import broadcast_shape
from ..core.floats import HALF, wide_calls
from ..core.pointwise import binary_variants, unary_variants, Binary, Unary, scalar_op

_BOOL = np.dtype(np.bool_)
_STRING = np.dtype(object)


@scalar_op
def _equal(x, y):
    return x == y


@scalar_op
def _less(x, y):
    return x < y


@scalar_op
def _greater(x, y):
    return x > y


@scalar_op
def _less_equal(x, y):
    return x <= y


@scalar_op
def _greater_equal(x, y):
    return x >= y


@scalar_op
def _and(x, y):
    return x and y


@scalar_op
def _or(x, y):
    return x or y


@scalar_op
def _xor(x, y):
    return x != y


@scalar_op
def _not(x):
    return not x


@scalar_op
def _bit_and(x, y):
    return x & y


@scalar_op
def _bit_or(x, y):
    return x | y


@scalar_op
def _bit_xor(x, y):
    return x ^ y


@scalar_op
def _bit_not(x):
    return ~x


class _Compare(Binary):
    supports_exact = True
    ALLOWED = _dt.NUMERIC | HALF

    def out_dtype(self, dtype):
        return _BOOL


class Equal(_Compare):
    ALLOWED = _dt.ALL_TENSOR | HALF | {_STRING}
    VARIANTS = binary_variants(_equal, "equal")
    UFUNC = np.equal

    def infer(self, ctx: InferContext) -> None:
        if ctx.same_dtype(0, 1) != _STRING:
            super().infer(ctx)
            return
        ctx.set_output(0, _BOOL, broadcast_shape([ctx.shape(0), ctx.shape(1)], ctx.fail))
        ctx.prepared = None

    def run(self, ctx: RunContext) -> None:
        if ctx.prepared is None:        # strings: Python objects, compared by numpy
            ctx.outputs[0][...] = np.equal(ctx.inputs[0], ctx.inputs[1])
        else:
            super().run(ctx)

    def jit_calls(self, ctx: RunContext):
        """Binary's calls (its run, for numbers), none for strings."""
        if ctx.prepared is None:
            return None
        return wide_calls(ctx, lambda ins, outs: [self._call(ctx, ins[0], ins[1], outs[0])])


class Less(_Compare):
    VARIANTS = binary_variants(_less, "less")
    UFUNC = np.less


class Greater(_Compare):
    VARIANTS = binary_variants(_greater, "greater")
    UFUNC = np.greater


class LessOrEqual(_Compare):
    VARIANTS = binary_variants(_less_equal, "less_equal")
    UFUNC = np.less_equal


class GreaterOrEqual(_Compare):
    VARIANTS = binary_variants(_greater_equal, "greater_equal")
    UFUNC = np.greater_equal


class And(_Compare):
    ALLOWED = _dt.BOOL
    VARIANTS = binary_variants(_and, "and")
    UFUNC = np.logical_and


class Or(_Compare):
    ALLOWED = _dt.BOOL
    VARIANTS = binary_variants(_or, "or")
    UFUNC = np.logical_or


class Xor(_Compare):
    ALLOWED = _dt.BOOL
    VARIANTS = binary_variants(_xor, "xor")
    UFUNC = np.logical_xor


class Not(Unary):
    supports_exact = True
    ALLOWED = _dt.BOOL
    VARIANTS = unary_variants(_not, "not")


class _Bitwise(Binary):
    supports_exact = True
    ALLOWED = _dt.INTEGERS


class BitwiseAnd(_Bitwise):
    VARIANTS = binary_variants(_bit_and, "bitwise_and")
    UFUNC = np.bitwise_and


class BitwiseOr(_Bitwise):
    VARIANTS = binary_variants(_bit_or, "bitwise_or")
    UFUNC = np.bitwise_or


class BitwiseXor(_Bitwise):
    VARIANTS = binary_variants(_bit_xor, "bitwise_xor")
    UFUNC = np.bitwise_xor


class BitwiseNot(Unary):
    supports_exact = True
    ALLOWED = _dt.INTEGERS
    VARIANTS = unary_variants(_bit_not, "bitwise_not")
