"""DepthToSpace and SpaceToDepth: blocks of channels moved to space and back, as one gather
(a Window over the input, pure data movement, so exact by construction)."""
from __future__ import annotations


from ..core.base import InferContext, OpKernel, RunContext
from .gather import Window, c_strides


def _space_depth(ctx: InferContext, blocksize: int, to_space: bool, crd: bool):
    """DepthToSpace / SpaceToDepth as a reshape to 6-D, a transpose and a reshape back."""
    dt, shape = ctx.dtype(0), tuple(ctx.shape(0))
    if len(shape) != 4:
        ctx.fail(f"input must be 4-D (N, C, H, W), got shape {list(shape)}")
    b, c, h, w = shape
    s = blocksize
    if to_space:
        if c % (s * s):
            ctx.fail(f"channels {c} are not a multiple of blocksize^2 = {s * s}")
        six = (b, c // (s * s), s, s, h, w) if crd else (b, s, s, c // (s * s), h, w)
        perm = (0, 1, 4, 2, 5, 3) if crd else (0, 3, 4, 1, 5, 2)
        out = (b, c // (s * s), h * s, w * s)
    else:
        if h % s or w % s:
            ctx.fail(f"height {h} and width {w} are not multiples of blocksize {s}")
        six = (b, c, h // s, s, w // s, s)
        perm = (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
        out = (b, c * s * s, h // s, w // s)
    strides = c_strides(six)
    ctx.set_output(0, dt, out)
    ctx.prepared = Window(dt, [six[p] for p in perm], [strides[p] for p in perm])


class DepthToSpace(OpKernel):
    """y = x's channels moved into blocksize x blocksize spatial blocks (modes DCR, the
    default, and CRD as the spec's reshape-transpose-reshape formulas state)."""

    supports_exact = True
    to_space = True

    def __init__(self, node):
        super().__init__(node)
        size = node.attr("blocksize")
        if size is None or int(size) < 1:
            node.fail("attribute 'blocksize' must be a positive integer")
        self.blocksize = int(size)
        mode = str(node.attr("mode", "DCR"))
        if mode not in ("DCR", "CRD"):
            node.fail(f"mode {mode!r} is not 'DCR' or 'CRD'")
        self.crd = mode == "CRD"

    def infer(self, ctx: InferContext) -> None:
        _space_depth(ctx, self.blocksize, self.to_space, self.crd)

    def run(self, ctx: RunContext) -> None:
        ctx.prepared(ctx.flat_in[0], ctx.flat_out[0])


class SpaceToDepth(DepthToSpace):
    """y = x's blocksize x blocksize spatial blocks moved into channels (the inverse of
    DepthToSpace in the same mode)."""

    to_space = False
