"""Fits the polynomial coefficients of graphrt/kernels/math/exactmath.py with mpmath and prints
them as Python literals (run once when changing a fit; needs mpmath): erf and erfc (arrays
with the constant term as a pair hi, lo), and sin, cos, sinh and atan (arrays of (hi, lo)
pairs, one per coefficient). Each is mpmath.chebyfit's near-minimax polynomial, fitted at
60 digits to a function that is smooth on the interval (the series of the function divided
by its first terms)."""
import mpmath as mp

mp.mp.dps = 60


def _erf_small(z):      # erf(x)/x - 1 with z = x*x
    return (mp.erf(mp.sqrt(z)) / mp.sqrt(z) if z > 0 else 2 / mp.sqrt(mp.pi)) - 1


def _scaled_erfc(t):    # erfc(t) * exp(t*t)
    return mp.erfc(t) * mp.exp(t * t)


def _asymptotic(w):     # t * erfc(t) * exp(t*t) with w = 1/(t*t)
    t = 1 / mp.sqrt(w)
    return t * _scaled_erfc(t)


FITS = [  # name, function, interval, terms, centre (the polynomial's variable is v - centre)
    ("_ERF_SMALL", _erf_small, (0, 1), 13, 0),
    ("_ERFC_HEAD", _scaled_erfc, (0.75, 2), 20, 1.375),
    ("_ERFC_2_4", _scaled_erfc, (2, 4), 20, 3),
    ("_ERFC_4_UP", _asymptotic, (mp.mpf(1) / 784, mp.mpf(1) / 16), 17, 0),
]


def _ratio(f, first, label):
    """(f(r)/r - 1)/z or (f(r) - 1)/z as a function of z = r*r, with its limit at z = 0."""
    def g(z):
        if z == 0:
            return mp.mpf(first)
        r = mp.sqrt(z)
        v = f(r) / r if f is not mp.cos else f(r)
        return (v - 1) / z
    g.__name__ = label
    return g


PIO4_SQ = (mp.pi / 4 + mp.mpf("1e-4")) ** 2        # |r| <= pi/4, and a little for rounding
FITS_DD = [  # name, function of z, interval of z, terms
    ("_SIN_P", _ratio(mp.sin, mp.mpf(-1) / 6, "(sin(r)/r - 1)/z"), (0, mp.mpf("0.6171")), 8),
    ("_COS_P", _ratio(mp.cos, mp.mpf(-1) / 2, "(cos(r) - 1)/z"), (0, mp.mpf("0.6171")), 8),
    ("_SINH_P", _ratio(mp.sinh, mp.mpf(1) / 6, "(sinh(r)/r - 1)/z"), (0, 1), 8),
    ("_ATAN_P", _ratio(mp.atan, mp.mpf(-1) / 3, "(atan(r)/r - 1)/z"),
     (0, mp.mpf(1) / 1024 + mp.mpf("1e-7")), 5),
]


def main():
    assert PIO4_SQ < mp.mpf("0.6171")
    for name, fn, (a, b), terms in FITS_DD:
        coeffs, err = mp.chebyfit(fn, [a, b], terms, error=True)
        print(f"# {fn.__name__} on [{mp.nstr(a, 6)}, {mp.nstr(b, 8)}], {terms} terms, "
              f"max error {mp.nstr(err, 3)}")
        print(f"{name} = np.array([")
        for c in coeffs:
            hi = float(c)
            print(f"    ({hi!r}, {float(c - hi)!r}),")
        print("])")
    for name, fn, (a, b), terms, centre in FITS:
        coeffs, err = mp.chebyfit(lambda v: fn(v + centre), [a - centre, b - centre], terms,
                                  error=True)
        print(f"# {fn.__name__} on [{mp.nstr(a, 6)}, {mp.nstr(b, 6)}], {terms} terms, "
              f"max error {mp.nstr(err, 3)} (highest power first, the "
              f"constant term as hi, lo)")
        print(f"{name} = np.array([")
        c0 = float(coeffs[-1])     # the constant term as a pair of doubles, hi then lo
        vals = [repr(float(c)) for c in coeffs[:-1]] + [repr(c0), repr(float(coeffs[-1] - c0))]
        for i in range(0, len(vals), 3):
            print("    " + ", ".join(vals[i:i + 3]) + ",")
        print("])")


if __name__ == "__main__":
    main()
