def pytest_terminal_summary(terminalreporter):
    from .conformance import RESULTS
    if RESULTS:
        for label, keep in (("node cases", lambda n: "/" not in n), ("data-folder cases", lambda n: "/" in n)):
            ran = {n: r for n, r in RESULTS.items() if keep(n)}
            draws = sum(isinstance(r, str) and r.startswith("random draws") for r in ran.values())
            terminalreporter.write_line(
                f"onnx backend {label}: {sum(r is None for r in ran.values())} of {len(ran)} run pass"
                + (f" ({draws} random-draw cases checked for type, shape and support)" if draws else ""))
