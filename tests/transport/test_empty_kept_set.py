"""A worker whose kept set ends empty: its shard holds only all-zero columns.  An
empty kept set is a valid state on every carrier (its FINAL carries no index, no
weight and a (0, n) column block): the run ends as sequential OS ends it, with exit
status 0, a result and no traceback.  X all zeros has nothing to select: every
carrier refuses it as sequential OS does (exit status 2 from the command line).  The
MPI carrier's own run is in tests/mpi/test_small_problems_mpi.py, the command line
under mpiexec in tests/transport/test_mpi.py."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import asyos
from asyos.errors import InputError
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


def _check(selected, weights):
    """What sequential OS gives on the same data: the truth and no all-zero column."""
    selected, weights = np.asarray(selected), np.asarray(weights)
    assert selected.size == weights.size <= S
    assert {0, 2} <= set(selected.tolist())
    assert np.all(selected % 2 == 0)   # none of the all-zero shard's columns


def test_sequential_os_the_reference():
    X, y = empty_shard_problem()
    result = fit_os(as_stream(X), y, S)
    _check(result.selected, result.weights)


def test_shared_memory_workers_end_with_an_empty_kept_set():
    X, y = empty_shard_problem()
    result = shared.run(as_stream(X), y, AsyConfig.build(S, 2, n_features=P))
    _check(result.selected, result.weights)
    assert not result.asy["partial"] and result.asy["u_check_max_abs_diff"] <= 1e-10


def test_the_simulator_ends_with_an_empty_kept_set():
    X, y = empty_shard_problem()
    result = fit_simulated(as_stream(X), y, S, 2)
    _check(result.selected, result.weights)


NOTHING = "there is nothing to select"
ZERO = np.zeros((N, P)), np.random.default_rng(0).standard_normal(N)


@pytest.mark.parametrize("fit", [
    lambda: fit_os(as_stream(ZERO[0]), ZERO[1], S),
    lambda: shared.run(as_stream(ZERO[0]), ZERO[1], AsyConfig.build(S, 2, n_features=P)),
    lambda: fit_simulated(as_stream(ZERO[0]), ZERO[1], S, 2)],
    ids=["sequential", "shared", "simulated"])
def test_x_all_zeros_is_refused_by_every_carrier(fit):
    with pytest.raises(InputError, match=NOTHING):
        fit()


@pytest.mark.parametrize("backend", ["shared", "zeromq", "simulated"])
def test_x_all_zeros_is_refused_by_the_estimators_with_two_workers(backend):
    model = asyos.OnlineSubstitutionRegressor(S, n_workers=2, backend=backend)
    with pytest.raises(InputError, match=NOTHING):
        model.fit(*ZERO)


@pytest.mark.parametrize("backend", ["shared", "zeromq", "simulated"])
def test_estimators_with_two_workers_end_with_an_empty_kept_set(backend):
    X, y = empty_shard_problem()
    model = asyos.OnlineSubstitutionRegressor(S, n_workers=2, backend=backend).fit(X, y)
    selected = np.flatnonzero(model.support_)
    _check(selected, model.coef_[selected])


@pytest.mark.parametrize("zero_all", [False, True], ids=["one shard all zeros",
                                                         "X all zeros"])
def test_cli_workers_exit_0_on_an_empty_kept_set_and_2_on_x_all_zeros(tmp_path,
                                                                       zero_all):
    X, y = ZERO if zero_all else empty_shard_problem()
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--workers", "2",
                           "--data", str(tmp_path / "X.npy"),
                           "--labels", str(tmp_path / "y.npy"), "-s", str(S),
                           "--quiet", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr
    if zero_all:
        assert proc.returncode == 2 and NOTHING in proc.stderr and not out.exists()
        return
    assert proc.returncode == 0, proc.stderr
    assert "error" not in proc.stderr
    result = json.loads(out.read_text())
    _check(result["selected"], result["weights"])
    assert not result["asy"]["partial"]
