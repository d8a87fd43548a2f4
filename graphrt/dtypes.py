"""ONNX element types and their numpy dtypes (TensorProto.DataType codes)."""
from __future__ import annotations

import numpy as np

def _ml(name):
    """A dtype from ml_dtypes (an onnx dependency) for the types numpy lacks; numba cannot
    compute in them: kernels widen them or refuse them."""
    try:
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, name))
    except (ImportError, AttributeError):
        return None


# code -> (ONNX name, numpy dtype or None where numpy has none)
_TYPES = {
    1: ("FLOAT", np.dtype(np.float32)),
    2: ("UINT8", np.dtype(np.uint8)),
    3: ("INT8", np.dtype(np.int8)),
    4: ("UINT16", np.dtype(np.uint16)),
    5: ("INT16", np.dtype(np.int16)),
    6: ("INT32", np.dtype(np.int32)),
    7: ("INT64", np.dtype(np.int64)),
    8: ("STRING", np.dtype(object)),
    9: ("BOOL", np.dtype(np.bool_)),
    10: ("FLOAT16", np.dtype(np.float16)),
    11: ("DOUBLE", np.dtype(np.float64)),
    12: ("UINT32", np.dtype(np.uint32)),
    13: ("UINT64", np.dtype(np.uint64)),
    14: ("COMPLEX64", np.dtype(np.complex64)),
    15: ("COMPLEX128", np.dtype(np.complex128)),
    16: ("BFLOAT16", _ml("bfloat16")),
    17: ("FLOAT8E4M3FN", _ml("float8_e4m3fn")),
    18: ("FLOAT8E4M3FNUZ", _ml("float8_e4m3fnuz")),
    19: ("FLOAT8E5M2", _ml("float8_e5m2")),
    20: ("FLOAT8E5M2FNUZ", _ml("float8_e5m2fnuz")),
    21: ("UINT4", _ml("uint4")),
    22: ("INT4", _ml("int4")),
    23: ("FLOAT4E2M1", _ml("float4_e2m1fn")),
    24: ("FLOAT8E8M0", _ml("float8_e8m0fnu")),
    25: ("UINT2", _ml("uint2")),
    26: ("INT2", _ml("int2")),
}
_CODE_OF = {dt: code for code, (_, dt) in _TYPES.items() if dt is not None}

FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))
SIGNED = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
UNSIGNED = frozenset(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
INTEGERS = SIGNED | UNSIGNED
NUMERIC = FLOATS | INTEGERS
BOOL = frozenset({np.dtype(np.bool_)})
ALL_TENSOR = NUMERIC | BOOL
EXOTIC = frozenset(dt for code, (_, dt) in _TYPES.items() if code >= 16 and dt is not None)


def to_numpy(code: int) -> np.dtype:
    """The numpy dtype of an ONNX element type code; KeyError/ValueError when there is none."""
    name, dt = _TYPES[code]
    if dt is None:
        raise ValueError(f"element type {name} has no numpy equivalent")
    return dt


def name_of_code(code: int) -> str:
    return _TYPES.get(code, (f"type {code}", None))[0]


def to_code(dtype) -> int:
    return _CODE_OF[np.dtype(dtype)]


def name_of(dtype) -> str:
    dt = np.dtype(dtype)
    code = _CODE_OF.get(dt)
    return _TYPES[code][0] if code is not None else str(dt)
