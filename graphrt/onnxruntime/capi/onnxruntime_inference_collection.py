"""``onnxruntime.capi.onnxruntime_inference_collection``: the Python classes."""
from ..session import InferenceSession, ModelMetadata, NodeArg  # noqa: F401
from ..values import IOBinding, OrtValue  # noqa: F401

Session = InferenceSession
