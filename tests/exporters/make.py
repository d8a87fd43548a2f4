"""Make the exporter fixtures: small real models from exporters other than torch's dynamo.

    pip install -e ".[exporters]"      # tensorflow-cpu, tf2onnx, paddlepaddle, torch, onnxscript, ...
    pip install --no-deps paddle2onnx==2.1.0   # it pins onnx<=1.17: keep graphrt's onnx
    python -m tests.exporters.make [--only tf2onnx paddle torch onnxscript]

Run by hand, never in CI: the exporters are large (TensorFlow alone is ~600 MB) and the
fixtures they write are committed. Each model has random, seeded weights and a size a
test can afford; it is written to ``tests/exporters/models/<name>.onnx`` with its inputs in
``<name>.npz`` (keys are the graph's input names) and, where one more input set says
something the first doesn't, ``<name>.<variant>.npz``. ``models/manifest.json`` records for
each model its exporter and framework versions, opset, size and operator counts.

What it makes:

- tf2onnx (Keras 3 models through ``tf2onnx.convert.from_keras``):
  ``tf2onnx_byte_classifier`` Embedding + Conv1D + LayerNormalization + GlobalMaxPool + Dense +
  LayerNormalization + Dense softmax over int32 bytes; tf2onnx spells both layer norms out
  (GlobalAveragePool or ReduceMean, Sub, Mul, Sqrt, Reciprocal, Mul, Add), and the
  ``padded`` input set is zero-padded, nearly constant text. ``tf2onnx_cnn`` an NHWC image
  CNN (Conv2D, BatchNormalization, DepthwiseConv2D, pooling, Dense). ``tf2onnx_rnn`` an
  LSTM + GRU sequence model (opset 13).
- paddle2onnx (``paddle.onnx.export``): ``paddle_cnn`` a classifier whose input is declared
  [-1, 3, -1, -1] (``other_size`` feeds another H x W), ``paddle_transformer`` an encoder
  layer over [-1, -1, 32] with mean pooling, ``paddle_mlp`` Linear/GELU/LayerNorm.
- torch's TorchScript exporter (``torch.onnx.export(..., dynamo=False)``), opsets 9, 11, 13:
  ``torch_cnn_opsetN`` Conv/ReLU/BatchNorm (after the ReLU, so not folded)/Upsample (nearest
  at 9, bilinear after)/pooling, ``torch_lstm_opsetN`` a two-layer bidirectional LSTM,
  ``torch_attention_opsetN`` (11, 13) a post-norm encoder block written out in view/matmul/
  softmax/LayerNorm/GELU; ``torch_transformer_opset14`` nn.TransformerEncoderLayer, which
  the exporter takes at opset 14 only (aten::unflatten needs 13, scaled_dot_product_attention 14).
- onnxscript (``@script``): ``onnxscript_mlp`` a model whose graph calls two local functions
  (a tanh GELU and a layer norm, kept as FunctionProtos in domain this.local),
  ``onnxscript_mlp_inlined`` the same after onnx.inliner.inline_local_functions,
  ``onnxscript_control`` If, a for-range Loop and a while Loop.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import warnings
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "models")
MANIFEST = os.path.join(OUT, "manifest.json")


# ---------------------------------------------------------------------------- writing

def _write(name, model, inputs, exporter, versions, variants=None):
    """Save ``model`` (a ModelProto) as <name>.onnx and its input sets; return the manifest row.

    ``inputs`` and each of ``variants`` (name -> list) are lists of arrays in the order of
    the graph's (non-initializer) inputs."""
    import onnx
    onnx.checker.check_model(model, full_check=True)
    path = os.path.join(OUT, name + ".onnx")
    onnx.save(model, path)
    inits = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    sets = {"": inputs, **(variants or {})}
    for key, arrays in sets.items():
        if len(arrays) != len(names):
            raise ValueError(f"{name}{'.' + key if key else ''}: {len(arrays)} arrays for inputs {names}")
        np.savez(os.path.join(OUT, name + (f".{key}" if key else "") + ".npz"),
                 **dict(zip(names, arrays)))
    ops = Counter(n.op_type for n in model.graph.node)
    for f in model.functions:
        ops.update(f"{f.name}:{n.op_type}" for n in f.node)
    opset = {d.domain or "ai.onnx": d.version for d in model.opset_import}
    row = {"exporter": exporter, "versions": versions, "opset": opset,
           "bytes": os.path.getsize(path), "inputs": names,
           "variants": sorted(k for k in sets if k), "operators": dict(sorted(ops.items()))}
    print(f"  {name}: {row['bytes']} bytes, opset {opset}, {sum(ops.values())} nodes", flush=True)
    return row


# ---------------------------------------------------------------------------- tf2onnx

def make_tf2onnx():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tf2onnx
    keras = tf.keras
    L = keras.layers
    versions = {"tensorflow": tf.__version__, "keras": keras.__version__, "tf2onnx": tf2onnx.__version__}

    def randomize(model, seed):
        """Trained-looking weights: Keras zero-initialises biases and BatchNorm statistics and
        sets LayerNorm's gamma to one, so the export would hide the terms that use them."""
        rng = np.random.default_rng(seed)
        for layer in model.layers:
            ws = layer.get_weights()
            if not ws:
                continue
            new = []
            for w, v in zip(layer.weights, ws):
                tag = w.path.split("/")[-1]
                if tag in ("moving_variance", "gamma"):
                    new.append(rng.uniform(0.5, 1.5, v.shape).astype(v.dtype))
                elif tag in ("bias", "beta", "moving_mean"):
                    new.append((0.1 * rng.standard_normal(v.shape)).astype(v.dtype))
                else:
                    new.append(v)
            layer.set_weights(new)
        return model

    def export(model, spec, opset):
        proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=opset)
        return proto

    rows = {}
    rng = np.random.default_rng(100)

    # a byte-level text classifier
    keras.utils.set_random_seed(1)
    inp = keras.Input((128,), dtype="int32", name="bytes")
    x = L.Embedding(256, 32)(inp)
    x = L.Conv1D(48, 5, padding="same", activation="relu")(x)
    x = L.LayerNormalization(epsilon=1e-6)(x)
    x = L.GlobalMaxPooling1D()(x)
    x = L.Dense(32, activation="relu")(x)
    x = L.LayerNormalization(epsilon=1e-3)(x)
    x = L.Dense(6, activation="softmax", name="probs")(x)
    model = randomize(keras.Model(inp, x), 1)
    proto = export(model, (tf.TensorSpec((None, 128), tf.int32, name="bytes"),), 17)
    text = rng.integers(0, 256, (4, 128)).astype(np.int32)
    padded = np.zeros((4, 128), np.int32)
    for row, s in enumerate([b"hi", b"ok then", b"", b"GET / HTTP/1.1"]):
        padded[row, :len(s)] = np.frombuffer(s, np.uint8)
    rows["tf2onnx_byte_classifier"] = _write("tf2onnx_byte_classifier", proto, [text], "tf2onnx",
                                             versions, {"padded": [padded]})

    # an NHWC image CNN
    keras.utils.set_random_seed(2)
    inp = keras.Input((24, 24, 3), name="image")
    x = L.Conv2D(12, 3, padding="same", use_bias=False)(inp)
    x = L.BatchNormalization()(x)
    x = L.ReLU(max_value=6.0)(x)
    x = L.MaxPooling2D(2)(x)
    x = L.DepthwiseConv2D(3, padding="same")(x)
    x = L.BatchNormalization()(x)
    x = L.Activation("swish")(x)
    x = L.Conv2D(24, 1)(x)
    x = L.AveragePooling2D(2)(x)
    x = L.Conv2D(24, 3, strides=2, padding="valid", activation="relu")(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(10, activation="softmax", name="probs")(x)
    model = randomize(keras.Model(inp, x), 2)
    proto = export(model, (tf.TensorSpec((None, 24, 24, 3), tf.float32, name="image"),), 15)
    img = rng.random((3, 24, 24, 3), dtype=np.float32)
    rows["tf2onnx_cnn"] = _write("tf2onnx_cnn", proto, [img], "tf2onnx", versions)

    # LSTM + GRU over a float sequence
    keras.utils.set_random_seed(3)
    inp = keras.Input((None, 8), name="seq")
    x = L.LSTM(16, return_sequences=True)(inp)
    x = L.GRU(12)(x)
    x = L.Dense(3, name="out")(x)
    model = randomize(keras.Model(inp, x), 3)
    proto = export(model, (tf.TensorSpec((None, None, 8), tf.float32, name="seq"),), 13)
    seq = rng.standard_normal((2, 15, 8)).astype(np.float32)
    rows["tf2onnx_rnn"] = _write("tf2onnx_rnn", proto, [seq], "tf2onnx", versions,
                                 {"long": [rng.standard_normal((1, 40, 8)).astype(np.float32)]})
    return rows


# ---------------------------------------------------------------------------- paddle2onnx

def make_paddle():
    import tempfile

    import onnx
    import paddle
    import paddle2onnx
    nn = paddle.nn
    versions = {"paddlepaddle": paddle.__version__, "paddle2onnx": paddle2onnx.__version__}
    rng = np.random.default_rng(200)

    def randomize(layer, seed):
        """Non-trivial BatchNorm statistics, biases and LayerNorm affine terms."""
        r = np.random.default_rng(seed)
        for name, p in layer.state_dict().items():
            v = p.numpy()
            if name.endswith("_variance") or (v.ndim == 1 and name.endswith("weight")):
                v = r.uniform(0.5, 1.5, v.shape)          # BatchNorm variance, norm scales
            elif name.endswith(("bias", "_mean")):
                v = 0.1 * r.standard_normal(v.shape)
            else:
                continue
            p.set_value(v.astype(p.numpy().dtype))
        return layer

    def export(layer, spec, opset):
        layer.eval()
        with tempfile.TemporaryDirectory() as d:
            base = os.path.join(d, "m")
            paddle.onnx.export(layer, base, input_spec=spec, opset_version=opset)
            return onnx.load(base + ".onnx")

    rows = {}

    class CNN(nn.Layer):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2D(3, 8, 3, padding=1, bias_attr=False), nn.BatchNorm2D(8), nn.ReLU(),
                nn.MaxPool2D(2, 2),
                nn.Conv2D(8, 16, 3, padding=1, groups=2), nn.BatchNorm2D(16), nn.Hardswish(),
                nn.Conv2D(16, 16, 3, stride=2, padding=1), nn.ReLU6())
            self.pool = nn.AdaptiveAvgPool2D(1)
            self.fc = nn.Linear(16, 5)

        def forward(self, x):
            x = self.pool(self.body(x))
            return nn.functional.softmax(self.fc(paddle.flatten(x, 1)), axis=-1)

    paddle.seed(4)
    spec = [paddle.static.InputSpec([-1, 3, -1, -1], "float32", "image")]
    proto = export(randomize(CNN(), 4), spec, 13)
    rows["paddle_cnn"] = _write(
        "paddle_cnn", proto, [rng.random((2, 3, 32, 32), dtype=np.float32)], "paddle2onnx",
        versions, {"other_size": [rng.random((1, 3, 20, 28), dtype=np.float32)]})

    class Encoder(nn.Layer):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu",
                                                    normalize_before=True)
            self.head = nn.Linear(32, 4)

        def forward(self, x):
            return self.head(self.layer(x).mean(axis=1))

    paddle.seed(5)
    spec = [paddle.static.InputSpec([-1, -1, 32], "float32", "tokens")]
    proto = export(randomize(Encoder(), 5), spec, 14)
    rows["paddle_transformer"] = _write(
        "paddle_transformer", proto, [rng.standard_normal((2, 10, 32)).astype(np.float32)],
        "paddle2onnx", versions)

    class MLP(nn.Layer):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.LayerNorm(64),
                                     nn.Linear(64, 32), nn.Sigmoid(), nn.Linear(32, 3))

        def forward(self, x):
            return nn.functional.log_softmax(self.net(x), axis=-1)

    paddle.seed(6)
    spec = [paddle.static.InputSpec([-1, 20], "float32", "features")]
    proto = export(randomize(MLP(), 6), spec, 11)
    rows["paddle_mlp"] = _write("paddle_mlp", proto,
                                [rng.standard_normal((8, 20)).astype(np.float32)],
                                "paddle2onnx", versions)
    return rows


# ---------------------------------------------------------------------------- torch (TorchScript)

def make_torch():
    import io

    import onnx
    import torch
    nn = torch.nn
    versions = {"torch": torch.__version__}
    rng = np.random.default_rng(300)

    def randomize(module, seed):
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for m in module.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                    m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
                    m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
        return module.eval()

    def export(module, args, names, outputs, dynamic, opset):
        buf = io.BytesIO()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, args, buf, dynamo=False, opset_version=opset,
                              input_names=names, output_names=outputs, dynamic_axes=dynamic)
        return onnx.load_from_string(buf.getvalue())

    class CNN(nn.Module):
        def __init__(self, mode):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(8)          # after the ReLU: not folded into the Conv
            self.up = nn.Upsample(scale_factor=2, mode=mode,
                                  **({} if mode == "nearest" else {"align_corners": False}))
            self.conv = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.bn2 = nn.BatchNorm2d(16)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(16, 7)

        def forward(self, x):
            x = self.bn1(torch.relu(self.stem(x)))
            x = self.up(x)
            x = torch.relu(self.bn2(self.conv(x)))
            x = self.pool(x)
            x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
            return torch.softmax(self.fc(x), dim=1)

    class LSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(6, 12, num_layers=2, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(24, 4)

        def forward(self, x):
            y, (h, c) = self.rnn(x)
            return self.fc(y[:, -1]), h

    class Attention(nn.Module):
        """A post-norm encoder block written out: the exporter sees view/transpose/matmul."""

        def __init__(self, d=32, heads=4):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.norm1 = nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            self.norm2 = nn.LayerNorm(d)
            self.head = nn.Linear(d, 3)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
            y = (a @ v).transpose(1, 2).reshape(b, t, d)
            x = self.norm1(x + self.proj(y))
            x = self.norm2(x + self.ff(x))
            return self.head(x.mean(dim=1))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
            self.head = nn.Linear(32, 3)

        def forward(self, x):
            return self.head(self.layer(x)[:, 0])

    # eval mode's fused encoder kernel (aten::_transformer_encoder_layer_fwd) has no ONNX
    # symbolic: export the layer as its composite ops
    torch.backends.mha.set_fastpath_enabled(False)
    rows = {}
    for opset in (9, 11, 13):
        torch.manual_seed(opset)
        mode = "nearest" if opset == 9 else "bilinear"
        x = rng.random((2, 3, 16, 16), dtype=np.float32)
        name = f"torch_cnn_opset{opset}"
        proto = export(randomize(CNN(mode), opset), (torch.from_numpy(x),), ["image"], ["probs"],
                       {"image": {0: "batch"}, "probs": {0: "batch"}}, opset)
        rows[name] = _write(name, proto, [x], "torch.onnx (TorchScript)", versions)

        torch.manual_seed(10 + opset)
        x = rng.standard_normal((3, 9, 6)).astype(np.float32)
        name = f"torch_lstm_opset{opset}"
        proto = export(randomize(LSTM(), opset), (torch.from_numpy(x),), ["seq"], ["logits", "h"],
                       {"seq": {0: "batch", 1: "time"}, "logits": {0: "batch"}, "h": {1: "batch"}},
                       opset)
        rows[name] = _write(name, proto, [x], "torch.onnx (TorchScript)", versions,
                            {"short": [rng.standard_normal((1, 2, 6)).astype(np.float32)]})

        if opset >= 11:
            torch.manual_seed(20 + opset)
            x = rng.standard_normal((2, 7, 32)).astype(np.float32)
            name = f"torch_attention_opset{opset}"
            proto = export(randomize(Attention(), opset), (torch.from_numpy(x),), ["tokens"],
                           ["logits"], {"tokens": {0: "batch", 1: "seq"}, "logits": {0: "batch"}},
                           opset)
            rows[name] = _write(name, proto, [x], "torch.onnx (TorchScript)", versions)

    # nn.TransformerEncoderLayer: nn.MultiheadAttention needs aten::unflatten (opset 13) and
    # aten::scaled_dot_product_attention (opset 14)
    torch.manual_seed(34)
    x = rng.standard_normal((2, 7, 32)).astype(np.float32)
    proto = export(randomize(Encoder(), 34), (torch.from_numpy(x),), ["tokens"], ["logits"],
                   {"tokens": {0: "batch", 1: "seq"}, "logits": {0: "batch"}}, 14)
    rows["torch_transformer_opset14"] = _write("torch_transformer_opset14", proto, [x],
                                               "torch.onnx (TorchScript)", versions)
    return rows


# ---------------------------------------------------------------------------- onnxscript

def make_onnxscript():
    import onnxscript
    from . import onnxscript_models as m
    versions = {"onnxscript": onnxscript.__version__}
    rng = np.random.default_rng(400)
    rows = {}
    proto = m.mlp_model(rng)
    assert {f.name for f in proto.functions} == {"gelu_tanh", "layer_norm"}
    rows["onnxscript_mlp"] = _write("onnxscript_mlp", proto,
                                    [rng.standard_normal((5, 16)).astype(np.float32)],
                                    "onnxscript", versions)
    # the same model with its functions inlined by onnx (runtimes without function support)
    import onnx.inliner
    x = rng.standard_normal((5, 16)).astype(np.float32)
    rows["onnxscript_mlp_inlined"] = _write("onnxscript_mlp_inlined",
                                            onnx.inliner.inline_local_functions(proto), [x],
                                            "onnxscript + onnx.inliner", versions)
    proto = m.control_model()
    x = rng.standard_normal((3, 8)).astype(np.float32)
    rows["onnxscript_control"] = _write(
        "onnxscript_control", proto, [x, np.array(4, np.int64)], "onnxscript", versions,
        {"negative": [-np.abs(x), np.array(0, np.int64)]})
    return rows


MAKERS = {"tf2onnx": make_tf2onnx, "paddle": make_paddle, "torch": make_torch,
          "onnxscript": make_onnxscript}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", nargs="*", choices=sorted(MAKERS), help="exporters to run (all by default)")
    args = p.parse_args(argv)
    keys = args.only or list(MAKERS)
    os.makedirs(OUT, exist_ok=True)
    if len(keys) > 1:
        # one process per exporter: TensorFlow and Paddle in one process crash it (SIGSEGV)
        root = os.path.dirname(os.path.dirname(HERE))
        for key in keys:
            r = subprocess.run([sys.executable, "-m", "tests.exporters.make", "--only", key], cwd=root)
            if r.returncode:
                print(f"{key}: exit status {r.returncode}", file=sys.stderr)
                return 1
        return 0
    manifest = {}
    if os.path.exists(MANIFEST):
        with open(MANIFEST) as f:
            manifest = json.load(f)
    (key,) = keys
    print(key, flush=True)
    rows = MAKERS[key]()
    manifest = {k: v for k, v in manifest.items() if not (k.startswith(key + "_") or k in rows)}
    manifest.update(rows)
    with open(MANIFEST, "w") as f:
        json.dump(dict(sorted(manifest.items())), f, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print(f"{len(manifest)} models, {total} bytes in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
