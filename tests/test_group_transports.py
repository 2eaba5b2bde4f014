"""Group-aware Asy-OS from the command line over real transports (issue 8): mpiexec
and ZeroMQ processes, the budgets (≤ s1 features, ≤ s2 groups) and the u-check."""

import json

import numpy as np
import pytest
from test_mpi import MPIEXEC, _mpiexec

from asyos.solvers.sequential import fit_os


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """X (60 × 120) in 15 groups of 8 (labels as text), y from groups 0, 4 and 8."""
    root = tmp_path_factory.mktemp("grouped")
    rng = np.random.default_rng(7)
    X = rng.standard_normal((60, 120))
    groups = np.repeat(np.arange(15), 8)
    w = np.zeros(120)
    w[[2, 5, 33, 36, 38, 65, 69]] = 1.5
    np.save(root / "X.npy", X)
    np.save(root / "y.npy", X @ w + 0.2 * rng.standard_normal(60))
    (root / "groups.txt").write_text("\n".join(f"pathway-{g:02d}" for g in groups))
    return root, X, groups


def _check(result, groups, s1, s2, q):
    asy = result["asy"]
    selected = np.asarray(result["selected"])
    assert selected.size <= s1 and len(set(groups[selected])) <= s2
    assert asy["groups_kept"] == len(set(groups[selected]))
    assert asy["n_workers"] == q and sum(asy["group_budgets"]) == s2
    assert asy["u_check_max_abs_diff"] < 1e-9
    return selected


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH")
def test_mpiexec_cli_keeps_budgets_and_one_worker_is_sequential(grouped, tmp_path):
    root, X, groups = grouped
    data = ["-m", "asyos.run", "--data", str(root / "X.npy"), "--labels",
            str(root / "y.npy"), "--groups", str(root / "groups.txt"), "--quiet"]
    out = tmp_path / "r.json"
    proc = _mpiexec(4, *data, "-s", "9", "--group-sparsity", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("group budgets [1, 1, 1]") == 1      # rank 0 reports
    _check(json.loads(out.read_text()), groups, 9, 3, 3)
    # q = 1, τ = 0, a fixed step: the sequential group-aware run
    proc = _mpiexec(2, *data, "-s", "6", "--group-sparsity", "2", "--staleness", "0",
                    "--eta", "0.3", "--m", "2", "--epochs", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    _check(result, groups, 6, 2, 1)
    sequential = fit_os(X, np.load(root / "y.npy"), 6, eta=0.3, m=2.0, epochs=3,
                        groups=groups, s2=2)
    np.testing.assert_array_equal(result["selected"], sequential.selected)
    np.testing.assert_allclose(result["weights"], sequential.weights, atol=1e-10)
    # more workers than the group budget: refused on every rank, one message
    proc = _mpiexec(4, *data, "-s", "9", "--group-sparsity", "2")
    assert proc.returncode == 2 and proc.stderr.count("asyos: error:") == 1
    assert "3 workers cannot share a group budget of s2 = 2" in proc.stderr
