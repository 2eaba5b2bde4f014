"""A worker whose kept set ends empty: its shard holds only all-zero columns, or X is
all zeros.  An empty kept set is a valid state on every carrier (its FINAL carries no
index, no weight and a (0, n) column block): the run ends as sequential OS ends it,
with exit status 0, a result and no traceback.  The MPI carrier's own run is in
tests/mpi/test_small_problems_mpi.py, the command line under mpiexec in
tests/transport/test_mpi.py."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import asyos
from asyos.solvers.asy import AsyConfig
from asyos.solvers.sequential import fit_os
from asyos.solvers.simulator import fit_simulated
from asyos.streams import as_stream
from asyos.transport import shared

ROOT = Path(__file__).resolve().parents[2]
N, P, S = 100, 40, 4


def empty_shard_problem(q: int = 2, seed: int = 0):
    """Shard q − 1 of q (the features j ≡ q − 1 mod q at p < 128 q) all zeros; the
    truth, features 0 and 2, in the others."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, P))
    X[:, q - 1::q] = 0.0
    return X, X[:, [0, 2]] @ np.array([1.0, 2.0]) + 0.01 * rng.standard_normal(N)


def zero_problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    return np.zeros((N, P)), rng.standard_normal(N)


PROBLEMS = {"one shard all zeros": empty_shard_problem, "X all zeros": zero_problem}


def _check(name, selected, weights):
    """What sequential OS gives on the same data: nothing on an all-zero X, the truth
    and no all-zero column otherwise."""
    selected, weights = np.asarray(selected), np.asarray(weights)
    assert selected.size == weights.size <= S
    if name == "X all zeros":
        assert selected.size == 0
    else:
        assert {0, 2} <= set(selected.tolist())
        assert np.all(selected % 2 == 0)   # none of the all-zero shard's columns


@pytest.mark.parametrize("name", PROBLEMS)
def test_sequential_os_the_reference(name):
    X, y = PROBLEMS[name]()
    result = fit_os(as_stream(X), y, S)
    _check(name, result.selected, result.weights)


@pytest.mark.parametrize("name", PROBLEMS)
def test_shared_memory_workers_end_with_an_empty_kept_set(name):
    X, y = PROBLEMS[name]()
    result = shared.run(as_stream(X), y, AsyConfig.build(S, 2, n_features=P))
    _check(name, result.selected, result.weights)
    assert not result.asy["partial"] and result.asy["u_check_max_abs_diff"] <= 1e-10


@pytest.mark.parametrize("name", PROBLEMS)
def test_the_simulator_ends_with_an_empty_kept_set(name):
    X, y = PROBLEMS[name]()
    result = fit_simulated(as_stream(X), y, S, 2)
    _check(name, result.selected, result.weights)


@pytest.mark.parametrize("backend", ["shared", "zeromq", "simulated"])
@pytest.mark.parametrize("name", PROBLEMS)
def test_estimators_with_two_workers_end_with_an_empty_kept_set(name, backend):
    X, y = PROBLEMS[name]()
    model = asyos.OnlineSubstitutionRegressor(S, n_workers=2, backend=backend).fit(X, y)
    selected = np.flatnonzero(model.support_)
    _check(name, selected, model.coef_[selected])
    if name == "X all zeros":   # as with one worker: weights 0, the intercept ȳ
        one = asyos.OnlineSubstitutionRegressor(S).fit(X, y)
        assert np.all(model.coef_ == 0) and np.all(one.coef_ == 0)
        assert model.intercept_ == pytest.approx(one.intercept_) == \
            pytest.approx(y.mean())


@pytest.mark.parametrize("name", PROBLEMS)
def test_cli_workers_end_with_exit_0_and_a_result(tmp_path, name):
    X, y = PROBLEMS[name]()
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--workers", "2",
                           "--data", str(tmp_path / "X.npy"),
                           "--labels", str(tmp_path / "y.npy"), "-s", str(S),
                           "--quiet", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "error" not in proc.stderr
    result = json.loads(out.read_text())
    _check(name, result["selected"], result["weights"])
    assert not result["asy"]["partial"]
