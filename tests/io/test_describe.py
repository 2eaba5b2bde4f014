"""The server's view of a data file: its shape and labels, never its values."""

import argparse

import numpy as np
import pytest

from asyos.cli import job as job_module
from asyos.cli.job import load_job
from asyos.cli.run import add_run_arguments
from asyos.io.data import load_features
from asyos.io.describe import FeatureShape, describe_features
from asyos.streams import save_feature_major
from asyos.streams.csc_file import save_csc


@pytest.fixture
def files(tmp_path):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    X = rng.standard_normal((25, 9)) * (rng.random((25, 9)) < 0.4)
    X[:, -1] = 0.0   # an empty last column: p still counts it in a table
    y = np.where(rng.random(25) < 0.5, 1.0, -1.0)
    np.savetxt(tmp_path / "t.csv", np.c_[X, y], delimiter=",")
    np.savetxt(tmp_path / "plain.csv", X, delimiter=",")
    dump_svmlight_file(X[:, :-1], y, str(tmp_path / "t.svm"), zero_based=False)
    save_feature_major(tmp_path / "X.npy", X)
    import scipy.sparse as sp

    save_csc(tmp_path / "X.csc", sp.csc_matrix(X), y)
    return tmp_path, X, y


@pytest.mark.parametrize("name, column", [("t.csv", -1), ("plain.csv", None),
                                          ("t.svm", None), ("X.npy", None),
                                          ("X.csc", None)])
def test_shape_and_labels_match_what_the_workers_load(files, name, column):
    d, _, _ = files
    shape, labels = describe_features(d / name, label_column=column)
    stream, expected = load_features(d / name, label_column=column)
    assert (shape.n_samples, shape.n_features) == (stream.n_samples, stream.n_features)
    if expected is None:
        assert labels is None
    else:
        np.testing.assert_array_equal(labels, expected)


def test_a_product_space_is_counted_and_named_without_its_columns(files):
    d, _, _ = files
    shape, _ = describe_features(d / "t.svm", degree=2)
    stream, _ = load_features(d / "t.svm", degree=2)
    assert shape.n_features == stream.n_features == 8 + 36
    picks = [0, 7, 8, 20, 43]
    assert shape.names(picks) == stream.names(picks)
    assert FeatureShape(5, 9).names([1, 2]) is None


def test_the_server_never_loads_feature_columns(files, monkeypatch):
    d, _, y = files

    def refuse(*args, **kwargs):
        raise AssertionError("the server read the features")

    # text and svmlight are parsed for their shape and labels, never into a stream
    monkeypatch.setattr(job_module, "load_features", refuse)
    monkeypatch.setattr("asyos.io.data._load_text", refuse)
    monkeypatch.setattr("asyos.io.data._load_svmlight", refuse)
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    for flags in (["--data", str(d / "t.csv"), "--label-column", "-1"],
                  ["--data", str(d / "t.svm")],
                  ["--data", str(d / "t.svm"), "--degree", "2"]):
        args = parser.parse_args([*flags, "-s", "3", "--loss", "squared_hinge"])
        job = load_job(args, features=False)
        assert isinstance(job.stream, FeatureShape) and job.stream.n_samples == 25
        np.testing.assert_array_equal(job.y, y)
