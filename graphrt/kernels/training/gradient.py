"""Gradient (ai.onnx.preview.training): dy/dx for the xs of the enclosing graph.

The forward nodes between the xs and y are copied from the node's graph, followed by their
reverse-mode derivative spelled with ordinary operators, and compiled as a body. Supported
forward operators: Add, Sub, Mul, Div, Neg, Identity on operands of equal shapes (a
broadcast operand would need its gradient summed back to its shape: not done yet).
"""
from __future__ import annotations

import numpy as np

from ...errors import ErrorKind
from ...ir import IrGraph, IrNode, TensorInfo
from ..core.base import OpKernel, RunContext


def _rules(op: str, a: str, b: str, g: str, fresh):
    """Nodes giving (grad of a, grad of b) of y = op(a, b) from the grad g of y."""
    if op in ("Add", "Identity"):
        return [], g, g
    if op == "Sub":
        nb = fresh("neg")
        return [IrNode(nb, "Neg", "", [g], [nb])], g, nb
    if op == "Neg":
        na = fresh("neg")
        return [IrNode(na, "Neg", "", [g], [na])], na, None
    if op == "Mul":
        ga, gb = fresh("mul"), fresh("mul")
        return [IrNode(ga, "Mul", "", [g, b], [ga]), IrNode(gb, "Mul", "", [g, a], [gb])], ga, gb
    if op == "Div":     # d(a/b) = g/b, -g*a/(b*b)
        ga, t, bb, q, gb = (fresh(k) for k in ("div", "mul", "mul", "div", "neg"))
        return [IrNode(ga, "Div", "", [g, b], [ga]), IrNode(t, "Mul", "", [g, a], [t]),
                IrNode(bb, "Mul", "", [b, b], [bb]), IrNode(q, "Div", "", [t, bb], [q]),
                IrNode(gb, "Neg", "", [q], [gb])], ga, gb
    return None


class Gradient(OpKernel):
    supports_exact = True
    outputs_data_dependent = True
    constant_foldable = False

    def __init__(self, node):
        super().__init__(node)
        xs, y = list(node.attr("xs", [])), node.attr("y")
        scope: IrGraph | None = node.scope() if node.scope is not None else None
        if not xs or y is None or scope is None:
            node.fail("attributes 'xs' and 'y' are required")
        if node.n_inputs != len(xs) or node.n_outputs != len(xs):
            node.fail("Gradient takes the xs as inputs and gives one gradient per x")
        made = {o: n for n in scope.nodes for o in n.outputs if o}
        # the forward slice: nodes that y depends on, back to the xs
        need, forward, stack = set(), [], [y]
        while stack:
            v = stack.pop()
            if v in need or v in xs or v in scope.initializers:
                continue
            need.add(v)
            n = made.get(v)
            if n is None:
                node.fail(f"y depends on {v!r}, which is neither an x nor computed in the graph")
            if n not in forward:
                forward.append(n)
                stack.extend(i for i in n.inputs if i)
        forward.sort(key=scope.nodes.index)
        count = [0]

        def fresh(kind):
            count[0] += 1
            return f"{node.name}/grad_{kind}_{count[0]}"
        zero_name = f"{node.name}/grad_zero"
        seed, grads = fresh("seed"), {}
        # y ** 0 is 1 for every y, NaN and infinities included, in y's own type
        backward = [IrNode(seed, "Pow", "", [y, zero_name], [seed])]
        grads[y] = seed
        for n in reversed(forward):
            g = grads.get(n.outputs[0])
            if g is None:
                continue
            a = n.inputs[0]
            b = n.inputs[1] if len(n.inputs) > 1 else None
            rule = _rules(n.op_type, a, b, g, fresh)
            if rule is None:
                node.fail(f"no derivative for {n.op_type} (node {n.name!r})", ErrorKind.UNSUPPORTED)
            nodes, ga, gb = rule
            backward += nodes
            for v, gv in ((a, ga), (b, gb)):
                if v is None or gv is None:
                    continue
                if v in grads:
                    s = fresh("sum")
                    backward.append(IrNode(s, "Add", "", [grads[v], gv], [s]))
                    gv = s
                grads[v] = gv
        outs = []
        for x in xs:
            if x not in grads:              # y does not depend on x: x ** 0 * 0
                one, z = fresh("one"), fresh("zero")
                backward += [IrNode(one, "Pow", "", [x, zero_name], [one]),
                             IrNode(z, "Mul", "", [one, zero_name], [z])]
                grads[x] = z
            out = fresh("out")
            backward.append(IrNode(out, "Identity", "", [grads[x]], [out]))
            outs.append(out)
        inits = {k: v for k, v in scope.initializers.items()
                 if any(k in n.inputs for n in forward)}
        inits[zero_name] = np.zeros((), np.float32)
        body = IrGraph(f"{node.name}/gradient", forward + backward,
                       [TensorInfo(x, None, None) for x in xs], [TensorInfo(o, None, None) for o in outs], inits)
        self.body = node.compile_body(body)

    def run(self, ctx: RunContext) -> None:
        for i, g in enumerate(self.body.run(list(ctx.inputs[:ctx.node.n_inputs]), ctx.cancel)):
            ctx.set_output_value(i, g)
