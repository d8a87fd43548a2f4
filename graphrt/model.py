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

    def __call__(self, *arrays):
        infos = self.session.inputs
        if len(arrays) != len(infos):
            raise SessionError(ErrorKind.INVALID_INPUT,
                               f"the model takes {len(infos)} input(s), got {len(arrays)}")
        feeds = {info.name: a if isinstance(a, np.ndarray) else np.asarray(a, dtype=info.dtype)
                 for info, a in zip(infos, arrays)}
        outs = self.session.run(None, feeds)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run_into(self, x, out: np.ndarray) -> tuple:
        """Write the output into ``out`` (enough elements, any shape); returns its shape."""
        if not isinstance(x, np.ndarray):
            x = np.asarray(x, dtype=self.session.inputs[0].dtype)
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
