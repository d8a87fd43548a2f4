"""python -m graphrt.onnxruntime script.py [args...]
python -m graphrt.onnxruntime -m module [args...]
python -m graphrt.onnxruntime -c "code"

Runs a Python program with ``import onnxruntime`` giving graphrt.onnxruntime."""
from __future__ import annotations

import os
import runpy
import sys

from .register import install

USAGE = __doc__.split("\n\n")[0]


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    install()
    if argv[0] == "-m" and len(argv) > 1:
        sys.argv = [argv[1]] + argv[2:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c" and len(argv) > 1:
        sys.argv = ["-c"] + argv[2:]
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
    else:
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
