"""Make ``import onnxruntime`` give graphrt.onnxruntime, for code that cannot be edited."""
from __future__ import annotations

import contextlib
import importlib
import sys

_NAMES = ("", ".capi", ".capi.onnxruntime_pybind11_state", ".capi._pybind_state",
          ".capi.onnxruntime_inference_collection")
_saved: dict[str, object] = {}


def install() -> None:
    """Registers this module in sys.modules as ``onnxruntime`` (and its submodules as
    ``onnxruntime.capi...``). Imports made after this get graphrt; a module that imported
    the real onnxruntime before keeps it."""
    if _saved:
        return
    for suffix in _NAMES:
        shim = importlib.import_module("graphrt.onnxruntime" + suffix)
        name = "onnxruntime" + suffix
        _saved[name] = sys.modules.get(name)
        sys.modules[name] = shim
    for name in list(sys.modules):            # other onnxruntime submodules: not graphrt's
        if name.startswith("onnxruntime.") and name not in _saved:
            _saved[name] = sys.modules.pop(name)


def uninstall() -> None:
    """Undoes install(): ``import onnxruntime`` gives what it gave before."""
    for name, module in _saved.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module
    _saved.clear()


def installed() -> bool:
    return bool(_saved)


def forget(package: str) -> None:
    """Drops ``package`` and its submodules from sys.modules, so that the next import runs
    its ``import onnxruntime`` again."""
    for name in list(sys.modules):
        if name == package or name.startswith(package + "."):
            del sys.modules[name]


@contextlib.contextmanager
def imported(package: str, on_graphrt: bool = True):
    """``package`` imported afresh with ``import onnxruntime`` giving graphrt's module (or,
    with on_graphrt=False, the real onnxruntime): the same package on both runtimes in one
    process, for comparisons and benchmarks. The package is forgotten again on exit."""
    forget(package)
    if on_graphrt:
        install()
    try:
        yield importlib.import_module(package)
    finally:
        if on_graphrt:
            uninstall()
        forget(package)
