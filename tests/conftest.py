def pytest_terminal_summary(terminalreporter):
    from .test_onnx_backend import RESULTS
    if RESULTS:
        passed = sum(r is None for r in RESULTS.values())
        terminalreporter.write_line(
            f"onnx backend node cases: {passed} of {len(RESULTS)} run pass")
