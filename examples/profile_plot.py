"""Writes docs/profile.png: a transformer block (tests/models.py) profiled over a few warm
runs, drawn with graphrt.plot. Run from anywhere: python examples/profile_plot.py"""
import os
import sys

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import graphrt  # noqa: E402
from graphrt.plot import plot_profile  # noqa: E402
from tests import models  # noqa: E402

sess = graphrt.Session(models.transformer_block(d=64, heads=4), graphrt.SessionOptions(intra_op_threads=1))
x = np.random.default_rng(0).standard_normal((8, 64, 64)).astype(np.float32)
sess.run(None, {"x": x})                     # build the plan and compile the kernels first
prof = graphrt.Profile()
for _ in range(5):
    sess.run(None, {"x": x}, profile=prof)
print(prof.table(limit=8))
path = os.path.join(ROOT, "docs", "profile.png")
plot_profile(prof, path)
print("wrote", path)
