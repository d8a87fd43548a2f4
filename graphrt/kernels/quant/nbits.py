"""com.microsoft MatMulNBits: a product with weights of 2, 4 or 8 bits in blocks along K,
as onnxruntime's MatMulNBitsQuantizer writes it for language models:

    Y[..., j] = sum_k A[..., k] * W[j, k] (+ bias[j]),
    W[j, k]   = (q[j, k] - z[j, k // block_size]) * scale[j, k // block_size]

q: B (N, blocks, blob) uint8, blocks = ceil(K / block_size), blob = block_size * bits / 8,
the values of one byte low bits first (k = 2t in the low nibble of a 4-bit byte t); scale:
N * blocks values of A's type, column j's blocks in a row; z: zero_points as uint8 packed
the same way, ceil(blocks * bits / 8) bytes per column, or absent (2^(bits - 1)).

One row (M = 1: decoding a token) runs as one pass over the packed weights, columns in
parallel: 4-bit weights decode eight values (one little-endian word) at a time straight
into the dot product, other widths a column at a time into a cache-resident buffer; the
weights are read once and never widened in memory. More rows dequantize W^T into scratch
(K x N floats, for the run only), laid out as the micro-kernel's panels, and run graphrt's
matrix product Y = A @ W^T over them. Constant 4-bit weights are first laid out once (per
kernel, while its inputs are the same arrays) as ``Repacked``: byte u of every column side by
side (k-major: bytes [K / 2, N]), scales and zero points [blocks, N], so that a panel's rows
decode from contiguous bytes, a vector of columns at a time (bert_int4's 256 x 1024 layer
99-140 -> 21 µs); the same values, so the same bits. The one-pass dot product sends value k
to partial sum k % 8 and adds the eight as ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 +
s7)): a fixed order, so the bits depend on the inputs only, in both modes. Refused: float zero points and g_idx
(act-order). onnxruntime's accuracy_level 4 quantizes A to int8 blocks (a further error of
up to about 1 %, see docs/contrib-ops.md); graphrt computes in float32 at every level.
"""
from __future__ import annotations

import math
import sys

import numba
import numpy as np
from numba import njit, prange

from ...errors import ErrorKind
from ...threads import ensure_layer
from ...aligned import aligned_copy
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.held import held_buffer
from ..core.jit import Variants
from ..gemm.microkernel import nr_of
from ..gemm.product import PARALLEL_WORK, Product, own_tiles

F32 = np.dtype(np.float32)
NR = nr_of(4)                   # the micro-kernel's panel width for float32


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _zero_point(zp, j, b, zrow, bits, default):
    if zp.size == 0:
        return default
    per = 8 // bits
    return np.float32((zp[j * zrow + b // per] >> ((b % per) * bits)) & ((1 << bits) - 1))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _zero_point4(zp, row, b):
    """The 4-bit zero point of block b of the column whose packed zero points start at
    zp[row] (8 without zero points)."""
    if zp.size == 0:
        return np.float32(8)
    return np.float32((np.int32(zp[row + (b >> np.uint64(1))]) >>
                       np.int32(4 * (b & np.uint64(1)))) & 15)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _decode(packed, scales, zp, j, b, geo, buf, step=1):
    """buf[t * step] = W[j, b * block + t] for the block's t < its length."""
    k, bits, block, blocks, blob, zrow = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    per = 8 // bits
    mask = (1 << bits) - 1
    s = scales[j * blocks + b]
    z = _zero_point(zp, j, b, zrow, bits, np.float32(1 << (bits - 1)))
    base = (j * blocks + b) * blob
    kn = min(block, k - b * block)
    for u in range(-(-kn // per)):
        v = np.int32(packed[base + u])
        for e in range(min(per, kn - u * per)):
            buf[(u * per + e) * step] = (np.float32((v >> (e * bits)) & mask) - z) * s


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _group_shift(block):
    """log2(block / 8): a group of eight values g lies in block g >> it."""
    shift = np.uint64(0)
    while (np.uint64(1) << shift) < np.uint64(block // 8):
        shift += np.uint64(1)
    return shift


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _column(packed, scales, zp, geo, j, buf):
    """buf[k] = W[j, k] for every k < K."""
    k, bits, blocks, block, blob = geo[0], geo[1], geo[3], geo[2], geo[4]
    if bits == 4 and k % 8 == 0:
        shift = _group_shift(block)
        base, sb, zb = np.uint64(j * blocks * blob), np.uint64(j * blocks), np.uint64(j * geo[5])
        for g in range(np.uint64(k // 8)):
            bi = g >> shift
            sc = scales[sb + bi]
            z = _zero_point4(zp, zb, bi)
            for e in range(np.uint64(4)):
                v = np.int32(packed[base + np.uint64(4) * g + e])
                t = np.uint64(8) * g + np.uint64(2) * e
                buf[t] = (np.float32(v & 15) - z) * sc
                buf[t + np.uint64(1)] = (np.float32(v >> 4) - z) * sc
    else:
        for b in range(blocks):
            _decode(packed, scales, zp, j, b, geo, buf[b * block:])


def _row(a, packed, words, scales, zp, geo, bias, out, work, columns):
    """out[j] = Y[0, j] for the one row a and the ``columns`` = N = geo[6] columns j, one pass
    over the packed weights (columns in parallel). 4-bit weights (K a multiple of 8) decode
    eight values (one word) at a time straight into the eight partial sums; other widths
    decode each column into a buffer first. Either way value k goes to partial sum k % 8."""
    k, blocks, block = geo[0], geo[3], geo[2]
    has_b = bias.size > 0
    fused = geo[1] == 4 and k % 8 == 0 and words.size > 0
    shift = _group_shift(block)
    for j in prange(columns):
        if fused:
            base = np.uint64(j * blocks * geo[4] // 4)
            sb, zb = np.uint64(j * blocks), np.uint64(j * geo[5])
            s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = np.float32(0)
            for g in range(np.uint64(k // 8)):
                bi = g >> shift
                sc = scales[sb + bi]
                z = _zero_point4(zp, zb, bi)
                # eight values in one little-endian word: value e in bits 4e .. 4e + 3
                v = words[base + g]
                t = np.uint64(8) * g
                s0 += a[t] * ((np.float32(v & 15) - z) * sc)
                s1 += a[t + np.uint64(1)] * ((np.float32((v >> 4) & 15) - z) * sc)
                s2 += a[t + np.uint64(2)] * ((np.float32((v >> 8) & 15) - z) * sc)
                s3 += a[t + np.uint64(3)] * ((np.float32((v >> 12) & 15) - z) * sc)
                s4 += a[t + np.uint64(4)] * ((np.float32((v >> 16) & 15) - z) * sc)
                s5 += a[t + np.uint64(5)] * ((np.float32((v >> 20) & 15) - z) * sc)
                s6 += a[t + np.uint64(6)] * ((np.float32((v >> 24) & 15) - z) * sc)
                s7 += a[t + np.uint64(7)] * ((np.float32((v >> 28) & 15) - z) * sc)
            acc = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
            out[j] = acc + bias[j] if has_b else acc
            continue
        buf = work[numba.get_thread_id()]
        _column(packed, scales, zp, geo, j, buf)
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = np.float32(0)
        t = np.uint64(0)
        while t + np.uint64(8) <= np.uint64(k):
            s0 += a[t] * buf[t]
            s1 += a[t + np.uint64(1)] * buf[t + np.uint64(1)]
            s2 += a[t + np.uint64(2)] * buf[t + np.uint64(2)]
            s3 += a[t + np.uint64(3)] * buf[t + np.uint64(3)]
            s4 += a[t + np.uint64(4)] * buf[t + np.uint64(4)]
            s5 += a[t + np.uint64(5)] * buf[t + np.uint64(5)]
            s6 += a[t + np.uint64(6)] * buf[t + np.uint64(6)]
            s7 += a[t + np.uint64(7)] * buf[t + np.uint64(7)]
            t += np.uint64(8)
        tail = np.float32(0)
        while t < np.uint64(k):
            tail += a[t] * buf[t]
            t += np.uint64(1)
        acc = (((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))) + tail
        out[j] = acc + bias[j] if has_b else acc


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _panel(packed, scales, zp, geo, w, p, sz):
    """Panel p of _dequantize: whole 4-bit blocks a byte of every column at a time (the
    panel's rows written in order; ``sz``: room for each column's scale and zero point),
    the rest a column at a time."""
    k, block, blocks, n, width = geo[0], geo[2], geo[3], geo[6], geo[7]
    blob, zrow = np.uint64(geo[4]), np.uint64(geo[5])
    panel = w[p * k * width:(p + 1) * k * width]
    cols = min(width, n - p * width)
    stride = np.uint64(blocks) * blob
    for b in range(blocks):
        if geo[1] == 4 and (b + 1) * block <= k:
            first = (np.uint64(p * width) * np.uint64(blocks) + np.uint64(b)) * blob
            for c in range(cols):
                jb = np.uint64(p * width + c) * np.uint64(blocks) + np.uint64(b)
                sz[c] = scales[jb]
                sz[width + c] = _zero_point4(zp, np.uint64(p * width + c) * zrow, np.uint64(b))
            for u in range(blob):
                lo = panel[(b * block + 2 * u) * width:(b * block + 2 * u + 1) * width]
                hi = panel[(b * block + 2 * u + 1) * width:(b * block + 2 * u + 2) * width]
                q = first + np.uint64(u)
                for c in range(cols):
                    v = np.int32(packed[q])
                    q += stride     # the next column's byte
                    lo[c] = (np.float32(v & 15) - sz[width + c]) * sz[c]
                    hi[c] = (np.float32(v >> 4) - sz[width + c]) * sz[c]
        else:
            for c in range(cols):
                _decode(packed, scales, zp, p * width + c, b, geo,
                        panel[b * block * width + c:], width)
        for c in range(cols, width):
            for t in range(min(block, k - b * block)):
                panel[(b * block + t) * width + c] = 0


def _dequantize(packed, scales, zp, geo, w, work, panels):
    """W^T as panels of width P = geo[7] (NR: the micro-kernel's panels, microkernel.
    pack_panels' layout; N: plain k-major rows): W[j, k] at w[(j // P) * K * P + k * P +
    j % P], zeros past N; the ``panels`` = ceil(N / P) panels in parallel, a block of every
    column of a panel at a time (its P x block values stay in L1 for P = NR); ``work``: a row
    of 2 * P per pool thread."""
    for p in prange(panels):
        _panel(packed, scales, zp, geo, w, p, work[numba.get_thread_id()])


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _panel4(rows, st, zt, geo, w, p):
    """Panel p of _dequantize4 from Repacked arrays: the panel's rows in order, each a
    vector of its columns."""
    k, block, blocks, n, width = geo[0], geo[2], geo[3], geo[6], geo[7]
    half = block // 2
    panel = w[p * k * width:(p + 1) * k * width]
    c0 = p * width
    cols = min(width, n - c0)
    for b in range(blocks):
        s = st[b * n + c0:b * n + c0 + cols]
        z = zt[b * n + c0:b * n + c0 + cols]
        pairs = min(half, (k - b * block) // 2)     # (whole pairs; an odd K's last below)
        if cols == NR:          # (a whole panel: loops of a known length)
            for u in range(pairs):
                t = b * block + 2 * u
                src = rows[(b * half + u) * n + c0:(b * half + u) * n + c0 + NR]
                two = panel[t * NR:(t + 2) * NR]
                for c in range(NR):
                    v = np.int32(src[c])
                    two[c] = (np.float32(v & 15) - z[c]) * s[c]
                    two[NR + c] = (np.float32(v >> 4) - z[c]) * s[c]
        else:
            for u in range(pairs):
                t = b * block + 2 * u
                src = rows[(b * half + u) * n + c0:(b * half + u) * n + c0 + cols]
                lo = panel[t * width:t * width + cols]
                hi = panel[(t + 1) * width:(t + 1) * width + cols]
                for c in range(cols):
                    v = np.int32(src[c])
                    lo[c] = (np.float32(v & 15) - z[c]) * s[c]
                    hi[c] = (np.float32(v >> 4) - z[c]) * s[c]
        if pairs < half and b * block + 2 * pairs < k:      # K odd: its last value
            t = b * block + 2 * pairs
            src = rows[(b * half + pairs) * n + c0:(b * half + pairs) * n + c0 + cols]
            lo = panel[t * width:t * width + cols]
            for c in range(cols):
                lo[c] = (np.float32(np.int32(src[c]) & 15) - z[c]) * s[c]
    if cols < width:
        for t in range(k):
            row = panel[t * width + cols:(t + 1) * width]
            for c in range(width - cols):
                row[c] = 0


def _dequantize4(rows, st, zt, geo, w, panels):
    """_dequantize's W^T panels from the Repacked form of constant 4-bit weights, the
    ``panels`` in parallel."""
    for p in prange(panels):
        _panel4(rows, st, zt, geo, w, p)


class Repacked:
    """Constant 4-bit weights laid out for _dequantize4 (module docstring): ``rows`` [K2, N]
    uint8 (byte u of every column's blocks, K2 = blocks * blob), ``st`` and ``zt`` [blocks,
    N] float32 (scales; zero points as values, 8 where absent). Made on first use and kept
    while the kernel's inputs are the same arrays (its plans share it)."""

    __slots__ = ("_of", "arrays")

    def __init__(self):
        self._of = self.arrays = None

    def of(self, packed, scales, zp, n: int, blocks: int) -> tuple:
        if self._of is None or any(x is not y for x, y in zip(self._of, (packed, scales, zp))):
            rows = aligned_copy(np.asarray(packed).reshape(n, -1).T, np.uint8)
            st = aligned_copy(np.asarray(scales).reshape(n, blocks).T, F32)
            if zp is None:
                zt = np.full((blocks, n), 8, F32)
            else:
                z = np.asarray(zp).reshape(n, -1)
                pairs = np.stack([z & 15, z >> 4], axis=2).reshape(n, -1)[:, :blocks]
                zt = aligned_copy(pairs.T, F32)
            self.arrays = (rows.reshape(-1), st.reshape(-1), zt.reshape(-1))
            self._of = (packed, scales, zp)
        return self.arrays


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _add_bias(out, m, n, bias):
    """out[i * n + j] += bias[j]."""
    for i in range(m):
        row = out[i * n:(i + 1) * n]
        for j in range(n):
            row[j] += bias[j]


_NO_ZP, _NO_BIAS, _NO_WORDS = np.zeros(0, np.uint8), np.zeros(0, F32), np.zeros(0, np.uint32)


def _words(packed, bits):
    """packed as little-endian uint32 words where 4-bit blobs are whole words (block_size
    >= 16: 8 bytes or more) and the buffer is aligned, else an empty array."""
    if bits != 4 or packed.size % 4 or packed.ctypes.data % 4 or sys.byteorder != "little":
        return _NO_WORDS
    return packed.view(np.uint32)


ROW = Variants(_row, "matmul_nbits_row", parallel=True)
DEQUANTIZE = Variants(_dequantize, "matmul_nbits_dequantize", parallel=True)
DEQUANTIZE4 = Variants(_dequantize4, "matmul_nbits_dequantize4", parallel=True)


class MatMulNBits(OpKernel):
    tile_products = True
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        for name in ("K", "N"):
            if node.attr(name) is None:
                node.fail(f"attribute {name} is required")
        self.k, self.n = int(node.attr("K")), int(node.attr("N"))
        self.bits = int(node.attr("bits", 4))
        self.block = int(node.attr("block_size", 0))
        if self.bits not in (2, 4, 8):
            node.fail(f"bits={self.bits} is not supported (2, 4 and 8 are)",
                      ErrorKind.UNSUPPORTED)
        if self.block < 16 or self.block & (self.block - 1):
            node.fail(f"block_size={self.block} must be a power of 2 of at least 16")
        self._repacked = Repacked()

    def infer(self, ctx: InferContext) -> None:
        k, n, bits, block = self.k, self.n, self.bits, self.block
        if ctx.dtype(0) != F32:
            ctx.fail(f"A of element type {ctx.dtype(0)} is not supported (float32 is)",
                     ErrorKind.UNSUPPORTED)
        a_shape = tuple(ctx.shape(0))
        if not a_shape or a_shape[-1] != k:
            ctx.fail(f"A of shape {list(a_shape)} must end in K = {k}")
        blocks = -(-k // block)
        blob = block * bits // 8
        if ctx.dtype(1) != np.uint8 or math.prod(ctx.shape(1)) != n * blocks * blob:
            ctx.fail(f"B must be uint8 of {n} x {blocks} x {blob} bytes, got "
                     f"{ctx.dtype(1)} {list(ctx.shape(1))}")
        if ctx.dtype(2) != F32 or math.prod(ctx.shape(2)) != n * blocks:
            ctx.fail(f"scales must be {n * blocks} values of A's type, got {ctx.dtype(2)} "
                     f"{list(ctx.shape(2))}")
        zrow = -(-blocks * bits // 8)
        if ctx.has_input(3):
            if ctx.dtype(3) != np.uint8:
                ctx.fail(f"zero_points of element type {ctx.dtype(3)} are not supported "
                         "(packed uint8 are)", ErrorKind.UNSUPPORTED)
            if math.prod(ctx.shape(3)) != n * zrow:
                ctx.fail(f"zero_points must be {n} x {zrow} packed bytes, got "
                         f"{list(ctx.shape(3))}")
        if ctx.has_input(4):
            ctx.fail("g_idx (act-order block indices) is not supported", ErrorKind.UNSUPPORTED)
        if ctx.has_input(5) and (ctx.dtype(5) != F32 or tuple(ctx.shape(5)) != (n,)):
            ctx.fail(f"bias must be float32 of shape [{n}]")
        m = math.prod(a_shape[:-1])
        ctx.set_output(0, F32, a_shape[:-1] + (n,))
        panels = own_tiles(F32, ctx.exact)
        width = NR if panels else n
        geo = np.array([k, bits, block, blocks, blob, zrow, n, width], np.int64)
        parallel = m * n * k >= PARALLEL_WORK
        ensure_layer()          # numba.get_thread_id needs the threading layer running
        if m == 1:
            ctx.prepared = (geo, m, ROW.get(ctx.exact, parallel), None, None)
            return
        # Y = A @ W^T, W^T dequantized as the micro-kernel's panels where it runs
        product = Product(F32, m, n, k, (k, 1), (NR, k) if panels else (n, 1),
                          exact=ctx.exact, panels=panels)
        constant = [ctx.value(i) for i in (1, 2, 3)]
        if bits == 4 and all(v is not None for v in constant[:2]) and \
                (constant[2] is not None or not ctx.has_input(3)):
            repacked = self._repacked.of(*constant, n, blocks)
            ctx.prepared = (geo, m, DEQUANTIZE4.get(ctx.exact, parallel), product, repacked)
        else:
            ctx.prepared = (geo, m, DEQUANTIZE.get(ctx.exact, parallel), product, None)

    def calls(self, ctx: RunContext, buffer, blas: bool = False) -> list | None:
        """The node's run as calls, scratch from ``buffer(dtype, shape, use)``: all compiled,
        else None; with ``blas``, the product may be the BLAS's (a Python call)."""
        geo, m, fn, product, repacked = ctx.prepared
        flat = ctx.flat_in
        a, packed, scales = flat[0], flat[1], flat[2]
        zp = flat[3] if len(flat) > 3 and flat[3] is not None else _NO_ZP
        bias = flat[5] if len(flat) > 5 and flat[5] is not None else _NO_BIAS
        out = ctx.flat_out[0]
        width, n = int(geo[7]), int(geo[6])
        if product is None:
            # a column's values, rounded up to whole blocks
            work = buffer(F32, (numba.config.NUMBA_NUM_THREADS, int(geo[3]) * self.block),
                          "nbits column")
            return [(fn, (a, packed, _words(packed, self.bits), scales, zp, geo, bias, out,
                          work, n))]
        w = buffer(F32, (-(-n // width) * width * self.k,), "nbits panels")
        panels = -(-n // width)
        if repacked is not None:
            first = (fn, (*repacked, geo, w, panels))
        else:
            first = (fn, (packed, scales, zp, geo, w,
                          buffer(F32, (numba.config.NUMBA_NUM_THREADS, 2 * width), "nbits work"),
                          panels))
        mult = product.call_of(a, w, out, holder=ctx.held)
        if mult is None:
            if not blas:
                return None
            mult = (product, (a, w, out))
        return [first, mult] + ([(_add_bias, (out, m, self.n, bias))] if bias.size else [])

    def jit_calls(self, ctx: RunContext):
        return self.calls(ctx, lambda dtype, shape, use: held_buffer(dtype, shape, ctx.held,
                                                                     use))

    def run(self, ctx: RunContext) -> None:
        for fn, args in self.calls(ctx, lambda dtype, shape, use: scratch(ctx, dtype, shape),
                                   blas=True):
            fn(*args)
