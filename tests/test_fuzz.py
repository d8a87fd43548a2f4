"""Bounded fuzzing in CI (longer runs: python -m tests.fuzz N)."""
from . import fuzz


def test_fuzz_cases_end_in_results_or_session_errors():
    counts = fuzz.run(400, seed=1)          # any other exception fails the test
    assert sum(counts.values()) == 400
    assert counts["MISMATCH with the reference"] == 0, counts
    assert counts["result"] + counts["result equal to the reference"] > 0
    assert any(k.startswith("SessionError") for k in counts)
