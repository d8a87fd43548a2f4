"""The ai.onnx.preview.training optimisers: Momentum, Adagrad, Adam (domain opset 1).

Inputs R (learning rate, a float scalar), T (update count, an int64 scalar), then the n
optimised tensors X, their gradients G and their state (V and/or H), all of one float type
and each group of one shape; outputs the new X, then the new state, in the same order.
With g = norm_coefficient X + G:

- Momentum: V' = alpha V + b g with b = beta if T > 0 else 1; X' = X - R V' (standard) or
  X - R (g + alpha V') (mode "nesterov").
- Adagrad: H' = H + g g; X' = X - R / (1 + T decay_factor) g / (sqrt(H') + epsilon).
- Adam: V' = alpha V + (1 - alpha) g; H' = beta H + (1 - beta) g g;
  r = R sqrt(1 - beta^T) / (1 - alpha^T) if T > 0 else R;
  X' = (1 - norm_coefficient_post) (X - r V' / (sqrt(H') + epsilon)).

Scalars are combined in Python floats (beta^T by repeated squaring); elements are computed
in float64, left to right as written, and rounded once to the element type. Only IEEE
operations (sqrt included) and, in the exact variant, no FMA and canonical NaN: exact.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import put
from ..core.jit import Variants

EXACT = False
_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def _momentum(x, g, v, xo, vo, c):
    """c = [norm_coefficient, alpha, b, R, nesterov]."""
    for i in range(x.size):
        xi = np.float64(x[i])
        gr = c[0] * xi + np.float64(g[i])
        vn = c[1] * np.float64(v[i]) + c[2] * gr
        step = gr + c[1] * vn if c[4] else vn
        xn = xi - c[3] * step
        put(xo, i, xn, EXACT)
        put(vo, i, vn, EXACT)


def _adagrad(x, g, h, xo, ho, c):
    """c = [norm_coefficient, R / (1 + T decay_factor), epsilon]."""
    for i in range(x.size):
        xi = np.float64(x[i])
        gr = c[0] * xi + np.float64(g[i])
        hn = np.float64(h[i]) + gr * gr
        xn = xi - c[1] * gr / (np.sqrt(hn) + c[2])
        put(xo, i, xn, EXACT)
        put(ho, i, hn, EXACT)


def _adam(x, g, v, h, xo, vo, ho, c):
    """c = [norm_coefficient, alpha, beta, epsilon, r, 1 - norm_coefficient_post]."""
    for i in range(x.size):
        xi = np.float64(x[i])
        gr = c[0] * xi + np.float64(g[i])
        vn = c[1] * np.float64(v[i]) + (1.0 - c[1]) * gr
        hn = c[2] * np.float64(h[i]) + (1.0 - c[2]) * (gr * gr)
        xn = c[5] * (xi - c[4] * (vn / (np.sqrt(hn) + c[3])))
        put(xo, i, xn, EXACT)
        put(vo, i, vn, EXACT)
        put(ho, i, hn, EXACT)


def power(base: float, n: int) -> float:
    """base ** n for n >= 0 by repeated squaring: IEEE multiplies only, no libm pow."""
    out = 1.0
    while n > 0:
        if n & 1:
            out *= base
        base *= base
        n >>= 1
    return out


def _ieee_div(a: float, b: float) -> float:
    """a / b with IEEE results (inf, NaN) where Python would raise."""
    with np.errstate(all="ignore"):
        return float(np.float64(a) / np.float64(b))


class _Optimizer(OpKernel):
    """Shared shape: R, T, then GROUPS groups of n tensors in, GROUPS - 1 groups out."""

    supports_exact = True
    GROUPS = 3
    VARIANTS: Variants

    def __init__(self, node):
        super().__init__(node)
        self.n = (node.n_inputs - 2) // self.GROUPS
        if self.n < 1 or node.n_inputs != 2 + self.GROUPS * self.n \
                or node.n_outputs > (self.GROUPS - 1) * self.n:
            node.fail(f"expects R, T and {self.GROUPS} groups of n tensors in and "
                      f"{self.GROUPS - 1} groups out; got {node.n_inputs} inputs and "
                      f"{node.n_outputs} outputs")
        self.norm = float(node.attr("norm_coefficient", 0.0))

    def infer(self, ctx: InferContext) -> None:
        ctx.check_dtype(0, _FLOATS, " (R)")
        ctx.check_dtype(1, {np.dtype(np.int64)}, " (T)")
        for i, what in ((0, "R"), (1, "T")):
            if math.prod(ctx.shape(i)) != 1:
                ctx.fail(f"{what} must be a scalar, got shape {list(ctx.shape(i))}")
        n = self.n
        dt = ctx.check_dtype(2, _FLOATS)
        ctx.same_dtype(*range(2, 2 + self.GROUPS * n))
        for k in range(n):
            group = [2 + k + j * n for j in range(self.GROUPS)]
            shapes = {tuple(ctx.shape(i)) for i in group}
            if len(shapes) != 1:
                ctx.fail(f"tensor {k}: X, its gradient and its state differ in shape: "
                         f"{sorted(list(s) for s in shapes)}")
            for j in range(self.GROUPS - 1):
                if j * n + k < self.node.n_outputs:
                    ctx.set_output(j * n + k, dt, ctx.shape(2 + k))
        ctx.prepared = self.VARIANTS.get(ctx.exact)

    def coefficients(self, r: float, t: int) -> np.ndarray:
        raise NotImplementedError

    def run(self, ctx: RunContext) -> None:
        c = self.coefficients(float(ctx.flat_in[0][0]), int(ctx.flat_in[1][0]))
        n = self.n
        for k in range(n):
            ins = [ctx.flat_in[2 + k + j * n] for j in range(self.GROUPS)]
            outs = [ctx.flat_out[j * n + k] if j * n + k < len(ctx.flat_out) else None
                    for j in range(self.GROUPS - 1)]
            outs = [o if o is not None else scratch(ctx, ins[0].dtype, ins[0].shape)
                    for o in outs]
            ctx.prepared(*ins, *outs, c)


class Momentum(_Optimizer):
    VARIANTS = Variants(_momentum, "momentum")

    def __init__(self, node):
        super().__init__(node)
        mode = node.attr("mode", "standard")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode not in ("standard", "nesterov"):
            node.fail(f"mode must be 'standard' or 'nesterov', got {mode!r}")
        self.nesterov = mode == "nesterov"
        self.alpha = float(node.attr("alpha", 0.0))
        self.beta = float(node.attr("beta", 0.0))
        for name in ("alpha", "beta", "norm_coefficient"):
            if node.attr(name) is None:
                node.fail(f"attribute '{name}' is required")

    def coefficients(self, r, t):
        b = self.beta if t > 0 else 1.0
        return np.array([self.norm, self.alpha, b, r, float(self.nesterov)])


class Adagrad(_Optimizer):
    VARIANTS = Variants(_adagrad, "adagrad")

    def __init__(self, node):
        super().__init__(node)
        self.decay = float(node.attr("decay_factor", 0.0))
        self.epsilon = float(node.attr("epsilon", 1e-6))

    def coefficients(self, r, t):
        return np.array([self.norm, _ieee_div(r, 1.0 + t * self.decay), self.epsilon])


class Adam(_Optimizer):
    GROUPS = 4
    VARIANTS = Variants(_adam, "adam")

    def __init__(self, node):
        super().__init__(node)
        self.alpha = float(node.attr("alpha", 0.9))
        self.beta = float(node.attr("beta", 0.999))
        self.epsilon = float(node.attr("epsilon", 1e-6))
        self.post = float(node.attr("norm_coefficient_post", 0.0))

    def coefficients(self, r, t):
        if t > 0:
            q = 1.0 - power(self.beta, t)
            r = _ieee_div(r * (math.sqrt(q) if q >= 0 else math.nan), 1.0 - power(self.alpha, t))
        return np.array([self.norm, self.alpha, self.beta, self.epsilon, r, 1.0 - self.post])

