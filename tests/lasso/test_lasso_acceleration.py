"""SAIF's accelerations: extrapolation weights (Celer's dual extrapolation, Anderson
acceleration of CD), the best dual point kept, score bounds that spare columns in a
scan, and the whole path on a Toeplitz-correlated design against scikit-learn."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import Lasso as SkLasso

from asyos import lasso_path
from asyos.lasso.path import check_xy, make_design, solve_path
from asyos.lasso.saif import WS_MIN
from asyos.lasso.screening import (
    K_EXTRA,
    DualPoint,
    ScoreBounds,
    anderson_step,
    bounded_scores,
    dual_point,
    dual_value,
    extrapolation_weights,
    penalty,
)


def _toeplitz(n, p, rho=0.9, seed=0):
    """Rows N(0, Σ), Σ_ij = ρ^|i−j|, y from 10 features plus noise."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, p))
    X[:, 0] = rng.standard_normal(n)
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1 - rho * rho) * rng.standard_normal(n)
    w = np.zeros(p)
    w[rng.choice(p, 10, replace=False)] = rng.choice([-1.0, 1.0], 10)
    return X, X @ w + 0.3 * rng.standard_normal(n)


def _objective(X, y, w, lam):
    r = y - X @ w
    return 0.5 * r @ r + lam * np.abs(w).sum()


def _dual(X, y, r, lam):
    """D(θ) at θ = r/max(λ, ‖Xᵀr‖_∞), any r: a dual feasible point."""
    t = lam / max(lam, np.abs(X.T @ r).max())
    return 0.5 * y @ y + t * r @ y - 0.5 * t * t * r @ r


# -- extrapolation ----------------------------------------------------------------------

def test_extrapolation_lands_far_closer_to_the_fixed_point_than_the_iterates():
    """x_{k+1} = A x_k + b with K − 1 slow modes and fast ones: the K differences
    nearly span the slow error, so Σ c_k x_k is much closer to the fixed point than
    the last iterate (Celer's argument for CD's residuals)."""
    ratios = []
    for seed in range(50):
        rng = np.random.default_rng(seed)
        dim = 20
        q, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
        eig = np.concatenate([rng.uniform(0.3, 0.95, K_EXTRA - 1),
                              rng.uniform(-0.05, 0.05, dim - K_EXTRA + 1)])
        a = q @ np.diag(eig) @ q.T
        b = rng.standard_normal(dim)
        fixed = np.linalg.solve(np.eye(dim) - a, b)
        x = rng.standard_normal(dim)
        for _ in range(3):                               # let the fast modes die
            x = a @ x + b
        hist = np.empty((K_EXTRA + 1, dim))
        hist[0] = x
        for k in range(K_EXTRA):
            hist[k + 1] = a @ hist[k] + b
        c = np.empty(K_EXTRA)
        assert extrapolation_weights(hist, c)
        assert c.sum() == pytest.approx(1.0)
        ratios.append(np.linalg.norm(c @ hist[:-1] - fixed)
                      / np.linalg.norm(hist[-1] - fixed))
    assert np.median(ratios) <= 1e-2 and max(ratios) <= 0.5


def test_extrapolation_refuses_a_singular_history():
    hist = np.tile(np.arange(4.0), (K_EXTRA + 1, 1))          # no movement at all
    c = np.full(K_EXTRA, 7.0)
    assert not extrapolation_weights(hist, c)
    assert np.all(c == 7.0)


def _cd_epoch(X, y, beta, r, lam):
    for j in range(X.shape[1]):
        old = beta[j]
        z = old + X[:, j] @ r / (X[:, j] @ X[:, j])
        beta[j] = np.sign(z) * max(abs(z) - lam / (X[:, j] @ X[:, j]), 0.0)
        r -= (beta[j] - old) * X[:, j]


def test_anderson_step_never_raises_the_primal_and_keeps_the_residual_exact():
    X, y = _toeplitz(40, 30)
    d = make_design(X)
    lam = 0.05 * d.lam_max(y)
    beta, r = np.zeros(30), y.copy()
    units = np.arange(30)
    hist_b, hist_r = np.empty((K_EXTRA + 1, 30)), np.empty((K_EXTRA + 1, 40))
    count, accepted = 0, 0
    for _ in range(60):
        _cd_epoch(X, y, beta, r, lam)
        before = _objective(X, y, beta, lam)
        old = beta.copy()
        count = anderson_step(d.M, y, beta, r, lam, d.gptr, d.w, units, 30, hist_b,
                              hist_r, count)
        assert _objective(X, y, beta, lam) <= before + 1e-12
        accepted += not np.array_equal(old, beta)
        np.testing.assert_allclose(r, y - X @ beta, atol=1e-10)
    assert accepted > 0                   # it did act on this correlated design


def test_dual_point_keeps_the_best_feasible_point():
    X, y = _toeplitz(40, 30, seed=1)
    d = make_design(X)
    lam = 0.1 * d.lam_max(y)
    beta, r = np.zeros(30), y.copy()
    units = np.arange(30)
    score, spare = np.empty(30), np.empty(30)
    dual = DualPoint(np.empty(40), np.zeros((K_EXTRA + 1, 40)))
    best, scale = -np.inf, lam
    for check in range(12):
        _cd_epoch(X, y, beta, r, lam)
        new, scale = dual_point(d.M, y, r, lam, d.gptr, d.w, units, 30, score, spare,
                                dual, check, best, scale)
        assert new >= best
        best = new
        theta = dual.rho / scale
        assert np.abs(X.T @ theta).max() <= 1 + 1e-12          # feasible
        assert dual_value(y, dual.rho, lam, scale) == pytest.approx(best)
        np.testing.assert_allclose(score, np.abs(X.T @ dual.rho), rtol=1e-12)
        assert best >= dual_value(y, r, lam, max(lam, np.abs(X.T @ r).max())) - 1e-12
    primal = 0.5 * r @ r + lam * penalty(beta, d.gptr, d.w, units, 30)
    assert 0.0 <= primal - best


# -- score bounds -------------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.05, 1.5), st.floats(1e-4, 1.0))
def test_bounded_scores_give_the_exact_maximum_and_valid_bounds(seed, ratio, step):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((15, 40)) * rng.uniform(0.1, 3.0, 40)
    d = make_design(X)
    rho = rng.standard_normal(15)
    bounds = ScoreBounds(np.abs(X.T @ rho), rho.copy())
    fresh = np.empty(40, dtype=bool)
    for _ in range(4):
        rho = rho + step * rng.standard_normal(15)
        lam = ratio * np.abs(X.T @ rho).max()
        top = bounded_scores(d.M, rho, lam, d.gptr, d.w, d.unit_norm, bounds, fresh)
        true = np.abs(X.T @ rho)
        assert top == pytest.approx(max(lam, true.max()), rel=1e-12)
        assert np.all(bounds.scores >= true - 1e-12 * true.max())
        np.testing.assert_allclose(bounds.scores[fresh], true[fresh], rtol=1e-12,
                                   atol=1e-12 * true.max())
        np.testing.assert_array_equal(bounds.anchor, rho)


# -- the whole solver ---------------------------------------------------------------------

@pytest.mark.parametrize("sparse", [False, True])
def test_toeplitz_path_meets_its_certificate_and_matches_sklearn(sparse):
    """A correlated path down to 10⁻³·λ_max: every λ's gap, measured here with a
    dual point from the solver's own residual or a tight reference solve's, is at
    most tol·‖y‖², and the objective is scikit-learn's at tight tolerance."""
    X, y = _toeplitz(80, 400, seed=2)
    if sparse:
        X[np.abs(X) < 0.7] = 0.0
    Xa = sp.csc_matrix(X) if sparse else X
    n, tol = X.shape[0], 1e-8
    alphas, coefs, gaps = lasso_path(Xa, y, n_alphas=25, eps=1e-3, tol=tol)
    _, tight, _ = lasso_path(Xa, y, alphas=alphas, tol=1e-11, max_iter=100_000)
    assert np.all(gaps * n <= tol * y @ y)
    for k, alpha in enumerate(alphas):
        lam = n * alpha
        w, ref = coefs[:, k], tight[:, k]
        dual = max(_dual(X, y, y - X @ w, lam), _dual(X, y, y - X @ ref, lam))
        assert _objective(X, y, w, lam) - dual <= tol * y @ y
    for k in (5, 15, 24):
        sk = SkLasso(alpha=alphas[k], fit_intercept=False, tol=1e-14,
                     max_iter=1_000_000).fit(X, y).coef_
        assert _objective(X, y, coefs[:, k], n * alphas[k]) == pytest.approx(
            _objective(X, y, sk, n * alphas[k]), rel=1e-7)


def test_warm_path_reports_the_same_certificate_as_cold_solves():
    X, y = _toeplitz(60, 300, seed=3)
    X, y = check_xy(X, y)
    d = make_design(X)
    lams = d.lam_max(y) * np.geomspace(1.0, 1e-2, 12)
    eps = 1e-9 * y @ y
    warm = solve_path(d, y, lams, 1e-9)
    for k in (3, 7, 11):
        cold = solve_path(d, y, lams[k:k + 1], 1e-9)
        assert warm.gaps[k] <= eps and cold.gaps[0] <= eps
        assert _objective(X, y, warm.coefs[k], lams[k]) == pytest.approx(
            _objective(X, y, cold.coefs[0], lams[k]), rel=1e-8)


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_working_set_stays_within_twice_the_support(seed):
    """SAIF's A at exit is at most WS_MIN + twice the larger of this λ's and the last
    λ's support (SAIF's m_k = |A| batches reached 108–215 units for 72–79 nonzeros
    on these paths)."""
    X, y = _toeplitz(80, 400, seed=seed)
    X, y = check_xy(X, y)
    d = make_design(X)
    lams = d.lam_max(y) * np.geomspace(1.0, 1e-3, 25)
    res = solve_path(d, y, lams, 1e-8)
    nnz = np.count_nonzero(res.coefs, axis=1)
    before = np.concatenate([[0], nnz[:-1]])
    assert np.all(res.n_kept <= WS_MIN + 2 * np.maximum(before, nnz))
    assert np.all(res.gaps <= 1e-8 * y @ y)
