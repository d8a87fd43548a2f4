"""onnx.backend adapter, so that onnx's own BackendTest runner can drive graphrt:

    import onnx.backend.test, graphrt.backend
    globals().update(onnx.backend.test.BackendTest(graphrt.backend, __name__).test_cases)
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from .options import SessionOptions
from .session import Session


class GraphrtRep(BackendRep):
    def __init__(self, session: Session):
        self.session = session

    def run(self, inputs, **kwargs):
        infos = self.session.inputs
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            feeds = {info.name: value for info, value in zip(infos, inputs)}
        return tuple(self.session.run(None, {k: _plain(v) for k, v in feeds.items()}))


class GraphrtBackend(Backend):
    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return device.upper().startswith("CPU")

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> GraphrtRep:
        opts = {k: v for k, v in kwargs.items() if k in SessionOptions.__dataclass_fields__}
        src = model if isinstance(model, (onnx.ModelProto, bytes, str)) else model.SerializeToString()
        return GraphrtRep(Session(src, SessionOptions(**opts)))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper().startswith("CPU")


def _plain(value):
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


is_compatible = GraphrtBackend.is_compatible
prepare = GraphrtBackend.prepare
run_model = GraphrtBackend.run_model
supports_device = GraphrtBackend.supports_device
