"""The exact-mode status of every operator in graphrt's operator table, as a markdown table;
and the coverage of the com.microsoft operators onnxruntime's tools write.

    python examples/exact_status.py            # print the tables
    python examples/exact_status.py --write    # refresh them in docs/exact-mode.md and
                                               # docs/contrib-ops.md

The status comes from the kernels' own ``supports_exact`` flags (tests/test_exact_properties.py
checks that the copy in docs/exact-mode.md is current):
- yes: the exact variant follows docs/exact-mode.md's rules for every element type taken;
- by attributes: the kernel decides per node (``self.supports_exact`` in its constructor);
- no: an exact-mode session with this operator fails with ExactModeUnavailable.
A composition (a Lowered class, graphrt/kernels/core/lowering.py) is exact where the
standard operators it expands into are, and takes the element types they take.
"""
from __future__ import annotations

import inspect
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from graphrt import dtypes  # noqa: E402
from graphrt.kernels.core.lowering import Lowered  # noqa: E402
from graphrt.kernels.table import ALL  # noqa: E402

DOC = os.path.join(ROOT, "docs", "exact-mode.md")
START, END = "<!-- exact-status:start -->", "<!-- exact-status:end -->"
CONTRIB_DOC = os.path.join(ROOT, "docs", "contrib-ops.md")
CONTRIB_START, CONTRIB_END = "<!-- contrib-status:start -->", "<!-- contrib-status:end -->"

CONTRIB = "graphrt.kernels.contrib."
# the com.microsoft operators that onnxruntime's quantizer and transformer optimizer write
# (issue 17's list), whether graphrt has them or not
WRITTEN_BY_ONNXRUNTIME = (
    "Attention", "BiasGelu", "BiasSoftmax", "DynamicQuantizeLSTM", "DynamicQuantizeMatMul",
    "EmbedLayerNormalization", "FastGelu", "FusedConv", "FusedMatMul", "Gelu",
    "GroupQueryAttention", "MatMulIntegerToFloat", "MatMulNBits", "MultiHeadAttention",
    "QAttention", "QGemm", "QLinearAdd", "QLinearAveragePool", "QLinearConcat",
    "QLinearGlobalAveragePool", "QLinearLeakyRelu", "QLinearMul", "QLinearSigmoid",
    "QLinearSoftmax", "QuickGelu", "RotaryEmbedding", "SimplifiedLayerNormalization",
    "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "Tokenizer")


def status(factory) -> str:
    if isinstance(factory, type) and "self.supports_exact" in inspect.getsource(factory):
        return "by attributes"
    return "yes" if getattr(factory, "supports_exact", False) else "no"


def is_composition(factory) -> bool:
    return isinstance(factory, type) and issubclass(factory, Lowered)


def types(factory) -> str:
    """The element types the kernel class declares (ALLOWED), shortly; "" if it checks them
    itself."""
    if is_composition(factory):
        return "those of its expansion"
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
        out.append((d.op_type, d.domain or "ai.onnx", opsets, status(d.resolve()), types(d.resolve())))
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


def contrib_table() -> str:
    """One row per com.microsoft operator of WRITTEN_BY_ONNXRUNTIME: the table lines of that
    domain and of graphrt/kernels/contrib (SimplifiedLayerNormalization is there, in the
    default domain, where onnxruntime registers it)."""
    found = {}
    for d in ALL:
        if d.domain == "com.microsoft" or d.resolve().__module__.startswith(CONTRIB):
            found[d.op_type] = d
    lines = ["| operator | graphrt | exact |", "| --- | --- | --- |"]
    have = 0
    for op in WRITTEN_BY_ONNXRUNTIME:
        d = found.get(op)
        if d is None:
            lines.append(f"| {op} | not yet | |")
            continue
        have += 1
        how = (f"composition ({d.resolve().__module__.rsplit('.', 1)[-1]})"
               if is_composition(d.resolve()) else "kernel")
        lines.append(f"| {op} | {how} | {status(d.resolve())} |")
    head = f"{have} of the {len(WRITTEN_BY_ONNXRUNTIME)} operators.\n\n"
    return head + "\n".join(lines) + "\n"


def refreshed(doc: str, start=START, end=END, make=table) -> str:
    head, rest = doc.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{make()}{end}{tail}"


def refreshed_contrib(doc: str) -> str:
    return refreshed(doc, CONTRIB_START, CONTRIB_END, contrib_table)


def main(argv) -> int:
    if "--write" in argv:
        for path, fresh in ((DOC, refreshed), (CONTRIB_DOC, refreshed_contrib)):
            with open(path) as f:
                doc = f.read()
            with open(path, "w") as f:
                f.write(fresh(doc))
        return 0
    sys.stdout.write(table() + "\n" + contrib_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
