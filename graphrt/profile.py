"""Per-node timings of runs: a table and a Chrome/Perfetto trace.

    prof = graphrt.Profile()
    sess.run(None, feeds, profile=prof)
    print(prof.table())
    prof.save_trace("trace.json")        # open in ui.perfetto.dev or chrome://tracing
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class StepTime:
    run: int
    op_type: str
    node: str
    input_shapes: tuple
    output_shapes: tuple
    start: float        # perf_counter seconds
    seconds: float
    output_bytes: int
    dynamic: bool


class Profile:
    """Collects the steps of every run it is passed to (thread-safe)."""

    def __init__(self):
        self.steps: list[StepTime] = []
        self._runs = 0
        self._lock = threading.Lock()

    def begin(self, plan) -> list:
        """A list for one run's (step, start, end) triples; folded in when the run ends."""
        return _RunSink(self, plan)

    def _add(self, plan, triples, values) -> None:
        with self._lock:
            run = self._runs
            self._runs += 1
            for i, t0, t1 in triples:
                st = plan.steps[i]
                ins = tuple(_shape(values, v) for v in st.node.inputs[:st.node.info.n_inputs])
                outs = tuple(_shape(values, v) for v in st.node.outputs)
                nbytes = sum(values[v].nbytes for v in st.node.outputs
                             if v >= 0 and values[v] is not None)
                self.steps.append(StepTime(run, st.node.info.op_type, st.node.info.name, ins, outs,
                                           t0, t1 - t0, nbytes, st.dynamic))

    def by_operator(self) -> list[tuple[str, int, float]]:
        """(op type, calls, total seconds), slowest first."""
        agg: dict[str, list] = {}
        for s in self.steps:
            a = agg.setdefault(s.op_type, [0, 0.0])
            a[0] += 1
            a[1] += s.seconds
        return sorted(((k, n, t) for k, (n, t) in agg.items()), key=lambda r: -r[2])

    def table(self, limit: int = 30) -> str:
        rows = sorted(self.steps, key=lambda s: -s.seconds)[:limit]
        lines = [f"{'op':<18}{'node':<28}{'out shape':<22}{'ms':>9}{'bytes':>12}"]
        for s in rows:
            shape = "x".join(map(str, s.output_shapes[0])) if s.output_shapes and s.output_shapes[0] else "?"
            lines.append(f"{s.op_type:<18}{s.node[:27]:<28}{shape[:21]:<22}{s.seconds * 1e3:>9.3f}"
                         f"{s.output_bytes:>12}")
        total = sum(s.seconds for s in self.steps)
        lines.append(f"{len(self.steps)} steps over {self._runs} run(s), {total * 1e3:.3f} ms in kernels")
        return "\n".join(lines)

    def trace_events(self) -> list[dict]:
        t0 = min((s.start for s in self.steps), default=0.0)
        return [{"name": s.op_type, "cat": "dynamic" if s.dynamic else "static", "ph": "X",
                 "ts": (s.start - t0) * 1e6, "dur": s.seconds * 1e6, "pid": 0, "tid": s.run,
                 "args": {"node": s.node, "inputs": [list(x) if x else None for x in s.input_shapes],
                          "outputs": [list(x) if x else None for x in s.output_shapes],
                          "bytes": s.output_bytes}}
                for s in self.steps]

    def save_trace(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump({"traceEvents": self.trace_events(), "displayTimeUnit": "ms"}, f)


class _RunSink(list):
    """The timings list of one run; it hands itself to the profile when the run is done."""

    def __init__(self, profile: Profile, plan):
        super().__init__()
        self._profile = profile
        self._plan = plan

    def close(self, values) -> None:
        self._profile._add(self._plan, self, values)


def _shape(values, v):
    return None if v < 0 or values[v] is None else tuple(values[v].shape)
