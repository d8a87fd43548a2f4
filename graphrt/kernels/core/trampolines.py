"""Every compiled kernel call through one signature, and one interpreter that makes lists of
such calls.

A numba overload takes its arguments as numba's calling convention flattens them, so two
kernels with different argument types cannot be called through one kind of pointer. A
*trampoline* bridges that: for one list of argument types, a few lines of LLVM IR

    int32 trampoline(int64 target, int64* row)

rebuild the arguments from the int64 vector ``row`` -- an array as its address and then its
extents (C-contiguous, strides derived), an integer or a boolean as itself, a float as its
IEEE-754 bits, None as nothing -- and call the overload at address ``target``; the result is
0, or 1 when the kernel raised. A trampoline depends on the argument types only, so a few
dozen serve every kernel of a process; each is built with llvmlite (no numba typing) into
object code kept in graphrt's kernel cache (core/objcode.py: a warm process loads a plan's
in about a millisecond, where building them cost a plan's second run 30-80 ms).

``run_calls(prog, row, flag, start, stop)`` is the interpreter: calls start..stop-1 of
``prog``, an int64 vector of (trampoline, target, row offset) triples, one after another,
each on ``row[offset:]``. It is compiled once for every plan of every model (and cached on
disk), releases the interpreter lock, and stops before a call when ``flag[0]`` is not 0 (a
cancel token's flag). It returns -1 when every call returned, else the index of the call
that raised or would have been next when the flag was seen set; the caller tells the two
apart and, for a raise, repeats that call from Python to have the kernel's own exception.
"""
from __future__ import annotations

import hashlib
import struct
import threading

import llvmlite.binding as llb
import numba
import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.core.errors import TypingError
from numba.extending import intrinsic

from .by_address import call_numba, overload_address
from .jit import file_tag
from .objcode import compiled_object, loaded

SOURCE_TAG = file_tag(__file__)

_I32, _I64 = ir.IntType(32), ir.IntType(64)
_FNTY = ir.FunctionType(_I32, [_I64, _I64.as_pointer()])

_ADDRESSED = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
    np.uint64, np.float32, np.float64))


def addressable(a: np.ndarray) -> bool:
    """Whether a trampoline can pass array ``a`` by its address: C-contiguous, aligned, of a
    plain numeric type in native order (rebuilt with the numba type a call from Python gives
    it, so the kernel runs the overload its step's own call ran)."""
    return a.dtype in _ADDRESSED and a.flags.c_contiguous and a.flags.aligned and \
        a.dtype.isnative


def signature(fn, args) -> tuple | None:
    """The argument types of the compiled overload of ``fn`` (a numba dispatcher) that a call
    ``fn(*args)`` from Python runs, when a trampoline can make that call -- compiled already,
    returning nothing, every argument an addressable array, a number, a boolean or None --
    else None."""
    overloads = getattr(fn, "overloads", None)
    if overloads is None or not hasattr(fn, "typeof_pyval"):
        return None
    for a in args:
        if isinstance(a, np.ndarray):
            if not addressable(a):
                return None
        elif not (a is None or isinstance(a, (bool, int, float, np.bool_, np.integer,
                                               np.floating))):
            return None
    try:
        argtypes = tuple(_type_of(fn, a) for a in args)
    except Exception:       # (a value numba cannot type)
        return None
    cres = overloads.get(argtypes)
    if cres is None or cres.signature.return_type != types.none:
        return None
    return argtypes


_ARRAY_TYPES: dict = {}


def _type_of(fn, a):
    """``fn.typeof_pyval(a)``; an array's type (which depends on its element type, rank,
    layout, writability and alignment only) remembered: a plan's calls have hundreds of
    arguments, and numba's typeof of an array costs about 10 µs."""
    if not isinstance(a, np.ndarray):
        return fn.typeof_pyval(a)
    f = a.flags
    key = (type(a), a.dtype, a.ndim, f.c_contiguous, f.f_contiguous, f.writeable, f.aligned)
    t = _ARRAY_TYPES.get(key)
    if t is None:
        t = _ARRAY_TYPES[key] = fn.typeof_pyval(a)
    return t


def row_of(args) -> list:
    """The row a trampoline reads ``args`` from (the module docstring)."""
    row = []
    for a in args:
        if isinstance(a, np.ndarray):
            row.append(a.ctypes.data)
            row += a.shape
        elif a is None:
            pass
        elif isinstance(a, (float, np.floating)):
            row.append(struct.unpack("<q", struct.pack("<d", float(a)))[0])
        else:
            v = int(a)
            row.append(v - (1 << 64) if v >= 1 << 63 else v)   # (a uint64's bits)
    return row


_lock = threading.Lock()
_built: dict = {}           # key (_key) -> address


def _key(argtypes: tuple) -> tuple:
    """What a trampoline's code depends on: arrays by element type and rank (not by
    writability), scalars by type."""
    return tuple(("a", t.dtype, t.ndim) if isinstance(t, types.Array) else t for t in argtypes)


def trampolines(signatures: list) -> list:
    """The address of a trampoline for each argument-type tuple of ``signatures``; those
    this process has not built yet are built together, in one library."""
    keys = [_key(s) for s in signatures]
    with _lock:
        missing = {}
        for k, s in zip(keys, signatures):
            if k not in _built and k not in missing:
                missing[k] = s
        if missing:
            _build(missing)
        return [_built[k] for k in keys]


def _build(missing: dict) -> None:
    from numba.core.registry import cpu_target
    context = cpu_target.target_context
    objects, names = [], []
    for k, argtypes in missing.items():
        name = "graphrt_trampoline_" + hashlib.sha1(repr(k).encode()).hexdigest()[:16]

        def text(name=name, argtypes=argtypes):
            module = ir.Module(name=name)
            module.triple = llb.get_process_triple()
            _emit(context, module, name, argtypes)
            return str(module)
        # (its code also depends on numba's data model and calling convention)
        objects.append(compiled_object(name, [SOURCE_TAG, numba.__version__, repr(k)], text,
                                       "trampolines"))
        names.append(name)
    for k, address in zip(missing, loaded(objects, names)):
        _built[k] = int(address)


def _emit(context, module, name: str, argtypes: tuple) -> None:
    """The trampoline for ``argtypes`` (the module docstring), as function ``name``."""
    fn = ir.Function(module, _FNTY, name)
    builder = ir.IRBuilder(fn.append_basic_block())
    addr, row = fn.args
    pos = 0

    def word(p):
        return builder.load(builder.gep(row, [ir.Constant(_I64, p)]))

    values = []
    for ty in argtypes:
        if isinstance(ty, types.Array):
            dtype = context.get_data_type(ty.dtype)
            item = context.get_abi_sizeof(dtype)
            shape = [word(pos + 1 + d) for d in range(ty.ndim)]
            strides = [ir.Constant(_I64, item)] * ty.ndim
            for d in range(ty.ndim - 2, -1, -1):
                strides[d] = builder.mul(strides[d + 1], shape[d + 1])
            values.append(_array_value(context, builder, ty, word(pos), shape, strides, item))
            pos += 1 + ty.ndim
        elif isinstance(ty, types.Float):
            value = builder.bitcast(word(pos), ir.DoubleType())
            values.append(value if ty.bitwidth == 64 else
                          builder.fptrunc(value, context.get_value_type(ty)))
            pos += 1
        elif isinstance(ty, types.Boolean):
            values.append(builder.icmp_signed("!=", word(pos), ir.Constant(_I64, 0)))
            pos += 1
        elif isinstance(ty, types.Integer):
            value = word(pos)
            values.append(value if ty.bitwidth == 64 else
                          builder.trunc(value, ir.IntType(ty.bitwidth)))
            pos += 1
        elif isinstance(ty, types.NoneType):
            values.append(context.get_dummy_value())
        else:
            raise TypeError(f"trampolines: no argument of type {ty}")
    fnty = context.call_conv.get_function_type(types.none, argtypes)
    code, _ = call_numba(context, builder, builder.inttoptr(addr, fnty.as_pointer()), fnty,
                         argtypes, values)
    returned = builder.or_(builder.icmp_signed("==", code, ir.Constant(code.type, 0)),
                           builder.icmp_signed("==", code, ir.Constant(code.type, -2)))
    builder.ret(builder.select(returned, ir.Constant(_I32, 0), ir.Constant(_I32, 1)))


def _array_value(context, builder, ty, address, shape, strides, itemsize):
    """numba's value of an array of type ``ty`` over the memory at ``address`` (an int64),
    built field by field from its data model: no meminfo, no parent. (numba's own helpers
    for this look up functions in the target context, whose first lookup imports every
    lowering registry numba has: about 0.3 s a process.)"""
    model = context.data_model_manager[ty]
    value = ir.Constant(model.get_value_type(), ir.Undefined)

    def put(field, v):
        nonlocal value
        pos = model.get_field_position(field)
        value = builder.insert_value(value, v, pos)

    def tuple_of(field, items):
        t = model.get_value_type().elements[model.get_field_position(field)]
        out = ir.Constant(t, ir.Undefined)
        for d, v in enumerate(items):
            out = builder.insert_value(out, v, d)
        return out

    elements = model.get_value_type().elements
    nitems = ir.Constant(_I64, 1)
    for v in shape:
        nitems = builder.mul(nitems, v)
    put("meminfo", ir.Constant(elements[model.get_field_position("meminfo")], None))
    put("parent", ir.Constant(elements[model.get_field_position("parent")], None))
    put("nitems", nitems)
    put("itemsize", ir.Constant(_I64, itemsize))
    put("data", builder.inttoptr(address, elements[model.get_field_position("data")]))
    put("shape", tuple_of("shape", shape))
    put("strides", tuple_of("strides", strides))
    return value


@intrinsic
def _call(typingctx, trampoline, target, row, offset):
    """trampoline(target, &row[offset]), its int32 result."""
    if not isinstance(row, types.Array):
        raise TypingError("_call(trampoline, target, row, offset)")

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[2])(context, builder, args[2]).data
        return builder.call(builder.inttoptr(args[0], _FNTY.as_pointer()),
                            [args[1], builder.gep(data, [args[3]])])

    return types.int32(trampoline, target, row, offset), codegen


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def run_calls(prog, row, flag, start, stop):
    for k in range(start, stop):
        if flag[0] != 0 or _call(prog[3 * k], prog[3 * k + 1], row, prog[3 * k + 2]) != 0:
            return k
    return -1


_interpreter = None


def interpreter():
    """``run_calls``'s compiled entry point (compiled, or loaded from the cache, at the first
    request): called from Python without the dispatcher's choice of overload."""
    global _interpreter
    if _interpreter is None:
        sig = (types.int64[::1], types.int64[::1], types.int64[::1], types.int64, types.int64)
        run_calls.compile(sig)
        _interpreter = run_calls.overloads[sig].entry_point
    return _interpreter


# -- compiled subgraph runs ----------------------------------------------------------------
# A *record* is an int64 vector that describes one run of a subgraph's plan from compiled
# code: [n, prog, row, row_len, n_in, (dst, src, nbytes) * n_in, n_out, (dst, src, nbytes) *
# n_out] -- the plan's block (n calls; the addresses of its prog and row vectors, row_len
# words), the copies that stage its inputs before the calls and the copies that hand its
# outputs on after them. Control-flow kernels (kernels/control) hand records to their
# compiled drivers by address.

@intrinsic
def words_at(typingctx, addr):
    """A pointer to the int64 words at machine address ``addr``."""
    if not isinstance(addr, types.Integer):
        raise TypingError("words_at(address)")

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], _I64.as_pointer())

    return types.CPointer(types.int64)(addr), codegen


@intrinsic
def byte_at(typingctx, addr):
    """The byte at machine address ``addr`` (a boolean value's storage), as an int64."""
    if not isinstance(addr, types.Integer):
        raise TypingError("byte_at(address)")

    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(args[0], ir.IntType(8).as_pointer())
        return builder.zext(builder.load(ptr), _I64)

    return types.int64(addr), codegen


@intrinsic
def store_byte(typingctx, addr, value):
    """Write the low byte of ``value`` at machine address ``addr`` (a boolean's storage)."""
    if not isinstance(addr, types.Integer) or not isinstance(value, types.Integer):
        raise TypingError("store_byte(address, value)")

    def codegen(context, builder, sig, args):
        i8 = ir.IntType(8)
        value = context.cast(builder, args[1], sig.args[1], types.int64)
        builder.store(builder.trunc(value, i8), builder.inttoptr(args[0], i8.as_pointer()))
        return context.get_dummy_value()

    return types.none(addr, value), codegen


@intrinsic
def store_word(typingctx, addr, value):
    """Write ``value`` as an int64 at machine address ``addr``."""
    if not isinstance(addr, types.Integer) or not isinstance(value, types.Integer):
        raise TypingError("store_word(address, value)")

    def codegen(context, builder, sig, args):
        value = context.cast(builder, args[1], sig.args[1], types.int64)
        builder.store(value, builder.inttoptr(args[0], _I64.as_pointer()))
        return context.get_dummy_value()

    return types.none(addr, value), codegen


@intrinsic
def copy_bytes(typingctx, dst, src, nbytes):
    """memcpy(dst, src, nbytes) on machine addresses (regions that do not overlap)."""
    if not all(isinstance(t, types.Integer) for t in (dst, src, nbytes)):
        raise TypingError("copy_bytes(dst, src, nbytes)")

    def codegen(context, builder, sig, args):
        from numba.core import cgutils
        i8p = ir.IntType(8).as_pointer()
        cgutils.raw_memcpy(builder, builder.inttoptr(args[0], i8p),
                           builder.inttoptr(args[1], i8p), args[2], 1)
        return context.get_dummy_value()

    return types.none(dst, src, nbytes), codegen


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def run_copies(p, at):
    """The copies listed at word ``at`` of the record at pointer p; the word after them."""
    n = p[at]
    for j in range(n):
        q = at + 1 + 3 * j
        copy_bytes(p[q], p[q + 1], p[q + 2])
    return at + 1 + 3 * n


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def run_record(addr, flag):
    """The subgraph run the record at ``addr`` describes: -1, or the index of the call
    that raised or found ``flag`` set."""
    p = words_at(addr)
    at = run_copies(p, 4)
    n = p[0]
    if n > 0:
        k = run_calls(carray(words_at(p[1]), (3 * n,)), carray(words_at(p[2]), (p[3],)),
                      flag, 0, n)
        if k >= 0:
            return k
    run_copies(p, at)
    return -1


def record(block, copies_in: list, copies_out: list) -> np.ndarray:
    """The record of a run made of ``block`` (a plan/program.Block, or None for no calls)
    and the (dst, src) array pairs copied before and after it."""
    words = [0, 0, 0, 0] if block is None else \
        [block.n, block.prog.ctypes.data, block.row.ctypes.data, block.row.size]
    return np.array(words + copy_words(copies_in) + copy_words(copies_out), dtype=np.int64)


def copy_words(pairs: list) -> list:
    """A copy list as run_copies reads it: its length, then (dst, src, nbytes) per (dst,
    src) array pair."""
    words = [len(pairs)]
    for dst, src in pairs:
        words += [dst.ctypes.data, src.ctypes.data, src.nbytes]
    return words
