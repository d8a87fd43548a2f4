"""Runs onnx's backend node cases through graphrt (the conformance suite's one adapter).

``python -m tests.conformance`` prints a table of outcomes; ``--write-xfail`` rewrites
tests/conformance_xfail.txt from the current failures, one reason per line.
"""
from __future__ import annotations

import functools
import os
import sys
import warnings

import numpy as np

import graphrt

XFAIL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance_xfail.txt")


@functools.lru_cache(maxsize=1)
def node_cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases
        return {c.name: c for c in collect_testcases()}


def load_xfail() -> dict[str, str]:
    out = {}
    if os.path.exists(XFAIL_PATH):
        with open(XFAIL_PATH) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    name, _, reason = line.partition(" ")
                    out[name] = reason.strip()
    return out


def run_case(case) -> str | None:
    """None when every data set of the case matches; otherwise why not (one line)."""
    try:
        sess = graphrt.Session(case.model)
    except graphrt.SessionError as e:
        return f"{e.kind}: {e.reason}"[:200]
    names = [i.name for i in case.model.graph.input]
    # inputs that are initializers are not fed
    fed = [i.name for i in sess.inputs]
    for inputs, expected in case.data_sets:
        feeds = {n: _array(v) for n, v in zip(names, inputs) if n in fed}
        try:
            got = sess.run(None, feeds)
        except graphrt.SessionError as e:
            return f"{e.kind}: {e.reason}"[:200]
        except Exception as e:  # noqa: BLE001 - a crash is a finding, reported as such
            return f"crash: {type(e).__name__}: {e}"[:200]
        if len(got) != len(expected):
            return f"{len(got)} outputs, expected {len(expected)}"
        for k, (g, e) in enumerate(zip(got, expected)):
            why = compare(g, _array(e), case.rtol, case.atol)
            if why:
                return f"output {k}: {why}"
    return None


def _array(v):
    from onnx import TensorProto, numpy_helper
    return numpy_helper.to_array(v) if isinstance(v, TensorProto) else v


def compare(got, expected, rtol, atol) -> str | None:
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            return f"expected a sequence of {len(expected)} tensors, got {type(got).__name__}"
        for i, (g, e) in enumerate(zip(got, expected)):
            why = compare(g, _array(e), rtol, atol)
            if why:
                return f"element {i}: {why}"
        return None
    if expected is None:
        return None if got is None else "expected no value"
    if not isinstance(got, np.ndarray):
        return f"expected a tensor, got {type(got).__name__}"
    expected = np.asarray(expected)
    if got.dtype != expected.dtype:
        return f"dtype {got.dtype}, expected {expected.dtype}"
    if got.shape != expected.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    if expected.dtype == object or expected.dtype.kind in "biuSU":
        return None if np.array_equal(got, expected) else "values differ"
    g = got.astype(np.float64)
    e = expected.astype(np.float64)
    nan_ok = np.isnan(g) == np.isnan(e)
    if not nan_ok.all():
        return "NaN positions differ"
    mask = ~np.isnan(e)
    bad = ~(np.abs(g[mask] - e[mask]) <= atol + rtol * np.abs(e[mask]))
    bad &= ~(g[mask] == e[mask])       # equal infinities
    if bad.any():
        return f"{int(bad.sum())} of {e.size} values off (max |diff| {np.nanmax(np.abs(g[mask]-e[mask])):.3g})"
    return None


def main(argv):
    """``-k TEXT`` keeps the cases whose name contains TEXT (repeatable)."""
    cases = node_cases()
    keys = [argv[i + 1] for i, a in enumerate(argv) if a == "-k"]
    if keys:
        cases = {n: c for n, c in cases.items() if any(k in n for k in keys)}
    results = {name: run_case(c) for name, c in sorted(cases.items())}
    passed = sum(r is None for r in results.values())
    if "--write-xfail" in argv and not keys:
        with open(XFAIL_PATH, "w") as f:
            f.write("# onnx backend node cases graphrt does not pass yet: name, then why.\n")
            f.write("# Written by `python -m tests.conformance --write-xfail`; a case that starts\n")
            f.write("# passing fails the suite until it is taken off this list.\n")
            for name, why in results.items():
                if why is not None:
                    f.write(f"{name} {why.splitlines()[0] if why else ''}\n")
    else:
        for name, why in results.items():
            if why is not None:
                print(f"{name}: {why}")
    print(f"onnx node cases: {passed} passed, {len(results) - passed} failed, of {len(results)}")


if __name__ == "__main__":
    main(sys.argv[1:])
