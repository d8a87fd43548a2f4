import os

# Tests ask for kernels at the thread counts they name; a cold first run's serial kernels
# (plan/warm.py) would stand in for the parallel ones they mean to check. That policy has
# tests of its own (tests/test_serial_first.py), which turn it on.
os.environ.setdefault("GRAPHRT_SERIAL_FIRST", "0")
# pytest-xdist's workers already keep every core compiling; a helper process per worker
# (plan/compile_share.py) only adds processes to share them (tests/ops/reduce, nn and
# attention from an empty cache on 2 cores: 112-120 s without, 118-136 s with, three runs
# each). The tests of the helper and of the policy that needs it turn it on for the
# processes they start.
os.environ.setdefault("GRAPHRT_COMPILE_HELPER", "0")


def pytest_runtest_logreport(report):
    """Collects the backend cases' results (tests/test_onnx_backend.py) from the reports,
    which reach this process whether the case ran here or in a pytest-xdist worker."""
    if report.when == "call":
        from .conformance import RESULTS
        for key, value in report.user_properties:
            if key == "conformance":
                name, why = value
                RESULTS[name] = why


def pytest_terminal_summary(terminalreporter):
    from .conformance import RESULTS
    if RESULTS:
        for label, keep in (("node cases", lambda n: "/" not in n), ("data-folder cases", lambda n: "/" in n)):
            ran = {n: r for n, r in RESULTS.items() if keep(n)}
            draws = sum(isinstance(r, str) and r.startswith("random draws") for r in ran.values())
            terminalreporter.write_line(
                f"onnx backend {label}: {sum(r is None for r in ran.values())} of {len(ran)} run pass"
                + (f" ({draws} random-draw cases checked for type, shape and support)" if draws else ""))


# Tests that start processes of their own and run for tens of seconds each go first, so that
# pytest-xdist's workers share out the short tests after them and end together (at the end
# of the collection order they left one worker running alone).
FIRST = ("tests/test_exact_properties.py::test_exact_same_bits_in_another_process_on_the_generic_path",
         "tests/test_onnx_backend.py::test_optimisation_levels_agree_over_the_backend_cases",
         "tests/test_kernel_cache.py", "tests/test_serial_first.py", "tests/test_notebooks.py",
         "tests/test_tasks.py")


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: not item.nodeid.startswith(FIRST))     # (stable)
