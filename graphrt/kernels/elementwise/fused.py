"""A node made of a primary kernel and element-wise epilogue kernels (graph passes build it).

out = e_k(... e_1(primary(inputs...), extra_1...) ..., extra_k...)

Each stage is the very kernel the model's own node would have used, run in the same order,
so the fused node gives the same bits as the nodes it replaces. Results go straight into the
node's output wherever dtype and shape allow (the primary, then each element-wise stage in
place, as the planner would have placed the unfused nodes); the rest live in the run's arena.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.base import InferContext, NodeInfo, OpKernel, RunContext
from .activations import Relu


@dataclass(frozen=True)
class Stage:
    kernel: OpKernel
    chained: int                # position of the previous result among the stage's inputs
    extra: tuple[int, ...]      # fused-node input index for each other stage input, in order


class FusedEpilogue(OpKernel):
    def __init__(self, node: NodeInfo, primary: OpKernel, n_primary_inputs: int, stages: list[Stage]):
        super().__init__(node)
        self.primary = primary
        self.n_primary = n_primary_inputs
        self.stages = tuple(stages)
        self.supports_exact = primary.supports_exact and all(s.kernel.supports_exact for s in stages)

    def describe(self) -> str:
        return "+".join([self.primary.node.op_type] + [s.kernel.node.op_type for s in self.stages])

    def take_constant(self, i: int, value, name: str, exact: bool) -> bool:
        """The primary's inputs come first: it may take one of those."""
        return i < self.n_primary and self.primary.take_constant(i, value, name, exact)

    def taken_constants(self) -> dict:
        return self.primary.taken_constants()

    def _stage_inputs(self, stage: Stage, prev, values):
        ins = [values[i] for i in stage.extra]
        ins.insert(stage.chained, prev)
        return ins

    def infer(self, ctx: InferContext) -> None:
        n = ctx.n_inputs
        dts = [ctx.dtype(i) if ctx.has_input(i) else None for i in range(n)]
        shs = [ctx.shape(i) if ctx.has_input(i) else None for i in range(n)]
        vals = [ctx.value(i) for i in range(n)]
        p = InferContext(self.primary.node, ctx.exact, dts[:self.n_primary], shs[:self.n_primary],
                         vals[:self.n_primary], 1)
        self.primary.infer(p)
        if p.needs_values:
            ctx.require_run_time_values()
            return
        facts = [(p.out_dtypes[0], p.out_shapes[0], p.prepared)]
        absorbed = 0
        # Fast mode: leading per-channel scale-and-shift stages (BatchNormalization, Mul,
        # Add, Sub, Div by constants) the primary folds into its own last pass: rounded
        # differently, so never in exact mode.
        while not ctx.exact and absorbed < len(self.stages):
            st = self.stages[absorbed]
            if not self.primary.absorb_affine(p.prepared, st.kernel, st.chained,
                                              [vals[i] for i in st.extra], p.out_shapes[0]):
                break
            absorbed += 1
            facts.append(facts[0])
        # A Relu stage next that the primary can apply itself (in its tiles or its bias
        # pass, with Relu's own scalar function) is left out of the stages run below too.
        if absorbed < len(self.stages) and isinstance(self.stages[absorbed].kernel, Relu) and \
                p.out_dtypes[0].kind == "f" and \
                self.primary.absorb_relu(p.prepared):
            absorbed += 1
            facts.append(facts[0])
        for st in self.stages[absorbed:]:
            prev = facts[-1]
            sc = InferContext(st.kernel.node, ctx.exact, self._stage_inputs(st, prev[0], dts),
                              self._stage_inputs(st, prev[1], shs), self._stage_inputs(st, None, vals), 1)
            st.kernel.infer(sc)
            if sc.needs_values:
                ctx.require_run_time_values()
                return
            facts.append((sc.out_dtypes[0], sc.out_shapes[0], sc.prepared))
        ctx.set_output(0, facts[-1][0], facts[-1][1])
        ctx.prepared = (facts, absorbed)

    def _passes(self, ctx: RunContext, arena: bool):
        """[(kernel, its RunContext), ...] in order, and whether the final output must be
        copied from the primary's buffer after them; None when a pass needs a buffer of
        the run's arena and ``arena`` is False."""
        facts, absorbed = ctx.prepared
        last = len(self.stages)
        final = ctx.outputs[0]

        def fits(dt, shape):
            return dt == final.dtype and tuple(shape) == final.shape

        def buffer(dt, shape):
            return ctx.arena.take(dt, shape, self.node.name) if arena else None

        # The output never shares memory with an input (this kernel is not in-place), so
        # the primary may write it, and each element-wise stage may overwrite its chained
        # input where their dtypes and shapes agree (no broadcast of that input).
        buf = final if fits(facts[0][0], facts[0][1]) else buffer(facts[0][0], facts[0][1])
        if buf is None:
            return None
        passes = [(self.primary, RunContext(self.primary.node, ctx.inputs[:self.n_primary],
                                            [buf], facts[0][2], ctx.exact, ctx.arena,
                                            ctx.cancel, ctx.held))]
        for k, st in enumerate(self.stages[absorbed:], 1 + absorbed):
            dt, shape, prepared = facts[k]
            if k == last or (buf is final and fits(dt, shape)):
                out = final
            else:
                out = buffer(dt, shape)
                if out is None:
                    return None
            passes.append((st.kernel, RunContext(st.kernel.node,
                                                 self._stage_inputs(st, buf, ctx.inputs), [out],
                                                 prepared, ctx.exact, ctx.arena, ctx.cancel,
                                                 ctx.held)))
            buf = out
        return passes, buf is not final

    def jit_calls(self, ctx: RunContext):
        """Every pass's calls, where all write the node's output in place."""
        got = self._passes(ctx, arena=False)
        if got is None or got[1]:
            return None
        calls = []
        for kernel, pctx in got[0]:
            more = kernel.jit_calls(pctx)
            if more is None:
                return None
            calls += more
        return calls

    def run(self, ctx: RunContext) -> None:
        passes, copy = self._passes(ctx, arena=True)
        for kernel, pctx in passes:
            kernel.run(pctx)
        if copy:
            ctx.outputs[0][...] = pctx.outputs[0]
