"""The happy path: ``graphrt.load(src)(x)`` with no names, shapes or ONNX vocabulary."""
from __future__ import annotations

import numpy as np

from .errors import ErrorKind, SessionError
from .options import SessionOptions
from .session import Session


class Model:
    """Call it with the model's inputs in order; get one array (or a tuple for several)."""

    def __init__(self, session: Session):
        self.session = session
        self._inputs = tuple((i.name, i.dtype) for i in session.inputs)

    def __call__(self, *arrays):
        inputs = self._inputs
        if len(arrays) != len(inputs):
            raise SessionError(ErrorKind.INVALID_INPUT,
                               f"the model takes {len(inputs)} input(s), got {len(arrays)}")
        feeds = {name: a if isinstance(a, np.ndarray) else np.asarray(a, dtype=dtype)
                 for (name, dtype), a in zip(inputs, arrays)}
        outs = self.session.run(None, feeds)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run_into(self, x, out: np.ndarray) -> tuple:
        """Write the output into ``out`` (enough elements, any shape); returns its shape."""
        if not isinstance(x, np.ndarray) and self._inputs:
            x = np.asarray(x, dtype=self._inputs[0][1])
        return self.session.run_into(x, out)

    @property
    def inputs(self):
        return self.session.inputs

    @property
    def outputs(self):
        return self.session.outputs

    def close(self) -> None:
        self.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        return (Model, (self.session,))


def load(src, **options) -> Model:
    """Load a model from a path, bytes, a binary file object or an onnx.ModelProto.
    Keyword options are those of SessionOptions (mode="exact", intra_op_threads=1, ...)."""
    return Model(Session(src, SessionOptions(**options)))
