"""SwiGLU through graphrt.Session, compared with onnx's reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

import graphrt
from graphrt import ErrorKind

from graphrt.kernels.math import exactmath

from ...helpers import bits, compare, error, model_of, threads, uniform


F32 = np.float32


# ----------------------------------------------------------------------------- SwiGLU

@pytest.mark.parametrize("dtype,alpha,rtol", [(F32, None, 1e-5), (np.float64, 0.5, 1e-12),
                                              (np.float16, 1.7, 2e-3)])
def test_swiglu_matches_reference(dtype, alpha, rtol):
    inputs = {"A": uniform((3, 5), dtype, 1, -4), "B": uniform((3, 5), dtype, 2, -4)}
    attrs = {} if alpha is None else {"alpha": alpha}
    compare("SwiGLU", inputs, [("Y", dtype)], attrs, opset=28, rtol=rtol)


def test_swiglu_empty_and_no_broadcast():
    compare("SwiGLU", {"A": np.zeros((2, 0), F32), "B": np.zeros((2, 0), F32)}, [("Y", F32)],
            opset=28)
    msg = error(ErrorKind.INVALID_MODEL, "SwiGLU", {"A": uniform((2, 3)), "B": uniform((1, 3))},
                [("Y", F32)], opset=28)
    assert "broadcast" in msg


def test_swiglu_exact_is_own_swish_times_b_at_any_thread_count():
    """Exact mode: y = fl(swish_alpha(a) * b) with graphrt's own swish (one rounding)."""
    a, b = uniform((300, 257), F32, 5, -6), uniform((300, 257), F32, 6, -2)   # parallel
    model = model_of("SwiGLU", {"A": a, "B": b}, [("Y", F32)], {"alpha": 1.5}, opset=28)
    got = [graphrt.Session(model, threads(n)).run(None, {"A": a, "B": b})[0] for n in (1, 2)]
    np.testing.assert_array_equal(bits(got[0]), bits(got[1]))
    want = np.array([exactmath.swish(v, F32(1.5)) for v in a.ravel()[:500]], F32) * b.ravel()[:500]
    np.testing.assert_array_equal(bits(got[0].ravel()[:500]), bits(want))


