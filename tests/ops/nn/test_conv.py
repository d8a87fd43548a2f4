"""Conv, ConvTranspose and DeformConv through graphrt.Session, compared with onnx's
reference evaluator or numpy."""
from __future__ import annotations

import numpy as np
import pytest

from graphrt import ErrorKind
from graphrt.kernels.nn import conv as conv_module

from ...helpers import EXACT, bits, close, expect_error, ours, rand, reference, salted, threads


F32 = np.float32


# ----------------------------------------------------------------------------- Conv

CONV_CASES = [
    # x shape, w shape, attributes
    ((2, 4, 9), (6, 2, 3), {"group": 2, "strides": [2], "pads": [1, 2], "dilations": [2]}),
    ((1, 3, 7, 8), (4, 3, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ((1, 3, 7, 8), (4, 3, 3, 3), {"auto_pad": "SAME_LOWER", "dilations": [1, 2]}),
    ((1, 2, 6, 7), (3, 2, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]}),
    ((2, 4, 5, 6, 7), (4, 1, 2, 3, 2), {"group": 4, "pads": [1, 0, 1, 1, 2, 0]}),
    ((1, 8, 10, 10), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),      # depthwise
    ((3, 5, 6, 6), (7, 5, 1, 1), {}),                                      # direct 1x1
    ((1, 3, 5, 5), (2, 3, 3, 3), {"kernel_shape": [3, 3], "pads": [2, 0, 0, 2]}),
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_matches_reference(xs, ws, attrs, bias):
    x, w = rand(xs, seed=1), rand(ws, seed=2)
    inputs = [x, w] + ([rand(ws[0], seed=3)] if bias else [])
    close(ours("Conv", inputs, attrs), reference("Conv", inputs, attrs), 1e-5, 1e-5)


def test_conv_exact_order_threads_and_nan():
    """Exact mode: per output acc = 0, acc += w * x over channels then kernel positions
    (padding taps included), then the bias; the same bits on 1 and 2 threads."""
    x, w, b = salted((2, 16, 20, 20), 4), rand((32, 16, 3, 3), seed=5), rand(32, seed=6)
    attrs = {"pads": [1, 1, 1, 1]}
    one, two = (ours("Conv", [x, w, b], attrs, options=threads(n)) for n in (1, 2))
    np.testing.assert_array_equal(bits(one), bits(two))
    nan = np.isnan(one)
    assert nan.any() and np.all(one.view(np.uint32)[nan] == 0x7FC00000)
    # the documented order, emulated with float32 numpy operations (each correctly rounded)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = np.zeros((2, 32, 20, 20), F32)
    with np.errstate(invalid="ignore"):
        for c in range(16):
            for kh in range(3):
                for kw in range(3):
                    tap = xp[:, None, c, kh:kh + 20, kw:kw + 20]
                    acc = acc + w[None, :, c, kh, kw, None, None] * tap
        acc = acc + b[None, :, None, None]
    np.testing.assert_array_equal(np.isnan(acc), nan)
    np.testing.assert_array_equal(one[~nan], acc[~nan])
    fast = ours("Conv", [x, w, b], attrs, options=threads(2, exact=False))
    np.testing.assert_allclose(fast[~nan], acc[~nan], 1e-4, 1e-4)


def test_conv_dtypes_chunks_and_empty(monkeypatch):
    x, w, b = rand((3, 4, 6, 6), np.float64, 7), rand((2, 4, 3, 3), np.float64, 8), \
        rand(2, np.float64, 9)
    close(ours("Conv", [x, w, b]), reference("Conv", [x, w, b]), 1e-12, 1e-12)
    h = [a.astype(np.float16) for a in (x, w, b)]
    want = reference("Conv", [a.astype(F32) for a in h]).astype(np.float16)
    close(ours("Conv", h), want, 2e-3, 2e-3)
    # one image per im2col chunk
    monkeypatch.setattr(conv_module, "COL_BYTES", 64)
    close(ours("Conv", [x, w, b], {"pads": [1, 1, 1, 1]}),
          reference("Conv", [x, w, b], {"pads": [1, 1, 1, 1]}), 1e-12, 1e-12)
    empty = ours("Conv", [np.zeros((0, 4, 6, 6), F32), w.astype(F32)])
    assert empty.shape == (0, 2, 4, 4)
    # all inputs constant: folded when the plan is made (no run arena then)
    folded = ours("Conv", [x, w, b], {"pads": [1, 1, 1, 1]}, consts=(0, 1, 2))
    close(folded, reference("Conv", [x, w, b], {"pads": [1, 1, 1, 1]}), 1e-12, 1e-12)


def test_conv_errors():
    x, w = rand((1, 2, 4, 4)), rand((3, 2, 3, 3))
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, rand((3, 2, 5, 5))],
                 match="larger than the padded input")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"pads": [-1, 0, 0, 0]},
                 match="below 0")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"strides": [0, 1]})
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"pads": [1, 1]},
                 match="should have 4 values")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"group": 2}, match="group")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"auto_pad": "SAME"})
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w], {"kernel_shape": [2, 2]},
                 match="does not match")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Conv", [x, w, rand(2)], match="B of shape")
    expect_error(ErrorKind.UNSUPPORTED, ours, "Conv",
                 [np.ones((1, 2, 4, 4), np.int32), np.ones((3, 2, 3, 3), np.int32)])
    expect_error(ErrorKind.UNSUPPORTED, ours, "Conv", [rand((1, 1, 2, 2, 2, 2)),
                                                       rand((1, 1, 1, 1, 1, 1))])


# ----------------------------------------------------------------------------- ConvTranspose

def conv_transpose_reference(x, w, b, attrs):
    """onnx's reference, one group at a time (it mishandles several channels per group)."""
    g = attrs.get("group", 1)
    single = {k: v for k, v in attrs.items() if k != "group"}
    cx, cw = x.shape[1] // g, w.shape[1]
    parts = [reference("ConvTranspose", [x[:, i * cx:(i + 1) * cx], w[i * cx:(i + 1) * cx]]
                       + ([] if b is None else [b[i * cw:(i + 1) * cw]]), single)
             for i in range(g)]
    return np.concatenate(parts, axis=1)


CT_CASES = [
    ((2, 4, 5), (4, 3, 3), {"group": 2, "strides": [2], "pads": [1, 2], "dilations": [2]}),
    ((1, 3, 4, 5), (3, 2, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 1],
                                  "dilations": [1, 2]}),
    ((2, 4, 3, 4, 3), (4, 1, 2, 3, 2), {"group": 4, "pads": [1, 0, 1, 1, 1, 0],
                                        "strides": [2, 2, 1]}),
    ((1, 2, 3, 3), (2, 3, 3, 3), {"strides": [3, 2], "output_padding": [1, 1]}),
    ((1, 2, 3, 3), (2, 3, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
]


@pytest.mark.parametrize("xs,ws,attrs", CT_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose_matches_reference(xs, ws, attrs, bias):
    x, w = rand(xs, seed=1), rand(ws, seed=2)
    b = rand(ws[1] * attrs.get("group", 1), seed=3) if bias else None
    got = ours("ConvTranspose", [x, w] + ([b] if bias else []), attrs)
    close(got, conv_transpose_reference(x, w, b, attrs), 1e-5, 1e-5)


def test_conv_transpose_exact_threads_and_errors():
    x, w, b = salted((2, 16, 12, 12), 11), rand((16, 8, 3, 3), seed=12), rand(8, seed=13)
    attrs = {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}
    one, two = (ours("ConvTranspose", [x, w, b], attrs, options=threads(n)) for n in (1, 2))
    np.testing.assert_array_equal(bits(one), bits(two))
    assert one.shape == (2, 8, 24, 24)
    clean = rand((2, 16, 12, 12), seed=14)
    close(ours("ConvTranspose", [clean, w, b], attrs, options=EXACT),
          conv_transpose_reference(clean, w, b, attrs), 1e-4, 1e-4)
    expect_error(ErrorKind.INVALID_MODEL, ours, "ConvTranspose", [x, w],
                 {"strides": [2, 2], "output_padding": [2, 0]}, match="output_padding")
    expect_error(ErrorKind.INVALID_MODEL, ours, "ConvTranspose", [x, rand((8, 8, 3, 3))])
    expect_error(ErrorKind.INVALID_MODEL, ours, "ConvTranspose", [rand((1, 1, 2, 2)),
                                                                  rand((1, 1, 3, 3))],
                 {"pads": [3, 3, 3, 3]}, match="not positive")


# ----------------------------------------------------------------------------- DeformConv

@pytest.mark.parametrize("xs,ws,attrs,out", [
    ((2, 4, 6, 7), (6, 2, 3, 2), {"group": 2, "offset_group": 2, "pads": [1, 0, 1, 1],
                                  "strides": [2, 1], "dilations": [1, 2]}, (3, 6)),
    ((1, 3, 5, 5), (2, 3, 2, 2), {}, (4, 4)),
])
def test_deform_conv_matches_reference(xs, ws, attrs, out):
    rng = np.random.default_rng(15)
    og, k = attrs.get("offset_group", 1), ws[2] * ws[3]
    x, w, b = rand(xs, seed=16), rand(ws, seed=17), rand(ws[0], seed=18)
    offset = (rng.standard_normal((xs[0], 2 * og * k, *out)) * 1.5).astype(F32)
    mask = rng.random((xs[0], og * k, *out)).astype(F32)
    for inputs in ([x, w, offset], [x, w, offset, b, mask]):
        close(ours("DeformConv", inputs, attrs, opset=19),
              reference("DeformConv", inputs, attrs, opset=19), 1e-4, 1e-5)
    exact = ours("DeformConv", [x, w, offset, b, mask], attrs, opset=19, options=EXACT)
    close(exact, reference("DeformConv", [x, w, offset, b, mask], attrs, opset=19), 1e-4, 1e-5)
    expect_error(ErrorKind.INVALID_MODEL, ours, "DeformConv", [x, w, offset[:, :2]], attrs,
                 opset=19, match="offset of shape")


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_convolutions_of_a_run_share_one_scratch_buffer(mode):
    """Three convolutions of different scratch sizes in one run state take one shared
    allocation (core/held.py shared_buffer), and each gives the bits it gives alone (a
    session of its own, so a buffer of its own)."""
    import gc

    from onnx import helper, numpy_helper

    import graphrt
    from graphrt.plan.state import RunState

    from ...models import F, make, tensor
    rng = np.random.default_rng(3)
    layers = [("A", rng.standard_normal((8, 3, 3, 3)), dict(pads=[1, 1, 1, 1])),
              ("B", rng.standard_normal((16, 8, 3, 3)), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
              ("C", rng.standard_normal((4, 16, 5, 5)), dict())]

    def model(names):
        nodes, inits, prev = [], [], "x"
        for name, w, attrs in names:
            nodes.append(helper.make_node("Conv", [prev, "W" + name], ["y" + name], **attrs))
            inits.append(numpy_helper.from_array(w.astype(np.float32), "W" + name))
            prev = "y" + name
        return make(nodes, [tensor("x", F, None)], [tensor(prev, F, None)], inits)

    opts = graphrt.SessionOptions(mode=mode, intra_op_threads=1)
    x = rng.standard_normal((2, 3, 40, 40)).astype(np.float32)
    whole = graphrt.Session(model(layers), opts)
    for _ in range(3):
        got = whole.run(None, {"x": x})[0]
    want = x
    for layer in layers:
        want = graphrt.Session(model([layer]), opts).run(None, {"x": want})[0]
    assert got.tobytes() == want.tobytes()
    plan = whole._plans._entries[0][1].plan
    state = next(o for o in gc.get_objects() if isinstance(o, RunState) and o.contexts and
                 o.contexts[0] is not None and o.contexts[0].node is plan.steps[0].node.info)
    assert [k for k in state.held if "conv" in str(k[0])] == [("shared conv", np.dtype(np.float32))]
