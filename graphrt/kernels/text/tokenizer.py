"""com.microsoft.Tokenizer: strings into tokens, as onnxruntime's contrib operator defines it.

x [C] or [N, C] strings -> y = x's shape + [T]: each string's tokens, optionally between the
marks "\\x02" and "\\x03" (``mark`` = 1), then ``pad_value`` up to T, the largest cell; when no
string has a token, T = 0 and there are no marks. Tokens are either

- the pieces left by splitting on each of ``separators`` in turn (regular expressions;
  ``[""]`` splits into characters), or
- the successive matches of ``tokenexp`` ("." gives characters),

keeping only those of at least ``mincharnum`` characters. The expressions are RE2 syntax
compiled by Python's ``re``, which picks the first alternative that matches where RE2's
longest-match mode picks the longest (the same for separators without alternatives).
"""
from __future__ import annotations

import re

import numpy as np

from ...errors import ErrorKind
from ..core.base import OpKernel, RunContext

STRING = np.dtype(object)
START, END = "\x02", "\x03"


class Tokenizer(OpKernel):
    supports_exact = True
    outputs_data_dependent = True

    def __init__(self, node):
        super().__init__(node)
        for name in ("mark", "pad_value", "mincharnum"):
            if node.attr(name) is None:
                node.fail(f"attribute {name} is required")
        self.mark = int(node.attr("mark")) != 0
        self.pad = node.attr("pad_value")
        self.min = int(node.attr("mincharnum"))
        if self.min < 1:
            node.fail(f"mincharnum must be > 0, got {self.min}")
        seps, exp = node.attr("separators"), node.attr("tokenexp")
        if (seps is not None and len(seps) > 0) == (exp is not None):
            node.fail("exactly one of separators and tokenexp is required")
        self.chars = (exp == ".") if exp is not None else list(seps) == [""]
        if self.chars and self.min > 1:
            node.fail("character tokens need mincharnum 1")
        try:
            self.seps = None if exp is not None else [re.compile(p) for p in seps]
            self.exp = re.compile(exp) if exp is not None and not self.chars else None
        except re.error as e:
            node.fail(f"a pattern is not valid or uses RE2 syntax that Python's re lacks: {e}",
                      ErrorKind.UNSUPPORTED)

    def tokens(self, s: str) -> list[str]:
        if self.chars:
            return list(s)
        if self.exp is not None:
            return [m.group() for m in self.exp.finditer(s) if len(m.group()) >= self.min]
        pieces = [s]
        for sep in self.seps:
            pieces = [p for piece in pieces for p in sep.split(piece) if len(p) >= self.min]
        return pieces

    def run(self, ctx: RunContext) -> None:
        x = ctx.inputs[0]
        if x.dtype != STRING:
            self.node.fail("input 0 must be a string tensor", ErrorKind.INVALID_INPUT)
        if x.ndim not in (1, 2):
            self.node.fail(f"the input must have shape [C] or [N, C], got {list(x.shape)}",
                           ErrorKind.INVALID_INPUT)
        cells = [self.tokens(s) for s in x.reshape(-1).tolist()]
        width = max((len(c) for c in cells), default=0)
        if width and self.mark:
            cells = [[START, *c, END] for c in cells]
            width += 2
        out = ctx.allocate_output(0, STRING, x.shape + (width,)).reshape(-1, width) \
            if width else ctx.allocate_output(0, STRING, x.shape + (0,))
        if width:
            for row, cell in zip(out, cells):
                row[:len(cell)] = cell
                row[len(cell):] = self.pad
