"""Col2Im (opset 18): column blocks summed back into an image (the inverse walk of im2col).

Input x is (N, C * prod(block), L), output (N, C, *image_shape). With n spatial axes, the
block positions c[d] = (image[d] + pad_begin[d] + pad_end[d] - (dil[d] * (block[d] - 1) + 1))
// stride[d] + 1 and L = prod(c). For kernel offset k (row-major over block_shape) and block
l (row-major over c), the element x[n, ch * K + k, l] is added to the image at
p[d] = l_d * stride[d] - pad_begin[d] + k_d * dil[d] when every p[d] lies inside the image.

For one kernel offset the blocks land on distinct image positions, so each output element
sums its contributions k ascending: one documented order, additions only (bool: logical or),
hence an exact-mode kernel. One task per (n, ch) image. float16 and bfloat16 are summed in
float32 and rounded once.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext
from ..core.broadcast import PARALLEL_MIN, put
from ..core.floats import HALF, narrow, result_buffer, widen
from ..core.jit import Variants

EXACT = False
ADD = None

_COMPLEX = frozenset({np.dtype(np.complex64), np.dtype(np.complex128)})
ALLOWED = _dt.ALL_TENSOR | HALF | _COMPLEX


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _add(x, y):
    return x + y


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _or(x, y):
    return x | y


def _col2im(x, out, geo, kernel, blocks, image, tasks):
    """``geo`` rows (one per spatial axis): image, block, stride, pad_begin, dilation, c."""
    nd = geo.shape[0]
    for t in prange(tasks):
        ob = t * image
        for i in range(image):
            out[ob + i] = 0
        for k in range(kernel):
            xb = (t * kernel + k) * blocks
            for l in range(blocks):
                rk = k
                rl = l
                pos = 0
                step = 1
                inside = True
                for d in range(nd - 1, -1, -1):
                    qk = rk // geo[d, 1]
                    ql = rl // geo[d, 5]
                    at = rl - ql * geo[d, 5]        # block position along d
                    off = rk - qk * geo[d, 1]       # kernel offset along d
                    p = at * geo[d, 2] - geo[d, 3] + off * geo[d, 4]
                    if p < 0 or p >= geo[d, 0]:
                        inside = False
                        break
                    pos += p * step
                    step *= geo[d, 0]
                    rk = qk
                    rl = ql
                if inside:
                    put(out, ob + pos, ADD(out[ob + pos], x[xb + l]), EXACT)


_SUM = Variants(_col2im, "col2im", parallel=True, ADD=_add)
_ANY = Variants(_col2im, "col2im_bool", parallel=True, ADD=_or)


class Col2Im(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.strides = node.attr("strides")
        self.dilations = node.attr("dilations")
        self.pads = node.attr("pads")
        if any(s <= 0 for s in self.strides or ()) or any(d <= 0 for d in self.dilations or ()):
            node.fail("strides and dilations must be positive")
        if any(p < 0 for p in self.pads or ()):
            node.fail("pads must not be negative")

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.dtype(0)
        if dt not in ALLOWED:
            ctx.fail(f"element type {_dt.name_of(dt)} is not supported", ErrorKind.UNSUPPORTED)
        shape = tuple(ctx.shape(0))
        if len(shape) != 3:
            ctx.fail(f"input must be 3-D (N, C * prod(block_shape), L), got {list(shape)}")
        image, block = ctx.int_list(1), ctx.int_list(2)
        if image is None or block is None:
            ctx.require_run_time_values()
            return
        nd = len(image)
        if nd < 1 or len(block) != nd:
            ctx.bad_input(f"image_shape {image} and block_shape {block} must have the same "
                          "(positive) length")
        strides = list(self.strides or [1] * nd)
        dilations = list(self.dilations or [1] * nd)
        pads = list(self.pads or [0] * (2 * nd))
        if len(strides) != nd or len(dilations) != nd or len(pads) != 2 * nd:
            ctx.fail(f"strides, dilations and pads must have {nd}, {nd} and {2 * nd} entries")
        if any(b <= 0 for b in block) or any(i < 0 for i in image):
            ctx.bad_input(f"block_shape {block} must be positive, image_shape {image} not negative")
        cols = [(image[d] + pads[d] + pads[nd + d] - (dilations[d] * (block[d] - 1) + 1))
                // strides[d] + 1 for d in range(nd)]
        kernel, blocks = math.prod(block), math.prod(cols)
        n, ck, length = shape
        if any(c < 1 for c in cols) or ck % kernel or length != blocks:
            ctx.bad_input(f"input {list(shape)} does not hold blocks {block} of an image "
                          f"{image} (expected dimension 1 a multiple of {kernel} and {blocks} "
                          "blocks)")
        ctx.set_output(0, dt, (n, ck // kernel, *image))
        geo = np.array([[image[d], block[d], strides[d], pads[d], dilations[d], cols[d]]
                        for d in range(nd)], dtype=np.int64)
        tasks = n * (ck // kernel)
        parallel = tasks > 1 and tasks * kernel * blocks >= PARALLEL_MIN
        fn = (_ANY if dt == np.bool_ else _SUM).get(ctx.exact, parallel)
        ctx.prepared = (geo, kernel, blocks, math.prod(image), tasks, fn)

    def run(self, ctx: RunContext) -> None:
        geo, kernel, blocks, image, tasks, fn = ctx.prepared
        out = ctx.flat_out[0]
        buf = result_buffer(ctx, out)
        fn(widen(ctx, ctx.flat_in[0]), buf, geo, kernel, blocks, image, tasks)
        narrow(out, buf)
