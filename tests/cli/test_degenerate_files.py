"""Input that used to pass silently or with a traceback: labels that are all zero,
columns that are all zero, a binary file given to --config, a results JSON whose
arrays file is missing."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

import asyos
from asyos import load_result
from asyos.cli.main import main
from asyos.errors import DegenerateWarning, InputError
from asyos.io.results import write_result
from asyos.solvers.result import FitResult


@pytest.fixture
def zero_labels(tmp_path):
    X = np.random.default_rng(0).standard_normal((40, 12))
    np.save(tmp_path / "X.npy", np.asfortranarray(X))
    np.save(tmp_path / "y.npy", np.zeros(40))
    return X


def test_all_zero_labels_are_said_on_the_command_line(tmp_path, zero_labels):
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--data", "X.npy",
                           "--labels", "y.npy", "-s", "3", "--quiet"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "compil" not in line]
    assert said == ["asyos: warning: the labels are all zero, so every weight is 0 "
                    "and the selected features mean nothing (are these the right "
                    "labels?)"], proc.stderr


@pytest.mark.parametrize("y, words", [(0.0, "the labels are all zero"),
                                      (5.0, "y is constant")])
def test_all_zero_labels_warn_in_the_estimators(zero_labels, y, words):
    model = asyos.OnlineSubstitutionRegressor(n_features_to_select=3)
    with pytest.warns(DegenerateWarning, match=words + ".*every weight is 0"):
        model.fit(zero_labels, np.full(40, y))
    assert not np.any(model.coef_)


def test_labels_that_are_not_zero_warn_nothing(zero_labels):
    y = np.random.default_rng(1).standard_normal(40)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateWarning)
        asyos.OnlineSubstitutionRegressor(n_features_to_select=3).fit(zero_labels, y)


@pytest.fixture
def zero_columns(tmp_path):
    y = np.r_[np.zeros(30), np.ones(30)]
    np.save(tmp_path / "X.npy", np.zeros((60, 20)))
    np.save(tmp_path / "y.npy", y)
    return y


NOTHING = "there is nothing to select"


@pytest.mark.parametrize("front", [[], ["--loss", "logistic"], ["-s", "auto"],
                                   ["--workers", "2"], ["--simulate", "2"]])
def test_columns_that_are_all_zero_end_the_command_with_status_2(tmp_path, zero_columns,
                                                                 front):
    """Every column zero: once selected nothing, now an error on every front, and
    no results file (an empty selection with exit 0 looked like an answer)."""
    sizes = [] if "-s" in front else ["-s", "3"]
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--data", "X.npy",
                           "--labels", "y.npy", *sizes, *front, "--out", "r.json",
                           "--quiet"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert NOTHING in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("model", ["OnlineSubstitutionClassifier",
                                   "OnlineSubstitutionRegressor"])
def test_columns_that_are_all_zero_are_refused_by_the_estimators(zero_columns, sparse,
                                                                 model):
    import scipy.sparse

    X = scipy.sparse.csr_matrix((60, 20)) if sparse else np.zeros((60, 20))
    with pytest.raises(InputError, match=NOTHING):
        getattr(asyos, model)(n_features_to_select=3).fit(X, zero_columns)


def test_one_nonzero_column_is_enough_to_fit(zero_columns):
    X = np.zeros((60, 20))
    X[:, 7] = zero_columns - 0.5
    model = asyos.OnlineSubstitutionRegressor(n_features_to_select=3).fit(X,
                                                                         zero_columns)
    assert model.support_[7] and np.flatnonzero(model.coef_).tolist() == [7]


def test_a_binary_config_file_is_one_line(tmp_path, capsys):
    config = tmp_path / "settings.toml"
    config.write_bytes(b"sparsity = 3\n\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(SystemExit) as ended:
        main(["run", "--config", str(config)])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"--config {config}: not a TOML file" in err and "UTF-8" in err


def test_a_results_json_without_its_arrays_is_refused(tmp_path, capsys):
    out = tmp_path / "r.json"
    write_result(out, FitResult(selected=np.arange(2), weights=np.array([1.0, 2.0]),
                                objective=1.0, objective_per_epoch=[1.0]))
    (npz,) = tmp_path.glob("r.*.npz")
    npz.unlink()
    with pytest.raises(InputError, match=f"its arrays file {npz} is missing"):
        load_result(out)
    assert main(["inspect", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{npz} is missing" in err, err
