"""onnx's backend node cases: every case passes, or is on the expected-failure list with a
reason and still fails (a case that starts passing must come off the list)."""
import pytest

from . import conformance

CASES = conformance.node_cases()
XFAIL = conformance.load_xfail()
RESULTS = {}


def test_xfail_list_names_real_cases():
    assert set(XFAIL) <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name):
    why = conformance.run_case(CASES[name])
    RESULTS[name] = why
    if name in XFAIL:
        assert why is not None, f"{name} passes now: take it off tests/conformance_xfail.txt"
        pytest.xfail(XFAIL[name])
    assert why is None, why
