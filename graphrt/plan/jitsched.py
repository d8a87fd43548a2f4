"""The jitted schedule: a reused plan's runs of static steps as generated numba functions.

A kernel whose run is a fixed list of calls of compiled functions says so through
``OpKernel.jit_calls(ctx)`` -> [(dispatcher, args), ...]. Each maximal run of consecutive
static steps whose kernels all say so (static views, which run nothing, join them) becomes
one generated function ``segment(S, c, A, T, I, F)`` of one line per call. A call is made
through the kernel's address (``T``, this process's table) by one intrinsic,
``call_packed(T, k, A, I, F, c, "spec")`` (kernels/core/by_address.py), which builds every
argument as the literal spec says: arrays from their addresses and extents in the run state's
int64 vector ``A`` (numba types and unboxes each array passed from Python at every call, about
0.15 us each: a segment of 48 small convolutions spent 48 of its 67 us so), scalars from the
plan's int64 or float64 vector I or F. A call whose kernel is not compiled for its argument
types, returns a value or takes an array of another layout or element type is linked
instead: its slab arrays become ``S[t][I[a]:I[b]]``, slices of the slab viewed as their element
type (``S`` holds one view per type), its other arrays are rebuilt from ``A`` or, where they
cannot be, are elements of the tuple ``c``. So a run calls numba once per
segment instead of Python once per step, and the source depends on the kernels and the kinds
of their arguments only: all input shapes of a model share one compiled module (the number
of modules a process compiles stays bounded however many shapes it sees).

The source names each kernel it links by its module, its qualified name (jit.Variants puts a
hash of the bound helpers there) and a hash of its source -- numba's cached code refers to the
kernel's module, so a kernel that moves must rename the file -- and each one it calls by
address in a comment (its code is not in the segment's); the module is written once to a file named by
the hash of its text, in graphrt's schedule cache (cache.schedules_dir), so numba's
on-disk cache serves it to later processes.

At a plan's second run (a plan used once is not worth compiling) its modules are generated
and imported. When numba's cache holds every one of them, they are loaded there and then
(milliseconds); otherwise the missing ones are compiled by the schedule helper process
(schedule_worker.py: numba's compiler run on a thread here would hold the interpreter lock
against this process's runs) and a run that finds them done loads them.
GRAPHRT_SCHEDULE_COMPILE=thread compiles on a thread of this process instead; so does a
process that cannot start the helper, with a warning. A schedule that fails to compile is
reported as a RuntimeWarning, and its plan keeps the step-by-step loop. Until a schedule is
loaded, and for runs with a cancel token, a profile or checked mode, the plan runs its steps
one by one (execute.py). The fields this adds to plans (``jit_started``, ``jit_thread``,
``jit_job``, ``jit``, ``jit_error``) and run states (``jit_consts``) are declared there.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import pickle
import sys
import threading
import types
import warnings
import weakref
from typing import NamedTuple

import numba
import numpy as np
from numba.core import serialize

from ..cache import schedules_dir
from ..kernels.core.by_address import address
from .program import step_calls_of

_NO_TARGETS = np.zeros(1, dtype=np.int64)      # (T's type, for the segment's signature)
MIN_STEPS = 2               # a segment shorter than this is not worth a numba call of its own
MAX_CALLS = 96              # a longer run of steps is cut into segments of at most this many
MAX_ARRAYS = 800            # calls, or this many array arguments (numba refuses a tuple of
                            # 1,000, and a module's compile time grows with its size)


class Segment:
    """Steps start..stop-1 of a plan as one compiled call ``fn(S, c, A, *data)``: ``data``
    is (T, I, F), the kernels' addresses in this process, this plan's offsets, shapes and
    scalars."""

    __slots__ = ("start", "stop", "fn", "data")

    def __init__(self, start: int, stop: int, fn, data):
        self.start, self.stop, self.fn, self.data = start, stop, fn, data


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


def compile_mode() -> str:
    """GRAPHRT_SCHEDULE_COMPILE: "process" (the helper process, the default) or "thread"."""
    mode = os.environ.get("GRAPHRT_SCHEDULE_COMPILE", "process")
    return mode if mode in ("process", "thread") else "process"


class Spec(NamedTuple):
    """One segment generated and imported: steps start..stop-1, its ``segment`` function,
    its data (ints, floats), numba signature, kernels linked by name, module file, and the
    kernels it calls by address ((dispatcher, argument types) in call order)."""
    start: int
    stop: int
    fn: object
    data: tuple
    sig: tuple
    kernels: dict
    path: str
    targets: list
    packed: list


class Job:
    """A plan's schedule with its modules generated and imported, not yet compiled here."""

    __slots__ = ("specs", "consts_of", "ready")

    def __init__(self, specs: list, consts_of):
        self.specs, self.consts_of = specs, consts_of
        self.ready = False              # the helper process has put every module in the cache

    def missing(self) -> list:
        return [sp for sp in self.specs if not _in_cache(sp.fn, sp.sig)]

    def requests(self, specs) -> list:
        return [(sp.path, _pickled(sp.kernels), sp.sig) for sp in specs]

    def load(self) -> Schedule:
        """Compile every segment in this process (a load, when numba's cache has it)."""
        for sp in self.specs:
            sp.fn.compile(sp.sig)
        return Schedule([Segment(sp.start, sp.stop, sp.fn, (_table(sp.targets), *sp.data))
                         for sp in self.specs], self.consts_of)


def warm_up() -> None:
    """After a plan's first run: have the helper process ready for its second."""
    if compile_mode() == "process":
        from .schedule_worker import CLIENT
        CLIENT.start()


def start_compile(plan, state) -> None:
    """Once per plan: generate its schedule, then load it (every module cached) or have it
    compiled (the helper process, or a thread); ``plan.jit`` becomes the Schedule, or stays
    None when nothing is worth compiling or the compile failed (``plan.jit_error``)."""
    with _lock:
        if plan.jit_started:
            return
        plan.jit_started = True
    try:
        job = prepare(plan, state)
        if job is None:
            return
        missing = job.missing()
        if not missing:
            plan.jit = job.load()
            return
        # pickled here, not on the thread: pure Python there would take the interpreter
        # lock from the next runs in slices of the switch interval
        requests = job.requests(missing) if compile_mode() == "process" else None
    except Exception as e:  # the step-by-step loop stays: it is always correct
        _failed(plan, e)
        return
    plan.jit_job = job
    plan.jit_thread = threading.Thread(target=_compile_job, args=(plan, job, requests),
                                       daemon=True, name="graphrt-schedule")
    plan.jit_thread.start()


def poll(plan) -> None:
    """Load the plan's schedule when the helper process has compiled it (a run calls this
    before its steps; it does nothing otherwise)."""
    job = plan.jit_job
    if job is None or not job.ready:
        return
    with _lock:
        if plan.jit_job is not job:
            return
        plan.jit_job = None
    try:
        plan.jit = job.load()
    except Exception as e:
        _failed(plan, e)


def wait(plan, timeout: float | None = None) -> bool:
    """Until the plan's schedule (if one was started) is compiled and loaded, or failed;
    False on timeout."""
    t = plan.jit_thread
    if t is not None:
        t.join(None if timeout is None else max(0.0, timeout))
        if t.is_alive():
            return False
    poll(plan)
    return True


_lock = threading.Lock()


def _compile_job(plan, job: Job, requests: list | None) -> None:
    try:
        if requests is not None:
            from .schedule_worker import CLIENT, Unavailable
            try:
                errors = CLIENT.compile(requests)
            except Unavailable as e:
                warnings.warn(f"graphrt: {e}; compiling the schedule in this process",
                              RuntimeWarning)
            else:
                failed = [msg for msg in errors if msg]
                if failed:
                    raise RuntimeError(failed[0])
                job.ready = True        # loaded by the next run (poll): no lock taken here
                return
        plan.jit = job.load()
        plan.jit_job = None
    except Exception as e:
        plan.jit_job = None
        _failed(plan, e)


def _failed(plan, e: Exception) -> None:
    plan.jit_error = f"{type(e).__name__}: {e}".splitlines()[0]
    warnings.warn(f"graphrt: a plan's compiled schedule failed ({plan.jit_error}); its "
                  f"steps run one by one", RuntimeWarning)


def _in_cache(fn, sig) -> bool:
    """Whether numba's on-disk cache holds ``fn`` for ``sig`` (its index names it)."""
    cache = getattr(fn, "_cache", None)
    try:
        key = cache._index_key(sig, fn.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:       # (no cache, an unreadable index: a miss)
        return False


def compile_schedule(plan, state) -> Schedule | None:
    """Segments of ``plan`` (arrays located in ``state``), compiled in this process now;
    None without any."""
    job = prepare(plan, state)
    return None if job is None else job.load()


def prepare(plan, state) -> Job | None:
    """The plan's segments generated, written and imported (arrays located in ``state``);
    None when no run of steps is worth a segment."""
    calls = _calls_of(plan, state)
    runs = []
    i = 0
    while i < len(calls):
        if calls[i] is None:
            i += 1
            continue
        j, n_calls, n_arrays = i, 0, 0
        while j < len(calls) and calls[j] is not None:
            more = len(calls[j])
            arrays = sum(isinstance(a, np.ndarray) for _fn, args in calls[j] for a in args)
            if n_calls and (n_calls + more > MAX_CALLS or n_arrays + arrays > MAX_ARRAYS):
                break
            n_calls, n_arrays = n_calls + more, n_arrays + arrays
            j += 1
        if sum(1 for c in calls[i:j] if c) >= MIN_STEPS:
            runs.append((i, j))
        i = j
    if not runs:
        return None
    slab = state.slab
    specs, kinds = [], []
    for start, stop in runs:
        source, kernels, data, targets, packed = _source(calls[start:stop], slab)
        path = _write(source)
        fn = load_module(path, kernels)
        consts = _consts_of(calls[start:stop], slab, packed)
        sig = tuple(numba.typeof(v) for v in consts[:3] + (_NO_TARGETS,) + data)
        specs.append(Spec(start, stop, fn, data, sig, kernels, path, targets, packed))
        kinds.append(_addressed_kinds(consts))

    def consts_of(st):
        calls_st = _calls_of(plan, st)
        out = [_consts_of(calls_st[sp.start:sp.stop], st.slab, sp.packed) for sp in specs]
        if [_addressed_kinds(c) for c in out] != kinds:
            raise ValueError("a run state's arrays differ in kind from its plan's first")
        return out
    return Job(specs, consts_of)


def _calls_of(plan, state) -> list:
    """Each step's [(dispatcher, args), ...] in ``state`` (the step loop's ``state.calls``,
    made here when no run made them yet), [] for a static view (nothing to run), None when
    the step must run outside the segments (Python, or calls the step loop replays)."""
    if state.calls is None:
        state.calls = step_calls_of(plan, state)
    return [[] if st.view else None if st.dynamic else c
            for st, c in zip(plan.steps, state.calls)]


def _in_slab(a: np.ndarray, slab: np.ndarray):
    """Byte offset of ``a`` in the slab, or None when it lies elsewhere."""
    base = slab.ctypes.data
    p = a.ctypes.data if a.size else None
    if p is None or not (base <= p < base + slab.size):
        return None
    if not a.flags.c_contiguous:
        raise ValueError("a slab value that is not contiguous")
    return p - base


def _scalar(v, ints: list, floats: list) -> str:
    """Source reading scalar ``v`` from the segment's int64 or float64 vector (appended to),
    typed as ``v`` is (a linked call's argument; _packed_scalar's part written out)."""
    part = _packed_scalar(v, ints, floats)
    kind, _, dtype = part.partition(":")
    ref = f"{'F' if kind[0] == 'f' else 'I'}[{kind[1:]}]"
    if kind[0] == "b":
        return f"({ref} != 0)"
    return ref if dtype in ("int64", "float64") else f"np.{dtype}({ref})"


def _source(calls, slab):
    """The segment's source and its data: offsets, shapes and scalars are read from the
    run state's int64 vector A and the plan's int64 and float64 vectors I and F, so the text
    depends on the kernels and the kinds of their arguments only, and every shape of a model
    shares one module. Also the kernels it links by name, those it calls by address
    (``targets``) and, per call, whether it is called so (``packed``)."""
    kernels: dict[str, object] = {}
    lines = []
    types: list[str] = []
    n_const = n_addr = 0
    ints: list = []
    floats: list = []
    tags = []
    targets: list = []
    packed: list = []
    for disp, args in (c for step in calls for c in step):
        target = _addressed(disp, args)
        packed.append(target is not None)
        if target is not None:
            spec = []
            for a in args:
                if isinstance(a, np.ndarray):
                    spec.append(f"a{n_addr}:{a.dtype.name}:{a.ndim}:"
                                f"{'w' if a.flags.writeable else 'r'}")
                    n_addr += 1 + a.ndim
                elif a is None:
                    spec.append("n")
                else:
                    spec.append(_packed_scalar(a, ints, floats))
            lines.append(f"    call_packed(T, {len(targets)}, A, I, F, c, \"{','.join(spec)}\")"
                         f"  # {disp.py_func.__module__}.{disp.py_func.__qualname__}")
            targets.append(target)
            continue
        name = "k_" + "".join(ch if ch.isalnum() else "_" for ch in disp.py_func.__qualname__)
        if kernels.setdefault(name, disp) is not disp:
            name += f"_{len(kernels)}"
            kernels[name] = disp
        tags.append(f"{name}:{disp.py_func.__module__}:{_source_hash(disp)}")
        parts = []
        for a in args:
            if isinstance(a, np.ndarray):
                off = _in_slab(a, slab)
                if off is None and _by_address(a):
                    dims = "".join(f"A[{n_addr + 1 + d}], " for d in range(a.ndim))
                    view = f"carray(data_at(A[{n_addr}], np.{a.dtype.name}), ({dims}))"
                    parts.append(view if a.flags.writeable else f"readonly({view})")
                    n_addr += 1 + a.ndim
                    continue
                if off is None:
                    parts.append(f"c[{n_const}]")
                    n_const += 1
                    continue
                k = len(ints)
                size = a.dtype.itemsize
                if off % size:
                    raise ValueError("a slab value off its element alignment")
                ints += [off // size, (off + a.nbytes) // size]
                if a.dtype.name not in types:
                    types.append(a.dtype.name)
                view = f"S[{types.index(a.dtype.name)}][I[{k}]:I[{k + 1}]]"
                if a.ndim != 1:
                    k = len(ints)
                    ints += list(a.shape)
                    dims = ", ".join(f"I[{k + d}]" for d in range(a.ndim))
                    view += f".reshape(({dims}))"
                parts.append(view)
            elif a is None:
                parts.append("None")
            else:
                parts.append(_scalar(a, ints, floats))
        lines.append(f"    {name}({', '.join(parts)})")
    head = ["import numpy as np", "from numba import carray, njit",
            "from graphrt.kernels.core.by_address import call_packed, data_at, readonly", "",
            "# kernels: " + " ".join(tags), "",
            "@njit(cache=True, nogil=True, no_cfunc_wrapper=True)",
            "def segment(S, c, A, T, I, F):"]
    data = (np.array(ints, dtype=np.int64), np.array(floats + [0.0], dtype=np.float64))
    return "\n".join(head + lines) + "\n", kernels, data, targets, packed


def _packed_scalar(v, ints: list, floats: list) -> str:
    """call_packed's part for scalar ``v``, its value appended to ints or floats."""
    if isinstance(v, (bool, np.bool_)):
        ints.append(int(v))
        return f"b{len(ints) - 1}"
    if isinstance(v, (int, np.integer)):
        ints.append(int(v))
        return f"i{len(ints) - 1}:{v.dtype.name if isinstance(v, np.integer) else 'int64'}"
    if isinstance(v, (float, np.floating)) and np.dtype(type(v)).itemsize <= 8:
        floats.append(float(v))
        return f"f{len(floats) - 1}:{v.dtype.name if isinstance(v, np.floating) else 'float64'}"
    raise ValueError(f"argument {v!r} is neither an array nor a scalar")


def _addressed(disp, args):
    """(dispatcher, argument types) of a call the segment makes through the kernel's
    address (by_address.call_packed) -- the overload the step's own call runs, compiled,
    returning nothing, every array argument one the segment can rebuild from its address --
    else None: the segment links that kernel's code."""
    if not hasattr(disp, "overloads") or not all(
            _by_address(a) for a in args if isinstance(a, np.ndarray)):
        return None
    argtypes = tuple(numba.typeof(a) for a in args)
    cres = disp.overloads.get(argtypes)
    if cres is None or cres.signature.return_type != numba.types.none:
        return None
    return disp, argtypes


def _table(targets) -> np.ndarray:
    """The addresses of a segment's kernels (T), in this process."""
    return np.array([address(disp, _Signature(argtypes)) for disp, argtypes in targets] + [0],
                    dtype=np.int64)


class _Signature(NamedTuple):
    args: tuple


def _consts_of(calls, slab, packed) -> tuple:
    """(S, c, A, held) of a segment (see _source; ``packed`` its calls made by address): the
    slab's views by type, in the order the source first reads them; the arrays passed as
    themselves; the address and shape of each one rebuilt from them, one after another;
    those arrays (``held``: the run state keeps them, and so what the addresses point at,
    alive)."""
    types, out, held = [], [], []
    for by_address, (_disp, args) in zip(packed, (c for step in calls for c in step)):
        for a in args:
            if not isinstance(a, np.ndarray):
                continue
            if by_address:
                held.append(a)
            elif _in_slab(a, slab) is None:
                (held if _by_address(a) else out).append(a)
            elif a.dtype not in types:
                types.append(a.dtype)
    views = tuple(slab[:slab.size - slab.size % t.itemsize].view(t) for t in types)
    addresses = np.array([v for a in held for v in (a.ctypes.data, *a.shape)] + [0],
                         dtype=np.int64)
    return views, tuple(out), addresses, tuple(held)


def _addressed_kinds(consts: tuple) -> tuple:
    """What a segment's source assumes of the arrays it reads by address: each one's
    element type, rank and writability."""
    return tuple((a.dtype, a.ndim, a.flags.writeable) for a in consts[3])


_ADDRESSED = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
    np.uint64, np.float32, np.float64))


def _by_address(a: np.ndarray) -> bool:
    """Whether a segment reads array ``a`` (outside the slab) through its address: every
    array passed to a numba function from Python is typed and unboxed at each call (about
    0.15 us each; a segment of 48 convolutions had 432), an address in an int64 vector is
    not. Taken for C-contiguous aligned arrays of the plain numeric types, which the segment
    rebuilds with the same numba type (readonly ones too), so the kernels it calls see the
    types their step calls had."""
    return a.dtype in _ADDRESSED and a.flags.c_contiguous and a.flags.aligned and \
        a.dtype.isnative


def _source_hash(disp) -> str:
    """A digest of the kernel's compiled code (bytecode, constants and names, nested code
    included): stable across processes, and cheaper than its source text."""
    h = hashlib.sha1()
    _feed_code(h, disp.py_func.__code__)
    return h.hexdigest()[:10]


def _feed_code(h, code) -> None:
    h.update(code.co_code)
    h.update(" ".join(code.co_names).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _feed_code(h, c)
        elif isinstance(c, frozenset):
            h.update(repr(sorted(map(repr, c))).encode())
        else:
            h.update(repr(c).encode())


_BLOBS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def pickled_kernel(disp) -> bytes:
    """A dispatcher for the helper process, pickled by value (numba's serializer) once per
    process: a cold first run's shared compiles (compile_share), the warming of parallel
    forms and the schedule's requests reuse it (pickling walks the bytecode: about 7 ms for
    a recurrence's step kernel)."""
    blob = _BLOBS.get(disp)
    if blob is None:
        blob = _BLOBS[disp] = serialize.dumps(disp)
    return blob


def _pickled(kernels: dict) -> bytes:
    """``kernels`` for the helper process: the dict of their pickles."""
    return pickle.dumps({name: pickled_kernel(disp) for name, disp in kernels.items()},
                        protocol=pickle.HIGHEST_PROTOCOL)


def unpickled(blob: bytes) -> dict:
    return {name: pickle.loads(b) for name, b in pickle.loads(blob).items()}


def _write(source: str) -> str:
    """The module's file in the schedule cache, named by the hash of its text."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:20]
    folder = cache_dir()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"graphrt_sched_{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)       # never rewritten: numba's cache keys on the file's stamp
    return path


def load_module(path: str, kernels: dict):
    """The ``segment`` function of the module at ``path``, its kernels bound by name."""
    name = os.path.splitext(os.path.basename(path))[0]
    with _lock:                         # (plans of several threads: one import, complete)
        mod = sys.modules.get(name)
        if mod is None or mod.__file__ != path:    # (another schedule folder since: its own)
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules[name] = mod     # numba's cache finds functions through it
        for key, disp in kernels.items():
            setattr(mod, key, disp)
        return mod.segment
