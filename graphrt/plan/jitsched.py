"""The jitted schedule: a reused plan's runs of static steps as generated numba functions.

A kernel that runs as one call of one compiled function says so through
``OpKernel.jit_call(ctx)`` -> (dispatcher, args). Each maximal run of consecutive static steps
whose kernels all say so (static views, which run nothing, join them) becomes one generated
function ``segment(slab, c, I, F)``: every array argument that lies in the run state's slab
becomes ``slab[I[a]:I[b]].view(dtype)`` at its byte offset (the same for every run state of
the plan), every other array (constants, plan data) an element of the tuple ``c``, and every
scalar an element of the plan's int64 or float64 vector I or F. So a run calls numba once per
segment instead of Python once per step, and the source depends on the kernels and the kinds
of their arguments only: all input shapes of a model share one compiled module (the number
of modules a process compiles stays bounded however many shapes it sees).

The source names each kernel by its module, its qualified name (jit.Variants puts a hash of
the bound helpers there) and a hash of its source -- numba's cached code refers to the
kernel's module, so a kernel that moves must rename the file -- and the module is written once to a file named by
the hash of its text, in graphrt's schedule cache (cache.schedules_dir), so numba's
on-disk cache serves it to later processes. Building and compiling start on a background
thread at a plan's second run (a plan used once is not worth compiling); until they are
done, and for runs with a cancel token, a profile or checked mode, the plan runs its steps
one by one (execute.py). The fields this adds to plans (``jit_thread``, ``jit``,
``jit_error``) and run states (``jit_consts``) are declared there.
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
import threading

import numba
import numpy as np

from ..cache import schedules_dir

MIN_STEPS = 2               # a segment shorter than this is not worth a numba call of its own


class Segment:
    """Steps start..stop-1 of a plan as one compiled call ``fn(slab, consts, ints,
    floats)``; ``ints`` and ``floats`` are this plan's offsets, shapes and scalars."""

    __slots__ = ("start", "stop", "fn", "ints", "floats")

    def __init__(self, start: int, stop: int, fn, data):
        self.start, self.stop, self.fn = start, stop, fn
        self.ints, self.floats = data


class Schedule:
    """The compiled segments of one plan, in step order; ``consts(state)`` gives a run
    state's tuples (made once per state)."""

    __slots__ = ("segments", "_consts")

    def __init__(self, segments: list[Segment], consts_of):
        self.segments = segments
        self._consts = consts_of

    def consts(self, state) -> list:
        if state.jit_consts is None:
            state.jit_consts = self._consts(state)
        return state.jit_consts


def cache_dir() -> str:
    return schedules_dir()


def start_compile(plan, state) -> None:
    """Once per plan: build and compile its schedule on a background thread; the plan's
    ``jit`` becomes the Schedule (or stays None when nothing is worth compiling)."""
    with _lock:
        if plan.jit_thread is not None:
            return
        plan.jit_thread = threading.Thread(target=_compile_quietly, args=(plan, state),
                                           daemon=True, name="graphrt-schedule")
    plan.jit_thread.start()


def wait(plan, timeout: float | None = None) -> bool:
    """Until the plan's schedule compile (if one started) is over; False on timeout."""
    t = plan.jit_thread
    if t is None:
        return True
    t.join(None if timeout is None else max(0.0, timeout))
    return not t.is_alive()


_lock = threading.Lock()


def _compile_quietly(plan, state) -> None:
    try:
        plan.jit = compile_schedule(plan, state)
    except Exception as e:  # the step-by-step loop stays: it is always correct
        plan.jit_error = f"{type(e).__name__}: {e}"


def compile_schedule(plan, state) -> Schedule | None:
    """Segments of ``plan`` (arrays located in ``state``), compiled; None without any."""
    calls = [_call_of(st, ctx) for st, ctx in zip(plan.steps, state.contexts)]
    segments, runs = [], []
    i = 0
    while i < len(calls):
        if calls[i] is None:
            i += 1
            continue
        j = i
        while j < len(calls) and calls[j] is not None:
            j += 1
        if sum(1 for c in calls[i:j] if c != ()) >= MIN_STEPS:
            runs.append((i, j))
        i = j
    if not runs:
        return None
    slab = state.slab
    for start, stop in runs:
        source, kernels, data = _source(calls[start:stop], slab)
        fn = _load(source, kernels)
        consts = _consts_of(calls[start:stop], slab)
        fn.compile(tuple(numba.typeof(v) for v in (slab, consts) + data))
        segments.append(Segment(start, stop, fn, data))

    def consts_of(st):
        return [_consts_of([_call_of(s, c) for s, c in zip(plan.steps[g.start:g.stop],
                                                            st.contexts[g.start:g.stop])],
                           st.slab) for g in segments]
    return Schedule(segments, consts_of)


def _call_of(step, ctx):
    """(dispatcher, args) of a step, () for a static view (nothing to run), None when the
    step must run as Python."""
    if step.view:
        return ()
    if step.dynamic or ctx is None:
        return None
    return step.node.kernel.jit_call(ctx)


def _in_slab(a: np.ndarray, slab: np.ndarray):
    """Byte offset of ``a`` in the slab, or None when it lies elsewhere."""
    base = slab.ctypes.data
    p = a.ctypes.data if a.size else None
    if p is None or not (base <= p < base + slab.size):
        return None
    if not a.flags.c_contiguous:
        raise ValueError("a slab value that is not contiguous")
    return p - base


def _scalar(v, ints: list, floats: list) -> str | None:
    """Source reading scalar ``v`` from the segment's int64 or float64 vector (appended to),
    typed as ``v`` is; None for a value that is neither."""
    if isinstance(v, (bool, np.bool_)):
        ints.append(int(v))
        return f"(I[{len(ints) - 1}] != 0)"
    if isinstance(v, (int, np.integer)):
        ints.append(int(v))
        ref = f"I[{len(ints) - 1}]"
        return ref if not isinstance(v, np.integer) or v.dtype == np.int64 else \
            f"np.{v.dtype.name}({ref})"
    if isinstance(v, (float, np.floating)) and np.dtype(type(v)).itemsize <= 8:
        floats.append(float(v))
        ref = f"F[{len(floats) - 1}]"
        return ref if not isinstance(v, np.floating) or v.dtype == np.float64 else \
            f"np.{v.dtype.name}({ref})"
    return None


def _source(calls, slab):
    """The segment's source and its data: slab offsets, shapes and scalars are read from
    the int64 vector I and the float64 vector F, so the text depends on the kernels and the
    kinds of their arguments only, and every shape of a model shares one module."""
    kernels: dict[str, object] = {}
    lines = []
    n_const = 0
    ints: list = []
    floats: list = []
    tags = []
    for call in calls:
        if call == ():
            continue
        disp, args = call
        name = "k_" + "".join(ch if ch.isalnum() else "_" for ch in disp.py_func.__qualname__)
        if kernels.setdefault(name, disp) is not disp:
            name += f"_{len(kernels)}"
            kernels[name] = disp
        tags.append(f"{name}:{disp.py_func.__module__}:{_source_hash(disp)}")
        parts = []
        for a in args:
            if isinstance(a, np.ndarray):
                off = _in_slab(a, slab)
                if off is None:
                    parts.append(f"c[{n_const}]")
                    n_const += 1
                    continue
                k = len(ints)
                ints += [off, off + a.nbytes]
                view = f"slab[I[{k}]:I[{k + 1}]].view(np.{a.dtype.name})"
                if a.ndim != 1:
                    k = len(ints)
                    ints += list(a.shape)
                    dims = ", ".join(f"I[{k + d}]" for d in range(a.ndim))
                    view += f".reshape(({dims}))"
                parts.append(view)
            else:
                ref = _scalar(a, ints, floats)
                if ref is None:
                    raise ValueError(f"argument {a!r} is neither an array nor a scalar")
                parts.append(ref)
        lines.append(f"    {name}({', '.join(parts)})")
    head = ["import numpy as np", "from numba import njit", "",
            "# kernels: " + " ".join(tags), "",
            "@njit(cache=True, nogil=True)", "def segment(slab, c, I, F):"]
    data = (np.array(ints, dtype=np.int64), np.array(floats + [0.0], dtype=np.float64))
    return "\n".join(head + lines) + "\n", kernels, data


def _consts_of(calls, slab) -> tuple:
    out = []
    for call in calls:
        if call == ():
            continue
        for a in call[1]:
            if isinstance(a, np.ndarray) and _in_slab(a, slab) is None:
                out.append(a)
    return tuple(out)


def _source_hash(disp) -> str:
    try:
        text = inspect.getsource(disp.py_func)
    except (OSError, TypeError):
        text = disp.py_func.__qualname__
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def _load(source: str, kernels: dict):
    digest = hashlib.sha1(source.encode()).hexdigest()[:20]
    folder = cache_dir()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"graphrt_sched_{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)       # never rewritten: numba's cache keys on the file's stamp
    name = f"graphrt_sched_{digest}"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod         # numba's cache finds functions through it
        spec.loader.exec_module(mod)
    for name, disp in kernels.items():
        setattr(mod, name, disp)
    return mod.segment
