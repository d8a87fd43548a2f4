"""DFT, STFT, the cosine windows (Hann, Hamming, Blackman) and MelWeightMatrix.

DFT of a line x[0..L-1] of complex values (a real input has zero imaginary parts):

    X[k] = sum_t x[t] exp(-2 pi i k t / L),    inverse: x[t] = 1/L sum_k X[k] exp(2 pi i k t / L)

The line is the input along ``axis`` (an attribute, default 1, before opset 20; then an
optional input, default -2), cut or zero-padded to L = dft_length (default: the axis extent;
2 (n - 1) for the IRFFT). The other axes are kept; the last holds (re, im), or re alone:

- forward, onesided=0: L bins; onesided=1 (real input only, RFFT): bins 0..L/2;
- inverse, onesided=0: L complex values; onesided=1 (complex input only, IRFFT): the L real
  values of the inverse of the Hermitian spectrum X[k] (k <= L/2), X[L-k] = conj X[k];
  the imaginary parts of X[0] and X[L/2] drop out, as in numpy's irfft.

The inverse is conj(DFT(conj X)) / L. Lines are transformed in complex128 whatever the
element type and rounded once to the output type (float16 through float32): a direct sum
over a table of exp(-2 pi i j / L) indexed by k t mod L for short lines, an iterative
radix-2 FFT when L is a power of two, Bluestein's chirp-z transform (a circular convolution
done with power-of-two FFTs) otherwise. The tables hold the exponentials of exactly reduced
integer angles, so large k t lose nothing; the error is a few float64 ulps of the line's
norm. Fast mode takes the tables' cos and sin from libm; exact mode from exactmath
(``cos_sin_turn``: 2 pi j / n reduced exactly in integers, each value within 0.51 ulp, exact
at multiples of a quarter turn). The sums then run in the one order written above (the direct
sum t ascending, the FFT's butterflies stage by stage), complex products as (ac - bd, ad + bc)
without FMA, each line on its own: the same bits at any thread count.

STFT: for batch b and frame f < (n - F) // frame_step + 1, the DFT (length F) of
signal[b, f frame_step + t] * window[t], t < F (F = frame_length, else the window's
length, else n; no window: ones); onesided (the default, real signals only) keeps bins
0..F/2. Output [batch, frames, bins, 2].

Windows, with N = size (periodic=1, the default) or size - 1 (symmetric), n < size:
    w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)
Hann (1/2, 1/2, 0), Hamming (25/46, 21/46, 0), Blackman (0.42, 0.5, 0.08); a symmetric
window of size 1 is [1]. Computed in float64, (a0 - a1 c1) + a2 c2, and converted to
``output_datatype`` (integer types truncate toward zero); exact mode takes c1 = cos(2 pi n / N)
and c2 = cos(2 pi (2n) / N) from exactmath's ``cos_sin_turn``, fast mode from libm.

MelWeightMatrix [dft_length // 2 + 1, num_mel_bins], built as onnx's reference builds it:
num_mel_bins + 2 edges e_j = mel^-1(mel(lower) + j (mel(upper) - mel(lower)) / (num_mel_bins
+ 2)), mel(f) = 2595 log10(1 + f / 700), each mapped to the bin floor((dft_length + 1) e_j
/ sample_rate); band i rises linearly from bin e_i (0) to e_{i+1} (1) and falls to e_{i+2}
(0) (a band of zero rise is 1 at its centre). Every edge must be a bin of the spectrum.
The edges' log1p, log and expm1 are numpy's in fast mode and exactmath's in exact mode (the
weights themselves are IEEE divisions).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit, prange

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..core.broadcast import PARALLEL_MIN
from ..core.floats import run_wide
from ..core.jit import Variants
from ..math import exactmath as _xm
from ..math.exactmath import cos_sin_turn

EXACT = False
TAU = 2.0 * math.pi
DIRECT, POW2, BLUESTEIN = 0, 1, 2
DIRECT_MAX = 32                 # lines shorter than this (not powers of two) use the direct sum
FORWARD, INVERSE, IRFFT = 0, 1, 2
DEFAULT = object()              # an optional length input that is absent
_INTS = frozenset({np.dtype(np.int32), np.dtype(np.int64)})
_C128 = np.dtype(np.complex128)


# ----------------------------------------------------------------------------- transforms

@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _roots(n, count):
    """w[j] = exp(-2 pi i j / n), j < count."""
    w = np.empty(count, np.complex128)
    for j in range(count):
        a = -TAU * j / n
        w[j] = complex(math.cos(a), math.sin(a))
    return w


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _chirp(n):
    """c[k] = exp(-pi i k^2 / n), with k^2 reduced modulo 2n first."""
    c = np.empty(n, np.complex128)
    for k in range(n):
        a = -math.pi * ((k * k) % (2 * n)) / n
        c[k] = complex(math.cos(a), math.sin(a))
    return c


def _roots_own(n, count):
    """_roots with exactmath's cos and sin of the exactly reduced angle j / n turns."""
    w = np.empty(count, np.complex128)
    for j in range(count):
        c, s = cos_sin_turn(j, n)
        w[j] = complex(c, 0.0 - s)
    return w


def _chirp_own(n):
    """_chirp with exactmath's cos and sin: k^2 / (2n) turns, k^2 reduced modulo 2n."""
    c = np.empty(n, np.complex128)
    for k in range(n):
        cs, sn = cos_sin_turn((k * k) % (2 * n), 2 * n)
        c[k] = complex(cs, 0.0 - sn)
    return c


# (named by a hash of exactmath's code they call, so its edits recompile them)
_ROOTS_EXACT = Variants(_roots_own, "dft_roots").get(True)
_CHIRP_EXACT = Variants(_chirp_own, "dft_chirp").get(True)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _fft_pow2(a, m, tw):
    """In-place forward DFT of a[:m], m a power of two, tw[j] = exp(-2 pi i j / m)."""
    j = 0
    for i in range(1, m):               # bit-reversed order
        bit = m >> 1
        while j & bit:
            j ^= bit
            bit >>= 1
        j |= bit
        if i < j:
            t = a[i]
            a[i] = a[j]
            a[j] = t
    size = 2
    while size <= m:
        half = size >> 1
        step = m // size
        for start in range(0, m, size):
            for k in range(half):
                v = a[start + k + half] * tw[k * step]
                u = a[start + k]
                a[start + k] = u + v
                a[start + k + half] = u - v
        size <<= 1


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False, error_model="numpy")
def _dft_line(buf, aux, n, kind, tw, chirp, filt):
    """buf[:n] = its forward DFT; aux is scratch of the plan's size."""
    if kind == POW2:
        _fft_pow2(buf, n, tw)
    elif kind == DIRECT:
        for k in range(n):
            acc = 0j
            idx = 0
            for t in range(n):
                acc += buf[t] * tw[idx]
                idx += k
                if idx >= n:
                    idx -= n
            aux[k] = acc
        for k in range(n):
            buf[k] = aux[k]
    else:
        # X[k] = c[k] sum_t (x[t] c[t]) conj(c[k - t]) since 2kt = k^2 + t^2 - (k - t)^2
        m = filt.size
        for t in range(n):
            aux[t] = buf[t] * chirp[t]
        for t in range(n, m):
            aux[t] = 0j
        _fft_pow2(aux, m, tw)
        for j in range(m):              # the inverse FFT as conj(FFT(conj(.))) / m
            aux[j] = (aux[j] * filt[j]).conjugate()
        _fft_pow2(aux, m, tw)
        for k in range(n):
            buf[k] = chirp[k] * aux[k].conjugate() / m


@functools.lru_cache(maxsize=16)
def fft_plan(n: int, exact: bool = False):
    """(kind, scratch length, twiddles, chirp, chirp filter spectrum) for lines of n; the
    tables from exactmath's cos and sin when ``exact``."""
    roots, chirps = (_ROOTS_EXACT, _CHIRP_EXACT) if exact else (_roots, _chirp)
    empty = np.zeros(1, _C128)
    if n & (n - 1) == 0:
        return POW2, n, roots(n, max(n // 2, 1)), empty, empty
    if n < DIRECT_MAX:
        return DIRECT, n, roots(n, n), empty, empty
    m = 1 << (2 * n - 2).bit_length()          # >= 2n - 1: the convolution does not wrap
    tw = roots(m, m // 2)
    chirp = chirps(n)
    filt = np.zeros(m, _C128)
    filt[:n] = chirp.conj()
    filt[m - n + 1:] = chirp[1:].conj()[::-1]
    _fft_pow2(filt, m, tw)
    return BLUESTEIN, m, tw, chirp, filt


def _lines(x, win, out, g, tw, chirp, filt, work, split, tasks):
    """Transforms g[14] lines of length L = g[11]. g = [inner, in_outer, in_inner, in_step,
    n_used, c_in, out_outer, out_inner, out_step, n_out, c_out, L, kind, mode, lines].
    Line o * inner + i reads its value k < n_used at x[o in_outer + i in_inner + k in_step]
    (re, then im when c_in = 2), times win[k] when win is not empty, and writes its bin
    k < n_out at out[o out_outer + i out_inner + k out_step] (re, then im when c_out = 2).
    The lines are split into ``split`` equal runs, the tasks (``tasks`` = ``split``: the count
    that the loop alone reads, core/tasks.py), each owning two scratch lines of ``work``."""
    inner, n_used, c_in, n_out, c_out = g[0], g[4], g[5], g[9], g[10]
    n, kind, mode, lines = g[11], g[12], g[13], g[14]
    half = n // 2
    width = work.size // (2 * split)
    per = (lines + split - 1) // split
    for t in prange(tasks):
        buf = work[2 * width * t:2 * width * t + width]
        aux = work[2 * width * t + width:2 * width * (t + 1)]
        for line in range(t * per, min(lines, (t + 1) * per)):
            o = line // inner
            i = line - o * inner
            src = o * g[1] + i * g[2]
            dst = o * g[6] + i * g[7]
            for k in range(n):
                s = k
                if mode == IRFFT and k > half:
                    s = n - k
                if s >= n_used:
                    buf[k] = 0j
                    continue
                p = src + s * g[3]
                re = np.float64(x[p])
                im = np.float64(x[p + 1]) if c_in == 2 else 0.0
                if win.size:
                    re *= np.float64(win[s])
                    im *= np.float64(win[s])
                if mode == IRFFT and k > half:
                    im = -im
                if mode != FORWARD:
                    im = -im
                buf[k] = complex(re, im)
            _dft_line(buf, aux, n, kind, tw, chirp, filt)
            for k in range(n_out):
                v = buf[k]
                q = dst + k * g[8]
                if mode == FORWARD:
                    out[q] = v.real
                    if c_out == 2:
                        out[q + 1] = v.imag
                else:
                    out[q] = v.real / n
                    if c_out == 2:
                        out[q + 1] = -v.imag / n


_LINES = Variants(_lines, "dft_lines", parallel=True)


def _prepare(geom: list, n: int, exact: bool) -> tuple:
    """What run needs to transform lines of length n described by ``geom``."""
    kind, width, tw, chirp, filt = fft_plan(n, exact)
    lines = geom[-1]
    parallel = lines > 1 and lines * width >= PARALLEL_MIN // 16
    tasks = min(lines, 64) if parallel else 1
    g = np.array(geom[:12] + [kind] + geom[12:], np.int64)
    return (g, tw, chirp, filt, width, tasks, _LINES.get(exact, parallel))


def _transform(ctx: RunContext, x, win, out, prepared) -> None:
    g, tw, chirp, filt, width, tasks, fn = prepared
    if g[14]:
        work = scratch(ctx, _C128, (2 * width * tasks,))
        fn(x, win, out, g, tw, chirp, filt, work, tasks, tasks)


def _scalar(ctx: InferContext, i: int, what: str):
    """A one-element integer input as an int; None when its value is not known yet."""
    ctx.check_dtype(i, _INTS, f" ({what})")
    v = ctx.value(i)
    if v is None:
        return None
    if v.size != 1:
        ctx.bad_input(f"{what} must be a scalar, got shape {list(v.shape)}")
    return int(v.reshape(-1)[0])


def _complex_shape(ctx: InferContext, shape, rank: int | None = None):
    if len(shape) < 2 or shape[-1] not in (1, 2) or (rank and len(shape) != rank):
        want = f"rank {rank}" if rank else "rank 2 or more"
        ctx.fail(f"the signal must have {want} and a last extent of 1 (real) or 2 (complex), "
                 f"got shape {list(shape)}")


class DFT(OpKernel):
    """The discrete Fourier transform along one axis (module docstring)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.inverse = bool(node.attr("inverse", 0))
        self.onesided = bool(node.attr("onesided", 0))
        self.axis_input = node.opset >= 20
        self.axis = -2 if self.axis_input else int(node.attr("axis", 1))

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _dt.FLOATS)
        shape = tuple(ctx.shape(0))
        _complex_shape(ctx, shape)
        r, c_in = len(shape), shape[-1]
        axis = self.axis
        if self.axis_input and ctx.has_input(2):
            axis = _scalar(ctx, 2, "axis")
        n = _scalar(ctx, 1, "dft_length") if ctx.has_input(1) else DEFAULT
        if axis is None or n is None:
            ctx.require_run_time_values()
            return
        if not (-r <= axis <= -2 or 0 <= axis <= r - 2):
            why = f"axis {axis} is not a signal axis of a rank-{r} input"
            if self.axis_input:
                ctx.bad_input(why)
            ctx.fail(why)
        axis %= r
        n_in = shape[axis]
        irfft = self.inverse and self.onesided
        if self.onesided and c_in != (2 if self.inverse else 1):
            ctx.fail("onesided=1 needs a real input (last extent 1) for the forward transform "
                     "and a complex one (last extent 2) for the inverse")
        if n is DEFAULT:
            n = 2 * (n_in - 1) if irfft else n_in
        if n < 1:
            ctx.bad_input(f"the DFT length must be at least 1, got {n}")
        n_out = n // 2 + 1 if self.onesided and not self.inverse else n
        c_out = 1 if irfft else 2
        out_shape = shape[:axis] + (n_out,) + shape[axis + 1:-1] + (c_out,)
        ctx.set_output(0, dt, out_shape)
        inner = math.prod(shape[axis + 1:-1])
        lines = math.prod(shape[:axis]) * inner
        n_used = n_in if irfft else min(n_in, n)
        mode = IRFFT if irfft else INVERSE if self.inverse else FORWARD
        geom = [inner, n_in * inner * c_in, c_in, inner * c_in, n_used, c_in,
                n_out * inner * c_out, c_out, inner * c_out, n_out, c_out, n, mode, lines]
        ctx.prepared = _prepare(geom, n, ctx.exact)

    def run(self, ctx: RunContext) -> None:
        run_wide(ctx, lambda ins, outs: _transform(ctx, ins[0], ins[0][:0], outs[0],
                                                    ctx.prepared))


class STFT(OpKernel):
    """The short-time Fourier transform (module docstring)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.onesided = bool(node.attr("onesided", 1))

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _dt.FLOATS)
        shape = tuple(ctx.shape(0))
        _complex_shape(ctx, shape, 3)
        batch, length, c_in = shape
        if self.onesided and c_in == 2:
            ctx.fail("onesided=1 (the default) needs a real signal; set onesided=0")
        step = _scalar(ctx, 1, "frame_step")
        frame = _scalar(ctx, 3, "frame_length") if ctx.has_input(3) else DEFAULT
        if step is None or frame is None:
            ctx.require_run_time_values()
            return
        if ctx.has_input(2):
            if ctx.dtype(2) != dt or len(ctx.shape(2)) != 1:
                ctx.fail(f"the window must be a 1-D tensor of the signal's type, got "
                         f"{_dt.name_of(ctx.dtype(2))} {list(ctx.shape(2))}")
            if frame is DEFAULT:
                frame = ctx.shape(2)[0]
            elif ctx.shape(2)[0] != frame:
                ctx.bad_input(f"the window has {ctx.shape(2)[0]} values, frame_length is {frame}")
        if frame is DEFAULT:
            frame = length
        if step < 1 or frame < 1 or frame > length:
            ctx.bad_input(f"frame_step {step} and frame_length {frame} do not fit a signal of "
                          f"{length} samples")
        frames = (length - frame) // step + 1
        bins = frame // 2 + 1 if self.onesided else frame
        ctx.set_output(0, dt, (batch, frames, bins, 2))
        geom = [frames, length * c_in, step * c_in, c_in, frame, c_in,
                frames * bins * 2, bins * 2, 2, bins, 2, frame, FORWARD, batch * frames]
        ctx.prepared = _prepare(geom, frame, ctx.exact)

    def run(self, ctx: RunContext) -> None:
        def body(ins, outs):
            win = ins[2] if len(ins) > 2 and ins[2] is not None else ins[0][:0]
            _transform(ctx, ins[0], win, outs[0], ctx.prepared)
        run_wide(ctx, body)


# ----------------------------------------------------------------------------- generators

def _output_type(node, default: int = 1) -> np.dtype:
    code = int(node.attr("output_datatype", default))
    try:
        dt = _dt.to_numpy(code)
    except (KeyError, ValueError):
        dt = None
    if dt not in _dt.NUMERIC:
        node.fail(f"output_datatype {_dt.name_of_code(code)} is not supported",
                  ErrorKind.UNSUPPORTED)
    return dt


def _emit(ctx: RunContext, fill, *args) -> None:
    """fill(values64, *args) computes float64 values; they are converted to the output."""
    out = ctx.flat_out[0]
    values = out if out.dtype == np.float64 else scratch(ctx, np.float64, out.shape)
    fill(values, *args)
    if values is not out:
        np.copyto(out, values, casting="unsafe")


def _cosine_window(w, a0, a1, a2, period):
    for k in range(w.size):
        if EXACT:
            j, n = k, period
            if period == 0:             # size 1, symmetric: the centre (half a turn)
                j, n = 1, 2
            c1 = cos_sin_turn(j, n)[0]
            c2 = cos_sin_turn(2 * j, n)[0]
        else:
            a = TAU * k / period if period else math.pi     # size 1, symmetric: the centre
            c1 = math.cos(a)
            c2 = math.cos(2.0 * a)
        w[k] = a0 - a1 * c1 + a2 * c2


_WINDOW = Variants(_cosine_window, "cosine_window")


class _Window(OpKernel):
    """w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) (module docstring)."""

    supports_exact = True

    COEFFS = (0.5, 0.5, 0.0)

    def __init__(self, node):
        super().__init__(node)
        self.periodic = bool(node.attr("periodic", 1))
        self.dtype = _output_type(node)

    def infer(self, ctx: InferContext) -> None:
        size = _scalar(ctx, 0, "size")
        if size is None:
            ctx.require_run_time_values()
            return
        if size < 0:
            ctx.bad_input(f"the window size must not be negative, got {size}")
        ctx.set_output(0, self.dtype, (size,))
        period = size if self.periodic else size - 1
        ctx.prepared = (period, _WINDOW.get(ctx.exact))

    def run(self, ctx: RunContext) -> None:
        period, fn = ctx.prepared
        _emit(ctx, fn, *self.COEFFS, period)


class HannWindow(_Window):
    COEFFS = (0.5, 0.5, 0.0)


class HammingWindow(_Window):
    COEFFS = (25.0 / 46.0, 21.0 / 46.0, 0.0)


class BlackmanWindow(_Window):
    COEFFS = (0.42, 0.5, 0.08)


def _mel_bands(w, edges, bands):
    """w is [bins, bands] row-major; band i spans bins edges[i]..edges[i+2]."""
    for k in range(w.size):
        w[k] = 0.0
    for i in range(bands):
        lo, mid, hi = edges[i], edges[i + 1], edges[i + 2]
        if mid == lo:
            w[mid * bands + i] = 1.0
        else:
            for j in range(lo, mid + 1):
                w[j * bands + i] = (j - lo) / (mid - lo)
        for j in range(mid, hi):
            w[j * bands + i] = (hi - j) / (hi - mid)


_MEL = Variants(_mel_bands, "mel_bands")


def _exact_ufunc(fn):
    """An exactmath scalar function over a float64 scalar or array (plan-time use only)."""
    def apply(v):
        a = np.asarray(v, np.float64)
        out = np.array([fn(x) for x in a.reshape(-1)], np.float64).reshape(a.shape)
        return out if a.ndim else np.float64(out)
    return apply


class MelWeightMatrix(OpKernel):
    """Triangular mel filters over a one-sided spectrum (module docstring)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        self.dtype = _output_type(node)

    def infer(self, ctx: InferContext) -> None:
        bands = _scalar(ctx, 0, "num_mel_bins")
        n = _scalar(ctx, 1, "dft_length")
        rate = _scalar(ctx, 2, "sample_rate")
        edges_hz = []
        for i, what in ((3, "lower_edge_hertz"), (4, "upper_edge_hertz")):
            ctx.check_dtype(i, _dt.FLOATS, f" ({what})")
            v = ctx.value(i)
            if v is not None and v.size != 1:
                ctx.bad_input(f"{what} must be a scalar, got shape {list(v.shape)}")
            edges_hz.append(None if v is None else float(v.reshape(-1)[0]))
        if None in (bands, n, rate, *edges_hz):
            ctx.require_run_time_values()
            return
        if bands < 0 or n < 1 or rate < 1:
            ctx.bad_input(f"num_mel_bins {bands}, dft_length {n} and sample_rate {rate} must be "
                          "positive")
        bins = n // 2 + 1
        log1p, log, expm1 = (_exact_ufunc(_xm.log1p), _exact_ufunc(_xm.log),
                             _exact_ufunc(_xm.expm1)) if ctx.exact else (np.log1p, np.log,
                                                                         np.expm1)
        with np.errstate(all="ignore"):
            ln10 = log(np.float64(10.0))
            lo, hi = (2595.0 * log1p(np.float64(f) / 700.0) / ln10 for f in edges_hz)
            mel = np.arange(bands + 2) * ((hi - lo) / (bands + 2)) + lo
            hz = 700.0 * expm1(mel / 2595.0 * ln10)
            edges = np.floor((n + 1) * hz / rate)
        if not (np.isfinite(edges).all() and (edges >= 0).all() and (edges < bins).all()):
            ctx.bad_input(f"the band edges {edges_hz[0]} Hz to {edges_hz[1]} Hz do not fall in "
                          f"the {bins} bins of a {n}-point spectrum at {rate} Hz")
        ctx.set_output(0, self.dtype, (bins, bands))
        ctx.prepared = (edges.astype(np.int64), bands, _MEL.get(ctx.exact))

    def run(self, ctx: RunContext) -> None:
        edges, bands, fn = ctx.prepared
        _emit(ctx, fn, edges, bands)
