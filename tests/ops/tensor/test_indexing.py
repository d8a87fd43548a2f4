"""Indexing, slicing and shape-building operators (tensor: gather, scatter, slicing, expand,
creation, indices, space_depth, and constants' Size) through graphrt.Session, compared with
onnx's reference evaluator or numpy.

Inputs given as ``Const(array)`` become initializers (values known when the plan is made);
plain arrays are graph inputs (values known only at run time), so both paths are exercised.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphrt
from graphrt import ErrorKind

from ...helpers import Const, EXACT, bits, check, fails, feeds, i64, one_node, ours, reference, same
from ...models import make


RNG = np.random.default_rng(7)
X34 = RNG.standard_normal((3, 4)).astype(np.float32)
X234 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
WORDS = np.array([["a", "bb", "c"], ["dd", "e", "ff"]], dtype=object)


# ----------------------------------------------------------------------------- gather

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_axes_and_index_types(axis):
    idx = np.array([[0, -1], [1, -2]], np.int32)
    check("Gather", [X234, idx], {"axis": axis}, opset=13)
    check("Gather", [X234, Const(idx.astype(np.int64))], {"axis": axis}, opset=11)


@pytest.mark.parametrize("data", [WORDS, np.array([[True, False, True], [False, False, True]]),
                                  X34.astype(np.float16), np.arange(6, dtype=np.uint64) << 60])
def test_gather_element_types(data):
    check("Gather", [data, i64(1, 0, -1)], {"axis": 0}, opset=13)


def test_gather_scalar_and_empty_indices():
    check("Gather", [X34, np.array(2, np.int64)], {"axis": 0}, opset=13)
    check("Gather", [X34, np.zeros((0, 2), np.int64)], {"axis": 1}, opset=13)
    check("Gather", [np.zeros((0, 3), np.float32), i64(2)], {"axis": 1}, opset=13)


def test_gather_index_errors():
    msg = fails(ErrorKind.INVALID_INPUT, "Gather", [X34, i64(0, 3)], {"axis": 0}, opset=13)
    assert "index 3" in msg
    fails(ErrorKind.INVALID_INPUT, "Gather", [X34, Const(i64(-5))], {"axis": 1}, opset=13,
          match="index -5")
    fails(ErrorKind.INVALID_MODEL, "Gather", [X34, i64(0)], {"axis": 2}, opset=13)
    fails(ErrorKind.UNSUPPORTED, "Gather", [X34, np.array([0], np.int16)], opset=13)


def test_gather_large_parallel():
    x = RNG.standard_normal((300, 400)).astype(np.float32)
    idx = RNG.integers(-300, 300, 500)
    same(ours("Gather", [x, idx], {"axis": 0}, opset=13), x[idx])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis):
    idx = RNG.integers(-3, 3, (3, 4))
    check("GatherElements", [X34, idx], {"axis": axis}, opset=13)
    small = idx[:2, :2]                     # smaller than the data off the axis
    want = np.take_along_axis(X34[:2, :] if axis == 1 or axis == -1 else X34[:, :2], small, axis)
    same(ours("GatherElements", [X34, small], {"axis": axis}, opset=13), want)
    got = ours("GatherElements", [WORDS, np.array([[1, 0]], np.int32)], {"axis": 0}, opset=13)
    same(got, np.array([["dd", "bb"]], dtype=object))


def test_gather_elements_errors():
    fails(ErrorKind.INVALID_INPUT, "GatherElements", [X34, np.array([[4]], np.int64)],
          {"axis": 1}, opset=13, match="index 4")
    fails(ErrorKind.INVALID_MODEL, "GatherElements", [X34, np.zeros((4, 1), np.int64)],
          {"axis": 1}, opset=13)
    fails(ErrorKind.INVALID_MODEL, "GatherElements", [X34, np.zeros(3, np.int64)], opset=13)


@pytest.mark.parametrize("batch_dims, idx", [
    (0, np.array([[0, 1], [1, -1]], np.int64)),
    (0, np.array([[1], [0]], np.int64)),
    (1, np.array([[2], [-1]], np.int64)),
    (1, np.array([[[1, 0]], [[2, 3]]], np.int64)),
])
def test_gather_nd(batch_dims, idx):
    check("GatherND", [X234, idx], {"batch_dims": batch_dims}, opset=13)


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd_compiled_runs_check_their_tuples(batch_dims):
    """From the plan's second run GatherND is compiled calls (the tuples' check, then the
    gather) inside a block: its first run's values, and a tuple out of range at a later run
    still raises the SessionError naming the node (the check traps to the step's run)."""
    from graphrt.plan import program

    from ...test_blocks import plain_program
    m = make([helper.make_node("GatherND", ["x", "i"], ["g"], name="gnd",
                               batch_dims=batch_dims), helper.make_node("Neg", ["g"], ["y"])],
             [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
              helper.make_tensor_value_info("i", TensorProto.INT64, [2, 2])],
             [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=13)
    sess = graphrt.Session(m)
    ok = np.array([[1, -1], [0, 2]], np.int64)
    from onnx.reference import ReferenceEvaluator
    want = ReferenceEvaluator(m).run(None, {"x": X234, "i": ok})[0]
    for _ in range(4):
        np.testing.assert_array_equal(sess.run(None, {"x": X234, "i": ok})[0], want)
    plan, prog = plain_program(sess)
    assert any(isinstance(fn, program.Block) and
               any(plan.steps[i].node.info.op_type == "GatherND" for i in fn.steps)
               for fn, _a, _i in prog)
    bad = np.array([[1, 0], [0, 3 + batch_dims]], np.int64)
    with pytest.raises(graphrt.SessionError) as e:
        sess.run(None, {"x": X234, "i": bad})
    assert e.value.kind is ErrorKind.INVALID_INPUT and e.value.node == "gnd"
    np.testing.assert_array_equal(sess.run(None, {"x": X234, "i": ok})[0], want)


def test_gather_nd_strings_and_errors():
    check("GatherND", [WORDS, np.array([[1, 2], [0, 0]], np.int64)], opset=13)
    fails(ErrorKind.INVALID_INPUT, "GatherND", [X234, np.array([[0, 3]], np.int64)], opset=13,
          match="index 3 (position 1")
    fails(ErrorKind.INVALID_MODEL, "GatherND", [X34, np.zeros((1, 3), np.int64)], opset=13)
    fails(ErrorKind.INVALID_MODEL, "GatherND", [X234, np.zeros((3, 1), np.int64)],
          {"batch_dims": 1}, opset=13)


# ----------------------------------------------------------------------------- scatter

@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_scatter_elements_reductions(reduction, dtype):
    data = (10 * X34).astype(dtype)
    idx = np.array([[1, 1, -1, 0], [1, 0, 2, 0]], np.int64)     # duplicates included
    upd = (5 * RNG.standard_normal((2, 4))).astype(dtype)
    attrs = {"axis": 0, "reduction": reduction}
    got = ours("ScatterElements", [data, idx, upd], attrs)
    want = data.copy()
    for (i, j), u in np.ndenumerate(upd):
        k = idx[i, j] % 3
        want[k, j] = {"none": lambda a, b: b, "add": np.add, "mul": np.multiply,
                      "max": np.maximum, "min": np.minimum}[reduction](want[k, j], u)
    same(got, want)


def test_scatter_elements_axis_types_and_old_forms():
    idx = np.array([[0, -1], [2, 1], [3, 3]], np.int32)
    upd = RNG.standard_normal((3, 2)).astype(np.float32)
    check("ScatterElements", [X34, idx, upd], {"axis": -1}, opset=11)
    got = ours("Scatter", [X34, idx, upd], {"axis": 1}, opset=10)
    same(got, reference("ScatterElements", [X34, idx, upd], {"axis": 1}, opset=11))
    check("ScatterElements", [WORDS, np.array([[2, 0]], np.int64),
                              np.array([["x", "y"]], dtype=object)], {"axis": 1})
    flags = np.array([[True, False, False]])
    check("ScatterElements", [flags, np.array([[2]], np.int64), np.array([[True]])], {"axis": 1})


def test_scatter_exact_canonical_nan():
    data = np.array([1.0, 2.0], np.float32)
    nan = np.array([np.nan], np.float32).view(np.uint32) | np.uint32(5)   # a NaN payload
    upd = nan.view(np.float32)
    model = one_node("ScatterElements", [data, np.array([0], np.int64), upd],
                     {"reduction": "add"})
    feed = feeds([data, np.array([0], np.int64), upd])
    got = graphrt.Session(model, EXACT).run(None, feed)[0]
    assert bits(got)[0] == 0x7FC00000
    model = one_node("ScatterElements", [data, np.array([0], np.int64), upd])
    got = graphrt.Session(model, EXACT).run(None, feed)[0]
    assert bits(got)[0] == bits(upd)[0]      # "none" moves bits


def test_scatter_errors():
    upd = np.ones((1, 1), np.float32)
    fails(ErrorKind.INVALID_INPUT, "ScatterElements", [X34, np.array([[3]], np.int64), upd],
          {"axis": 0}, match="index 3")
    fails(ErrorKind.INVALID_MODEL, "ScatterElements", [X34, np.array([[0, 1]], np.int64), upd])
    fails(ErrorKind.INVALID_MODEL, "ScatterElements", [X34, np.array([[0]], np.int64), upd],
          {"reduction": "avg"})
    half = X34.astype(np.float16)
    fails(ErrorKind.UNSUPPORTED, "ScatterElements",
          [half, np.array([[0]], np.int64), upd.astype(np.float16)], {"reduction": "add"})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(reduction):
    idx = np.array([[[0, 1]], [[1, -1]], [[0, 1]]], np.int64)
    upd = RNG.standard_normal((3, 1, 4)).astype(np.float32)
    if reduction == "none":
        idx = idx[:2]
        upd = upd[:2]
    check("ScatterND", [X234, idx, upd], {"reduction": reduction})


def test_scatter_nd_slices_strings_and_errors():
    check("ScatterND", [X234, np.array([[1], [0]], np.int64),
                        RNG.standard_normal((2, 3, 4)).astype(np.float32)])
    check("ScatterND", [WORDS, np.array([[1, 2]], np.int64), np.array(["z"], dtype=object)])
    fails(ErrorKind.INVALID_INPUT, "ScatterND",
          [X34, np.array([[0, 4]], np.int64), np.ones(1, np.float32)], match="index 4")
    fails(ErrorKind.INVALID_MODEL, "ScatterND",
          [X34, np.array([[0, 1]], np.int64), np.ones(2, np.float32)])


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter(mode):
    cache = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
    upd = RNG.standard_normal((2, 3, 2, 4)).astype(np.float32)
    pos = i64(1, 3) if mode == "linear" else i64(4, 7)
    check("TensorScatter", [cache, upd, pos], {"mode": mode}, opset=24)
    check("TensorScatter", [cache, upd], {"mode": mode}, opset=24)
    words = np.array([["a", "b", "c"], ["d", "e", "f"]], dtype=object)
    check("TensorScatter", [words, np.array([["x"], ["y"]], dtype=object), i64(2, 0)],
          {"mode": mode, "axis": 1}, opset=24)


def test_tensor_scatter_errors():
    cache = np.zeros((2, 5, 4), np.float32)
    upd = np.ones((2, 2, 4), np.float32)
    fails(ErrorKind.INVALID_INPUT, "TensorScatter", [cache, upd, i64(0, 4)], {"axis": 1},
          opset=24, match="write index 4")
    fails(ErrorKind.INVALID_MODEL, "TensorScatter", [cache, np.ones((2, 6, 4), np.float32)],
          {"axis": 1}, opset=24)


# ----------------------------------------------------------------------------- slicing

@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([0, 1], [2, 3], [0, 1], [1, 1]),
    ([-1, 0], [-10, 4], [1, 2], [-1, 2]),                 # negative step, clamped end
    ([20, -100], [-100, 100], [2, 0], [-3, 1]),
    ([1], [1], [0], [1]),                                 # empty
    ([2], [9223372036854775807], [-1], [1]),
    ([0, 3, 1], [2, -9223372036854775808, 3], [0, 2, 1], [1, -1, 1]),
])
def test_slice_inputs(starts, ends, axes, steps):
    args = [X234, i64(*starts), i64(*ends), i64(*axes), i64(*steps)]
    check("Slice", args, opset=13)
    check("Slice", [X234] + [Const(a) for a in args[1:]], opset=13)


def test_slice_defaults_strings_and_old_opset():
    check("Slice", [X234, i64(1, 0), i64(2, 2)], opset=13)
    check("Slice", [WORDS, i64(2), i64(-4), i64(1), i64(-1)], opset=13)
    check("Slice", [X234], {"starts": [0, -2], "ends": [1, 10], "axes": [0, -1]}, opset=9)
    check("Slice", [X234.astype(np.float16), i64(3), i64(0), i64(2), i64(-2)], opset=13)


def test_slice_errors():
    fails(ErrorKind.INVALID_INPUT, "Slice", [X34, i64(0), i64(2), i64(0), i64(0)], opset=13,
          match="step 0")
    fails(ErrorKind.INVALID_INPUT, "Slice", [X34, i64(0, 0), i64(2, 2), i64(0, -2)], opset=13)
    fails(ErrorKind.INVALID_MODEL, "Slice", [X34, i64(0), i64(2), i64(2)], opset=13)
    fails(ErrorKind.INVALID_MODEL, "Slice", [X34], {"starts": [0, 0], "ends": [1, 1],
                                                    "axes": [1, 1]}, opset=9)


@pytest.mark.parametrize("opset, attrs, extra", [
    (11, {"axis": 2, "split": [1, 3]}, []),
    (13, {"axis": -1}, [i64(3, 1)]),
    (13, {"axis": 2}, [Const(i64(0, 4))]),
    (13, {"axis": -1}, []),
    (18, {"axis": 0, "num_outputs": 2}, []),
])
def test_split(opset, attrs, extra):
    check("Split", [X234, *extra], attrs, opset=opset, n_out=2)


def test_split_uneven_and_errors():
    x = np.arange(7, dtype=np.int64)
    got = ours("Split", [x], {"num_outputs": 3}, opset=18, n_out=3)
    assert [list(g) for g in got] == [[0, 1, 2], [3, 4, 5], [6]]
    fails(ErrorKind.INVALID_MODEL, "Split", [x], opset=13, n_out=2)
    fails(ErrorKind.INVALID_INPUT, "Split", [x, i64(3, 3)], opset=13, n_out=2)
    fails(ErrorKind.INVALID_MODEL, "Split", [x], {"num_outputs": 3}, opset=18, n_out=2)


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_compress(axis):
    cond = np.array([True, False, True])
    attrs = {} if axis is None else {"axis": axis}
    check("Compress", [X34, cond], attrs, opset=11)
    check("Compress", [WORDS, Const(cond)], {} if axis == 0 else attrs, opset=11)


def test_compress_condition_beyond_axis():
    check("Compress", [X34, np.array([False, True, False, False, False])], {"axis": 0})
    fails(ErrorKind.INVALID_INPUT, "Compress", [X34, np.array([True, False, False, True])],
          {"axis": 0}, match="index 3")


@pytest.mark.parametrize("batch_axis, time_axis", [(0, 1), (1, 0)])
def test_reverse_sequence(batch_axis, time_axis):
    x = RNG.standard_normal((4, 4, 2)).astype(np.float32)
    lens = i64(4, 0, 2, 1)
    attrs = {"batch_axis": batch_axis, "time_axis": time_axis}
    check("ReverseSequence", [x, lens], attrs)
    check("ReverseSequence", [WORDS.T.copy(), i64(3, 1)], attrs if batch_axis == 1 else
          {"batch_axis": 1, "time_axis": 0})
    fails(ErrorKind.INVALID_INPUT, "ReverseSequence", [x, i64(5, 0, 0, 0)], attrs,
          match="sequence length 5")


def test_reverse_sequence_bad_axes():
    fails(ErrorKind.INVALID_MODEL, "ReverseSequence", [X34, i64(1, 1, 1)],
          {"batch_axis": 0, "time_axis": 0})


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -1, 2, -9, 40])
def test_trilu(upper, k):
    extra = [] if k is None else [np.array(k, np.int64)]
    check("Trilu", [X234, *extra], {"upper": upper}, opset=14)


def test_trilu_types():
    check("Trilu", [np.ones((3, 4), bool), np.array(1, np.int64)], {"upper": 0}, opset=14)
    got = ours("Trilu", [WORDS], opset=14)
    same(got, np.array([["a", "bb", "c"], ["", "e", "ff"]], dtype=object))


@pytest.mark.parametrize("target, axes", [
    ([2, 6], None), ([5, 2], [0, -1]), ([1], [1]), ([3, 3, 7], None)])
def test_center_crop_pad(target, axes):
    attrs = {} if axes is None else {"axes": axes}
    x = X234 if len(target) == 3 else X34
    check("CenterCropPad", [x, i64(*target)], attrs)


def test_center_crop_pad_errors():
    fails(ErrorKind.INVALID_MODEL, "CenterCropPad", [X34, i64(1, 1)], {"axes": [1, 1]})
    fails(ErrorKind.INVALID_INPUT, "CenterCropPad", [X34, i64(1, 1, 1)])


# ----------------------------------------------------------------------------- expand, tile, pad

@pytest.mark.parametrize("x, shape", [
    (X34[:, :1], [2, 1, 6]), (X34, [1]), (np.array(3.0, np.float32), [2, 0]),
    (np.array([[True], [False]]), [2, 3]), (WORDS[:1], [2, 1, 3])])
def test_expand(x, shape):
    check("Expand", [x, i64(*shape)], opset=13)


def test_expand_errors():
    fails(ErrorKind.INVALID_INPUT, "Expand", [X34, i64(5, 4)], opset=13)
    fails(ErrorKind.INVALID_INPUT, "Expand", [X34, i64(-1, 4)], opset=13)


@pytest.mark.parametrize("x, reps", [(X234, [1, 2, 3]), (X34, [0, 2]), (WORDS, [2, 1])])
def test_tile(x, reps):
    check("Tile", [x, i64(*reps)], opset=13)
    check("Tile", [x, Const(i64(*reps))], opset=13)


def test_tile_errors():
    fails(ErrorKind.INVALID_INPUT, "Tile", [X34, i64(1)], opset=13)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[1, 2, 0, 3], [0, 1, 2, 0], [2, 7, 3, 9], [-1, 2, 1, -2]])
def test_pad_modes(mode, pads):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    got = ours("Pad", [x, i64(*pads), np.array([1.5], np.float32)], {"mode": mode}, opset=19)
    b0, b1, e0, e1 = pads
    crop = x[max(0, -b0):x.shape[0] - max(0, -e0), max(0, -b1):x.shape[1] - max(0, -e1)]
    width = [(max(b0, 0), max(e0, 0)), (max(b1, 0), max(e1, 0))]
    kw = {"constant_values": 1.5} if mode == "constant" else {}
    same(got, np.pad(crop, width, mode=mode, **kw))


def test_pad_axes_types_and_old_forms():
    check("Pad", [X234, i64(1, 2, 0, 1), np.array(7, np.float32), i64(-1, 0)], opset=18)
    check("Pad", [X234], {"pads": [0, 1, 0, 0, 2, 1], "value": 2.0}, opset=2)
    check("Pad", [X234.astype(np.int8), Const(i64(0, 1, 0, 0, 2, 1))], {"mode": "edge"}, opset=13)
    check("Pad", [np.array([[True, False]]), i64(1, 1, 0, 0)], opset=13)
    got = ours("Pad", [WORDS, i64(0, 1, 0, 0)], opset=13)
    same(got, np.array([["", "a", "bb", "c"], ["", "dd", "e", "ff"]], dtype=object))


def test_pad_errors():
    fails(ErrorKind.INVALID_INPUT, "Pad", [X34, i64(1, 1, 1)], opset=13, match="pads")
    fails(ErrorKind.INVALID_INPUT, "Pad", [X34, i64(-4, 0, 0, 0)], opset=13, match="remove")
    fails(ErrorKind.INVALID_INPUT, "Pad", [np.zeros((0, 2), np.float32), i64(1, 0, 0, 0)],
          {"mode": "edge"}, opset=13, match="no elements")
    fails(ErrorKind.INVALID_MODEL, "Pad", [X34, i64(0, 0, 0, 0)], {"mode": "wrap"}, opset=18)


# ----------------------------------------------------------------------------- generators

def test_constant_of_shape():
    value = helper.make_tensor("v", TensorProto.INT32, [1], [7])
    check("ConstantOfShape", [i64(2, 3)], {"value": value}, opset=9)
    check("ConstantOfShape", [i64(0, 3)], opset=9)
    check("ConstantOfShape", [Const(np.zeros(0, np.int64))], opset=9)
    fails(ErrorKind.INVALID_INPUT, "ConstantOfShape", [i64(2, -1)], opset=9)


@pytest.mark.parametrize("start, limit, delta", [
    (np.float32(1), np.float32(5.5), np.float32(0.5)), (np.int32(10), np.int32(4), np.int32(-3)),
    (np.int64(0), np.int64(0), np.int64(1)), (np.float64(-1), np.float64(1), np.float64(0.3)),
    (np.int16(3), np.int16(9), np.int16(-1))])
def test_range(start, limit, delta):
    args = [np.array(v) for v in (start, limit, delta)]
    got = ours("Range", args, opset=11)
    want = reference("Range", args, opset=11)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_range_float16_and_errors():
    args = [np.array(v, np.float16) for v in (0.5, 4.0, 0.25)]
    same(ours("Range", args, opset=27), reference("Range", args, opset=27))
    fails(ErrorKind.INVALID_INPUT, "Range", [np.array(v, np.float32) for v in (0, 1, 0)], opset=11)


@pytest.mark.parametrize("k", [0, 2, -1, 9])
def test_eye_like(k):
    check("EyeLike", [np.zeros((3, 5), np.float32)], {"k": k}, opset=9)
    check("EyeLike", [np.zeros((4, 2), np.int64)], {"k": k, "dtype": TensorProto.BOOL}, opset=9)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis):
    idx = np.array([[0, -1, 7], [2, 3, -9]], np.int64)
    values = np.array([0.5, 2.0], np.float32)
    check("OneHot", [idx, np.array(4, np.int64), values], {"axis": axis}, opset=11)
    check("OneHot", [idx.astype(np.float32), Const(np.array(4.0, np.float32)),
                     np.array([3, 9], np.int32)], {"axis": axis}, opset=11)


def test_one_hot_old_opset_and_strings():
    got = ours("OneHot", [i64(-1, 1), np.array(3, np.int64), np.array([0, 1], np.int64)],
               opset=9)
    same(got, np.array([[0, 0, 0], [0, 1, 0]], np.int64))
    got = ours("OneHot", [i64(2, -1), np.array(3, np.int64), np.array(["n", "y"], dtype=object)])
    same(got, np.array([["n", "n", "y"], ["n", "n", "y"]], dtype=object))


def test_size_and_cast_like():
    same(ours("Size", [X234]), np.array(24, np.int64))
    check("CastLike", [X34, np.zeros(1, np.int32)], opset=15)
    check("CastLike", [X34.astype(np.float16), np.zeros(1, np.float64)], opset=15)
    fails(ErrorKind.UNSUPPORTED, "CastLike", [X34, np.zeros(1, dtype=object)], opset=15)


@pytest.mark.parametrize("x", [
    np.array([[0.0, -0.0, np.nan], [1.0, 0.0, -2.0]], np.float32),
    np.array([[0, 3], [5, 0]], np.uint8), np.array([True, False, True]),
    np.array(["", "a", "b", ""], dtype=object), np.array(5.0, np.float64),
    np.zeros((2, 0, 3), np.int64), np.array([0, 1, 0], np.float16)])
def test_nonzero(x):
    got = ours("NonZero", [x], opset=13)
    assert got.dtype == np.int64
    same(got, np.array(np.nonzero(x), np.int64).reshape(x.ndim, -1) if x.ndim else
         np.zeros((0, 1), np.int64))


@pytest.mark.parametrize("x, axis", [
    (np.array([2, 1, 1, 3, 4, 3, -0.0, 0.0, np.nan, np.nan], np.float32), None),
    (np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], np.int64), 0),
    (np.array([[[1., 1.], [0., 1.], [2., 1.], [0., 1.]]] * 2, np.float64), 1),
    (np.array([[1, 0, 1], [1, 0, 1]], np.int8), -1),
    (np.array([True, False, True]), None), (np.array([3, 1, 3], np.float16), None),
    (np.array(["b", "a", "b", "c"], dtype=object), None), (np.zeros(0, np.int32), None)])
@pytest.mark.parametrize("ordered", [1, 0])
def test_unique(x, axis, ordered):
    attrs = {"sorted": ordered} if axis is None else {"sorted": ordered, "axis": axis}
    got = ours("Unique", [x], attrs, opset=11, n_out=4)
    _, first, inverse, counts = np.unique(x, True, True, True, axis=axis, equal_nan=True)
    inverse = inverse.reshape(-1)
    if not ordered:
        by_first = np.argsort(first, kind="stable")
        rank = np.empty_like(by_first)
        rank[by_first] = np.arange(by_first.size)
        first, counts, inverse = first[by_first], counts[by_first], rank[inverse]
    flat = x.reshape(-1) if axis is None else x
    same(got[0], np.take(flat, first, axis=0 if axis is None else axis))
    for g, w in zip(got[1:], (first, inverse, counts)):
        same(g, w.astype(np.int64))


def test_unique_one_output():
    same(ours("Unique", [np.array([3, 1, 3], np.int64)], opset=11), i64(1, 3))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_space(mode):
    x = RNG.standard_normal((2, 8, 2, 3)).astype(np.float32)
    y = check("DepthToSpace", [x], {"blocksize": 2, "mode": mode}, opset=13)
    back = ours("SpaceToDepth", [y], {"blocksize": 2, "mode": mode}, opset=13)
    same(back, x)
    check("SpaceToDepth", [WORDS.reshape(1, 1, 2, 3)[:, :, :, :2].copy()], {"blocksize": 2},
          opset=13)


def test_depth_space_errors():
    x = np.zeros((1, 6, 2, 2), np.float32)
    fails(ErrorKind.INVALID_MODEL, "DepthToSpace", [x], {"blocksize": 2}, opset=13)
    fails(ErrorKind.INVALID_MODEL, "SpaceToDepth", [x[:, :, :1]], {"blocksize": 2}, opset=13)
    fails(ErrorKind.INVALID_MODEL, "DepthToSpace", [x], {"blocksize": 0}, opset=13)


# ----------------------------------------------------------------------------- exact mode

def test_exact_mode_moves_bits():
    x = np.array([1.0, np.nan, -0.0, 3.0], np.float32)
    x.view(np.uint32)[1] |= 7                   # a NaN payload must survive data movement
    cases = [("Gather", [x, i64(1, 2)], {}, 13), ("Slice", [x, i64(3), i64(0), i64(0),
                                                            i64(-1)], {}, 13),
             ("Pad", [x, i64(1, 2)], {"mode": "reflect"}, 13), ("Tile", [x, i64(2)], {}, 13),
             ("Expand", [x, i64(2, 4)], {}, 13), ("Split", [x], {}, 13)]
    for op, inputs, attrs, opset in cases:
        fast = ours(op, inputs, attrs, opset)
        exact = ours(op, inputs, attrs, opset, options=EXACT)
        same(bits(exact), bits(fast))
        assert 0x7FC00007 in bits(exact).reshape(-1).tolist()


# ----------------------------------------------------------------------------- in graphs

def test_folded_shape_chain_and_dynamic_chain():
    """Shape -> Gather -> ConstantOfShape folds at plan time; NonZero -> Transpose -> GatherND
    -> Expand runs with shapes known only during the run."""
    n = helper.make_node
    nodes = [n("Shape", ["x"], ["s"]), n("Gather", ["s", "one"], ["d"], axis=0),
             n("ConstantOfShape", ["d"], ["c"]),
             n("NonZero", ["x"], ["nz"]), n("Transpose", ["nz"], ["t"]),
             n("GatherND", ["x", "t"], ["g"]), n("Expand", ["g", "two"], ["e"])]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b"])]
    outs = [helper.make_tensor_value_info(v, t, None)
            for v, t in (("c", TensorProto.FLOAT), ("e", TensorProto.FLOAT))]
    model = make(nodes, ins, outs, [numpy_helper.from_array(i64(1), "one"),
                                    numpy_helper.from_array(i64(2, 1), "two")], opset=13)
    sess = graphrt.Session(model)
    for x in (np.array([[0, 1.5, 0], [2, 0, 3]], np.float32), np.zeros((4, 2), np.float32)):
        c, e = sess.run(None, {"x": x})
        same(c, np.zeros(x.shape[1:], np.float32))
        same(e, np.broadcast_to(x[x != 0], (2, int((x != 0).sum()))))


def test_large_inputs_take_the_parallel_kernels():
    x = RNG.standard_normal((256, 300)).astype(np.float32)
    same(ours("Slice", [x, i64(-1, 5), i64(-1000, 290), i64(0, 1), i64(-2, 3)], opset=13),
         x[::-2, 5:290:3])
    same(ours("Pad", [x, i64(3, 1, 2, 4)], {"mode": "reflect"}, opset=13),
         np.pad(x, ((3, 2), (1, 4)), mode="reflect"))
    same(ours("Tile", [x, i64(2, 1)], opset=13), np.tile(x, (2, 1)))
    same(ours("Trilu", [x, np.array(-3, np.int64)], {"upper": 0}, opset=14), np.tril(x, -3))
    gi = RNG.integers(-256, 256, x.shape)
    same(ours("GatherElements", [x, gi], opset=13), np.take_along_axis(x, gi % 256, 0))
    idx = RNG.integers(0, 300, 400)
    got = ours("OneHot", [idx, np.array(300, np.int64), np.array([0, 1], np.float32)], opset=11)
    same(got, np.eye(300, dtype=np.float32)[idx])
    x3 = RNG.standard_normal((64, 40, 30)).astype(np.float32)
    idx = RNG.integers(-40, 40, (64, 50, 1))
    same(ours("GatherND", [x3, idx], {"batch_dims": 1}, opset=13),
         np.take_along_axis(x3, idx % 40, 1))
    lens = RNG.integers(0, 40, 64)
    want = x3.copy()
    for b, n in enumerate(lens):
        want[b, :n] = x3[b, :n][::-1]
    same(ours("ReverseSequence", [x3, lens], {"batch_axis": 0, "time_axis": 1}), want)
    same(ours("Range", [np.array(v, np.int64) for v in (0, 70000, 1)], opset=11),
         np.arange(70000, dtype=np.int64))


def test_bfloat16_is_moved_as_bits():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = X34.astype(bf16)
    same(bits(ours("Gather", [x, i64(2, 0)], opset=13)), bits(x[[2, 0]]))
    same(bits(ours("Pad", [x, i64(0, 1, 0, 1), np.array([2.5], bf16)], opset=13)),
         bits(np.pad(x, ((0, 0), (1, 1)), constant_values=bf16.type(2.5))))
    args = [np.array(v, bf16) for v in (1.0, 9.0, 1.5)]
    same(ours("Range", args, opset=27), reference("Range", args, opset=27))
