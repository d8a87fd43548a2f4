"""The onnxscript models of tests/exporters/make.py (imported by it only, with onnxscript
installed; onnxscript reads these functions' annotations from the module's globals, so
they live outside make.py's lazy imports)."""
import numpy as np
import onnxscript
from onnx import numpy_helper
from onnxscript import FLOAT, INT64, script
from onnxscript import opset18 as op

local = onnxscript.values.Opset("this.local", 1)


@script(local, default_opset=op)
def gelu_tanh(x):
    inner = op.Constant(value_float=0.7978845608028654) * (
        x + op.Constant(value_float=0.044715) * x * x * x)
    return op.Constant(value_float=0.5) * x * (op.Constant(value_float=1.0) + op.Tanh(inner))


@script(local, default_opset=op)
def layer_norm(x, gamma, beta):
    mean = op.ReduceMean(x, op.Constant(value_ints=[-1]), keepdims=1)
    d = x - mean
    var = op.ReduceMean(d * d, op.Constant(value_ints=[-1]), keepdims=1)
    return d / op.Sqrt(var + op.Constant(value_float=1e-5)) * gamma + beta


@script(default_opset=op)
def mlp(x: FLOAT["N", 16], w1: FLOAT[16, 32], b1: FLOAT[32], g: FLOAT[32], b: FLOAT[32],
        w2: FLOAT[32, 4], b2: FLOAT[4]) -> FLOAT["N", 4]:
    h = gelu_tanh(op.MatMul(x, w1) + b1)
    h = layer_norm(h, g, b)
    return op.Softmax(op.MatMul(h, w2) + b2, axis=-1)


@script(default_opset=op)
def control(x: FLOAT["N", 8], steps: INT64) -> (FLOAT["N", 8], FLOAT["N"]):
    # If: a branch chosen by the data
    total = op.ReduceSum(x, keepdims=0)
    if total > op.Constant(value_float=0.0):
        y = op.Relu(x)
    else:
        y = op.Neg(op.Abs(x))
    # Loop: a trip count from an input and a carried value
    acc = op.Identity(y)
    for i in range(steps):
        acc = op.Tanh(acc * op.Constant(value_float=0.9)
                      + op.CastLike(i, acc) * op.Constant(value_float=0.1))
    # a while loop: a Loop with a condition and no trip count
    n = op.ReduceMax(op.Abs(acc), op.Constant(value_ints=[1]), keepdims=0)
    k = op.Constant(value_float=0.0)
    cond = op.Constant(value_int=1) > op.Constant(value_int=0)
    while cond:
        n = n * op.Constant(value_float=0.5)
        k = k + op.Constant(value_float=1.0)
        cond = op.ReduceMax(n, keepdims=0) > op.Constant(value_float=0.01)
    return acc, n + k


def mlp_model(rng):
    """mlp with its weights as initializers (graph inputs no longer)."""
    proto = mlp.to_model_proto(ir_version=10)
    weights = {"w1": (0.3 * rng.standard_normal((16, 32))).astype(np.float32),
               "b1": (0.1 * rng.standard_normal(32)).astype(np.float32),
               "g": rng.uniform(0.5, 1.5, 32).astype(np.float32),
               "b": (0.1 * rng.standard_normal(32)).astype(np.float32),
               "w2": (0.3 * rng.standard_normal((32, 4))).astype(np.float32),
               "b2": (0.1 * rng.standard_normal(4)).astype(np.float32)}
    for name, value in weights.items():
        proto.graph.initializer.append(numpy_helper.from_array(value, name))
    keep = [i for i in proto.graph.input if i.name not in weights]
    del proto.graph.input[:]
    proto.graph.input.extend(keep)
    return proto


def control_model():
    return control.to_model_proto(ir_version=10)
