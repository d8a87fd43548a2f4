"""Feature transforms of ai.onnx.ml.

- Scaler: y[..., c] = (x[..., c] - offset[c]) * scale[c] over the last axis (one offset and
  scale broadcast to every column), in x's type (float64 for integers), then float32.
- Normalizer: each row of x [N, C] divided by its MAX (max |x|, as scikit-learn and onnx's
  reference evaluator read it; onnxruntime divides by the signed maximum), L1 (sum |x|) or
  L2 (sqrt(sum x^2)) norm, summed in float64 in column order; a zero norm leaves the row
  as it is. The output is float32.
- Imputer: y = imputed[c] where x == replaced (or both are NaN), else x; one imputed value
  serves every column, and so does imputed[0] when the list does not match the columns.
- Binarizer: y = 1 where x > threshold, else 0 (NaN: 0).
- FeatureVectorizer: y[n] = the rows of the inputs (trailing axes flattened) side by side,
  input i taking ``inputdimensions[i]`` columns: cut where longer, zero-padded where
  shorter; float32.
- ArrayFeatureExtractor: y[..., j] = x[..., idx[j]] over the last axis (idx flattened; a
  1-D x gives [1, len(idx)]).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..core.base import InferContext, OpKernel, RunContext, make_calls, scratch
from ..core.broadcast import PARALLEL_MIN
from ..core.jit import Variants
from ..core.pointwise import Unary, scalar_op, unary_param_variants
from ..tensor.gather import Gather, Take, check_range
from . import post

_F32, _F64, _I64, _I32 = (np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32))
_STRING = np.dtype(object)
NUMBERS = frozenset({_F32, _F64, _I64, _I32})
NORMS = {"MAX": 0, "L1": 1, "L2": 2}


def _columns(ctx: InferContext) -> int:
    shape = ctx.shape(0)
    return shape[-1] if shape else 1


def _scale(x, offset, scale, out, rows):
    """out[i, c] = (x[i, c] - offset[c]) * scale[c] in x's type (offsets already in it), for
    the rows of x."""
    for i in prange(rows):
        for c in range(x.shape[1]):
            out[i, c] = (x[i, c] - offset[c]) * scale[c]


_SCALE = Variants(_scale, "ml_scale", parallel=True)


class Scaler(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.offset = np.asarray(node.attr("offset", [0.0]), np.float64).reshape(-1)
        self.scale = np.asarray(node.attr("scale", [1.0]), np.float64).reshape(-1)

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, NUMBERS)
        shape = tuple(ctx.shape(0))
        c = shape[-1] if shape else 1
        cdt = _F32 if dt == _F32 else _F64
        params = []
        for name, v in (("offset", self.offset), ("scale", self.scale)):
            if v.size not in (1, c):
                ctx.fail(f"{name} holds {v.size} values for {c} columns")
            params.append(np.broadcast_to(v, (c,)).astype(cdt))
        ctx.set_output(0, _F32, shape)
        ctx.prepared = (cdt, c, *params)

    def jit_calls(self, ctx: RunContext):
        """The scaling of a float32 input (and exact mode's canonical NaNs)."""
        cdt, c, offset, scale = ctx.prepared
        if cdt != _F32 or not c:
            return None
        x = ctx.flat_in[0].reshape(-1, c)
        return [(_SCALE.get(ctx.exact, x.size >= PARALLEL_MIN),
                 (x, offset, scale, ctx.flat_out[0].reshape(-1, c), x.shape[0]))] + \
            post.canonical_calls(ctx, ctx.flat_out[0])

    def run(self, ctx: RunContext) -> None:
        calls = self.jit_calls(ctx)
        if calls is not None:
            make_calls(calls)
            return
        cdt, c, offset, scale = ctx.prepared     # (float64 first, then rounded to float32)
        x = ctx.flat_in[0].reshape(-1, c)
        out = ctx.flat_out[0].reshape(-1, c)
        wide = scratch(ctx, _F64, x.shape)
        _SCALE.get(ctx.exact, x.size >= PARALLEL_MIN)(x, offset, scale, wide, x.shape[0])
        np.copyto(out, wide, casting="unsafe")
        post.canonical(ctx, out)


def _normalize(x, norm, out, rows):
    """out[i] = x[i] / its norm (module docstring), in float64, for the rows of x."""
    for i in prange(rows):
        d = 0.0
        if norm == 0:
            for c in range(x.shape[1]):
                d = max(d, abs(np.float64(x[i, c])))
        elif norm == 1:
            for c in range(x.shape[1]):
                d += abs(np.float64(x[i, c]))
        else:
            for c in range(x.shape[1]):
                v = np.float64(x[i, c])
                d += v * v
            d = np.sqrt(d)
        if d == 0 or d != d or x.shape[1] == 0:
            d = 1.0
        for c in range(x.shape[1]):
            out[i, c] = np.float64(x[i, c]) / d


_NORMALIZE = Variants(_normalize, "ml_normalize", parallel=True)


class Normalizer(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.norm = node.choice("norm", NORMS, "MAX")

    def infer(self, ctx: InferContext) -> None:
        ctx.check_dtype(0, NUMBERS)
        shape = tuple(ctx.shape(0))
        if len(shape) not in (1, 2):
            ctx.fail(f"the input must have shape [N, C] or [C], got {list(shape)}")
        ctx.set_output(0, _F32, shape)
        ctx.prepared = shape[-1]

    def run(self, ctx: RunContext) -> None:
        c = ctx.prepared
        x = ctx.flat_in[0].reshape(-1, c)
        wide = scratch(ctx, _F64, x.shape)
        _NORMALIZE.get(ctx.exact, x.size >= PARALLEL_MIN)(x, self.norm, wide, x.shape[0])
        np.copyto(ctx.flat_out[0].reshape(-1, c), wide, casting="unsafe")
        post.canonical(ctx, ctx.flat_out[0])


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _impute(x, replaced, values, out):
    """out[i, c] = values[c] where x[i, c] == replaced or both are NaN, else x[i, c]."""
    nan = replaced != replaced
    for i in range(x.shape[0]):
        for c in range(x.shape[1]):
            v = x[i, c]
            out[i, c] = values[c] if (v == replaced or (nan and v != v)) else v


class Imputer(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        floats, ints = node.attr("imputed_value_floats"), node.attr("imputed_value_int64s")
        if (floats is not None and len(floats)) == (ints is not None and len(ints)):
            node.fail("exactly one of imputed_value_floats and imputed_value_int64s is required")
        self.is_float = floats is not None and len(floats) > 0
        self.values = np.asarray(floats if self.is_float else ints,
                                 np.float64 if self.is_float else np.int64).reshape(-1)
        self.replaced = float(node.attr("replaced_value_float", 0.0)) if self.is_float else \
            int(node.attr("replaced_value_int64", 0))

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, {_F32, _F64} if self.is_float else {_I64, _I32})
        shape = tuple(ctx.shape(0))
        c = _columns(ctx)
        values = self.values if self.values.size == c else np.full(c, self.values[0])
        replaced = np.array(self.replaced).astype(dt)
        ctx.set_output(0, dt, shape)
        ctx.prepared = (c, values.astype(dt), replaced[()])

    def run(self, ctx: RunContext) -> None:
        c, values, replaced = ctx.prepared
        _impute(ctx.flat_in[0].reshape(-1, c), replaced, values,
                ctx.flat_out[0].reshape(-1, c))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _place(x, at, width, out):
    """out[n, at:at + width] = x[n, :width], zero-padded."""
    m = min(width, x.shape[1])
    for n in range(out.shape[0]):
        for j in range(m):
            out[n, at + j] = x[n, j]
        for j in range(m, width):
            out[n, at + j] = 0


class FeatureVectorizer(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        dims = node.attr("inputdimensions")
        self.dims = [int(d) for d in (dims or [])]
        if len(self.dims) != node.n_inputs or any(d < 0 for d in self.dims):
            node.fail(f"inputdimensions must give one width >= 0 per input "
                      f"({node.n_inputs} inputs, got {self.dims})")

    def infer(self, ctx: InferContext) -> None:
        rows = None
        for i in range(ctx.n_inputs):
            ctx.check_dtype(i, NUMBERS)
            shape = ctx.shape(i)
            n = 1 if len(shape) <= 1 else shape[0]
            if rows is None:
                rows = n
            elif n != rows:
                ctx.fail(f"input {i} has {n} rows, input 0 has {rows}")
        ctx.set_output(0, _F32, (rows, sum(self.dims)))
        ctx.prepared = rows

    def run(self, ctx: RunContext) -> None:
        rows = ctx.prepared
        out = ctx.outputs[0]
        at = 0
        for x, width in zip(ctx.flat_in, self.dims):
            _place(x.reshape(rows, -1) if rows else x.reshape(0, 0), at, width, out)
            at += width
@scalar_op
def _binarize(x, threshold, _):
    return 1 if x > threshold else 0


class Binarizer(Unary):
    """y = 1 where x > threshold else 0, in x's type (compared in float64: exact)."""

    supports_exact = True
    ALLOWED = frozenset({_F32, _F64, np.dtype(np.int32), _I64})
    VARIANTS = unary_param_variants(_binarize, "binarizer")

    def params(self, ctx: InferContext, dtype: np.dtype) -> tuple:
        return np.float64(np.float32(self.node.attr("threshold", 0.0))), np.float64(0)


class ArrayFeatureExtractor(Gather):
    """y[..., j] = x[..., idx[j]] (Gather's run, along the last axis)."""

    ALLOWED = frozenset({_F32, _F64, np.dtype(np.int32), _I64, _STRING})

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, self.ALLOWED)
        ctx.check_dtype(1, {_I64}, " (indices)")
        shape = tuple(ctx.shape(0))
        if not shape:
            ctx.fail("the input must have rank >= 1")
        m = math.prod(ctx.shape(1))
        ctx.set_output(0, dt, (1, m) if len(shape) == 1 else shape[:-1] + (m,))
        known = ctx.value(1)
        if known is not None:
            check_range(ctx.node, known, shape[-1], "index")
        ctx.prepared = (Take(dt, math.prod(shape[:-1]), shape[-1], 1, m), known is not None)

