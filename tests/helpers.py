"""Helpers shared by the tests.

One-node models run on graphrt and on onnx's reference evaluator, in two forms: inputs and
outputs by name (``model_of``, ``compare``, ``error``) or by position, x0, x1, ... to y0,
y1, ... (``one_node``, ``run``, ``ours``, ``reference``, ``both``, ``check``, ``fails``);
comparisons (``same``, ``close``, ``bits``); error expectations naming the node; input
makers; session options by thread count; kernels driven without a session (``kernel_run``
...); onnxruntime as a second oracle; the com.example custom operators (``OPS``).
"""
from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from numba import njit
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphrt
from graphrt import SessionError, SessionOptions
from graphrt.kernels.core.base import InferContext, NodeInfo, RunContext, fold_run

from .models import make

NODE = "the_node"                       # the name every one-node model gives its node
EXACT = SessionOptions(mode="exact")
CANONICAL_NAN32 = 0x7FC00000            # the one float32 NaN exact mode writes


# ---- inputs --------------------------------------------------------------------------------

def i64(*v):
    return np.array(v, dtype=np.int64)


def rand(shape, dtype=np.float32, seed=0):
    """Standard normal values."""
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def uniform(shape, dtype=np.float32, seed=0, low=-1.0):
    """Uniform values in [low, 1)."""
    r = np.random.default_rng(seed).random(shape)
    return (low + (1 - low) * r).astype(dtype)


def ints(shape, lo, hi, dtype, seed=0):
    """Uniform integers in [lo, hi)."""
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


def salted(shape, seed):
    """Normal values with a few NaN, infinities and signed zeros."""
    x = rand(shape, seed=seed)
    flat = x.reshape(-1)
    picks = np.random.default_rng(seed).choice(flat.size, 12, replace=False)
    flat[picks] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40] * 2, np.float32)
    return x


def strings(*items, shape=None):
    """A string tensor (numpy objects)."""
    a = np.array(list(items), dtype=object)
    return a.reshape(shape) if shape is not None else a


# ---- options and threads -------------------------------------------------------------------

def threads(n, exact=True):
    """Session options: ``n`` intra-op threads, exact mode unless ``exact`` is false."""
    return SessionOptions(mode="exact" if exact else "fast", intra_op_threads=n)


@contextlib.contextmanager
def numba_threads(n):
    """numba's thread count set to ``n`` (at most its pool) inside the block."""
    old = numba.get_num_threads()
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(old)


def wait_for_schedules(sess, timeout=120.0):
    """Until no plan of ``sess`` is still compiling its jitted schedule (so a measurement
    sees the steady state, not the compiler)."""
    assert sess.wait_for_schedules(timeout)


# ---- errors --------------------------------------------------------------------------------

def expect_error(kind, fn, *args, match=None, **kw):
    """fn(*args, **kw) raises a SessionError of ``kind`` naming NODE (and containing
    ``match``); returns it."""
    with pytest.raises(SessionError) as info:
        fn(*args, **kw)
    assert info.value.kind == kind, info.value
    assert info.value.node == NODE
    if match is not None:
        assert match in str(info.value), str(info.value)
    return info.value


# ---- comparisons ---------------------------------------------------------------------------

def same(got, want):
    """Equal element types, shapes and values, NaN where NaN is expected (the reference's
    unicode strings count as objects; ml_dtypes values, bfloat16, float8 and the small
    integers, compare through float32, since numpy's NaN test does not know them)."""
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype.kind == "U":
        want = want.astype(object)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    if got.dtype.type.__module__ == "ml_dtypes":
        got, want = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(got, want)


def close(got, want, rtol=1e-5, atol=1e-6):
    """Equal element types and shapes, values within rtol/atol (compared in float64)."""
    assert got.dtype == want.dtype and got.shape == want.shape, \
        (got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol, atol)


def tree_sum(v):
    """Sums over the last axis of ``v`` in graphrt's blocked pairwise order
    (graphrt/kernels/core/summation.py), written again with numpy's element-type arithmetic:
    blocks of 64, eight lanes in a block, block sums combined as a binary counter."""
    dt = v.dtype.type
    n = v.shape[-1]
    parts = []
    for k in range(0, n, 64):
        b = v[..., k:k + 64]
        m = b.shape[-1]
        if m < 8:
            s = b[..., 0].copy()
            for i in range(1, m):
                s = (s + b[..., i]).astype(dt)
        else:
            lanes = [b[..., lane].copy() for lane in range(8)]
            for i in range(8, m):
                lanes[i % 8] = (lanes[i % 8] + b[..., i]).astype(dt)
            s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + \
                ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
        parts.append(s)
    return counter_sum(parts)


def counter_sum(parts, op=None):
    """Partial results combined like a binary counter (by ``op``, addition by default), the
    rest combined newest first."""
    op = op or (lambda a, b: a + b)
    stack = []
    for b, s in enumerate(parts, 1):
        stack.append(s)
        while b % 2 == 0:
            newest = stack.pop()
            stack[-1] = op(stack[-1], newest)
            b //= 2
    total = stack[-1]
    for s in reversed(stack[:-1]):
        total = op(s, total)
    return total


def pairwise_sum(x, axes):
    """ReduceSum's float sum over ``axes`` (keepdims 0) in graphrt's documented order: one
    run per line of the innermost reduced extent after contiguous axes merge, each run by
    tree_sum, the run sums by counter_sum."""
    from graphrt.kernels.reduce.reduce import split_axes
    _, _, rshape, _ = split_axes(x.shape, set(axes))
    kept = [d for d in range(x.ndim) if d not in axes]
    y = np.transpose(x, kept + sorted(axes)).reshape(*(x.shape[d] for d in kept), -1,
                                                     int(rshape[-1]))
    runs = tree_sum(y)
    return counter_sum([runs[..., r] for r in range(runs.shape[-1])])


def bits(a):
    """The bit patterns of ``a``: unsigned integers of its element width."""
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


# ---- one node, inputs and outputs by name --------------------------------------------------

def _element_type(t):
    return TensorProto.UNDEFINED if t is None else helper.np_dtype_to_tensor_dtype(np.dtype(t))


def model_of(op, inputs, outputs, attrs=None, opset=27, inits=(), domain=""):
    """One node; ``inputs`` maps names to arrays (None: omitted), ``outputs`` lists names
    ('' for an output not asked for) with their element types (None: not declared); inputs
    named by ``inits`` are initializers, not graph inputs."""
    node = helper.make_node(op, [n if x is not None else "" for n, x in inputs.items()],
                            [n for n, _ in outputs], name=NODE, domain=domain, **(attrs or {}))
    init_names = {t.name for t in inits}
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
           for n, x in inputs.items() if x is not None and n not in init_names]
    outs = [helper.make_tensor_value_info(n, _element_type(t), None) for n, t in outputs if n]
    m = make([node], ins, outs, inits, opset=opset)
    if domain:
        m.opset_import.append(helper.make_opsetid(domain, 1))
    m.ir_version = 10
    return m


def feeds_of(model, inputs):
    fed = {i.name for i in model.graph.input}
    return {n: x for n, x in inputs.items() if x is not None and n in fed}


def compare(op, inputs, outputs, attrs=None, opset=27, rtol=1e-5, atol=1e-6, options=None,
            inits=(), domain=""):
    """graphrt's outputs (returned) have the reference's types and shapes and values within
    rtol/atol."""
    model = model_of(op, inputs, outputs, attrs, opset, inits, domain)
    feeds = feeds_of(model, inputs)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = graphrt.Session(model, options).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=atol)
    return got


def error(kind, op, inputs, outputs, attrs=None, opset=27, options=None, domain=""):
    """Running the node raises a SessionError of ``kind`` naming it; returns its text."""
    model = model_of(op, inputs, outputs, attrs, opset, domain=domain)
    return str(expect_error(kind, lambda: graphrt.Session(model, options).run(
        None, feeds_of(model, inputs))))


# ---- one node, inputs x0, x1, ... and outputs y0, y1, ... ----------------------------------
#
# ``inputs`` is a list: an array is a graph input of its type and shape, a Const (or an array
# at an index in ``consts``) an initializer, None an omitted input. ``outs`` lists the
# outputs' element types (None: not declared; SKIP: an output not asked for, left unnamed);
# without it there are ``n_out`` outputs of undeclared type. A ``domain`` (the node's) is
# imported at ``domain_opset``; ``trim`` drops the omitted inputs at the end of the node's.

class Const:
    """An input given as an initializer: its value is known when the plan is made."""

    def __init__(self, value):
        self.value = np.asarray(value)


SKIP = object()


def one_node(op, inputs, attrs=None, opset=18, *, outs=None, n_out=1, consts=(), domain="",
             domain_opset=1, trim=False):
    """The model: node NODE, ``op`` of ``attrs``, under the default domain's ``opset``."""
    names = ["" if x is None else f"x{i}" for i, x in enumerate(inputs)]
    while trim and names and not names[-1]:
        names.pop()
    ins, inits = [], []
    for i, (name, x) in enumerate(zip(names, inputs)):
        if x is None:
            continue
        if isinstance(x, Const) or i in consts:
            inits.append(numpy_helper.from_array(x.value if isinstance(x, Const) else
                                                 np.asarray(x), name))
        else:
            a = np.asarray(x)
            ins.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
    types = [None] * n_out if outs is None else list(outs)
    out_names = ["" if t is SKIP else f"y{k}" for k, t in enumerate(types)]
    node = helper.make_node(op, names, out_names, name=NODE, domain=domain or None,
                            **(attrs or {}))
    declared = [helper.make_tensor_value_info(n, _element_type(t), None)
                for n, t in zip(out_names, types) if n]
    model = make([node], ins, declared, inits, opset=opset)
    if domain:
        model.opset_import.append(helper.make_opsetid(domain, domain_opset))
    model.ir_version = 10
    return model


def feeds(inputs, consts=()):
    """The graph inputs of one_node(inputs, consts=consts), by name."""
    return {f"x{i}": x for i, x in enumerate(inputs)
            if x is not None and not isinstance(x, Const) and i not in consts}


def _one_or_all(values):
    return values if len(values) > 1 else values[0]


def run(op, inputs, attrs=None, opset=18, *, options=None, outs=None, n_out=1, consts=(),
        domain="", domain_opset=1, trim=False):
    """graphrt's outputs (a list)."""
    model = one_node(op, inputs, attrs, opset, outs=outs, n_out=n_out, consts=consts,
                     domain=domain, domain_opset=domain_opset, trim=trim)
    return graphrt.Session(model, options).run(None, feeds(inputs, consts))


def ours(op, inputs, attrs=None, opset=18, **kw):
    """graphrt's outputs: the output itself when there is one, else a list (``kw`` as for
    ``run``)."""
    return _one_or_all(run(op, inputs, attrs, opset, **kw))


def _reference(op, inputs, attrs, opset, outs, n_out, consts, domain, domain_opset, trim):
    model = one_node(op, inputs, attrs, opset, outs=outs, n_out=n_out, consts=consts,
                     domain=domain, domain_opset=domain_opset, trim=trim)
    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds(inputs, consts))]


def reference(op, inputs, attrs=None, opset=18, *, outs=None, n_out=1, consts=(), domain="",
              domain_opset=1, trim=False):
    """The reference evaluator's outputs as arrays: the output itself when there is one,
    else a list."""
    return _one_or_all(_reference(op, inputs, attrs, opset, outs, n_out, consts, domain,
                                  domain_opset, trim))


def both(op, inputs, attrs=None, opset=18, *, options=None, outs=None):
    """(graphrt's output, the reference evaluator's output) of a node with one output."""
    model = one_node(op, inputs, attrs, opset, outs=outs)
    fed = feeds(inputs)
    want = ReferenceEvaluator(model).run(None, fed)[0]
    got = graphrt.Session(model, options).run(None, fed)[0]
    return got, np.asarray(want)


def check(op, inputs, attrs=None, opset=18, *, rtol=None, atol=None, options=None, outs=None,
          n_out=1, consts=(), domain="", domain_opset=1, trim=False):
    """Each of graphrt's outputs equals the reference evaluator's (``same``); with ``rtol``,
    floating-point outputs are within rtol/atol instead (``close``). Returns graphrt's
    outputs as ``ours`` does."""
    got = run(op, inputs, attrs, opset, options=options, outs=outs, n_out=n_out,
              consts=consts, domain=domain, domain_opset=domain_opset, trim=trim)
    want = _reference(op, inputs, attrs, opset, outs, n_out, consts, domain, domain_opset,
                      trim)
    for g, w in zip(got, want):
        if rtol is None or w.dtype.kind in "iub":
            same(g, w)
        else:
            close(g, w, rtol, atol)
    return _one_or_all(got)


def fails(kind, op, inputs, attrs=None, opset=18, *, match=None, **kw):
    """Running the node raises a SessionError of ``kind`` naming it (and containing
    ``match``); returns its text (``kw`` as for ``run``)."""
    return str(expect_error(kind, run, op, inputs, attrs, opset, match=match, **kw))


# ---- onnxruntime ---------------------------------------------------------------------------

def onnxruntime_outputs(model, feeds):
    """onnxruntime's outputs of ``model`` on its CPU provider (the test is skipped when
    onnxruntime is not installed)."""
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


# ---- kernels without a session -------------------------------------------------------------

def kernel_node(cls, n_in, attrs=None, opset=13, n_out=1):
    """The NodeInfo of a node NODE of kernel class ``cls``."""
    return NodeInfo(NODE, cls.__name__, "", opset, dict(attrs or {}), n_in, n_out)


def kernel_infer(cls, inputs, attrs=None, opset=13, exact=False, unknown=()):
    """Build the kernel and infer; ``inputs`` are arrays (or None for an absent optional
    input); the indices in ``unknown`` have no known value. Returns (kernel, context)."""
    node = kernel_node(cls, len(inputs), attrs, opset)
    kernel = cls(node)
    ctx = InferContext(node, exact,
                       [None if x is None else x.dtype for x in inputs],
                       [None if x is None else x.shape for x in inputs],
                       [None if x is None or i in unknown else x for i, x in enumerate(inputs)],
                       node.n_outputs)
    kernel.infer(ctx)
    return kernel, ctx


def kernel_run(cls, inputs, attrs=None, opset=13, exact=False, fold=False):
    """The kernel's first output: its constant when infer folds it, else a run's (run as a
    constant fold where ``fold``)."""
    kernel, ctx = kernel_infer(cls, inputs, attrs, opset, exact)
    if ctx.constants[0] is not None:
        return ctx.constants[0]
    outs = [np.empty(s, d) for d, s in zip(ctx.out_dtypes, ctx.out_shapes)]
    run_ctx = RunContext(kernel.node, list(inputs), outs, ctx.prepared, exact)
    if fold:
        fold_run(kernel, run_ctx)
    else:
        kernel.run(run_ctx)
    return outs[0]


# ---- custom operators (the com.example domain) ---------------------------------------------

FLOATS = {np.dtype(np.float32), np.dtype(np.float64)}


@njit(cache=True, nogil=True)
def _swish(x, beta, out):
    for i in range(x.size):
        out[i] = x[i] / (1.0 + math.exp(-beta * x[i]))


class Swish2(graphrt.OpKernel):
    """com.example Swish2(x; beta) = x * sigmoid(beta * x), element-wise."""

    in_place_input = True
    infer_calls = 0

    def __init__(self, node):
        super().__init__(node)
        self.beta = float(node.attr("beta", 1.0))

    def infer(self, ctx):
        type(self).infer_calls += 1
        dt = ctx.check_dtype(0, FLOATS)
        ctx.set_output(0, dt, ctx.shape(0))

    def run(self, ctx):
        x = ctx.flat_in[0]
        _swish(x, x.dtype.type(self.beta), ctx.flat_out[0])


@njit(cache=True, nogil=True)
def _clamp(x, lo, hi, out):
    for i in range(x.size):
        v = x[i]
        out[i] = lo if v < lo else (hi if v > hi else v)


class Clamp(graphrt.OpKernel):
    """com.example Clamp(x; lo, hi): compares and selects only, so it may run in exact mode."""

    supports_exact = True

    def infer(self, ctx):
        dt = ctx.check_dtype(0, FLOATS)
        lo, hi = self.node.attr("lo", -1.0), self.node.attr("hi", 1.0)
        if not lo <= hi:
            ctx.fail(f"lo ({lo}) must not exceed hi ({hi})")
        ctx.set_output(0, dt, ctx.shape(0))
        ctx.prepared = (dt.type(lo), dt.type(hi))

    def run(self, ctx):
        lo, hi = ctx.prepared
        _clamp(ctx.flat_in[0], lo, hi, ctx.flat_out[0])


OPS = graphrt.custom_operators(graphrt.OpDef("com.example", "Swish2", 1, None, Swish2),
                               graphrt.OpDef("com.example", "Clamp", 1, None, Clamp))


# ---- the generic-CPU bit check ------------------------------------------------------------

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))   # the repository


def generic_cpu_bits(module: str, out, cache_dir, timeout: float):
    """Run ``module._dump(out)`` in a fresh process compiling for a baseline x86-64
    (NUMBA_CPU_NAME=generic: SSE2, no AVX, no FMA) with the numba cache ``cache_dir``;
    returns the finished process (its code must have passed)."""
    env = dict(os.environ, NUMBA_CPU_NAME="generic", NUMBA_CACHE_DIR=str(cache_dir),
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    env.pop("NUMBA_CPU_FEATURES", None)
    code = f"from {module} import _dump; _dump({str(out)!r})"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def assert_same_arrays(here: dict, there) -> None:
    """The same keys, and bit-identical arrays under each (``there``: a loaded .npz)."""
    assert sorted(there.files) == sorted(here)
    for key, bits in here.items():
        assert np.array_equal(there[key], bits), key


# The start of a child process's script that lists, in ``compiled``, the qualified names of
# the functions numba compiles in that process from then on (its event API).
RECORD_COMPILES = r"""
from numba.core import event
compiled = []
class _Compiled(event.Listener):
    def on_start(self, e):
        pass
    def on_end(self, e):
        compiled.append(e.data["dispatcher"].py_func.__qualname__)
event.register("numba:compile", _Compiled())
"""
