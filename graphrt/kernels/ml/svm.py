"""Support-vector machines of ai.onnx.ml.

Kernels K(x, v) for an input row x and a support vector v, with kernel_params (gamma, coef0,
degree): LINEAR x.v; POLY (gamma x.v + coef0)^degree; RBF exp(-gamma |x - v|^2); SIGMOID
tanh(gamma x.v + coef0). Everything is computed in float64 with sums in index order; exact
mode takes exp, tanh and pow from graphrt's own functions (math/exactmath.py).

- SVMRegressor: y = sum_m coef[m] K(x, sv_m) + rho[0] (``n_supports`` = 0: coef.x + rho[0]);
  ``one_class`` maps y to 1 where y > 0, else -1; then post_transform. y is [N, 1] float32.
- SVMClassifier with support vectors (``vectors_per_class`` gives each class's run of them):
  one-vs-one over the class pairs (i, j), i < j, in the order (0,1), (0,2), ..., (1,2), ...:
  s_ij = sum_{m in i} coef[j - 1, m] K_m + sum_{m in j} coef[i, m] K_m + rho[pair]; s_ij > 0
  is a vote for i, else for j; the label is the class with most votes (the lowest on ties).
  The scores are the pair scores s (two classes: [-s, s], or the two-column form of
  :mod:`.labels` when post_transform is not NONE), then post_transform. With ``prob_a`` and
  ``prob_b`` the scores are class probabilities instead: r_ij = 1 / (1 + exp(A s_ij + B))
  clipped to [1e-7, 1 - 1e-7], coupled by libsvm's iterative method (Wu, Lin and Weng's
  second method: at most 100 sweeps, stopping when max |(Qp)_i - p'Qp| < 0.005 / C).
- SVMClassifier without support vectors: s_c = coef_c.x + rho[0] per class, the label the
  best s (the first on ties), the scores post_transform(s).
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ..core.base import InferContext, OpKernel, RunContext, make_calls, scratch
from ..core.jit import Variants
from ..math import exactmath
from . import labels, post
from .linear import INPUTS, affine, rows_of

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
KERNELS = {"LINEAR": 0, "POLY": 1, "RBF": 2, "SIGMOID": 3}
CHUNK = 1024                 # rows whose kernel values are held at once
EXACT = False


def _kernel_rows(x, sv, kind, gamma, coef0, degree, out, rows):
    """out[n, m] = K(x[n], sv[m]) for the rows of x."""
    for n in prange(rows):
        for m in range(sv.shape[0]):
            s = 0.0
            if kind == 2:
                for k in range(x.shape[1]):
                    d = np.float64(x[n, k]) - sv[m, k]
                    s += d * d
                v = -gamma * s
                out[n, m] = exactmath.exp(v) if EXACT else np.exp(v)
                continue
            for k in range(x.shape[1]):
                s += np.float64(x[n, k]) * sv[m, k]
            if kind == 1:
                v = gamma * s + coef0
                out[n, m] = exactmath.pow(v, degree) if EXACT else v ** degree
            elif kind == 3:
                v = gamma * s + coef0
                out[n, m] = exactmath.tanh(v) if EXACT else np.tanh(v)
            else:
                out[n, m] = s


KERNEL_ROWS = Variants(_kernel_rows, "svm_kernel_rows", parallel=True)


def _one_vs_one(kv, start, coef, rho, scores, votes, rows):
    """Pair scores [N, pairs] and votes [N, C] from kernel values kv [N, V], N = rows."""
    c = start.size - 1
    for n in prange(rows):
        for i in range(c):
            votes[n, i] = 0
        k = 0
        for i in range(c):
            for j in range(i + 1, c):
                s = 0.0
                for m in range(start[i], start[i + 1]):
                    s += coef[j - 1, m] * kv[n, m]
                for m in range(start[j], start[j + 1]):
                    s += coef[i, m] * kv[n, m]
                s += rho[k]
                scores[n, k] = s
                if s > 0:
                    votes[n, i] += 1
                else:
                    votes[n, j] += 1
                k += 1


ONE_VS_ONE = Variants(_one_vs_one, "svm_one_vs_one", parallel=True)


def _couple(scores, prob_a, prob_b, q, qp, out, rows):
    """Class probabilities out [N, C] from pair scores (module docstring), N = rows; q [N, C, C]
    and qp [N, C] are scratch."""
    c = out.shape[1]
    for n in prange(rows):
        for i in range(c):
            q[n, i, i] = 0.0
        k = 0
        for i in range(c):
            for j in range(i + 1, c):
                z = scores[n, k] * prob_a[k] + prob_b[k]
                e = exactmath.exp(-abs(z)) if EXACT else np.exp(-abs(z))
                p = e / (1.0 + e) if z >= 0 else 1.0 / (1.0 + e)    # 1 / (1 + exp(z))
                p = min(max(p, 1e-7), 1.0 - 1e-7)
                # r_ij = p, r_ji = 1 - p
                q[n, i, i] += (1.0 - p) * (1.0 - p)
                q[n, j, j] += p * p
                q[n, i, j] = -(1.0 - p) * p
                q[n, j, i] = -(1.0 - p) * p
                k += 1
        for i in range(c):
            out[n, i] = 1.0 / c
        for _ in range(100):
            pqp = 0.0
            for i in range(c):
                t = 0.0
                for j in range(c):
                    t += q[n, i, j] * out[n, j]
                qp[n, i] = t
                pqp += out[n, i] * t
            worst = 0.0
            for i in range(c):
                worst = max(worst, abs(qp[n, i] - pqp))
            if worst < 0.005 / c:
                break
            for i in range(c):
                d = (-qp[n, i] + pqp) / q[n, i, i]
                out[n, i] += d
                pqp = (pqp + d * (d * q[n, i, i] + 2.0 * qp[n, i])) / ((1.0 + d) * (1.0 + d))
                for j in range(c):
                    qp[n, j] = (qp[n, j] + d * q[n, i, j]) / (1.0 + d)
                    out[n, j] = out[n, j] / (1.0 + d)


COUPLE = Variants(_couple, "svm_couple", parallel=True)


class _SVM(OpKernel):
    supports_exact = True

    def kernel_attrs(self):
        node = self.node
        kind = node.choice("kernel_type", KERNELS, "LINEAR")
        params = list(node.attr("kernel_params") or [])
        if len(params) not in (0, 3):
            node.fail(f"kernel_params must hold gamma, coef0 and degree, got {params}")
        gamma, coef0, degree = params or (0.0, 0.0, 0.0)
        self.kind, self.gamma, self.coef0, self.degree = kind, gamma, coef0, degree
        self.post = post.parse(node, node.attr("post_transform"))
        self.rho = np.asarray(node.attr("rho") or [0.0], np.float64).reshape(-1)
        self.coef = np.asarray(node.attr("coefficients") or [], np.float64).reshape(-1)

    def support(self, n_vectors: int) -> None:
        sv = np.asarray(self.node.attr("support_vectors") or [], np.float64).reshape(-1)
        if n_vectors and sv.size % n_vectors:
            self.node.fail(f"{sv.size} support vector values do not make {n_vectors} vectors")
        self.sv = sv.reshape(n_vectors, -1) if n_vectors else sv.reshape(0, 0)

    def features(self, ctx: InferContext) -> tuple[int, int]:
        rows, f = rows_of(ctx, INPUTS)
        want = self.sv.shape[1] if self.sv.shape[0] else self.linear_width()
        if f != want:
            ctx.fail(f"the input has {f} features, the model {want}")
        ctx.prepared = (rows, f)
        return rows, f

    def kernel_chunks(self, ctx: RunContext, x: np.ndarray):
        """(lo, kernel values [n, V] of rows lo:lo + n) over CHUNK-row chunks of x, all in
        one scratch block taken once per run."""
        rows, v = x.shape[0], self.sv.shape[0]
        buf = scratch(ctx, _F64, (min(max(rows, 1), CHUNK), v))
        fn = KERNEL_ROWS.get(ctx.exact, min(rows, CHUNK) * x.shape[1] * v >= 1 << 15)
        for lo in range(0, rows, CHUNK):
            part = x[lo:lo + CHUNK]
            kv = buf[:part.shape[0]]
            fn(part, self.sv, self.kind, self.gamma, self.coef0, self.degree, kv, part.shape[0])
            yield lo, kv


class SVMRegressor(_SVM):
    def __init__(self, node):
        super().__init__(node)
        self.kernel_attrs()
        self.n = int(node.attr("n_supports", 0))
        self.support(self.n)
        if self.n and self.coef.size != self.n:
            node.fail(f"{self.coef.size} coefficients for {self.n} support vectors")
        self.one_class = int(node.attr("one_class", 0))

    def linear_width(self) -> int:
        return self.coef.size

    def infer(self, ctx: InferContext) -> None:
        rows, _ = self.features(ctx)
        ctx.set_output(0, _F32, (rows, 1))

    def run(self, ctx: RunContext) -> None:
        rows, f = ctx.prepared
        x = ctx.inputs[0].reshape(rows, f)
        y = scratch(ctx, _F64, (rows, 1))
        if not self.n:
            affine(ctx, x, self.coef.reshape(1, -1), self.rho[:1], y)
        else:
            for lo, kv in self.kernel_chunks(ctx, x):
                affine(ctx, kv, self.coef.reshape(1, -1), self.rho[:1],
                       y[lo:lo + kv.shape[0]])
        if self.one_class:
            np.copyto(y, np.where(y > 0, 1.0, -1.0))
        post.apply(y, self.post, ctx.exact)
        np.copyto(ctx.outputs[0].reshape(rows, 1), y, casting="unsafe")
        post.canonical(ctx, ctx.outputs[0])


class SVMClassifier(_SVM):
    def __init__(self, node):
        super().__init__(node)
        self.kernel_attrs()
        self.classes = labels.ClassLabels(node)
        c = self.classes.count
        per_class = np.asarray(node.attr("vectors_per_class") or [], np.int64).reshape(-1)
        n = int(per_class.sum())
        self.support(n)
        self.prob_a = np.asarray(node.attr("prob_a") or [], np.float64).reshape(-1)
        self.prob_b = np.asarray(node.attr("prob_b") or [], np.float64).reshape(-1)
        pairs = c * (c - 1) // 2
        if n:
            if per_class.size != c or per_class.min() < 0:
                node.fail(f"vectors_per_class must give a count >= 0 for each of {c} classes")
            if self.coef.size != (c - 1) * n:
                node.fail(f"{self.coef.size} coefficients; {c - 1} x {n} expected")
            if self.rho.size != pairs:
                node.fail(f"rho holds {self.rho.size} values for {pairs} class pairs")
            if self.prob_a.size and (self.prob_a.size != pairs or self.prob_b.size != pairs):
                node.fail(f"prob_a and prob_b must hold one value per class pair ({pairs})")
            self.start = np.concatenate([[0], np.cumsum(per_class)]).astype(np.int64)
            self.coef2 = self.coef.reshape(c - 1, n)
        elif not c or self.coef.size % c:
            node.fail(f"{self.coef.size} coefficients do not make {c} class rows")
        self.width = (c if self.prob_a.size else (2 if c == 2 else pairs)) if n else c

    def linear_width(self) -> int:
        return self.coef.size // max(self.classes.count, 1)

    def infer(self, ctx: InferContext) -> None:
        rows, _ = self.features(ctx)
        ctx.set_output(0, self.classes.dtype, (rows,))
        ctx.set_output(1, _F32, (rows, self.width))

    def run(self, ctx: RunContext) -> None:
        rows, f = ctx.prepared
        x = ctx.inputs[0].reshape(rows, f)
        c = self.classes.count
        if not self.sv.shape[0]:
            s = affine(ctx, x, self.coef.reshape(c, -1), np.full(c, self.rho[0]))
            labels.finish(ctx, self.classes, s, self.post)
            return
        pairs = c * (c - 1) // 2
        scores = scratch(ctx, _F64, (rows, pairs))
        votes = scratch(ctx, np.int64, (rows, c))
        for lo, kv in self.kernel_chunks(ctx, x):
            hi = lo + kv.shape[0]
            ONE_VS_ONE.get(ctx.exact, kv.shape[0] > 64)(
                kv, self.start, self.coef2, self.rho, scores[lo:hi], votes[lo:hi], hi - lo)
        best = labels.argmax(ctx, votes)
        if self.prob_a.size:
            p = scratch(ctx, _F64, (rows, c))
            COUPLE.get(ctx.exact, rows > 64)(scores, self.prob_a, self.prob_b,
                                             scratch(ctx, _F64, (rows, c, c)),
                                             scratch(ctx, _F64, (rows, c)), p, rows)
            post.apply(p, self.post, ctx.exact)
            labels.write(ctx, self.classes, best, p)
        elif c == 2:            # one score column: its two-column form, labels by the votes
            out = ctx.outputs[1] if ctx.outputs[1] is not None else \
                scratch(ctx, _F32, (rows, 2))
            make_calls([labels.final_call(ctx.exact, scores.reshape(-1), out, labels.ONE_COLUMN,
                                          self.post, rows,
                                          probability=self.post != post.NONE)])
            labels.write(ctx, self.classes, best, None)
        else:
            post.apply(scores, self.post, ctx.exact)
            labels.write(ctx, self.classes, best, scores)
