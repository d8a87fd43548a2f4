"""graphrt's reading of ONNX protobuf without the onnx package (graphrt/onnx_proto.py):
every tensor as onnx's numpy_helper reads it, external data too, no onnx import, and no
clash with onnx's own classes."""
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto as T, external_data_helper, helper, numpy_helper

import graphrt
from graphrt import dtypes, onnx_proto

from .models import F, make, tensor

rng = np.random.default_rng(5)
CODES = [c for c in range(1, 27) if dtypes.to_numpy(c) is not None]


def _values(code, shape):
    dt, size = dtypes.to_numpy(code), int(np.prod(shape))
    if code == T.STRING:
        return np.array([f"s{i}é" for i in range(size)], dtype=object).reshape(shape)
    if dt.kind == "b":
        return rng.integers(0, 2, size).astype(bool).reshape(shape)
    if dt.kind == "c":
        return (rng.standard_normal(size) + 1j * rng.standard_normal(size)).astype(dt).reshape(shape)
    if code in (T.UINT4, T.INT4, T.UINT2, T.INT2):
        lo, hi = {T.UINT4: (0, 16), T.INT4: (-8, 8), T.UINT2: (0, 4), T.INT2: (-2, 2)}[code]
        return rng.integers(lo, hi, size).astype(dt).reshape(shape)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), size).astype(dt).reshape(shape)
    return (rng.standard_normal(size) * 3).astype(dt).reshape(shape)


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "typed"])
@pytest.mark.parametrize("code", CODES, ids=[dtypes.name_of_code(c) for c in CODES])
def test_a_tensor_reads_as_onnx_reads_it(code, raw):
    if code == T.STRING and raw:
        pytest.skip("strings have no raw form")
    for shape in [(), (5,), (3, 4), (2, 3, 3)]:
        v = _values(code, shape)
        t = numpy_helper.from_array(v) if raw else helper.make_tensor(
            "t", code, shape, v.reshape(-1) if v.dtype.kind == "c" else v.reshape(-1).tolist())
        want = numpy_helper.to_array(t)
        got = onnx_proto.to_array(onnx_proto.TensorProto.FromString(t.SerializeToString()))
        assert got.dtype == want.dtype and got.shape == want.shape
        if want.dtype == object:
            assert got.tolist() == want.tolist()
        else:
            assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("code", [T.FLOAT, T.FLOAT16, T.INT4, T.UINT2, T.BOOL])
def test_external_data_reads_as_in_line(tmp_path, code):
    """A model whose weight lives in a file beside it gives what it gives in line."""
    w = _values(code, (3, 5))
    model = make([helper.make_node("Identity", ["w"], ["y"])], [tensor("x", F, [1])],
                 [tensor("y", code, None)], [numpy_helper.from_array(w, "w")])
    inline = graphrt.Session(model.SerializeToString()).run(None, {"x": np.zeros(1, np.float32)})[0]
    external_data_helper.convert_model_to_external_data(model, location="w.bin", size_threshold=0)
    path = os.path.join(tmp_path, "m.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    external_data_helper.write_external_data_tensors(model, str(tmp_path))
    got = graphrt.Session(path).run(None, {"x": np.zeros(1, np.float32)})[0]
    assert got.dtype == inline.dtype and got.tobytes() == inline.tobytes()
    assert inline.tobytes() == numpy_helper.to_array(numpy_helper.from_array(w)).tobytes()


def test_no_onnx_import_and_no_clash_with_onnx(tmp_path):
    """A session made and run from a file imports no onnx; onnx imported after it loads
    models as ever, and a session takes onnx's ModelProto."""
    path = os.path.join(tmp_path, "m.onnx")
    model = make([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", F, [3])], [tensor("y", F, [3])])
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    code = f"""
import sys, numpy as np, graphrt
x = np.array([-1, 0, 2], np.float32)
assert graphrt.Session({path!r}).run(None, {{"x": x}})[0].tolist() == [0, 0, 2]
assert "onnx" not in sys.modules, "onnx was imported"
import onnx
m = onnx.load({path!r})
onnx.checker.check_model(m)
assert graphrt.Session(m).run(None, {{"x": x}})[0].tolist() == [0, 0, 2]
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
