"""Small ONNX models built with onnx.helper for the tests."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def make(nodes, inputs, outputs, inits=(), opset=17, name="g") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def tensor(name, dtype, dims):
    return helper.make_tensor_value_info(name, dtype, dims)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def mlp(sizes=(16, 64, 64, 4), seed=0, gemm=True) -> onnx.ModelProto:
    """Gemm (or MatMul+Add) layers with Relu between them."""
    rng = np.random.default_rng(seed)
    inits, nodes, x = [], [], "x"
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        inits += [const(f"W{i}", (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)),
                  const(f"B{i}", (0.1 * rng.standard_normal(b)).astype(np.float32))]
        if gemm:
            nodes.append(helper.make_node("Gemm", [x, f"W{i}", f"B{i}"], [f"h{i}"], name=f"gemm{i}"))
        else:
            nodes.append(helper.make_node("MatMul", [x, f"W{i}"], [f"m{i}"], name=f"matmul{i}"))
            nodes.append(helper.make_node("Add", [f"m{i}", f"B{i}"], [f"h{i}"], name=f"add{i}"))
        x = f"h{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"], name=f"relu{i}"))
            x = f"r{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="out"))
    return make(nodes, [tensor("x", F, ["batch", sizes[0]])], [tensor("y", F, ["batch", sizes[-1]])],
                inits, name="mlp")


def transformer_block(d=32, heads=4, seed=0) -> onnx.ModelProto:
    """Self-attention and a feed-forward layer with residuals, conv-free, on x[batch, seq, d].
    The head split reshapes to [0, 0, heads, dh]; the merge reshapes to Shape(x), a chain the
    planner folds to a literal."""
    rng = np.random.default_rng(seed)
    dh = d // heads
    w = lambda *s: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)  # noqa: E731
    b = lambda n: (0.1 * rng.standard_normal(n)).astype(np.float32)  # noqa: E731
    inits = [const("Wq", w(d, d)), const("Wk", w(d, d)), const("Wv", w(d, d)), const("Wo", w(d, d)),
             const("bq", b(d)), const("bk", b(d)), const("bv", b(d)), const("bo", b(d)),
             const("W1", w(d, 2 * d)), const("b1", b(2 * d)), const("W2", w(2 * d, d)), const("b2", b(d)),
             const("split", np.array([0, 0, heads, dh], np.int64)),
             const("scale", np.array(np.sqrt(dh), np.float32)),
             const("gamma", (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)),
             const("mu", b(d))]
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "Wq"], ["q0"]), n("Add", ["q0", "bq"], ["q1"]),
        n("MatMul", ["x", "Wk"], ["k0"]), n("Add", ["k0", "bk"], ["k1"]),
        n("MatMul", ["x", "Wv"], ["v0"]), n("Add", ["v0", "bv"], ["v1"]),
        n("Reshape", ["q1", "split"], ["q2"]), n("Transpose", ["q2"], ["q"], perm=[0, 2, 1, 3]),
        n("Reshape", ["k1", "split"], ["k2"]), n("Transpose", ["k2"], ["kt"], perm=[0, 2, 3, 1]),
        n("Reshape", ["v1", "split"], ["v2"]), n("Transpose", ["v2"], ["v"], perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "kt"], ["s0"]), n("Div", ["s0", "scale"], ["s1"]),
        n("Softmax", ["s1"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["a0"]), n("Transpose", ["a0"], ["a1"], perm=[0, 2, 1, 3]),
        n("Shape", ["x"], ["xs"]), n("Reshape", ["a1", "xs"], ["a2"]),
        n("MatMul", ["a2", "Wo"], ["o0"]), n("Add", ["o0", "bo"], ["o1"]),
        n("Add", ["o1", "x"], ["r1"]),
        n("Sub", ["r1", "mu"], ["c0"]), n("Mul", ["c0", "gamma"], ["c1"]),
        n("MatMul", ["c1", "W1"], ["f0"]), n("Add", ["f0", "b1"], ["f1"]), n("Relu", ["f1"], ["f2"]),
        n("MatMul", ["f2", "W2"], ["f3"]), n("Add", ["f3", "b2"], ["f4"]),
        n("Add", ["f4", "c1"], ["y"]),
    ]
    return make(nodes, [tensor("x", F, ["batch", "seq", d])], [tensor("y", F, ["batch", "seq", d])],
                inits, name="block")


def shapes_model() -> onnx.ModelProto:
    """Flatten, Unsqueeze, Squeeze, Concat, Cast and Constant around an Add."""
    n = helper.make_node
    nodes = [
        n("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [1])),
        n("Unsqueeze", ["x", "axes"], ["u"]),                       # [b, 1, 3, 4]
        n("Squeeze", ["u", "axes"], ["s"]),                         # [b, 3, 4]
        n("Flatten", ["s"], ["f"], axis=1),                         # [b, 12]
        n("Cast", ["f"], ["fd"], to=TensorProto.DOUBLE),
        n("Concat", ["fd", "fd"], ["c"], axis=-1),                  # [b, 24]
        n("Cast", ["c"], ["y"], to=TensorProto.FLOAT),
    ]
    return make(nodes, [tensor("x", F, ["b", 3, 4])], [tensor("y", F, ["b", 24])], name="shapes")


def exact_model(d=96, h=160):
    """Uses every exact-capable operator: Gemm, MatMul, Add, Mul, Relu, Reshape, Identity,
    Constant. Sizes are large enough for the parallel kernels to run."""
    rng = np.random.default_rng(7)
    n = helper.make_node
    inits = [const("W1", rng.standard_normal((d, h)).astype(np.float32)),
             const("b1", rng.standard_normal(h).astype(np.float32)),
             const("W2", rng.standard_normal((h, d)).astype(np.float32)),
             const("shape", np.array([-1, d], np.int64))]
    nodes = [n("Gemm", ["x", "W1", "b1"], ["g"], alpha=0.7, beta=1.3),
             n("Relu", ["g"], ["r"]),
             n("MatMul", ["r", "W2"], ["m"]),
             n("Constant", [], ["c"], value=helper.make_tensor("c", F, [1], [0.5])),
             n("Mul", ["m", "c"], ["s"]),
             n("Add", ["s", "x"], ["t"]),
             n("Reshape", ["t", "shape"], ["u"]),
             n("Identity", ["u"], ["y"])]
    return make(nodes, [tensor("x", F, ["b", d])], [tensor("y", F, ["b", d])], inits)


def custom_model(beta=1.5, lo=-0.5, hi=0.75):
    """Relu, com.example Swish2, Add and com.example Clamp (helpers.OPS runs them)."""
    n = helper.make_node
    model = make([n("Relu", ["x"], ["r"]),
                  n("Swish2", ["x"], ["s"], domain="com.example", beta=beta),
                  n("Add", ["r", "s"], ["t"]),
                  n("Clamp", ["t"], ["y"], domain="com.example", lo=lo, hi=hi)],
                 [tensor("x", F, ["n", 5])], [tensor("y", F, ["n", 5])])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    return model
