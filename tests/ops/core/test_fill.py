"""Large ConstantOfShape fills (graphrt/kernels/core/fill.py): threads share the blocks, streaming
stores past fill.STREAM_BYTES; every bit of the value lands in every element, from any
alignment, whatever the thread count."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphrt
from graphrt.kernels.core import fill

from ...models import make, tensor

NAN_PAYLOAD = np.array([0x7FC01234], np.uint32).view(np.float32)


@pytest.mark.parametrize("value", [NAN_PAYLOAD, np.array([-3], np.int8),
                                   np.array([2.5], np.float16), np.array([-0.0])])
@pytest.mark.parametrize("nbytes", [fill.PARALLEL_FILL + 3, fill.STREAM_BYTES + 7])
def test_large_fills_copy_every_bit(value, nbytes):
    shape = np.array([nbytes // value.itemsize], np.int64)
    model = make([helper.make_node("ConstantOfShape", ["s"], ["y"],
                                   value=numpy_helper.from_array(value))],
                 [tensor("s", TensorProto.INT64, [1])],
                 [tensor("y", helper.np_dtype_to_tensor_dtype(value.dtype), None)])
    want = np.full(shape[0], value[0]).view(np.uint8)
    for threads in (1, 2):
        y = graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=threads)).run(
            None, {"s": shape})[0]
        assert y.dtype == value.dtype and y.view(np.uint8).tobytes() == want.tobytes()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("start", [0, 1, 5, 17])
def test_fill_blocks_from_any_start(stream, start):
    buf = np.zeros(fill.BLOCK_BYTES // 2 * 3 + 40, np.uint16)
    out = buf[start:buf.size - 3]
    fill.fill_blocks(out, np.uint16(0xBEEF), stream and fill.STREAMS)
    assert (out == 0xBEEF).all()
    assert not buf[:start].any() and not buf[buf.size - 3:].any()
