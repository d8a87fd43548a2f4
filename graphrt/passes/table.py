"""The ordered pass table, and running it (docs/contract.md section 6).

Passes run in this order; nodes nothing reads are removed after each; a pass that does not
preserve bits is skipped in exact mode; none depends on input shapes.
"""
from __future__ import annotations

from ..errors import ErrorKind, SessionError
from ..options import OptimizationLevel as L
from .basic import (collapse_reshapes, collapse_transposes, eliminate_identities, fold_constants,
                    pack_weights, sink_constant_nodes)
from .fusion import (fold_conv_batchnorm, fuse_epilogues, recognize_attention, recognize_gelu,
                     recognize_layernorm, recognize_swish)
from .graph import LEVELS, GraphPass, PassGraph
from .quantized import recognize_qdq

ALL: tuple[GraphPass, ...] = (
    # before fold_constants: the groups' weight dequantizations are still nodes there
    GraphPass("recognize_qdq", L.ALL, False, recognize_qdq),
    GraphPass("fold_constants", L.BASIC, True, fold_constants),
    GraphPass("eliminate_identities", L.BASIC, True, eliminate_identities),
    GraphPass("collapse_transposes", L.BASIC, True, collapse_transposes),
    GraphPass("collapse_reshapes", L.BASIC, True, collapse_reshapes),
    GraphPass("fold_conv_batchnorm", L.ALL, False, fold_conv_batchnorm),
    GraphPass("recognize_gelu", L.ALL, False, recognize_gelu),
    GraphPass("recognize_swish", L.ALL, False, recognize_swish),
    GraphPass("recognize_layernorm", L.ALL, False, recognize_layernorm),
    GraphPass("recognize_attention", L.ALL, False, recognize_attention),
    GraphPass("fuse_epilogues", L.ALL, True, fuse_epilogues),
    GraphPass("sink_constant_nodes", L.BASIC, True, sink_constant_nodes),
    # last: the nodes that read the weights are final (no pass looks at a taken constant)
    GraphPass("pack_weights", L.ALL, True, pack_weights),
)


def run_passes(graph, table, level: L, exact: bool, cancel=None, passes=ALL) -> dict[str, int]:
    """Run the selected passes over ``graph`` in place; returns rewrites per pass."""
    pg = PassGraph(graph, table, exact)
    done = {}
    for p in passes:
        if LEVELS[level] < LEVELS[p.min_level] or (exact and not p.preserves_bits):
            continue
        if cancel is not None and cancel.cancelled:
            raise SessionError(ErrorKind.CANCELLED, "cancelled while optimising the graph")
        done[p.name] = p.run(pg)
        pg.remove_unread()
    return done
