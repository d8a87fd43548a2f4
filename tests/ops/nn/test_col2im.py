"""Col2Im through graphrt.Session, compared with onnx's reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

import graphrt
from graphrt import ErrorKind

from ...helpers import EXACT, compare, error, model_of, uniform
from ...models import const


F32 = np.float32


# ----------------------------------------------------------------------------- Col2Im

# name: (input shape, image_shape, block_shape, attributes)
COL2IM = {
    "plain": ((1, 5, 5), [5, 5], [1, 5], {}),
    "strides_batch_channels": ((2, 18, 4), [5, 5], [3, 3], {"strides": [2, 2]}),
    "pads_dilations": ((1, 8, 25), [4, 5], [2, 2], {"pads": [1, 0, 2, 1],
                                                   "dilations": [2, 1]}),
    "three_d": ((1, 24, 12), [3, 4, 5], [2, 2, 3], {"strides": [1, 2, 1]}),
    "one_d": ((2, 6, 4), [6], [3], {}),
}


@pytest.mark.parametrize("name", sorted(COL2IM))
def test_col2im_matches_reference(name):
    shape, image, block, attrs = COL2IM[name]
    inputs = {"x": uniform(shape), "image_shape": np.array(image, np.int64),
              "block_shape": np.array(block, np.int64)}
    compare("Col2Im", inputs, [("y", F32)], attrs, opset=18)


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.bool_])
def test_col2im_types_and_constant_shapes(dtype):
    x = uniform((2, 8, 6), F32, 3, -3)
    x = x > 0.4 if dtype == np.bool_ else (x * 10).astype(dtype)
    inputs = {"x": x, "image_shape": np.array([3, 4], np.int64),
              "block_shape": np.array([2, 2], np.int64)}
    inits = [const(n, inputs[n]) for n in ("image_shape", "block_shape")]
    compare("Col2Im", inputs, [("y", dtype)], {}, opset=18, inits=inits, rtol=1e-3)


def test_col2im_exact_matches_fast_and_empty():
    inputs = {"x": uniform((2, 9, 9)), "image_shape": np.array([6, 6], np.int64),
              "block_shape": np.array([3, 3], np.int64)}
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 2]}
    model = model_of("Col2Im", inputs, [("y", F32)], attrs, opset=18)
    fast = graphrt.Session(model).run(None, inputs)[0]
    exact = graphrt.Session(model, EXACT).run(None, inputs)[0]
    np.testing.assert_array_equal(fast, exact)
    inputs["x"] = np.zeros((0, 9, 9), F32)
    model = model_of("Col2Im", inputs, [("y", F32)], attrs, opset=18)
    assert graphrt.Session(model).run(None, inputs)[0].shape == (0, 1, 6, 6)


def test_col2im_errors():
    inputs = {"x": uniform((1, 9, 5)), "image_shape": np.array([5, 5], np.int64),
              "block_shape": np.array([3, 3], np.int64)}
    msg = error(ErrorKind.INVALID_INPUT, "Col2Im", inputs, [("y", F32)], opset=18)
    assert "9 blocks" in msg
    inputs["x"] = np.array([["a"] * 9], dtype=object).reshape(1, 9, 1)
    inputs["image_shape"] = np.array([3, 3], np.int64)
    error(ErrorKind.UNSUPPORTED, "Col2Im", inputs, [("y", object)], opset=18)
    error(ErrorKind.INVALID_MODEL, "Col2Im", inputs, [("y", object)], {"strides": [0, 1]},
          opset=18)
