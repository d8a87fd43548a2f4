"""Calls to numba-compiled functions through addresses held in a table, not by linking them.

A numba function that calls another links the callee's compiled module into its own and
optimises the callee's code again there, so a large callee costs a good part of its compile
time again in every caller (the GEMM's blocked tile driver: about 1 s in each tile entry).
Called through an address, the callee is compiled (or loaded from the kernel cache) once, as
itself, and the caller compiles only the call: the two compile separately, even in different
processes, and the caller's cached code holds no address (it reads it from the table it is
given, filled in by this process: ``address``).

The call follows numba's own calling convention for the callee's declared signature (a
status code; pointers to the result and to exception information; the arguments flattened as
numba flattens them). Only callees that return nothing and raise nothing are called so: the
status is not read.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.core.errors import TypingError
from numba.extending import intrinsic


def address(dispatcher, signature) -> int:
    """The machine address of ``dispatcher``'s overload for ``signature``'s argument types,
    compiled or loaded from the cache now."""
    args = tuple(signature.args)
    dispatcher.compile(args)
    cres = dispatcher.overloads[args]
    return int(cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name))


def caller(slot: int, signature_of):
    """An intrinsic ``call(table, args)`` that calls the function at ``table[slot]`` (an int64
    array) on the tuple ``args``, as compiled for ``signature_of(dtype)``, where dtype is the
    element type of args[0]. The arguments' types must be that signature's (integer literals
    are widened)."""

    @intrinsic
    def call(typingctx, table, args):
        target = signature_of(args.types[0].dtype)
        if target.return_type != types.none or not _matches(args, types.Tuple(target.args)):
            raise TypingError(f"by_address: arguments {args} do not match {target}")

        def codegen(context, builder, sig, cargs):
            i64 = ir.IntType(64)
            tab = context.make_array(sig.args[0])(context, builder, cargs[0])
            addr = builder.load(builder.gep(tab.data, [ir.Constant(i64, slot)]))
            values = [context.cast(builder, builder.extract_value(cargs[1], k), h, t)
                      for k, (h, t) in enumerate(zip(sig.args[1].types, target.args))]
            fnty = context.call_conv.get_function_type(target.return_type, target.args)
            call_numba(context, builder, builder.inttoptr(addr, fnty.as_pointer()), fnty,
                       target.args, values)
            return context.get_dummy_value()

        return types.none(table, args), codegen

    return call


def _matches(have, want) -> bool:
    """Whether values of type ``have`` pass as ``want``: the same type, integers of any
    width, booleans, or tuples of such."""
    for kind in (types.Integer, types.Boolean):
        if isinstance(have, kind) and isinstance(want, kind):
            return True
    if isinstance(have, types.BaseTuple) and isinstance(want, types.BaseTuple):
        return len(have) == len(want) and all(_matches(h, w) for h, w in zip(have, want))
    return have == want


@intrinsic
def data_at(typingctx, addr, dtype):
    """A pointer to values of ``dtype`` (a numpy scalar type) at the machine address
    ``addr``: with numba.carray, an array the caller holds, passed as an int64 (the jitted
    schedule's arrays outside the slab, plan/jitsched.py)."""
    if not isinstance(dtype, types.NumberClass) or not isinstance(addr, types.Integer):
        raise TypingError(f"data_at(address, numpy scalar type), not ({addr}, {dtype})")
    ptr = types.CPointer(dtype.instance_type)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(ptr))

    return ptr(addr, dtype), codegen


@intrinsic
def readonly(typingctx, arr):
    """``arr`` typed read-only, as numba types a read-only array passed from Python (the
    same data model: nothing changes but the type, so callees see their usual one)."""
    if not isinstance(arr, types.Array):
        raise TypingError(f"readonly(array), not ({arr})")

    def codegen(context, builder, sig, args):
        return impl_ret_borrowed(context, builder, sig.return_type, args[0])

    return arr.copy(readonly=True)(arr), codegen


def call_numba(context, builder, fn, fnty, argtypes, values) -> tuple:
    """A call of ``fn`` (an LLVM function or pointer of numba's calling convention, type
    ``fnty``, compiled for ``argtypes``) on ``values``: (status code, exception information
    slot)."""
    result = cgutils.alloca_once(builder, fnty.args[0].pointee)
    builder.store(cgutils.get_null_value(fnty.args[0].pointee), result)
    excinfo = cgutils.alloca_once(builder, fnty.args[1].pointee)
    packed = list(context.get_arg_packer(argtypes).as_arguments(builder, values))
    return builder.call(fn, [result, excinfo] + packed), excinfo


def _call(context, builder, addr, argtypes, values) -> None:
    """Call the numba function at ``addr`` (an LLVM int64), compiled for ``argtypes`` and
    returning nothing, on ``values``; an exception it raises is raised by the caller (numba's
    status and exception information passed on)."""
    conv = context.call_conv
    fnty = conv.get_function_type(types.none, argtypes)
    code, excinfo = call_numba(context, builder, builder.inttoptr(addr, fnty.as_pointer()),
                               fnty, argtypes, values)
    status = conv._get_return_status(builder, code, builder.load(excinfo))
    with cgutils.if_unlikely(builder, status.is_error):
        conv.return_status_propagate(builder, status)


def _arg_types(spec: str, c) -> tuple:
    """The argument types a ``call_packed`` spec describes (see there)."""
    out = []
    for part in spec.split(","):
        kind, *rest = part.split(":")
        if kind[0] == "a":
            out.append(types.Array(getattr(types, rest[0]), int(rest[1]), "C",
                                   readonly=rest[2] == "r"))
        elif kind[0] == "c":
            out.append(c.types[int(kind[1:])])
        elif kind[0] in "if":
            out.append(getattr(types, rest[0]))
        elif kind[0] == "b":
            out.append(types.boolean)
        elif kind == "n":
            out.append(types.none)
        else:
            raise TypingError(f"call_packed: unknown argument kind {part!r}")
    return tuple(out)


@intrinsic(prefer_literal=True)
def call_packed(typingctx, table, slot, arrays, ints, floats, c, spec):
    """Call the numba function at address table[slot] (``address``: the overload for exactly
    these argument types, returning nothing) on arguments built from a run state's vectors as
    the literal string ``spec`` says, one comma-separated part per argument:
    ``a<p>:<dtype>:<ndim>:<r|w>`` a C-contiguous array at address arrays[p] of shape
    arrays[p+1 : p+1+ndim] (read-only or writable, as numba typed it); ``c<k>`` element k of
    the tuple ``c``; ``i<p>:<type>`` ints[p] as that integer type; ``b<p>`` ints[p] != 0;
    ``f<p>:<type>`` floats[p] as that float type; ``n`` None. An exception the callee raises
    is raised here. One call to type and lower, where the same arguments written as
    indexing, slicing and numba.carray cost numba a search of every getitem overload each
    (about 3 ms a call site). The jitted schedule calls its kernels so (plan/jitsched.py):
    a segment links no kernel's code."""
    if not isinstance(spec, types.StringLiteral) or not isinstance(slot, types.Integer):
        return None
    argtypes = _arg_types(spec.literal_value, c)
    parts = spec.literal_value.split(",")

    def codegen(context, builder, sig, cargs):
        from numba.np.arrayobj import populate_array
        i64 = ir.IntType(64)
        tab, arr, iv, fv = (context.make_array(sig.args[k])(context, builder, cargs[k]).data
                            for k in (0, 2, 3, 4))
        cv = cargs[5]

        def element(data, pos):
            return builder.load(builder.gep(data, [pos if isinstance(pos, ir.Value) else
                                                   ir.Constant(i64, pos)]))

        values = []
        for part, ty in zip(parts, argtypes):
            kind = part.split(":")[0]
            if kind[0] == "a":
                p = int(kind[1:])
                item = context.get_abi_sizeof(context.get_data_type(ty.dtype))
                ptr = builder.inttoptr(element(arr, p),
                                       context.get_data_type(ty.dtype).as_pointer())
                shape = [element(arr, p + 1 + d) for d in range(ty.ndim)]
                strides = [ir.Constant(i64, item)] * ty.ndim
                for d in range(ty.ndim - 2, -1, -1):
                    strides[d] = builder.mul(strides[d + 1], shape[d + 1])
                ary = context.make_array(ty)(context, builder)
                populate_array(ary, data=ptr, shape=shape, strides=strides,
                               itemsize=ir.Constant(i64, item), meminfo=None)
                values.append(ary._getvalue())
            elif kind[0] == "c":
                values.append(builder.extract_value(cv, int(kind[1:])))
            elif kind[0] == "i":
                values.append(context.cast(builder, element(iv, int(kind[1:])),
                                           types.int64, ty))
            elif kind[0] == "b":
                values.append(context.cast(builder, element(iv, int(kind[1:])),
                                           types.int64, types.boolean))
            elif kind[0] == "f":
                values.append(context.cast(builder, element(fv, int(kind[1:])),
                                           types.float64, ty))
            else:
                values.append(context.get_dummy_value())
        _call(context, builder, element(tab, cargs[1]), argtypes, values)
        return context.get_dummy_value()

    return types.none(table, slot, arrays, ints, floats, c, spec), codegen
