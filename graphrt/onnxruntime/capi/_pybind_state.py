"""``onnxruntime.capi._pybind_state``: the same names as onnxruntime_pybind11_state."""
from .onnxruntime_pybind11_state import *  # noqa: F401,F403
from .onnxruntime_pybind11_state import NotImplemented  # noqa: F401 - not in * (a builtin's name)
