"""Subgraph operators: If, Loop, Scan, SequenceMap (docs/contract.md section 8).

Each body is compiled once, when the kernel is made, through ``node.compile_body``; a run
calls ``body.run(inputs, cancel)`` with the body's declared inputs followed by the outer
values the node captured (``ctx.inputs[node.n_inputs:]``). Outputs are data-dependent.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt, packed
from ...errors import ErrorKind, SessionError
from ..core.base import InferContext, OpKernel, RunContext
from ..core.trampolines import addressable, copy_words, record
from ..core.held import held_buffer
from .drivers import run_branch, run_loop


class _BodyKernel(OpKernel):
    supports_exact = True           # runs nothing itself; bodies are compiled in the same mode
    outputs_data_dependent = True
    constant_foldable = False

    def _body(self, key: str):
        g = self.node.attr(key)
        if g is None:
            self.node.fail(f"attribute {key!r} (a graph) is required")
        return self.node.compile_body(g)

    def _check_cancel(self, ctx: RunContext):
        if ctx.cancel is not None and ctx.cancel.cancelled:
            raise SessionError(ErrorKind.CANCELLED, "the run was cancelled", self.node.name)

    @staticmethod
    def _captured(ctx: RunContext) -> list:
        return list(ctx.inputs[ctx.node.n_inputs:])


def _copyable(dst, src) -> bool:
    """Whether a copy of ``src`` into ``dst`` can be made by address: both addressable
    arrays of one type and size."""
    return isinstance(src, np.ndarray) and isinstance(dst, np.ndarray) and \
        addressable(src) and addressable(dst) and src.dtype == dst.dtype and \
        src.nbytes == dst.nbytes


def _slots(held: dict, key, n: int) -> np.ndarray:
    """``n`` int64 words the run state keeps under ``key``, zeros when first asked for."""
    words = held.get(key)
    if words is None:
        words = held[key] = np.zeros(n, np.int64)
    return words


def _held(ctx: RunContext, use: str, dtype, value) -> np.ndarray:
    """A one-element array of ``value`` the run state keeps (an absent input's stand-in)."""
    a = held_buffer(dtype, (1,), ctx.held, f"loop {use}")
    a[0] = value
    return a


def _loop_record(arrays, lists) -> np.ndarray:
    """drivers.run_loop's record: the addresses of ``arrays`` (the body's record, its index,
    condition-in and condition-out values; 0 for None), then each list of (dst, src)
    copies."""
    words = [0 if a is None else a.ctypes.data for a in arrays]
    for pairs in lists:
        words += copy_words(pairs)
    return np.array(words, dtype=np.int64)


def _scalar(ctx: RunContext, i: int, what: str):
    v = ctx.inputs[i]
    if v is None or v.size != 1:
        ctx.node.fail(f"{what} must hold one element", ErrorKind.INVALID_INPUT)
    return v.reshape(-1)[0]


def _empty_of(info, shape=(0,)):
    dt = info.dtype if info.dtype is not None else (_dt.to_numpy(info.elem_code) if info.elem_code
                                                    else np.dtype(np.float32))
    return np.empty(shape, dt)


class If(_BodyKernel):
    """Runs then_branch when cond is true, else else_branch; outputs are the branch's. Where
    both branches give outputs of one planned type and shape for the plan's captured inputs,
    the step is static: its outputs live in the plan's slab and the branch writes them
    there. Else they are known only when the branch has run.

    A static If's call is the compiled driver drivers.run_branch, which runs a branch's
    record once the branch has run here and proved to be compiled calls only; until then
    (and whenever the driver cannot) the call traps and ``run`` runs the branch, then arms
    its record."""

    outputs_data_dependent = False
    traps = True

    def __init__(self, node):
        super().__init__(node)
        self.branches = (self._body("else_branch"), self._body("then_branch"))

    def infer(self, ctx: InferContext) -> None:
        outs = None
        if ctx.planning:        # (at run time, captured inputs may be packed values)
            n = self.node.n_inputs
            types = [(ctx.dtype(i), ctx.shape(i)) for i in range(n, ctx.n_inputs)]
            outs = [b.planned_outputs(types) for b in self.branches]
        if outs is None or outs[0] is None or outs[0] != outs[1] or \
                len(outs[0]) != self.node.n_outputs:
            ctx.outputs_known_at_run()
            return
        for i, (dt, shape) in enumerate(outs[0]):
            ctx.set_output(i, dt, shape)
        ctx.prepared = True

    def jit_calls(self, ctx: RunContext):
        cond = ctx.flat_in[0]
        if not ctx.prepared or ctx.held is None or ctx.flag is None or \
                cond.dtype != np.bool_ or cond.size != 1:
            return None
        return [(run_branch, (cond, self._records(ctx.held), ctx.flag))]

    def _records(self, held: dict) -> np.ndarray:
        """The addresses of the else and then branches' records in this run state (0: not
        armed)."""
        return _slots(held, (self, "records"), 2)

    def _arm(self, ctx: RunContext, b: int) -> None:
        """Arm branch b's record, when its run in this state is compiled calls only and
        every value it copies is addressable."""
        records = self._records(ctx.held)
        body = self.branches[b]
        run = None if records[b] else body.compiled_run(ctx.held)
        if run is None:
            return
        plan, state, block = run
        captured = self._captured(ctx)
        ins = body.input_buffers(plan, state, len(captured))
        outs = body.output_values(plan, state)
        if ins is None or outs is None:
            return
        into = [(buf, x) for buf, x in zip(ins, captured) if buf is not None]
        out = list(zip(ctx.outputs, outs))
        if not all(_copyable(d, s) for d, s in into + out):
            return
        rec = ctx.held[(self, "record", b)] = record(block, into, out)
        records[b] = rec.ctypes.data

    def run(self, ctx: RunContext) -> None:
        b = int(bool(_scalar(ctx, 0, "cond")))
        body = self.branches[b]
        if ctx.prepared:
            body.run_into(self._captured(ctx), ctx.outputs, ctx.cancel, ctx.held)
            if ctx.held is not None:
                self._arm(ctx, b)
            return
        outs = body.run(self._captured(ctx), ctx.cancel)
        if len(outs) != len(ctx.outputs):
            self.node.fail(f"the branch gives {len(outs)} outputs, the node has {len(ctx.outputs)}")
        for i, o in enumerate(outs):
            ctx.set_output_value(i, o)


class Loop(_BodyKernel):
    """for i in range(M) while cond: (cond, carried..., scans...) = body(i, cond, carried...).
    Outputs: the final carried values, then each scan output stacked on a new first axis
    (an empty [0] tensor of the declared type when no iteration ran)."""

    outputs_data_dependent = False      # (infer says when they are: scan outputs, ...)
    traps = True

    def __init__(self, node):
        super().__init__(node)
        self.body = self._body("body")
        n_carried = node.n_inputs - 2
        if n_carried < 0 or len(self.body.output_infos) < 1 + n_carried:
            node.fail("the body's inputs and outputs do not match the node's")
        self.n_carried = n_carried

    def infer(self, ctx: InferContext) -> None:
        """Static (outputs in the plan's slab) when the body has no scan outputs and, planned
        for the node's inputs, gives each carried value its input's type and shape back."""
        nc = self.n_carried
        outs = None
        if ctx.planning and len(self.body.output_infos) == 1 + nc and \
                all(ctx.has_input(i) for i in range(2, ctx.n_inputs)):
            types = [(np.dtype(np.int64), ()), (np.dtype(np.bool_), ())] + \
                [(ctx.dtype(i), ctx.shape(i)) for i in range(2, ctx.n_inputs)]
            outs = self.body.planned_outputs(types)
        if outs is None or outs[1:] != types[2:2 + nc] or outs[0][0] != np.bool_ or \
                int(np.prod(outs[0][1])) != 1:
            ctx.outputs_known_at_run()
            return
        for k, (dt, shape) in enumerate(outs[1:]):
            ctx.set_output(k, dt, shape)
        ctx.prepared = True

    def jit_calls(self, ctx: RunContext):
        """The driver run_loop on the loop's record (armed by ``run``, see _arm)."""
        if not ctx.prepared or ctx.held is None or ctx.flag is None:
            return None
        trips = ctx.flat_in[0] if ctx.inputs[0] is not None else _held(ctx, "trips", np.int64,
                                                                      np.iinfo(np.int64).max)
        cond = ctx.flat_in[1] if ctx.inputs[1] is not None else _held(ctx, "cond", np.bool_,
                                                                     True)
        if trips.dtype != np.int64 or trips.size != 1 or cond.dtype != np.bool_ or \
                cond.size != 1:
            return None
        return [(run_loop, (trips, cond, self._armed(ctx.held), ctx.flag))]

    def _armed(self, held: dict) -> np.ndarray:
        """[the address of the loop's record in this run state, or 0]."""
        return _slots(held, (self, "armed"), 1)

    def _arm(self, ctx: RunContext) -> None:
        """Make the loop's record (drivers.run_loop) when the body's run in this state is
        compiled calls only and every value the loop copies is addressable."""
        armed = self._armed(ctx.held)
        run = None if armed[0] else self.body.compiled_run(ctx.held, (self.body, "loop"))
        if run is None:
            return
        plan, state, block = run
        nc = self.n_carried
        captured = self._captured(ctx)
        ins = self.body.input_buffers(plan, state, 2 + nc + len(captured))
        outs = self.body.output_values(plan, state)
        if ins is None or outs is None or any(b is None for b in ins[2:2 + nc]):
            return
        stage = [(b, x) for b, x in zip(ins[2:], ctx.inputs[2:ctx.node.n_inputs] + captured)
                 if b is not None]
        carry = list(zip(ins[2:2 + nc], outs[1:]))
        leave = list(zip(ctx.outputs, ins[2:2 + nc]))
        if not all(_copyable(d, s) for d, s in stage + carry + leave) or \
                any(not isinstance(b, np.ndarray) or b.dtype != np.bool_
                    for b in (ins[1], outs[0]) if b is not None):
            return
        if any(np.may_share_memory(src, dst) for _d, src in carry for dst, _s in carry):
            # an output in a carried input's block: all go through scratch first
            scratch = [held_buffer(np.uint8, (s.nbytes,), ctx.held, f"loop {k}")
                       for k, (_d, s) in enumerate(carry)]
            first = [(t, s.reshape(-1).view(np.uint8)) for t, (_d, s) in zip(scratch, carry)]
            then = [(d.reshape(-1).view(np.uint8), t) for t, (d, _s) in zip(scratch, carry)]
        else:
            first, then = carry, []
        body = record(block, [], [])
        loop = _loop_record((body, ins[0], ins[1], outs[0]), (stage, first, then, leave))
        ctx.held[(self, "record")] = (body, loop)
        armed[0] = loop.ctypes.data

    def run(self, ctx: RunContext) -> None:
        trips = None if ctx.inputs[0] is None else int(_scalar(ctx, 0, "M"))
        cond = True if ctx.inputs[1] is None else bool(_scalar(ctx, 1, "cond"))
        carried = list(ctx.inputs[2:ctx.node.n_inputs])
        captured = self._captured(ctx)
        n_scan = len(self.body.output_infos) - 1 - self.n_carried
        scans: list[list] = [[] for _ in range(n_scan)]
        i = 0
        nc = self.n_carried
        # the body's cond input is true at every call after the first (else the loop ended)
        holder = ctx.held if ctx.prepared else None
        with self.body.iterations([0, 1], [(1 + k, 2 + k) for k in range(nc)],
                                  holder) as calls:
            outs = None
            while (trips is None or i < trips) and cond:
                self._check_cancel(ctx)
                if outs is None:
                    outs = calls.first([np.array(0, np.int64), np.array(cond)] + carried
                                       + captured, ctx.cancel)
                else:
                    outs = calls.next([i, True], ctx.cancel)
                cond = _truth(outs[0], self.node)
                for k in range(n_scan):
                    scans[k].append(np.array(outs[1 + nc + k], copy=True))
                i += 1
            if outs is not None:
                carried = [np.array(o, copy=True) for o in outs[1:1 + nc]]
        if ctx.prepared:
            for out, v in zip(ctx.outputs, carried):
                np.copyto(out, v, casting="no")
            if holder is not None:
                self._arm(ctx)
            return
        for k, v in enumerate(carried):
            ctx.set_output_value(k, v)
        infos = self.body.output_infos[1 + self.n_carried:]
        for k in range(n_scan):
            value = _stack(scans[k], 0, self.node) if scans[k] else _empty_of(infos[k])
            ctx.set_output_value(self.n_carried + k, value)


def _truth(value, node) -> bool:
    """A body's condition output: one element."""
    if getattr(value, "size", 0) != 1:
        node.fail("the body's condition output must hold one element", ErrorKind.INVALID_INPUT)
    return bool(value.item())


def _stack(items, axis: int, node):
    try:
        return np.stack(items, axis=axis)
    except ValueError as e:
        node.fail(f"scan outputs of different shapes cannot be stacked: {e}", ErrorKind.INVALID_INPUT)


class Scan(_BodyKernel):
    """Opset 9+: states carried through the body, scan inputs sliced along their axes
    (reversed when asked), scan outputs placed along theirs. Opset 8: a leading
    sequence_lens input and a batch axis 0 in front of every state and scan value."""

    def __init__(self, node):
        super().__init__(node)
        self.body = self._body("body")
        self.m = node.attr("num_scan_inputs")
        if self.m is None:
            node.fail("attribute 'num_scan_inputs' is required")
        lead = 1 if node.opset < 9 else 0
        self.n_states = node.n_inputs - lead - self.m
        if self.n_states < 0:
            node.fail("fewer inputs than num_scan_inputs")
        self.n_scan_out = len(self.body.output_infos) - self.n_states
        if node.opset < 9:
            self.in_dirs = node.attr("directions", [0] * self.m)
            self.in_axes, self.out_axes, self.out_dirs = [0] * self.m, [0] * self.n_scan_out, [0] * self.n_scan_out
        else:
            self.in_axes = node.attr("scan_input_axes", [0] * self.m)
            self.in_dirs = node.attr("scan_input_directions", [0] * self.m)
            self.out_axes = node.attr("scan_output_axes", [0] * self.n_scan_out)
            self.out_dirs = node.attr("scan_output_directions", [0] * self.n_scan_out)
        if len(self.in_axes) != self.m or len(self.in_dirs) != self.m or \
                len(self.out_axes) != self.n_scan_out or len(self.out_dirs) != self.n_scan_out:
            node.fail("axes and directions must have one entry per scan input and output")

    def run(self, ctx: RunContext) -> None:
        n_in = ctx.node.n_inputs
        captured = self._captured(ctx)
        if self.node.opset < 9:
            lens = ctx.inputs[0]
            states = ctx.inputs[1:1 + self.n_states]
            xs = ctx.inputs[1 + self.n_states:n_in]
            batch = xs[0].shape[0] if xs else states[0].shape[0]
            results = [self._scan([s[b] for s in states], [x[b] for x in xs], captured, ctx,
                                  None if lens is None else int(lens.reshape(-1)[b]))
                       for b in range(batch)]
            for k in range(len(results[0]) if results else 0):
                items = [r[k] for r in results]
                if k >= self.n_states:         # shorter sequences are padded with zeros
                    longest = max(i.shape[0] for i in items)
                    items = [np.concatenate([i, np.zeros((longest - i.shape[0],) + i.shape[1:], i.dtype)])
                             for i in items]
                ctx.set_output_value(k, np.stack(items))
            return
        states = ctx.inputs[:self.n_states]
        xs = ctx.inputs[self.n_states:n_in]
        for k, v in enumerate(self._scan(list(states), list(xs), captured, ctx, None)):
            ctx.set_output_value(k, v)

    def _scan(self, states, xs, captured, ctx, length):
        axes = [a + x.ndim if a < 0 else a for a, x in zip(self.in_axes, xs)]
        for a, x in zip(axes, xs):
            if not 0 <= a < x.ndim:
                self.node.fail(f"scan input axis {a} is out of range for rank {x.ndim}")
        total = {x.shape[a] for a, x in zip(axes, xs)}
        if len(total) > 1:
            self.node.fail(f"scan inputs have different lengths {sorted(total)}", ErrorKind.INVALID_INPUT)
        steps = total.pop() if total else 0
        if length is not None:
            steps = min(steps, length)
        outs: list[list] = [[] for _ in range(self.n_scan_out)]
        ns = self.n_states
        with self.body.iterations(list(range(ns, ns + len(xs))),
                                  [(k, k) for k in range(ns)]) as calls:
            res = None
            for t in range(steps):
                self._check_cancel(ctx)
                slices = [np.take(x, steps - 1 - t if d else t, axis=a)
                          for x, a, d in zip(xs, axes, self.in_dirs)]
                if res is None:
                    res = calls.first(list(states) + slices + captured, ctx.cancel)
                else:
                    res = calls.next(slices, ctx.cancel)
                for k in range(self.n_scan_out):
                    outs[k].append(np.array(res[ns + k], copy=True))
            if res is not None:
                states = [np.array(v, copy=True) for v in res[:ns]]
        placed = []
        infos = self.body.output_infos[self.n_states:]
        for k in range(self.n_scan_out):
            items = outs[k][::-1] if self.out_dirs[k] else outs[k]
            if not items:
                placed.append(_empty_of(infos[k]))
                continue
            axis = self.out_axes[k]
            axis = axis + items[0].ndim + 1 if axis < 0 else axis
            placed.append(_stack(items, axis, self.node))
        return list(states) + placed


class SequenceMap(_BodyKernel):
    """Applies the body to each position of the input sequences (tensors are passed whole
    to every call) and gathers each body output into a sequence."""

    def __init__(self, node):
        super().__init__(node)
        self.body = self._body("body")

    def run(self, ctx: RunContext) -> None:
        args = []
        for x in ctx.inputs[:ctx.node.n_inputs]:
            args.append(packed.unpack_sequence(x)[0] if packed.is_packed(x) else x)
        lengths = {len(a) for a in args if isinstance(a, list)}
        if len(lengths) > 1:
            self.node.fail(f"the input sequences have different lengths {sorted(lengths)}",
                           ErrorKind.INVALID_INPUT)
        n = lengths.pop() if lengths else 0
        captured = self._captured(ctx)
        results: list[list] = [[] for _ in self.body.output_infos]
        for i in range(n):
            self._check_cancel(ctx)
            outs = self.body.run([a[i] if isinstance(a, list) else a for a in args] + captured, ctx.cancel)
            for k, o in enumerate(outs):
                results[k].append(o)
        for k, (items, info) in enumerate(zip(results, self.body.output_infos)):
            dt = items[0].dtype if items else _empty_of(info).dtype
            ctx.set_output_value(k, packed.pack_sequence(items, dt))
