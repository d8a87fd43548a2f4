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
from numba.core.errors import TypingError
from numba.extending import intrinsic


def address(dispatcher, signature) -> int:
    """The machine address of ``dispatcher``'s overload for ``signature``'s argument types,
    compiled or loaded from the cache now."""
    args = tuple(signature.args)
    dispatcher.compile(args)
    return overload_address(dispatcher, args)


def overload_address(dispatcher, argtypes: tuple) -> int:
    """The machine address of ``dispatcher``'s compiled overload for ``argtypes``."""
    cres = dispatcher.overloads[argtypes]
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


def call_numba(context, builder, fn, fnty, argtypes, values) -> tuple:
    """A call of ``fn`` (an LLVM function or pointer of numba's calling convention, type
    ``fnty``, compiled for ``argtypes``) on ``values``: (status code, exception information
    slot)."""
    result = cgutils.alloca_once(builder, fnty.args[0].pointee)
    builder.store(cgutils.get_null_value(fnty.args[0].pointee), result)
    excinfo = cgutils.alloca_once(builder, fnty.args[1].pointee)
    packed = list(context.get_arg_packer(argtypes).as_arguments(builder, values))
    return builder.call(fn, [result, excinfo] + packed), excinfo
