"""graphrt: an ONNX runtime whose kernels are compiled with Numba."""
from .cache import install as _install_cache

_install_cache()        # before any kernel module: numba binds a locator at decoration

from .threads import pin_layer as _pin_layer

_pin_layer()

from .compare import compare  # noqa: E402
from .custom import OpDef, OpKernel, custom_operators  # noqa: E402
from .errors import ErrorKind, SessionError  # noqa: E402
from .ir import TensorInfo  # noqa: E402
from .model import Model, load  # noqa: E402
from .options import CancelToken, Mode, OptimizationLevel, SessionOptions, WeightStorage  # noqa: E402
from .profile import Profile  # noqa: E402
from .score import score  # noqa: E402
from .session import Session  # noqa: E402
from .warmup import warmup  # noqa: E402

__all__ = ["load", "Model", "Session", "SessionOptions", "SessionError", "ErrorKind", "TensorInfo",
           "CancelToken", "Mode", "OptimizationLevel", "WeightStorage", "Profile",
           "score", "compare", "warmup", "custom_operators", "OpDef", "OpKernel"]
__version__ = "0.1.0"
