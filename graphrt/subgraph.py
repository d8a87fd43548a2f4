"""Bodies of subgraph operators: a nested compiled graph with its own plan cache.

A body runs like a session without names: inputs in order (declared body inputs, then the
captured outer values), outputs in order. Each call makes or reuses a plan for the inputs'
types and shapes and borrows a run state from it; outputs are copied out, since the state
goes back to the pool.
"""
from __future__ import annotations

import numpy as np

from .errors import ErrorKind, SessionError
from .graph import CompiledGraph
from .plan.build import checked_mode
from .plan.cache import PlanCache

BODY_PLANS = 16


class Body:
    def __init__(self, graph: CompiledGraph):
        self.graph = graph
        self._plans = PlanCache(graph, BODY_PLANS, checked_mode())

    @property
    def output_infos(self):
        return self.graph.outputs

    @property
    def input_infos(self):
        return self.graph.inputs

    def run(self, inputs, cancel=None) -> list[np.ndarray]:
        if len(inputs) != len(self.graph.inputs):
            raise SessionError(ErrorKind.INVALID_MODEL,
                               f"a body takes {len(self.graph.inputs)} inputs, got {len(inputs)}")
        arrays = [x if x.flags.c_contiguous else x.copy() for x in map(np.asarray, inputs)]
        out_ids = self.graph.output_ids
        return self._plans.run(arrays, lambda plan, values: [
            np.array(values[v], copy=True) for v in out_ids], cancel=cancel)
