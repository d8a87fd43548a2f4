"""Load the bundled MLP, score a batch, and check graphrt against onnx's reference evaluator."""
import os
import time

import numpy as np
from onnx.reference import ReferenceEvaluator

import graphrt

HERE = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(HERE, "mlp.onnx")

t0 = time.perf_counter()
model = graphrt.load(path)
x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
probs = model(x)
first = time.perf_counter() - t0
print(f"graphrt {graphrt.__version__}: {os.path.basename(path)} -> output {probs.shape} "
      f"(first call incl. compile {first:.2f} s)")
print(np.array2string(probs[:3], precision=4))

expected = ReferenceEvaluator(path).run(None, {"x": x})[0]
print("max |graphrt - onnx reference| =", float(np.abs(probs - expected).max()))

out = np.empty(8 * 4, np.float32)
shape = model.run_into(x, out)
print("run_into wrote shape", shape, "equal:", np.array_equal(out.reshape(shape), probs))
