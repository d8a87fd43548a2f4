"""Det through graphrt.Session, compared with onnx's reference evaluator (numpy for
float16)."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind

from ...helpers import EXACT, check, fails, rand, run


# ----------------------------------------------------------------------------- Det

@pytest.mark.parametrize("shape,dtype", [((3, 3), np.float32), ((2, 4, 5, 5), np.float64),
                                         ((1, 1), np.float32), ((3, 0, 0), np.float32),
                                         ((0, 2, 2), np.float32), ((2, 2), np.float16)])
def test_det(shape, dtype):
    x = rand(shape, dtype)
    if dtype == np.float16:     # the reference evaluator has no float16 determinant
        got = run("Det", [x], opset=22)
        want = np.linalg.det(x.astype(np.float32)).astype(np.float16)
        np.testing.assert_allclose(got[0], want, rtol=2e-3, atol=1e-3)
    else:
        got = [check("Det", [x], opset=11, rtol=1e-4, atol=1e-5)]
    ex = run("Det", [x], opset=22, options=EXACT)[0]
    np.testing.assert_allclose(ex.astype(np.float64), got[0].astype(np.float64), rtol=1e-3)


def test_det_singular_nan_and_errors():
    x = np.array([[[1, 2], [2, 4]], [[np.nan, 1], [1, 1]], [[0, 1], [1, 0]]], np.float32)
    got = run("Det", [x], opset=22)[0]
    assert got[0] == 0 and np.isnan(got[1]) and got[2] == -1
    fails(ErrorKind.INVALID_MODEL, "Det", [rand((2, 3))], opset=22)
    fails(ErrorKind.UNSUPPORTED, "Det", [np.eye(2, dtype=np.int32)], opset=22)
