"""Large fills: out[i] = v for every i (words of the element's width, so every bit of v is
copied), over blocks shared by numba's threads.

A fill larger than the last-level cache writes to memory: there each block is written with
non-temporal 64-byte stores (x86), which skip reading the lines before writing them (a third
less time here for 151 MB). Smaller fills use plain stores and leave the value in cache for
its consumer. Either way the bits do not depend on the thread count.
"""
from __future__ import annotations

import functools

import llvmlite.binding as llb
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .jit import task_forms
from .words import word_of

BLOCK_BYTES = 1 << 16           # a task's share
STREAM_BYTES = 1 << 25          # from here (past the 32 MiB last-level cache), streaming stores
STREAMS = llb.get_process_triple().startswith("x86_64")


@intrinsic
def _stream64(typingctx, arr, i, v):
    """arr[i:i + 64 // itemsize] = v (arr[i] 64-byte aligned) by one non-temporal store."""
    sig = types.void(arr, types.intp, arr.dtype)

    def codegen(context, builder, sig, args):
        a, i, v = args
        ety = context.get_data_type(sig.args[0].dtype)
        lanes = 64 // context.get_abi_sizeof(ety)
        vty = ir.VectorType(ety, lanes)
        i32 = ir.IntType(32)
        data = context.make_array(sig.args[0])(context, builder, a).data
        vec = builder.insert_element(ir.Constant(vty, ir.Undefined), v, ir.Constant(i32, 0))
        vec = builder.shuffle_vector(vec, ir.Constant(vty, ir.Undefined),
                                     ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))
        store = builder.store(vec, builder.bitcast(builder.gep(data, [i]), vty.as_pointer()),
                              align=64)
        store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(i32, 1)]))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _store_fence(typingctx):
    """sfence: the non-temporal stores before it are visible to other threads after it (x86
    orders them with nothing else)."""
    sig = types.void()

    def codegen(context, builder, sig, args):
        if STREAMS:
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse.sfence")
            builder.call(fn, [])
        return context.get_dummy_value()

    return sig, codegen


def _fill_blocks(out, v, stream, blocks):
    """out[:] = v, BLOCK_BYTES a task (``blocks`` of them); ``stream``: non-temporal stores
    (where STREAMS)."""
    n = out.size
    block = max(1, BLOCK_BYTES // out.itemsize)
    lanes = 64 // out.itemsize
    for t in prange(blocks):
        a = t * block
        b = min(n, a + block)
        if not stream:
            s = out[a:b]
            for i in range(s.size):
                s[i] = v
            continue
        i = a
        while i < b and (out.ctypes.data + i * out.itemsize) % 64 != 0:
            out[i] = v
            i += 1
        while i + lanes <= b:
            _stream64(out, i, v)
            i += lanes
        while i < b:
            out[i] = v
            i += 1
        _store_fence()


@functools.lru_cache(maxsize=None)
def _task_form():
    """The serial walk's task form (core/tasks.py), made when first used: nothing is hashed
    when graphrt is imported."""
    return task_forms(_fill_blocks, "fill_blocks")[1]


def fill_blocks(out, v, stream: bool) -> None:
    """out[:] = v (``out`` 1-D of an unsigned word type, ``v`` of it) on the threads."""
    _task_form()(out, v, stream, -(-out.size // max(1, BLOCK_BYTES // out.itemsize)))


PARALLEL_FILL = 1 << 18     # bytes from which a fill is shared by the threads


class Fill:
    """out[:] = value, written as words of the element's size (so every bit of the value,
    a NaN's payload included, is copied): numpy's fill up to PARALLEL_FILL bytes, above it
    fill_blocks (threads share the blocks; streaming stores past STREAM_BYTES);
    numpy's assignment for strings."""

    __slots__ = ("word", "bits")

    def __init__(self, dtype, value, size: int):
        cell = np.array(value).astype(dtype).reshape(1)
        self.word = word_of(dtype)
        self.bits = cell[0] if self.word is None else cell.view(self.word)[0]

    def __call__(self, out: np.ndarray) -> None:
        if self.word is None:
            out[...] = self.bits
        elif out.nbytes >= PARALLEL_FILL:
            fill_blocks(out.view(self.word), self.bits, STREAMS and out.nbytes >= STREAM_BYTES)
        elif out.size:
            out.view(self.word).fill(self.bits)
