"""Constant and Shape: nodes whose output is a constant of the plan (never scheduled)."""
from __future__ import annotations

import math

import numpy as np

from ..core.base import InferContext, OpKernel

# attribute -> how its Python value becomes a tensor (float32 / int64 / string scalars
# and lists, as ONNX defines them)
_FORMS = {
    "value": np.asarray,
    "sparse_value": np.asarray,             # densified by the importer
    "value_float": lambda v: np.array(v, dtype=np.float32),
    "value_floats": lambda v: np.array(v, dtype=np.float32).reshape(-1),
    "value_int": lambda v: np.array(v, dtype=np.int64),
    "value_ints": lambda v: np.array(v, dtype=np.int64).reshape(-1),
    "value_string": lambda v: np.array(v, dtype=object),
    "value_strings": lambda v: np.array(list(v), dtype=object).reshape(-1),
}


class Constant(OpKernel):
    """y = the tensor given by exactly one of the value attributes.

    The kernel keeps one copy; every plan shares it. It stays writeable, like the
    importer's initializers: numba types a read-only array apart, so one read-only weight
    would compile a second copy of every kernel it reaches (the GEMM family alone: about
    25 s); kernels never write their inputs."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        given = [k for k in _FORMS if node.attrs.get(k) is not None]
        if len(given) != 1:
            node.fail("exactly one value attribute is required, got "
                      + (", ".join(given) if given else "none"))
        self.value = np.array(_FORMS[given[0]](node.attrs[given[0]]), copy=True, order="C")
        self.fixed_output = self.value

    def infer(self, ctx: InferContext) -> None:
        ctx.set_constant_output(0, self.value)
        if self.value.ndim == 0:
            # set_constant_output's np.ascontiguousarray makes a 0-d value 1-d: keep the scalar
            ctx.constants[0] = self.value
            ctx.set_output(0, self.value.dtype, ())


class Shape(OpKernel):
    """y = the input's extents as int64, from ``start`` to ``end`` (opset 15+; negative
    values count from the end, both clamped to [0, rank], an empty slice when end <= start)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        sliced = node.opset >= 15
        self.start = int(node.attr("start", 0)) if sliced else 0
        end = node.attr("end") if sliced else None
        self.end = None if end is None else int(end)

    def infer(self, ctx: InferContext) -> None:
        # Python slicing clamps exactly as ONNX specifies.
        dims = list(ctx.shape(0))[self.start:self.end]
        ctx.set_constant_output(0, np.array(dims, dtype=np.int64).reshape(-1))


class Size(OpKernel):
    """y = the input's element count as an int64 scalar (a constant of the plan)."""

    supports_exact = True

    def infer(self, ctx: InferContext) -> None:
        ctx.set_constant_output(0, np.array(math.prod(ctx.shape(0)), np.int64))
