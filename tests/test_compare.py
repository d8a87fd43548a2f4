"""graphrt.compare and `graphrt compare`: outputs against onnxruntime or onnx's reference
evaluator, and the first diverging node, found with a Sin kernel made wrong on purpose."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphrt
from graphrt import ErrorKind, SessionError
from graphrt.cli import main
from graphrt.compare import diff_value, tolerance
from graphrt.kernels.table import DEFAULT, OperatorTable

from . import models
from .models import F, const, make, tensor

n = helper.make_node


class WrongSin(graphrt.OpKernel):
    """Sin, off by 0.01 on every element: the divergence the tests look for."""

    supports_exact = True        # not true of np.sin: it lets the exact-mode path be tested

    def infer(self, ctx):
        ctx.set_output(0, ctx.dtype(0), ctx.shape(0))

    def run(self, ctx):
        np.sin(ctx.flat_in[0], out=ctx.flat_out[0])
        ctx.flat_out[0] += ctx.flat_out[0].dtype.type(0.01)


WRONG = OperatorTable([d for d in DEFAULT.defs() if (d.domain, d.op_type) != ("", "Sin")]
                      + [graphrt.OpDef("", "Sin", 7, None, WrongSin)])


def chain():
    """x -> Abs -> Sin ("the_sin") -> Mul -> Add -> y: only the_sin is wrong with WRONG."""
    return make([n("Abs", ["x"], ["a"], name="abs"),
                 n("Sin", ["a"], ["s"], name="the_sin"),
                 n("Mul", ["s", "a"], ["m"], name="after_1"),
                 n("Add", ["m", "c"], ["y"], name="after_2")],
                [tensor("x", F, ["n", 8])], [tensor("y", F, ["n", 8])],
                [const("c", np.full(8, 0.5, np.float32))])


def with_if():
    """y = If(flag) { sin(x) * 2 } else { x }, then Neg: the body's Sin is the wrong one."""
    then = helper.make_graph([n("Sin", ["x"], ["t0"], name="body_sin"),
                              n("Mul", ["t0", "two"], ["t"], name="body_mul")], "then", [],
                             [tensor("t", F, None)], [const("two", np.float32(2.0))])
    other = helper.make_graph([n("Identity", ["x"], ["e"], name="body_id")], "else", [],
                              [tensor("e", F, None)])
    return make([n("Relu", ["x0"], ["x"], name="relu"),
                 n("If", ["flag"], ["b"], name="the_if", then_branch=then, else_branch=other),
                 n("Neg", ["b"], ["y"], name="after_if")],
                [tensor("x0", F, [3, 4]), tensor("flag", TensorProto.BOOL, [])],
                [tensor("y", F, [3, 4])])


def test_models_that_agree_say_so(tmp_path):
    r = graphrt.compare(models.mlp(sizes=(6, 8, 2)), dims={"batch": 3})
    assert r.agree and r.first_divergence is None and not r.walked
    assert [d.name for d in r.outputs] == ["y"] and r.outputs[0].compared
    assert r.feeds == {"x": ("float32", (3, 6))}
    text = str(r)
    assert "against onnxruntime" in text and "agree" in text and "DIFFER" not in text


def test_the_first_diverging_node_is_named_not_its_successors():
    r = graphrt.compare(chain(), {"x": models_x()}, operators=WRONG)
    assert not r.agree and r.walked
    assert r.outputs[0].diverges and r.outputs[0].max_abs > 0.005
    fd = r.first_divergence
    assert (fd.name, fd.op_type, fd.index) == ("the_sin", "Sin", 1)
    assert [d.name for d in fd.inputs] == ["a"] and not fd.inputs[0].diverges and fd.inputs[0].compared
    assert fd.inputs[0].max_abs == 0 and fd.inputs_agree
    (out,) = fd.outputs
    assert out.name == "s" and out.mismatches == out.size == 16
    assert out.max_abs == pytest.approx(0.01, rel=1e-3)
    assert r.nodes_diverging == 3 and r.nodes_compared == 4      # the_sin, after_1, after_2
    text = r.report()
    assert "first diverging node: 'the_sin' (Sin)" in text
    assert "its inputs are the same on both sides: the difference starts in this node" in text
    assert "after_1" not in text and "after_2" not in text


def models_x():
    return np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)


def test_the_reference_evaluator_as_the_peer():
    ok = graphrt.compare(chain(), {"x": models_x()}, against="reference")
    assert ok.agree and "against reference" in str(ok)
    bad = graphrt.compare(chain(), {"x": models_x()}, against="reference", operators=WRONG, mode="exact")
    assert bad.mode == "exact" and bad.first_divergence.name == "the_sin"


def test_if_bodies_are_compared_through_their_node():
    feeds = {"x0": models_x()[:, :4].reshape(2, 4)[:1].repeat(3, 0), "flag": np.array(True)}
    assert graphrt.compare(with_if(), feeds).agree
    r = graphrt.compare(with_if(), feeds, operators=WRONG)
    fd = r.first_divergence
    assert (fd.name, fd.op_type) == ("the_if", "If") and fd.has_subgraphs
    assert [d.name for d in fd.inputs] == ["flag"] and [d.name for d in fd.body_inputs] == ["x"]
    assert fd.body_inputs[0].compared and not fd.body_inputs[0].diverges
    assert "values inside them are not compared" in str(r)
    # the else branch does not run the wrong Sin
    assert graphrt.compare(with_if(), dict(feeds, flag=np.array(False)), operators=WRONG).agree


def test_tolerances_follow_the_element_type():
    assert tolerance(np.float32) == (1e-4, 1e-5)
    assert tolerance(np.float64) == (1e-9, 1e-12)
    assert tolerance(np.float16, rtol=1e-6, atol=0) == (1e-2, 1e-3)     # never below fp16's own
    assert tolerance(np.float32, rtol=1e-2, atol=0) == (1e-2, 0.0)
    x = np.array([1.0, np.nan, np.inf, 0.0], np.float32)
    assert not diff_value("v", x, x.copy()).diverges                   # NaN and inf in place
    y = x.copy()
    y[0] += 5e-5
    assert not diff_value("v", x, y).diverges
    y[0] = 1.001
    d = diff_value("v", x, y)
    assert d.diverges and d.mismatches == 1 and d.worst[0] == (0,)
    y = x.copy()
    y[3] = np.nan
    d = diff_value("v", x, y)
    assert d.mismatches == 1 and d.nan_mismatches == 1
    i = np.arange(4)
    assert diff_value("i", i, i + np.array([0, 0, 1, 0])).mismatches == 1   # integers: exact
    assert diff_value("h", x.astype(np.float16), (x * (1 + 4e-3)).astype(np.float16)).mismatches == 0
    s = np.array(["a", "b"], dtype=object)
    assert diff_value("s", s, np.array(["a", "c"], dtype=object)).mismatches == 1
    assert diff_value("q", [x], [x]).note.startswith("a sequence")
    assert diff_value("z", x, x[:2]).diverges                           # shapes differ


def test_cli_compare(tmp_path, capsys, monkeypatch):
    path = tmp_path / "chain.onnx"
    onnx.save(chain(), path)
    np.savez(tmp_path / "x.npz", x=models_x())
    assert main(["compare", str(path), "--input", str(tmp_path / "x.npz")]) == 0
    out = capsys.readouterr().out
    assert "chain.onnx, fast mode, against onnxruntime" in out and "inputs (given): x float32 [2, 8]" in out
    # the default table with the wrong Sin: exit status 1 and the node
    monkeypatch.setitem(DEFAULT._by_key, ("", "Sin"), [graphrt.OpDef("", "Sin", 7, None, WrongSin)])
    assert main(["compare", str(path), "--dim", "n=3", "--against", "reference"]) == 1
    out = capsys.readouterr().out
    assert "inputs (random, seed 0): x float32 [3, 8]" in out
    assert "first diverging node: 'the_sin' (Sin)" in out
    assert main(["compare", str(path), "--no-walk", "--rtol", "0.1", "--atol", "0.1"]) == 0
    assert main(["compare", str(path), "--no-walk"]) == 1
    assert "first diverging node" not in capsys.readouterr().out
    assert main(["compare", str(tmp_path / "none.onnx")]) == 2


def test_a_missing_peer_is_named(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_ort(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ort)
    with pytest.raises(SessionError) as e:
        graphrt.compare(chain())
    assert e.value.kind == ErrorKind.UNSUPPORTED and "pip install onnxruntime" in str(e.value)
    with pytest.raises(SessionError):
        graphrt.compare(chain(), against="tensorflow")
