"""``onnxruntime.capi``: the submodules code imports from onnxruntime's package."""
from . import _pybind_state, onnxruntime_inference_collection, onnxruntime_pybind11_state  # noqa: F401,E402
