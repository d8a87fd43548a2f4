"""Exact mode: identical bits at 1 and 2 threads, on a new and a reused plan, from different
pooled run states; Add/Mul/Relu agree with fast mode; MatMul follows the k-ascending rule."""
import threading

import numpy as np
from onnx import helper

import graphrt
from graphrt.plan.execute import execute

from .models import F, exact_model, make, tensor


def special_values(shape, seed):
    """Normal values salted with NaN, ±inf, ±0 and denormals."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, size=min(flat.size, 40), replace=False)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-41], np.float32)
    flat[picks] = specials[np.arange(picks.size) % specials.size]
    return x


def bits(a):
    return a.view(np.uint32)


def test_exact_bits_across_threads_plans_and_states():
    model = exact_model()
    x = special_values((700, 96), 1)
    one = graphrt.Session(model, graphrt.SessionOptions(mode="exact", intra_op_threads=1))
    two = graphrt.Session(model, graphrt.SessionOptions(mode="exact", intra_op_threads=2))
    first = one.run(None, {"x": x})[0]                    # freshly made plan
    assert np.array_equal(bits(first), bits(one.run(None, {"x": x})[0]))     # reused plan
    assert np.array_equal(bits(first), bits(two.run(None, {"x": x})[0]))
    nan = np.isnan(first)
    assert nan.any() and np.all(bits(first)[nan] == 0x7FC00000)

    # several run states of one plan at once: threads run concurrently on one session
    results = [None] * 6
    def work(k):
        results[k] = two.run(None, {"x": x})[0]
    ts = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for r in results:
        assert np.array_equal(bits(first), bits(r))

    # two distinct run states of the same plan, used one after the other
    (_, entry), = two._plans._entries
    s1, s2 = entry.take(), entry.take()
    assert s1 is not s2 and s1.slab.ctypes.data != s2.slab.ctypes.data
    for state in (s1, s2, s1):
        execute(entry.plan, state, [x], None, False)
        assert np.array_equal(bits(first), bits(state.values[two._graph.output_ids[0]]))


def test_exact_equals_sequential_k_reference_without_fma():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((37, 300)).astype(np.float32)
    b = rng.standard_normal((300, 45)).astype(np.float32)
    model = make([helper.make_node("MatMul", ["a", "b"], ["y"])],
                 [tensor("a", F, [37, 300]), tensor("b", F, [300, 45])], [tensor("y", F, [37, 45])])
    got = graphrt.Session(model, graphrt.SessionOptions(mode="exact")).run(None, {"a": a, "b": b})[0]
    acc = np.zeros((37, 45), np.float32)
    for k in range(300):
        acc = acc + (a[:, k:k + 1] * b[k:k + 1, :])         # float32 multiply, then float32 add
    assert np.array_equal(bits(got), bits(acc))


def test_add_mul_relu_same_bits_fast_and_exact():
    n = helper.make_node
    model = make([n("Add", ["x", "z"], ["a"]), n("Mul", ["a", "z"], ["m"]), n("Relu", ["m"], ["y"])],
                 [tensor("x", F, [300, 257]), tensor("z", F, [257])], [tensor("y", F, [300, 257])])
    x, z = special_values((300, 257), 4), special_values((257,), 5)
    fast = graphrt.Session(model).run(None, {"x": x, "z": z})[0]
    exact = graphrt.Session(model, graphrt.SessionOptions(mode="exact")).run(None, {"x": x, "z": z})[0]
    nan = np.isnan(fast)
    assert np.array_equal(nan, np.isnan(exact))
    assert np.array_equal(bits(fast)[~nan], bits(exact)[~nan])
    relu = np.where(x <= 0, np.float32(0), x)
    assert np.array_equal(bits(graphrt.load(make([n("Relu", ["x"], ["y"])], [tensor("x", F, [300, 257])],
                                                 [tensor("y", F, [300, 257])]))(x))[~np.isnan(x)],
                          bits(relu)[~np.isnan(x)])
