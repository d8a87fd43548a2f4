"""ImageDecoder (image/decoder.py) through graphrt.Session: images made with Pillow in every
format Pillow here can write, decoded and compared with the array they were made from
(lossless formats) and with Pillow's own decoding (all); BGR and Grayscale (graphrt's
BT.601 fixed-point luma, which is Pillow's ``convert("L")``); bad bytes and a missing
Pillow as SessionErrors naming the node; exact mode.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import graphrt
from graphrt import ErrorKind
from graphrt.kernels.image.decoder import jpeg2000_reversible

from ...helpers import EXACT, NODE, Const, fails, one_node, run

Image = pytest.importorskip("PIL.Image")
features = pytest.importorskip("PIL.features")

U8 = np.uint8


def picture(h=23, w=37, seed=0):
    """A smooth gradient with noise (odd sizes: the chroma upsampling's edges)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1),
                     (x + y) * 255 // max(h + w - 2, 1)], axis=-1)
    return np.clip(base + rng.integers(-20, 21, base.shape), 0, 255).astype(U8)


def encode(img, fmt, **kw) -> np.ndarray:
    with io.BytesIO() as f:
        img.save(f, format=fmt, **kw)
        return np.frombuffer(f.getvalue(), U8).copy()


def pillow_rgb(data: np.ndarray) -> np.ndarray:
    """Pillow's own decoding of ``data`` as RGB."""
    return np.asarray(Image.open(io.BytesIO(data.tobytes())).convert("RGB"))


def decode(data, fmt="RGB", options=None):
    return run("ImageDecoder", [data], {"pixel_format": fmt}, opset=20, outs=[U8],
               options=options)[0]


def luma(rgb: np.ndarray) -> np.ndarray:
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    return ((19595 * r + 38470 * g + 7471 * b + 32768) >> 16).astype(U8)[..., None]


def _has(feature):
    return features.check(feature)


# (format, save options, lossless, the Pillow feature it needs)
FORMATS = [
    ("PNG", {}, True, "zlib"),
    ("BMP", {}, True, None),
    ("PPM", {}, True, None),
    ("TIFF", {}, True, None),
    ("TIFF", {"compression": "tiff_lzw"}, True, "libtiff"),
    ("TIFF", {"compression": "tiff_adobe_deflate"}, True, "libtiff"),
    ("TIFF", {"compression": "packbits"}, True, "libtiff"),
    ("TIFF", {"compression": "jpeg"}, False, "libtiff"),
    ("WEBP", {"lossless": True}, True, "webp"),
    ("WEBP", {"quality": 80}, False, "webp"),
    ("JPEG", {"quality": 90}, False, "jpg"),
    ("JPEG", {"quality": 75, "subsampling": 0}, False, "jpg"),      # 4:4:4
    ("JPEG", {"quality": 75, "subsampling": 2}, False, "jpg"),      # 4:2:0
    ("JPEG", {"quality": 85, "progressive": True}, False, "jpg"),
    ("JPEG2000", {}, True, "jpg_2000"),                             # reversible 5/3
    ("JPEG2000", {"irreversible": True}, False, "jpg_2000"),        # 9/7
    ("JPEG2000", {"no_jp2": True, "tile_size": (16, 16)}, True, "jpg_2000"),
]
IDS = [f"{f}-{'-'.join(f'{k}={v}' for k, v in o.items()) or 'default'}" for f, o, _, _ in FORMATS]


@pytest.mark.parametrize("fmt, save, lossless, feature", FORMATS, ids=IDS)
def test_round_trip_rgb_bgr_grayscale(fmt, save, lossless, feature):
    if feature is not None and not _has(feature):
        pytest.skip(f"this Pillow has no {feature}")
    src = picture()
    data = encode(Image.fromarray(src), fmt, **save)
    want = pillow_rgb(data)
    got = decode(data)
    assert got.dtype == U8 and got.shape == (23, 37, 3)
    np.testing.assert_array_equal(got, want)
    if lossless:
        np.testing.assert_array_equal(got, src)
    np.testing.assert_array_equal(decode(data, "BGR"), want[:, :, ::-1])
    grey = decode(data, "Grayscale")
    np.testing.assert_array_equal(grey, luma(want))
    np.testing.assert_array_equal(grey, np.asarray(Image.open(io.BytesIO(data.tobytes()))
                                                   .convert("L"))[..., None])


@pytest.mark.parametrize("mode", ["L", "P", "RGBA", "LA", "1", "I;16"])
def test_other_modes_become_rgb(mode):
    """A grey, palette, alpha, bilevel or 16-bit image: Pillow's RGB of it (alpha dropped);
    Grayscale equals Pillow's convert("L") of it."""
    src = Image.fromarray(picture(9, 14, seed=3))
    img = src.convert("P", palette=Image.Palette.ADAPTIVE) if mode == "P" else src.convert(mode)
    data = encode(img, "PNG")
    want = pillow_rgb(data)
    np.testing.assert_array_equal(decode(data), want)
    np.testing.assert_array_equal(decode(data, "Grayscale"), luma(want))
    if mode != "I;16":
        np.testing.assert_array_equal(decode(data, "Grayscale")[..., 0],
                                      np.asarray(Image.open(io.BytesIO(data.tobytes()))
                                                 .convert("L")))
    if mode in ("L", "1"):          # a grey pixel repeats in R, G, B and keeps its value
        grey = np.asarray(img.convert("L"))
        np.testing.assert_array_equal(decode(data), np.repeat(grey[..., None], 3, axis=-1))
        np.testing.assert_array_equal(decode(data, "Grayscale")[..., 0], grey)


def test_grey_netpbm_and_bilevel():
    grey = Image.fromarray(picture(5, 6)[..., 0])
    for img in (grey, grey.convert("1")):
        data = encode(img, "PPM")                   # PGM (P5), PBM (P4)
        want = np.asarray(img.convert("L"))
        np.testing.assert_array_equal(decode(data, "Grayscale")[..., 0], want)
        np.testing.assert_array_equal(decode(data)[..., 1], want)


def test_luma_formula_over_every_grey_and_the_corners():
    """BT.601 in 16-bit fixed point, rounded half up; grey levels map to themselves."""
    levels = np.arange(256, dtype=U8)
    corners = np.array([[r, g, b] for r in (0, 255) for g in (0, 255) for b in (0, 255)], U8)
    rng = np.random.default_rng(7)
    px = np.concatenate([np.repeat(levels[:, None], 3, axis=1), corners,
                         rng.integers(0, 256, (4096 - 264, 3)).astype(U8)]).reshape(64, 64, 3)
    data = encode(Image.fromarray(px), "PNG")
    grey = decode(data, "Grayscale")[..., 0].reshape(-1)
    np.testing.assert_array_equal(grey[:256], levels)
    np.testing.assert_array_equal(grey, luma(px).reshape(-1))
    np.testing.assert_array_equal(grey, np.asarray(Image.fromarray(px).convert("L")).reshape(-1))


def test_one_session_many_sizes_and_a_following_node():
    """The output's shape comes from the bytes: one session, images of different sizes,
    and a node after the decoder (Shape) sees each run's shape."""
    from onnx import TensorProto, helper
    dec = helper.make_node("ImageDecoder", ["x"], ["img"], name=NODE, pixel_format="BGR")
    shape = helper.make_node("Shape", ["img"], ["s"], name="shape")
    g = helper.make_graph([dec, shape], "g",
                          [helper.make_tensor_value_info("x", TensorProto.UINT8, [None])],
                          [helper.make_tensor_value_info("img", TensorProto.UINT8, None),
                           helper.make_tensor_value_info("s", TensorProto.INT64, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    sess = graphrt.Session(model)
    for h, w in ((4, 7), (31, 2), (1, 1), (4, 7)):
        src = picture(h, w, seed=h)
        img, s = sess.run(None, {"x": encode(Image.fromarray(src), "PNG")})
        np.testing.assert_array_equal(img, src[:, :, ::-1])
        assert s.tolist() == [h, w, 3]


def test_constant_stream():
    """An initializer as the stream (never folded: the output depends on the value)."""
    src = picture(3, 5)
    got = run("ImageDecoder", [Const(encode(Image.fromarray(src), "PNG"))], opset=20,
              outs=[U8])[0]
    np.testing.assert_array_equal(got, src)


def test_exact_mode_same_bits_as_fast():
    data = encode(Image.fromarray(picture()), "JPEG", quality=70)
    for fmt in ("RGB", "BGR", "Grayscale"):
        np.testing.assert_array_equal(decode(data, fmt, EXACT), decode(data, fmt))


@pytest.mark.skipif(not _has("jpg_2000"), reason="this Pillow has no OpenJPEG")
def test_exact_mode_refuses_the_floating_point_jpeg2000_wavelet():
    img = Image.fromarray(picture())
    lossy = encode(img, "JPEG2000", irreversible=True)
    fails(ErrorKind.EXACT_MODE_UNAVAILABLE, "ImageDecoder", [lossy], opset=20, outs=[U8],
          options=EXACT, match="9/7")
    assert decode(lossy).shape == (23, 37, 3)                   # fast mode decodes it
    for kw in ({}, {"no_jp2": True}, {"tile_size": (8, 8)}):
        assert jpeg2000_reversible(encode(img, "JPEG2000", **kw).tobytes()), kw
        decode(encode(img, "JPEG2000", **kw), options=EXACT)
    for kw in ({"irreversible": True, "no_jp2": True},
               {"irreversible": True, "tile_size": (8, 8)}):
        assert not jpeg2000_reversible(encode(img, "JPEG2000", **kw).tobytes()), kw
    assert not jpeg2000_reversible(b"\xff\x4f\xff\x51\x00")       # truncated: in doubt
    assert not jpeg2000_reversible(b"not a JPEG 2000 file")


@pytest.mark.parametrize("data, match", [
    (np.frombuffer(b"definitely not an image", U8), "cannot decode the 23 bytes"),
    (np.zeros(0, U8), "empty"),
    (np.frombuffer(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, U8), "cannot decode"),
])
def test_bad_bytes_fail_the_run_naming_the_node(data, match):
    fails(ErrorKind.INVALID_INPUT, "ImageDecoder", [data], opset=20, outs=[U8], match=match)


def test_truncated_and_unlisted_formats_fail():
    img = Image.fromarray(picture())
    for data in (encode(img, "PNG")[:-30], encode(img, "JPEG")[:200], encode(img, "GIF")):
        fails(ErrorKind.INVALID_INPUT, "ImageDecoder", [data], opset=20, outs=[U8],
              match="cannot decode")


def test_bad_input_types_and_attribute():
    data = encode(Image.fromarray(picture(2, 2)), "PNG")
    fails(ErrorKind.UNSUPPORTED, "ImageDecoder", [data.astype(np.int8)], opset=20, outs=[U8])
    fails(ErrorKind.INVALID_INPUT, "ImageDecoder", [data.reshape(1, -1)], opset=20, outs=[U8],
          match="1-D")
    fails(ErrorKind.INVALID_MODEL, "ImageDecoder", [data], {"pixel_format": "RGBA"}, opset=20,
          outs=[U8], match="pixel_format")


def test_missing_pillow_fails_session_creation_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)          # import PIL now raises ImportError
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    model = one_node("ImageDecoder", [np.zeros(4, U8)], opset=20, outs=[U8])
    with pytest.raises(graphrt.SessionError) as info:
        graphrt.Session(model)
    assert info.value.kind == ErrorKind.UNSUPPORTED and info.value.node == NODE
    assert "pip install graphrt[image]" in str(info.value)


def test_graphrt_imports_and_loads_other_models_without_pillow():
    """A fresh process where Pillow cannot be imported: graphrt imports, sessions without
    ImageDecoder work, and one with it fails at creation naming the extra."""
    code = (
        "import sys; sys.modules['PIL'] = None\n"
        "import numpy as np, graphrt\n"
        "from tests.helpers import one_node\n"
        "y = graphrt.Session(one_node('Identity', [np.zeros(2, np.float32)])).run(None, "
        "{'x0': np.ones(2, np.float32)})[0]\n"
        "assert y.tolist() == [1.0, 1.0]\n"
        "try:\n"
        "    graphrt.Session(one_node('ImageDecoder', [np.zeros(2, np.uint8)], opset=20))\n"
        "except graphrt.SessionError as e:\n"
        "    print(e)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pip install graphrt[image]" in out.stdout and NODE in out.stdout, out.stdout

