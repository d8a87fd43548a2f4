"""graphrt's own transcendental functions (graphrt/kernels/math/exactmath.py): accuracy in ulps
against mpmath, special values, the same bits on numba's generic x86-64 target (a separate
process with its own cache: the forced "generic" kernel path) without libm calls or FMA in the
generated code, and the same bits from the exact operators at 1 and 2 threads."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from graphrt.kernels.math import exactmath as xm

from ...helpers import assert_same_arrays, generic_cpu_bits

mp = pytest.importorskip("mpmath").mp

# Max error (ulps) of float64 results measured over 20,000 random and edge values per function
# (erf 0.84, erfc 0.79, gelu 0.82, tanh 0.60, expm1 0.54, the others at most 0.504), with a
# small margin. float32 results are computed in float64 and rounded once: 0.5 ulp + 2**-20.
BOUND64 = {"exp": 0.52, "expm1": 0.56, "log": 0.51, "log1p": 0.52, "tanh": 0.62,
           "sigmoid": 0.52, "erf": 0.9, "erfc": 0.85, "softplus": 0.52, "mish": 0.52,
           "gelu": 0.88, "gelu_tanh": 0.52, "swish": 0.52, "pow": 0.55,
           "sin": 0.52, "cos": 0.52, "tan": 0.52, "asin": 0.52, "acos": 0.52, "atan": 0.52,
           "sinh": 0.52, "cosh": 0.52, "asinh": 0.52, "acosh": 0.52, "atanh": 0.52}
BOUND32 = 0.5 + 2.0 ** -20
SUBNORMAL_BOUND = 1.0       # float64 results below 2**-1022 (their scaling rounds twice)


def _sigmoid(x):
    return 1 / (1 + mp.exp(-x))


def _gelu_tanh(x):      # x/2 (1 + tanh u) = x / (1 + exp(-2u)), exactly
    return x / (1 + mp.exp(-2 * mp.sqrt(2 / mp.pi) * (x + mp.mpf("0.044715") * x ** 3)))


REFERENCE = {
    "exp": mp.exp, "expm1": mp.expm1, "log": mp.log, "log1p": mp.log1p, "tanh": mp.tanh,
    "sigmoid": _sigmoid, "erf": mp.erf, "erfc": mp.erfc,
    "softplus": lambda x: mp.log1p(mp.exp(x)),
    "mish": lambda x: x * mp.tanh(mp.log1p(mp.exp(x))),
    "gelu": lambda x: x / 2 * mp.erfc(-x / mp.sqrt(2)),
    "gelu_tanh": _gelu_tanh,
    "sin": mp.sin, "cos": mp.cos, "tan": mp.tan, "asin": mp.asin, "acos": mp.acos,
    "atan": mp.atan, "sinh": mp.sinh, "cosh": mp.cosh, "asinh": mp.asinh, "acosh": mp.acosh,
    "atanh": mp.atanh,
}
TRIG = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")
# where the samples come from: uniform (lo, hi) for float64; float32 samples are clipped to
# float32's range of the function
DOMAIN = {"exp": (-745.2, 709.8), "expm1": (-50, 709.7), "log": None, "log1p": None,
          "tanh": (-25, 25), "sigmoid": (-750, 40), "erf": (-7, 7), "erfc": (-7, 28),
          "softplus": (-750, 50), "mish": (-750, 30), "gelu": (-40, 12), "gelu_tanh": (-25, 12)}
DOMAIN32 = {"exp": (-104, 88.8), "expm1": (-20, 88.7), "sigmoid": (-104, 20),
            "erfc": (-7, 10.1), "softplus": (-104, 90), "mish": (-104, 30), "gelu": (-15, 10),
            "gelu_tanh": (-12, 10)}


# doubles x (random k) nearest k pi/2, and the double nearest a multiple of pi/2 (relative to
# its size: x mod pi/2 = 4.7e-19)
HARD_TRIG = [6381956970095103 * 2.0 ** 797, 5 * 2.0 ** 1020, 1.5707963267948966, 1e22, 1e300,
             1.7976931348623157e308, 355.0, 103993.0, 2.0 ** 19, 2.0 ** 20, 1e6, 1e6 - 0.5]


def _trig_samples(name, dtype, n, rng, small):
    sign = rng.choice([-1.0, 1.0], n)
    big = 38 if dtype == np.float32 else 308
    if name in ("sin", "cos", "tan"):
        k = np.floor(10.0 ** rng.uniform(0, 6, n // 4))
        return [rng.uniform(-10, 10, n), rng.uniform(-1e6, 1e6, n // 2),
                sign * 10.0 ** rng.uniform(-30, big, n), k * (np.pi / 2), small, HARD_TRIG]
    if name in ("asin", "acos", "atanh"):
        return [rng.uniform(-1, 1, n), sign * (1 - 10.0 ** rng.uniform(-16, -1, n)), small]
    if name == "atan":
        return [rng.uniform(-3, 3, n), sign * 10.0 ** rng.uniform(-30, big, n), small]
    if name in ("sinh", "cosh"):
        hi = 89.4 if dtype == np.float32 else 710.5
        return [rng.uniform(-hi, hi, n), rng.uniform(-3, 3, n), small]
    if name == "asinh":
        return [rng.uniform(-3, 3, n), sign * 10.0 ** rng.uniform(-30, big, n), small]
    assert name == "acosh"
    return [rng.uniform(1, 3, n), 1 + 10.0 ** rng.uniform(-16, 1, n),
            10.0 ** rng.uniform(0, big, n)]


def samples(name, dtype, n, seed):
    rng = np.random.default_rng(seed)
    small = rng.choice([-1.0, 1.0], n // 4) * 10.0 ** rng.uniform(-30, 0, n // 4)
    if name in TRIG:
        xs = _trig_samples(name, dtype, n, rng, small)
    elif name == "log":
        hi = 88 if dtype == np.float32 else 709
        xs = [np.exp(rng.uniform(-hi, hi, n)), rng.uniform(0.5, 2.0, n // 2),
              1 + rng.uniform(-1e-3, 1e-3, n // 4), np.abs(small)]
        if dtype == np.float64:
            xs.append(rng.uniform(0, 1, 50) * 1e-310)
    elif name == "log1p":
        xs = [np.exp(rng.uniform(-40, 40, n)), rng.uniform(-1, 1, n), small,
              -1 + 10.0 ** rng.uniform(-15, -1, n // 8)]
    else:
        lo, hi = (DOMAIN32 if dtype == np.float32 else {}).get(name, DOMAIN[name])
        xs = [rng.uniform(lo, hi, n), rng.uniform(-3, 3, n // 2), small]
    with np.errstate(over="ignore"):
        xs = np.concatenate(xs).astype(dtype)
    return xs[np.isfinite(xs)]


def ulp_error(got, ref, dtype) -> float:
    """|got - ref| in units of the last place of ref in dtype (mpmath arithmetic)."""
    p, emin = (24, -126) if dtype == np.float32 else (53, -1022)
    fmax = float(np.finfo(dtype).max)
    if abs(ref) >= mp.mpf(fmax) * (1 + mp.mpf(2) ** -p):    # rounds to infinity
        return 0.0 if got == np.inf * mp.sign(ref) else np.inf
    if not np.isfinite(got):
        return np.inf
    e = mp.frexp(ref)[1] - 1 if ref != 0 else emin
    ulp = mp.ldexp(1, max(e, emin) - (p - 1))
    return float(abs(mp.mpf(float(got)) - ref) / ulp)


def max_error(fn, ref, xs, dtype, subnormal_bound=None):
    worst, at = 0.0, None
    tiny = 2.0 ** (-126 if dtype == np.float32 else -1022)
    with mp.workprec(160):
        for x in xs:
            r = ref(mp.mpf(float(x)))
            err = ulp_error(fn(x), r, dtype)
            if subnormal_bound is not None and abs(r) < tiny and err <= subnormal_bound:
                err = 0.0       # a subnormal result within its own bound
            if err > worst:
                worst, at = err, x
    return worst, at


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_accuracy_against_mpmath(name):
    fn = getattr(xm, name)
    worst, at = max_error(fn, REFERENCE[name], samples(name, np.float64, 1200, 1), np.float64,
                          SUBNORMAL_BOUND)
    assert worst <= BOUND64[name], f"{name}(float64 {at!r}) is {worst:.3f} ulp off"
    worst, at = max_error(fn, REFERENCE[name], samples(name, np.float32, 800, 2), np.float32)
    assert worst <= BOUND32, f"{name}(float32 {at!r}) is {worst:.6f} ulp off"


@pytest.mark.parametrize("alpha", [1.0, 1.702, 0.25, -1.5])
def test_swish_accuracy(alpha):
    rng = np.random.default_rng(3)
    for dtype, lo, n in ((np.float64, -700, 800), (np.float32, -100, 500)):
        xs = np.concatenate([rng.uniform(lo / abs(alpha), 40, n), rng.uniform(-3, 3, n)])
        a = dtype(alpha)
        ref = lambda x: x / (1 + mp.exp(-mp.mpf(float(a)) * x))  # noqa: E731
        worst, at = max_error(lambda x: xm.swish(x, a), ref, xs.astype(dtype), dtype,
                              SUBNORMAL_BOUND if dtype == np.float64 else None)
        assert worst <= (BOUND64["swish"] if dtype == np.float64 else BOUND32), (dtype, at, worst)


def test_pow_accuracy_and_exact_integer_results():
    rng = np.random.default_rng(4)
    n = 700
    x = np.concatenate([np.exp(rng.uniform(-10, 10, n)), rng.uniform(0.5, 2, n)])
    y = np.concatenate([rng.uniform(-60, 60, n), rng.uniform(-1000, 1000, n)])
    for dtype, bound in ((np.float64, BOUND64["pow"]), (np.float32, BOUND32)):
        worst = 0.0
        with mp.workprec(160):
            for a, b in zip(x.astype(dtype), y.astype(dtype)):
                r = mp.power(mp.mpf(float(a)), mp.mpf(float(b)))
                if abs(r) < 2.0 ** (-126 if dtype == np.float32 else -1022):
                    continue
                worst = max(worst, ulp_error(xm.pow(a, b), r, dtype))
        assert worst <= bound, (dtype, worst)
    # representable results come out exactly
    for k in range(-1074, 1024):
        assert xm.pow(2.0, float(k)) == 2.0 ** k
    for base in (3.0, 5.0, 7.0, 10.0, -3.0, 0.5, 1.5):
        for k in range(0, 15):
            assert xm.pow(base, float(k)) == base ** k, (base, k)
    xs = rng.standard_normal(2000).astype(np.float32) * 100
    assert all(xm.pow(v, np.float32(2)) == v * v for v in xs)


def same(a, b) -> bool:
    """Equal including the sign of zero, or both NaN."""
    return bool((np.isnan(a) and np.isnan(b)) or (a == b and np.signbit(a) == np.signbit(b)))


def test_special_values_of_the_trigonometric_functions():
    """C99 Annex F: odd functions keep the sign of zero; NaN for NaN, for the infinities of
    sin, cos, tan and outside the domains of asin, acos, acosh and atanh; the poles and limits
    (atanh(±1) = ±inf, atan(±inf) = ±pi/2, ...)."""
    nan, inf = np.nan, np.inf
    for t in (np.float32, np.float64):
        pio2, pi = t(np.pi / 2), t(np.pi)
        cases = {
            "sin": [(0.0, 0.0), (-0.0, -0.0), (inf, nan), (-inf, nan), (nan, nan)],
            "cos": [(0.0, 1.0), (-0.0, 1.0), (inf, nan), (-inf, nan), (nan, nan)],
            "tan": [(0.0, 0.0), (-0.0, -0.0), (inf, nan), (-inf, nan), (nan, nan)],
            "asin": [(0.0, 0.0), (-0.0, -0.0), (1.0, pio2), (-1.0, -pio2), (1.5, nan),
                     (-inf, nan), (nan, nan)],
            "acos": [(1.0, 0.0), (-1.0, pi), (0.0, pio2), (-0.0, pio2), (1.5, nan),
                     (inf, nan), (nan, nan)],
            "atan": [(0.0, 0.0), (-0.0, -0.0), (inf, pio2), (-inf, -pio2), (nan, nan),
                     (1e300 if t == np.float64 else 1e38, pio2)],
            "sinh": [(0.0, 0.0), (-0.0, -0.0), (inf, inf), (-inf, -inf), (nan, nan),
                     (1000.0, inf), (-1000.0, -inf)],
            "cosh": [(0.0, 1.0), (-0.0, 1.0), (inf, inf), (-inf, inf), (nan, nan),
                     (1000.0, inf), (-1000.0, inf)],
            "asinh": [(0.0, 0.0), (-0.0, -0.0), (inf, inf), (-inf, -inf), (nan, nan)],
            "acosh": [(1.0, 0.0), (inf, inf), (0.5, nan), (0.0, nan), (-inf, nan), (nan, nan)],
            "atanh": [(0.0, 0.0), (-0.0, -0.0), (1.0, inf), (-1.0, -inf), (1.5, nan),
                      (-inf, nan), (nan, nan)],
        }
        for name, pairs in cases.items():
            for x, want in pairs:
                got = getattr(xm, name)(t(x))
                assert same(got, t(want)), (name, t, x, got, want)
        if t == np.float32:
            big = [t(8.9e37), t(-3.4e38), t(1e20), t(12345.678)]
        else:
            big = [t(v) for v in HARD_TRIG]
        for x in big:       # sin**2 + cos**2 and tan = sin/cos hold closely far out
            s, c = float(xm.sin(x)), float(xm.cos(x))
            assert abs(s * s + c * c - 1) < 1e-6
            assert abs(float(xm.tan(x)) - s / c) <= 1e-5 * abs(s / c)


def test_cos_sin_turn():
    """cos and sin of 2 pi j / n: exact at multiples of a quarter turn, within 0.51 ulp
    elsewhere, j taken modulo n exactly (no large angles)."""
    for n in (1, 2, 3, 4, 5, 8, 12, 360, 1000, 1024, 4097):
        for j in (0, 1, 2, n // 4, n // 3, n // 2, n - 1, n, 3 * n + 1, -1, -n // 4,
                  10**12 * n + 7):
            c, s = xm.cos_sin_turn(j, n)
            if (4 * j) % n == 0:
                q = (4 * j // n) % 4
                assert (c, s) == ((1.0, 0.0), (0.0, 1.0), (-1.0, 0.0), (0.0, -1.0))[q], (j, n)
                assert not np.signbit(c if q % 2 else s), (j, n)       # +0
                continue
            with mp.workprec(160):
                a = 2 * mp.pi * (j % n) / n
                for got, want in ((c, mp.cos(a)), (s, mp.sin(a))):
                    assert ulp_error(got, want, np.float64) <= 0.51, (j, n, got)


def test_special_values():
    nan, inf = np.nan, np.inf
    for dtype in (np.float32, np.float64):
        t = dtype
        cases = [
            (xm.exp, [(nan, nan), (inf, inf), (-inf, 0.0), (0.0, 1.0), (-0.0, 1.0), (1e5, inf),
                      (-1e5, 0.0)]),
            (xm.expm1, [(nan, nan), (inf, inf), (-inf, -1.0), (0.0, 0.0), (-0.0, -0.0),
                        (1e5, inf), (-1e5, -1.0)]),
            (xm.log, [(nan, nan), (inf, inf), (-inf, nan), (0.0, -inf), (-0.0, -inf),
                      (-1.0, nan), (1.0, 0.0)]),
            (xm.log1p, [(nan, nan), (inf, inf), (-1.0, -inf), (-2.0, nan), (0.0, 0.0),
                        (-0.0, -0.0)]),
            (xm.tanh, [(nan, nan), (inf, 1.0), (-inf, -1.0), (0.0, 0.0), (-0.0, -0.0),
                       (30.0, 1.0)]),
            (xm.sigmoid, [(nan, nan), (inf, 1.0), (-inf, 0.0), (0.0, 0.5), (-0.0, 0.5),
                          (-1e5, 0.0)]),
            (xm.erf, [(nan, nan), (inf, 1.0), (-inf, -1.0), (0.0, 0.0), (-0.0, -0.0),
                      (10.0, 1.0)]),
            (xm.erfc, [(nan, nan), (inf, 0.0), (-inf, 2.0), (0.0, 1.0), (40.0, 0.0)]),
            (xm.softplus, [(nan, nan), (inf, inf), (-inf, 0.0), (1e5, 1e5)]),
            (xm.mish, [(nan, nan), (inf, inf), (-inf, -0.0), (0.0, 0.0), (-0.0, -0.0)]),
            (xm.gelu, [(nan, nan), (inf, inf), (-inf, -0.0), (0.0, 0.0), (-0.0, -0.0),
                       (-1e5, -0.0)]),
            (xm.gelu_tanh, [(nan, nan), (inf, inf), (-inf, -0.0), (0.0, 0.0), (-0.0, -0.0)]),
        ]
        for fn, pairs in cases:
            for x, want in pairs:
                got = fn(t(x))
                assert same(got, t(want)), (fn.__name__, t, x, got, want)
        assert same(xm.swish(t(-inf), t(1)), t(-0.0)) and xm.swish(t(inf), t(1)) == inf
        assert same(xm.swish(t(inf), t(-1)), t(0.0))
        # subnormal inputs
        tiny = t(1e-40) if dtype == np.float32 else t(5e-320)
        for name in ("sin", "tan", "asin", "atan", "sinh", "asinh", "atanh"):
            assert same(getattr(xm, name)(tiny), tiny) and same(getattr(xm, name)(-tiny), -tiny)
        assert xm.cos(tiny) == 1 and xm.cosh(tiny) == 1
        assert xm.exp(tiny) == 1 and xm.expm1(tiny) == tiny and xm.tanh(tiny) == tiny
        assert xm.log(tiny) == t(np.log(np.float64(tiny)))
    # pow's C99 cases (Python's math.pow, where it raises: the C99 pole and NaN results)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, inf, -inf, nan]
    for a in vals:
        for b in vals:
            try:
                want = math.pow(a, b)
            except ValueError:
                odd = b in (-1.0, -3.0)
                want = (math.copysign(inf, a) if odd else inf) if a == 0 else nan
            got = xm.pow(np.float64(a), np.float64(b))
            if np.isfinite(want) and want != 0:     # an ordinary value (accuracy tested above)
                want = got if abs(got - want) <= np.spacing(want) else want
            assert (np.isnan(want) and np.isnan(got)) or (
                got == want and np.signbit(got) == np.signbit(want)), (a, b, got, want)


# ----------------------------------------------------------------------------- same bits elsewhere

UNARY = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "erfc", "softplus", "mish",
         "gelu", "gelu_tanh") + TRIG


def fixed_inputs(dtype):
    rng = np.random.default_rng(11)
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-41, 1.0, -1.0, 88.7, -103.9,
                709.78, -745.1, 5e-324, 1e300]
    xs = np.concatenate([specials, rng.standard_normal(300) * 3, rng.uniform(-800, 800, 300),
                         10.0 ** rng.uniform(-40, 38, 300)])
    with np.errstate(over="ignore"):
        return xs.astype(dtype)


def all_bits() -> dict:
    """Every exact function on the fixed inputs, as raw bits (NaN payloads included)."""
    out = {}
    for dtype in (np.float32, np.float64):
        xs = fixed_inputs(dtype)
        ys = xs[::-1].copy()
        for name in UNARY:
            fn = getattr(xm, name)
            out[f"{name}_{dtype.__name__}"] = np.array([fn(v) for v in xs], dtype)
        out[f"swish_{dtype.__name__}"] = np.array([xm.swish(v, dtype(1.702)) for v in xs], dtype)
        out[f"pow_{dtype.__name__}"] = np.array(
            [xm.pow(abs(a), b / 64) for a, b in zip(xs, ys)], dtype)
    out["cos_sin_turn"] = np.array([xm.cos_sin_turn(j, n) for n in (3, 7, 100, 4097)
                                    for j in range(0, 3 * n, max(n // 50, 1))])
    return {k: v.view(np.uint32 if v.dtype == np.float32 else np.uint64) for k, v in out.items()}


# in LLVM IR: a libm or FMA intrinsic, a libm function, or an arithmetic instruction with
# fast-math flags (contract would let any backend fuse a multiply and an add)
FORBIDDEN = re.compile(
    r"declare [^@]*@(llvm\.(fma|fmuladd|exp|exp2|log|log2|log10|pow|sin|cos)\.|exp|expf|log|"
    r"logf|log1p|expm1|tanh|tanhf|erf|erff|pow|powf|a?(sin|cos|tan)h?f?|atan2f?|sincosf?)\b"
    r"|= (f(add|sub|mul|div|neg|cmp)|call) (fast|contract|reassoc|nnan|ninf|nsz|arcp|afn)\b")


def _dump(path: str) -> None:
    """Run in the subprocess: the bits, and every function's LLVM IR checked against
    FORBIDDEN (inspection needs a fresh compile, hence the empty cache there)."""
    bad = []
    np.savez(path, **all_bits())
    for name in UNARY + ("swish", "pow", "cos_sin_turn"):
        fn = getattr(xm, name)
        for sig in fn.signatures:
            bad += [f"{name}{sig}: {m.group(0)}" for m in FORBIDDEN.finditer(fn.inspect_llvm(sig))]
    print("\n".join(bad) or "clean")


def test_same_bits_on_generic_path_and_no_libm_or_fma(tmp_path):
    """A fresh process with an empty numba cache of its own, compiling for a generic x86-64
    (no AVX, no FMA: NUMBA_CPU_NAME=generic), gives this process's bits, and its code
    declares no libm function or FMA intrinsic and carries no fast-math flag."""
    out = tmp_path / "bits.npz"
    proc = generic_cpu_bits("tests.ops.math.test_exactmath", out, tmp_path / "numba", 600)
    assert proc.stdout.strip() == "clean", proc.stdout[:2000]
    assert_same_arrays(all_bits(), np.load(out))


@pytest.mark.parametrize("op, fn, attrs, opset", [
    ("Exp", "exp", {}, 17), ("Log", "log", {}, 17), ("Tanh", "tanh", {}, 17),
    ("Erf", "erf", {}, 17), ("Sigmoid", "sigmoid", {}, 17), ("Softplus", "softplus", {}, 17),
    ("Mish", "mish", {}, 18), ("Gelu", "gelu", {}, 20),
    ("Gelu", "gelu_tanh", {"approximate": "tanh"}, 20)] + [
    (name.capitalize(), name, {}, 17) for name in TRIG])
def test_exact_operators_are_these_functions_at_1_and_2_threads(op, fn, attrs, opset):
    """Above the parallel threshold, an exact-mode session at 1 and at 2 threads gives
    exactly the scalar function's bits, NaN rewritten to the canonical NaN."""
    import graphrt
    from onnx import TensorProto, helper

    from ...models import make, tensor
    n = 70_001
    x = fixed_inputs(np.float32)
    x = np.resize(x, n) * np.float32(0.999)
    f32 = TensorProto.FLOAT
    model = make([helper.make_node(op, ["x"], ["y"], **attrs)], [tensor("x", f32, [n])],
                 [tensor("y", f32, [n])], opset=opset)
    want = np.array([getattr(xm, fn)(v) for v in x], np.float32)
    want[np.isnan(want)] = np.nan
    for threads in (1, 2):
        got = graphrt.Session(model, graphrt.SessionOptions(mode="exact", intra_op_threads=threads)
                              ).run(None, {"x": x})[0]
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), threads
