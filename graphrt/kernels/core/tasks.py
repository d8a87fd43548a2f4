"""Parallel forms that run a serial kernel's tasks on the threads, compiled in a fraction of
a parallel loop's time.

Most kernel templates are one loop over tasks, ``for t in prange(tasks)`` at their top
level, ``tasks`` a parameter that nothing else reads. Compiled with ``parallel=True``, numba
builds such a template a second time as a parallel loop (its body outlined, analysed and
optimised again beside the serial form): 2-3x the serial form's compile time, repeated for
every template, element type and mode.

A *task body* instead is compiled once, serially, with ``prange`` bound to
:func:`task_range`: given a count n >= 0 it runs tasks 0..n-1 (the serial form, as before),
given the code ~(lo << 32 | k) it runs tasks lo..lo+k-1. The parallel form
(:func:`parallel_form`) is then a small function of the template's signature, with no loop of
its own: it packs its arguments into a record on its stack and hands that record to one
shared parallel driver (:func:`_drive`, compiled once for every template), which splits the
tasks into one contiguous run per thread, as numba's parallel loop does, and calls the body
on each run by address. The body's code is the serial form's: the bits of a task are the same
whichever thread, run or form computes them.

What a template must satisfy (``count_parameter`` checks the loop's shape): the statements
before its loop run once per run of tasks and must only compute values (no writes); nothing
follows the loop; it returns nothing and raises nothing.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import textwrap
import threading

import llvmlite.binding as llvm
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils, sigutils
from numba.core.registry import CPUDispatcher
from numba.extending import intrinsic

from .by_address import address, call_numba

_LOW = 32           # a run's code: ~(first task << 32 | number of tasks)
_MOST = (1 << 40) - 1   # the most tasks of a whole count
_VOIDP = ir.IntType(8).as_pointer()
_RUN_FN = ir.FunctionType(ir.VoidType(), [_VOIDP, ir.IntType(64)])


@intrinsic
def task_range(typingctx, n):
    """Tasks 0..n-1 for n >= 0; for a run's code n = ~(lo << 32 | k), tasks lo..lo+k-1. An
    intrinsic, so that the range is built in place: as a numba function, linked into every
    template, it made each serial form compile about 30 % slower."""
    if not isinstance(n, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        i64, i32 = ir.IntType(64), ir.IntType(32)
        count = context.cast(builder, args[0], sig.args[0], types.int64)
        code = builder.not_(count)
        # bounds LLVM can see: a run's first task and length below 2**32, a whole count
        # below 2**40 (no batch has as many tasks). With them it knows that the tasks'
        # indices are not negative and do not overflow, so numba's negative-index
        # wraparound folds away and the loops over them vectorise; without, a loop over
        # bytes loaded them one at a time (a range from an unknown start: 100 against 9 µs
        # for 200,000 bytes)
        lo = builder.zext(builder.trunc(builder.lshr(code, ir.Constant(i64, _LOW)), i32), i64)
        k = builder.zext(builder.trunc(code, i32), i64)
        whole = builder.icmp_signed(">=", count, ir.Constant(i64, 0))
        most = ir.Constant(i64, _MOST)
        count = builder.select(builder.icmp_unsigned("<", count, most), count, most)
        state = cgutils.create_struct_proxy(types.range_state64_type)(context, builder)
        state.start = builder.select(whole, ir.Constant(i64, 0), lo)
        state.stop = builder.select(whole, count, builder.add(lo, k, flags=["nuw", "nsw"]))
        state.step = ir.Constant(i64, 1)
        return state._getvalue()

    return types.range_state64_type(n), codegen


@intrinsic
def _call_run(typingctx, fn, record, code):
    """fn(record, code): a run function (made by _run_tasks) on its argument record."""
    def codegen(context, builder, sig, args):
        target = builder.inttoptr(args[0], _RUN_FN.as_pointer())
        builder.call(target, [builder.inttoptr(args[1], _VOIDP), args[2]])
        return context.get_dummy_value()
    return types.none(types.int64, types.int64, types.int64), codegen


@intrinsic
def _threads(typingctx):
    """The calling thread's thread count, read by name from numba's threading layer (as
    numba's parallel loops read it; numba.get_num_threads would keep the code uncached)."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(cgutils.intp_t, []),
                                            "get_num_threads")
        return builder.call(fn, [])
    return types.intp(), codegen


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, parallel=True)
def _drive(fn, record, tasks):
    """Tasks 0..tasks-1 as one contiguous run per thread (as numba's parallel loop divides
    them), each run a call fn(record, code of the run)."""
    runs = min(tasks, _threads())
    for r in prange(runs):
        lo = tasks * r // runs
        hi = tasks * (r + 1) // runs
        _call_run(fn, record, ~((lo << _LOW) | (hi - lo)))


_DRIVE = "graphrt_tasks_drive"
_LOCK = threading.Lock()
_DEFINED: set = set()


def _define(symbol: str, dispatcher, argtypes: tuple) -> None:
    """Make ``symbol`` name the machine code of ``dispatcher`` for ``argtypes`` in this
    process (compiled or loaded from the cache now), for code that calls it by name."""
    if symbol in _DEFINED:
        return
    addr = address(dispatcher, types.none(*argtypes))
    with _LOCK:
        llvm.add_symbol(symbol, addr)
        _DEFINED.add(symbol)


def _body_symbol(body, argtypes: tuple) -> str:
    sig = hashlib.sha1(repr(argtypes).encode()).hexdigest()[:16]
    return f"graphrt_task_{body.py_func.__qualname__}_{sig}"


def _run_tasks(body_symbol, k: int):
    """An intrinsic run_tasks(args): the tasks args[k] of the body named by
    ``body_symbol(argtypes)``, on the threads through _drive."""

    @intrinsic
    def run_tasks(typingctx, args):
        argtypes = tuple(args.types)
        symbol = body_symbol(argtypes)

        def codegen(context, builder, sig, cargs):
            conv = context.call_conv
            module = builder.module
            i64 = ir.IntType(64)
            body_type = conv.get_function_type(types.none, argtypes)
            body = cgutils.get_or_insert_function(module, body_type, symbol)
            record_type = cargs[0].type

            # fn(record, code): the body on the record's arguments, args[k] = code
            run = ir.Function(module, _RUN_FN, name=module.get_unique_name(symbol + "_run"))
            run.linkage = "internal"
            b = ir.IRBuilder(run.append_basic_block())
            record = b.load(b.bitcast(run.args[0], record_type.as_pointer()))
            values = [b.extract_value(record, i) for i in range(len(argtypes))]
            values[k] = context.cast(b, run.args[1], types.int64, argtypes[k])
            call_numba(context, b, body, body_type, argtypes, values)     # raises nothing
            b.ret_void()

            slot = cgutils.alloca_once(builder, record_type)
            builder.store(_borrowed(context, builder, args, cargs[0]), slot)
            drive_args = (types.int64,) * 3
            drive_type = conv.get_function_type(types.none, drive_args)
            drive = cgutils.get_or_insert_function(module, drive_type, _DRIVE)
            tasks = context.cast(builder, builder.extract_value(cargs[0], k), argtypes[k],
                                 types.int64)
            call_numba(context, builder, drive, drive_type, drive_args,
                  [builder.ptrtoint(run, i64), builder.ptrtoint(slot, i64), tasks])
            return context.get_dummy_value()

        return types.none(args), codegen

    return run_tasks


def _borrowed(context, builder, ty, value):
    """``value`` with the arrays in it marked as borrowed (no meminfo): the body's views of
    them then count no references, where every thread's increments and decrements of one
    counter would contend for its cache line (a Softmax over 4,096 rows of 32 at two
    threads: 380 against 260 us). The caller holds the arrays for the whole call."""
    if isinstance(ty, types.Array):
        ary = context.make_array(ty)(context, builder, value)
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        return ary._getvalue()
    if isinstance(ty, types.BaseTuple):
        for i, item in enumerate(ty.types):
            value = builder.insert_value(
                value, _borrowed(context, builder, item, builder.extract_value(value, i)), i)
    return value


_PARALLEL = "def _parallel({0}):\n    RUN_TASKS(({0},))\n"


@functools.lru_cache(maxsize=None)
def _parallel(n: int):
    """The template of a parallel form of n parameters (written out: numba would take a
    star parameter as one tuple argument, unlike the serial form's n). Compiled as if it were
    this file's, so that numba caches its forms beside the other kernels."""
    space = {"RUN_TASKS": None, "__name__": __name__}
    exec(compile(_PARALLEL.format(", ".join(f"a{i}" for i in range(n))), __file__, "exec"),
         space)
    return space["_parallel"]


class TaskDispatcher(CPUDispatcher):
    """The dispatcher of a parallel form: before it compiles (or loads) a signature, the
    body's code for that signature and the shared driver are defined under the names its
    code calls."""

    def compile(self, sig):
        args, _ = sigutils.normalize_signature(sig)
        args = tuple(args)
        _define(_DRIVE, _drive, (types.int64,) * 3)
        _define(_body_symbol(self.graphrt_body, args), self.graphrt_body, args)
        return super().compile(sig)

    def __reduce__(self):
        """Pickled (for the helper process) as what makes it: the body, by value as numba
        pickles a dispatcher, and parallel_form's arguments."""
        return parallel_form, (self.graphrt_body,) + self.graphrt_made


def parallel_form(body, qualname: str, n: int, k: int, rebind, options: dict):
    """The parallel form of the task body ``body`` (a numba dispatcher, the template's serial
    form) of n parameters, its task count parameter k: a function named ``qualname`` of the
    body's signature, compiled with numba ``options``."""
    run = _run_tasks(lambda argtypes: _body_symbol(body, argtypes), k)
    fn = njit(rebind(_parallel(n), qualname, {"RUN_TASKS": run}), cache=True, nogil=True,
              no_cfunc_wrapper=True, **options)
    fn.__class__ = TaskDispatcher
    fn.graphrt_body = body
    fn.graphrt_made = (qualname, n, k, rebind, options)
    return fn


@functools.lru_cache(maxsize=None)
def source_tag() -> bytes:
    """What the parallel forms' code depends on in this module (for their names)."""
    parts = (task_range._defn, _threads, _drive.py_func, _run_tasks, _borrowed, call_numba,
             _PARALLEL)
    return b"".join(f.encode() if isinstance(f, str) else inspect.getsource(f).encode()
                    for f in parts)


def count_parameter(code, source: bytes) -> int | None:
    """The index of the parameter that the loop over tasks of a template (its code and
    ``source``) counts: ``for t in prange(<parameter>)`` at its top level, the parameter read
    nowhere else, nothing after the loop, no raise; else None (also when the source read
    from the file is not that of the code: a file edited since it was imported)."""
    params, name = _loop_bound(source)
    if name is None or tuple(params) != code.co_varnames[:code.co_argcount]:
        return None
    return params.index(name)


@functools.lru_cache(maxsize=None)
def _loop_bound(source: bytes) -> tuple:
    """(parameter names, the one counting the tasks or None) of a template's source."""
    try:
        fn = ast.parse(textwrap.dedent(source.decode())).body[0]
    except (UnicodeDecodeError, SyntaxError, IndexError):
        return (), None
    params = [a.arg for a in fn.args.args]
    loops = [n for n in ast.walk(fn) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == "prange"]
    if len(loops) != 1 or any(isinstance(n, ast.Raise) for n in ast.walk(fn)):
        return params, None
    last = fn.body[-1]
    bound = loops[0].args
    if not (isinstance(last, ast.For) and last.iter is loops[0] and len(bound) == 1
            and isinstance(bound[0], ast.Name) and bound[0].id in params):
        return params, None
    name = bound[0].id
    if sum(isinstance(n, ast.Name) and n.id == name for n in ast.walk(fn)) != 1:
        return params, None
    return params, name
