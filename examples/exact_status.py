"""The exact-mode status of every operator in graphrt's operator table, as a markdown table.

    python examples/exact_status.py            # print the table
    python examples/exact_status.py --write    # refresh it in docs/exact-mode.md

The status comes from the kernels' own ``supports_exact`` flags (tests/test_exact_properties.py
checks that the copy in docs/exact-mode.md is current):
- yes: the exact variant follows docs/exact-mode.md's rules for every element type taken;
- by attributes: the kernel decides per node (``self.supports_exact`` in its constructor);
- no: an exact-mode session with this operator fails with ExactModeUnavailable.
"""
from __future__ import annotations

import inspect
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from graphrt import dtypes  # noqa: E402
from graphrt.kernels.table import ALL  # noqa: E402

DOC = os.path.join(ROOT, "docs", "exact-mode.md")
START, END = "<!-- exact-status:start -->", "<!-- exact-status:end -->"


def status(factory) -> str:
    if isinstance(factory, type) and "self.supports_exact" in inspect.getsource(factory):
        return "by attributes"
    return "yes" if getattr(factory, "supports_exact", False) else "no"


def types(factory) -> str:
    """The element types the kernel class declares (ALLOWED), shortly; "" if it checks them
    itself."""
    allowed = getattr(factory, "ALLOWED", None)
    if not allowed:
        return ""
    allowed = set(allowed)
    parts = []
    for group, label in ((dtypes.SIGNED, "int*"), (dtypes.UNSIGNED, "uint*"),
                         (dtypes.BOOL, "bool")):
        if group <= allowed:
            parts.append(label)
            allowed -= group
    order = ("float16", "bfloat16", "float32", "float64")
    floats = [n for n in order if n in {t.name for t in allowed}]
    rest = sorted(t.name for t in allowed if t.name not in floats)
    return ", ".join(floats + rest + parts)


def rows() -> list[tuple]:
    out = []
    for d in ALL:
        opsets = f"{d.since}+" if d.until is None else f"{d.since}-{d.until}"
        out.append((d.op_type, d.domain or "ai.onnx", opsets, status(d.factory), types(d.factory)))
    return sorted(out, key=lambda r: (r[1] != "ai.onnx", r[1], r[0], r[2]))


def table() -> str:
    body = rows()
    counts = {s: sum(r[3] == s for r in body) for s in ("yes", "by attributes", "no")}
    lines = [f"{len(body)} table entries: {counts['yes']} exact, {counts['by attributes']} "
             f"exact for some attribute values, {counts['no']} not exact.", "",
             "| operator | domain | opsets | exact | element types (as the kernel declares) |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| {op} | {dom} | {ops} | {st} | {ty} |" for op, dom, ops, st, ty in body]
    return "\n".join(lines) + "\n"


def refreshed(doc: str) -> str:
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table()}{END}{tail}"


def main(argv) -> int:
    if "--write" in argv:
        with open(DOC) as f:
            doc = f.read()
        with open(DOC, "w") as f:
            f.write(refreshed(doc))
        return 0
    sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
