"""Custom operators from Python: an OpDef for a custom domain with an njit kernel, an infer
function and flags, in a table of the user's own; graphrt's table stays as it was (the
com.example operators are helpers.OPS, their model models.custom_model)."""
import numpy as np
import pytest
from onnx import helper

import graphrt
from graphrt import ErrorKind, SessionError
from graphrt.kernels.table import DEFAULT

from . import models
from .helpers import OPS, Swish2
from .models import custom_model


def reference(x, beta=1.5, lo=-0.5, hi=0.75):
    x64 = x.astype(np.float64)
    s = x64 / (1 + np.exp(-beta * x64))
    return np.clip(np.maximum(x64, 0) + s, lo, hi)


def test_custom_ops_run_in_a_session_with_their_table():
    x = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
    sess = graphrt.Session(custom_model(), operators=OPS)
    before = Swish2.infer_calls
    (y,) = sess.run(None, {"x": x})
    assert Swish2.infer_calls == before + 1        # the plan asked our infer
    np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-6)
    (s,) = sess.run(["s"], {"x": x})               # a custom op's output by name
    np.testing.assert_allclose(s, x / (1 + np.exp(-1.5 * x.astype(np.float64))), rtol=1e-5, atol=1e-6)
    model = graphrt.Model(sess)
    assert np.array_equal(model(x), y)


def test_graphrt_own_table_is_untouched():
    assert DEFAULT.resolve("com.example", "Swish2", 1) is None
    assert OPS.resolve("com.example", "Swish2", 1).factory is Swish2
    assert OPS.resolve("", "Relu", 17) is DEFAULT.resolve("", "Relu", 17)
    with pytest.raises(SessionError) as e:
        graphrt.Session(custom_model())
    assert e.value.kind is ErrorKind.UNSUPPORTED_OPERATOR
    assert e.value.operators == ("com.example.Clamp (opset 1)", "com.example.Swish2 (opset 1)")


def test_flags_decide_exact_mode():
    """Clamp says supports_exact; Swish2 (libm exp) does not, so exact mode refuses it."""
    exact = graphrt.SessionOptions(mode="exact")
    with pytest.raises(SessionError) as e:
        graphrt.Session(custom_model(), exact, operators=OPS)
    assert e.value.kind is ErrorKind.EXACT_MODE_UNAVAILABLE and e.value.operators == ("Swish2",)
    n = helper.make_node
    clamp_only = models.make([n("Clamp", ["x"], ["y"], domain="com.example", lo=-1.0, hi=2.0)],
                             [models.tensor("x", models.F, [4])], [models.tensor("y", models.F, [4])])
    clamp_only.opset_import.append(helper.make_opsetid("com.example", 1))
    y = graphrt.Session(clamp_only, exact, operators=OPS).run(
        None, {"x": np.array([-3, 0.5, 9, np.nan], np.float32)})[0]
    assert y[:3].tolist() == [-1.0, 0.5, 2.0] and np.isnan(y[3])


def test_infer_errors_and_type_checks_surface_as_session_errors():
    with pytest.raises(SessionError, match="lo .* must not exceed hi"):
        graphrt.Session(custom_model(lo=1.0, hi=0.0), operators=OPS).run(None, {"x": np.ones((1, 5), np.float32)})
    with pytest.raises(TypeError):
        graphrt.custom_operators(("com.example", "Swish2", 1, None, Swish2))


def test_opset_ranges_select_the_def():
    ops = graphrt.custom_operators(graphrt.OpDef("com.example", "Swish2", 1, 1, Swish2))
    model = custom_model()
    model.opset_import[-1].version = 2
    with pytest.raises(SessionError) as e:
        graphrt.Session(model, operators=ops)
    assert "com.example.Swish2 (opset 2)" in e.value.operators
