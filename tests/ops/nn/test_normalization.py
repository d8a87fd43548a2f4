"""The normalisations (LayerNormalization, RMSNormalization, BatchNormalization,
InstanceNormalization, GroupNormalization, LpNormalization, MeanVarianceNormalization)
through graphrt.Session, compared with onnx's reference evaluator or numpy."""
from __future__ import annotations

import tracemalloc

import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphrt
from graphrt import ErrorKind, SessionOptions

from ...helpers import EXACT, bits, close, expect_error, ours, rand, reference
from ...models import make


F32 = np.float32


def layer_norm(x, w, b, axis, eps=1e-5, rms=False):
    axis %= x.ndim
    axes = tuple(range(axis, x.ndim))
    x64 = x.astype(np.float64)
    mean = 0 if rms else x64.mean(axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axes, keepdims=True)
    inv = 1 / np.sqrt(var + eps)
    y = (x64 - mean) * inv * w + (0 if b is None else b)
    return y.astype(x.dtype), np.broadcast_to(mean, inv.shape).astype(F32), inv.astype(F32)


@pytest.mark.parametrize("shape,axis", [((3, 4), -1), ((3, 4), 0), ((2, 3, 5), 1),
                                        ((2, 3, 4, 5), -2), ((2, 3, 4, 5), 0)])
def test_layer_normalization(shape, axis):
    x = rand(shape, seed=1)
    norm = shape[axis % len(shape):]
    w, b = rand(norm, seed=2), rand(norm, seed=3)
    y, mean, inv = ours("LayerNormalization", [x, w, b], {"axis": axis}, opset=17,
                        outs=[F32, F32, F32])
    wy, wmean, winv = layer_norm(x, w, b, axis)
    close(y, wy, 1e-5, 1e-5)
    close(mean, wmean, 1e-5, 1e-6)
    close(inv, winv, 1e-5)


def test_layer_normalization_broadcast_scale_dtypes_and_outputs():
    x = rand((4, 6, 8), np.float64, seed=4)
    w = rand((8,), np.float64, seed=5)                  # broadcast over the normalised (6, 8)
    y = ours("LayerNormalization", [x, w], {"axis": 1, "epsilon": 0.1}, opset=17)
    close(y, layer_norm(x, w, None, 1, float(np.float32(0.1)))[0], 1e-12, 1e-12)
    h = rand((3, 16), np.float16, seed=6)
    hw = np.ones(16, np.float16)
    y = ours("LayerNormalization", [h, hw, None], opset=17)
    close(y, layer_norm(h, hw, None, -1)[0], 2e-3, 2e-3)
    # only Mean asked for (InvStdDev left out)
    x = rand((2, 5), seed=7)
    model_out = ours("LayerNormalization", [x, np.ones(5, F32)], opset=17,
                     outs=[F32, F32])
    close(model_out[1], layer_norm(x, 1, None, -1)[1])
    e = np.zeros((0, 5), F32)
    assert ours("LayerNormalization", [e, np.ones(5, F32)], opset=17).shape == (0, 5)


def test_layer_normalization_exact_threads_and_errors():
    x = rand((300, 512), seed=8) * 10
    w, b = rand(512, seed=9), rand(512, seed=10)
    runs = [ours("LayerNormalization", [x, w, b], opset=17,
                 options=SessionOptions(mode="exact", intra_op_threads=n)) for n in (1, 2)]
    np.testing.assert_array_equal(bits(runs[0]), bits(runs[1]))
    close(runs[0], layer_norm(x, w, b, -1)[0], 1e-4, 1e-4)
    fast = ours("LayerNormalization", [x, w, b], opset=17)
    close(fast, runs[0], 1e-5, 1e-5)
    expect_error(ErrorKind.INVALID_MODEL, ours, "LayerNormalization", [x, rand(3)], opset=17,
                 match="does not broadcast")
    expect_error(ErrorKind.INVALID_MODEL, ours, "LayerNormalization", [x, w], {"axis": 2},
                 opset=17, match="out of range")
    expect_error(ErrorKind.UNSUPPORTED, ours, "LayerNormalization", [x, w], {"stash_type": 16},
                 opset=17)
    expect_error(ErrorKind.UNSUPPORTED, ours, "LayerNormalization",
                 [np.ones((2, 2), np.int32), np.ones(2, np.int32)], opset=17)


@pytest.mark.parametrize("shape,axis", [((3, 4), -1), ((2, 3, 5), 0), ((2, 3, 4, 5), 2)])
def test_rms_normalization(shape, axis):
    x = rand(shape, seed=11)
    w = rand(shape[axis % len(shape):], seed=12)
    y = ours("RMSNormalization", [x, w], {"axis": axis, "epsilon": 1e-3}, opset=23)
    close(y, layer_norm(x, w, None, axis, 1e-3, rms=True)[0], 1e-5, 1e-6)
    close(y, reference("RMSNormalization", [x, w], {"axis": axis, "epsilon": 1e-3}, 23),
          1e-5, 1e-6)


# ----------------------------------------------------------------------------- BatchNormalization

def bn_inputs(shape, seed=20, dtype=F32):
    c = shape[1]
    x = rand(shape, dtype, seed)
    return [x, rand(c, dtype, seed + 1), rand(c, dtype, seed + 2), rand(c, dtype, seed + 3),
            np.abs(rand(c, dtype, seed + 4)) + 0.5]


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4), (2, 3, 4, 5), (1, 4, 2, 2, 3)])
@pytest.mark.parametrize("opset", [9, 15])
def test_batch_normalization_inference(shape, opset):
    ins = bn_inputs(shape)
    attrs = {"epsilon": 1e-2}
    # (the reference evaluator's opset 9 takes the default momentum for training mode)
    close(ours("BatchNormalization", ins, attrs, opset),
          reference("BatchNormalization", ins, attrs, 15), 1e-5, 1e-6)


def test_batch_normalization_training_and_mixed_types():
    ins = bn_inputs((3, 4, 5, 2))
    attrs = {"training_mode": 1, "momentum": 0.7}
    got = ours("BatchNormalization", ins, attrs, 15, outs=[F32] * 3)
    want = reference("BatchNormalization", ins, attrs, 15, outs=[F32] * 3)
    for g, w in zip(got, want):
        close(g, w, 1e-5, 1e-6)
    y = ours("BatchNormalization", ins, attrs, 15)       # Y alone still uses batch statistics
    close(y, want[0], 1e-5, 1e-6)
    # opset 15: scale and bias (T1), mean and var (T2) may differ from X's type
    x16 = ins[0].astype(np.float16)
    mixed = [x16, ins[1], ins[2], ins[3].astype(np.float64), ins[4].astype(np.float64)]
    y = ours("BatchNormalization", mixed, {}, 15)
    close(y, reference("BatchNormalization", ins, {}, 15).astype(np.float16), 3e-3, 3e-3)


def test_batch_normalization_spatial_0_and_errors():
    x = rand((4, 3, 2), seed=30)
    stats = [rand((3, 2), seed=s) for s in (31, 32, 33)] + [np.abs(rand((3, 2), seed=34)) + 1]
    y = ours("BatchNormalization", [x, *stats], {"spatial": 0}, opset=7)
    s, b, m, v = stats
    close(y, (x - m) / np.sqrt(v + 1e-5) * s + b, 1e-5, 1e-6)
    ins = bn_inputs((2, 3, 4))
    expect_error(ErrorKind.INVALID_MODEL, ours, "BatchNormalization", [ins[0], rand(4), *ins[2:]],
                 opset=15, match="should have 3 elements")
    expect_error(ErrorKind.INVALID_MODEL, ours, "BatchNormalization", ins, opset=15,
                 outs=[F32] * 3, match="training_mode")
    expect_error(ErrorKind.UNSUPPORTED, ours, "BatchNormalization", ins, opset=9,
                 outs=[F32] * 5)


def test_batch_normalization_exact_threads():
    ins = bn_inputs((8, 16, 32, 32))
    runs = [ours("BatchNormalization", ins, {"training_mode": 1}, 15, outs=[F32] * 3,
                 options=SessionOptions(mode="exact", intra_op_threads=n)) for n in (1, 2)]
    for a, b in zip(*runs):
        np.testing.assert_array_equal(bits(a), bits(b))


# ----------------------------------------------------------------------------- Instance, Group

@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 2, 3, 4), (2, 3)])
def test_instance_normalization(shape):
    x = rand(shape, seed=40)
    s, b = rand(shape[1], seed=41), rand(shape[1], seed=42)
    got = ours("InstanceNormalization", [x, s, b], {"epsilon": 1e-3}, opset=22)
    close(got, reference("InstanceNormalization", [x, s, b], {"epsilon": 1e-3}, 22), 1e-5, 1e-5)
    expect_error(ErrorKind.INVALID_MODEL, ours, "InstanceNormalization", [x, rand(7), b],
                 opset=22, match="elements")


def group_norm(x, g, scale, bias, per_channel, eps=1e-5):
    n, c = x.shape[:2]
    xg = x.astype(np.float64).reshape(n, g, -1)
    mean = xg.mean(-1, keepdims=True)
    var = ((xg - mean) ** 2).mean(-1, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if not per_channel:
        scale, bias = np.repeat(scale, c // g), np.repeat(bias, c // g)
    return (y * scale.reshape(shape) + bias.reshape(shape)).astype(x.dtype)


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("shape,groups", [((3, 4, 2, 2), 2), ((2, 6, 5), 3), ((2, 4), 4),
                                          ((1, 4, 3), 1)])
def test_group_normalization(opset, shape, groups):
    x = rand(shape, seed=50)
    k = shape[1] if opset >= 21 else groups
    s, b = rand(k, seed=51), rand(k, seed=52)
    got = ours("GroupNormalization", [x, s, b], {"num_groups": groups}, opset=opset)
    close(got, group_norm(x, groups, s, b, opset >= 21), 1e-5, 1e-5)


def test_group_normalization_errors():
    x = rand((2, 6, 3))
    expect_error(ErrorKind.INVALID_MODEL, ours, "GroupNormalization", [x, rand(6), rand(6)],
                 {"num_groups": 4}, opset=21, match="groups")
    expect_error(ErrorKind.INVALID_MODEL, ours, "GroupNormalization", [x, rand(3), rand(3)],
                 {"num_groups": 3}, opset=21, match="6 elements")
    expect_error(ErrorKind.INVALID_MODEL, ours, "GroupNormalization", [x, rand(6), rand(6)],
                 opset=21, match="num_groups")


# ----------------------------------------------------------------------------- Lp, MVN

@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_lp_normalization(p, axis):
    x = rand((3, 4, 5), seed=60)
    x[1, 2, :] = 0
    x[:, 1, 3] = 0
    with np.errstate(invalid="ignore"):
        norm = np.linalg.norm(x, ord=p, axis=axis, keepdims=True)
        want = np.nan_to_num(x / norm, nan=0.0)
    close(ours("LpNormalization", [x], {"p": p, "axis": axis}, opset=22), want, 1e-5, 1e-6)
    expect_error(ErrorKind.INVALID_MODEL, ours, "LpNormalization", [x], {"p": 3})


@pytest.mark.parametrize("axes", [None, [0, 2, 3], [1], [-1, 0]])
def test_mean_variance_normalization(axes):
    x = rand((3, 4, 2, 5), seed=70) * 3 + 1
    attrs = {} if axes is None else {"axes": axes}
    got = ours("MeanVarianceNormalization", [x], attrs, opset=13, options=EXACT)
    close(got, reference("MeanVarianceNormalization", [x], attrs, 13), 1e-5, 1e-5)
    expect_error(ErrorKind.INVALID_MODEL, ours, "MeanVarianceNormalization", [x], {"axes": [4]},
                 opset=13, match="out of range")


def test_normalizations_are_exact_kernels():
    x = rand((4, 6), seed=80)
    for op, ins, attrs, opset in [
            ("RMSNormalization", [x, rand(6)], {}, 23),
            ("InstanceNormalization", [x, rand(6), rand(6)], {}, 22),
            ("GroupNormalization", [x, rand(6), rand(6)], {"num_groups": 2}, 21),
            ("LpNormalization", [x], {}, 22),
            ("BatchNormalization", bn_inputs((4, 6)), {}, 15)]:
        got = ours(op, ins, attrs, opset, options=EXACT)
        close(got, ours(op, ins, attrs, opset), 1e-5, 1e-6)


def test_warm_runs_take_scratch_from_the_arena():
    """float16 copies, broadcast scales and accumulators come from the run's arena."""
    h = helper.make_node
    nodes = [h("LayerNormalization", ["x", "w"], ["a"], axis=1),
             h("ReduceLogSumExp", ["a", "ax"], ["b"]),
             h("ArgMax", ["a"], ["c"], axis=0),
             h("BatchNormalization", ["x", "s", "s", "s", "s"], ["d"])]
    f16 = TensorProto.FLOAT16
    model = make(nodes, [helper.make_tensor_value_info("x", f16, [64, 32, 16])],
                 [helper.make_tensor_value_info(n, t, None)
                  for n, t in (("b", f16), ("c", TensorProto.INT64), ("d", f16))],
                 [helper.make_tensor("w", f16, [16], np.ones(16, np.float16)),
                  helper.make_tensor("s", f16, [32], np.ones(32, np.float16)),
                  helper.make_tensor("ax", TensorProto.INT64, [1], [0])], opset=18)
    sess = graphrt.Session(model, SessionOptions(intra_op_threads=1))
    x = rand((64, 32, 16), np.float16, seed=90)
    sess.run(None, {"x": x})
    sess.run(None, {"x": x})
    outs = {"b": np.empty((1, 32, 16), np.float16), "c": np.empty((1, 32, 16), np.int64),
            "d": np.empty(x.shape, np.float16)}
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for _ in range(3):
            sess.run(None, {"x": x}, out=outs)
        grown = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert grown < x.nbytes // 4, grown


@pytest.mark.parametrize("cols", [3, 8, 64, 65, 200, 4100])
@pytest.mark.parametrize("exact", [False, True])
def test_contiguous_rows_kernel_gives_the_general_walks_bits(cols, exact):
    """LayerNormalization and RMSNormalization over contiguous rows take their own one-loop
    kernel (normalization._rows); it gives the bits of the general walk (_normalize) for
    the same rows, statistics included, in both modes and at every block boundary; with
    scale and bias, without a bias (given as -0.0) and without either (ones and -0.0);
    into another buffer and in place."""
    from graphrt.kernels.nn import normalization as nz
    rng = np.random.default_rng(cols)
    rows = 5
    x = (rng.standard_normal(rows * cols) * 3 + 1).astype(np.float32)
    x[::17] = np.float32(1e4)
    x[1::19] = np.float32(0)
    scale, bias = (rng.standard_normal(cols).astype(np.float32) for _ in range(2))
    ones, neg_zeros = np.ones(cols, np.float32), np.full(cols, -0.0, np.float32)
    kshape, kstride = np.array([rows]), np.array([cols])
    rshape, rstride = np.array([cols]), np.array([1])
    prm = np.array([1e-5, 1, 0, cols, 0, 1], np.float32)
    none = np.empty(0, np.float32)
    for (general, lean), stats, (scaled, shifted), in_place in itertools.product(
            ((nz._LAYER, nz._LAYER_ROWS), (nz._RMS, nz._RMS_ROWS)), (nz.NO_STATS, nz.MEAN_INV),
            ((True, True), (True, False), (False, False)), (False, True)):
        got = [x.copy() if in_place else np.empty(rows * cols, np.float32),
               np.empty(rows, np.float32), np.empty(rows, np.float32)]
        want = [np.empty_like(a) for a in got]
        st = (got[1], got[2]) if stats else (none, none)
        lean[in_place].get(exact)(got[0] if in_place else x, scale if scaled else ones,
                                  bias if shifted else neg_zeros, got[0], *st, cols, prm,
                                  stats, rows)
        st = (want[1], want[2]) if stats else (none, none)
        general.get(exact)(x, scale if scaled else none, bias if shifted else none, none, none,
                           want[0], *st, kshape, kstride, rshape, rstride, cols,
                           np.array([1, 0, cols, 1]), prm, scaled, shifted, stats, rows)
        for g, w in zip(got, want) if stats else zip(got[:1], want[:1]):
            assert g.tobytes() == w.tobytes(), (lean[in_place].name, stats, scaled, shifted)


@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 16, 64), (3, 4, 1)])
@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("parallel", [False, True])
def test_batch_normalization_planes_give_the_general_walks_bits(shape, exact, parallel):
    """BatchNormalization in inference takes its own kernel over (image, channel) planes
    (normalization._planes); it gives the bits of the general walk (_normalize, GIVEN)
    in both modes, serial and parallel, into another buffer and in place, and with an
    absorbed Relu the bits of the walk followed by Relu."""
    from graphrt.kernels.core.pointwise import relu_float
    from graphrt.kernels.nn import normalization as nz
    n, c = shape[:2]
    spatial = int(np.prod(shape[2:]))
    x, scale, bias, mean, var = bn_inputs(shape)
    x = x.reshape(-1)
    x[::13] = np.float32(1e4)
    x[1::11] = np.nan
    prm = np.array([1e-3, 1, 0, n * spatial, 0, 1], np.float32)
    none = np.empty(0, np.float32)
    walk = (np.array([c]), np.array([spatial]), np.array([n, spatial]), np.array([c * spatial, 1]))
    want = np.empty_like(x)
    nz._GIVEN.get(exact, parallel)(x, scale, bias, mean, var, want, none, none, *walk,
                                   n * spatial, np.array([c, 1, 0, 0]), prm, True, True,
                                   nz.NO_STATS, c)
    for relu, in_place in itertools.product((False, True), (False, True)):
        got = x.copy() if in_place else np.empty_like(x)
        nz._GIVEN_PLANES[relu][in_place].get(exact, parallel)(
            got if in_place else x, scale, bias, mean, var, got, c, spatial, prm, n * c)
        expected = np.array([relu_float(v) for v in want], np.float32) if relu else want
        assert got.tobytes() == expected.tobytes(), (relu, in_place)
