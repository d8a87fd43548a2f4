"""BitCast through graphrt.Session: every bit kept between the types of one width, the
narrow types, scalars, empty tensors and the errors."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import graphrt
from graphrt import ErrorKind, SessionError

from ...helpers import EXACT, fails, one_node, run


# ----------------------------------------------------------------------------- BitCast

def _width(dt):
    return {"int4": 4, "uint4": 4, "float4_e2m1fn": 4, "int2": 2, "uint2": 2}.get(
        np.dtype(dt).name, np.dtype(dt).itemsize * 8)


TYPES = [np.int8, np.uint8, np.bool_, ml_dtypes.float8_e4m3fn, np.int16, np.uint16,
         np.float16, ml_dtypes.bfloat16, np.int32, np.uint32, np.float32, np.int64, np.uint64,
         np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("src", TYPES, ids=lambda t: np.dtype(t).name)
def test_bitcast_keeps_every_bit(src):
    from onnx import helper
    raw = np.random.default_rng(3).integers(0, 256, 24 * np.dtype(src).itemsize, np.uint8)
    if np.dtype(src) == np.bool_:
        raw &= 1
    x = raw.view(src).reshape(2, 3, -1)
    for dst in TYPES:
        if _width(dst) != _width(src):
            continue
        got = run("BitCast", [x], {"to": helper.np_dtype_to_tensor_dtype(np.dtype(dst))},
                  opset=26, options=EXACT)[0]
        assert got.dtype == np.dtype(dst) and got.shape == x.shape
        assert got.tobytes() == x.tobytes()


def test_bitcast_narrow_scalar_and_errors():
    from onnx import TensorProto
    x = np.array([-8, -1, 0, 7], ml_dtypes.int4)
    got = run("BitCast", [x], {"to": TensorProto.UINT4}, opset=26)[0]
    np.testing.assert_array_equal(got.astype(np.int64), [8, 15, 0, 7])
    s = run("BitCast", [np.array(1.0, np.float32)], {"to": TensorProto.INT32}, opset=26)[0]
    assert s.shape == () and s == 0x3F800000
    assert run("BitCast", [np.zeros((0, 3), np.int64)], {"to": TensorProto.DOUBLE},
               opset=26)[0].shape == (0, 3)
    assert "width" in fails(ErrorKind.INVALID_MODEL, "BitCast", [np.zeros(3, np.float32)],
                            {"to": TensorProto.INT64}, opset=26)
    fails(ErrorKind.INVALID_MODEL, "BitCast", [np.zeros(3, np.float32)],
          {"to": TensorProto.STRING}, opset=26)
    with pytest.raises(SessionError) as info:
        graphrt.Session(one_node("BitCast", [np.zeros(2, np.int8)], {"to": 2}, opset=25))
    assert info.value.kind == ErrorKind.UNSUPPORTED_OPERATOR
