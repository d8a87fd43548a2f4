"""Custom operators written in Python, for a session of your own (graphrt's table is untouched).

An operator is an :class:`OpKernel` subclass (``infer`` states the output types and shapes,
``run`` computes into the buffers it is given, flags say what it allows) and one
:class:`OpDef` line naming its domain, type and opsets::

    import numpy as np
    from numba import njit
    import graphrt

    @njit(cache=True, nogil=True)
    def _swish(x, beta, out):
        for i in range(x.size):
            out[i] = x[i] / (1.0 + np.exp(-beta * x[i]))

    class Swish2(graphrt.OpKernel):
        in_place_input = True                      # out may share x's memory
        def __init__(self, node):
            super().__init__(node)
            self.beta = float(node.attr("beta", 1.0))
        def infer(self, ctx):
            dt = ctx.check_dtype(0, {np.dtype(np.float32), np.dtype(np.float64)})
            ctx.set_output(0, dt, ctx.shape(0))
        def run(self, ctx):
            _swish(ctx.flat_in[0], ctx.flat_in[0].dtype.type(self.beta), ctx.flat_out[0])

    ops = graphrt.custom_operators(graphrt.OpDef("com.example", "Swish2", 1, None, Swish2))
    sess = graphrt.Session("model.onnx", operators=ops)

Flags (class attributes of OpKernel): ``supports_exact`` (the kernel follows the exact-mode
rules: without it an exact-mode session refuses the model), ``in_place_input``,
``view_of_input``, ``outputs_data_dependent``, ``constant_foldable``. Kernels see 1-D views
(``ctx.flat_in`` / ``ctx.flat_out``) whatever the rank.

Pickling: a Session pickles as (model bytes, options, custom table); kernel classes travel
by reference, so their module must be importable where the session is unpickled.
"""
from __future__ import annotations

from .kernels.core.base import InferContext, NodeInfo, OpDef, OpKernel, RunContext
from .kernels.table import DEFAULT, OperatorTable

__all__ = ["custom_operators", "OpDef", "OpKernel", "NodeInfo", "InferContext", "RunContext",
           "OperatorTable"]


def custom_operators(*defs: OpDef, base: OperatorTable = DEFAULT) -> OperatorTable:
    """graphrt's operators (or ``base``'s) plus ``defs``, as a new table for
    ``Session(src, options, operators=table)``. A def for an existing (domain, type) is
    tried after the built-in ones for the same opsets."""
    for d in defs:
        if not isinstance(d, OpDef):
            raise TypeError(f"custom_operators takes OpDef lines, got {type(d).__name__}")
    return base.extended(defs)
