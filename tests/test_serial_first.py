"""A cold first run takes serial kernels; their parallel forms are compiled by the helper
process and the next plan takes them (graphrt/plan/warm.py). Each case runs in a fresh
process with an empty kernel cache of its own."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from .helpers import RECORD_COMPILES

CHILD = RECORD_COMPILES + r"""
import json, sys
import numpy as np
from onnx import TensorProto, helper
import graphrt

op, exact = sys.argv[1], sys.argv[2] == "exact"
x = np.random.default_rng(0).standard_normal((64, 32, 48)).astype(np.float32)
x[3, 4, 5] = np.nan
inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)]
feeds = {"X": x}
if op == "Softmax":
    nodes = [helper.make_node(op, ["X"], ["Y"], axis=-1)]
elif op == "Chain":      # the middle steps run in place: each its kernel's in-place twin
    nodes = [helper.make_node("Relu", ["X"], ["R"]), helper.make_node("Sigmoid", ["R"], ["S"]),
             helper.make_node("Tanh", ["S"], ["T"]), helper.make_node("Neg", ["T"], ["Y"])]
elif op == "Quantize":   # the 8-bit path of one scale: the general kernel is not asked for
    nodes = [helper.make_node("QuantizeLinear", ["X", "S", "Z"], ["Q"]),
             helper.make_node("DequantizeLinear", ["Q", "S", "Z"], ["Y"])]
    for name, v, t in (("S", 0.05, TensorProto.FLOAT), ("Z", 128, TensorProto.UINT8)):
        inputs.append(helper.make_tensor_value_info(name, t, []))
        feeds[name] = np.array(v, helper.tensor_dtype_to_np_dtype(t))
elif op == "MaxPool":
    nodes = [helper.make_node("Relu", ["X"], ["R"]),
             helper.make_node("MaxPool", ["R"], ["Y"], kernel_shape=[3], pads=[1, 1])]
else:   # BatchNormalization: plans ask for the general walk's parallel form and run planes
    c = x.shape[1]
    nodes = [helper.make_node("BatchNormalization", ["X", "S", "B", "M", "V"], ["Y"])]
    for name, v in zip("SBMV", (1.5, 0.25, 0.1, 2.0)):
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [c]))
        feeds[name] = np.full(c, v, np.float32)
graph = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
sess = graphrt.Session(model, graphrt.SessionOptions(
    intra_op_threads=2, mode="exact" if exact else "fast"))
first = sess.run(None, feeds)[0]
report = {"first": [n for n in compiled if "_par_" in n or "_tasks_" in n]}
report["waited"] = sess.wait_for_schedules(600)
compiled.clear()
later = sess.run(None, feeds)[0]
report["later"] = [n for n in compiled if "_par_" in n or "_tasks_" in n]
report["same"] = first.tobytes() == later.tobytes()
for _ in range(3):      # the plan made again stays
    sess.wait_for_schedules(600)
    report["same"] = report["same"] and sess.run(None, feeds)[0].tobytes() == first.tobytes()
report["builds"] = sess.plans_built
np.save(sys.argv[3], first)
print(json.dumps(report))
"""


def _child(tmp_path, op, mode, serial_first):
    env = dict(os.environ, GRAPHRT_CACHE_DIR=str(tmp_path / f"cache-{serial_first}"),
               GRAPHRT_SERIAL_FIRST=serial_first, GRAPHRT_COMPILE_HELPER="1")
    env.pop("NUMBA_CACHE_DIR", None)
    out = tmp_path / f"y-{serial_first}.npy"
    proc = subprocess.run([sys.executable, "-c", CHILD, op, mode, str(out)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), np.load(out)


@pytest.mark.skipif(os.cpu_count() < 2, reason="one core: no helper process, no parallel kernels")
@pytest.mark.parametrize("op,mode", [("Softmax", "fast"), ("MaxPool", "fast"), ("Softmax", "exact"),
                                     ("BatchNormalization", "exact")])
def test_a_cold_first_run_takes_serial_kernels_then_the_parallel_ones(tmp_path, op, mode):
    report, first = _child(tmp_path, op, mode, "1")
    assert report["first"] == []            # no parallel kernel compiled for the first result
    assert report["waited"]
    assert report["builds"] == 2            # planned again once, with the parallel kernels...
    assert report["later"] == []            # ... which the helper compiled: loaded, not compiled
    assert report["same"]                   # the same bits
    # and the bits of a process that took the parallel kernels from its first run
    plain, want = _child(tmp_path, op, mode, "0")
    assert plain["first"] != [] and plain["builds"] == 1
    assert first.tobytes() == want.tobytes()


@pytest.mark.skipif(os.cpu_count() < 2, reason="one core: no helper process, no parallel kernels")
@pytest.mark.parametrize("op", ["Chain", "Quantize"])
def test_a_warm_cache_is_not_taken_for_a_cold_one(tmp_path, op):
    """A plan asks for both forms of a step that may run in place and runs one of them: a
    second process over the cache the first one filled plans once, with its parallel
    kernels from the first run (it used to take the unused form's missing index for a cold
    cache and plan twice, starting the helper process for nothing). QuantizeLinear's common
    case asked for its general kernel's parallel form, which never ran and so was never
    compiled: every process planned twice."""
    first, y1 = _child(tmp_path, op, "fast", "1")
    assert first["builds"] == 2 and first["first"] == []
    second, y2 = _child(tmp_path, op, "fast", "1")
    assert second["builds"] == 1 and second["first"] == [] and second["later"] == []
    assert y1.tobytes() == y2.tobytes()
