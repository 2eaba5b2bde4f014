"""asyos.Lasso / GroupLasso / FusedLasso: scikit-learn conventions, the intercept, the
group Lasso against a plain proximal-gradient solve and the fused Lasso against an ADMM
solve written here."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Lasso as SkLasso
from sklearn.utils.estimator_checks import parametrize_with_checks

from asyos import FusedLasso, GroupLasso, Lasso, lasso_path
from asyos.errors import ConvergenceWarning as AsyosConvergenceWarning
from asyos.errors import InputError
from asyos.lasso.path import SCREENINGS, check_xy, make_design, solve_path
from asyos.lasso.saif import _tree_order, fused_design


@parametrize_with_checks([Lasso(), GroupLasso(), FusedLasso()])
def test_sklearn_conventions(estimator, check, sklearn_checks_env):
    check(estimator)


def _data(n=50, p=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, X @ rng.standard_normal(p) + 3.0 + 0.3 * rng.standard_normal(n)


# -- Lasso ----------------------------------------------------------------------------

@pytest.mark.parametrize("screening", SCREENINGS)
def test_lasso_with_intercept_matches_sklearn(screening):
    X, y = _data(p=30)
    ours = Lasso(alpha=0.1, tol=1e-12, screening=screening).fit(X, y)
    ref = SkLasso(alpha=0.1, tol=1e-14, max_iter=100_000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=1e-7)
    assert ours.intercept_ == pytest.approx(ref.intercept_, abs=1e-7)
    assert 0.0 <= ours.dual_gap_ <= 1e-12 * np.sum((y - y.mean()) ** 2) / len(y)


def test_sparse_input_without_intercept_matches_dense():
    X, y = _data(p=20)
    X[np.abs(X) < 0.8] = 0.0
    a = Lasso(alpha=0.05, fit_intercept=False, tol=1e-12).fit(sp.csr_matrix(X), y)
    b = Lasso(alpha=0.05, fit_intercept=False, tol=1e-12).fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-9)
    with pytest.raises(InputError, match="sparse"):
        FusedLasso().fit(sp.csr_matrix(X), y)


def _sparse_data(n=60, p=25, density=0.2, seed=1):
    rng = np.random.default_rng(seed)
    X = sp.random(n, p, density=density, format="csc", random_state=seed,
                  data_rvs=lambda k: rng.uniform(0.5, 2.0, k))
    return X, X @ rng.standard_normal(p) + 2.0 + 0.1 * rng.standard_normal(n)


@pytest.fixture
def no_densify(monkeypatch):
    """X (n rows) may not be densified: toarray/todense of any sparse matrix with n
    rows raises (a group's small Gram matrix is allowed)."""
    def guard(name, original):
        def refuse(self, *args, **kwargs):
            if self.shape[0] == guard.n:
                raise AssertionError(f"X was densified ({name})")
            return original(self, *args, **kwargs)
        return refuse
    guard.n = -1
    for cls in (sp.csc_matrix, sp.csr_matrix, sp.coo_matrix, sp.csc_array,
                sp.csr_array):
        for name in ("toarray", "todense"):
            monkeypatch.setattr(cls, name, guard(name, getattr(cls, name)))
    return guard


@pytest.mark.parametrize("screening", SCREENINGS)
@pytest.mark.parametrize("make", [
    lambda: Lasso(alpha=0.02, tol=1e-14),
    lambda: GroupLasso(alpha=0.02, groups=np.arange(25) // 5, tol=1e-14),
    lambda: GroupLasso(alpha=0.02, groups=np.arange(25) // 1, tol=1e-14),
], ids=["lasso", "group", "singletons"])
def test_sparse_with_intercept_matches_dense(make, screening, no_densify):
    X, y = _sparse_data()
    dense = make().set_params(screening=screening).fit(X.toarray(), y)
    no_densify.n = X.shape[0]
    sparse = make().set_params(screening=screening).fit(X, y)
    assert np.count_nonzero(sparse.coef_) > 0
    np.testing.assert_allclose(sparse.coef_, dense.coef_, atol=1e-8)
    assert sparse.intercept_ == pytest.approx(dense.intercept_, abs=1e-8)
    sparse.predict(X)


@pytest.mark.parametrize("screening", SCREENINGS)
def test_sparse_with_intercept_matches_sklearn(screening, no_densify):
    X, y = _sparse_data(n=80, p=40, seed=3)
    no_densify.n = X.shape[0]
    ours = Lasso(alpha=0.01, tol=1e-14, screening=screening).fit(X, y)
    ref = SkLasso(alpha=0.01, tol=1e-14, max_iter=100_000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=1e-7)
    assert ours.intercept_ == pytest.approx(ref.intercept_, abs=1e-7)


# -- group Lasso -----------------------------------------------------------------------

def _group_prox_grad(X, y, lam, groups, w, iters=20_000):
    """FISTA on ½‖y − Xβ‖² + λ Σ w_g‖β_g‖ (the oracle): step 1/‖X‖₂², block prox."""
    step = 1.0 / np.linalg.norm(X, 2) ** 2
    beta = v = np.zeros(X.shape[1])
    t = 1.0
    for _ in range(iters):
        z = v - step * (X.T @ (X @ v - y))
        new = np.zeros_like(z)
        for g, wg in zip(np.unique(groups), w):
            m = groups == g
            norm = np.linalg.norm(z[m])
            if norm > step * lam * wg:
                new[m] = (1 - step * lam * wg / norm) * z[m]
        t_new = (1 + np.sqrt(1 + 4 * t * t)) / 2
        v = new + (t - 1) / t_new * (new - beta)
        beta, t = new, t_new
    return beta


@pytest.fixture(scope="module")
def group_case():
    """Shuffled groups with unequal weights, and the oracle's answer (computed once)."""
    X, y = _data(p=24, seed=2)
    groups = np.repeat([3, 0, 2, 1, 5, 4], 4)[np.random.default_rng(0).permutation(24)]
    weights = np.array([1.0, 2.0, 1.5, 2.5, 1.0, 3.0])
    Xc, yc = X - X.mean(0), y - y.mean()
    lam = 0.2 * max(np.linalg.norm(Xc[:, groups == g].T @ yc) / wg
                    for g, wg in zip(range(6), weights))
    return X, y, groups, weights, lam, _group_prox_grad(Xc, yc, lam, groups, weights)


@pytest.mark.parametrize("screening", SCREENINGS)
def test_group_lasso_matches_proximal_gradient(screening, group_case):
    X, y, groups, weights, lam, ref = group_case
    est = GroupLasso(alpha=lam / X.shape[0], groups=groups, weights=weights,
                     tol=1e-14, screening=screening).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref, atol=1e-7)
    active = [g for g in range(6) if np.linalg.norm(ref[groups == g]) > 1e-9]
    assert 0 < len(active) < 6
    for g in set(range(6)) - set(active):
        assert np.all(est.coef_[groups == g] == 0.0)


def test_singleton_groups_reproduce_the_lasso():
    X, y = _data(p=15, seed=3)
    a = GroupLasso(alpha=0.2, groups=np.arange(15)[::-1], tol=1e-13).fit(X, y)
    b = Lasso(alpha=0.2, tol=1e-13).fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-10)


# -- fused Lasso -----------------------------------------------------------------------

def _fused_admm(X, y, lam, edges, iters=30_000, rho=1.0):
    """ADMM on ½‖y − Xβ‖² + λ‖Dβ‖₁ with the split d = Dβ (the oracle)."""
    D = np.zeros((len(edges), X.shape[1]))
    D[np.arange(len(edges)), edges[:, 0]] = 1.0
    D[np.arange(len(edges)), edges[:, 1]] = -1.0
    A = np.linalg.inv(X.T @ X + rho * D.T @ D)
    z = u = np.zeros(len(edges))
    for _ in range(iters):
        beta = A @ (X.T @ y + rho * D.T @ (z - u))
        dz = D @ beta + u
        z = np.sign(dz) * np.maximum(np.abs(dz) - lam / rho, 0.0)
        u = u + D @ beta - z
    return beta, D


def _random_tree(p, seed):
    rng = np.random.default_rng(seed)
    return np.array([[rng.integers(0, v), v] for v in range(1, p)])


def test_fused_transform_is_subtree_sums_and_preserves_the_objective():
    rng = np.random.default_rng(1)
    p, n = 9, 20
    X, y = rng.standard_normal((n, p)), rng.standard_normal(n)
    edges = _random_tree(p, 1)
    parent, order = _tree_order(p, edges)
    T = np.zeros((p, p))                # T[v, u] = 1 iff u is on v's path to the root
    for v in range(p):
        u = v
        while u != -1:
            T[v, u], u = 1.0, parent[u]
    cols, y_perp, _ = fused_design(X, y, edges)
    XT = X @ T
    root = XT[:, 0] / np.linalg.norm(XT[:, 0])
    project = np.eye(n) - np.outer(root, root)
    np.testing.assert_allclose(cols.T, project @ XT[:, order[1:]], atol=1e-12)
    np.testing.assert_allclose(y_perp, project @ y, atol=1e-12)
    D = np.zeros((p - 1, p))
    D[np.arange(p - 1), edges[:, 0]], D[np.arange(p - 1), edges[:, 1]] = 1.0, -1.0
    z = rng.standard_normal(p)
    assert np.abs(D @ T @ z).sum() == pytest.approx(np.abs(z[1:]).sum())


@pytest.fixture(scope="module")
def fused_case():
    """Three plateaus on a random tree, and the oracle's answer (computed once)."""
    rng = np.random.default_rng(4)
    p, n = 10, 40
    X = rng.standard_normal((n, p))
    y = X @ np.repeat([1.0, -0.5, 2.0], [3, 4, 3]) + 0.2 * rng.standard_normal(n)
    edges, lam = _random_tree(p, 4), 3.0
    return X, y, edges, lam, *_fused_admm(X, y, lam, edges)


@pytest.mark.parametrize("screening", SCREENINGS)
def test_fused_lasso_matches_admm(screening, fused_case):
    X, y, edges, lam, ref, D = fused_case
    p, n = X.shape[1], X.shape[0]
    est = FusedLasso(alpha=lam / n, edges=edges, fit_intercept=False, tol=1e-14,
                     screening=screening).fit(X, y)
    obj = [0.5 * np.sum((y - X @ b) ** 2) + lam * np.abs(D @ b).sum()
           for b in (est.coef_, ref)]
    assert obj[0] == pytest.approx(obj[1], rel=1e-7)
    assert obj[0] <= obj[1] * (1 + 1e-12)
    np.testing.assert_allclose(est.coef_, ref, atol=1e-5)
    assert 0 < np.count_nonzero(np.abs(D @ est.coef_) > 1e-9) < p - 1   # some fused


def test_fused_lasso_is_constant_at_large_alpha():
    X, y = _data(p=8, seed=5)
    est = FusedLasso(alpha=1e6).fit(X, y)
    assert np.ptp(est.coef_) == 0.0
    Xc, yc = X - X.mean(0), y - y.mean()
    s = Xc.sum(axis=1)
    assert est.coef_[0] == pytest.approx(s @ yc / (s @ s))


# -- bad input ------------------------------------------------------------------------

@pytest.mark.parametrize("est, match", [
    (Lasso(alpha=0.0), "alpha"),
    (Lasso(alpha=float("nan")), "alpha"),
    (Lasso(tol=-1.0), "tol"),
    (Lasso(max_iter=0), "max_iter"),
    (Lasso(screening="dpp"), "screening"),
    (GroupLasso(groups=[0, 1]), "one label per feature"),
    (GroupLasso(groups=[0, 0, 1, 1, 2, 2], weights=[1.0, -1.0, 1.0]), "weights"),
    (FusedLasso(edges=[[0, 1], [1, 2], [2, 0], [3, 4], [4, 5]]), "cycle"),
    (FusedLasso(edges=[[0, 1]]), "pairs"),
    (FusedLasso(edges=[[0, 1], [1, 2], [2, 3], [3, 4], [4, 9]]), "pairs"),
])
def test_bad_parameters_raise_input_error(est, match):
    X, y = _data(p=6)
    with pytest.raises(InputError, match=match):
        est.fit(X, y)


def test_nan_input_raises_input_error():
    X, y = _data(p=6)
    X[3, 2] = np.nan
    with pytest.raises(InputError, match="NaN"):
        Lasso().fit(X, y)


# -- convergence: ConvergenceWarning at the epoch cap, n_iter_ ------------------------

@pytest.mark.parametrize("screening", SCREENINGS)
@pytest.mark.parametrize("make", [
    lambda s, **kw: Lasso(1e-3, screening=s, **kw),
    lambda s, **kw: GroupLasso(1e-3, groups=np.repeat(np.arange(6), 2), screening=s,
                               **kw),
    lambda s, **kw: FusedLasso(1e-3, screening=s, **kw),
])
def test_estimators_warn_at_max_iter_and_not_at_convergence(make, screening):
    X, y = _data()
    model = make(screening, tol=1e-14, max_iter=1)
    name = type(model).__name__
    with pytest.warns(ConvergenceWarning, match=rf"{name} \(.*\) stopped at max_iter=1 "
                      r"\(\d+ epochs run\) with duality gap .* times its target .*"
                      r"raise max_iter"):
        model.fit(X, y)
    assert model.dual_gap_ > 1e-14 * np.sum((y - y.mean()) ** 2) / len(y)
    assert model.n_iter_ >= 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        converged = make(screening, tol=1e-8).fit(X, y)
    assert 1 <= converged.n_iter_ < 10_000


def test_lasso_path_and_solve_path_warn_once_at_their_epoch_cap():
    X, y = _data(p=30)
    with pytest.warns(ConvergenceWarning, match=r"lasso_path \(SAIF\) stopped at "
                      r"max_iter=2 .* at \d+ of 5 λ values \(the worst at λ = "):
        lasso_path(X, y, n_alphas=5, tol=1e-14, max_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        _, _, gaps, n_iter = lasso_path(X, y, n_alphas=5, tol=1e-8, return_n_iter=True)
    assert n_iter.shape == (5,) and np.all(n_iter < 10_000)
    X, y = check_xy(X, y)
    design = make_design(X)
    with pytest.warns(AsyosConvergenceWarning, match=r"^coordinate descent stopped "
                      r"at max_epochs=3 .* raise max_epochs"):
        solve_path(design, y, [1.0, 0.1], 1e-14, "none", 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve_path(design, y, [1.0, 0.1], 1e-14, "none", 3, convergence_warning=None)


def test_fista_warns_at_its_iteration_cap_unless_told_not_to():
    """The L1 solves of the classification losses (``fit_lasso``, the sparse group
    Lasso) warn like the squared loss's; grafting's inner solves pass None."""
    from asyos.lasso.selector import fista

    X, y = _data(p=30)
    labels = np.where(y > np.median(y), 1.0, -1.0)
    with pytest.warns(AsyosConvergenceWarning, match=r"^FISTA stopped at max_iter=3 "
                      r"with a relative step of .* raise max_iter"):
        fista(X, labels, 0.01, "logistic", max_iter=3, tol=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fista(X, labels, 0.01, "logistic", max_iter=3, tol=1e-14,
              convergence_warning=None)
        _, iterations = fista(X, labels, 0.01, "logistic", tol=1e-6)
    assert iterations < 2000
