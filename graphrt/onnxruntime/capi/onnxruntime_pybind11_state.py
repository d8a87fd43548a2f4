"""``onnxruntime.capi.onnxruntime_pybind11_state``: the exception classes code catches, and
the names onnxruntime's compiled module exposes."""
from ..errors import (DeviceReset, EngineError, EPFail, Fail, InvalidArgument, InvalidGraph,  # noqa: F401
                      InvalidProtobuf, ModelLoadCanceled, ModelLoaded, ModelRequiresCompilation,
                      NoModel, NoSuchFile, NotFound, NotImplemented, RuntimeException)
from ..options import (ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions,  # noqa: F401
                       SessionOptions)
from ..providers import (disable_telemetry_events, enable_telemetry_events, get_all_providers,  # noqa: F401
                         get_available_providers, get_device, set_default_logger_severity,
                         set_default_logger_verbosity)
from ..session import ModelMetadata, NodeArg  # noqa: F401
from ..values import OrtValue  # noqa: F401
