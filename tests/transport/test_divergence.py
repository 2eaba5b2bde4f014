"""A diverging run (finite data, a step size far too large) ends with one line naming
the worker and exit status 2 on every carrier; nothing non-finite is written.

The step size is the paper's rule's (``--rule magnitude``); the fitted rule has none,
and refuses the same data at once: one of its columns' curvature overflows."""

import subprocess
import sys
import time

import numpy as np
import pytest
from test_mpi import MPIEXEC, ROOT, _mpiexec

import asyos
from asyos.errors import InputError


def _diverging(tmp_path):
    X = np.random.default_rng(0).standard_normal((40, 12))
    X[:, 3] *= 1e200                  # finite, but a step of η = 1 on it overflows
    np.save(tmp_path / "X.npy", np.asfortranarray(X))
    np.save(tmp_path / "y.npy", X[:, 0] - X[:, 1])
    return X, X[:, 0] - X[:, 1]


def _args(tmp_path, rule="magnitude"):
    return ["--data", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
            "-s", "4", "--eta", "1", "--rule", rule, "--quiet", "--out",
            str(tmp_path / "r.json")]


SAID = {"magnitude": ("NaN or inf", "diverged"), "fitted": ("overflows float64",)}


def _one_line_exit_2(proc, tmp_path, rule="magnitude"):
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("asyos")
             and "kernels" not in line]   # a cold cache's compile notice is no error
    assert len(lines) == 1 and any(said in lines[0] for said in SAID[rule]), lines
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("rule", ["magnitude", "fitted"])
@pytest.mark.parametrize("carrier", [[], ["--simulate", "2"]])
def test_sequential_and_simulated(tmp_path, carrier, rule):
    _diverging(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "asyos.run", *carrier,
                           *_args(tmp_path, rule)], capture_output=True, text=True,
                          timeout=120)
    _one_line_exit_2(proc, tmp_path, rule)


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH")
@pytest.mark.parametrize("rule", ["magnitude", "fitted"])
def test_mpi(tmp_path, rule):
    _diverging(tmp_path)
    proc = _mpiexec(3, "-m", "asyos.run", *_args(tmp_path, rule), cwd=ROOT)
    _one_line_exit_2(proc, tmp_path, rule)
    assert "worker" in proc.stderr


@pytest.mark.parametrize("rule", ["magnitude", "fitted"])
def test_zeromq_ends_instead_of_looping(tmp_path, rule):
    X, y = _diverging(tmp_path)
    start = time.monotonic()
    with pytest.raises(InputError, match=r"worker \d: .*(" + "|".join(SAID[rule]) + ")"):
        asyos.OnlineSubstitutionRegressor(n_features_to_select=4, n_workers=2,
                                          backend="zeromq", eta=1.0, timeout=120,
                                          fit_intercept=False, rule=rule).fit(X, y)
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("carrier", [[], ["--simulate", "2"]])
def test_values_whose_squares_overflow_are_refused_not_ignored(tmp_path, carrier):
    """With the default step size, ‖x‖²/n = inf would make η = 0 and the run learn
    nothing, silently: one line and exit 2 instead."""
    _diverging(tmp_path)
    args = [a for a in _args(tmp_path) if a not in ("--eta", "1")]
    proc = subprocess.run([sys.executable, "-m", "asyos.run", *carrier, *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "overflows float64" in proc.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH")
def test_values_whose_squares_overflow_are_refused_under_mpi(tmp_path):
    _diverging(tmp_path)
    X = np.random.default_rng(1).standard_normal((40, 12)) * 1e200   # every worker's
    np.save(tmp_path / "X.npy", np.asfortranarray(X))                # first block
    args = [a for a in _args(tmp_path) if a not in ("--eta", "1")]
    proc = _mpiexec(3, "-m", "asyos.run", *args, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert "overflows float64" in proc.stderr


def test_values_whose_squares_overflow_are_refused_over_zeromq():
    X = np.random.default_rng(1).standard_normal((40, 12)) * 1e200
    with pytest.raises(InputError, match="overflows float64"):
        asyos.OnlineSubstitutionRegressor(n_features_to_select=4, n_workers=2,
                                          backend="zeromq", timeout=120,
                                          fit_intercept=False).fit(X, X[:, 0] / 1e200)


def test_a_zeromq_worker_that_meets_unusable_data_ends_the_run_at_once(tmp_path):
    """``asyos server`` and two ``asyos worker`` processes: worker 1's shard holds the
    column whose curvature overflows under the fitted rule, found mid-run.  The worker
    tells the server (FAIL), so the run ends with its one line and exit 2 and nothing
    written, instead of losing the shard after the heartbeat timeout and writing a
    partial result with exit 3."""
    _diverging(tmp_path)
    from loopback import asyos, free_port

    endpoint = f"tcp://127.0.0.1:{free_port()}"
    server = asyos("server", "--bind", endpoint, "--workers", 2, "--labels",
                   tmp_path / "y.npy", "--out", tmp_path / "r.json", "-s", "4",
                   "--eta", "1", "--heartbeat-timeout", "60", "--quiet")
    workers = [asyos("worker", "--connect", endpoint, "--data", tmp_path / "X.npy",
                     "--shard", f"{t}/2", "-s", "4") for t in range(2)]
    try:
        _, err = server.communicate(timeout=50)   # well before the heartbeat timeout
        codes = [w.wait(timeout=30) for w in workers]
    finally:
        for proc in (server, *workers):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert server.returncode == 2, err
    lines = [line for line in err.splitlines() if line.startswith("asyos: error")]
    assert len(lines) == 1 and "worker 1" in lines[0] and "overflows" in lines[0], err
    assert codes == [2, 2]
    assert not (tmp_path / "r.json").exists()
