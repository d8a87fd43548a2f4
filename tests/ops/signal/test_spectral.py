"""DFT, STFT, the windows and MelWeightMatrix (signal/spectral.py) through graphrt.Session,
compared with a direct float64 DFT (the slow, obvious oracle) and with onnx's reference
evaluator."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind, SessionOptions

from ...helpers import fails, rand, reference, run


# ----------------------------------------------------------------------------- oracle

def direct_dft(x, n, inverse=False):
    """The DFT of length n along the last axis of complex x (cut or zero-padded)."""
    padded = np.zeros(x.shape[:-1] + (n,), np.complex128)
    m = min(n, x.shape[-1])
    padded[..., :m] = x[..., :m]
    k = np.arange(n)
    w = np.exp((2j if inverse else -2j) * np.pi * np.outer(k, k) / n)
    y = padded @ w.T
    return y / n if inverse else y


def as_complex(a, axis):
    """[..., 1 or 2] -> complex128 with ``axis`` moved last."""
    c = a[..., 0].astype(np.float64) + (1j * a[..., 1] if a.shape[-1] == 2 else 0)
    return np.moveaxis(c, axis, -1)


def check_close(got, want, axis, tol=1e-5):
    """got [..., 2] against complex want (transform axis last), relative to the largest."""
    g = as_complex(got, axis) if got.shape[-1] == 2 else np.moveaxis(got[..., 0], axis, -1)
    assert g.shape == want.shape, (g.shape, want.shape)
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    assert np.abs(g - want).max(initial=0) <= tol * scale


# ----------------------------------------------------------------------------- DFT

@pytest.mark.parametrize("length", [1, 2, 10, 16, 31, 37, 100])   # direct, radix 2, Bluestein
@pytest.mark.parametrize("inverse", [0, 1])
def test_dft_complex_lengths(length, inverse):
    x = rand((3, length, 2), seed=length)
    got = run("DFT", [x, None, np.array(1, np.int64)], {"inverse": inverse}, opset=20,
              consts=(2,))[0]
    assert got.shape == (3, length, 2) and got.dtype == np.float32
    check_close(got, direct_dft(as_complex(x, 1), length, bool(inverse)), 1)


@pytest.mark.parametrize("n", [5, 12, 40])          # cut, padded, padded to Bluestein
def test_dft_length_input_cuts_or_pads(n):
    x = rand((2, 8, 1))
    got = run("DFT", [x, np.array(n, np.int32)], opset=20, consts=(1,))[0]
    assert got.shape == (2, n, 2)
    check_close(got, direct_dft(as_complex(x, 1), n), 1)


@pytest.mark.parametrize("opset,axis,how", [(17, 1, "attr"), (17, -3, "attr"), (19, 2, "attr"),
                                            (20, 0, "input"), (20, -2, "input"),
                                            (20, None, "default")])
def test_dft_axis_forms(opset, axis, how):
    x = rand((4, 5, 6, 1))
    attrs = {"axis": axis} if how == "attr" else {}
    inputs = [x, None, np.array(axis, np.int64)] if how == "input" else [x]
    got = run("DFT", inputs, attrs, opset=opset)[0]      # the axis input is a graph input
    a = {None: 2}.get(axis, axis) % 4
    check_close(got, direct_dft(as_complex(x, a), x.shape[a]), a)
    want = reference("DFT", inputs, attrs, opset=opset)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("length", [1, 7, 10, 64])
def test_rfft_keeps_half_the_bins(length):
    x = rand((3, length, 1))
    got = run("DFT", [x], {"onesided": 1}, opset=20)[0]
    assert got.shape == (3, length // 2 + 1, 2)
    check_close(got, np.fft.rfft(x[..., 0].astype(np.float64), axis=1), 1)


@pytest.mark.parametrize("n", [None, 9, 10, 4, 21])
def test_irfft_of_a_half_spectrum(n):
    spectrum = np.fft.rfft(rand((2, 10)).astype(np.float64), axis=1)    # 6 bins
    x = np.stack([spectrum.real, spectrum.imag], -1).astype(np.float32)
    x[:, 0, 1] = 5.0                   # the imaginary part of the DC bin drops out
    inputs = [x] if n is None else [x, np.array(n, np.int64)]
    got = run("DFT", inputs, {"onesided": 1, "inverse": 1}, opset=20, consts=(1,))[0]
    want = np.fft.irfft(x[..., 0].astype(np.float64) + 1j * x[..., 1], n=n, axis=1)
    assert got.shape == want.shape + (1,)
    np.testing.assert_allclose(got[..., 0], want, atol=1e-5)


def test_dft_inverse_undoes_forward_and_real_input_inverse():
    x = rand((2, 37, 1), np.float64)
    y = run("DFT", [x], opset=20)[0]
    back = run("DFT", [y], {"inverse": 1}, opset=20)[0]
    np.testing.assert_allclose(back[..., 0], x[..., 0], atol=1e-12)
    np.testing.assert_allclose(back[..., 1], 0, atol=1e-12)
    inv = run("DFT", [x], {"inverse": 1}, opset=20)[0]
    check_close(inv, direct_dft(as_complex(x, 1), 37, True), 1, tol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_dft_float16_and_float64(dtype):
    x = rand((2, 12, 2), dtype)
    got = run("DFT", [x], opset=20)[0]
    assert got.dtype == dtype
    tol = 2e-3 if dtype == np.float16 else 1e-12
    check_close(got, direct_dft(as_complex(x, 1), 12), 1, tol)


def test_dft_parallel_lines_match_the_oracle():
    x = rand((96, 6, 60, 1))            # 576 lines of a Bluestein length: a parallel launch
    got = run("DFT", [x], {"axis": 3 - 1}, opset=17)[0]
    check_close(got, direct_dft(as_complex(x, 2), 60), 2)
    again = run("DFT", [x], {"axis": 2}, opset=17, options=SessionOptions(intra_op_threads=1))[0]
    np.testing.assert_array_equal(got, again)


def test_dft_empty_inputs():
    assert run("DFT", [np.zeros((0, 8, 1), np.float32)], opset=20)[0].shape == (0, 8, 2)
    zero_len = run("DFT", [np.zeros((2, 0, 2), np.float32), np.array(4, np.int64)],
                   opset=20, consts=(1,))[0]
    np.testing.assert_array_equal(zero_len, np.zeros((2, 4, 2), np.float32))


def test_dft_errors():
    x = rand((2, 8, 2))
    assert "onesided" in fails(ErrorKind.INVALID_MODEL, "DFT", [x], {"onesided": 1}, opset=20)
    fails(ErrorKind.INVALID_MODEL, "DFT", [rand((2, 8, 1))], {"onesided": 1, "inverse": 1},
          opset=20)
    fails(ErrorKind.INVALID_MODEL, "DFT", [rand((2, 8, 3))], opset=20)
    fails(ErrorKind.INVALID_MODEL, "DFT", [x], {"axis": 2}, opset=17)
    fails(ErrorKind.INVALID_INPUT, "DFT", [x, None, np.array(-1, np.int64)], opset=20)
    fails(ErrorKind.INVALID_INPUT, "DFT", [x, np.array(0, np.int64)], opset=20)
    fails(ErrorKind.INVALID_INPUT, "DFT", [x, np.array(-3, np.int64)], opset=20)
    fails(ErrorKind.INVALID_INPUT, "DFT", [x, np.array([3, 4], np.int64)], opset=20)
    fails(ErrorKind.INVALID_INPUT, "DFT", [rand((2, 1, 2)), np.array(0, np.int64)],
          {"onesided": 1, "inverse": 1}, opset=20)
    fails(ErrorKind.UNSUPPORTED, "DFT", [x.astype(np.int32)], opset=20)


# ----------------------------------------------------------------------------- exact mode

EXACT1 = SessionOptions(mode="exact", intra_op_threads=1)
EXACT2 = SessionOptions(mode="exact", intra_op_threads=2)


@pytest.mark.parametrize("length", [10, 64, 37])     # direct, radix 2, Bluestein
def test_dft_exact_mode_same_bits_at_1_and_2_threads(length):
    """Exact mode: the oracle's values (the twiddles within 0.51 ulp: a few float64 ulps of
    the line's norm), and the same bits at 1 and 2 threads over enough lines for a parallel
    launch, forward and inverse, float32 and float64."""
    for dtype, tol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        x = rand((4096 // length + 1, length, 2), dtype, seed=length)
        for inverse in (0, 1):
            got = run("DFT", [x], {"inverse": inverse}, opset=20, options=EXACT1)[0]
            check_close(got, direct_dft(as_complex(x, 1), length, bool(inverse)), 1, tol)
            again = run("DFT", [x], {"inverse": inverse}, opset=20, options=EXACT2)[0]
            assert np.array_equal(got.view(np.uint8), again.view(np.uint8))


def test_stft_exact_mode():
    x = rand((3, 700, 1), seed=5)
    inputs = [x, np.array(6, np.int64), np.hanning(48).astype(np.float32)]
    got = run("STFT", inputs, opset=17, consts=(1,), options=EXACT1)[0]
    want = stft_oracle(x, 6, 48, inputs[2])
    check_close(got.reshape(-1, want.shape[-1], 2), want.reshape(-1, want.shape[-1]), 1)
    again = run("STFT", inputs, opset=17, consts=(1,), options=EXACT2)[0]
    np.testing.assert_array_equal(got.view(np.uint32), again.view(np.uint32))


# ----------------------------------------------------------------------------- STFT

def stft_oracle(signal, step, frame, window=None, onesided=True):
    window = np.ones(frame) if window is None else window.astype(np.float64)
    sig = as_complex(signal, 1)
    frames = (sig.shape[1] - frame) // step + 1
    cut = np.stack([sig[:, f * step:f * step + frame] * window for f in range(frames)], 1)
    y = direct_dft(cut, frame)
    return y[..., :frame // 2 + 1] if onesided else y


@pytest.mark.parametrize("step,frame,with_window", [(5, 12, False), (3, None, True),
                                                    (7, 12, True), (1, None, False)])
def test_stft_real_signal(step, frame, with_window):
    x = rand((2, 50, 1))
    window = np.hanning(12).astype(np.float32) if with_window else None
    inputs = [x, np.array(step, np.int64), window,
              None if frame is None else np.array(frame, np.int64)]
    got = run("STFT", inputs, opset=17, consts=(1, 3), trim=True)[0]
    f = frame or (12 if with_window else 50)
    want = stft_oracle(x, step, f, window)
    assert got.shape == want.shape + (2,)
    check_close(got.reshape(-1, want.shape[-1], 2), want.reshape(-1, want.shape[-1]), 1)


def test_stft_complex_two_sided_and_reference():
    x = rand((2, 40, 2))
    w = np.hamming(8).astype(np.float32)
    got = run("STFT", [x, np.array(4, np.int64), w], {"onesided": 0}, opset=17)[0]
    want = stft_oracle(x, 4, 8, w, onesided=False)
    check_close(got.reshape(-1, 8, 2), want.reshape(-1, 8), 1)
    real = rand((1, 64, 1))
    inputs = [real, np.array(8, np.int64), None, np.array(16, np.int64)]
    np.testing.assert_allclose(run("STFT", inputs, opset=17)[0],
                               reference("STFT", inputs, opset=17), rtol=1e-4, atol=1e-4)


def test_stft_float16():
    x = rand((1, 32, 1), np.float16)
    got = run("STFT", [x, np.array(8, np.int64), None, np.array(8, np.int64)], opset=17)[0]
    assert got.dtype == np.float16 and got.shape == (1, 4, 5, 2)
    check_close(got.reshape(-1, 5, 2), stft_oracle(x, 8, 8).reshape(-1, 5), 1, 2e-3)


def test_stft_errors():
    x = rand((1, 20, 1))
    step = np.array(4, np.int64)
    fails(ErrorKind.INVALID_MODEL, "STFT", [rand((1, 20, 2)), step], opset=17)
    fails(ErrorKind.INVALID_MODEL, "STFT", [rand((20, 1)), step], opset=17)
    fails(ErrorKind.INVALID_INPUT, "STFT", [x, step, np.ones(6, np.float32),
                                            np.array(8, np.int64)], opset=17)
    fails(ErrorKind.INVALID_INPUT, "STFT", [x, step, None, np.array(21, np.int64)], opset=17)
    fails(ErrorKind.INVALID_INPUT, "STFT", [x, np.array(0, np.int64)], opset=17)
    fails(ErrorKind.INVALID_INPUT, "STFT", [x, step, None, np.array(-1, np.int64)], opset=17)
    fails(ErrorKind.INVALID_MODEL, "STFT", [x, step, np.ones(6, np.float64)], opset=17)


# ----------------------------------------------------------------------------- windows

WINDOWS = {"HannWindow": (0.5, 0.5, 0.0), "HammingWindow": (25 / 46, 21 / 46, 0.0),
           "BlackmanWindow": (0.42, 0.5, 0.08)}


@pytest.mark.parametrize("op", sorted(WINDOWS))
@pytest.mark.parametrize("periodic", [1, 0])
def test_windows(op, periodic):
    size = np.array(11, np.int64)
    got = run(op, [size], {"periodic": periodic}, opset=17)[0]
    a0, a1, a2 = WINDOWS[op]
    n = np.arange(11) / (11 if periodic else 10)
    want = a0 - a1 * np.cos(2 * np.pi * n) + a2 * np.cos(4 * np.pi * n)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-7)
    ref = reference(op, [size.astype(np.int32)], {"periodic": periodic}, opset=17)
    np.testing.assert_allclose(got, ref, atol=1e-6)


def test_window_types_and_sizes():
    f64 = run("HannWindow", [np.array(6, np.int32)], {"output_datatype": 11}, opset=17)[0]
    assert f64.dtype == np.float64
    np.testing.assert_allclose(f64, np.hanning(7)[:6], atol=1e-15)
    for code, dt in ((6, np.int32), (2, np.uint8)):       # truncated toward zero
        ints = run("HannWindow", [np.array(5, np.int32)], {"output_datatype": code,
                                                           "periodic": 0}, opset=17)[0]
        assert ints.dtype == dt
        np.testing.assert_array_equal(ints, [0, 0, 1, 0, 0])
    half = run("BlackmanWindow", [np.array(4, np.int64)], {"output_datatype": 10}, opset=17)[0]
    assert half.dtype == np.float16
    assert run("HannWindow", [np.array(0, np.int64)], opset=17)[0].shape == (0,)
    one = run("HannWindow", [np.array(1, np.int64)], {"periodic": 0}, opset=17)[0]
    np.testing.assert_array_equal(one, [1.0])
    folded = run("HannWindow", [np.array(8, np.int64)], opset=17, consts=(0,))[0]
    np.testing.assert_array_equal(folded, run("HannWindow", [np.array(8, np.int64)], opset=17)[0])
    fails(ErrorKind.INVALID_INPUT, "HannWindow", [np.array(-1, np.int64)], opset=17)
    fails(ErrorKind.UNSUPPORTED, "HannWindow", [np.array(3, np.int64)], {"output_datatype": 8},
          opset=17)
    fails(ErrorKind.UNSUPPORTED, "HannWindow", [np.array(3.0, np.float32)], opset=17)


@pytest.mark.parametrize("op", sorted(WINDOWS))
def test_windows_exact_mode(op):
    """Exact mode: float64 windows within 1.2 * 2**-52 of the exact formula (mpmath, the
    same double coefficients; each cosine within 0.51 ulp, then three roundings), exact at
    the quarter turns (a periodic Hann window of 8 is 0, .., 0.5, .., 1, .. with exact 0,
    0.5 and 1), and float32 the rounded float64 window."""
    mp = pytest.importorskip("mpmath").mp
    a0, a1, a2 = WINDOWS[op]
    for size, periodic in ((8, 1), (11, 0), (1000, 1), (1, 0)):
        attrs = {"periodic": periodic, "output_datatype": 11}
        got = run(op, [np.array(size, np.int64)], attrs, opset=17, options=EXACT1)[0]
        period = (size if periodic else size - 1) or 2
        k = range(size) if size > 1 or periodic else [1]
        with mp.workprec(120):
            want = np.array([float(mp.mpf(a0) - a1 * mp.cos(2 * mp.pi * j / period)
                                   + a2 * mp.cos(4 * mp.pi * j / period)) for j in k])
        np.testing.assert_allclose(got, want, rtol=0, atol=1.2 * 2.0 ** -52)
        f32 = run(op, [np.array(size, np.int64)], {"periodic": periodic}, opset=17,
                  options=EXACT2)[0]
        np.testing.assert_array_equal(f32, got.astype(np.float32))
    hann = run("HannWindow", [np.array(8, np.int64)], {"output_datatype": 11}, opset=17,
               options=EXACT1)[0]
    assert hann[0] == 0 and hann[2] == 0.5 and hann[4] == 1 and hann[6] == 0.5


# ----------------------------------------------------------------------------- MelWeightMatrix

@pytest.mark.parametrize("bands,n,rate,lo,hi", [(8, 16, 8192, 0.0, 4096.0),
                                                (10, 64, 16000, 20.0, 7600.0),
                                                (4, 9, 1000, 100.0, 400.0),
                                                (0, 8, 100, 0.0, 50.0)])
def test_mel_weight_matrix_matches_reference(bands, n, rate, lo, hi):
    inputs = [np.array(bands, np.int32), np.array(n, np.int32), np.array(rate, np.int32),
              np.array(lo, np.float32), np.array(hi, np.float32)]
    got = run("MelWeightMatrix", inputs, opset=17)[0]
    want = reference("MelWeightMatrix", inputs, opset=17)
    assert got.shape == (n // 2 + 1, bands) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-7)
    f64 = run("MelWeightMatrix", inputs, {"output_datatype": 11}, opset=17)[0]
    assert f64.dtype == np.float64
    np.testing.assert_allclose(f64, want, atol=1e-7)
    exact = run("MelWeightMatrix", inputs, opset=17, options=EXACT1)[0]     # exactmath's logs
    np.testing.assert_array_equal(exact, got)


def test_mel_weight_matrix_errors():
    inputs = [np.array(8, np.int64), np.array(16, np.int64), np.array(8000, np.int64),
              np.array(0.0, np.float32), np.array(6000.0, np.float32)]      # above Nyquist
    assert "bins" in fails(ErrorKind.INVALID_INPUT, "MelWeightMatrix", inputs, opset=17)
    inputs[4] = np.array(np.nan, np.float32)
    fails(ErrorKind.INVALID_INPUT, "MelWeightMatrix", inputs, opset=17)
    inputs[4], inputs[1] = np.array(100.0, np.float32), np.array(0, np.int64)
    fails(ErrorKind.INVALID_INPUT, "MelWeightMatrix", inputs, opset=17)
