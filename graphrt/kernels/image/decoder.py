"""ImageDecoder (ai.onnx opset 20): a 1-D uint8 tensor of encoded bytes to a uint8 image
[H, W, C], channels last: C = 3 for pixel_format "RGB" (the default) and "BGR", C = 1 for
"Grayscale".

Decoding is Pillow's (``pip install graphrt[image]``), imported when a session with this
operator is created: without Pillow, creation fails naming the node and the extra. Only the
formats the operator lists are opened (Pillow's BMP, JPEG, JPEG 2000, TIFF, PNG, WebP and
PBM/PGM/PPM/PNM readers; no other Pillow plugin sees the bytes); of a multi-frame file, the
first frame. Bytes that none of them decodes fail the run (InvalidInput, naming the node)
where the operator's text has an empty output: an empty image would hide the error.

Colours: the decoded image is brought to RGB by Pillow (a grey image repeats its value in
the three channels; a palette is looked up; alpha is dropped, not composited; CMYK and
YCbCr as Pillow converts them). BGR is RGB with the channels reversed. Grayscale is graphrt's
own conversion of that RGB image, ITU-R BT.601 luma in 16-bit fixed point, rounded half up:

    Y = (19595 R + 38470 G + 7471 B + 32768) >> 16

(the weights are 0.299, 0.587, 0.114 times 2^16, summing to 2^16, so a grey pixel keeps its
value). It is the formula of Pillow's ``convert("L")``, which made the expected outputs of
onnx's backend cases.

Exact mode: the decoders are integer code (libjpeg-turbo's accurate integer IDCT and its
"fancy" chroma upsampling, which is the one the operator's text prescribes; zlib; libwebp;
libtiff; OpenJPEG's reversible 5/3 wavelet), so an image's bits depend on the bytes and on
the Pillow build, not on the machine, the thread count or the run. The exception is a
JPEG 2000 stream using the irreversible 9/7 wavelet, which OpenJPEG computes in floating
point: an exact-mode run refuses it (ExactModeUnavailable, naming the node).
"""
from __future__ import annotations

import io

import numpy as np
from numba import njit

from ...errors import ErrorKind
from ..core.base import OpKernel, RunContext

# Pillow's names of the readers of the formats the operator lists
FORMATS = ("BMP", "JPEG", "JPEG2000", "TIFF", "PNG", "WEBP", "PPM")
_CHANNELS = {"RGB": 3, "BGR": 3, "Grayscale": 1}


def load_pillow():
    """Pillow's Image module; ImportError when Pillow is not installed."""
    import PIL.Image
    return PIL.Image


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _luma(rgb, out):
    """out[i] = BT.601 luma of pixel i of ``rgb`` (3 bytes a pixel), in 16-bit fixed point."""
    for i in range(out.size):
        r = np.int64(rgb[3 * i])
        g = np.int64(rgb[3 * i + 1])
        b = np.int64(rgb[3 * i + 2])
        out[i] = np.uint8((19595 * r + 38470 * g + 7471 * b + 32768) >> 16)


class ImageDecoder(OpKernel):
    """image = the decoded ``encoded_stream`` in ``pixel_format`` (shape [H, W, C], uint8)."""

    supports_exact = True
    outputs_data_dependent = True

    def __init__(self, node):
        super().__init__(node)
        self.channels = node.choice("pixel_format", _CHANNELS, "RGB")
        self.bgr = node.attr("pixel_format", "RGB") == "BGR"
        try:
            load_pillow()
        except ImportError:
            node.fail("decoding images needs Pillow, which is not installed: "
                      "pip install graphrt[image]", ErrorKind.UNSUPPORTED)

    def run(self, ctx: RunContext) -> None:
        x = ctx.inputs[0]
        if x.dtype != np.uint8:
            self.node.fail(f"the encoded stream must be a uint8 tensor, got {x.dtype}",
                           ErrorKind.UNSUPPORTED)
        if x.ndim != 1:
            self.node.fail(f"the encoded stream must be 1-D, got shape {list(x.shape)}",
                           ErrorKind.INVALID_INPUT)
        data = x.tobytes()
        rgb, fmt = self._decode(data)
        if ctx.exact and fmt == "JPEG2000" and not jpeg2000_reversible(data):
            self.node.fail("exact mode cannot decode a JPEG 2000 stream with the irreversible "
                           "9/7 wavelet (computed in floating point by OpenJPEG, so its bits "
                           "may differ between machines)", ErrorKind.EXACT_MODE_UNAVAILABLE)
        h, w = rgb.shape[:2]
        out = ctx.allocate_output(0, np.uint8, (h, w, self.channels))
        if self.channels == 1:
            _luma(rgb.reshape(-1), out.reshape(-1))
        elif self.bgr:
            out[...] = rgb[:, :, ::-1]
        else:
            out[...] = rgb

    def _decode(self, data: bytes):
        """(the first frame as a C-contiguous uint8 [H, W, 3] array, Pillow's format name)."""
        if not data:
            self.node.fail("the encoded stream is empty", ErrorKind.INVALID_INPUT)
        try:
            with load_pillow().open(io.BytesIO(data), formats=FORMATS) as img:
                img.load()
                fmt = img.format
                if img.mode != "RGB":
                    img = img.convert("RGB")
                rgb = np.ascontiguousarray(np.asarray(img, dtype=np.uint8))
        except Exception as e:  # noqa: BLE001 - Pillow raises many kinds for bad bytes
            self.node.fail(f"cannot decode the {len(data)} bytes as "
                           f"{', '.join(FORMATS[:-1])} or PNM: {type(e).__name__}: {e}",
                           ErrorKind.INVALID_INPUT)
        if rgb.ndim != 3 or rgb.shape[2] != 3:
            self.node.fail(f"the decoded image has shape {list(rgb.shape)}, not [H, W, 3]",
                           ErrorKind.INVALID_INPUT)
        return rgb, fmt


def _u16(b: bytes, i: int) -> int:
    return (b[i] << 8) | b[i + 1]


def _u32(b: bytes, i: int) -> int:
    return (_u16(b, i) << 16) | _u16(b, i + 2)


def _codestream(data: bytes) -> int:
    """The offset of the JPEG 2000 codestream in ``data`` (a raw codestream, or the
    contiguous codestream box 'jp2c' of a JP2 file); -1 when none is found."""
    if data[:4] == b"\xff\x4f\xff\x51":
        return 0
    pos = 0
    while pos + 8 <= len(data):
        size, kind, head = _u32(data, pos), data[pos + 4:pos + 8], 8
        if size == 1:
            if pos + 16 > len(data):
                return -1
            size, head = (_u32(data, pos + 8) << 32) | _u32(data, pos + 12), 16
        elif size == 0:
            size = len(data) - pos
        if kind == b"jp2c":
            return pos + head
        if size < head:
            return -1
        pos += size
    return -1


def _irreversible(data: bytes, pos: int, marker: int, csiz: int) -> bool:
    """Whether the COD or COC segment at ``pos`` chooses the irreversible 9/7 wavelet (its
    transformation byte, after Scod and SGcod, or after Ccoc and Scoc, then 4 bytes, is not
    1); False for other markers."""
    if marker == 0xFF52:
        return data[pos + 13] != 1
    if marker == 0xFF53:
        return data[pos + 4 + (1 if csiz < 257 else 2) + 1 + 4] != 1
    return False


def jpeg2000_reversible(data: bytes) -> bool:
    """Whether the JPEG 2000 stream in ``data`` has a COD segment and every COD and COC
    segment (main header and tile-part headers) chooses the reversible 5/3 wavelet; False
    when in doubt."""
    start = _codestream(data)
    if start < 0 or data[start:start + 4] != b"\xff\x4f\xff\x51":
        return False
    try:
        csiz = _u16(data, start + 40)          # SIZ's number of components
        pos, seen = start + 2, False           # the first marker after SOC
        while pos + 4 <= len(data):
            marker, length = _u16(data, pos), _u16(data, pos + 2)
            if marker == 0xFF90:               # SOT: its header up to SOD, then the next
                psot = _u32(data, pos + 6)
                end = len(data) if psot == 0 else pos + psot
                p = pos + 2 + length
                while p + 4 <= end and _u16(data, p) != 0xFF93:
                    if _irreversible(data, p, _u16(data, p), csiz):
                        return False
                    p += 2 + _u16(data, p + 2)
                if psot == 0:
                    break
                pos = end
                continue
            if marker == 0xFFD9:               # EOC
                break
            if _irreversible(data, pos, marker, csiz):
                return False
            seen = seen or marker == 0xFF52
            pos += 2 + length
        return seen
    except IndexError:
        return False
