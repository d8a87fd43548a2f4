"""MatMul and Gemm: the ONNX operators over the product API (product.py).

MatMul is numpy's matmul (batch axes broadcast; float16 and bfloat16 computed in float32,
the result rounded once). Gemm: y = alpha * (A' B') + beta * C with A' = A or A^T,
B' = B or B^T and C broadcast unidirectionally to (M, N); its epilogue is two correctly
rounded multiplies and an add in both modes. Accumulation order and paths: product.py.
"""
from __future__ import annotations

import numpy as np

from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext
from ..core.broadcast import broadcast_shape, element_strides
from ..core.floats import (HALF, compute_dtype, narrow, result_buffer, wide_calls,
                           wide_constants, widen_input)
from .product import ConstantB, Product, batch_offsets


class MatMul(OpKernel):
    """numpy matmul: a 1-D A is a row (1, K), a 1-D B a column (K, 1), and the added axis
    is dropped from the result; leading (batch) axes broadcast. float16 and bfloat16 are
    computed in float32 (inputs widened exactly, the result rounded once)."""

    tile_products = True
    supports_exact = True
    ALLOWED = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64,
                                             np.uint32, np.uint64)) | HALF
    trans_a = trans_b = False       # FusedMatMul: the last two axes of A or B swapped
    alpha = 1.0                     # FusedMatMul: the product times alpha (one rounding)

    def __init__(self, node):
        super().__init__(node)
        self._b = ConstantB()

    def take_constant(self, i: int, value: np.ndarray, name: str, exact: bool) -> bool:
        """B when it is a float matrix of more than one column (the product then always
        reads it as ConstantB lays it out)."""
        if i != 1 or not ConstantB.can_take(value) or \
                value.shape[0 if self.trans_b else 1] < 2:
            return False
        self._b.take(value, self.trans_b, compute_dtype(value.dtype), exact, name)
        return True

    def taken_constants(self) -> dict:
        taken = self._b.taken()
        return {} if taken is None else {1: taken}

    def infer(self, ctx: InferContext) -> None:
        self._b.supply(ctx, 1)
        dt = ctx.same_dtype(0, 1)
        ctx.check_dtype(0, self.ALLOWED)
        sa, sb = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        if not sa or not sb:
            ctx.fail(f"operands must have rank 1 or more, got shapes {list(sa)} and {list(sb)}")
        a2 = (1,) + sa if len(sa) == 1 else sa
        b2 = sb + (1,) if len(sb) == 1 else sb
        ta, tb = self.trans_a and len(sa) > 1, self.trans_b and len(sb) > 1
        m, k = a2[-1:-3:-1] if ta else a2[-2:]
        k2, n = b2[-1:-3:-1] if tb else b2[-2:]

        def bad(_msg=None):
            ctx.fail(f"shapes {list(sa)} and {list(sb)} cannot be multiplied")

        if k != k2:
            bad()
        batch = broadcast_shape([a2[:-2], b2[:-2]], bad)
        shape = batch + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
        ctx.set_output(0, dt, shape)
        wd = compute_dtype(dt)
        # constant 2-D weights: laid out once for the product (ConstantB)
        bc = ctx.value(1) if len(sb) == 2 and n > 1 else None
        if bc is not None:
            bc = self._b.of(bc, tb, wd, ctx.exact)
        b_strides = self._b.strides if bc is not None else (1, k) if tb else (n, 1)
        product = Product(wd, m, n, k, (1, m) if ta else (k, 1), b_strides,
                          batch_offsets(a2[:-2], batch, m * k),
                          batch_offsets(b2[:-2], batch, k * n), exact=ctx.exact, fold=True,
                          panels=bc is not None and self._b.panels)
        ctx.prepared = (product, bc, wd != dt,
                        wide_constants(ctx, 0) if bc is not None else wide_constants(ctx, 0, 1))

    def absorb_relu(self, prepared) -> bool:
        """Relu in the tiles, not where the result is rounded to a narrow float after."""
        product, _, narrowed, _ = prepared
        return not narrowed and self.alpha == 1.0 and product.absorb_relu()

    def jit_calls(self, ctx: RunContext):
        """The product's one call (float16 operands converted by calls too) where nothing
        is scaled after."""
        product, bc, _, wide = ctx.prepared
        if self.alpha != 1.0:
            return None
        return wide_calls(ctx, lambda ins, outs: _calls(product.call_of(
            ins[0], ins[1] if bc is None else bc, outs[0], holder=ctx.held)),
            wide, () if bc is None else (1,))

    def run(self, ctx: RunContext) -> None:
        product, bc, _, wide = ctx.prepared
        out = ctx.flat_out[0]
        buf = result_buffer(ctx, out)
        product(widen_input(ctx, 0, wide), widen_input(ctx, 1, wide) if bc is None else bc, buf)
        if self.alpha != 1.0:
            np.multiply(buf, buf.dtype.type(self.alpha), out=buf)
        narrow(out, buf)


def _calls(call):
    """jit_calls of a product: its call, or None for the BLAS (Python around it) and an
    empty product (no call)."""
    return None if call is None else [call]


class FusedMatMul(MatMul):
    """com.microsoft FusedMatMul: Y = alpha * (A' @ B') with A' = A or A with its last two
    axes swapped (transA), B' likewise (transB), read in place through strides; the product
    as MatMul's, then one multiply by alpha. transBatchA/transBatchB are refused."""

    def __init__(self, node):
        super().__init__(node)
        if int(node.attr("transBatchA", 0)) or int(node.attr("transBatchB", 0)):
            node.fail("transBatchA and transBatchB are not supported", ErrorKind.UNSUPPORTED)
        self.trans_a = int(node.attr("transA", 0)) != 0
        self.trans_b = int(node.attr("transB", 0)) != 0
        self.alpha = float(node.attr("alpha", 1.0))


class Gemm(OpKernel):
    """Y = alpha * A' B' + beta * C (opset 7+; C optional from opset 11). float16 and
    bfloat16 are computed in float32 like MatMul: A, B and C widened exactly, the epilogue
    in float32, Y rounded once."""

    tile_products = True
    supports_exact = True
    ALLOWED = frozenset(np.dtype(t) for t in (np.float32, np.float64)) | HALF

    def __init__(self, node):
        super().__init__(node)
        self.trans_a = int(node.attr("transA", 0)) != 0
        self.trans_b = int(node.attr("transB", 0)) != 0
        self.alpha = float(node.attr("alpha", 1.0))
        self.beta = float(node.attr("beta", 1.0))
        self._b = ConstantB()

    take_constant = MatMul.take_constant
    taken_constants = MatMul.taken_constants

    def infer(self, ctx: InferContext) -> None:
        self._b.supply(ctx, 1)
        has_c = ctx.has_input(2)
        dt = ctx.same_dtype(0, 1, 2) if has_c else ctx.same_dtype(0, 1)
        ctx.check_dtype(0, self.ALLOWED)
        if not has_c and self.node.opset < 11:
            ctx.fail("input C is required before opset 11")
        sa, sb = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        if len(sa) != 2 or len(sb) != 2:
            ctx.fail(f"A and B must be matrices, got shapes {list(sa)} and {list(sb)}")
        m, k = (sa[1], sa[0]) if self.trans_a else sa
        k2, n = (sb[1], sb[0]) if self.trans_b else sb
        if k != k2:
            ctx.fail(f"shapes {list(sa)} (transA={int(self.trans_a)}) and {list(sb)} "
                     f"(transB={int(self.trans_b)}) cannot be multiplied")
        c_strides = None
        if has_c:
            sc = tuple(ctx.shape(2))
            if len(sc) > 2 or any(d not in (1, e) for d, e in zip(sc[::-1], (n, m))):
                ctx.fail(f"C of shape {list(sc)} does not broadcast to {[m, n]}")
            c_strides = element_strides(sc, (m, n))
        ctx.set_output(0, dt, (m, n))
        wd = compute_dtype(dt)
        # a constant B' (a layer's weights): laid out once for the product (ConstantB), not
        # packed in every run (or, for a few rows over a transposed B, scalar chains)
        bc = ctx.value(1)
        bc = self._b.of(bc, self.trans_b, wd, ctx.exact) if bc is not None and n > 1 else None
        b_strides = self._b.strides if bc is not None else (1, k) if self.trans_b else (n, 1)
        ctx.prepared = (Product(wd, m, n, k, (1, m) if self.trans_a else (k, 1), b_strides,
                                exact=ctx.exact, gemm=True, alpha=self.alpha, beta=self.beta,
                                c_strides=c_strides, panels=bc is not None and self._b.panels), bc,
                         wd != dt, wide_constants(ctx, 0, 2) if bc is not None else
                         wide_constants(ctx, 0, 1, 2))

    def absorb_relu(self, prepared) -> bool:
        product, _, narrowed, _ = prepared
        return not narrowed and product.absorb_relu()

    def jit_calls(self, ctx: RunContext):
        product, bc, _, wide = ctx.prepared
        return wide_calls(ctx, lambda ins, outs: _calls(product.call_of(
            ins[0], ins[1] if bc is None else bc, outs[0], ins[2] if len(ins) > 2 else None,
            holder=ctx.held)), wide, () if bc is None else (1,))

    def run(self, ctx: RunContext) -> None:
        product, bc, _, wide = ctx.prepared
        b = widen_input(ctx, 1, wide) if bc is None else bc
        out = ctx.flat_out[0]
        buf = result_buffer(ctx, out)
        product(widen_input(ctx, 0, wide), b, buf, widen_input(ctx, 2, wide))
        narrow(out, buf)
