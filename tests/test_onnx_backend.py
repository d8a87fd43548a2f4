"""onnx's backend cases (node cases, and the data folder's pytorch-converted,
pytorch-operator, simple and light models): every case passes, or is on the expected-failure
list with a reason and still fails (a case that starts passing must come off the list)."""
import pytest

from . import conformance

CASES = conformance.all_cases()
XFAIL = conformance.load_xfail()


def test_xfail_list_names_real_cases():
    assert set(XFAIL) <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, record_property):
    # (a report property, so that the summary in conftest.py counts it in whichever process
    # ran the case: pytest-xdist runs them in workers)
    if conformance.is_draw(name):
        record_property("conformance", (name, "random draws: checked for type, shape and support"))
        assert conformance.run_draw_case(CASES[name]) is None
        return
    why = conformance.run_case(CASES[name])
    record_property("conformance", (name, why))
    if name in XFAIL:
        assert why is not None, f"{name} passes now: take it off tests/conformance_xfail.txt"
        pytest.xfail(XFAIL[name])
    assert why is None, why


def test_optimisation_levels_agree_over_the_backend_cases():
    """Every case that runs (the light model zoo included) gives the same outputs at levels
    none, basic and all: the same
    bits where only bit-preserving passes rewrote the graph, within the case's tolerance
    elsewhere."""
    import numpy as np

    import graphrt
    from graphrt.passes.table import ALL as PASSES
    changes_bits = {p.name for p in PASSES if not p.preserves_bits}
    compared = 0
    for name in sorted(CASES):             # node cases and the data folder's models
        if name in XFAIL or conformance.is_draw(name):
            continue
        case = CASES[name]
        inputs = case.data_sets[0][0]
        results = {}
        for level in ("none", "basic", "all"):
            sess = graphrt.Session(case.model, graphrt.SessionOptions(optimization_level=level))
            fed = {i.name for i in sess.inputs}
            names = [i.name for i in case.model.graph.input if i.name in fed]
            feeds = {n: conformance._array(v) for n, v in zip(names, inputs)}
            results[level] = (sess.pass_counts, sess.run(None, feeds))
        base = results["none"][1]
        for level in ("basic", "all"):
            counts, outs = results[level]
            exact = not any(counts.get(p) for p in changes_bits)
            for g, b in zip(outs, base):
                if isinstance(b, np.ndarray) and b.dtype != object:
                    if exact:
                        assert g.tobytes() == b.tobytes() and g.shape == b.shape, (name, level)
                    else:
                        assert conformance.compare(g, b, case.rtol, case.atol) is None, (name, level)
        compared += 1
    assert compared > 1000
