"""Reductions and their relatives (reduce, argreduce, cumulative, topk) through
graphrt.Session, compared with onnx's reference evaluator or numpy."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from graphrt import ErrorKind, SessionOptions

from ...helpers import (EXACT, bits, close, expect_error, i64, ours, pairwise_sum, rand,
                        reference, tree_sum)


# ----------------------------------------------------------------------------- Reduce*

REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


def positive(op, x):
    return np.abs(x) + 0.5 if op == "ReduceLogSum" else x


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes,keepdims", [
    ([2], 1),           # reduced innermost: one walk per output
    ([0], 0),           # kept innermost: column blocks
    ([0, 2], 1),
    ([-2], 0),
    (None, 1),          # everything
])
def test_reduce_axes_input(op, axes, keepdims):
    x = positive(op, rand((3, 4, 5), seed=1))
    ins = [x] if axes is None else [x, i64(*axes)]
    attrs = {"keepdims": keepdims}
    close(ours(op, ins, attrs, consts=(1,)), reference(op, ins, attrs), rtol=2e-6)


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_axes_attribute_and_empty(op):
    x = positive(op, rand((2, 3, 4), np.float64, seed=2))
    attrs = {"axes": [-1, 0], "keepdims": 0}
    opset = 11 if op == "ReduceSum" else 13
    close(ours(op, [x], attrs, opset), reference(op, [x], attrs, opset), rtol=1e-12)
    # empty reduced axis: the identity; a zero kept extent: no output element
    e = np.zeros((2, 0, 3), np.float32)
    with warnings.catch_warnings():         # numpy's mean of nothing
        warnings.simplefilter("ignore")
        want = reference(op, [e, i64(1)])
    close(ours(op, [e, i64(1)], consts=(1,)), want)
    assert ours(op, [e, i64(2)], consts=(1,)).shape == (2, 0, 1)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceSumSquare", "ReduceLogSum", "ReduceL2"])
def test_reduce_noop_with_empty_axes(op):
    x = positive(op, rand((2, 3), seed=3))
    attrs = {"noop_with_empty_axes": 1}
    for ins in ([x], [x, np.zeros(0, np.int64)]):
        got = ours(op, ins, attrs, consts=(1,))
        close(got, reference(op, ins, attrs))
        assert got.shape == x.shape
    close(ours(op, [x, np.zeros(0, np.int64)], consts=(1,)),   # empty axes, no noop: all
          reference(op, [x, np.zeros(0, np.int64)]))


def test_reduce_sum_opsets_and_run_time_axes():
    x = rand((3, 4), seed=4)
    close(ours("ReduceSum", [x], {"axes": [1]}, opset=11), x.sum(1, keepdims=True))
    # axes as a graph input: known only in the run
    close(ours("ReduceSum", [x, i64(0)], opset=13), x.sum(0, keepdims=True))
    close(ours("ReduceSum", [x, i64(-1)], {"keepdims": 0}, opset=13), x.sum(1))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64, np.float16])
def test_reduce_dtypes(dtype):
    x = (np.random.default_rng(5).integers(1, 9, (4, 6)) * (1 if dtype == np.uint64 else -1))
    x = x.astype(dtype)
    for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"):
        for axes in ([0], [1]):
            got = ours(op, [x, i64(*axes)], consts=(1,))
            want = reference(op, [x, i64(*axes)])
            if dtype == np.float16:
                close(got, want, rtol=2e-3)
            else:
                np.testing.assert_array_equal(got, want.astype(dtype))
                assert got.dtype == x.dtype


def test_reduce_int_mean_truncates_and_big_int64_max():
    x = np.array([[-7, 0], [2, 1]], np.int32)
    np.testing.assert_array_equal(ours("ReduceMean", [x, i64(1)], consts=(1,)), [[-3], [1]])
    big = np.array([[2**62 + 1, 2**62 + 3], [5, 2**62 + 2]], np.int64)
    np.testing.assert_array_equal(ours("ReduceMax", [big, i64(1)], consts=(1,)).ravel(),
                                  [2**62 + 3, 2**62 + 2])
    np.testing.assert_array_equal(ours("ReduceMin", [big, i64(0)], consts=(1,)).ravel(),
                                  [5, 2**62 + 2])


def test_reduce_bool_max_min_and_empty_identities():
    b = np.array([[True, False], [False, False]])
    np.testing.assert_array_equal(ours("ReduceMax", [b, i64(1)], opset=20, consts=(1,)),
                                  [[True], [False]])
    np.testing.assert_array_equal(ours("ReduceMin", [b, i64(0)], opset=20, consts=(1,)),
                                  [[False, False]])
    e = np.zeros((2, 0), np.int32)
    assert (ours("ReduceMax", [e, i64(1)], consts=(1,)) == np.iinfo(np.int32).min).all()
    assert (ours("ReduceMin", [np.zeros((0,), bool)], opset=20)).all()
    f = np.zeros((0, 3), np.float32)
    assert np.isposinf(ours("ReduceMin", [f, i64(0)], consts=(1,))).all()
    assert np.isneginf(ours("ReduceLogSumExp", [f, i64(0)], consts=(1,))).all()
    assert np.isnan(ours("ReduceMean", [f, i64(0)], consts=(1,))).all()


def test_reduce_nan_and_infinities():
    x = np.array([[1, np.nan, 3], [np.inf, 1, 2], [-np.inf, -np.inf, -np.inf]], np.float32)
    mx = ours("ReduceMax", [x, i64(1)], consts=(1,)).ravel()
    assert np.isnan(mx[0]) and mx[1] == np.inf and mx[2] == -np.inf
    mn = ours("ReduceMin", [x, i64(0)], consts=(1,)).ravel()
    assert mn[0] == -np.inf and np.isnan(mn[1])
    lse = ours("ReduceLogSumExp", [x, i64(1)], consts=(1,)).ravel()
    assert np.isnan(lse[0]) and lse[1] == np.inf and lse[2] == -np.inf
    big = np.array([[1000.0, 1000.0]], np.float32)
    close(ours("ReduceLogSumExp", [big, i64(1)], consts=(1,)),
          np.array([[1000 + np.log(2)]], np.float32))


@pytest.mark.parametrize("axes", [[1], [0], [0, 2], [0, 1, 2], [2], [1, 2]])   # the last three: one run per output
def test_reduce_sum_exact_order_and_threads(axes):
    x = rand((64, 40, 33), seed=6) * 1000     # 84k elements: parallel
    one = ours("ReduceSum", [x, i64(*axes)], {"keepdims": 0}, consts=(1,),
               options=SessionOptions(mode="exact", intra_op_threads=1))
    two = ours("ReduceSum", [x, i64(*axes)], {"keepdims": 0}, consts=(1,),
               options=SessionOptions(mode="exact", intra_op_threads=2))
    np.testing.assert_array_equal(bits(one), bits(two))
    np.testing.assert_array_equal(bits(one), bits(pairwise_sum(x, axes)))
    fast = [ours("ReduceSum", [x, i64(*axes)], {"keepdims": 0}, consts=(1,),
                 options=SessionOptions(intra_op_threads=n)) for n in (1, 2)]
    np.testing.assert_array_equal(bits(fast[0]), bits(fast[1]))
    np.testing.assert_array_equal(bits(fast[0]), bits(one))     # the sum's order is both modes'


def test_reduce_exact_flags_and_canonical_nan():
    x = np.array([[np.inf, -np.inf], [1.0, 2.0]], np.float32)
    y = ours("ReduceSum", [x, i64(1)], consts=(1,), options=EXACT)
    assert y.view(np.uint32)[0, 0] == 0x7FC00000


def test_reduce_errors():
    x = rand((2, 3))
    expect_error(ErrorKind.INVALID_MODEL, ours, "ReduceSum", [x, i64(2)], consts=(1,),
                 match="out of range")
    expect_error(ErrorKind.INVALID_MODEL, ours, "ReduceMean", [x, i64(1, -1)], consts=(1,),
                 match="repeat")
    expect_error(ErrorKind.INVALID_MODEL, ours, "ReduceMean", [x], {"axes": [0]}, opset=18,
                 match="input from opset 18")
    expect_error(ErrorKind.UNSUPPORTED, ours, "ReduceLogSumExp",
                 [np.ones((2, 3), np.int32)], opset=28)
    expect_error(ErrorKind.UNSUPPORTED, ours, "ReduceSum", [np.ones(3, bool)])
    ints = np.array([[1, 2], [3, 4]], np.int64)      # integers before opset 28: float64 inside
    np.testing.assert_array_equal(ours("ReduceLogSum", [ints, i64(1)], consts=(1,)),
                                  [[1], [1]])


# ----------------------------------------------------------------------------- ArgMax, ArgMin

@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{}, {"axis": 1, "keepdims": 0}, {"axis": -1},
                                   {"axis": 2, "select_last_index": 1}])
def test_arg_reduce(op, attrs):
    x = np.random.default_rng(7).integers(0, 3, (3, 4, 5)).astype(np.float32)   # many ties
    got = ours(op, [x], attrs, opset=13, outs=[np.int64])
    np.testing.assert_array_equal(got, reference(op, [x], attrs, 13, outs=[np.int64]))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int64])
def test_arg_reduce_compiled_runs_give_the_first_runs_values(op, dt):
    """From the plan's second run the step is compiled calls (float16 widened by a call,
    the column form's running extremes in held scratch): along the last axis and along a
    middle one, with ties and NaNs, the reference's indices at every run."""
    import graphrt

    from ...helpers import feeds, one_node
    from ...test_blocks import plain_program
    x = np.random.default_rng(3).integers(0, 4, (6, 7, 9)).astype(dt)
    if dt != np.int64:
        x[1, 2, 3] = x[4, 0, 5] = np.nan
    for attrs in ({"axis": 2}, {"axis": 1, "select_last_index": 1, "keepdims": 0}):
        model = one_node(op, [x], attrs, 13, outs=[np.int64])
        sess = graphrt.Session(model)
        want = reference(op, [x], attrs, 13, outs=[np.int64])
        for _ in range(4):
            np.testing.assert_array_equal(sess.run(None, feeds([x]))[0], want)
        plan, prog = plain_program(sess)
        assert all(fn is not None for fn, _a, _i in prog), prog


def test_arg_reduce_nan_dtypes_and_errors():
    x = np.array([[1, np.nan, 5, np.nan], [2, 2, 1, 1]], np.float32)
    am = lambda x, **a: ours("ArgMax", [x], {"axis": 1, "keepdims": 0, **a},  # noqa: E731
                             opset=13, outs=[np.int64])
    np.testing.assert_array_equal(am(x), [1, 0])
    np.testing.assert_array_equal(am(x, select_last_index=1), [3, 1])
    np.testing.assert_array_equal(ours("ArgMin", [x], {"axis": 1, "keepdims": 0}, opset=13,
                                       outs=[np.int64]), [1, 2])
    for dt in (np.uint8, np.int64, np.float16):
        v = np.array([[3, 9, 9, 1]], dt)
        np.testing.assert_array_equal(am(v), [1])
    big = rand((300, 300), seed=8)
    np.testing.assert_array_equal(am(big), big.argmax(1))
    assert am(np.zeros((2, 3, 0), np.float32)).shape == (2, 0)     # empty lines after the axis
    expect_error(ErrorKind.INVALID_INPUT, ours, "ArgMax", [np.zeros((2, 0), np.float32)],
                 {"axis": 1}, outs=[np.int64])
    expect_error(ErrorKind.INVALID_MODEL, ours, "ArgMax", [x], {"axis": 2},
                 outs=[np.int64])


# ----------------------------------------------------------------------------- CumSum, CumProd

@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize("attrs", [{}, {"exclusive": 1}, {"reverse": 1},
                                   {"exclusive": 1, "reverse": 1}])
@pytest.mark.parametrize("axis", [0, -1, 1])
def test_cumulative(op, attrs, axis):
    x = (rand((3, 4, 5), seed=9) * 0.5 + 1).astype(np.float32)
    ins = [x, np.array(axis, np.int32)]
    close(ours(op, ins, attrs, opset=26), reference(op, ins, attrs, 26), rtol=1e-6)


def test_cumulative_dtypes_run_time_axis_and_errors():
    x = np.arange(1, 13, dtype=np.int64).reshape(3, 4)
    np.testing.assert_array_equal(ours("CumSum", [x, np.array(1)], opset=14, consts=(1,)),
                                  np.cumsum(x, 1))
    np.testing.assert_array_equal(ours("CumProd", [x.astype(np.uint32), np.array(0)], opset=26),
                                  np.cumprod(x, 0).astype(np.uint32))
    h = np.array([0.5, 1.5, 2.0], np.float16)
    close(ours("CumSum", [h, np.array(0)], opset=14), np.cumsum(h).astype(np.float16))
    e = np.zeros((0, 3), np.float32)
    assert ours("CumSum", [e, np.array(0)], opset=14).shape == (0, 3)
    assert ours("CumSum", [e.reshape(3, 0), np.array(0)], opset=14).shape == (3, 0)
    expect_error(ErrorKind.INVALID_INPUT, ours, "CumSum", [x, np.array(2)], opset=14)
    expect_error(ErrorKind.INVALID_MODEL, ours, "CumSum", [x, i64(0, 1)], opset=14,
                 match="scalar")


def test_cumsum_exact_threads():
    x = rand((300, 301), seed=10)
    runs = [ours("CumSum", [x, np.array(0)], opset=14, consts=(1,),
                 options=SessionOptions(mode="exact", intra_op_threads=n)) for n in (1, 2)]
    np.testing.assert_array_equal(bits(runs[0]), bits(runs[1]))
    np.testing.assert_array_equal(bits(runs[0]), bits(np.cumsum(x, 0, dtype=np.float32)))


# ----------------------------------------------------------------------------- TopK

def topk_reference(x, k, axis, largest):
    """Sort each line by (value, NaN largest) then index ascending."""
    xm = np.moveaxis(x, axis, -1)
    vals = np.empty(xm.shape[:-1] + (k,), x.dtype)
    idx = np.empty(xm.shape[:-1] + (k,), np.int64)
    for pos in np.ndindex(*xm.shape[:-1]):
        line = xm[pos]

        def key(i, line=line):
            v = line[i]
            rank = (1, 0) if v != v else (0, v)
            return (tuple(-r for r in rank), i) if largest else (rank, i)
        order = sorted(range(line.size), key=key)[:k]
        idx[pos] = order
        vals[pos] = line[order]
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


@pytest.mark.parametrize("attrs", [{}, {"axis": 0}, {"largest": 0}, {"axis": 1, "largest": 0}])
@pytest.mark.parametrize("k", [0, 1, 3, 6])
def test_topk(attrs, k):
    x = np.random.default_rng(11).integers(0, 4, (6, 6, 6)).astype(np.float32)  # ties
    v, i = ours("TopK", [x, i64(k)], attrs, opset=11, outs=[x.dtype, np.int64],
                consts=(1,))
    wv, wi = topk_reference(x, k, attrs.get("axis", -1), attrs.get("largest", 1))
    np.testing.assert_array_equal(v, wv)
    np.testing.assert_array_equal(i, wi)


def test_topk_nan_dtypes_run_time_k_and_errors():
    x = np.array([[1, np.nan, 3, 3, -np.inf]], np.float32)
    for largest in (1, 0):
        v, i = ours("TopK", [x, i64(5)], {"largest": largest}, opset=11,
                    outs=[x.dtype, np.int64])
        wv, wi = topk_reference(x, 5, -1, largest)
        np.testing.assert_array_equal(i, wi)
        np.testing.assert_array_equal(v, wv)
    u = np.array([[5, 1, 9, 9]], np.uint64)
    v, i = ours("TopK", [u], {"k": 2}, opset=1, outs=[u.dtype, np.int64])
    np.testing.assert_array_equal(v, [[9, 9]])
    np.testing.assert_array_equal(i, [[2, 3]])
    h = rand((2, 50), np.float16, seed=12)
    v, i = ours("TopK", [h, i64(7)], opset=24, outs=[h.dtype, np.int64])
    wv, wi = topk_reference(h, 7, -1, 1)
    np.testing.assert_array_equal(v, wv)
    np.testing.assert_array_equal(i, wi)
    big = rand((40, 3000), seed=13)
    v, i = ours("TopK", [big, i64(100)], opset=11, outs=[big.dtype, np.int64])
    np.testing.assert_array_equal(i, np.argsort(-big, axis=1, kind="stable")[:, :100])
    expect_error(ErrorKind.INVALID_INPUT, ours, "TopK", [x, i64(6)], opset=11,
                 outs=[x.dtype, np.int64], match="k = 6")
    expect_error(ErrorKind.INVALID_INPUT, ours, "TopK", [x, i64(-1)], opset=11,
                 outs=[x.dtype, np.int64], consts=(1,))
    expect_error(ErrorKind.INVALID_MODEL, ours, "TopK", [x], opset=1,
                 outs=[x.dtype, np.int64], match="'k'")


@pytest.mark.parametrize("n", [63, 64, 65, 127, 128, 129, 192, 1000, 64 * 64, 64 * 64 + 65])
def test_a_contiguous_run_sums_in_the_counters_order(n):
    """One contiguous run of n values per output (core/summation.py's run: its blocks'
    binary counter kept on the machine stack): the bits of the order written again with
    numpy (tests/helpers.tree_sum), at every count of blocks around a power of two."""
    x = (rand((3, n), seed=n) * 1000).astype(np.float32)
    got = ours("ReduceSum", [x, i64(1)], {"keepdims": 0}, consts=(1,),
               options=SessionOptions(mode="exact"))
    np.testing.assert_array_equal(bits(got), bits(tree_sum(x)))
