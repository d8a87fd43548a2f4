"""Generate the zoo: models made by real exporters, with random weights, at the sizes people
run them, and one set of inputs each.

    pip install -e ".[zoo]"          # torch, transformers, onnxscript, skl2onnx, ...
    python -m benchmarks.zoo.make [--only bert gru ...] [--force]

Each model is written once to ``<zoo dir>/<name>.onnx`` with its inputs in ``<name>.npz``
(zoo dir: GRAPHRT_ZOO_DIR, default ~/.cache/graphrt/zoo). The generators import torch and the
converters; graphrt never does, and neither do the tests.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import warnings

import numpy as np


def zoo_dir() -> str:
    return os.environ.get("GRAPHRT_ZOO_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "graphrt", "zoo")


# ----------------------------------------------------------------------------- torch export

def _export(module, args, names, path, dynamo=False, outputs=None, dynamic=None, opset=17):
    """torch.onnx.export of ``module`` on ``args`` (a tuple of tensors) to ``path``."""
    import torch
    module.eval()
    kw = dict(input_names=names, output_names=outputs, opset_version=opset)
    if dynamo:
        kw["dynamo"] = True
        kw["opset_version"] = max(opset, 18)
        if dynamic is not None:
            kw["dynamic_shapes"] = dynamic
    else:
        kw["dynamo"] = False
        if dynamic is not None:
            kw["dynamic_axes"] = dynamic
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, **kw)
    return {n: a.detach().numpy() for n, a in zip(names, args)}


def _ids(*shape, vocab=1000, seed=0):
    import torch
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=g)


def _randn(*shape, seed=0):
    import torch
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


class _HiddenState:
    """Wraps a transformers model so the export returns its last hidden state only."""

    def __new__(cls, model, key="last_hidden_state"):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, *args):
                return getattr(self.model(*args), key)
        return Wrapped()


def bert(path, dynamo=False, attention=None, dtype=None):
    import transformers as T
    cfg = T.BertConfig(vocab_size=1000, hidden_size=256, num_hidden_layers=4,
                       num_attention_heads=4, intermediate_size=1024, max_position_embeddings=256)
    if attention:
        cfg._attn_implementation = attention
    m = _HiddenState(T.BertModel(cfg, add_pooling_layer=False))
    if dtype is not None:
        m = m.to(dtype)
    ids, mask = _ids(1, 64), _ids(1, 64, vocab=1) + 1
    return _export(m, (ids, mask), ["input_ids", "attention_mask"], path, dynamo=dynamo)


def bert_bf16(path):
    """bert with its weights and compute in bfloat16 (torch's module.to(torch.bfloat16),
    the dynamo exporter: the TorchScript one refuses bfloat16), output bfloat16.
    onnxruntime's CPU provider has no bfloat16 Add: graphrt alone runs it."""
    import torch
    return bert(path, dynamo=True, dtype=torch.bfloat16)


def distilbert(path):
    import transformers as T
    cfg = T.DistilBertConfig(vocab_size=1000, dim=256, n_layers=3, n_heads=4, hidden_dim=1024,
                             max_position_embeddings=256)
    m = _HiddenState(T.DistilBertModel(cfg))
    ids, mask = _ids(4, 128), _ids(4, 128, vocab=1) + 1
    return _export(m, (ids, mask), ["input_ids", "attention_mask"], path)


def gpt2(path):
    import transformers as T
    cfg = T.GPT2Config(vocab_size=1000, n_embd=256, n_layer=4, n_head=4, n_positions=256,
                       use_cache=False)
    m = _HiddenState(T.GPT2LMHeadModel(cfg), key="logits")
    return _export(m, (_ids(1, 64),), ["input_ids"], path, dynamo=True)


def vit(path):
    import transformers as T
    cfg = T.ViTConfig(image_size=224, patch_size=16, hidden_size=192, num_hidden_layers=4,
                      num_attention_heads=3, intermediate_size=768)
    m = _HiddenState(T.ViTModel(cfg, add_pooling_layer=False))
    return _export(m, (_randn(1, 3, 224, 224),), ["pixel_values"], path)


def whisper_encoder(path):
    import transformers as T
    cfg = T.WhisperConfig(num_mel_bins=80, d_model=256, encoder_layers=4,
                          encoder_attention_heads=4, encoder_ffn_dim=1024,
                          max_source_positions=250, decoder_layers=1,
                          decoder_attention_heads=4, decoder_ffn_dim=256, vocab_size=1000,
                          pad_token_id=0, bos_token_id=1, eos_token_id=2,
                          decoder_start_token_id=1)
    m = _HiddenState(T.WhisperModel(cfg).get_encoder())
    return _export(m, (_randn(1, 80, 500),), ["input_features"], path)


def t5_encoder(path):
    import transformers as T
    cfg = T.T5Config(vocab_size=1000, d_model=256, d_kv=64, d_ff=1024, num_layers=4,
                     num_heads=4, feed_forward_proj="gated-gelu")
    m = _HiddenState(T.T5EncoderModel(cfg))
    return _export(m, (_ids(1, 64),), ["input_ids"], path)


def _resnet18():
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            self.relu = nn.ReLU()

        def forward(self, x):
            y = self.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return self.relu(y + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


def resnet18(path):
    return _export(_resnet18(), (_randn(1, 3, 224, 224),), ["image"], path)


def _mobilenet_v3():
    import torch.nn as nn

    class SE(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.f1 = nn.Conv2d(c, max(8, c // 4), 1)
            self.f2 = nn.Conv2d(max(8, c // 4), c, 1)

        def forward(self, x):
            s = self.f2(nn.functional.relu(self.f1(self.pool(x))))
            return x * nn.functional.hardsigmoid(s)

    class Inverted(nn.Module):
        def __init__(self, cin, exp, cout, k, stride, se, hs):
            super().__init__()
            act = nn.Hardswish if hs else nn.ReLU
            self.body = nn.Sequential(
                nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act(),
                nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False),
                nn.BatchNorm2d(exp), act(), SE(exp) if se else nn.Identity(),
                nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.res = stride == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.res else y

    spec = [(16, 16, 16, 3, 2, True, False), (16, 72, 24, 3, 2, False, False),
            (24, 88, 24, 3, 1, False, False), (24, 96, 40, 5, 2, True, True),
            (40, 240, 40, 5, 1, True, True), (40, 240, 40, 5, 1, True, True),
            (40, 120, 48, 5, 1, True, True), (48, 144, 48, 5, 1, True, True),
            (48, 288, 96, 5, 2, True, True), (96, 576, 96, 5, 1, True, True),
            (96, 576, 96, 5, 1, True, True)]
    layers = [nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish()]
    layers += [Inverted(*s) for s in spec]
    layers += [nn.Conv2d(96, 576, 1, bias=False), nn.BatchNorm2d(576), nn.Hardswish(),
               nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(576, 1024), nn.Hardswish(),
               nn.Linear(1024, 1000)]
    return nn.Sequential(*layers)


def mobilenet_v3(path):
    return _export(_mobilenet_v3(), (_randn(1, 3, 224, 224),), ["image"], path)


def _yolo():
    import torch
    import torch.nn as nn

    def cbs(cin, cout, k=3, s=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False),
                             nn.BatchNorm2d(cout), nn.SiLU())

    class C2(nn.Module):        # split, a bottleneck on one half, concat
        def __init__(self, c):
            super().__init__()
            self.cv1, self.m, self.cv2 = cbs(c, c, 1), nn.Sequential(cbs(c // 2, c // 2),
                                                                       cbs(c // 2, c // 2)), cbs(c, c, 1)

        def forward(self, x):
            a, b = self.cv1(x).split(x.shape[1] // 2, 1)
            return self.cv2(torch.cat((a, self.m(b) + b), 1))

    class Yolo(nn.Module):
        def __init__(self, nc=20):
            super().__init__()
            self.s1 = nn.Sequential(cbs(3, 16, 3, 2), cbs(16, 32, 3, 2), C2(32))
            self.s2 = nn.Sequential(cbs(32, 64, 3, 2), C2(64))
            self.s3 = nn.Sequential(cbs(64, 128, 3, 2), C2(128))
            self.s4 = nn.Sequential(cbs(128, 256, 3, 2), C2(256))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.f3 = cbs(256 + 128, 128, 1)
            self.f2 = cbs(128 + 64, 64, 1)
            self.heads = nn.ModuleList(nn.Conv2d(c, 3 * (5 + nc), 1) for c in (64, 128, 256))
            self.nc = nc

        def forward(self, x):
            p2 = self.s2(self.s1(x))
            p3 = self.s3(p2)
            p4 = self.s4(p3)
            n3 = self.f3(torch.cat((self.up(p4), p3), 1))
            n2 = self.f2(torch.cat((self.up(n3), p2), 1))
            outs = []
            for h, f in zip(self.heads, (n2, n3, p4)):
                y = h(f)
                b, _, hh, ww = y.shape
                y = y.view(b, 3, 5 + self.nc, hh * ww).permute(0, 3, 1, 2).reshape(b, -1, 5 + self.nc)
                xy, wh, conf = y.split((2, 2, 1 + self.nc), 2)
                outs.append(torch.cat((xy.sigmoid() * 2, torch.exp(wh), conf.sigmoid()), 2))
            return torch.cat(outs, 1)
    return Yolo()


def yolo(path):
    return _export(_yolo(), (_randn(1, 3, 320, 320),), ["image"], path)


def bilstm_tagger(path):
    import torch.nn as nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5000, 128)
            self.lstm = nn.LSTM(128, 128, num_layers=2, bidirectional=True, batch_first=True)
            self.out = nn.Linear(256, 17)

        def forward(self, ids):
            return self.out(self.lstm(self.emb(ids))[0]).log_softmax(-1)
    return _export(Tagger(), (_ids(1, 32, vocab=5000),), ["ids"], path)


def gru_classifier(path):
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(40, 128, num_layers=2, batch_first=True)
            self.out = nn.Linear(128, 10)

        def forward(self, x):
            return self.out(self.gru(x)[0][:, -1])
    return _export(Model(), (_randn(1, 100, 40),), ["features"], path)


def streaming_vad(path):
    """A silero-style voice-activity model: 1-D conv front end over a 512-sample chunk, an
    LSTM whose state comes in and goes out, called once per chunk."""
    import torch
    import torch.nn as nn

    class VAD(nn.Module):
        def __init__(self):
            super().__init__()
            self.stft = nn.Conv1d(1, 130, 64, stride=32, padding=32, bias=False)
            self.enc = nn.Sequential(
                nn.Conv1d(65, 128, 3, padding=1), nn.ReLU(),
                nn.Conv1d(128, 64, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv1d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv1d(64, 128, 3, padding=1), nn.ReLU())
            self.lstm = nn.LSTM(128, 128, batch_first=True)
            self.head = nn.Conv1d(128, 1, 1)

        def forward(self, x, h, c):
            s = self.stft(x.unsqueeze(1))
            re, im = s[:, :65], s[:, 65:]
            mag = torch.sqrt(re * re + im * im)
            f = self.enc(mag).mean(dim=2, keepdim=True).transpose(1, 2)
            y, (h2, c2) = self.lstm(f, (h, c))
            p = torch.sigmoid(self.head(torch.relu(y).transpose(1, 2))).squeeze(1)
            return p, h2, c2
    args = (_randn(1, 512), torch.zeros(1, 1, 128), torch.zeros(1, 1, 128))
    return _export(VAD(), args, ["audio", "h", "c"], path, outputs=["prob", "hn", "cn"])


def crnn(path):
    """A CNN + bidirectional-LSTM text-line recogniser (CTC logits per column)."""
    import torch.nn as nn

    class CRNN(nn.Module):
        def __init__(self):
            super().__init__()
            def blk(i, o, pool):
                return [nn.Conv2d(i, o, 3, 1, 1), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(pool)]
            self.cnn = nn.Sequential(*blk(1, 32, 2), *blk(32, 64, 2), *blk(64, 128, (2, 1)),
                                     *blk(128, 128, (2, 1)))
            self.rnn = nn.LSTM(128 * 2, 128, bidirectional=True, batch_first=True)
            self.fc = nn.Linear(256, 80)

        def forward(self, x):
            f = self.cnn(x)
            b, c, h, w = f.shape
            f = f.permute(0, 3, 1, 2).reshape(b, w, c * h)
            return self.fc(self.rnn(f)[0]).log_softmax(-1)
    return _export(CRNN(), (_randn(1, 1, 32, 128),), ["image"], path)


def _cond_model():
    import torch

    class Gate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(64, 64)
            self.b = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(),
                                         torch.nn.Linear(128, 64))

        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: self.a(t).relu(), lambda t: self.b(t), (x,))
    return Gate()


def torch_cond(path):
    return _export(_cond_model(), (_randn(4, 64),), ["x"], path, dynamo=True)


def torch_while(path):
    import torch

    class Iterate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = torch.nn.Linear(32, 32)

        def forward(self, x):
            def cond(i, h):
                return i < 20

            def body(i, h):
                return i + 1, torch.tanh(self.cell(h))
            return torch.while_loop(cond, body, (torch.zeros((), dtype=torch.int64), x))[1]
    return _export(Iterate(), (_randn(2, 32),), ["x"], path, dynamo=True)


def scripted_loop(path):
    """TorchScript If and Loop: an RNN-style decoder that iterates a scripted loop with a
    data-dependent branch inside."""
    import torch

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = torch.nn.Linear(64, 64)
            self.rec = torch.nn.Linear(64, 64)
            self.proj = torch.nn.Linear(64, 64)

        def forward(self, x, steps: int):
            h = torch.zeros_like(x)
            for _ in range(steps):
                h = torch.tanh(self.inp(x) + self.rec(h))
                if bool(h.sum() > 0):
                    x = torch.tanh(self.proj(h))
                else:
                    x = h
            return h
    m = torch.jit.script(Decoder())
    x = _randn(1, 64)
    steps = torch.tensor(16)
    _export(m, (x, steps), ["x", "steps"], path)
    return {"x": x.numpy(), "steps": steps.numpy()}


def bert_dynamo(path):
    return bert(path, dynamo=True)


def mlp_dynamo(path):
    import torch.nn as nn
    m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.LayerNorm(256), nn.Linear(256, 256),
                      nn.GELU(), nn.Linear(256, 10), nn.Softmax(-1))
    return _export(m, (_randn(256, 64),), ["x"], path, dynamo=True)


# ----------------------------------------------------------------------------- derived models

def _from(base: str, folder: str, make):
    """Make ``base`` first; returns its path and its inputs."""
    src = os.path.join(folder, base + ".onnx")
    if not os.path.exists(src):
        generate(base, folder, force=False)
    return src, dict(np.load(os.path.join(folder, base + ".npz")))


def bert_int8_dynamic(path):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    src, feeds = _from("bert", os.path.dirname(path), bert)
    quantize_dynamic(src, path, weight_type=QuantType.QInt8)
    return feeds


def crnn_int8_dynamic(path):
    """crnn by quantize_dynamic: MatMulInteger for the head, DynamicQuantizeLSTM for the
    recurrent layer (the issue's OCR case)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    src, feeds = _from("crnn", os.path.dirname(path), crnn)
    quantize_dynamic(src, path, weight_type=QuantType.QInt8)
    return feeds


def bert_int4(path):
    """bert with its projection weights as 4-bit blocks of 32 (onnxruntime's
    MatMulNBitsQuantizer, the weight-only quantization of language models; it rewrites
    MatMul by a constant, so not gpt2, whose projections torch exports as Gemm)."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    src, feeds = _from("bert", os.path.dirname(path), bert)
    q = MatMulNBitsQuantizer(onnx.load(src), bits=4, block_size=32)
    q.process()
    q.model.save_model_to_file(path, use_external_data_format=False)
    return feeds


def _static(path, fmt_name):
    """resnet18 quantized by onnxruntime's quantize_static in format ``fmt_name`` (QDQ or
    QOperator), calibrated on four random images."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    src, feeds = _from("resnet18", os.path.dirname(path), resnet18)

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(1)
            self.data = iter([{"image": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}
                              for _ in range(4)])

        def get_next(self):
            return next(self.data, None)
    # QOperator with uint8 activations, as onnxruntime advises for that format on x64 (its
    # default int8 activations fail to convert this model), after its shape pre-processing
    extra = {}
    if fmt_name == "QOperator":
        from onnxruntime.quantization.shape_inference import quant_pre_process
        extra = {"activation_type": QuantType.QUInt8}
        quant_pre_process(src, path, skip_symbolic_shape=True)
        src = path
    quantize_static(src, path, Reader(), quant_format=getattr(QuantFormat, fmt_name), **extra)
    return feeds


def resnet18_int8_qdq(path):
    return _static(path, "QDQ")


def resnet18_int8_qop(path):
    return _static(path, "QOperator")


def _fp16(base, make, path):
    """``base`` converted by onnxconverter-common, float32 inputs and outputs kept."""
    import onnx
    from onnxconverter_common import float16
    src, feeds = _from(base, os.path.dirname(path), make)
    m = float16.convert_float_to_float16(onnx.load(src), keep_io_types=True)
    onnx.save(m, path)
    return feeds


def mobilenet_fp16(path):
    return _fp16("mobilenet_v3", mobilenet_v3, path)


def bert_fp16(path):
    return _fp16("bert", bert, path)


def vit_fp16(path):
    return _fp16("vit", vit, path)


def _optimized(base, make, path, model_type, heads, hidden):
    """``base`` rewritten by onnxruntime's transformer optimizer into its com.microsoft
    fused operators (Attention, SkipLayerNormalization, FastGelu, ...), as users ship it."""
    from onnxruntime.transformers.optimizer import optimize_model
    src, feeds = _from(base, os.path.dirname(path), make)
    optimize_model(src, model_type=model_type, num_heads=heads, hidden_size=hidden,
                   opt_level=0).save_model_to_file(path)
    return feeds


def bert_optimized(path):
    return _optimized("bert", bert, path, "bert", 4, 256)


def bert_eager(path):
    """BERT with transformers' eager attention (its default before SDPA): the form whose
    attention onnxruntime's optimizer fuses."""
    return bert(path, attention="eager")


def bert_eager_optimized(path):
    """-> EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu."""
    return _optimized("bert_eager", bert_eager, path, "bert", 4, 256)


def vit_optimized(path):
    return _optimized("vit", vit, path, "vit", 3, 192)


# ----------------------------------------------------------------------------- scikit-learn

def _tabular(n=2000, d=20, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] ** 2 - x[:, 2] > 0).astype(np.int64)
    return x, y


def _skl(model, path, x):
    import onnx
    from skl2onnx import to_onnx
    onx = to_onnx(model, x[:1], target_opset={"": 17, "ai.onnx.ml": 3},
                  options={id(model): {"zipmap": False}} if hasattr(model, "predict_proba") else None)
    onnx.save(onx, path)
    return {onx.graph.input[0].name: x}


def skl_logistic(path):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    x, y = _tabular()
    m = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(x, y)
    return _skl(m, path, x[:1000])


def skl_mlp(path):
    from sklearn.neural_network import MLPClassifier
    x, y = _tabular()
    m = MLPClassifier((128, 64), max_iter=50, random_state=0).fit(x, y)
    return _skl(m, path, x[:1000])


def skl_forest(path):
    from sklearn.ensemble import RandomForestClassifier
    x, y = _tabular()
    m = RandomForestClassifier(100, max_depth=8, random_state=0).fit(x, y)
    return _skl(m, path, x[:1000])


MODELS = {f.__name__: f for f in (
    bert, bert_dynamo, distilbert, gpt2, vit, whisper_encoder, t5_encoder, resnet18,
    mobilenet_v3, yolo, bilstm_tagger, gru_classifier, streaming_vad, crnn, torch_cond,
    torch_while, scripted_loop, mlp_dynamo, bert_int8_dynamic, crnn_int8_dynamic, bert_int4,
    resnet18_int8_qdq, resnet18_int8_qop, mobilenet_fp16, bert_fp16, vit_fp16, bert_bf16,
    bert_optimized, bert_eager, bert_eager_optimized, vit_optimized, skl_logistic, skl_mlp,
    skl_forest)}

# the quantized and float16 models measure issue #17's work; the ai.onnx.ml ones (a linear
# classifier, a tree ensemble) #16's
OTHER_ISSUES = {"bert_int8_dynamic", "crnn_int8_dynamic", "bert_int4", "resnet18_int8_qdq",
                "resnet18_int8_qop", "mobilenet_fp16", "bert_fp16", "vit_fp16", "bert_bf16",
                "bert_optimized",
                "bert_eager_optimized", "vit_optimized", "skl_logistic", "skl_forest"}


def generate(name: str, folder: str, force: bool) -> str:
    path = os.path.join(folder, name + ".onnx")
    if os.path.exists(path) and not force:
        return "kept"
    feeds = MODELS[name](path)
    np.savez(os.path.join(folder, name + ".npz"), **feeds)
    return "made"


def load(name: str, folder: str | None = None):
    """(model path, feeds) of a generated zoo model; a path, as users load them (the
    dynamo exporter keeps weights in a file beside the model)."""
    folder = folder or zoo_dir()
    return os.path.join(folder, name + ".onnx"), dict(np.load(os.path.join(folder, name + ".npz")))


def available(folder: str | None = None) -> list[str]:
    folder = folder or zoo_dir()
    return [n for n in MODELS if os.path.exists(os.path.join(folder, n + ".onnx"))]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", choices=sorted(MODELS))
    p.add_argument("--force", action="store_true", help="make again what exists")
    a = p.parse_args(argv)
    folder = zoo_dir()
    os.makedirs(folder, exist_ok=True)
    failed = 0
    for name in a.only or MODELS:
        try:
            print(f"{name}: {generate(name, folder, a.force)}", flush=True)
        except Exception as e:  # one exporter's failure is reported, the rest go on
            failed += 1
            print(f"{name}: FAILED {type(e).__name__}: {e}".splitlines()[0], flush=True)
            traceback.print_exc(limit=3, file=sys.stderr)
    print(json.dumps({"folder": folder, "models": available(folder)}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
