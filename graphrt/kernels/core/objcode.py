"""Object code of LLVM modules graphrt writes itself (the GEMM micro-kernels, the
trampolines), kept in graphrt's kernel cache and loaded without numba: a warm process loads
a module in about a millisecond, where compiling it costs 5-500 ms.

A module is named by the caller's key parts (what its text depends on: a file tag, the
element type, ...) together with numba's target (triple, CPU name and features, so the code
is built as numba's is) and llvmlite's version; a file is written whole (renamed into
place), so concurrent processes never read half of one.
"""
from __future__ import annotations

import hashlib
import os
import threading

import llvmlite
import llvmlite.binding as llb
import numpy as np

from ...cache import kernels_dir

_ENGINES: list = []         # kept alive: they own the loaded code
BUILT: list = []            # the names of the modules this process compiled (not loaded)


def _target():
    """numba's target (CPU name and features, so the code is built as numba's is)."""
    from numba.core.registry import cpu_target
    triple, cpu, features = cpu_target.target_context.codegen().magic_tuple()
    return triple, cpu, features


def target_features() -> set[str]:
    """The CPU features numba builds for (``avx512vnni``, ...)."""
    return {f[1:] for f in _target()[2].split(",") if f.startswith("+")}


def _machine(triple, cpu, features):
    return llb.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=3, codemodel="jitdefault", jit=True)


def object_path(name: str, key_parts: list, folder: str) -> str:
    """Where compiled_object keeps the module named so in the kernel cache."""
    key = hashlib.sha1("\n".join([*key_parts, *_target(), llvmlite.__version__]).encode()
                       ).hexdigest()
    return os.path.join(kernels_dir(), folder, f"{name}-{key[:16]}.o")


def compiled_object(name: str, key_parts: list, text, folder: str) -> bytes:
    """The object code of the LLVM module ``text()`` for numba's target, from the kernel
    cache's ``folder`` (``name`` and a digest of ``key_parts``, the target and llvmlite's
    version), else optimised and compiled now and saved there."""
    target = _target()
    path = object_path(name, key_parts, folder)
    where = os.path.dirname(path)
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        pass
    mod = llb.parse_assembly(text())
    mod.verify()
    tm = _machine(*target)
    pb = llb.create_pass_builder(tm, llb.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    obj = tm.emit_object(mod)
    BUILT.append(name)
    try:
        os.makedirs(where, exist_ok=True)
        tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
        with open(tmp, "wb") as f:
            f.write(obj)
        os.replace(tmp, path)
    except OSError:         # a read-only cache: compiled again by the next process
        pass
    return obj


def loaded(objects, names: list[str]) -> np.ndarray:
    """Load object code (``objects``: one bytes, or a list of them) into this process; the
    addresses of its functions ``names`` (int64)."""
    engine = llb.create_mcjit_compiler(llb.parse_assembly(""), _machine(*_target()))
    for obj in [objects] if isinstance(objects, bytes) else objects:
        engine.add_object_file(llb.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    _ENGINES.append(engine)
    table = np.array([engine.get_function_address(n) for n in names], dtype=np.int64)
    if not table.all():
        raise RuntimeError("graphrt: compiled code did not load")
    return table
