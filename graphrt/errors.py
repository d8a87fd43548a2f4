"""The one exception graphrt raises, and its kinds (docs/contract.md section 4)."""
from __future__ import annotations

from enum import Enum


class ErrorKind(str, Enum):
    UNSUPPORTED_OPERATOR = "UnsupportedOperator"
    EXACT_MODE_UNAVAILABLE = "ExactModeUnavailable"
    INVALID_MODEL = "InvalidModel"
    UNSUPPORTED = "Unsupported"
    INVALID_INPUT = "InvalidInput"
    DISPOSED = "Disposed"
    CANCELLED = "Cancelled"

    def __str__(self) -> str:
        return self.value


class SessionError(Exception):
    """A failure the caller can act on.

    ``kind`` is an :class:`ErrorKind`, ``node`` the name of the node at fault (or None) and
    ``operators`` the operator types concerned (missing or without exact kernels).
    """

    def __init__(self, kind: ErrorKind, message: str, node: str | None = None,
                 operators: tuple[str, ...] = ()):
        self.kind = ErrorKind(kind)
        self.node = node
        self.operators = tuple(operators)
        self.reason = message
        where = f" [node '{node}']" if node is not None else ""
        super().__init__(f"{self.kind}{where}: {message}")
