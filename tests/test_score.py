"""graphrt.score over arrays, dicts, DataFrames and files; the shared data reader and writer."""
import numpy as np
import pytest
from onnx import helper

import graphrt
from graphrt import ErrorKind, SessionError
from graphrt.score import load_data, save_outputs, to_frame

from . import models

pd = pytest.importorskip("pandas")


def two_inputs():
    """y = relu(a) + b and z = a * b on [n, 3] inputs."""
    n = helper.make_node
    return models.make([n("Relu", ["a"], ["r"]), n("Add", ["r", "b"], ["y"]), n("Mul", ["a", "b"], ["z"])],
                       [models.tensor("a", models.F, ["n", 3]), models.tensor("b", models.F, ["n", 3])],
                       [models.tensor("y", models.F, ["n", 3]), models.tensor("z", models.F, ["n", 3])])


@pytest.fixture(scope="module")
def mlp():
    return graphrt.load(models.mlp(sizes=(6, 8, 2)), mode="exact", optimization_level="basic")


def rows(n, k=6, seed=0):
    return np.random.default_rng(seed).standard_normal((n, k)).astype(np.float32)


def test_batches_equal_one_run_and_the_last_batch_is_short(mlp):
    x = rows(1003)
    y = graphrt.score(mlp, x, batch_size=100, progress=False)
    assert y.shape == (1003, 2) and y.dtype == np.float32
    assert np.array_equal(y, mlp(x))
    assert np.array_equal(graphrt.score(mlp, x, batch_size=5000, progress=False), y)


def test_model_sources_and_options():
    proto = models.mlp(sizes=(6, 8, 2))
    x = rows(10)
    a = graphrt.score(proto, x, batch_size=3, progress=False, mode="exact")
    b = graphrt.score(proto.SerializeToString(), x, batch_size=7, progress=False, mode="exact")
    c = graphrt.score(graphrt.Session(proto, graphrt.SessionOptions(mode="exact")), x, progress=False)
    assert np.array_equal(a, b) and np.array_equal(a, c)
    with pytest.raises(TypeError):
        graphrt.score(graphrt.load(proto), x, mode="exact")


def test_float64_data_is_cast_and_int_targets_refused(mlp):
    x = rows(20)
    assert np.array_equal(graphrt.score(mlp, x.astype(np.float64), progress=False), mlp(x))
    with pytest.raises(SessionError) as e:
        graphrt.score(mlp, np.ones((2, 6), np.complex64), progress=False)
    assert e.value.kind is ErrorKind.INVALID_INPUT and "cast" in str(e.value)


def test_intermediate_values_come_back_as_a_dict(mlp):
    x = rows(50)
    out = graphrt.score(mlp, x, batch_size=16, progress=False, output_names=["r0", "y"])
    assert set(out) == {"r0", "y"}
    r0, y = mlp.session.run(["r0", "y"], {"x": x})
    assert np.array_equal(out["r0"], r0) and np.array_equal(out["y"], y)


def test_dict_of_arrays_for_a_multi_input_model():
    sess = graphrt.Session(two_inputs())
    a, b = rows(30, 3, 1), rows(30, 3, 2)
    out = graphrt.score(sess, {"a": a, "b": b}, batch_size=7, progress=False)
    assert np.array_equal(out["y"], np.maximum(a, 0) + b) and np.array_equal(out["z"], a * b)
    with pytest.raises(SessionError, match="different numbers of rows"):
        graphrt.score(sess, {"a": a, "b": b[:10]}, progress=False)
    with pytest.raises(SessionError, match="no value was fed"):
        graphrt.score(sess, {"a": a}, progress=False)
    with pytest.raises(SessionError, match="2 inputs"):
        graphrt.score(sess, a, progress=False)


def test_dataframes_all_columns_or_named_columns(mlp):
    x = rows(40)
    df = pd.DataFrame(x.astype(np.float64), columns=list("abcdef"))
    assert np.array_equal(graphrt.score(mlp, df, batch_size=9, progress=False), mlp(x))
    sess = graphrt.Session(two_inputs())
    a, b = rows(12, 3, 3), rows(12, 3, 4)
    named = pd.DataFrame({"a": list(a), "b": list(b), "other": np.arange(12)})   # array cells
    out = graphrt.score(sess, named, batch_size=5, progress=False)
    assert np.array_equal(out["z"], a * b)


def test_parquet_npz_and_npy_files_round_trip(tmp_path, mlp):
    x = rows(64)
    pd.DataFrame(x, columns=[f"f{i}" for i in range(6)]).to_parquet(tmp_path / "x.parquet")
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "x.npz", x=x)
    expected = mlp(x)
    for name in ("x.parquet", "x.npy", "x.npz"):
        assert np.array_equal(graphrt.score(mlp, tmp_path / name, batch_size=10, progress=False), expected)
    outs = {"y": expected, "r0": mlp.session.run(["r0"], {"x": x})[0]}
    save_outputs(tmp_path / "o.npz", outs)
    back = load_data(tmp_path / "o.npz")
    assert set(back) == {"y", "r0"} and np.array_equal(back["r0"], outs["r0"])
    save_outputs(tmp_path / "o.parquet", outs)
    frame = load_data(tmp_path / "o.parquet")
    assert list(frame.columns) == ["y_0", "y_1"] + [f"r0_{j}" for j in range(8)]
    assert np.array_equal(frame[["y_0", "y_1"]].to_numpy(), expected)
    with pytest.raises(SessionError, match="one array"):
        save_outputs(tmp_path / "o.npy", outs)


def test_data_file_errors_are_session_errors(tmp_path, mlp):
    for path, match in ((tmp_path / "missing.npy", "no data file"), (tmp_path / "x.csv", "expected one of")):
        with pytest.raises(SessionError, match=match):
            graphrt.score(mlp, path, progress=False)
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(SessionError, match="cannot read"):
        load_data(tmp_path / "bad.npy")


def test_bad_batch_sizes_empty_data_and_non_row_outputs(mlp):
    with pytest.raises(SessionError, match="batch_size"):
        graphrt.score(mlp, rows(4), batch_size=0, progress=False)
    with pytest.raises(SessionError, match="no rows"):
        graphrt.score(mlp, rows(0), progress=False)
    reduce_all = models.make([helper.make_node("Shape", ["x"], ["y"])],
                             [models.tensor("x", models.F, ["n", 3])], [models.tensor("y", 7, [2])])
    with pytest.raises(SessionError, match="one result row per input row"):
        graphrt.score(reduce_all, np.ones((5, 3), np.float32), progress=False)


def test_to_frame_columns():
    f = to_frame({"p": np.arange(3.0), "q": np.ones((3, 1)), "r": np.zeros((3, 2, 2))}, index=[5, 6, 7])
    assert list(f.columns) == ["p", "q", "r_0", "r_1", "r_2", "r_3"] and list(f.index) == [5, 6, 7]


def test_progress_bar_counts_rows(capsys, mlp):
    pytest.importorskip("tqdm")
    graphrt.score(mlp, rows(250), batch_size=100, progress=True)
    err = capsys.readouterr().err
    assert "250/250" in err


def test_score_a_frame_of_strings_and_numbers_through_a_converted_pipeline():
    """A scikit-learn ColumnTransformer (one-hot strings, imputed and scaled numbers) and a
    classifier, converted by skl2onnx with its ZipMap: scored from a DataFrame in batches,
    labels and probabilities as the pipeline's own."""
    sk = pytest.importorskip("sklearn")
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    assert sk
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({"size": rng.choice(["S", "M", "L"], n), "colour": rng.choice(["red", "blue"], n),
                       "x": rng.normal(size=n).astype(np.float32),
                       "y": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n)).astype(np.float32)})
    target = (df["x"] + (df["size"] == "L") > 0.5).astype(int)
    pipe = make_pipeline(ColumnTransformer([
        ("cat", OneHotEncoder(handle_unknown="ignore"), ["size", "colour"]),
        ("num", make_pipeline(SimpleImputer(), StandardScaler()), ["x", "y"])]),
        LogisticRegression()).fit(df, target)
    types = [("size", StringTensorType([None, 1])), ("colour", StringTensorType([None, 1])),
             ("x", FloatTensorType([None, 1])), ("y", FloatTensorType([None, 1]))]
    onx = skl2onnx.convert_sklearn(pipe, initial_types=types,
                                   target_opset={"": 17, "ai.onnx.ml": 3})
    got = graphrt.score(onx, df, batch_size=64, progress=False)
    assert got["output_label"].tolist() == pipe.predict(df).tolist()
    probs = got["output_probability"]
    assert isinstance(probs, list) and len(probs) == n
    np.testing.assert_allclose([[p[0], p[1]] for p in probs], pipe.predict_proba(df),
                               rtol=1e-5, atol=1e-6)
    frame = to_frame(got)
    assert list(frame.columns) == ["output_label", "output_probability_0", "output_probability_1"]
