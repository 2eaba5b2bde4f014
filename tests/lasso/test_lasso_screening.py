"""Lasso CD with gap-safe screening (Fercoq, Gramfort & Salmon 2015) and SAIF (Ren,
Huang, Huang & Qian 2018): gap identities, λ ≥ λ_max, agreement with scikit-learn,
safety of every screened feature against a high-precision solve, the exit certificate,
the path."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import Lasso as SkLasso

from asyos import lasso_path
from asyos.errors import InputError
from asyos.lasso.path import SCREENINGS, check_xy, make_design, solve_path
from asyos.lasso.saif import saif_cd
from asyos.lasso.screening import Iterate, ScoreBounds, Stopping, UnitSet, duality_gap


def _problem(kind, n=60, p=150, seed=0):
    """Random, correlated or near-duplicate designs, y with 6 true features."""
    rng = np.random.default_rng(seed)
    if kind == "correlated":
        base = rng.standard_normal((n, 1))
        X = 0.8 * base + 0.6 * rng.standard_normal((n, p))
    else:
        X = rng.standard_normal((n, p))
    if kind == "duplicates":
        X[:, 1::7] = X[:, 0::7][:, :X[:, 1::7].shape[1]] + 1e-2 * rng.standard_normal(
            (n, X[:, 1::7].shape[1]))
    w = np.zeros(p)
    w[rng.choice(p, 6, replace=False)] = rng.uniform(-2, 2, 6)
    return X, X @ w + 0.1 * rng.standard_normal(n)


def _reference(X, y, lam):
    """High-precision scikit-learn solve at λ = n·α."""
    n = X.shape[0]
    return SkLasso(alpha=lam / n, fit_intercept=False, tol=1e-14,
                   max_iter=1_000_000).fit(X, y).coef_


def _objective(X, y, w, lam):
    r = y - X @ w
    return 0.5 * r @ r + lam * np.abs(w).sum()


def _gap(X, y, w, lam):
    """P − D with θ = r / max(λ, ‖Xᵀr‖_∞) and D(θ) = ½‖y‖² − ½λ²‖θ − y/λ‖²."""
    r = y - X @ w
    theta = r / max(lam, np.abs(X.T @ r).max())
    dual = 0.5 * y @ y - 0.5 * lam ** 2 * np.sum((theta - y / lam) ** 2)
    return _objective(X, y, w, lam) - dual


# -- gap identities and dual feasibility ----------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.01, 2.0))
def test_gap_forms_agree_and_are_nonnegative(seed, ratio):
    rng = np.random.default_rng(seed)
    X, y = rng.standard_normal((12, 20)), rng.standard_normal(12)
    lam = ratio * np.abs(X.T @ y).max()
    w = rng.standard_normal(20) * (rng.random(20) < 0.4)
    r = y - X @ w
    scale = max(lam, np.abs(X.T @ r).max())
    theta = r / scale
    assert np.abs(X.T @ theta).max() <= 1 + 1e-12            # feasible
    g3 = duality_gap(y, r, lam, np.abs(w).sum(), scale)
    g6 = 0.5 * lam ** 2 * np.sum((theta - r / lam) ** 2) + lam * (
        np.abs(w).sum() - theta @ X @ w)                     # two terms, each ≥ 0
    assert g3 == pytest.approx(_gap(X, y, w, lam), rel=1e-9, abs=1e-9)
    assert g3 == pytest.approx(g6, rel=1e-9, abs=1e-9)
    assert g3 >= 0.0


# -- λ ≥ λ_max ------------------------------------------------------------------------

@pytest.mark.parametrize("screening", SCREENINGS)
def test_zero_at_and_above_lambda_max_and_one_feature_just_below(screening):
    X, y = _problem("random")
    d = make_design(X)
    lam_max = d.lam_max(y)
    res = solve_path(d, y, [2 * lam_max, lam_max], 1e-10, screening)
    assert np.all(res.coefs == 0.0) and np.all(res.gaps == 0.0)
    assert np.all(res.epochs == 0)
    below = solve_path(d, y, [0.999 * lam_max], 1e-12, screening).coefs[0]
    np.testing.assert_array_equal(np.flatnonzero(below),
                                  [np.argmax(np.abs(X.T @ y))])


def test_saif_from_an_empty_active_set_stops_at_once_above_lambda_max():
    X, y = _problem("random")
    d = make_design(X)
    lam = 1.5 * d.lam_max(y)
    beta, r = np.zeros(X.shape[1]), y.copy()
    units, keep, scores = (np.zeros(X.shape[1], dtype=np.int64),
                           np.zeros(X.shape[1], dtype=bool), np.full(X.shape[1], np.inf))
    k, gap, epochs, scans = saif_cd(d.units, y, lam, Iterate(beta, r),
                                    UnitSet(units, keep), 0, ScoreBounds(scores, y.copy()),
                                    Stopping(1e-10 * y @ y, 100, 10), 0.5)
    assert (k, gap, epochs, scans) == (0, 0.0, 0, 1) and not beta.any()


# -- agreement, safety and the certificate ---------------------------------------------

@pytest.mark.parametrize("kind", ["random", "correlated", "duplicates", "sparse"])
@pytest.mark.parametrize("screening", SCREENINGS)
def test_matches_sklearn_screens_safely_and_certifies(kind, screening):
    if kind == "sparse":
        rng = np.random.default_rng(5)
        X = sp.random(60, 150, density=0.1, random_state=5, format="csc")
        y = X @ (rng.standard_normal(150) * (rng.random(150) < 0.05)) \
            + 0.1 * rng.standard_normal(60)
    else:
        X, y = _problem(kind, seed=1)
    X, y = check_xy(X, y)
    dense = X.toarray() if sp.issparse(X) else X
    d = make_design(X)
    tol = 1e-12
    # Near-twins at 0.01·λ_max need ~2·10⁵ CD epochs (and sklearn as many): the
    # other designs cover that ratio.
    for ratio in (0.9, 0.5, 0.1) if kind == "duplicates" else (0.9, 0.5, 0.1, 0.01):
        lam = ratio * d.lam_max(y)
        res = solve_path(d, y, [lam], tol, screening)
        w, ref = res.coefs[0], _reference(X, y, lam)
        assert _objective(dense, y, w, lam) == pytest.approx(
            _objective(dense, y, ref, lam), rel=1e-7)
        support = np.abs(ref) > 1e-8
        if kind != "duplicates":          # near-twins may split the weight any way
            np.testing.assert_array_equal(w != 0, support)
        screened = ~res.kept[0]
        assert np.all(np.abs(ref[screened]) <= 1e-8), (ratio, np.flatnonzero(screened))
        gap = _gap(dense, y, w, lam)
        assert gap <= tol * y @ y and res.gaps[0] == pytest.approx(gap, abs=1e-9)
        if screening == "saif" and ratio >= 0.1:       # SAIF stays small
            assert res.n_kept[0] <= 10 * support.sum() + 10


def test_screening_is_invisible_and_exit_set_is_near_the_equicorrelation_set():
    X, y = _problem("correlated", seed=3)
    d = make_design(X)
    lam = 0.2 * d.lam_max(y)
    runs = {s: solve_path(d, y, [lam], 1e-13, s) for s in SCREENINGS}
    for s in ("gap_safe", "saif"):
        np.testing.assert_allclose(runs[s].coefs[0], runs["none"].coefs[0], atol=1e-9)
    theta = (y - X @ runs["none"].coefs[0]) / lam
    near = np.abs(X.T @ theta) >= 1 - 1e-4
    assert runs["gap_safe"].kept[0].sum() <= near.sum()
    assert runs["gap_safe"].n_kept[0] < X.shape[1]


# -- the path -------------------------------------------------------------------------

@pytest.mark.parametrize("screening", SCREENINGS)
def test_warm_path_matches_cold_solves_and_sklearn_path(screening):
    from sklearn.linear_model import lasso_path as sk_path

    X, y = _problem("random", seed=4)
    alphas, coefs, gaps = lasso_path(X, y, n_alphas=12, eps=1e-2, tol=1e-12,
                                     screening=screening)
    n = X.shape[0]
    assert np.all(np.diff(alphas) < 0) and coefs.shape == (X.shape[1], 12)
    assert np.all(gaps * n <= 1e-12 * y @ y)
    d = make_design(X)
    for k in (1, 6, 11):
        cold = solve_path(d, y, [n * alphas[k]], 1e-12, screening).coefs[0]
        np.testing.assert_allclose(coefs[:, k], cold, atol=1e-7)
    _, sk_coefs, _ = sk_path(X, y, alphas=alphas, tol=1e-14, max_iter=100_000)
    for k in range(12):
        assert _objective(X, y, coefs[:, k], n * alphas[k]) == pytest.approx(
            _objective(X, y, sk_coefs[:, k], n * alphas[k]), rel=1e-7)


def test_saif_answer_does_not_depend_on_its_start_or_alpha0():
    X, y = _problem("correlated", seed=6)
    d = make_design(X)
    lam = 0.05 * d.lam_max(y)
    p = X.shape[1]
    answers = []
    for start, alpha0 in [([], 1.0), ([3, 7, 11], 0.1), (list(range(0, p, 2)), 0.5)]:
        beta, r = np.zeros(p), y.copy()
        units = np.zeros(p, dtype=np.int64)
        keep = np.zeros(p, dtype=bool)
        units[:len(start)] = start
        keep[start] = True
        saif_cd(d.units, y, lam, Iterate(beta, r), UnitSet(units, keep), len(start),
                ScoreBounds(np.full(p, np.inf), y.copy()),
                Stopping(1e-13 * y @ y, 100_000, 10), alpha0)
        answers.append(beta)
    for other in answers[1:]:
        np.testing.assert_allclose(other, answers[0], atol=1e-8)


# -- bad input ------------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda X, y: lasso_path(X[:, :0], y), "nonempty"),
    (lambda X, y: lasso_path(X, y[:-1]), "length n"),
    (lambda X, y: lasso_path(np.where(X > 2, np.nan, X), y), "finite"),
    (lambda X, y: lasso_path(X, y, screening="strong"), "screening"),
    (lambda X, y: lasso_path(X, y, alphas=[0.1, -1.0]), "alphas"),
    (lambda X, y: lasso_path(X, y, tol=0.0), "tol"),
    (lambda X, y: lasso_path(X, y, coef_init=np.zeros(3)), "coef_init"),
])
def test_bad_input_raises_input_error(call, match):
    X, y = _problem("random", n=10, p=8)
    with pytest.raises(InputError, match=match):
        call(X, y)
