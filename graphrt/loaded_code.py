"""Kernels loaded from graphrt's cache without parsing the bitcode kept for linking them.

A numba cache entry holds a function's object code and, beside it, the LLVM bitcode of its
module made fit for linking into other modules (numba links a callee's module into each
caller it compiles). numba's loader parses that bitcode for every entry it loads, whatever
comes next: for the 14 kernels of an OCR recogniser, 3.5 MiB of LLVM's heap and 3.6 MiB of
the bitcode reader's code brought into memory, in a process that calls every loaded kernel
by address and links none of them. For entries loaded from graphrt's folders the bitcode is
kept as bytes and parsed only when something asks to link the library (a compile later in
the same process); the names the JIT engine must know as defined (numba asks it before
taking an address) are read from the object code's symbol table instead.

This module imports nothing of graphrt's (graphrt.cache installs it before any kernel
module is imported).
"""
from __future__ import annotations

import contextlib
import struct
import threading

import llvmlite.binding as ll
from numba.core import codegen

_LOCAL = threading.local()
_numba_unserialize = codegen.CPUCodeLibrary._unserialize.__func__
_numba_module_for_linking = codegen.CPUCodeLibrary._get_module_for_linking

_SYMTAB = 2                     # sh_type of a symbol table
_GLOBAL, _WEAK = 1, 2           # symbol bindings that other code can see
_NOTYPE, _OBJECT, _FUNC = 0, 1, 2


def defined_symbols(obj: bytes) -> set[str] | None:
    """The names an ELF64 little-endian relocatable object defines for other code (global
    and weak functions and data, common symbols included); None for any other format."""
    if obj[:4] != b"\x7fELF" or obj[4:6] != b"\x02\x01":
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize)
                for i in range(shnum)]
    names = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != _SYMTAB:
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize):
            name, info, _, section, _, _ = struct.unpack_from("<IBBHQQ", obj, at)
            if section and info >> 4 in (_GLOBAL, _WEAK) and info & 0xF in (_NOTYPE, _OBJECT,
                                                                             _FUNC):
                start = strings + name
                names.add(obj[start:obj.index(b"\0", start)].decode())
    return names


@contextlib.contextmanager
def deferred_linking():
    """Within: libraries this thread loads keep their linking bitcode unparsed."""
    before = getattr(_LOCAL, "on", False)
    _LOCAL.on = True
    try:
        yield
    finally:
        _LOCAL.on = before


def _unserialize(cls, codegen_, state):
    """numba's CPUCodeLibrary._unserialize, the linking module left as bytes (within
    :func:`deferred_linking`, for object code this module can read)."""
    name, kind, data = state
    symbols = (defined_symbols(data[0]) if kind == "object" and getattr(_LOCAL, "on", False)
               else None)
    if not symbols:
        return _numba_unserialize(cls, codegen_, state)
    library = codegen_.create_library(name)
    library.enable_object_caching()
    library._set_compiled_object(data[0])
    library.graphrt_linking_bitcode = data[1]
    library._finalize_final_module()
    codegen_._engine._defined_symbols |= symbols
    return library


def _module_for_linking(self):
    """numba's CPUCodeLibrary._get_module_for_linking, parsing kept bitcode first."""
    bitcode = self.__dict__.pop("graphrt_linking_bitcode", None)
    if bitcode is not None:
        self._shared_module = ll.parse_bitcode(bitcode)
    return _numba_module_for_linking(self)


def install() -> None:
    """Put the deferring loader in numba's code library class (once)."""
    cls = codegen.CPUCodeLibrary
    if cls._get_module_for_linking is not _module_for_linking:
        cls._unserialize = classmethod(_unserialize)
        cls._get_module_for_linking = _module_for_linking
