"""The ONNX protobuf messages, and tensors as numpy arrays, without importing the onnx
package.

``import onnx`` loads onnx's C++ extension (its schemas, checker, shape inference, ...): 12
MiB of a process and 50 ms of its start, for what graphrt needs of it here, the message
classes. Those are built from the description of onnx-ml.proto that onnx's own generated
module holds (onnx/onnx_ml_pb2.py, found without importing the package) in a descriptor pool
of graphrt's own: 2 MiB, and no clash when the caller imports onnx too (onnx's classes are
registered in protobuf's default pool, these in another). Where that module cannot be read
this way, onnx's classes serve. Messages of either kind are read the same way; a caller's
``onnx.ModelProto`` is taken as it is (``is_model``).

``to_array`` is the tensor's value as onnx.numpy_helper.to_array gives it for the element
types graphrt has (dtypes.py): raw bytes (little-endian) or the typed fields, 4-bit and
2-bit types unpacked from two or four to a byte, low nibble first.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import sys

import numpy as np

from . import dtypes


def _classes():
    try:
        from google.protobuf import descriptor_pool, message_factory
        spec = importlib.util.find_spec("onnx")
        with open(os.path.join(spec.submodule_search_locations[0], "onnx_ml_pb2.py"),
                  encoding="utf-8") as f:
            tree = ast.parse(f.read())
        blob = next(ast.literal_eval(n.args[0]) for n in ast.walk(tree)
                    if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "AddSerializedFile")
        pool = descriptor_pool.DescriptorPool()
        pool.AddSerializedFile(blob)
        return lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName("onnx." + name))
    except Exception:  # noqa: BLE001 - another layout of onnx's package: its own classes
        import onnx
        return lambda name: getattr(onnx, name)


_message = _classes()
ModelProto = _message("ModelProto")
TensorProto = _message("TensorProto")
AttributeProto = _message("AttributeProto")


def is_model(obj) -> bool:
    """Whether ``obj`` is an ONNX ModelProto message (onnx's class or this module's)."""
    return getattr(getattr(obj, "DESCRIPTOR", None), "full_name", None) == "onnx.ModelProto"


def to_onnx(message):
    """``message`` as the onnx package's class (for onnx's own tools: its inliner)."""
    import onnx
    cls = getattr(onnx, type(message).DESCRIPTOR.name)
    return message if isinstance(message, cls) else cls.FromString(message.SerializeToString())


_TP = TensorProto
PACKED_BITS = {_TP.UINT4: 4, _TP.INT4: 4, _TP.FLOAT4E2M1: 4, _TP.UINT2: 2, _TP.INT2: 2}
# element types whose typed values sit in int32_data one per element, as their bit pattern
_IN_INT32_BITS = {_TP.FLOAT16: np.uint16, _TP.BFLOAT16: np.uint16, _TP.INT16: np.uint16,
                  _TP.UINT16: np.uint16, _TP.FLOAT8E4M3FN: np.uint8, _TP.FLOAT8E4M3FNUZ: np.uint8,
                  _TP.FLOAT8E5M2: np.uint8, _TP.FLOAT8E5M2FNUZ: np.uint8, _TP.FLOAT8E8M0: np.uint8,
                  _TP.BOOL: np.uint8, _TP.INT8: np.int8, _TP.UINT8: np.uint8}


def unpack_bits(packed: np.ndarray, bits: int, dims: tuple, dtype) -> np.ndarray:
    """Elements of ``bits`` bits packed 8 // bits to a byte, the first in the low bits,
    one to a byte of ``dtype`` (the element's bits in the byte's low bits, as onnx has them)."""
    n = int(np.prod(dims, dtype=np.int64))
    shifts = np.arange(8 // bits, dtype=np.uint8) * np.uint8(bits)
    out = ((packed.reshape(-1, 1) >> shifts) & np.uint8((1 << bits) - 1)).reshape(-1)[:n]
    return np.ascontiguousarray(out, dtype=np.uint8).view(dtype).reshape(dims)


def from_raw(data, code: int, dims: tuple) -> np.ndarray:
    """A tensor of element type ``code`` from its raw (little-endian) bytes."""
    dt = dtypes.to_numpy(code)
    if code in PACKED_BITS:
        return unpack_bits(np.frombuffer(data, np.uint8), PACKED_BITS[code], dims, dt)
    arr = np.frombuffer(data, dtype=dt)
    if sys.byteorder == "big" and dt.itemsize > 1:
        arr = arr.byteswap()
    return arr.reshape(dims)


def to_array(t) -> np.ndarray:
    """A TensorProto's value held in the message (external data: ``from_raw``), with the
    dtype dtypes.to_numpy gives its element type; a view into the message's bytes where
    they are raw (copy it to keep it)."""
    code, dims = t.data_type, tuple(t.dims)
    if t.HasField("segment"):
        raise ValueError("segmented tensors are not supported")
    if code == _TP.STRING:
        return np.array([s.decode("utf-8") for s in t.string_data], dtype=object).reshape(dims)
    if t.HasField("raw_data"):
        return from_raw(t.raw_data, code, dims)
    dt = dtypes.to_numpy(code)
    if code in PACKED_BITS:
        return unpack_bits(np.asarray(t.int32_data, np.int32).astype(np.uint8), PACKED_BITS[code], dims, dt)
    if code in _IN_INT32_BITS:
        bits = np.asarray(t.int32_data, np.int32).astype(_IN_INT32_BITS[code])
        return (bits.astype(dt) if code in (_TP.INT8, _TP.UINT8) else bits.view(dt)).reshape(dims)
    if code in (_TP.COMPLEX64, _TP.COMPLEX128):
        parts = np.asarray(t.float_data if code == _TP.COMPLEX64 else t.double_data, np.float64)
        return (parts[0::2] + 1j * parts[1::2]).astype(dt).reshape(dims)
    field = {_TP.FLOAT: t.float_data, _TP.INT32: t.int32_data, _TP.INT64: t.int64_data,
             _TP.DOUBLE: t.double_data, _TP.UINT32: t.uint64_data, _TP.UINT64: t.uint64_data}.get(code)
    if field is None:
        raise ValueError(f"element type {code} is not supported")
    return np.asarray(field, dtype=dt).reshape(dims)
