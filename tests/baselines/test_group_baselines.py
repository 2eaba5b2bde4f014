"""Sparse group Lasso, OMP and gOMP (the SGHT experiment's baselines) against their
optimality conditions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos import InputError
from asyos.baselines.group import (
    fit_gomp,
    fit_omp,
    fit_sparse_group_lasso,
    sparse_group_prox,
)


def kkt_gap(r, x, group_of, alpha):
    """Largest violation of r ∈ ∂(α‖·‖₁ + (1−α)Σ√|G|‖·_G‖)(x), group by group."""
    worst = 0.0
    for g in np.unique(group_of):
        rg, xg = r[group_of == g], x[group_of == g]
        weight = (1 - alpha) * np.sqrt(rg.size)
        if np.any(xg != 0):
            s = rg - weight * xg / np.linalg.norm(xg)          # must be α·∂‖x_G‖₁
            on = xg != 0
            worst = max(worst, np.max(np.abs(s[on] - alpha * np.sign(xg[on])),
                                      initial=0.0),
                        np.max(np.abs(s[~on]) - alpha, initial=0.0))
        else:
            inner = rg - alpha * np.clip(rg / alpha, -1, 1) if alpha > 0 else rg
            worst = max(worst, np.linalg.norm(inner) - weight)
    return worst


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), alpha=st.sampled_from([0.0, 0.3, 0.5, 1.0]),
       scale=st.floats(0.01, 3.0))
def test_prox_meets_its_optimality_conditions(seed, alpha, scale):
    rng = np.random.default_rng(seed)
    group_of = rng.integers(0, 4, 12)
    group_of = np.unique(group_of, return_inverse=True)[1]
    sizes = np.bincount(group_of).astype(float)
    z = rng.standard_normal(12) * 2
    x = sparse_group_prox(z, 1.0, scale, alpha, group_of, sizes)
    assert kkt_gap((z - x) / scale, x, group_of, alpha) <= 1e-9


def test_sparse_group_lasso_solution_meets_kkt():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 30))
    groups = np.repeat(np.arange(6), 5)
    y = X[:, :3] @ np.array([2.0, -1.0, 1.5]) + 0.1 * rng.standard_normal(60)
    lam = 0.05
    selection = fit_sparse_group_lasso(X, y, groups, lam, alpha=0.5, tol=1e-12,
                                       max_iter=20000)
    w = np.zeros(30)
    w[selection.selected] = selection.weights
    gradient = X.T @ (X @ w - y) / 60
    assert kkt_gap(-gradient / lam, w, groups, 0.5) <= 1e-6
    assert set(groups[selection.selected]) == {0}


def test_omp_and_gomp_refit_least_squares_and_find_the_truth():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((80, 40))
    groups = np.repeat(np.arange(8), 5)
    w = np.zeros(40)
    w[[0, 1, 2, 15, 16]] = [3.0, -2.0, 2.5, 2.0, -3.0]
    y = X @ w
    omp = fit_omp(X, y, 5)
    np.testing.assert_array_equal(omp.selected, [0, 1, 2, 15, 16])
    np.testing.assert_allclose(omp.weights, w[omp.selected], atol=1e-10)
    noisy = y + 0.1 * rng.standard_normal(80)
    gomp = fit_gomp(X, noisy, groups, 2)
    assert set(groups[gomp.selected]) == {0, 3} and gomp.selected.size == 10
    residual = noisy - X[:, gomp.selected] @ gomp.weights
    assert np.max(np.abs(X[:, gomp.selected].T @ residual)) <= 1e-8 * np.abs(y).sum()


@pytest.mark.parametrize("call, message", [
    (lambda X, y: fit_sparse_group_lasso(X, y, np.zeros(10), 0.1, alpha=2.0), "alpha"),
    (lambda X, y: fit_sparse_group_lasso(X, y, np.zeros(10), -1.0), "lam"),
    (lambda X, y: fit_gomp(X, y, np.arange(10) % 2, 3), r"k must be in \[1, 3\)"),
    (lambda X, y: fit_omp(X, y, 11), "s must be"),
])
def test_bad_input_raises_input_error(call, message):
    with pytest.raises(InputError, match=message):
        call(np.ones((5, 10)), np.ones(5))


@pytest.mark.parametrize("case, n_features", [(1, 18), (2, 60)])
def test_experiment_counts_add_up_to_the_truth(case, n_features):
    from asyos.experiments.sght import run_case

    rows = run_case(case, 0, 0, quick=True, only=("gOMP", "Proj-GD"))
    assert [row["method"] for row in rows] == ["Proj-GD", "gOMP"]
    for row in rows:       # NO − FP + FN = the true count (as in the paper's Table 3)
        assert row["grp_NO"] - row["grp_FP"] + row["grp_FN"] == 6
        assert row["feat_NO"] - row["feat_FP"] + row["feat_FN"] == n_features
