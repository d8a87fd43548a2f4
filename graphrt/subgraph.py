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

    def run(self, inputs, cancel=None, held=None) -> list[np.ndarray]:
        """``inputs``: the declared ones, then every captured value (those the body holds as
        constants are left out here). ``held``: from ``held()``, for the calls of one loop."""
        dropped = self.graph.dropped
        if len(inputs) != len(self.graph.inputs) + len(dropped):
            raise SessionError(ErrorKind.INVALID_MODEL,
                               f"a body takes {len(self.graph.inputs) + len(dropped)} inputs, "
                               f"got {len(inputs)}")
        if dropped:
            inputs = [x for i, x in enumerate(inputs) if i not in dropped]
        arrays = [x if x.flags.c_contiguous else x.copy() for x in map(np.asarray, inputs)]
        out_ids = self.graph.output_ids

        def deliver(plan, values):
            return [np.array(values[v], copy=True) for v in out_ids]
        if held is not None:
            return held.run(arrays, deliver, cancel)
        return self._plans.run(arrays, deliver, cancel=cancel)

    def held(self):
        """A context for the calls of one loop: the plan and run state stay taken while the
        inputs keep their types and shapes."""
        return self._plans.held()
