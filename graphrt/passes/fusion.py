"""Fusions: element-wise epilogues into their producer (bit-preserving by construction),
Conv+BatchNormalization folding, and GELU / LayerNormalization / SiLU recognised from
their spelled-out forms (these compute differently in exact mode: fast mode only)."""
from __future__ import annotations

import numpy as np

from ..graph import CompiledNode
from ..kernels.core.pointwise import Binary, Unary
from ..kernels.elementwise.activations import Gelu, Sigmoid, Swish
from ..kernels.elementwise.arithmetic import Add, Div, Mul, Sub, Pow
from ..kernels.elementwise.fused import FusedEpilogue, Stage
from ..kernels.elementwise.unary_math import Erf, Sqrt
from ..kernels.gemm.matmul import Gemm, MatMul
from ..kernels.nn.conv import Conv
from ..kernels.nn.normalization import BatchNormalization, LayerNormalization
from ..kernels.nn.softmax import Softmax
from ..kernels.reduce.reduce import ReduceMean
from ..kernels.tensor.layout import Transpose
from .graph import PassGraph

PRODUCERS = (MatMul, Gemm, Conv, BatchNormalization)


def fuse_epilogues(pg: PassGraph) -> int:
    """MatMul/Gemm/Conv/BatchNormalization followed by element-wise nodes that only it feeds
    (an activation, a binary operation with a constant such as a bias, or a
    BatchNormalization with constant statistics) -> one FusedEpilogue node."""
    done = 0
    consumers = pg.consumers()
    for node in pg.live():
        if not isinstance(node.kernel, PRODUCERS) or len([o for o in node.outputs if o >= 0]) != 1:
            continue
        inputs = list(node.inputs)
        stages, absorbed, out = [], [node], node.outputs[0]
        while True:
            nxt = pg.only_reader(out, consumers)
            if nxt is None or len(nxt.outputs) != 1:
                break
            k = nxt.kernel
            if isinstance(k, Unary) and len(nxt.inputs) == 1:
                stages.append(Stage(k, 0, ()))
            elif isinstance(k, Binary) and len(nxt.inputs) == 2 and nxt.inputs.count(out) == 1:
                pos = nxt.inputs.index(out)
                other = nxt.inputs[1 - pos]
                if pg.constant(other) is None:
                    break
                stages.append(Stage(k, pos, (len(inputs),)))
                inputs.append(other)
            elif isinstance(k, BatchNormalization) and not k.training and len(nxt.inputs) == 5 \
                    and nxt.inputs[0] == out and out not in nxt.inputs[1:] \
                    and all(pg.constant(i) is not None for i in nxt.inputs[1:]):
                # (a stage only the primary's fast form folds; else run as it is)
                stages.append(Stage(k, 0, tuple(range(len(inputs), len(inputs) + 4))))
                inputs.extend(nxt.inputs[1:])
            else:
                break
            absorbed.append(nxt)
            out = nxt.outputs[0]
        if not stages:
            continue
        fused = FusedEpilogue(absorbed[-1].info, node.kernel, len(node.inputs), stages)
        pg.replace(absorbed, [CompiledNode(absorbed[-1].info, fused, tuple(inputs), (out,))])
        consumers = pg.consumers()
        done += 1
    return done


def fold_conv_batchnorm(pg: PassGraph) -> int:
    """Conv(x, W, B) -> BatchNormalization(scale, bias, mean, var) with constant parameters
    -> Conv(x, W * s, (B - mean) * s + bias), s = scale / sqrt(var + epsilon) per channel,
    computed in float64 and rounded once."""
    done = 0
    consumers = pg.consumers()
    for conv in pg.live():
        if not isinstance(conv.kernel, Conv):
            continue
        bn = pg.only_reader(conv.outputs[0], consumers)
        if bn is None or not isinstance(bn.kernel, BatchNormalization) or bn.inputs[0] != conv.outputs[0] \
                or len([o for o in bn.outputs if o >= 0]) != 1 or bn.info.attr("training_mode", 0):
            continue
        params = [pg.constant(i) for i in bn.inputs[1:5]]
        w = pg.constant(conv.inputs[1])
        b = pg.constant(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] >= 0 else None
        if w is None or any(p is None for p in params) or (len(conv.inputs) > 2 and conv.inputs[2] >= 0 and b is None):
            continue
        scale, bias, mean, var = (p.astype(np.float64) for p in params)
        s = scale / np.sqrt(var + bn.info.attr("epsilon", 1e-5))
        w2 = (w.astype(np.float64) * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        b0 = b.astype(np.float64) if b is not None else np.zeros_like(s)
        b2 = ((b0 - mean) * s + bias).astype(w.dtype)
        wid = pg.add_constant(pg.g.value_names[conv.inputs[1]] + "_bnfolded", w2)
        bid = pg.add_constant(pg.g.value_names[bn.inputs[2]] + "_bnfolded", b2)
        pg.replace([conv, bn], [CompiledNode(conv.info, conv.kernel, (conv.inputs[0], wid, bid), bn.outputs)])
        consumers = pg.consumers()
        done += 1
    return done


def _scalar(pg: PassGraph, vid: int):
    v = pg.constant(vid)
    return None if v is None or v.size != 1 else float(v.reshape(-1)[0])


def _other(node: CompiledNode, vid: int) -> int:
    return node.inputs[1] if node.inputs[0] == vid else node.inputs[0]


def _is_sqrt2(pg: PassGraph, vid: int) -> bool:
    """Whether the constant ``vid`` is one value: sqrt 2, or sqrt 2 rounded to its own type
    (a float16 or bfloat16 graph's, as a converter narrowed the exporter's constant)."""
    v = pg.constant(vid)
    if v is None or v.size != 1:
        return False
    c = v.reshape(-1)[0]
    return bool(np.isclose(float(c), np.sqrt(2)) or c == np.asarray(np.sqrt(2)).astype(v.dtype))


def recognize_gelu(pg: PassGraph) -> int:
    """x * 0.5 * (1 + erf(x / sqrt 2)) spelled Div, Erf, Add, Mul, Mul -> Gelu(x): the last
    two multiply by x then 0.5, or by 0.5 then x (torch.onnx's dynamo exporter). In a
    16-bit float graph the divisor is sqrt 2 in that type; Gelu computes in float32 with
    sqrt 2 and rounds once (docs/fp16.md)."""
    done = 0
    consumers = pg.consumers()
    for div in pg.live():
        if not isinstance(div.kernel, Div) or not _is_sqrt2(pg, div.inputs[1]):
            continue
        x = div.inputs[0]
        erf = pg.only_reader(div.outputs[0], consumers)
        add = erf and isinstance(erf.kernel, Erf) and pg.only_reader(erf.outputs[0], consumers)
        if not add or not isinstance(add.kernel, Add) or _scalar(pg, _other(add, erf.outputs[0])) != 1.0:
            continue
        mul1 = pg.only_reader(add.outputs[0], consumers)
        mul2 = mul1 and isinstance(mul1.kernel, Mul) and pg.only_reader(mul1.outputs[0], consumers)
        if not mul2 or not isinstance(mul2.kernel, Mul):
            continue
        first, second = _other(mul1, add.outputs[0]), _other(mul2, mul1.outputs[0])
        if not (first == x and _scalar(pg, second) == 0.5 or
                second == x and _scalar(pg, first) == 0.5):
            continue
        kernel = pg.make_kernel(mul2.info, Gelu, {}, 1)
        pg.replace([div, erf, add, mul1, mul2], [CompiledNode(kernel.node, kernel, (x,), mul2.outputs)])
        consumers = pg.consumers()
        done += 1
    return done


def recognize_swish(pg: PassGraph) -> int:
    """x * Sigmoid(x) (SiLU, either operand order), the sigmoid read by that Mul alone ->
    Swish(x, alpha=1). Fast mode's Swish is that same sigmoid, rounded, times x: the bits of
    the two nodes in one pass over x (and the producer's epilogue can take it as a stage,
    x having one reader now); exact mode's Swish rounds once, so fast mode only."""
    done = 0
    consumers = pg.consumers()
    for sig in pg.live():
        if not isinstance(sig.kernel, Sigmoid) or len(sig.inputs) != 1:
            continue
        x = sig.inputs[0]
        mul = pg.only_reader(sig.outputs[0], consumers)
        if mul is None or not isinstance(mul.kernel, Mul) or \
                sorted(mul.inputs) != sorted((x, sig.outputs[0])):
            continue
        kernel = pg.make_kernel(mul.info, Swish, {"alpha": 1.0}, 1)
        if kernel is None:
            return done
        pg.replace([sig, mul], [CompiledNode(kernel.node, kernel, (x,), mul.outputs)])
        consumers = pg.consumers()
        done += 1
    return done


def _mean_axes(pg: PassGraph, node: CompiledNode):
    axes = node.info.attr("axes")
    if axes is None and len(node.inputs) > 1:
        v = pg.constant(node.inputs[1])
        axes = None if v is None else [int(a) for a in v.reshape(-1)]
    return axes


def recognize_layernorm(pg: PassGraph) -> int:
    """ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul gamma, Add beta over the
    last axis -> LayerNormalization(x, gamma, beta, axis=-1, epsilon=eps)."""
    done = 0
    consumers = pg.consumers()
    for mean in pg.live():
        if not isinstance(mean.kernel, ReduceMean) or _mean_axes(pg, mean) != [-1]:
            continue
        x = mean.inputs[0]
        subs = [n for n in consumers.get(mean.outputs[0], []) if isinstance(n.kernel, Sub)]
        if len(subs) != 1 or subs[0].inputs != (x, mean.outputs[0]):
            continue
        sub = subs[0]
        readers = consumers.get(sub.outputs[0], [])
        pw = next((n for n in readers if isinstance(n.kernel, Pow) and _scalar(pg, n.inputs[1]) == 2.0), None)
        div = next((n for n in readers if isinstance(n.kernel, Div) and n.inputs[0] == sub.outputs[0]), None)
        if len(readers) != 2 or pw is None or div is None:
            continue
        var = pg.only_reader(pw.outputs[0], consumers)
        if var is None or not isinstance(var.kernel, ReduceMean) or _mean_axes(pg, var) != [-1]:
            continue
        add = pg.only_reader(var.outputs[0], consumers)
        eps = add is not None and isinstance(add.kernel, Add) and _scalar(pg, _other(add, var.outputs[0]))
        sqrt = eps is not None and eps is not False and pg.only_reader(add.outputs[0], consumers)
        if not sqrt or not isinstance(sqrt.kernel, Sqrt) or div.inputs[1] != sqrt.outputs[0]:
            continue
        mul = pg.only_reader(div.outputs[0], consumers)
        beta = mul is not None and isinstance(mul.kernel, Mul) and pg.only_reader(mul.outputs[0], consumers)
        if not beta or not isinstance(beta.kernel, Add):
            continue
        gamma_id, beta_id = _other(mul, div.outputs[0]), _other(beta, mul.outputs[0])
        if pg.constant(gamma_id) is None or pg.constant(beta_id) is None:
            continue
        kernel = pg.make_kernel(beta.info, LayerNormalization, {"axis": -1, "epsilon": float(eps)}, 3)
        if kernel is None:
            continue
        pg.replace([mean, sub, pw, var, add, sqrt, div, mul, beta],
                   [CompiledNode(kernel.node, kernel, (x, gamma_id, beta_id), beta.outputs)])
        consumers = pg.consumers()
        done += 1
    return done


def recognize_attention(pg: PassGraph) -> int:
    """MatMul(Q, Kt) -> Div or Mul by a constant -> Softmax(last axis) -> MatMul(., V), with
    Kt = Transpose(x, p) of rank 4 -> Attention(Q, Transpose(x, p with its last two entries
    swapped), V, scale): softmax(Q K^T * scale) V in one fused kernel."""
    done = 0
    consumers = pg.consumers()
    producers = pg.producers()
    for qk in pg.live():
        if not isinstance(qk.kernel, MatMul):
            continue
        kt = producers.get(qk.inputs[1])
        perm = kt.info.attr("perm") if kt is not None and isinstance(kt.kernel, Transpose) else None
        if perm is None or len(perm) != 4:
            continue
        scaled = pg.only_reader(qk.outputs[0], consumers)
        if scaled is None or not isinstance(scaled.kernel, (Div, Mul)) or scaled.inputs[0] != qk.outputs[0]:
            continue
        c = _scalar(pg, scaled.inputs[1])
        if not c:
            continue
        soft = pg.only_reader(scaled.outputs[0], consumers)
        if soft is None or not isinstance(soft.kernel, Softmax) or soft.info.opset < 13 \
                or soft.info.attr("axis", -1) not in (-1, 3):
            continue
        pv = pg.only_reader(soft.outputs[0], consumers)
        if pv is None or not isinstance(pv.kernel, MatMul) or pv.inputs[0] != soft.outputs[0]:
            continue
        scale = 1.0 / c if isinstance(scaled.kernel, Div) else c
        k_perm = list(perm[:2]) + [perm[3], perm[2]]
        k_id = pg.add_value(pg.g.value_names[kt.inputs[0]] + "_as_k")
        tk = pg.make_kernel(kt.info, Transpose, {"perm": k_perm}, 1)
        from ..kernels.attention.attention import Attention    # (imported where it serves)
        att = pg.make_kernel(pv.info, Attention, {"scale": float(scale)}, 3)
        if tk is None or att is None:
            continue
        pg.replace([qk, scaled, soft, pv],
                   [CompiledNode(tk.node, tk, (kt.inputs[0],), (k_id,)),
                    CompiledNode(att.node, att, (qk.inputs[0], k_id, pv.inputs[1]), pv.outputs)])
        consumers, producers = pg.consumers(), pg.producers()
        done += 1
    return done
