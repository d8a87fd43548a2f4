"""Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger
and QLinearMatMul (ConvInteger and QLinearConv: convolution.py).

    QuantizeLinear    y = saturate(rint(x / scale) + zero_point)      rint: half to even
    DequantizeLinear  y = (x - zero_point) * scale

scale and zero_point are per tensor (one value), per axis (a vector along ``axis``) or
blocked (the shape of x with extent ceil(D/block_size) along ``axis``). The division runs in
the ``precision`` attribute's type, else the scale's type (float16/bfloat16 division is
emulated exactly with einsum.round_to); saturate clamps to the output type's range and sends
NaN to its lowest value. Dequantization subtracts in float32 (float64 for int32 data with a
zero point, as numpy promotes) and multiplies in that type. Integer types: uint8, int8,
uint16, int16, and through ml_dtypes uint4, int4, uint2, int2 (carried as uint8/int8). float8
outputs are x / scale cast to the type (clamped to its largest finite value first when
saturate=1, the default; their zero point must be 0 and is not added); float4 outputs are
x / scale + zero_point cast. float8/float4 inputs dequantize as float32(x) * scale.

DynamicQuantizeLinear: scale = (max(0, max x) - min(0, min x)) / 255 (1/255 when both are
0), zero_point = rint(clamp(-min / scale, 0, 255)), y as QuantizeLinear to uint8.

MatMulInteger: (a - a_zero_point) @ (b - b_zero_point) in int32 (per-row / per-column zero
points); the product on gemm/micro_int.py's integer tiles or as exact float32 runs of k
(``_IntegerProduct``). QLinearMatMul (and QLinearConv) requantize that int32 result:
y = saturate(rint(float64(acc) * m + y_zero_point)) with m = a_scale * b_scale / y_scale
computed in the scales' type (numpy), per tensor or per output column/channel.

All are +, -, *, /, rint and clamps: exact-mode kernels.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, make_calls, scratch
from ..core.held import held_buffer
from ..core.broadcast import PARALLEL_MIN, broadcast_shape
from ..core.floats import BF16, F16, F32, F64, FLOAT8, optional_dtype, round_to, widen
from ..core.jit import Variants
from ..gemm import micro_int
from ..gemm.product import PARALLEL_WORK, Product, batch_offsets

EXACT = False

I32 = np.dtype(np.int32)
I8 = np.dtype(np.int8)
U8 = np.dtype(np.uint8)


# integer output types -> (lowest, highest, the numpy type the kernel writes)
RANGES = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max), np.dtype(t))
          for t in (np.uint8, np.int8, np.uint16, np.int16)}
for _code, _lo, _hi in ((21, 0, 15), (22, -8, 7), (25, 0, 3), (26, -2, 1)):    # [u]int4, [u]int2
    if optional_dtype(_code) is not None:
        RANGES[optional_dtype(_code)] = (_lo, _hi, U8 if _lo == 0 else I8)
FLOAT4 = frozenset(t for t in map(optional_dtype, (23,)) if t is not None)
QUANT_IN = frozenset(RANGES) | {I32} | FLOAT8 | FLOAT4
SCALES = frozenset(t for t in (F16, F32, BF16) if t is not None)
# division precision: 0 float64, 1 float32, else (significant bits, min exponent, max exponent)
_FORMATS = {F64: (0, 0, 0), F32: (1, 0, 0), F16: (11, -14, 15), BF16: (8, -126, 127)}
_PRECISION = {1: F32, 10: F16, 11: F64, 16: BF16}
_NATIVE = (_dt.INTEGERS | _dt.FLOATS) - {F16}       # the types numba computes in


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _saturate(v, lo, hi):
    """v clamped to [lo, hi]; NaN gives lo."""
    if not v >= lo:
        return lo
    return hi if v > hi else v


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _param_index(i, geo):
    """Index of the scale / zero point used by element i (see _Axis)."""
    inner = geo[0]
    n = geo[1]
    o = i // (n * inner)
    r = i - o * n * inner
    a = r // inner
    return o * geo[3] + (a // geo[2]) * geo[4] + (r - a * inner) * geo[5]


def _quantize(x, scale, zp, out, geo, lo, hi, fmt, to_int, has_zp, n):
    """out = saturate(rint(x / scale) + zp) (to_int), else x / scale (+ zp) as it is."""
    p, emin, emax = fmt[0], fmt[1], fmt[2]
    single = scale.size == 1        # per tensor: no index arithmetic per element
    for i in prange(n):
        k = 0 if single else _param_index(i, geo)
        if p == 1:
            q = np.float64(np.float32(x[i]) / np.float32(scale[k]))
        elif p == 0:
            q = np.float64(x[i]) / np.float64(scale[k])
        else:
            q = round_to(round_to(np.float64(x[i]), p, emin, emax)
                          / round_to(np.float64(scale[k]), p, emin, emax), p, emin, emax)
        if to_int:
            q = np.rint(q)
        if has_zp:
            q = q + zp[k]
        out[i] = _saturate(q, lo, hi) if to_int else q


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, inline="always")
def _dequantized(xv, s, z, wide, has_zp, exact):
    """(x - z) * scale of one element (see the module docstring); z counts only when
    has_zp. Each branch keeps its own type (a variable that changed type between branches
    made every path float64 and the loops scalar)."""
    if wide:
        w = np.float64(np.float32(xv))
        if has_zp:
            w = w - np.float64(z)
        v = w * np.float64(s)
    else:
        d = np.float32(xv)
        if has_zp:
            d = np.float32(d - np.float32(z))
        v = np.float64(d * np.float32(s))
    return np.nan if exact and v != v else v


def _dequantize_one(x, scale, zp, out, geo, wide, has_zp, n):
    """out = (x - zp) * scale over n elements of one scale."""
    # the scale and zero point read once: read in the loop, they may alias out for all
    # numba tells LLVM, which then keeps the loop scalar
    s, z = scale[0], zp[0] if has_zp else 0
    for i in prange(n):
        out[i] = _dequantized(x[i], s, z, wide, has_zp, EXACT)


def _dequantize_rows(x, scale, zp, out, geo, wide, has_zp, rows):
    """out = (x - zp) * scale over rows of geo[0] elements, row r's scale r % geo[1] (weights
    per output channel)."""
    inner = geo[0]
    axis = geo[1]
    for row in prange(rows):
        k = row % axis
        s, z = scale[k], zp[k] if has_zp else 0
        for i in range(row * inner, (row + 1) * inner):
            out[i] = _dequantized(x[i], s, z, wide, has_zp, EXACT)


def _dequantize_any(x, scale, zp, out, geo, wide, has_zp, n):
    """out = (x - zp) * scale over n elements, each element's scale by its index (blocked
    forms)."""
    for i in prange(n):
        k = _param_index(i, geo)
        out[i] = _dequantized(x[i], scale[k], zp[k] if has_zp else 0, wide, has_zp, EXACT)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, inline="always")
def requantized(a, m, t, lo, hi):
    """saturate(rint(a * m + t)) of one int32 sum (m, t float64)."""
    return _saturate(np.rint(np.float64(a) * m + t), lo, hi)


def _requantize_cols(acc, mult, off, zp, out, inner, count, lo, hi, rows):
    """out[i] = saturate(rint(acc[i] * mult[c] + (off[c] +) zp[c])) over rows of ``count``
    channels c (inner = 1: products' columns); mult, off, zp: one value or ``count`` (off may
    be empty). No division per element."""
    nm, no, nz = mult.size > 1, off.size > 1, zp.size > 1
    has_off = off.size > 0
    for o in prange(rows):
        for c in range(count):
            i = o * count + c
            t = np.float64(zp[c if nz else 0])
            if has_off:
                t = off[c if no else 0] + t
            out[i] = requantized(acc[i], mult[c if nm else 0], t, lo, hi)


def _requantize_rows(acc, mult, off, zp, out, inner, count, lo, hi, rows):
    """_requantize_cols over rows of ``inner`` elements of one channel, row r's r % count
    (convolutions' planes)."""
    nm, no, nz = mult.size > 1, off.size > 1, zp.size > 1
    has_off = off.size > 0
    for r in prange(rows):
        c = r % count
        m, t = mult[c if nm else 0], np.float64(zp[c if nz else 0])
        if has_off:
            t = off[c if no else 0] + t
        for i in range(r * inner, (r + 1) * inner):
            out[i] = requantized(acc[i], m, t, lo, hi)


def _shift_cols(x, zp, out, inner, count, rows):
    """out[i] = x[i] - zp[c] in out's type over rows of ``count`` channels c (one zero point if
    zp has one element), as in _requantize_cols."""
    nz = zp.size > 1
    for o in prange(rows):
        for c in range(count):
            i = o * count + c
            out[i] = np.int32(x[i]) - np.int32(zp[c if nz else 0])


def _shift_rows(x, zp, out, inner, count, rows):
    """_shift_cols over rows of ``inner`` elements of one channel, as in _requantize_rows."""
    nz = zp.size > 1
    for t in prange(rows):
        z = np.int32(zp[t % count if nz else 0])
        for i in range(t * inner, (t + 1) * inner):
            out[i] = np.int32(x[i]) - z


_QUANTIZE = Variants(_quantize, "quantize_linear", parallel=True)
_DEQUANTIZE = {"one": Variants(_dequantize_one, "dequantize_one", parallel=True),
               "rows": Variants(_dequantize_rows, "dequantize_rows", parallel=True),
               "any": Variants(_dequantize_any, "dequantize_any", parallel=True)}
# by whether the rows are of one channel each (inner > 1) or of every channel (inner = 1)
_REQUANTIZE = {False: Variants(_requantize_cols, "requantize_cols", parallel=True),
               True: Variants(_requantize_rows, "requantize_rows", parallel=True)}
_SHIFT = {False: Variants(_shift_cols, "zero_point_shift_cols", parallel=True),
          True: Variants(_shift_rows, "zero_point_shift_rows", parallel=True)}


def _walk(table: dict, n: int, inner: int, count: int) -> tuple:
    """(the _REQUANTIZE or _SHIFT form, its rows) for n elements: rows of one channel each
    when inner > 1, else of all ``count`` channels."""
    return table[inner > 1], n // inner if inner > 1 else n // max(1, count)


def _par(n):
    return n >= PARALLEL_MIN


def _numba_view(ctx, x):
    """x as numba can read it: 16-bit floats, float8 and float4 in float32, 2/4-bit
    integers in int8/uint8."""
    if x.dtype in RANGES:
        return widen(ctx, x, RANGES[x.dtype][2])
    return x if x.dtype in _NATIVE else widen(ctx, x, F32)


class _Axis:
    """How elements of x find their scale: geo = [inner, n_axis, block, s_outer, s_axis,
    s_inner] for _param_index, from the scale's shape (validated here)."""

    def __init__(self, ctx, shape, sshape, axis, block, opset):
        r = len(shape)
        size = math.prod(sshape)
        if block == 0 and size == 1 and len(sshape) <= 1:
            self.geo = np.array([1, 1, 1, 0, 0, 0], dtype=np.int64)
            return
        if not -r <= axis < r:
            ctx.fail(f"axis {axis} is out of range for rank {r}")
        axis = axis + r if axis < 0 else axis
        n = shape[axis]
        inner = math.prod(shape[axis + 1:])
        if block == 0:
            if opset < 13 or tuple(sshape) != (n,):
                ctx.fail(f"scale of shape {list(sshape)} is neither one value nor a vector of "
                         f"{n} along axis {axis} of {list(shape)}")
            self.geo = np.array([inner, n, 1, 0, 1, 0], dtype=np.int64)
            return
        nb = -(-n // block)
        want = tuple(shape[:axis]) + (nb,) + tuple(shape[axis + 1:])
        if block < 0 or tuple(sshape) != want:
            ctx.fail(f"scale of shape {list(sshape)} does not block {list(shape)} along axis "
                     f"{axis} by {block} (expected {list(want)})")
        self.geo = np.array([inner, n, block, nb * inner, inner, 1], dtype=np.int64)


class _Linear(OpKernel):
    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.axis = int(node.attr("axis", 1))
        self.block = int(node.attr("block_size", 0)) if node.opset >= 21 else 0
        out = node.attr("output_dtype") if node.opset >= 21 else None
        self.output_dtype = None
        if out:
            try:
                self.output_dtype = _dt.to_numpy(int(out))
            except (KeyError, ValueError):
                node.fail(f"output_dtype {_dt.name_of_code(int(out))} is not supported",
                          ErrorKind.UNSUPPORTED)

    def params(self, ctx):
        shape, sshape = tuple(ctx.shape(0)), tuple(ctx.shape(1))
        if ctx.has_input(2) and tuple(ctx.shape(2)) != sshape \
                and not (math.prod(sshape) == 1 == math.prod(ctx.shape(2))):
            ctx.fail(f"zero point of shape {list(ctx.shape(2))} must match the scale's "
                     f"{list(sshape)}")
        return shape, _Axis(ctx, shape, sshape, self.axis, self.block, self.node.opset).geo


class QuantizeLinear(_Linear):

    def __init__(self, node):
        super().__init__(node)
        precision = node.attr("precision") if node.opset >= 23 else None
        if precision and _PRECISION.get(int(precision)) not in _FORMATS:
            node.fail(f"precision {_dt.name_of_code(int(precision))} is not supported",
                      ErrorKind.UNSUPPORTED)
        self.precision = _PRECISION[int(precision)] if precision else None
        self.saturate = int(node.attr("saturate", 1)) != 0

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.dtype(0)
        if dt not in SCALES and dt != I32:
            ctx.fail(f"x of element type {dt} is not supported", ErrorKind.UNSUPPORTED)
        if ctx.dtype(1) not in SCALES:
            ctx.fail(f"scale of element type {ctx.dtype(1)} is not supported",
                     ErrorKind.UNSUPPORTED)
        out = ctx.dtype(2) if ctx.has_input(2) else self.output_dtype or U8
        if self.output_dtype is not None and out != self.output_dtype:
            ctx.fail(f"output_dtype {out} and the zero point's type differ")
        if out not in RANGES and out not in FLOAT8 and out not in FLOAT4:
            ctx.fail(f"output type {out} is not supported", ErrorKind.UNSUPPORTED)
        shape, geo = self.params(ctx)
        ctx.set_output(0, out, shape)
        fmt = np.array(_FORMATS[self.precision or ctx.dtype(1)], dtype=np.int64)
        n = math.prod(shape)
        limit = None
        if out in FLOAT8 and self.saturate:
            import ml_dtypes        # present whenever a float8 dtype is
            limit = float(ml_dtypes.finfo(out).max)
        lo, hi, carrier = RANGES.get(out, (0, 0, F32))
        # the common case (float32 activations, one float32 scale, an 8-bit output) has a
        # kernel of its own: _quantize_8bit
        simple = out in (U8, I8) and dt == F32 and ctx.dtype(1) == F32 and geo[3] == 0 \
            and math.prod(ctx.shape(1)) == 1 and fmt[0] == 1
        # (the general kernel only where it runs: asking for its parallel form records it
        # for the plan's warm-up, plan/warm.py, and a form never run is never compiled)
        ctx.prepared = (geo, lo, hi, carrier, fmt, out not in FLOAT8, limit, n,
                        None if simple else _QUANTIZE.get(ctx.exact, _par(n)), simple)

    def jit_calls(self, ctx: RunContext):
        """The common case's one call: _quantize_8bit on the one scale and zero point."""
        geo, lo, hi, carrier, fmt, use_zp, limit, n, fn, simple = ctx.prepared
        if not simple:
            return None
        zp = ctx.flat_in[2] if len(ctx.flat_in) > 2 and ctx.flat_in[2] is not None else \
            np.zeros(0, ctx.flat_out[0].dtype)
        return [(_quantize_one_scale, (ctx.flat_in[0], ctx.flat_in[1], zp, np.float32(lo),
                                       np.float32(hi), ctx.flat_out[0]))]

    def run(self, ctx: RunContext) -> None:
        geo, lo, hi, carrier, fmt, use_zp, limit, n, fn, simple = ctx.prepared
        if simple:
            make_calls(self.jit_calls(ctx))
            return
        x, scale = _numba_view(ctx, ctx.flat_in[0]), _numba_view(ctx, ctx.flat_in[1])
        has_zp = use_zp and len(ctx.flat_in) > 2 and ctx.flat_in[2] is not None
        zp = _numba_view(ctx, ctx.flat_in[2]) if has_zp else geo
        out = ctx.flat_out[0]
        dst = out if out.dtype == carrier else scratch(ctx, carrier, (n,))
        fn(x, scale, zp, dst, geo, lo, hi, fmt, carrier.kind in "iu", has_zp, n)
        if limit is not None:
            np.clip(dst, -limit, limit, out=dst)
        if dst is not out:
            np.copyto(out, dst, casting="unsafe")


class DequantizeLinear(_Linear):
    def infer(self, ctx: InferContext) -> None:
        dt = ctx.dtype(0)
        if dt not in QUANT_IN:
            ctx.fail(f"x of element type {dt} is not supported", ErrorKind.UNSUPPORTED)
        if ctx.dtype(1) not in SCALES:
            ctx.fail(f"scale of element type {ctx.dtype(1)} is not supported",
                     ErrorKind.UNSUPPORTED)
        if ctx.has_input(2) and ctx.dtype(2) != dt:
            ctx.fail(f"zero point type {ctx.dtype(2)} differs from x's {dt}")
        floats = dt in FLOAT8 or dt in FLOAT4      # their zero point is ignored (must be 0)
        out = self.output_dtype or ctx.dtype(1)
        if out not in SCALES:
            ctx.fail(f"output type {out} is not supported", ErrorKind.UNSUPPORTED)
        shape, geo = self.params(ctx)
        ctx.set_output(0, out, shape)
        n = math.prod(shape)
        wide = dt == I32 and ctx.has_input(2)
        if math.prod(ctx.shape(1)) == 1:
            path, tasks = "one", n
        elif geo[2] == 1 and geo[3] == 0 and geo[5] == 0:
            path, tasks = "rows", n // max(1, int(geo[0]))
        else:
            path, tasks = "any", n
        ctx.prepared = (geo, wide, floats, tasks, _DEQUANTIZE[path].get(ctx.exact, _par(n)))

    def jit_calls(self, ctx: RunContext):
        """The kernel's one call where numba reads every input as it is and the output is
        float32 (the run's own call then)."""
        if ctx.flat_out[0].dtype != F32 or \
                any(a is not None and a.dtype not in _NATIVE for a in ctx.flat_in):
            return None
        return [self._call(ctx, ctx.flat_out[0])]

    def _call(self, ctx: RunContext, dst) -> tuple:
        geo, wide, floats, tasks, fn = ctx.prepared
        x, scale = _numba_view(ctx, ctx.flat_in[0]), _numba_view(ctx, ctx.flat_in[1])
        has_zp = not floats and len(ctx.flat_in) > 2 and ctx.flat_in[2] is not None
        zp = _numba_view(ctx, ctx.flat_in[2]) if has_zp else x[:0]
        return fn, (x, scale, zp, dst, geo, wide, has_zp, tasks)

    def run(self, ctx: RunContext) -> None:
        out = ctx.flat_out[0]
        dst = out if out.dtype == F32 else scratch(ctx, F32, (out.size,))
        fn, args = self._call(ctx, dst)
        fn(*args)
        if dst is not out:
            np.copyto(out, dst, casting="unsafe")


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, inline="always")
def _order_key(bits):
    """An int32 that orders float32 bit patterns as their values order (-0 below +0)."""
    return bits ^ ((bits >> 31) & 0x7FFFFFFF)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _dynamic_params(x, bits):
    """(scale, zero point) of DynamicQuantizeLinear as float32, NaN propagating; ``bits``:
    x viewed as int32. The range is taken over integer keys of the bits (_order_key), which
    LLVM vectorises (float min and max it may not reorder); -0 and +0 give the same scale
    and zero point."""
    hi = np.int32(0)
    lo = np.int32(0)
    nan = False
    for i in range(bits.size):
        b = bits[i]
        key = _order_key(b)
        hi = max(hi, key)
        lo = min(lo, key)
        nan |= (b & 0x7FFFFFFF) > 0x7F800000
    if nan:
        return np.float32(np.nan), np.float32(0)
    top = np.empty(2, np.int32)
    top[0], top[1] = _order_key(hi), _order_key(lo)
    vals = top.view(np.float32)
    hi_v, lo_v = vals[0], vals[1]
    span = np.float32(1) if hi_v == lo_v else np.float32(hi_v - lo_v)
    scale = np.float32(span / np.float32(255))
    zp = np.float32(np.float32(0) - np.float32(lo_v / scale))
    return scale, np.rint(_saturate(zp, np.float32(0), np.float32(255)))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _quantize_8bit(x, scale, zp, lo, hi, out):
    """out = saturate(rint(x / scale) + zp) to [lo, hi] (8-bit), float32 x and scale, one
    scale: all in float32, the general kernel's result (rint of the float32 quotient is an
    integer; adding a zero point to one below 2**24 is exact, and a sum that is not
    saturates either way); NaN gives lo."""
    for i in range(x.size):
        q = np.rint(x[i] / scale) + zp
        out[i] = lo if not q >= lo else hi if q > hi else q


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _quantize_one_scale(x, scale, zp, lo, hi, out):
    """_quantize_8bit with the scale and the zero point (0 when ``zp`` is empty) read from
    their one-element arrays."""
    z = np.float32(zp[0]) if zp.size else np.float32(0)
    _quantize_8bit(x, scale[0], z, lo, hi, out)


class DynamicQuantizeLinear(OpKernel):
    supports_exact = True

    def infer(self, ctx: InferContext) -> None:
        if ctx.dtype(0) != F32:
            ctx.fail(f"x of element type {ctx.dtype(0)} is not supported (float32 is)",
                     ErrorKind.UNSUPPORTED)
        shape = tuple(ctx.shape(0))
        ctx.set_output(0, np.uint8, shape)
        ctx.set_output(1, F32, ())
        ctx.set_output(2, np.uint8, ())

    def jit_calls(self, ctx: RunContext):
        x = ctx.flat_in[0]
        return [(_dynamic_quantize, (x, x.view(np.int32), *ctx.flat_out))]

    def run(self, ctx: RunContext) -> None:
        make_calls(self.jit_calls(ctx))


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _dynamic_quantize(x, bits, y, scale, zero_point):
    """DynamicQuantizeLinear: the scale and zero point of x (``bits``: x viewed as int32)
    written to their outputs, y = x quantized with them (float32 scalars)."""
    s, zp = _dynamic_params(x, bits)
    scale[0] = s
    zero_point[0] = np.uint8(zp)
    _quantize_8bit(x, s, np.float32(zp), np.float32(0), np.float32(255), y)


# ----------------------------------------------------------------------------- products

def zero_point_check(ctx, i, count, what):
    """Validate an optional zero point: one value or ``count`` values."""
    if not ctx.has_input(i):
        return
    size = math.prod(ctx.shape(i))
    if size not in (1, count):
        ctx.fail(f"{what} zero point of shape {list(ctx.shape(i))} must have 1 or {count} "
                 "values")


def shifted(ctx, x, zp, inner, count, dtype=I32):
    """int32(x) - zero point (or just int32(x)) into scratch of ``dtype`` (int32, or float32
    where that is exact)."""
    out = scratch(ctx, dtype, (x.size,))
    if zp is None:
        np.copyto(out, x)
    else:
        forms, rows = _walk(_SHIFT, x.size, inner, count)
        forms.get(False, _par(x.size))(x, zp, out, inner, count, rows)
    return out


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _add_run(acc, out, first):
    """out (+)= int32(acc): a run's integer-valued float32 sums into the int32 result."""
    for i in range(out.size):
        v = np.int32(acc[i])
        out[i] = v if first else out[i] + v


def exact_run(k: int, a_max: int, b_max: int) -> int:
    """The longest run of k whose partial sums of products |a| <= a_max, |b| <= b_max are
    integers below 2**24, hence exact in float32 in any order, FMA or not."""
    return max(1, min(k, ((1 << 24) - 1) // max(1, a_max * b_max)))


def shift_bound(ctx, x, zp) -> int:
    """The largest |x - zero point| over x's element type (over x itself when constant)."""
    info = np.iinfo(ctx.dtype(x))
    z = ctx.value(zp) if ctx.has_input(zp) else np.zeros(1, np.int64)
    if z is None:
        return info.max - info.min
    z = np.asarray(z, np.int64)
    v = ctx.value(x)
    lo, hi = (info.min, info.max) if v is None or v.size == 0 else (int(v.min()), int(v.max()))
    return int(max(np.abs(lo - z).max(), np.abs(hi - z).max()))


class _IntegerProduct(OpKernel):
    """(A - a_zp) @ (B - b_zp) in int32, numpy matmul broadcasting; the zero points sit at
    inputs ``ZP`` (a per-row, b per-column).

    The operands are 8-bit, so A - a_zp and B - b_zp are integers of at most 9 bits. With
    constant weights B (a 2-D B shared by every batch entry) on x86, the product is integer
    code of its own (gemm/micro_int.py: int16 pairs through pmaddwd, or on VNNI CPUs bytes
    through vpdpbusd where B minus its zero points fits int8; int32 sums), B packed once per
    kernel. Otherwise it runs as float32 products (graphrt's micro-kernel) over runs
    of k short enough that every partial sum stays below 2**24 (``exact_run``: 258 for any
    operands, 514 for weights in [-128, 127]), each run's integer result converted and added
    in int32, a constant B shifted and widened once per kernel. Every step of both is exact,
    so the result is the int32 product's in both modes, whatever the path or thread
    count."""

    supports_exact = True
    ZP = (2, 3)
    IN = (0, 1)

    def __init__(self, node):
        super().__init__(node)
        self._wide_b = None     # (constant B, its zero point, (B - zp) as float32)
        self._packed_b = None   # (constant B, its zero point, micro_int.pack_b's result)

    def plan(self, ctx: InferContext):
        ia, ib = self.IN
        for i in self.IN:
            if ctx.dtype(i) not in (np.uint8, np.int8):
                ctx.fail(f"input {i} of element type {ctx.dtype(i)} is not supported "
                         "(uint8 and int8 are)", ErrorKind.UNSUPPORTED)
        sa, sb = tuple(ctx.shape(ia)), tuple(ctx.shape(ib))
        if not sa or not sb:
            ctx.fail("operands must have rank 1 or more")
        a2 = (1,) + sa if len(sa) == 1 else sa
        b2 = sb + (1,) if len(sb) == 1 else sb
        m, k = a2[-2:]
        k2, n = b2[-2:]
        if k != k2:
            ctx.fail(f"shapes {list(sa)} and {list(sb)} cannot be multiplied")
        batch = broadcast_shape([a2[:-2], b2[:-2]], ctx.fail)
        shape = batch + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
        zero_point_check(ctx, self.ZP[0], m, "A's")
        zero_point_check(ctx, self.ZP[1], n, "B's")
        vb = ctx.value(ib)
        vz = ctx.value(self.ZP[1]) if ctx.has_input(self.ZP[1]) else None
        if micro_int.AVAILABLE and vb is not None and len(b2) == 2 and k <= micro_int.MAX_K \
                and (vz is not None or not ctx.has_input(self.ZP[1])):
            rows = math.prod(a2[:-1])
            return shape, self._integer_plan(vb, vz, rows, k, n)
        run = exact_run(k, shift_bound(ctx, ia, self.ZP[0]), shift_bound(ctx, ib, self.ZP[1]))
        offa = np.asarray(batch_offsets(a2[:-2], batch, m * k), np.int64)
        offb = np.asarray(batch_offsets(b2[:-2], batch, k * n), np.int64)
        runs = tuple(Product(F32, m, n, min(run, k - k0), (k, 1), (n, 1), offa + k0,
                             offb + k0 * n, exact=ctx.exact, fold=True)
                     for k0 in range(0, k, run))
        b_const = ctx.value(ib) is not None and (not ctx.has_input(self.ZP[1]) or
                                                 ctx.value(self.ZP[1]) is not None)
        return shape, (m, n, k, runs, b_const)

    def _integer_plan(self, b, zb, rows, k, n):
        cached = self._packed_b
        if cached is None or cached[0] is not b or cached[1] is not zb:
            quads = micro_int.pack_b8(b, zb, k, n) if micro_int.vnni() else None
            cached = self._packed_b = (b, zb, quads or micro_int.pack_b(b, zb, k, n) + (None,))
        packed, np_, sums = cached[2]
        form = micro_int.PAIRS if sums is None else micro_int.UNSIGNED_ROWS
        step = micro_int.STEP[form]
        mr = micro_int.ROWS[form]
        mp, kp = -(-rows // mr) * mr, -(-k // step) * step
        fn = micro_int.PRODUCT.get(False, rows * n * k >= PARALLEL_WORK)
        return ("tiles", n, micro_int.address(form), fn, packed, rows, k, mr, mp, kp, np_, sums)

    def integer_calls(self, ctx: RunContext, geo, out, buffer) -> list:
        """The integer path's calls (A packed, the product, C unpacked into ``out``), its
        scratch from ``buffer(dtype, size)``."""
        _, n, addr, fn, packed, rows, k, mr, mp, kp, np_, sums = geo
        za = ctx.flat_in[self.ZP[0]] if len(ctx.flat_in) > self.ZP[0] else None
        a = ctx.flat_in[self.IN[0]]
        za = np.zeros(1, a.dtype) if za is None else za
        c = buffer(I32, mp * np_)
        tiles = (np_ // micro_int.NR, False, mp // mr * (np_ // micro_int.NR))
        if sums is None:
            ap = buffer(np.int16, mp * kp)
            return [(micro_int.pack_a, (a, za, rows, k, mp, kp, ap)),
                    (fn, (addr, ap, packed, c, mr, mp, kp, np_, 2) + tiles),
                    (micro_int.unpack, (c, np_, rows, n, out))]
        # the byte tiles: A's bytes made unsigned, its zero point taken out in unpack8
        shift = 128 if a.dtype == np.int8 else 0
        ap = buffer(np.uint8, mp * kp)
        return [(micro_int.pack_a8, (a, shift, rows, k, mp, kp, ap)),
                (fn, (addr, ap, packed, c, mr, mp, kp, np_, 4) + tiles),
                (micro_int.unpack8, (c, np_, rows, n, za, shift, sums, out))]

    def _b(self, ctx: RunContext, b, zb, n):
        cached = self._wide_b
        if cached is not None and cached[0] is b and cached[1] is zb:
            return cached[2]
        wide = np.empty(b.size, F32)
        forms, rows = _walk(_SHIFT, b.size, 1, n)
        forms.get(False, False)(b, np.zeros(1, b.dtype) if zb is None else zb, wide, 1, n, rows)
        self._wide_b = (b, zb, wide)
        return wide

    def product(self, ctx: RunContext, geo, out):
        """out = the product; ``geo`` from plan (geo[1] is N on both paths)."""
        if geo[0] == "tiles":
            make_calls(self.integer_calls(ctx, geo, out, lambda dt, n: scratch(ctx, dt, (n,))))
            return
        m, n, k, runs, b_const = geo
        ia, ib = self.IN
        za, zb = (ctx.flat_in[z] if len(ctx.flat_in) > z else None for z in self.ZP)
        a = shifted(ctx, ctx.flat_in[ia], za, k, m, F32)
        b = self._b(ctx, ctx.flat_in[ib], zb, n) if b_const else \
            shifted(ctx, ctx.flat_in[ib], zb, 1, n, F32)
        if not runs:
            out[...] = 0
            return
        acc = scratch(ctx, F32, (out.size,))
        for i, run in enumerate(runs):
            run(a, b, acc)
            _add_run(acc, out, i == 0)


class MatMulInteger(_IntegerProduct):
    def infer(self, ctx: InferContext) -> None:
        shape, geo = self.plan(ctx)
        ctx.set_output(0, I32, shape)
        ctx.prepared = geo

    def jit_calls(self, ctx: RunContext):
        """The integer path's calls, their scratch the run state's (the float path needs
        Python between its runs)."""
        geo = ctx.prepared
        if geo[0] != "tiles":
            return None
        return self.integer_calls(ctx, geo, ctx.flat_out[0],
                                  lambda dt, n: held_buffer(dt, (n,), ctx.held, "integer"))

    def run(self, ctx: RunContext) -> None:
        self.product(ctx, ctx.prepared, ctx.flat_out[0])


class Requantized:
    """The requantization step shared by QLinearMatMul and QLinearConv."""

    SCALES = (1, 4, 6)          # a/x scale, b/w scale, y scale
    Y_ZP = 7
    # set by passes/quantized.py for a QDQ group: a Relu absorbed (y >= y_zp), and a float
    # bias as the offset bias / y_scale added before rounding (float64 per channel)
    floor_at_zero_point = False
    offset = np.zeros(0, F64)

    def requant_plan(self, ctx, count, what):
        for i in self.SCALES:
            if ctx.dtype(i) not in SCALES:
                ctx.fail(f"scale input {i} of element type {ctx.dtype(i)} is not supported",
                         ErrorKind.UNSUPPORTED)
            size = math.prod(ctx.shape(i))
            if size != 1 and not (i == self.SCALES[1] and size == count):
                ctx.fail(f"scale input {i} of shape {list(ctx.shape(i))} must have one value"
                         + (f" (or one per {what})" if i == self.SCALES[1] else ""))
        out = ctx.dtype(self.Y_ZP) if ctx.has_input(self.Y_ZP) else ctx.dtype(0)
        if out not in (np.uint8, np.int8):
            ctx.fail(f"output type {out} is not supported", ErrorKind.UNSUPPORTED)
        values = [ctx.value(i) for i in self.SCALES]
        mult = None if any(v is None for v in values) else _multiplier(*values)
        return out, mult

    def requant_args(self, ctx, mult):
        """(multiplier, offset, y zero point, lowest, highest) of this run's requantization."""
        if mult is None:
            mult = _multiplier(*(ctx.inputs[i] for i in self.SCALES))
        out = ctx.flat_out[0]
        has_zp = len(ctx.flat_in) > self.Y_ZP and ctx.flat_in[self.Y_ZP] is not None
        zp = ctx.flat_in[self.Y_ZP] if has_zp else np.zeros(1, out.dtype)
        lo, hi, _ = RANGES[out.dtype]
        if self.floor_at_zero_point:
            lo = max(lo, int(zp[0]))
        return mult, self.offset, zp, lo, hi

    def requantize(self, ctx, acc, mult, inner, count):
        mult, off, zp, lo, hi = self.requant_args(ctx, mult)
        out = ctx.flat_out[0]
        forms, rows = _walk(_REQUANTIZE, out.size, inner, count)
        forms.get(ctx.exact, _par(out.size))(acc, mult, off, zp, out, inner, count, lo, hi,
                                             rows)


def _multiplier(a_scale, b_scale, y_scale) -> np.ndarray:
    """a_scale * b_scale / y_scale in the scales' type (numpy), as float64 values."""
    m = np.asarray(a_scale).reshape(-1) * np.asarray(b_scale).reshape(-1)
    return (m / np.asarray(y_scale).reshape(-1)).astype(F64)


class QLinearMatMul(_IntegerProduct, Requantized):
    ZP = (2, 5)
    IN = (0, 3)

    def infer(self, ctx: InferContext) -> None:
        shape, geo = self.plan(ctx)
        out, mult = self.requant_plan(ctx, geo[1], "column")
        ctx.set_output(0, out, shape)
        ctx.prepared = (geo, mult)

    def run(self, ctx: RunContext) -> None:
        geo, mult = ctx.prepared
        acc = scratch(ctx, I32, (ctx.flat_out[0].size,))
        self.product(ctx, geo, acc)
        self.requantize(ctx, acc, mult, 1, geo[1])
