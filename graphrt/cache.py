"""Where graphrt keeps what it compiles, and the numba cache locator that puts it there.

    <root>/kernels/<folder of the source inside graphrt>/   numba's index and data files

``root``: GRAPHRT_CACHE_DIR if set, else ``$XDG_CACHE_HOME/graphrt`` (default
``~/.cache/graphrt``). Where only NUMBA_CACHE_DIR is set, kernels go to
``$NUMBA_CACHE_DIR/graphrt`` (so a process that isolates numba's cache isolates graphrt's).

A kernel's cache entry is found by its file's path *inside the package* and validated by a
hash of that file's content (numba's source stamp), never by the file's absolute path or
mtime: a copied, moved or reinstalled unchanged graphrt reuses every entry, and one folder
can serve every worker of a cluster. Files are written under a temporary name and renamed
into place (numba's writer), so no reader sees a torn file. numba's own save reads a
function's index, picks a data file name and writes both without a lock, so two processes
adding different signatures at once could both pick ``.1.nbc`` and leave an index entry
naming the other's code; graphrt's folders are saved under an exclusive lock on the index
(``<index>.lock``, where the platform has fcntl), data file first, then the merged index.

numba's key for a compiled specialisation holds the signature, the CPU (name and features)
and the function's bytecode, not how the code was generated: a function decorated again with
other fastmath flags, or a process run with another ``NUMBA_OPT`` or without SVML, would load
code made under the old settings; and a function whose callee in another module changed
would load code built from the old callee (a caller's copy of it, or the callee's own entry,
validated by its unchanged file). In graphrt's folders the key also holds
:func:`code_settings`, the function's compile options and the process's code-generation
settings, and source_hash.dependency_hash: its source and that of the compiled functions it
calls, recursively, with the tags of the modules whose intrinsics and overloads they use.

This module imports nothing of graphrt's but loaded_code and source_hash (which import
nothing of graphrt's either): it must be installed before the first kernel module is imported (numba picks a
function's cache locator when it is decorated).
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import shutil
import time

from numba.core import caching, config

from . import loaded_code
from .source_hash import dependency_hash

try:
    import fcntl
except ImportError:         # (no advisory locks: numba's unlocked save)
    fcntl = None

PACKAGE = os.path.dirname(os.path.abspath(__file__))


def root() -> str:
    env = os.environ.get("GRAPHRT_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "graphrt")


def kernels_dir() -> str:
    if not os.environ.get("GRAPHRT_CACHE_DIR") and os.environ.get("NUMBA_CACHE_DIR"):
        return os.path.join(os.environ["NUMBA_CACHE_DIR"], "graphrt")
    return os.path.join(root(), "kernels")


def _old_schedules_dir() -> str:
    """Where graphrt before its one run path kept generated schedule modules (cleared)."""
    return os.path.join(root(), "schedules")


def folder_of(py_file: str) -> str:
    """The folder that holds the cached kernels of a module of graphrt's."""
    rel = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), PACKAGE)
    return os.path.join(kernels_dir(), "graphrt" if rel == "." else os.path.join("graphrt", rel))


class KernelLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """numba's locator for graphrt's own functions: <kernels_dir>/<relative folder>."""

    folders: set = set()        # every folder this locator gave out (saved under a lock)

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = folder_of(py_file)
        KernelLocator.folders.add(self._cache_path)

    def get_cache_path(self):
        return self._cache_path

    ensured: set = set()        # folders ensure_cache_path has made and written in

    def ensure_cache_path(self):
        """numba's check (the folder made, a temporary file written and removed in it), once
        per folder and process: it ran for every kernel function made, some 250 when a
        BERT's session is created. (_save makes the folder again if it has gone since.)"""
        if self._cache_path not in KernelLocator.ensured:
            super().ensure_cache_path()
            KernelLocator.ensured.add(self._cache_path)

    @classmethod
    def from_function(cls, py_func, py_file):
        path = os.path.abspath(py_file)
        if not path.startswith(PACKAGE + os.sep):
            return None
        return super().from_function(py_func, py_file)


@contextlib.contextmanager
def _locked(path: str, wait: float | None = None):
    """An exclusive lock on the file ``path`` while the block runs; ``wait``: seconds at most
    to wait for another holder, after which the block runs without the lock."""
    if fcntl is None:
        yield
        return
    with open(path, "a") as f:
        if wait is None:
            fcntl.flock(f, fcntl.LOCK_EX)
            held = True
        else:
            end = time.monotonic() + wait
            while not (held := _try_lock(f)) and time.monotonic() < end:
                time.sleep(0.01)
        try:
            yield
        finally:
            if held:
                fcntl.flock(f, fcntl.LOCK_UN)


def _try_lock(f) -> bool:
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


_numba_save = caching.IndexDataCacheFile.save


def _save(self, key, data):
    """IndexDataCacheFile.save for graphrt's folders: under the index's lock, the data file
    (an unused number, or the key's own), then the index re-read and merged."""
    if self._cache_path not in KernelLocator.folders:
        return _numba_save(self, key, data)
    os.makedirs(self._cache_path, exist_ok=True)
    with _locked(self._index_path + ".lock"):
        overloads = self._load_index()
        name = overloads.get(key)
        if name is None:
            used = set(overloads.values())
            name = next(n for n in map(self._data_name, itertools.count(1)) if n not in used)
        self._save_data(name, data)
        overloads[key] = name
        self._save_index(overloads)


WAIT_FOR_OTHERS = 120.0     # seconds at most spent waiting for another process's compile


@contextlib.contextmanager
def _compiling(cache, args: tuple):
    """Held while this process compiles (or loads) the specialisation for ``args`` of a
    function cached in graphrt's folders: an exclusive lock on a file named by the
    function's index and the signature. A process that finds it held waits for the holder,
    whose compile is then in the cache to load, instead of compiling the same code beside it
    (the test suite's workers, the schedule helper, a cluster's workers sharing one folder).
    Waiting ends after ``WAIT_FOR_OTHERS`` seconds whatever the holder does: then this
    process compiles too."""
    name = hashlib.sha1(f"{cache._cache_file._index_path}|{args}|"
                        f"{getattr(cache, 'graphrt_settings', None)}".encode()).hexdigest()[:20]
    folder = os.path.join(kernels_dir(), ".compiling")
    with contextlib.ExitStack() as stack:
        try:
            os.makedirs(folder, exist_ok=True)
            stack.enter_context(_locked(os.path.join(folder, name), WAIT_FOR_OTHERS))
        except OSError:     # (a folder this process cannot write: compile unlocked)
            pass
        yield


def _one_compiler(numba_compile):
    """Dispatcher.compile, one process at a time per signature of a function cached in
    graphrt's folders (``_compiling``). The file lock is taken inside numba's compiler lock,
    so every thread holding one holds the other: a wait between processes then follows
    their call graphs, which have no cycles, and cannot deadlock."""
    from numba.core import sigutils
    from numba.core.compiler_lock import global_compiler_lock

    def compile(self, sig):
        cache = self._cache
        if fcntl is None or getattr(cache, "graphrt_settings", None) is None:
            return numba_compile(self, sig)
        with global_compiler_lock:
            args, _ = sigutils.normalize_signature(sig)
            existing = self.overloads.get(tuple(args))
            if existing is not None:
                return existing.entry_point
            with _compiling(cache, tuple(args)):
                return numba_compile(self, sig)
    return compile


def _plain(value):
    """A compile option as a value whose repr is the same in every process (a set of
    fastmath flags sorted: a set's order follows the string hash seed)."""
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(map(str, value)))
    if isinstance(value, dict):
        return tuple(sorted((str(k), _plain(v)) for k, v in value.items()))
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    return repr(value)


def code_settings(options: dict) -> tuple:
    """What shapes a function's machine code besides its source, signature and CPU: its
    compile options (``cache`` aside) and numba's code-generation settings."""
    own = tuple(sorted((k, _plain(v)) for k, v in options.items() if k != "cache"))
    return own, (int(config.OPT), bool(config.USING_SVML), bool(config.LOOP_VECTORIZE),
                 bool(config.SLP_VECTORIZE), bool(config.ENABLE_AVX), bool(config.BOUNDSCHECK),
                 bool(config.DEBUGINFO_DEFAULT))


_numba_index_key = caching.Cache._index_key


def _index_key(self, sig, codegen):
    key = _numba_index_key(self, sig, codegen)
    settings = getattr(self, "graphrt_settings", None)
    if settings is None:
        return key
    return key + (settings, dependency_hash(self._py_func))


def _keyed(enable_caching, options_of):
    """An ``enable_caching`` that, for a function cached in graphrt's folders, puts its
    code settings into every key its cache makes."""
    def enable(self):
        enable_caching(self)
        if isinstance(self._cache._impl.locator, KernelLocator):
            self._cache.graphrt_settings = code_settings(options_of(self))
    enable.graphrt = True
    return enable


def _load_overload(self, sig, target_context):
    """numba's Cache.load_overload without its refresh of the target context for functions
    cached in graphrt's folders: that refresh imports and installs every lowering registry
    numba has (linalg, random, typed containers, jitclass, ...: 0.25-0.4 s of a warm process's
    first run), which loading compiled code does not use. Only the runtime it calls into is
    made ready; a compile refreshes the context itself, as always. The loaded library keeps
    its linking bitcode unparsed until something links it (graphrt/loaded_code.py)."""
    if getattr(self, "graphrt_settings", None) is None:
        return _numba_load_overload(self, sig, target_context)
    runtime_ready(target_context)
    with self._guard_against_spurious_io_errors(), loaded_code.deferred_linking():
        return self._load_overload(sig, target_context)


_RUNTIME: list = []         # [True] once runtime_ready has made the runtime's symbols known


def runtime_ready(target_context) -> None:
    """Make the symbols of numba's runtime (NRT) that loaded code calls known to the JIT
    linker. numba's own ``rtsys.initialize`` compiles the runtime's few LLVM functions
    (reference counts, atomics) in every process, which brings up LLVM's code generator:
    28 MiB of a warm process's memory for 7 small functions. Here their object code comes
    from graphrt's cache (compiled once per machine, kernels/core/objcode.py) and the C
    helpers are registered as numba registers them; a compile later initialises numba's
    runtime in full, as always (its own copies of the functions then serve its code)."""
    from numba.core.runtime import rtsys
    if _RUNTIME or getattr(rtsys, "_init", False):
        return
    try:
        import llvmlite.binding as ll
        import numba
        from numba.core.runtime import _nrt_python as nrt, nrtdynmod

        from .kernels.core import objcode
        for name, address in nrt.c_helpers.items():
            ll.add_symbol(name if name.startswith("_") else "NRT_" + name, address)
        module = nrtdynmod.create_nrt_module(target_context)[0]
        names = [f.name for f in module.functions if not f.is_declaration]
        obj = objcode.compiled_object("nrt", [numba.__version__, str(module)],
                                      lambda: str(module), "runtime")
        for name, address in zip(names, objcode.loaded(obj, names)):
            ll.add_symbol(name, int(address))
        _RUNTIME.append(True)
    except Exception:       # (another numba's runtime): numba's own way
        rtsys.initialize(target_context)


_numba_load_overload = caching.Cache.load_overload


def install() -> None:
    """Put KernelLocator first in numba's list, the locked save, the settings-holding key and
    the deferred linking bitcode in place (once)."""
    from numba.core import ccallback, dispatcher
    classes = caching.CacheImpl._locator_classes
    if KernelLocator not in classes:
        classes.insert(0, KernelLocator)
        caching.IndexDataCacheFile.save = _save
        caching.Cache._index_key = _index_key
        caching.Cache.load_overload = _load_overload
        dispatcher.Dispatcher.enable_caching = _keyed(
            dispatcher.Dispatcher.enable_caching, lambda d: d.targetoptions)
        ccallback.CFunc.enable_caching = _keyed(
            ccallback.CFunc.enable_caching, lambda c: c._compiler.targetoptions)
        dispatcher.Dispatcher.compile = _one_compiler(dispatcher.Dispatcher.compile)
        loaded_code.install()


def _files(folder: str):
    for base, _, names in os.walk(folder):
        for name in names:
            yield os.path.join(base, name)


def info() -> dict:
    """What the cache holds: for its kernels, the folder, files and bytes, and the number of
    compiled specialisations (numba data files)."""
    out = {}
    for part, folder in (("kernels", kernels_dir()),):
        files = list(_files(folder)) if os.path.isdir(folder) else []
        out[part] = {"folder": folder, "files": len(files),
                     "bytes": sum(os.path.getsize(f) for f in files if os.path.exists(f)),
                     "compiled": sum(f.endswith(".nbc") for f in files)}
    return out


def clear() -> list[str]:
    """Remove the kernel folder (and an older graphrt's schedule folder); the folders
    removed."""
    gone = []
    KernelLocator.ensured.clear()
    for folder in (kernels_dir(), _old_schedules_dir()):
        if os.path.isdir(folder):
            shutil.rmtree(folder)
            gone.append(folder)
    return gone
