"""The graphrt command: run, info, bench, score; errors as one line with exit status 2."""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from graphrt.cli import main

from . import models

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MLP = os.path.join(ROOT, "examples", "mlp.onnx")


@pytest.fixture()
def mlp_path(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(models.mlp(sizes=(6, 8, 2)), path)
    return str(path)


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_python_dash_m_runs_and_errors_without_traceback(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    ok = subprocess.run([sys.executable, "-m", "graphrt", "info", MLP], capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and "probs" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "graphrt", "run", str(tmp_path / "none.onnx"), "--input", "x.npy"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and "InvalidModel" in bad.stderr and "none.onnx" in bad.stderr


def test_info_lists_io_opsets_counts_and_missing_operators(tmp_path, capsys):
    code, out, _ = cli(capsys, "info", MLP)
    assert code == 0
    assert "x: FLOAT [batch, 16]" in out and "probs: FLOAT [batch, 4]" in out
    assert "ai.onnx 17" in out and "graphrt lacks: nothing" in out
    assert [line.split() for line in out.splitlines() if line.strip().startswith("Gemm")] == [["Gemm", "3"]]
    n = helper.make_node
    model = models.make([n("Relu", ["x"], ["a"]), n("Frob", ["a"], ["y"], domain="com.example")],
                        [models.tensor("x", models.F, ["n", 2])], [models.tensor("y", models.F, None)])
    model.opset_import.append(helper.make_opsetid("com.example", 2))
    path = tmp_path / "frob.onnx"
    onnx.save(model, path)
    code, out, _ = cli(capsys, "info", path)
    assert code == 0
    assert "graphrt lacks: com.example.Frob (opset 2)" in out and "com.example 2" in out
    assert "y: FLOAT unknown rank" in out


def test_info_counts_nodes_inside_subgraphs(tmp_path, capsys):
    n = helper.make_node
    then = helper.make_graph([n("Relu", ["x"], ["t"])], "then", [], [models.tensor("t", models.F, [2])])
    other = helper.make_graph([n("Identity", ["x"], ["e"])], "else", [], [models.tensor("e", models.F, [2])])
    model = models.make([n("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                        [models.tensor("c", onnx.TensorProto.BOOL, []), models.tensor("x", models.F, [2])],
                        [models.tensor("y", models.F, [2])])
    onnx.save(model, tmp_path / "if.onnx")
    code, out, _ = cli(capsys, "info", tmp_path / "if.onnx")
    assert code == 0 and "(3 nodes, subgraphs included)" in out
    assert any(line.split()[:2] == ["Relu", "1"] for line in out.splitlines() if line.strip())


def test_run_npy_and_npz_inputs_and_outputs(tmp_path, mlp_path, capsys):
    x = np.random.default_rng(0).standard_normal((4, 6))            # float64: cast to float32
    np.save(tmp_path / "x.npy", x)
    code, out, _ = cli(capsys, "run", mlp_path, "--input", tmp_path / "x.npy", "--output", tmp_path / "o.npz",
                       "--mode", "exact", "--threads", "1")
    assert code == 0 and "wrote y [4, 2]" in out
    import graphrt
    expected = graphrt.load(mlp_path, mode="exact")(x.astype(np.float32))
    with np.load(tmp_path / "o.npz") as z:
        assert np.array_equal(z["y"], expected)
    np.savez(tmp_path / "in.npz", x=x.astype(np.float32))
    code, out, _ = cli(capsys, "run", mlp_path, "-i", tmp_path / "in.npz", "--opt", "basic",
                       "--value", "r0", "--value", "y")
    assert code == 0 and "r0: FLOAT [4, 8]" in out and "y: FLOAT [4, 2]" in out


def test_run_errors_exit_2_with_the_session_error(tmp_path, mlp_path, capsys):
    np.save(tmp_path / "wide.npy", np.ones((3, 7), np.float32))
    code, out, err = cli(capsys, "run", mlp_path, "--input", tmp_path / "wide.npy")
    assert code == 2 and err.startswith("graphrt: error: InvalidInput") and "extent 6" in err
    import onnx
    from onnx import TensorProto, helper
    sine = helper.make_model(helper.make_graph(
        [helper.make_node("RandomUniformLike", ["x"], ["y"])], "noise", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 7])]), opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(sine, tmp_path / "sine.onnx")
    code, _, err = cli(capsys, "run", tmp_path / "sine.onnx", "--mode", "exact", "--input", tmp_path / "wide.npy")
    assert code == 2 and "ExactModeUnavailable" in err and "RandomUniformLike" in err
    code, _, err = cli(capsys, "run", mlp_path, "--input", tmp_path / "nothing.npz")
    assert code == 2 and "no data file" in err
    code, _, err = cli(capsys, "run", mlp_path, "--threads", "-3", "--input", tmp_path / "wide.npy")
    assert code == 2 and "intra_op_threads" in err


def test_bench_random_inputs_with_dims(mlp_path, capsys):
    code, out, _ = cli(capsys, "bench", mlp_path, "--dim", "batch=5", "--runs", "3", "--threads", "1")
    assert code == 0
    assert "x FLOAT [5, 6]" in out and "first run" in out and "over 3 runs" in out
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        assert "onnxruntime: not installed" in out
    else:
        assert "max |graphrt - onnxruntime|" in out
    code, out, _ = cli(capsys, "bench", mlp_path, "--runs", "2", "--no-ort")
    assert code == 0 and "x FLOAT [1, 6]" in out and "onnxruntime" not in out
    code, _, err = cli(capsys, "bench", mlp_path, "--dim", "batch")
    assert code == 2 and "NAME=VALUE" in err


def test_score_file_to_parquet_and_npz(tmp_path, mlp_path, capsys):
    pd = pytest.importorskip("pandas")
    x = np.random.default_rng(1).standard_normal((301, 6)).astype(np.float32)
    pd.DataFrame(x, columns=list("abcdef")).to_parquet(tmp_path / "rows.parquet")
    code, out, err = cli(capsys, "score", mlp_path, tmp_path / "rows.parquet", "--batch-size", "64",
                         "--output", tmp_path / "s.parquet")
    assert code == 0 and "wrote y [301, 2]" in out
    import graphrt
    expected = graphrt.load(mlp_path)(x)
    got = pd.read_parquet(tmp_path / "s.parquet")
    assert list(got.columns) == ["y_0", "y_1"] and np.array_equal(got.to_numpy(), expected)
    np.save(tmp_path / "rows.npy", x)
    code, out, err = cli(capsys, "score", mlp_path, tmp_path / "rows.npy", "-b", "100", "--no-progress",
                         "-o", tmp_path / "s.npz")
    assert code == 0 and err == ""
    with np.load(tmp_path / "s.npz") as z:
        assert np.array_equal(z["y"], expected)
    code, _, err = cli(capsys, "score", mlp_path, tmp_path / "rows.npy", "-b", "0")
    assert code == 2 and "batch_size" in err
