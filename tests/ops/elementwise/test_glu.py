"""SwiGLU through graphrt.Session, compared with onnx's reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

import graphrt
from graphrt import ErrorKind, SessionError

from ...helpers import EXACT, compare, error, model_of, uniform


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


def test_swiglu_is_not_exact():
    model = model_of("SwiGLU", {"A": uniform((2,)), "B": uniform((2,))}, [("Y", F32)], opset=28)
    with pytest.raises(SessionError) as info:
        graphrt.Session(model, EXACT)
    assert info.value.kind == ErrorKind.EXACT_MODE_UNAVAILABLE
