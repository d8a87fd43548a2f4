"""The jitted schedule (graphrt/plan/jitsched.py): runs of static steps compiled into one
generated numba function over the slab give the bits the step-by-step loop gives."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import numba
import pytest
from numba import njit
from onnx import helper

import graphrt
from graphrt.plan import jitsched

from . import models
from .models import F, const, make, tensor

n = helper.make_node


def chain_model():
    """Element-wise and reduction steps (all jittable), a Reshape view among them, then a
    MatMul and a CumSum (not jittable: it runs as Python between two segments), then more
    steps."""
    rng = np.random.default_rng(0)
    nodes = [n("Add", ["x", "b"], ["a"]), n("Mul", ["a", "s"], ["m"]), n("Relu", ["m"], ["r"]),
             n("Tanh", ["r"], ["t"]), n("Reshape", ["t", "shape"], ["v"]),
             n("Sub", ["v", "b2"], ["d"]), n("MatMul", ["d", "w"], ["p0"]),
             n("CumSum", ["p0", "axis"], ["p"]), n("Sigmoid", ["p"], ["g"]), n("Neg", ["g"], ["q"]), n("Exp", ["q"], ["e"]),
             n("ReduceSum", ["e", "axes"], ["y"], keepdims=0)]
    inits = [const("b", rng.standard_normal(24).astype(np.float32)),
             const("s", np.float32(0.75)), const("shape", np.array([-1, 24], np.int64)),
             const("b2", rng.standard_normal(24).astype(np.float32)),
             const("w", rng.standard_normal((24, 8)).astype(np.float32)),
             const("axes", np.array([1], np.int64)), const("axis", np.array(1, np.int64))]
    return make(nodes, [tensor("x", F, ["n", 24])], [tensor("y", F, None)], inits)


def compiled(sess):
    """The session's only plan, its schedule compiled now (synchronously)."""
    (key, entry), = sess._plans._entries
    state = entry.take()
    try:
        entry.plan.jit = jitsched.compile_schedule(entry.plan, state)
    finally:
        entry.give(state)
    return entry.plan


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHRT_SCHEDULE_DIR", str(tmp_path / "schedules"))
    monkeypatch.setenv("GRAPHRT_JIT_SCHEDULE", "0")     # compiled here, not in the background
    return tmp_path / "schedules"


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("threads", [1, 2])
def test_segments_give_the_loops_bits(mode, threads, cache_dir):
    x = np.random.default_rng(1).standard_normal((70000, 24)).astype(np.float32)
    x[3, 5] = np.nan
    opts = graphrt.SessionOptions(mode=mode, intra_op_threads=threads, optimization_level="basic")
    sess = graphrt.Session(chain_model(), opts)
    want = sess.run(None, {"x": x})[0]
    plan = compiled(sess)
    spans = [(s.start, s.stop) for s in plan.jit.segments]
    kinds = [st.node.info.op_type for st in plan.steps]
    python = kinds.index("CumSum")
    assert len(spans) == 2 and spans[0][1] == python and spans[1][0] == python + 1, spans
    for _ in range(2):
        got = sess.run(None, {"x": x})[0]
        assert got.tobytes() == want.tobytes()
    assert list(cache_dir.glob("graphrt_sched_*.py"))        # written for later processes


def test_model_outputs_and_run_into_through_segments():
    model = graphrt.load(models.transformer_block(), intra_op_threads=1)
    x = np.random.default_rng(2).standard_normal((8, 32, 32)).astype(np.float32)
    want = model(x)
    plan = compiled(model.session)
    assert plan.jit is not None and plan.jit.segments
    out = np.empty_like(want)
    model.run_into(x, out)
    assert out.tobytes() == want.tobytes() == model(x).tobytes()


def test_profile_and_cancel_runs_take_every_step():
    sess = graphrt.Session(chain_model())
    x = np.ones((5, 24), np.float32)
    sess.run(None, {"x": x})
    plan = compiled(sess)
    assert plan.jit is not None
    prof = graphrt.Profile()
    sess.run(None, {"x": x}, profile=prof)
    assert len(prof.steps) == len(plan.steps)      # one timing per step: none skipped
    token = graphrt.CancelToken()
    token.cancel()
    with pytest.raises(graphrt.SessionError) as info:
        sess.run(None, {"x": x}, cancel=token)
    assert info.value.kind == graphrt.ErrorKind.CANCELLED


def test_a_reused_plan_compiles_in_the_background(monkeypatch):
    monkeypatch.setenv("GRAPHRT_JIT_SCHEDULE", "1")
    sess = graphrt.Session(chain_model())
    x = np.ones((5, 24), np.float32)
    want = sess.run(None, {"x": x})[0]
    sess.run(None, {"x": x})                   # the second run starts the compile
    assert sess.wait_for_schedules(300)
    (key, entry), = sess._plans._entries
    assert getattr(entry.plan, "jit_error", None) is None
    assert entry.plan.jit is not None
    assert sess.run(None, {"x": x})[0].tobytes() == want.tobytes()


def test_another_process_loads_the_schedule_from_disk(cache_dir):
    """The generated module is named by its text's hash and cached by numba on disk: a second
    process finds it and compiles nothing (numba's cache hit counter)."""
    code = (
        "import numpy as np, graphrt\n"
        "from tests.test_jitsched import chain_model, compiled\n"
        "s = graphrt.Session(chain_model())\n"
        "s.run(None, {'x': np.ones((5, 24), np.float32)})\n"
        "plan = compiled(s)\n"
        "print(sum(sum(g.fn.stats.cache_hits.values()) for g in plan.jit.segments),"
        " len(plan.jit.segments))\n")
    env = dict(os.environ, GRAPHRT_SCHEDULE_DIR=str(cache_dir), GRAPHRT_JIT_SCHEDULE="0")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True,
                           text=True, timeout=600) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    first, second = (tuple(map(int, r.stdout.split())) for r in runs)
    assert first[1] == second[1] >= 1
    assert first[0] == 0 and second[0] == second[1]


def test_a_warm_process_loads_its_schedule_without_the_helper(tmp_path):
    """A process whose first run compiled nothing loads the plan's cached schedule at its
    second run, in the process, without starting the helper process; the process that
    filled the cache did start it (its first run compiled, so did its schedule)."""
    code = (
        "import json, numpy as np, graphrt\n"
        "from graphrt.plan import schedule_worker\n"
        "from tests.test_jitsched import chain_model\n"
        "s = graphrt.Session(chain_model())\n"
        "x = np.ones((5, 24), np.float32)\n"
        "s.run(None, {'x': x})\n"
        "s.run(None, {'x': x})\n"
        "started = schedule_worker.CLIENT._proc is not None\n"
        "s.wait_for_schedules(600)\n"
        "(key, entry), = s._plans._entries\n"
        "print(json.dumps([started, entry.plan.jit is not None]))\n")
    env = dict(os.environ, GRAPHRT_CACHE_DIR=str(tmp_path / "cache"), GRAPHRT_JIT_SCHEDULE="1")
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("GRAPHRT_SCHEDULE_DIR", None)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True,
                           text=True, timeout=600) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    first, second = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert first == [True, True]
    assert second == [False, True]


def test_shapes_share_the_generated_modules(cache_dir):
    """Offsets, shapes and scalars are data of the plan, not text: a second input shape
    compiles no new module, so a process that sees ever new shapes compiles a bounded number
    (one per combination of kernel variants: serial and parallel ones differ)."""
    sess = graphrt.Session(chain_model(), graphrt.SessionOptions(optimization_level="basic"))
    files = []
    for rows in (5, 11, 3):
        x = np.random.default_rng(rows).standard_normal((rows, 24)).astype(np.float32)
        want = sess.run(None, {"x": x})[0]
        for _key, entry in sess._plans._entries:
            if tuple(entry.plan.signature[0][1]) == (rows, 24):
                state = entry.take()
                entry.plan.jit = jitsched.compile_schedule(entry.plan, state)
                entry.give(state)
        assert sess.run(None, {"x": x})[0].tobytes() == want.tobytes()
        files.append(sorted(p.name for p in cache_dir.glob("graphrt_sched_*.py")))
    assert files[0] == files[1] == files[2] and len(files[0]) == 2


def test_segments_call_their_kernels_by_address(cache_dir):
    """A segment calls each kernel through its address in this process (by_address.call_packed),
    so it links no kernel's code (the helper process is sent no pickled kernel, and a
    kernel's edit leaves the cached segment valid); the source names each kernel it calls
    in a comment, and the table holds one address per call."""
    sess = graphrt.Session(chain_model())
    x = np.random.default_rng(2).standard_normal((4, 24)).astype(np.float32)
    sess.run(None, {"x": x})
    (key, entry), = sess._plans._entries
    state = entry.take()
    try:
        job = jitsched.prepare(entry.plan, state)
        assert job is not None
        contexts = state.contexts
        for sp in job.specs:
            assert sp.kernels == {}
            calls = [fn for i in range(sp.start, sp.stop) if not entry.plan.steps[i].view
                     for fn, _args in entry.plan.steps[i].node.kernel.jit_calls(contexts[i])]
            assert [disp for disp, _types in sp.targets] == calls
            text = open(sp.path).read()
            for fn in calls:
                assert f"# {fn.py_func.__module__}.{fn.py_func.__qualname__}" in text
        entry.plan.jit = job.load()
        table = entry.plan.jit.segments[0].data[0]
        assert table.size == len(job.specs[0].targets) + 1 and (table[:-1] != 0).all()
    finally:
        entry.give(state)
    want = graphrt.Session(chain_model()).run(None, {"x": x})[0]       # (step by step)
    assert sess.run(None, {"x": x})[0].tobytes() == want.tobytes()


def plan_contexts(sess):
    (key, entry), = sess._plans._entries
    state = entry.take()
    entry.give(state)
    return state.contexts


def _only_plan(sess):
    (key, entry), = sess._plans._entries
    return entry.plan


def _run_until_scheduled(sess, x):
    want = sess.run(None, {"x": x})[0]
    sess.run(None, {"x": x})                   # the second run starts the compile
    assert sess.wait_for_schedules(300)
    return want


@pytest.mark.parametrize("how", ["process", "thread"])
def test_the_schedule_compiled_elsewhere_is_loaded_by_a_run(how, monkeypatch):
    """The default: the helper process compiles into the cache and this process only loads
    (numba counts a cache hit per segment, no miss); GRAPHRT_SCHEDULE_COMPILE=thread
    compiles on a thread here. Either way the bits of the step-by-step loop."""
    monkeypatch.setenv("GRAPHRT_JIT_SCHEDULE", "1")
    monkeypatch.setenv("GRAPHRT_SCHEDULE_COMPILE", how)
    sess = graphrt.Session(chain_model())
    x = np.random.default_rng(5).standard_normal((6, 24)).astype(np.float32)
    want = _run_until_scheduled(sess, x)
    plan = _only_plan(sess)
    assert plan.jit_error is None and plan.jit is not None and plan.jit_job is None
    hits = sum(sum(g.fn.stats.cache_hits.values()) for g in plan.jit.segments)
    misses = sum(sum(g.fn.stats.cache_misses.values()) for g in plan.jit.segments)
    if how == "process":
        assert (hits, misses) == (len(plan.jit.segments), 0)
    else:
        assert misses == len(plan.jit.segments)
    assert sess.run(None, {"x": x})[0].tobytes() == want.tobytes()


def test_a_cached_schedule_is_loaded_at_the_second_run(monkeypatch):
    """When numba's cache holds every module, the second run loads them itself (no thread,
    no helper): the third run is already compiled."""
    monkeypatch.setenv("GRAPHRT_JIT_SCHEDULE", "1")
    x = np.ones((3, 24), np.float32)
    _run_until_scheduled(graphrt.Session(chain_model()), x)
    sess = graphrt.Session(chain_model())
    sess.run(None, {"x": x})
    sess.run(None, {"x": x})
    plan = _only_plan(sess)
    assert plan.jit is not None and plan.jit_thread is None


def test_without_the_helper_process_the_schedule_compiles_here(monkeypatch):
    from graphrt.plan import schedule_worker
    monkeypatch.setenv("GRAPHRT_JIT_SCHEDULE", "1")
    client = schedule_worker.Client()
    monkeypatch.setattr(schedule_worker, "CLIENT", client)
    monkeypatch.setattr(schedule_worker.sys, "executable", "/nonexistent/python")
    sess = graphrt.Session(chain_model())
    with pytest.warns(RuntimeWarning, match="did not start"):
        want = _run_until_scheduled(sess, np.ones((4, 24), np.float32))
    plan = _only_plan(sess)
    assert plan.jit is not None and plan.jit_error is None
    assert sess.run(None, {"x": np.ones((4, 24), np.float32)})[0].tobytes() == want.tobytes()


def test_a_schedule_that_fails_to_compile_is_a_warning(monkeypatch):
    """A compile error in the helper comes back as a RuntimeWarning naming it; the plan
    keeps the step-by-step loop and its answers."""
    monkeypatch.setenv("GRAPHRT_JIT_SCHEDULE", "1")
    real = jitsched.Job.requests

    def broken(self, specs):
        return [(path, blob, sig[:1]) for path, blob, sig in real(self, specs)]
    monkeypatch.setattr(jitsched.Job, "requests", broken)
    sess = graphrt.Session(chain_model())
    with pytest.warns(RuntimeWarning, match="compiled schedule failed"):
        want = _run_until_scheduled(sess, np.ones((2, 24), np.float32))
    plan = _only_plan(sess)
    assert plan.jit is None and plan.jit_error
    assert sess.run(None, {"x": np.ones((2, 24), np.float32)})[0].tobytes() == want.tobytes()


EXPORTED = ["torch_transformer_opset14", "torch_attention_opset13", "paddle_transformer",
            "tf2onnx_byte_classifier", "tf2onnx_cnn", "torch_lstm_opset13"]


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("stem", EXPORTED)
def test_exported_models_give_the_step_by_step_bits(stem, mode):
    """Real exporters' models (tests/exporters): every plan's schedule, compiled, gives the
    bits of the step-by-step loop, and normalisations, softmax and data movement run inside
    its segments."""
    from .test_exporters import _feeds, _path
    try:
        sess = graphrt.Session(_path(stem), graphrt.SessionOptions(mode=mode, intra_op_threads=1))
    except graphrt.SessionError as e:
        if e.kind is graphrt.ErrorKind.EXACT_MODE_UNAVAILABLE:
            pytest.skip(f"no exact kernel for {', '.join(e.operators)}")
        raise
    feeds = _feeds(stem + ".npz")
    want = sess.run(None, feeds)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = compiled(sess)
    assert plan.jit is not None
    # numba caches each segment on disk (the helper process compiles it for this one)
    assert not [w for w in caught if "Cannot cache" in str(w.message)]
    for _ in range(2):
        got = sess.run(None, feeds)
        assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    contexts = plan_contexts(sess)
    python = {st.node.info.op_type for st, ctx in zip(plan.steps, contexts)
              if not st.view and not st.dynamic and st.node.kernel.jit_calls(ctx) is None}
    assert not python & {"Softmax", "LayerNormalization", "Transpose", "Concat", "Where",
                         "Split", "Slice"}, python


def test_product_calls_replayed_by_any_thread_hold_their_run_states_scratch():
    """A Gemm step gives its tile call once per run state, and whichever thread runs that
    state next replays it: the tile scratch in the call is the run state's, one per state,
    never a thread's."""
    from graphrt.kernels.gemm import microkernel
    from graphrt.plan.execute import execute

    sess = graphrt.Session(models.mlp())
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    want = sess.run(None, {"x": x})[0]
    entry = sess._plans._entries[0][1]
    plan = entry.plan
    states = [entry.take(), entry.take()]
    for st in states:
        execute(plan, st, [x], None, False)
        np.testing.assert_array_equal(st.values[plan.graph.output_ids[0]], want)
    gemm = [i for i, s in enumerate(plan.steps) if s.node.info.op_type == "Gemm"]
    assert gemm and all(states[0].calls[i] is not None for i in gemm)
    mine = microkernel.work_for(np.float32)
    for i in gemm:
        scratch = [[a for a in st.calls[i][0][1] if isinstance(a, np.ndarray) and a.ndim == 2
                    and a.shape[0] == mine.shape[0] and a.shape[1] == mine.shape[1]]
                   for st in states]
        assert scratch[0] and scratch[1]
        assert scratch[0][0] is not scratch[1][0] and scratch[0][0] is not mine
        assert any(v is scratch[0][0] for v in states[0].held.values())


def test_a_run_states_program_moves_to_entry_points_with_the_same_bits():
    """After ENTRY_AFTER runs, a run state's serial calls go straight to the compiled entry
    points the dispatchers chose; every run gives the first run's bits."""
    from graphrt.plan import program

    sess = graphrt.Session(models.mlp(), graphrt.SessionOptions(intra_op_threads=1))
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    want = sess.run(None, {"x": x})[0]
    for _ in range(3):
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want)
    assert sess.wait_for_schedules(120)     # (a schedule arriving makes the program again)
    for _ in range(program.ENTRY_AFTER + 2):
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want)
    state = sess._plans._entries[0][1].pool._idle[0]
    fns = [fn for fn, _, _ in state.program.plain if fn is not None]
    assert fns and not any(hasattr(fn, "overloads") and not fn.targetoptions.get("parallel")
                           for fn in fns)


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_segments_read_arrays_outside_the_slab_by_address(mode):
    """Weights, plan data and held scratch reach a segment as addresses and shapes (no
    array unboxed per call), with the step-by-step run's bits, in every run state of the
    plan."""
    rng = np.random.default_rng(4)
    c = 4
    nodes = [n("Conv", ["x", "w", "b"], ["a"], pads=[1, 1, 1, 1]), n("Relu", ["a"], ["r"]),
             n("MaxPool", ["r"], ["m"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Conv", ["m", "w"], ["d"], pads=[1, 1, 1, 1]),
             n("LayerNormalization", ["d", "g", "beta"], ["y"], axis=-1)]
    inits = [const("w", (rng.standard_normal((c, c, 3, 3)) / 9).astype(np.float32)),
             const("b", rng.standard_normal(c).astype(np.float32)),
             const("g", rng.standard_normal(6).astype(np.float32)),
             const("beta", rng.standard_normal(6).astype(np.float32))]
    model = make(nodes, [tensor("x", F, [2, c, 6, 6])], [tensor("y", F, None)], inits)
    x = rng.standard_normal((2, c, 6, 6)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    sess = graphrt.Session(model, graphrt.SessionOptions(mode=mode, intra_op_threads=1))
    want = sess.run(None, {"x": x})[0]
    plan = compiled(sess)
    (key, entry), = sess._plans._entries
    states = [entry.take(), entry.take()]          # two run states of the plan
    try:
        for state in states:
            consts = plan.jit.consts(state)
            assert consts and all(len(k[1]) == 0 for k in consts)     # nothing unboxed
            held = [a for k in consts for a in k[3]]
            assert held and any(a.ndim == 2 for a in held)
    finally:
        for state in states:
            entry.give(state)
    for _ in range(3):
        assert sess.run(None, {"x": x})[0].tobytes() == want.tobytes()


@njit(cache=False)
def _kernel_of_kinds(ro, grid, flags, out):
    out[0] = ro.sum() + grid[1, 2] + flags.sum()
    grid[0, 0] = ro[1]


def test_a_segment_rebuilds_arrays_with_their_numba_types(tmp_path):
    """A read-only array stays read-only (the kernel sees the type its step call had: no
    second specialisation), a 2-D one keeps its shape and writes through, bools stay bools;
    an array of another layout is passed as itself; a kernel compiled for the call's types
    is called by address, one that is not is linked."""
    slab = np.zeros(16, np.float32)
    ro = np.arange(4, dtype=np.float64)
    ro.flags.writeable = False
    grid = np.zeros((2, 3), np.float32)
    grid[1, 2] = 7
    flags = np.array([True, False, True])
    strided = np.arange(8, dtype=np.float32)[::2]
    out = slab[:1]
    calls = [[(_kernel_of_kinds, (ro, grid, flags, out))], [(_kernel_of_kinds, (ro, grid, flags, strided))]]
    _kernel_of_kinds(ro, grid.copy(), flags, out.copy())    # compiled: called by address
    source, kernels, data, targets, packed = jitsched._source(calls, slab)
    assert packed == [True, False] and list(kernels.values()) == [_kernel_of_kinds]
    fn = jitsched.load_module(jitsched._write(source), kernels)
    views, by_value, addresses, held = jitsched._consts_of(calls, slab, packed)
    assert [id(a) for a in held] == [id(ro), id(grid), id(flags), id(out)] + \
        [id(ro), id(grid), id(flags)]
    assert [id(a) for a in by_value] == [id(strided)]
    fn(views, by_value, addresses, jitsched._table(targets), *data)
    assert out[0] == 6 + 7 + 2 and strided[0] == 6 + 7 + 2 and grid[0, 0] == 1
    # the types a call from Python gives: one specialisation per call kind, none more
    assert _kernel_of_kinds.signatures == [tuple(map(numba.typeof, args)) for (_k, args), in calls]
