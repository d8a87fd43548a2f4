"""Random generators: RandomUniform(Like), RandomNormal(Like), Bernoulli, Multinomial.

The draws come from numpy's legacy MT19937 generator (``numpy.random.RandomState``), the
one onnx's reference evaluator uses: with a ``seed`` attribute (taken as int(seed) modulo
2**32) every run starts the stream afresh, so a seeded node gives the same values in every
run, on every machine, and the same values as the reference evaluator (float16 outputs
aside, which are computed in float32 and rounded once); without a seed every run seeds from
the operating system and nothing is reproducible. None of these is constant-folded.

- RandomUniform: y = T(u) * T(high - low) + T(low), u uniform in [0, 1) (random_sample).
- RandomNormal: y = T(z) * T(scale) + T(mean), z standard normal (standard_normal).
  (Each operation rounded on its own, no FMA, as the reference computes it.)
  The *Like forms take the shape of their input and, unless ``dtype`` is given, its type.
- Bernoulli: y = binomial(1, p) for each p of the input (which must lie in [0, 1]), in
  ``dtype`` (default: the input's type).
- Multinomial: for each row x of the [batch, classes] input (unnormalised log
  probabilities), ``sample_size`` classes drawn from p_j = exp(x_j - max x) / sum: with u
  uniform in [0, 1), the first j whose cumulative sum (j ascending) exceeds u * sum. Rows
  without a finite positive sum (NaN, +inf, all -inf) are input errors.

Draws use libm (normal: log; Multinomial: exp): not exact-mode kernels.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.floats import compute_dtype, F16, F32, run_wide
from ..core.jit import Variants

EXACT = False


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _scaled(u, s, b):
    return u * s + b


def _affine(u, out, s, b):
    """out = T(u) * s + b with T the type of out, s and b (the store rounds u to T)."""
    for i in range(out.size):
        out[i] = u[i]
        out[i] = _scaled(out[i], s[0], b[0])


def _categorical(x, u, out, cdf, rows, classes, samples):
    """Row r of x (``classes`` logits) gives the samples out[r, :] from u[r, :]; returns
    the first row without a finite positive probability sum, or -1."""
    if classes == 0:
        return -1
    for r in range(rows):
        row = x[r * classes:(r + 1) * classes]
        m = row[0]
        for j in range(1, classes):
            m = max(m, row[j])
        total = 0.0
        for j in range(classes):
            total += np.exp(np.float64(row[j]) - m)
            cdf[j] = total
        if not (total > 0.0 and total < np.inf):
            return r
        for s in range(samples):
            target = u[r * samples + s] * total
            lo, hi = 0, classes - 1
            while lo < hi:                  # the first j with cdf[j] > target
                mid = (lo + hi) // 2
                if cdf[mid] > target:
                    hi = mid
                else:
                    lo = mid + 1
            out[r * samples + s] = lo
    return -1


_AFFINE = Variants(_affine, "random_affine")
_CATEGORICAL = Variants(_categorical, "multinomial")


class _Random(OpKernel):
    constant_foldable = False
    DTYPES = frozenset({F16, F32, np.dtype(np.float64)})
    DEFAULT = 1                 # the dtype attribute's default (None: the input's type)

    def __init__(self, node):
        super().__init__(node)
        seed = node.attr("seed")
        self.seed = None if seed is None else int(seed) % (1 << 32)
        code = node.attr("dtype", self.DEFAULT)
        self.dtype = None if code is None else self._type_of(int(code))

    def _type_of(self, code: int) -> np.dtype:
        try:
            dt = _dt.to_numpy(code)
        except (KeyError, ValueError):
            dt = None
        if dt not in self.DTYPES:
            self.node.fail(f"dtype {_dt.name_of_code(code)} is not supported",
                           ErrorKind.UNSUPPORTED)
        return dt

    def _out_type(self, ctx: InferContext) -> np.dtype:
        if self.dtype is not None:
            return self.dtype
        dt = ctx.dtype(0)
        if dt not in self.DTYPES:
            ctx.fail(f"output type {_dt.name_of(dt)} (the input's) is not supported; set dtype",
                     ErrorKind.UNSUPPORTED)
        return dt

    def state(self) -> np.random.RandomState:
        return np.random.RandomState(self.seed)


class _Distribution(_Random):
    """y = T(draw) * T(a) + T(b) over a shape from the attribute or from input 0."""

    LIKE = False

    def __init__(self, node):
        super().__init__(node)
        self.scale_shift = self.coefficients(node)
        self.shape = None
        if not self.LIKE:
            shape = node.attr("shape")
            if shape is None or any(int(d) < 0 for d in shape):
                node.fail(f"attribute 'shape' must be given, with no negative extent: {shape}")
            self.shape = tuple(int(d) for d in shape)

    def coefficients(self, node) -> tuple[float, float]:
        """(a, b) of y = T(draw) * T(a) + T(b): high - low and low."""
        low = float(node.attr("low", 0.0))
        return float(node.attr("high", 1.0)) - low, low

    def draw(self, state, size):
        return state.random_sample(size)

    def infer(self, ctx: InferContext) -> None:
        ctx.set_output(0, self._out_type(ctx), self.shape if self.shape is not None
                       else ctx.shape(0))
        ctx.prepared = _AFFINE.get(False)

    def run(self, ctx: RunContext) -> None:
        out = ctx.flat_out[0]
        u = self.draw(self.state(), out.size)
        ct = compute_dtype(out.dtype)
        s, b = (np.array([v], ct) for v in self.scale_shift)
        run_wide(ctx, lambda ins, outs: ctx.prepared(u, outs[0], s, b))


class RandomUniform(_Distribution):
    pass


class RandomUniformLike(_Distribution):
    LIKE = True
    DEFAULT = None


class RandomNormal(_Distribution):
    def coefficients(self, node):
        return float(node.attr("scale", 1.0)), float(node.attr("mean", 0.0))

    def draw(self, state, size):
        return state.standard_normal(size)


class RandomNormalLike(RandomNormal):
    LIKE = True
    DEFAULT = None


class Bernoulli(_Random):
    DTYPES = _dt.NUMERIC | _dt.BOOL
    DEFAULT = None

    def infer(self, ctx: InferContext) -> None:
        ctx.check_dtype(0, _dt.FLOATS)
        ctx.set_output(0, self._out_type(ctx), ctx.shape(0))

    def run(self, ctx: RunContext) -> None:
        p = ctx.flat_in[0]
        if not ((p >= 0) & (p <= 1)).all():
            ctx.node.fail("every probability must lie in [0, 1]", ErrorKind.INVALID_INPUT)
        np.copyto(ctx.flat_out[0], self.state().binomial(1, p), casting="unsafe")


class Multinomial(_Random):
    DTYPES = frozenset({np.dtype(np.int32), np.dtype(np.int64)})
    DEFAULT = 6

    def __init__(self, node):
        super().__init__(node)
        self.samples = int(node.attr("sample_size", 1))
        if self.samples < 0:
            node.fail(f"sample_size must not be negative, got {self.samples}")

    def infer(self, ctx: InferContext) -> None:
        ctx.check_dtype(0, _dt.FLOATS)
        shape = tuple(ctx.shape(0))
        if len(shape) != 2:
            ctx.fail(f"the input must be [batch, classes], got shape {list(shape)}")
        if shape[1] == 0 and shape[0] * self.samples:
            ctx.bad_input("cannot draw from zero classes")
        ctx.set_output(0, self.dtype, (shape[0], self.samples))
        ctx.prepared = _CATEGORICAL.get(False)

    def run(self, ctx: RunContext) -> None:
        rows, classes = ctx.inputs[0].shape
        u = self.state().random_sample(rows * self.samples)
        cdf = scratch(ctx, np.float64, (classes,))
        bad = []
        run_wide(ctx, lambda ins, outs: bad.append(
            ctx.prepared(ins[0], u, outs[0], cdf, rows, classes, self.samples)))
        if bad[0] >= 0:
            ctx.node.fail(f"row {bad[0]} has no finite positive probability sum",
                          ErrorKind.INVALID_INPUT)
