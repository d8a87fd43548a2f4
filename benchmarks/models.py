"""The benchmark models, built with onnx.helper from operators both runtimes have.

Transformer pieces are written the way exporters write them (LayerNorm from ReduceMean, Sub,
Pow, Sqrt and Div; GELU from Erf or Tanh; a causal mask through Where), so onnxruntime's own
fusions get the chance they get on exported models. Weights are random with a fixed seed.
"""
from __future__ import annotations

import glob
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
OPSET = 17


class Builder:
    """Nodes and initializers of one graph, with fresh names."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, value, hint: str = "c") -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, *shape, scale=0.02) -> str:
        return self.const((scale * self.rng.standard_normal(shape)).astype(np.float32), "w")

    def op(self, op_type: str, *inputs, **attrs) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def model(self, inputs, outputs, name: str) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 8
        return m

    # -- layers ----------------------------------------------------------------------
    def linear(self, x: str, n_in: int, n_out: int) -> str:
        y = self.op("MatMul", x, self.weight(n_in, n_out))
        return self.op("Add", y, self.const(np.zeros(n_out, np.float32), "b"))

    def layer_norm(self, x: str, d: int, eps: float = 1e-5) -> str:
        mean = self.op("ReduceMean", x, axes=[-1])
        c = self.op("Sub", x, mean)
        var = self.op("ReduceMean", self.op("Pow", c, self.const(np.float32(2))), axes=[-1])
        std = self.op("Sqrt", self.op("Add", var, self.const(np.float32(eps))))
        y = self.op("Mul", self.op("Div", c, std), self.const(np.ones(d, np.float32), "g"))
        return self.op("Add", y, self.const(np.zeros(d, np.float32), "b"))

    def gelu_erf(self, x: str) -> str:
        e = self.op("Erf", self.op("Div", x, self.const(np.float32(np.sqrt(2.0)))))
        h = self.op("Mul", x, self.op("Add", e, self.const(np.float32(1.0))))
        return self.op("Mul", h, self.const(np.float32(0.5)))

    def gelu_tanh(self, x: str) -> str:
        x3 = self.op("Pow", x, self.const(np.float32(3.0)))
        inner = self.op("Add", x, self.op("Mul", x3, self.const(np.float32(0.044715))))
        t = self.op("Tanh", self.op("Mul", inner, self.const(np.float32(np.sqrt(2 / np.pi)))))
        h = self.op("Mul", x, self.op("Add", t, self.const(np.float32(1.0))))
        return self.op("Mul", h, self.const(np.float32(0.5)))

    def attention(self, x: str, d: int, heads: int, mask: str | None = None) -> str:
        """Multi-head self-attention on x[batch, seq, d]; ``mask`` (bool [1, 1, seq, seq],
        True where a position may be seen) keeps the scores there and -inf elsewhere."""
        dh = d // heads
        split = self.const(np.array([0, 0, heads, dh], np.int64), "split")
        q = self.op("Transpose", self.op("Reshape", self.linear(x, d, d), split), perm=[0, 2, 1, 3])
        k = self.op("Transpose", self.op("Reshape", self.linear(x, d, d), split), perm=[0, 2, 3, 1])
        v = self.op("Transpose", self.op("Reshape", self.linear(x, d, d), split), perm=[0, 2, 1, 3])
        s = self.op("Div", self.op("MatMul", q, k), self.const(np.float32(np.sqrt(dh))))
        if mask is not None:
            s = self.op("Where", mask, s, self.const(np.float32(-np.inf)))
        p = self.op("Softmax", s, axis=-1)
        a = self.op("Transpose", self.op("MatMul", p, v), perm=[0, 2, 1, 3])
        a = self.op("Reshape", a, self.const(np.array([0, 0, d], np.int64), "merge"))
        return self.linear(a, d, d)


def bert_encoder(hidden=768, heads=12, layers=4, seq=128) -> onnx.ModelProto:
    """Post-LN BERT encoder layers on x[batch, seq, hidden] (the embeddings' output)."""
    b = Builder(seed=1)
    x = "x"
    for _ in range(layers):
        h = b.layer_norm(b.op("Add", x, b.attention(x, hidden, heads)), hidden)
        f = b.linear(b.gelu_erf(b.linear(h, hidden, 4 * hidden)), 4 * hidden, hidden)
        x = b.layer_norm(b.op("Add", h, f), hidden)
    b.nodes.append(helper.make_node("Identity", [x], ["y"]))
    return b.model([helper.make_tensor_value_info("x", F, ["batch", seq, hidden])],
                   [helper.make_tensor_value_info("y", F, ["batch", seq, hidden])], "bert")


def gpt_block(hidden=768, heads=12, seq=128) -> onnx.ModelProto:
    """One pre-LN GPT-2 style decoder block: causal self-attention and a tanh-GELU MLP."""
    b = Builder(seed=2)
    mask = b.const(np.tril(np.ones((seq, seq), bool))[None, None], "causal")
    a = b.attention(b.layer_norm("x", hidden), hidden, heads, mask)
    h = b.op("Add", "x", a)
    f = b.linear(b.gelu_tanh(b.linear(b.layer_norm(h, hidden), hidden, 4 * hidden)),
                 4 * hidden, hidden)
    b.nodes.append(helper.make_node("Add", [h, f], ["y"]))
    return b.model([helper.make_tensor_value_info("x", F, ["batch", seq, hidden])],
                   [helper.make_tensor_value_info("y", F, ["batch", seq, hidden])], "gpt_block")


def mlp(sizes=(32, 128, 128, 8)) -> onnx.ModelProto:
    """Gemm + Relu layers on x[batch, sizes[0]] (the batch-scoring model)."""
    b = Builder(seed=3)
    x = "x"
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        w = b.const((b.rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32))
        x = b.op("Gemm", x, w, b.const((0.1 * b.rng.standard_normal(n_out)).astype(np.float32)))
        if i < len(sizes) - 2:
            x = b.op("Relu", x)
    b.nodes.append(helper.make_node("Identity", [x], ["y"]))
    return b.model([helper.make_tensor_value_info("x", F, ["batch", sizes[0]])],
                   [helper.make_tensor_value_info("y", F, ["batch", sizes[-1]])], "mlp")


def tiny() -> onnx.ModelProto:
    """Five small element-wise and shape operators on x[1, 16]: per-run overhead."""
    b = Builder(seed=4)
    h = b.op("Add", "x", b.const(np.ones(16, np.float32)))
    h = b.op("Mul", h, b.const(np.float32(0.5)))
    h = b.op("Relu", h)
    h = b.op("Reshape", h, b.const(np.array([4, 4], np.int64)))
    b.nodes.append(helper.make_node("ReduceSum", [h, b.const(np.array([1], np.int64))], ["y"],
                                    keepdims=0))
    return b.model([helper.make_tensor_value_info("x", F, [1, 16])],
                   [helper.make_tensor_value_info("y", F, [4])], "tiny")


def light_models() -> dict[str, str]:
    """name -> path of the onnx package's 'light' model zoo copies (weights made by
    ConstantOfShape at load, so the files are small)."""
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    return {os.path.basename(p)[len("light_"):-len(".onnx")]: p
            for p in sorted(glob.glob(os.path.join(root, "light_*.onnx")))}
