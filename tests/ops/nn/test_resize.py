"""Resize and Upsample through graphrt.Session, compared with onnx's reference evaluator or
numpy."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from graphrt import ErrorKind

from ...helpers import EXACT, bits, close, expect_error, i64, ours, rand, reference, salted, threads


F32 = np.float32


TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric", "tf_crop_and_resize"]
SCALES = np.array([1, 1, 0.6, 1.7], F32)
SIZES = i64(2, 3, 3, 11)
ROI = np.array([0, 0, 0.1, 0.2, 1, 1, 0.8, 1.1], F32)


def f32(*v):
    return np.array(v, F32)


def resize_inputs(x, transform, scales=None, sizes=None):
    roi = ROI if transform == "tf_crop_and_resize" else None
    return [x, roi, scales, sizes]


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_resize_matches_reference(mode, transform):
    x = rand((2, 3, 5, 7), seed=1)
    attrs = {"mode": mode, "coordinate_transformation_mode": transform,
             "extrapolation_value": -3.0}
    for scales, sizes in ((SCALES, None), (None, SIZES)):
        inputs = resize_inputs(x, transform, scales, sizes)
        close(ours("Resize", inputs, attrs, opset=19, consts=(1, 2, 3)),
              reference("Resize", inputs, attrs, opset=19), 1e-5, 1e-5)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_and_exclude_outside(mode):
    x = rand((1, 2, 9, 10), seed=2)
    for antialias, exclude, a in itertools.product((0, 1), (0, 1), (-0.75, -0.5)):
        attrs = {"mode": mode, "antialias": antialias, "exclude_outside": exclude,
                 "cubic_coeff_a": a}
        for scales in (f32(1, 1, 0.45, 0.3), f32(1, 1, 2.5, 0.8)):
            inputs = [x, None, scales]
            close(ours("Resize", inputs, attrs, opset=19, consts=(2,)),
                  reference("Resize", inputs, attrs, opset=19), 1e-5, 1e-5)


def test_resize_nearest_modes_axes_and_policies():
    x = rand((2, 3, 5, 7), seed=3)
    for nearest, sizes in itertools.product(
            ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"], (i64(9, 4), i64(3, 13))):
        attrs = {"mode": "nearest", "nearest_mode": nearest, "axes": [3, 2]}
        want = reference("Resize", [x, None, None, sizes], attrs, opset=19)
        np.testing.assert_array_equal(ours("Resize", [x, None, None, sizes], attrs, opset=19),
                                      want)
        # negative axes name the same axes
        np.testing.assert_array_equal(
            ours("Resize", [x, None, None, sizes], dict(attrs, axes=[-1, -2]), opset=19), want)
    for policy, mode in itertools.product(["not_larger", "not_smaller"], ["nearest", "linear"]):
        attrs = {"mode": mode, "keep_aspect_ratio_policy": policy, "axes": [2, 3]}
        inputs = [x, None, None, i64(4, 9)]
        close(ours("Resize", inputs, attrs, opset=19),
              reference("Resize", inputs, attrs, opset=19), 1e-5, 1e-6)
    # tf_crop_and_resize with axes: roi lists the starts, then the ends of those axes
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
             "axes": [3, 2], "extrapolation_value": 7.0}
    inputs = [x, f32(-0.2, 0.1, 0.9, 1.3), None, i64(6, 4)]
    close(ours("Resize", inputs, attrs, opset=19), reference("Resize", inputs, attrs, opset=19),
          1e-5, 1e-6)


def test_resize_types():
    rng = np.random.default_rng(4)
    scales = f32(1, 1, 1.5, 0.7)
    for dt in (np.uint8, np.int8, np.int32, np.float64, np.float16):
        x = (rng.standard_normal((1, 2, 5, 6)) * 50).astype(dt)
        for mode in ("nearest", "linear", "cubic"):
            got = ours("Resize", [x, None, scales], {"mode": mode}, opset=19)
            want = reference("Resize", [x, None, scales], {"mode": mode}, opset=19)
            # (the reference computes cubic weights in float32, whatever the data type)
            tol = {np.float16: 1e-2, np.float64: 1e-5}.get(dt, 0)
            close(got, want, tol, tol if dt != np.float16 else 0.1)
    # nearest moves any element type unchanged: bool and strings too
    b = rng.standard_normal((3, 4)) > 0
    s = np.array([[f"s{i}{j}" for j in range(4)] for i in range(3)], dtype=object)
    rows, cols = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 0, 1, 2, 2, 3])
    for x in (b, s):
        got = ours("Resize", [x, None, f32(2, 1.5)], {"mode": "nearest", "nearest_mode": "floor",
                                                      "coordinate_transformation_mode":
                                                          "asymmetric"}, opset=19)
        np.testing.assert_array_equal(got, x[rows][:, cols])
    expect_error(ErrorKind.UNSUPPORTED, ours, "Resize", [b, None, f32(2, 2)],
                 {"mode": "linear"}, opset=19)


def test_resize_opsets_and_upsample():
    x = rand((1, 2, 3, 4), seed=5)
    # opset 10: asymmetric coordinates, floor when growing and ceil when shrinking
    got = ours("Resize", [x, f32(1, 1, 2, 0.5)], {"mode": "nearest"}, opset=10)
    np.testing.assert_array_equal(got, x[:, :, [0, 0, 1, 1, 2, 2]][:, :, :, [0, 2]])
    lin = ours("Resize", [x, f32(1, 1, 2, 1)], {"mode": "linear"}, opset=10)
    close(lin, reference("Resize", [x, None, f32(1, 1, 2, 1)],
                         {"mode": "linear", "coordinate_transformation_mode": "asymmetric"},
                         opset=19))
    # opset 11: roi and scales are required inputs, empty when unused
    empty = np.zeros(0, F32)
    close(ours("Resize", [x, empty, empty, i64(1, 2, 5, 7)], {"mode": "linear"}, opset=11),
          reference("Resize", [x, None, None, i64(1, 2, 5, 7)], {"mode": "linear"}, opset=19))
    close(ours("Resize", [x, empty, f32(1, 1, 2, 2)], {"mode": "cubic"}, opset=13),
          reference("Resize", [x, None, f32(1, 1, 2, 2)], {"mode": "cubic"}, opset=19))
    # Upsample: scales as an attribute (7) or an input (9); nearest repeats
    up = np.repeat(np.repeat(x, 2, axis=2), 3, axis=3)
    np.testing.assert_array_equal(ours("Upsample", [x], {"scales": [1.0, 1.0, 2.0, 3.0]},
                                       opset=7), up)
    np.testing.assert_array_equal(ours("Upsample", [x, f32(1, 1, 2, 3)], opset=9), up)
    close(ours("Upsample", [x, f32(1, 1, 2, 2)], {"mode": "linear"}, opset=9),
          reference("Resize", [x, None, f32(1, 1, 2, 2)],
                    {"mode": "linear", "coordinate_transformation_mode": "asymmetric"},
                    opset=19))
    expect_error(ErrorKind.INVALID_MODEL, ours, "Upsample", [x], opset=7, match="scales")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Resize", [x, f32(1, 1, 2, 2)],
                 {"mode": "cubic"}, opset=10)


def test_resize_identity_empty_and_exact_threads():
    x = rand((2, 3, 4, 5), seed=6)
    np.testing.assert_array_equal(ours("Resize", [x, None, f32(1, 1, 1, 1)], opset=19), x)
    assert ours("Resize", [x, None, f32(1, 1, 0.1, 1)], opset=19).shape == (2, 3, 0, 5)
    big = salted((2, 8, 40, 50), 7)
    for attrs in ({"mode": "linear"}, {"mode": "cubic", "antialias": 1},
                  {"mode": "nearest"}):
        one, two = (ours("Resize", [big, None, f32(1, 1, 1.7, 0.6)], attrs, opset=19,
                         options=threads(n)) for n in (1, 2))
        np.testing.assert_array_equal(bits(one), bits(two))
    clean = rand((2, 8, 40, 50), seed=8)
    close(ours("Resize", [clean, None, f32(1, 1, 1.7, 0.6)], {"mode": "linear"}, opset=19,
               options=EXACT),
          reference("Resize", [clean, None, f32(1, 1, 1.7, 0.6)], {"mode": "linear"},
                    opset=19), 1e-5, 1e-5)


def test_resize_errors():
    x = rand((1, 1, 3, 4))
    expect_error(ErrorKind.INVALID_INPUT, ours, "Resize", [x, None, f32(1, 1, 2, 2),
                                                           i64(1, 1, 6, 8)], opset=19,
                 match="exactly one")
    expect_error(ErrorKind.INVALID_INPUT, ours, "Resize", [x, None, f32(2, 2)], opset=19,
                 match="should have 4 values")
    expect_error(ErrorKind.INVALID_INPUT, ours, "Resize", [x, None, f32(1, 1, -2, 2)],
                 opset=19, match="positive")
    expect_error(ErrorKind.INVALID_INPUT, ours, "Resize", [x, None, None, i64(1, 1, -1, 2)],
                 opset=19, match="negative")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Resize", [x, None, f32(1, 1, 2, 2)],
                 {"mode": "area"}, opset=19)
    expect_error(ErrorKind.INVALID_MODEL, ours, "Resize", [x, None, f32(2, 2)],
                 {"axes": [2, 2]}, opset=19, match="twice")
    expect_error(ErrorKind.INVALID_MODEL, ours, "Resize", [x, None, f32(2, 2)],
                 {"axes": [2, 4]}, opset=19, match="out of range")
    expect_error(ErrorKind.INVALID_INPUT, ours, "Resize", [x, None, None, i64(1, 1, 6, 8)],
                 {"coordinate_transformation_mode": "tf_crop_and_resize"}, opset=19,
                 match="roi")


@pytest.mark.parametrize("dtype", [F32, np.float64, np.int8, np.uint16])
@pytest.mark.parametrize("transform", ["asymmetric", "tf_crop_and_resize", "half_pixel"])
def test_resize_nearest_compiled_calls_give_the_first_runs_values(dtype, transform):
    """From a plan's second run, nearest resizing of numbers runs as compiled calls (the
    gather, then the fills of extrapolated rows) in the blocks: the values of the first
    run's Python step, and of onnx's reference."""
    import graphrt
    from ...helpers import feeds, one_node
    x = (rand((2, 3, 5, 7), seed=4) * 50).astype(dtype)
    inputs = [x, ROI if transform == "tf_crop_and_resize" else None,
              np.array([1, 1, 2.0, 1.5], F32), None]
    attrs = {"mode": "nearest", "coordinate_transformation_mode": transform,
             "extrapolation_value": -3.0 if dtype != np.uint16 else 3.0}
    model = one_node("Resize", inputs, attrs, 19, consts=(1, 2))
    sess = graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=1))
    f = feeds(inputs, consts=(1, 2))
    runs = [sess.run(None, f)[0] for _ in range(3)]
    (_key, entry), = sess._plans._entries
    plain = entry.pool._idle[0].program.plain
    assert plain and all(fn is not None for fn, _args, _i in plain)    # no Python step
    assert runs[1].tobytes() == runs[0].tobytes() == runs[2].tobytes()
    np.testing.assert_array_equal(runs[0], reference("Resize", inputs, attrs, 19))


@pytest.mark.parametrize("dtype", [F32, np.float16, np.int8])
@pytest.mark.parametrize("shape,factors,transform", [
    ((2, 3, 5, 7), (2, 2), "asymmetric"), ((1, 4, 6, 5), (3, 2), "half_pixel"),
    ((3, 6, 5), (1, 3), "asymmetric"), ((5, 4), (2, 1), "half_pixel"),
    ((1, 2, 4, 4), (4, 4), "asymmetric")])
def test_upsampling_by_whole_factors_repeats_without_the_index_table(shape, factors, transform,
                                                                     dtype):
    """Nearest resizing whose picks repeat each element of the last two axes a whole number
    of times (a detector's 2x upsampling) writes the repeats directly: the gather's values
    and onnx's reference, at 1 and 2 threads."""
    import graphrt
    from graphrt.kernels.nn import resize

    from ...helpers import feeds, one_node
    x = (rand(shape, seed=6) * 50).astype(dtype)
    scales = np.array([1.0] * (len(shape) - 2) + [float(k) for k in factors], F32)
    inputs = [x, None, scales, None]
    attrs = {"mode": "nearest", "coordinate_transformation_mode": transform,
             "nearest_mode": "floor" if transform == "asymmetric" else "round_prefer_floor"}
    model = one_node("Resize", inputs, attrs, 19, consts=(1, 2))
    f = feeds(inputs, consts=(1, 2))
    got = [graphrt.Session(model, graphrt.SessionOptions(intra_op_threads=t)).run(None, f)[0]
           for t in (1, 2)]
    sess = graphrt.Session(model)
    sess.run(None, f)
    (_key, entry), = sess._plans._entries
    assert entry.plan.steps[0].prepared.gather[6] is not None     # the repeats' path
    np.testing.assert_array_equal(got[0], reference("Resize", inputs, attrs, 19))
    assert got[0].tobytes() == got[1].tobytes()
