"""The fractional models frac(1,2) and frac(2,1) (our reconstruction): monotone
reweighting, stationarity, bi-level against group selection, recovery."""

import warnings

import numpy as np
import pytest

from asyos import InputError
from asyos.baselines.fractional import fit_frac, frac_objective, frac_solve
from asyos.errors import ConvergenceWarning


def grouped_problem(seed, n=100, groups=10, size=6, active=3, per_group=2, noise=0.0):
    rng = np.random.default_rng(seed)
    group_of = np.repeat(np.arange(groups), size)
    truth = np.zeros(groups * size)
    for g in rng.choice(groups, active, replace=False):
        where = g * size + rng.choice(size, per_group, replace=False)
        truth[where] = rng.uniform(2, 4, per_group) * rng.choice([-1.0, 1.0], per_group)
    X = rng.standard_normal((n, groups * size))
    return X, X @ truth + noise * rng.standard_normal(n), group_of, truth


@pytest.mark.parametrize("q", [1, 2])
@pytest.mark.parametrize("seed", range(5))
def test_reweighting_never_raises_the_smoothed_objective(seed, q):
    X, y, group_of, _ = grouped_problem(seed, n=50, noise=1.0)
    path = frac_solve(X, y, group_of, 0.3, q)
    assert len(path.objective) >= 3
    assert np.all(np.diff(path.objective) <= 0)
    assert path.objective[-1] < path.objective[0]
    assert path.objective[-1] == pytest.approx(
        frac_objective(X, y, path.w, group_of, 0.3, q, 1e-3))


@pytest.mark.parametrize("q", [1, 2])
def test_the_last_iterate_is_stationary_for_its_own_weights(q):
    # a fixed point of the reweighting: x solves min f + λ Σ ω_G(x) ‖x_G‖_q
    X, y, group_of, _ = grouped_problem(3, n=80, noise=0.5)
    lam, eps = 0.3, 1e-3
    path = frac_solve(X, y, group_of, lam, q, eps=eps, max_reweight=200, tol=1e-12,
                      max_iter=20000)
    w = path.w
    r = X.T @ (y - X @ w) / X.shape[0]          # −∇f
    for g in range(10):
        block, rg = w[group_of == g], r[group_of == g]
        norm = np.abs(block).sum() if q == 1 else np.linalg.norm(block)
        c = lam * 0.5 / np.sqrt(norm + eps)
        if norm == 0:   # 0 ∈ −r_G + c·∂‖0‖_q: the dual norm of r_G at most c
            dual = np.abs(rg).max() if q == 1 else np.linalg.norm(rg)
            assert dual <= c * (1 + 1e-4)
        elif q == 2:
            np.testing.assert_allclose(rg, c * block / norm, atol=1e-4 * c)
        else:
            on = block != 0
            np.testing.assert_allclose(rg[on], c * np.sign(block[on]), atol=1e-4 * c)
            assert np.all(np.abs(rg[~on]) <= c * (1 + 1e-4))


@pytest.mark.parametrize("seed", range(5))
def test_bilevel_prunes_features_and_group_keeps_groups_whole(seed):
    X, y, group_of, truth = grouped_problem(seed, noise=0.1)
    true_groups = set(group_of[truth != 0])
    bilevel = fit_frac(X, y, group_of, 0.3, 1)
    group = fit_frac(X, y, group_of, 0.3, 2)
    assert bilevel.name == "frac(1,2)" and group.name == "frac(2,1)"
    assert set(group_of[bilevel.selected]) == true_groups
    assert set(group_of[group.selected]) == true_groups
    # frac(2,1) keeps all 6 features of each chosen group, frac(1,2) only some
    assert group.selected.size == 6 * len(true_groups)
    assert bilevel.selected.size < group.selected.size
    assert set(np.flatnonzero(truth)) <= set(bilevel.selected)


def test_a_large_penalty_selects_nothing_and_bad_input_is_refused():
    X, y, group_of, _ = grouped_problem(0)
    assert fit_frac(X, y, group_of, 1e3, 1).selected.size == 0
    with pytest.raises(InputError, match="q must be"):
        frac_solve(X, y, group_of, 0.3, 3)
    with pytest.raises(InputError, match="eps"):
        frac_solve(X, y, group_of, 0.3, 1, eps=0.0)


@pytest.mark.parametrize("q", [1, 2])
def test_stopping_at_max_reweight_warns(q):
    X, y, group_of, _ = grouped_problem(0, n=50, noise=1.0)
    with pytest.warns(ConvergenceWarning, match=rf"frac\({q},{3 - q}\) stopped at "
                      r"max_reweight=1 "):
        assert not frac_solve(X, y, group_of, 0.3, q, max_reweight=1).converged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert frac_solve(X, y, group_of, 0.3, q).converged
