"""The notebooks in notebooks/ run top to bottom (nbclient, a fresh kernel each)."""
import os
import sys

import pytest

nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (pip install graphrt[test])")
nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip install graphrt[test])")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "notebooks")
NOTEBOOKS = sorted(f for f in os.listdir(FOLDER) if f.endswith(".ipynb"))


def test_every_notebook_is_listed():
    assert NOTEBOOKS == ["batch_scoring.ipynb", "classic_ml.ipynb", "exact_vs_fast.ipynb", "profiling.ipynb",
                         "quickstart.ipynb"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name, monkeypatch):
    # The kernel (and Dask's worker processes) run this interpreter and import this checkout.
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    book = nbformat.read(os.path.join(FOLDER, name), as_version=4)
    client = nbclient.NotebookClient(book, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": FOLDER}})
    client.execute()
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
