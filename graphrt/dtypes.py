"""ONNX element types and their numpy dtypes (TensorProto.DataType codes)."""
from __future__ import annotations

import numpy as np

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
    16: ("BFLOAT16", None),
    17: ("FLOAT8E4M3FN", None),
    18: ("FLOAT8E4M3FNUZ", None),
    19: ("FLOAT8E5M2", None),
    20: ("FLOAT8E5M2FNUZ", None),
    21: ("UINT4", None),
    22: ("INT4", None),
    23: ("FLOAT4E2M1", None),
    24: ("FLOAT8E8M0", None),
    25: ("UINT2", None),
    26: ("INT2", None),
}
_CODE_OF = {dt: code for code, (_, dt) in _TYPES.items() if dt is not None}

FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))
SIGNED = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
UNSIGNED = frozenset(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
INTEGERS = SIGNED | UNSIGNED
NUMERIC = FLOATS | INTEGERS
BOOL = frozenset({np.dtype(np.bool_)})
ALL_TENSOR = NUMERIC | BOOL


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
