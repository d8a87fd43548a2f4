"""Writes examples/mlp.onnx: a 3-layer MLP (16 -> 64 -> 64 -> 4, Relu, Softmax) with fixed
random weights. The file is committed; this script says how it was made."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    sizes = [16, 64, 64, 4]
    inits, nodes, x = [], [], "x"
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        w = (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
        c = (0.1 * rng.standard_normal(b)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(c, f"B{i}")]
        nodes.append(helper.make_node("Gemm", [x, f"W{i}", f"B{i}"], [f"h{i}"], name=f"layer{i}"))
        x = f"h{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"], name=f"relu{i}"))
            x = f"r{i}"
    nodes.append(helper.make_node("Softmax", [x], ["probs"], axis=-1, name="softmax"))
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="graphrt-example")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp.onnx")
    onnx.save(build(), path)
    print("wrote", path)
