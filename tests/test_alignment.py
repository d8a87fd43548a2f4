"""Buffers and per-plan layouts that vector kernels stream start on a cache line (64 bytes):
scratch kept by run states (held_buffer), weights laid out once per plan (the products'
constant B, the integer panels, a recurrence's R^T and W^T) and each part of a recurrence's
scratch block. A vector load or store that straddles two lines costs up to twice the time
(a recurrence step's product: 3.8 against 2.3 µs)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphrt
from graphrt.aligned import ALIGN, aligned_copy, aligned_empty
from graphrt.kernels.core.held import held_buffer
from graphrt.kernels.gemm import micro_int, microkernel
from graphrt.kernels.gemm.product import ConstantB


def aligned(a: np.ndarray) -> bool:
    return a.size == 0 or a.ctypes.data % ALIGN == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.float16])
@pytest.mark.parametrize("shape", [(1,), (3,), (5, 7), (17, 3, 2)])
def test_aligned_allocations(dtype, shape):
    for _ in range(8):      # (numpy's own allocations are 16-byte aligned: a few would pass)
        e = aligned_empty(shape, dtype)
        assert aligned(e) and e.shape == shape and e.dtype == dtype and e.flags.c_contiguous
        src = np.arange(np.prod(shape)).reshape(shape)[..., ::-1]
        c = aligned_copy(src, dtype)
        assert aligned(c) and c.flags.c_contiguous and np.array_equal(c, src.astype(dtype))
        assert aligned(held_buffer(dtype, shape, {}))


def test_weight_layouts_are_aligned():
    rng = np.random.default_rng(0)
    for k, n in ((3, 5), (37, 29), (128, 512)):
        b = rng.standard_normal((k, n)).astype(np.float32)
        assert aligned(microkernel.pack_panels(b, np.float32))
        for exact in (False, True):
            assert aligned(ConstantB().of(b, True, np.float64, exact))
        q = rng.integers(-128, 127, (k, n)).astype(np.int8)
        assert aligned(micro_int.pack_b(q, None, k, n)[0])


def _recurrence(op: str, gates: int, seq: int, batch: int, hs: int, isz: int):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((1, gates * hs, isz)).astype(np.float32)
    r = rng.standard_normal((1, gates * hs, hs)).astype(np.float32)
    outs = ["y", "yh"]
    node = helper.make_node(op, ["x", "W", "R"], outs, hidden_size=hs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, isz])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return model, rng.standard_normal((seq, batch, isz)).astype(np.float32)


@pytest.mark.parametrize("op,gates", [("LSTM", 4), ("GRU", 3), ("RNN", 1)])
@pytest.mark.parametrize("seq,batch,hs,isz", [(5, 1, 3, 2), (4, 3, 7, 5), (2, 1, 1, 1)])
def test_recurrence_scratch_parts_and_weights_are_aligned(op, gates, seq, batch, hs, isz):
    model, x = _recurrence(op, gates, seq, batch, hs, isz)
    sess = graphrt.Session(model.SerializeToString(), graphrt.SessionOptions(intra_op_threads=1))
    for _ in range(3):
        sess.run(None, {"x": x})
    (_key, entry), = sess._plans._entries
    state = entry.pool._idle[0]
    steps = [args for calls in state.calls if calls is not None for fn, args in calls
             if "step" in getattr(fn, "__name__", "")]
    assert steps
    for args in steps:
        # x, W^T, x W^T, R^T, the gate rows, GRU's (r h) R^T, bias, peepholes, lens, Y, h,
        # c, r * h
        arrays = [a for a in args[:13] if isinstance(a, np.ndarray) and a.dtype == np.float32]
        inner = [args[i] for i in (1, 2, 3, 4, 5, 10, 11, 12)]
        assert all(aligned(a) for a in inner), [a.ctypes.data % ALIGN for a in inner]
        assert len(arrays) >= len(inner)


def test_initializers_are_aligned():
    from graphrt.importer import read_model
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), f"w{n}")
             for n in (1, 3, 5, 7, 11, 13, 17, 33)]
    node = helper.make_node("Sum", ["x", "w1"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model, _data = read_model(helper.make_model(graph).SerializeToString())
    arrays = model.graph.initializers.values()
    assert len(arrays) == len(inits) and all(aligned(a) for a in arrays)
