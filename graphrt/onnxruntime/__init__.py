"""onnxruntime's Python API on graphrt: ``import graphrt.onnxruntime as ort``.

    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    y, = sess.run(None, {"x": x})

``install()`` makes ``import onnxruntime`` give this module (with ``onnxruntime.capi`` and
the submodules code imports from it), so a package written for onnxruntime runs on graphrt
unchanged; ``python -m graphrt.onnxruntime script.py`` (or ``-m module``) runs a program that
way. Exact mode: ``sess_options.add_session_config_entry("graphrt.mode", "exact")``;
``InferenceSession.graphrt_session`` is the graphrt Session behind a session. What maps to
what and what is refused: README, "Coming from onnxruntime".
"""
from .errors import (DeviceReset, EngineError, EPFail, Fail, InvalidArgument, InvalidGraph,  # noqa: F401
                     InvalidProtobuf, ModelLoadCanceled, ModelLoaded, ModelRequiresCompilation,
                     NoModel, NoSuchFile, NotFound, NotImplemented, RuntimeException)
from .register import install, uninstall
from .options import ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions
from .providers import (disable_telemetry_events, enable_telemetry_events, get_all_providers,
                        get_available_providers, get_device, preload_dlls, set_default_logger_severity,
                        set_default_logger_verbosity, set_global_thread_pool_sizes)
from .session import InferenceSession, ModelMetadata, NodeArg
from .values import IOBinding, OrtValue
from . import capi  # noqa: E402 - onnxruntime's package has it loaded

# The onnxruntime API level this module follows; code that compares versions sees that one.
__version__ = "1.22.0"
version = __version__
package_name = "graphrt"


def get_version_string() -> str:
    return __version__


def get_build_info() -> str:
    from .. import __version__ as graphrt_version
    return f"graphrt {graphrt_version} Build Info: onnxruntime API {__version__}, CPU"


__all__ = ["InferenceSession", "SessionOptions", "RunOptions", "NodeArg", "ModelMetadata",
           "OrtValue", "IOBinding", "GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder",
           "get_available_providers", "get_all_providers", "get_device", "get_version_string",
           "get_build_info", "set_default_logger_severity", "set_default_logger_verbosity",
           "disable_telemetry_events", "enable_telemetry_events", "set_global_thread_pool_sizes",
           "preload_dlls", "install", "uninstall"]
