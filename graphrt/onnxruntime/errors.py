"""onnxruntime's exception classes, each a graphrt SessionError.

Code written for onnxruntime catches ``onnxruntime.capi.onnxruntime_pybind11_state.Fail``,
``InvalidArgument`` and the like; code written for graphrt catches ``SessionError``. Both see
the same exception. The text reads as onnxruntime's does, ``[ONNXRuntimeError] : 2 :
INVALID_ARGUMENT : ...``, followed by graphrt's reason.
"""
from __future__ import annotations

import contextlib

from ..errors import ErrorKind, SessionError
from ..importer import UNREADABLE


class OrtError(SessionError):
    """Base of the classes below: ``code`` and ``status`` are onnxruntime's status code."""

    code = 1
    status = "FAIL"
    default_kind = ErrorKind.INVALID_MODEL

    def __init__(self, message: str = "", kind: ErrorKind | None = None, node: str | None = None,
                 operators: tuple = ()):
        super().__init__(kind or self.default_kind, message, node, operators)
        where = f" [node '{node}']" if node is not None else ""
        Exception.__init__(self, f"[ONNXRuntimeError] : {self.code} : {self.status} : {message}{where}")


def _status(name: str, code: int, status: str, kind: ErrorKind) -> type:
    return type(name, (OrtError,), {"code": code, "status": status, "default_kind": kind})


Fail = _status("Fail", 1, "FAIL", ErrorKind.UNSUPPORTED)
InvalidArgument = _status("InvalidArgument", 2, "INVALID_ARGUMENT", ErrorKind.INVALID_INPUT)
NoSuchFile = _status("NoSuchFile", 3, "NO_SUCHFILE", ErrorKind.INVALID_MODEL)
NoModel = _status("NoModel", 4, "NO_MODEL", ErrorKind.INVALID_MODEL)
EngineError = _status("EngineError", 5, "ENGINE_ERROR", ErrorKind.UNSUPPORTED)
RuntimeException = _status("RuntimeException", 6, "RUNTIME_EXCEPTION", ErrorKind.UNSUPPORTED)
InvalidProtobuf = _status("InvalidProtobuf", 7, "INVALID_PROTOBUF", ErrorKind.INVALID_MODEL)
ModelLoaded = _status("ModelLoaded", 8, "MODEL_LOADED", ErrorKind.INVALID_MODEL)
NotImplemented = _status("NotImplemented", 9, "NOT_IMPLEMENTED", ErrorKind.UNSUPPORTED)  # noqa: A001
InvalidGraph = _status("InvalidGraph", 10, "INVALID_GRAPH", ErrorKind.INVALID_MODEL)
EPFail = _status("EPFail", 11, "EP_FAIL", ErrorKind.UNSUPPORTED)
ModelLoadCanceled = _status("ModelLoadCanceled", 12, "MODEL_LOAD_CANCELED", ErrorKind.CANCELLED)
ModelRequiresCompilation = _status("ModelRequiresCompilation", 13, "MODEL_REQUIRES_COMPILATION",
                                   ErrorKind.UNSUPPORTED)
NotFound = _status("NotFound", 14, "NOT_FOUND", ErrorKind.INVALID_INPUT)
DeviceReset = _status("DeviceReset", 15, "DEVICE_RESET", ErrorKind.UNSUPPORTED)

ALL = ("Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError", "RuntimeException",
       "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph", "EPFail",
       "ModelLoadCanceled", "ModelRequiresCompilation", "NotFound", "DeviceReset")


class MissingInputs(InvalidArgument, ValueError):
    """onnxruntime raises ValueError when required inputs are not fed."""


_BY_KIND = {
    ErrorKind.UNSUPPORTED_OPERATOR: NotImplemented,
    ErrorKind.UNSUPPORTED: NotImplemented,
    ErrorKind.EXACT_MODE_UNAVAILABLE: NotImplemented,
    ErrorKind.INVALID_INPUT: InvalidArgument,
    ErrorKind.INVALID_MODEL: InvalidGraph,
    ErrorKind.DISPOSED: RuntimeException,
    ErrorKind.CANCELLED: Fail,
}


def translate(e: SessionError, loading: bool = False) -> OrtError:
    """The onnxruntime class for a graphrt error; kind, node and operators are kept."""
    if isinstance(e, OrtError):
        return e
    cls = _BY_KIND[e.kind]
    reason = e.reason
    if e.kind is ErrorKind.INVALID_MODEL and reason.startswith(UNREADABLE):
        cls = InvalidProtobuf
    elif e.kind is ErrorKind.CANCELLED:
        cls = ModelLoadCanceled if loading else Fail
        if not loading:
            reason = f"Exiting due to terminate flag being set to true. ({reason})"
    return cls(reason, e.kind, e.node, e.operators)


@contextlib.contextmanager
def as_onnxruntime(loading: bool = False):
    """Re-raise graphrt's errors as onnxruntime's classes."""
    try:
        yield
    except SessionError as e:
        if isinstance(e, OrtError):
            raise
        raise translate(e, loading) from None
