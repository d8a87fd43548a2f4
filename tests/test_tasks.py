"""Parallel forms of task bodies (graphrt/kernels/core/tasks.py): the serial form's code run
on the threads, each task once, with the serial form's bits, loaded from the cache by later
processes."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numba
import numpy as np
import onnx
import pytest
from numba import prange
from onnx import TensorProto, helper

from graphrt.kernels.core import tasks
from graphrt.kernels.core.jit import Variants, source_of
from graphrt.kernels.core.pointwise import in_place_form
from graphrt.kernels.elementwise.arithmetic import ADD_VARIANTS
from graphrt.threads import available

from .helpers import RECORD_COMPILES, ROOT


def _count(x, out, hits, width, tasks):
    # (the width a run-time value, as the blocks of graphrt's templates are: with a constant
    # 8, LLVM vectorised across tasks, and on AVX2 its vector path left a multiply-add
    # uncontracted that the scalar remainder fused, so a task's bits depended on which
    # tasks shared its run)
    for t in prange(tasks):
        hits[t] += 1
        for j in range(t * width, t * width + width):
            out[j] = math.sin(x[j]) * 1.5 + x[j] / 3.0


def _reads_count(out, tasks):
    for t in prange(tasks):
        out[t] = tasks


def _two_loops(out, tasks):
    for t in prange(tasks):
        out[t] = 1
    for t in prange(tasks):
        out[t] += 1


def _after(out, tasks):
    for t in prange(tasks):
        out[t] = 1
    out[0] = 2


def _raises(out, tasks):
    for t in prange(tasks):
        if t > 10:
            raise ValueError("no")


def _expression(out, n):
    for t in prange(n // 2):
        out[t] = 1


def test_only_one_top_level_loop_over_a_parameter_counts():
    assert tasks.count_parameter(_count.__code__, source_of(_count.__code__)) == 4
    for template in (_reads_count, _two_loops, _after, _raises, _expression):
        code = template.__code__
        assert tasks.count_parameter(code, source_of(code)) is None, template.__name__


_COUNT = Variants(_count, "test_tasks_count", parallel=True)


@pytest.mark.parametrize("exact", [False, True])
def test_the_parallel_form_runs_each_task_once_with_the_serial_bits(exact):
    par, ser = _COUNT.forms(exact)
    assert isinstance(par, tasks.TaskDispatcher)
    before = numba.get_num_threads()
    try:
        for threads in sorted({1, min(2, available())}):
            numba.set_num_threads(threads)
            for n in (0, 1, 2, 3, 7, 100):
                x = np.linspace(-3, 3, 8 * n + 8)
                want, got = np.zeros_like(x), np.zeros_like(x)
                hits_ser, hits_par = np.zeros(n + 1, np.int64), np.zeros(n + 1, np.int64)
                ser(x, want, hits_ser, 8, n)
                par(x, got, hits_par, 8, n)
                assert hits_par.tolist() == [1] * n + [0] == hits_ser.tolist()
                assert got.tobytes() == want.tobytes()
    finally:
        numba.set_num_threads(before)


def test_element_wise_kernels_take_the_task_form():
    par, in_place = ADD_VARIANTS.pick("rows", False, True)
    assert isinstance(par, tasks.TaskDispatcher) and isinstance(in_place, tasks.TaskDispatcher)
    x = np.zeros(4, np.float32)
    assert in_place_form((par, in_place), x, x) is in_place


# Runs Add, Relu and Softmax over [256, 512] (parallel forms at 2 threads) and prints the
# graphrt functions this process compiled (not loaded) and the result's bytes.
SCRIPT = RECORD_COMPILES + r"""
import json, sys
import numpy as np
import graphrt
sess = graphrt.Session(sys.argv[1], graphrt.SessionOptions(intra_op_threads=int(sys.argv[2])))
x = np.sin(np.arange(256 * 512, dtype=np.float32)).reshape(256, 512)
out = sess.run(None, {"x": x})[0]
print(json.dumps({"names": [n for n in compiled if "tasks" in n or "_par_" in n],
                  "bytes": out.tobytes().hex()}))
"""


def test_a_later_process_loads_the_parallel_forms_from_the_cache(tmp_path):
    if available() < 2:
        pytest.skip("one core: no parallel forms")
    nodes = [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y"])]
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [256, 512]) for n in "xy"]
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", info[:1], info[1:]),
                                opset_imports=[helper.make_opsetid("", 17)]), path)
    env = {"GRAPHRT_CACHE_DIR": str(tmp_path / "cache"), "GRAPHRT_SERIAL_FIRST": "0",
           "GRAPHRT_COMPILE_HELPER": "0", "PYTHONPATH": ROOT}
    runs = []
    for threads in (2, 2, 1):
        proc = subprocess.run([sys.executable, "-c", SCRIPT, path, str(threads)], cwd=ROOT,
                              env=dict(__import__("os").environ, **env), capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert any("tasks" in n for n in runs[0]["names"])
    assert runs[1]["names"] == []
    assert runs[0]["bytes"] == runs[1]["bytes"] == runs[2]["bytes"]
