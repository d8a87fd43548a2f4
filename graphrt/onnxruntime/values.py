"""OrtValue and IOBinding for CPU memory.

An OrtValue made from a numpy array shares its memory, as onnxruntime's does on the CPU. An
IOBinding keeps the inputs and outputs of the runs it is passed to; an output bound to an
OrtValue (or to a raw CPU buffer) is written in place.
"""
from __future__ import annotations

import ctypes

import numpy as np

from .. import dtypes
from .errors import InvalidArgument

_CPU = ("cpu",)


def type_string(value) -> str:
    """onnxruntime's type text of a run value."""
    if isinstance(value, np.ndarray):
        return f"tensor({dtypes.name_of(value.dtype).lower()})"
    if isinstance(value, list):
        inner = type_string(value[0]) if value else "tensor(float)"
        return f"seq({inner})"
    if isinstance(value, dict):
        return "map"
    return "optional"


def _check_device(device_type: str) -> None:
    if str(device_type).lower() not in _CPU:
        raise InvalidArgument(f"graphrt holds values in CPU memory only, not on {device_type!r}")


def _element_dtype(element_type) -> np.dtype:
    """A numpy type, a dtype or an ONNX element type code."""
    if isinstance(element_type, (int, np.integer)) and not isinstance(element_type, bool):
        return dtypes.to_numpy(int(element_type))
    return np.dtype(element_type)


class OrtValue:
    """A value of a run: a tensor (numpy array), a sequence (list), a map or None."""

    def __init__(self, value, numpy_obj=None):
        if isinstance(value, OrtValue):
            value = value._value
        self._value = value

    @staticmethod
    def ortvalue_from_numpy(numpy_obj, device_type="cpu", device_id=0, vendor_id=-1) -> "OrtValue":
        _check_device(device_type)
        arr = numpy_obj if isinstance(numpy_obj, np.ndarray) else np.asarray(numpy_obj)
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        return OrtValue(arr)

    @staticmethod
    def ortvalue_from_numpy_with_onnx_type(data, onnx_element_type: int) -> "OrtValue":
        return OrtValue(np.ascontiguousarray(data).view(_element_dtype(onnx_element_type)))

    @staticmethod
    def ortvalue_from_shape_and_type(shape, element_type=None, device_type="cpu", device_id=0,
                                     vendor_id=-1) -> "OrtValue":
        _check_device(device_type)
        return OrtValue(np.zeros(tuple(int(d) for d in shape), dtype=_element_dtype(element_type)))

    def numpy(self):
        if not isinstance(self._value, np.ndarray):
            raise InvalidArgument("numpy() is for tensors; this value is a " + type_string(self._value))
        return self._value

    def data_ptr(self) -> int:
        return int(self.numpy().ctypes.data)

    def device_name(self) -> str:
        return "cpu"

    def shape(self) -> list[int]:
        return list(self.numpy().shape)

    def data_type(self) -> str:
        return type_string(self._value)

    def element_type(self) -> int:
        return dtypes.to_code(self.numpy().dtype)

    def tensor_size_in_bytes(self) -> int:
        return int(self.numpy().nbytes)

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr if dtype is None or np.dtype(dtype) == arr.dtype else arr.astype(dtype)

    def _get_c_value(self) -> "OrtValue":
        return self

    def has_value(self) -> bool:
        return self._value is not None

    def is_tensor(self) -> bool:
        return isinstance(self._value, np.ndarray)

    def is_sparse_tensor(self) -> bool:
        return False

    def is_tensor_sequence(self) -> bool:
        return isinstance(self._value, list)

    def update_inplace(self, np_arr) -> None:
        dst = self.numpy()
        src = np.asarray(np_arr)
        if src.dtype != dst.dtype or src.size != dst.size:
            raise InvalidArgument(f"update_inplace needs {dst.size} elements of "
                                  f"{dtypes.name_of(dst.dtype)}, got {src.size} of {dtypes.name_of(src.dtype)}")
        dst.reshape(-1)[:] = src.reshape(-1)

    @property
    def value(self):
        """The value as graphrt gives it (array, list, dict or None)."""
        return self._value


def _from_pointer(buffer_ptr: int, dtype, shape) -> np.ndarray:
    dtype = _element_dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(int(buffer_ptr))
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(tuple(int(d) for d in shape))


class IOBinding:
    """session.io_binding(): inputs and outputs bound once, runs with run_with_iobinding."""

    def __init__(self, session):
        self._session = session
        self.inputs: dict[str, object] = {}
        self.outputs: dict[str, np.ndarray | None] = {}   # name -> caller's buffer or None
        self._results: list[OrtValue] = []

    def bind_cpu_input(self, name: str, arr_on_cpu) -> None:
        self.inputs[name] = arr_on_cpu

    def bind_input(self, name: str, device_type, device_id, element_type, shape, buffer_ptr) -> None:
        _check_device(device_type)
        self.inputs[name] = _from_pointer(buffer_ptr, element_type, shape)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        self.inputs[name] = ortvalue.value

    def bind_output(self, name: str, device_type="cpu", device_id=0, element_type=None, shape=None,
                    buffer_ptr=None) -> None:
        _check_device(device_type)
        if buffer_ptr is None:
            self.outputs[name] = None
        else:
            if element_type is None or shape is None:
                raise InvalidArgument(f"output {name!r}: a buffer needs its element type and shape")
            self.outputs[name] = _from_pointer(buffer_ptr, element_type, shape)

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        self.outputs[name] = ortvalue.numpy()

    def clear_binding_inputs(self) -> None:
        self.inputs.clear()

    def clear_binding_outputs(self) -> None:
        self.outputs.clear()
        self._results = []

    def synchronize_inputs(self) -> None:
        """CPU memory: nothing to wait for."""

    def synchronize_outputs(self) -> None:
        """CPU memory: nothing to wait for."""

    def get_outputs(self) -> list[OrtValue]:
        return list(self._results)

    def copy_outputs_to_cpu(self) -> list:
        return [r.value.copy() if isinstance(r.value, np.ndarray) else r.value for r in self._results]

    def get_outputs_as_ortvaluevector(self) -> list[OrtValue]:
        return self.get_outputs()
