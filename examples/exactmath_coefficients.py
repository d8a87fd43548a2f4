"""Fits the polynomial coefficients of erf and erfc in graphrt/kernels/exactmath.py with mpmath
and prints them as Python literals (run once when changing a fit; needs mpmath)."""
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


def main():
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
