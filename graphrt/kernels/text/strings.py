"""String operators: StringConcat, StringSplit, StringNormalizer, RegexFullMatch.

Strings are numpy object arrays of Python ``str`` (the importer decodes UTF-8), so these
kernels are plain Python/numpy: numba cannot hold them. No arithmetic is involved: all
are exact.

- StringConcat: z = x + y element-wise, numpy broadcasting.
- StringSplit: each element split on ``delimiter`` (Python's ``str.split``: consecutive
  delimiters delimit empty strings; with no or an empty delimiter, runs of whitespace
  separate and leading/trailing whitespace is dropped) at most ``maxsplit`` times. y has
  one more axis, as long as the longest split, padded with ""; z counts the substrings.
- StringNormalizer: on [C] or [1, C]: drops the elements equal to a stop word (compared
  case-insensitively unless ``is_case_sensitive``), then lower- or upper-cases the rest.
  No element left: [""] (shape [1] or [1, 1]).
- RegexFullMatch: y = whether the whole element matches ``pattern``.
"""
from __future__ import annotations

import re

import numpy as np

from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext
from ..core.broadcast import broadcast_shape

STRING = np.dtype(object)
_STRINGS = frozenset({STRING})
_CASE = {"NONE": None, "LOWER": str.lower, "UPPER": str.upper}
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _check_strings(ctx: InferContext, *idx) -> None:
    for i in idx:
        ctx.check_dtype(i, _STRINGS)


class StringConcat(OpKernel):
    """z = x + y (string concatenation), broadcast."""

    supports_exact = True

    def infer(self, ctx: InferContext) -> None:
        _check_strings(ctx, 0, 1)
        ctx.set_output(0, STRING, broadcast_shape([ctx.shape(0), ctx.shape(1)], ctx.fail))

    def run(self, ctx: RunContext) -> None:
        np.add(ctx.inputs[0], ctx.inputs[1], out=ctx.outputs[0])


class StringSplit(OpKernel):
    """y[..., k] = the k-th substring of x[...] ("" past its end), z[...] = their count."""

    supports_exact = True
    outputs_data_dependent = True

    def __init__(self, node):
        super().__init__(node)
        self.sep = node.attr("delimiter") or None
        maxsplit = node.attr("maxsplit")
        if maxsplit is not None and int(maxsplit) < 0:
            node.fail(f"maxsplit must be >= 0, got {maxsplit}")
        self.maxsplit = -1 if maxsplit is None else int(maxsplit)

    def run(self, ctx: RunContext) -> None:
        x = ctx.inputs[0]
        if x.dtype != STRING:
            self.node.fail("input 0 must be a string tensor", ErrorKind.UNSUPPORTED)
        parts = [s.split(self.sep, self.maxsplit) for s in x.reshape(-1)]
        width = max(map(len, parts), default=0)
        y = ctx.allocate_output(0, STRING, x.shape + (width,))
        rows = y.reshape(x.size, width)
        rows.fill("")
        for row, p in zip(rows, parts):
            row[:len(p)] = p
        if self.node.n_outputs > 1:
            ctx.allocate_output(1, np.int64, x.shape).reshape(-1)[:] = [len(p) for p in parts]


class StringNormalizer(OpKernel):
    """Stop-word removal, then case change, on a [C] or [1, C] string tensor.

    The case mappings do not depend on the locales installed on the machine: for
    ``locale`` "C" or "POSIX" only the ASCII letters change case (as C's tolower does);
    for any other locale, Unicode's default mappings apply (Python's ``str.lower`` /
    ``str.upper``, which are en_US's)."""

    supports_exact = True
    outputs_data_dependent = True

    def __init__(self, node):
        super().__init__(node)
        self.change = node.choice("case_change_action", _CASE, "NONE")
        action = node.attr("case_change_action", "NONE")
        if self.change is not None and node.attr("locale") in ("C", "POSIX"):
            table = _ASCII_LOWER if action == "LOWER" else _ASCII_UPPER
            self.change = lambda s: s.translate(table)
        self.sensitive = int(node.attr("is_case_sensitive", 0)) != 0
        words = node.attr("stopwords") or []
        self.stops = frozenset(words if self.sensitive else (w.lower() for w in words))

    def run(self, ctx: RunContext) -> None:
        x = ctx.inputs[0]
        if x.dtype != STRING:
            self.node.fail("input 0 must be a string tensor", ErrorKind.UNSUPPORTED)
        if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
            self.node.fail(f"the input must have shape [C] or [1, C], got {list(x.shape)}",
                           ErrorKind.INVALID_INPUT)
        key = (lambda s: s) if self.sensitive else str.lower
        kept = [s for s in x.reshape(-1) if key(s) not in self.stops] if self.stops \
            else list(x.reshape(-1))
        if self.change is not None:
            kept = [self.change(s) for s in kept]
        kept = kept or [""]
        shape = (len(kept),) if x.ndim == 1 else (1, len(kept))
        ctx.allocate_output(0, STRING, shape).reshape(-1)[:] = kept


class RegexFullMatch(OpKernel):
    """y = ``pattern`` matches all of x, element-wise.

    The pattern is RE2 syntax; it is compiled by Python's ``re`` in ASCII mode, as RE2's
    \\w, \\d, \\s and \\b are ASCII classes. Patterns using RE2 syntax that ``re`` lacks
    (\\pL, \\z, ...) are refused."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        pattern = node.attr("pattern")
        if pattern is None:
            node.fail("the pattern attribute is required")
        try:
            self.regex = re.compile(pattern, re.ASCII)
        except re.error as e:
            node.fail(f"pattern {pattern!r} is not valid RE2 syntax or uses RE2 syntax that "
                      f"Python's re lacks: {e}", ErrorKind.UNSUPPORTED)

    def infer(self, ctx: InferContext) -> None:
        _check_strings(ctx, 0)
        ctx.set_output(0, np.bool_, ctx.shape(0))

    def run(self, ctx: RunContext) -> None:
        match = self.regex.fullmatch
        flat = ctx.flat_in[0]
        ctx.flat_out[0][:] = np.fromiter((match(s) is not None for s in flat), np.bool_,
                                         count=flat.size)
