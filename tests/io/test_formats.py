"""Every input format against the same in-memory data: identical selection.

The data are rounded to 6 decimals so that every text format (csv, svmlight) holds
them exactly; each file is then read by ``load_features``/``load_labels`` and by the
estimators' ``fit_stream``, and must give the selection (and weights) of ``fit_os``
and ``fit`` on the arrays themselves.
"""

import h5py
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from asyos import InputError, OnlineSubstitutionRegressor, fit_os
from asyos.io.data import load_features, load_labels
from asyos.streams import HDF5Stream, NpyStream

N, P, S = 50, 40, 4


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = np.round(rng.standard_normal((N, P)), 6)
    X[np.abs(X) < 0.3] = 0.0                      # some zeros: svmlight drops them
    y = np.round(X[:, [2, 9, 21, 30]] @ [1.5, -2.0, 1.0, 2.5], 6)
    return X, y


@pytest.fixture(scope="module")
def files(data, tmp_path_factory):
    X, y = data
    d = tmp_path_factory.mktemp("formats")
    np.save(d / "X.npy", X)
    np.save(d / "Xf.npy", np.asfortranarray(X))
    np.save(d / "y.npy", y)
    np.savetxt(d / "X.csv", X, delimiter=",", fmt="%.6f")
    np.savetxt(d / "Xy.csv", np.column_stack([y, X]), delimiter=",", fmt="%.6f")
    np.savetxt(d / "X.tsv", X, delimiter="\t", fmt="%.6f")
    np.savetxt(d / "y.txt", y, fmt="%.6f")
    dump_svmlight_file(X, y, str(d / "d.svm"), zero_based=True)
    with h5py.File(d / "d.h5", "w") as f:
        f["X"] = X
        f["y"] = y
        f.create_dataset("group/columns", data=X, chunks=(N, 4))
    return d


@pytest.fixture(scope="module")
def reference(data):
    X, y = data
    return fit_os(X, y, S, epochs=3, rule="fitted")


FEATURES = [("X.npy", None), ("Xf.npy", None), ("X.csv", None), ("X.tsv", None),
            ("Xy.csv", 0), ("d.svm", None), ("d.h5", None), ("d.h5:group/columns", None)]


@pytest.mark.parametrize("name, label_column", FEATURES)
def test_every_feature_file_selects_what_the_array_selects(files, data, reference, name,
                                                           label_column):
    stream, labels = load_features(files / name, label_column=label_column)
    assert (stream.n_samples, stream.n_features) == (N, P)
    if labels is not None:   # svmlight, HDF5 with a y dataset, the csv label column
        np.testing.assert_array_equal(labels, data[1])
    # the rule named: "auto" would run the paper's on the sparse svmlight stream
    result = fit_os(stream, data[1], S, epochs=3, rule="fitted")
    np.testing.assert_array_equal(result.selected, reference.selected)
    np.testing.assert_allclose(result.weights, reference.weights, rtol=1e-12)


@pytest.mark.parametrize("name", ["y.npy", "y.txt", "d.svm", "d.h5", "d.h5:y",
                                  "Xy.csv"])
def test_labels_come_from_any_format(files, data, name):
    column = 0 if name == "Xy.csv" else None
    np.testing.assert_array_equal(load_labels(files / name, column=column), data[1])


@pytest.mark.parametrize("source", ["dense", "fortran", "csr", "csc", "memmap", "hdf5"])
def test_the_estimator_reads_arrays_matrices_and_memory_maps_alike(files, data, source):
    X, y = data
    inputs = {"dense": lambda: X, "fortran": lambda: np.asfortranarray(X),
              "csr": lambda: sp.csr_matrix(X), "csc": lambda: sp.csc_matrix(X),
              "memmap": lambda: NpyStream(files / "Xf.npy"),
              "hdf5": lambda: HDF5Stream(files / "d.h5", "X", shuffle=True, seed=3)}
    expected = OnlineSubstitutionRegressor(S).fit(X, y)
    model = OnlineSubstitutionRegressor(S)
    if source in ("memmap", "hdf5"):
        model.fit_stream(inputs[source](), y)
    else:
        model.fit(inputs[source](), y)
    if source == "hdf5":   # a shuffled order: same support, weights to the tolerance
        np.testing.assert_array_equal(model.support_, expected.support_)
        np.testing.assert_allclose(model.coef_, expected.coef_, atol=1e-3)
    else:   # sparse input fits the intercept in the model instead of centring:
        rtol = 1e-9 if source in ("csr", "csc") else 1e-12   # equal to rounding
        np.testing.assert_array_equal(model.support_, expected.support_)
        np.testing.assert_allclose(model.coef_, expected.coef_, rtol=rtol)
        assert model.intercept_ == pytest.approx(expected.intercept_, rel=rtol,
                                                 abs=1e-12 if rtol == 1e-12 else 1e-9)


@pytest.mark.parametrize("name, y", [("d.svm", None), ("d.h5", None), ("X.csv", "y.npy"),
                                     ("Xf.npy", "y.txt")])
def test_fit_stream_takes_paths_and_the_labels_files_carry(files, data, name, y):
    expected = OnlineSubstitutionRegressor(S).fit(*data)
    model = OnlineSubstitutionRegressor(S).fit_stream(
        files / name, None if y is None else str(files / y))
    np.testing.assert_array_equal(model.support_, expected.support_)
    # svmlight is read sparse: the intercept in the model instead of centring
    np.testing.assert_allclose(model.coef_, expected.coef_,
                               rtol=1e-9 if name == "d.svm" else 1e-12)
    assert model.n_features_in_ == P


def test_format_errors_name_the_file(files):
    with pytest.raises(InputError, match="no dataset 'Z'; it has X, group/columns, y"):
        load_features(f"{files / 'd.h5'}:Z")
    with pytest.raises(InputError, match="no label column 41"):
        load_features(files / "Xy.csv", label_column=41)
    with pytest.raises(InputError, match="label column is for csv"):
        load_features(files / "X.npy", label_column=0)
    with pytest.raises(InputError, match="no labels in the file; give y"):
        OnlineSubstitutionRegressor(S).fit_stream(files / "X.npy")
