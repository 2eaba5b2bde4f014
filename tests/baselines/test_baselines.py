"""Baselines of the OS paper (Yang, Fujimaki, Kusumura & Liu, KDD 2016) and the
third-party comparators: shapes, the optimality conditions each method promises,
hand-worked examples and recall on easy problems."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from asyos.baselines import fit_grafting, fit_l0_cd, fit_l1_cd
from asyos.core.losses import Loss, loss_grad
from asyos.core.selection import Selection
from asyos.datasets import make_classification, make_regression
from asyos.errors import InputError
from asyos.experiments.comparators import (
    COMPARATORS,
    METHODS,
    available_comparators,
    c_for_s,
    fit_abess,
    fit_l1_squared_hinge,
    fit_omp,
)
from asyos.lasso import fit_lasso, lambda_for_s
from asyos.lasso.selector import LAMBDA_RATIO, fista, lambda_max, lasso_objective
from asyos.metrics import recall
from asyos.streams import as_stream

ONLINE = ("Grafting", "L1 coordinate descent", "L0 coordinate descent")


def _grad(X, y, w, loss):
    """Xᵀ dL/du at u = Xw."""
    n = len(y)
    return X.T @ loss_grad(int(Loss.parse(loss)), np.ascontiguousarray(X @ w), y,
                           np.empty(n))


@pytest.fixture(scope="module")
def small_reg():
    return make_regression(p=60, s=5, n=80, seed=3)


@pytest.fixture(scope="module")
def small_cls():
    return make_classification(p=60, s=5, n=120, seed=4)


# -- every method -------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(METHODS))
@pytest.mark.parametrize("loss", ["squared", "squared_hinge", "logistic"])
def test_every_method_returns_a_valid_selection(name, loss, small_reg, small_cls):
    pb = small_reg if loss == "squared" else small_cls
    sel = METHODS[name](pb.X, pb.y, 5, loss=loss, epochs=2)
    assert isinstance(sel, Selection) and sel.name == name
    assert sel.selected.dtype == np.int64 and sel.weights.dtype == np.float64
    assert 1 <= sel.selected.size <= 5 and sel.weights.shape == sel.selected.shape
    assert np.all(np.diff(sel.selected) > 0)
    assert 0 <= sel.selected[0] and sel.selected[-1] < pb.X.shape[1]
    assert np.all(np.isfinite(sel.weights)) and np.all(sel.weights != 0)
    assert (sel.peak_active is not None) == (name in ONLINE)
    if name in ONLINE:
        assert sel.peak_active >= sel.selected.size


def test_online_methods_read_streams_like_arrays(small_reg):
    pb = small_reg
    lam = lambda_for_s(pb.X, pb.y, 5)
    stream = as_stream(pb.X, block_size=7)
    for fit, kw in [(fit_grafting, {"lam": lam}), (fit_l1_cd, {"lam": lam}),
                    (fit_l0_cd, {})]:
        a = fit(pb.X, pb.y, 5, **kw)
        b = fit(stream, pb.y, 5, **kw)
        np.testing.assert_array_equal(a.selected, b.selected)
        np.testing.assert_allclose(a.weights, b.weights, rtol=1e-9, atol=1e-12)
    # A shuffled stream is another valid order.
    sel = fit_l0_cd(as_stream(pb.X, shuffle=True, seed=2), pb.y, 5)
    assert sel.selected.size <= 5
    try:
        stream32 = as_stream(pb.X, dtype="float32")
    except TypeError:
        return                        # streams without a float32 option
    for fit, kw in [(fit_grafting, {"lam": lam}), (fit_l1_cd, {"lam": lam}),
                    (fit_l0_cd, {})]:
        a = fit(pb.X.astype(np.float32).astype(np.float64), pb.y, 5, **kw)
        b = fit(stream32, pb.y, 5, **kw)
        np.testing.assert_array_equal(a.selected, b.selected)
        np.testing.assert_allclose(a.weights, b.weights, rtol=1e-9, atol=1e-12)


def test_easy_regression_recall():
    pb = make_regression(p=300, s=10, n=200, seed=0)
    for name in ("Proj-GD", "LASSO", "Grafting"):
        sel = METHODS[name](pb.X, pb.y, 10, loss="squared", epochs=2)
        assert recall(sel.selected, pb.support) >= 0.9, name


# -- LASSO and the λ rule -----------------------------------------------------------

def test_fista_matches_sklearn_lasso(small_reg):
    from sklearn.linear_model import Lasso

    pb = small_reg
    lam = 0.005 * lambda_max(pb.X, pb.y, "squared")
    w, _ = fista(pb.X, pb.y, lam, tol=1e-10, max_iter=100_000)
    # sklearn: (1/(2n))‖y − Xw‖² + α‖w‖₁, our squared f + λ‖w‖₁: α = λ.
    ref = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000)
    w_ref = ref.fit(pb.X, pb.y).coef_
    ours, theirs = (lasso_objective(pb.X, pb.y, v, lam) for v in (w, w_ref))
    assert ours == pytest.approx(theirs, rel=1e-6)
    np.testing.assert_array_equal(np.flatnonzero(w), np.flatnonzero(w_ref))
    assert np.count_nonzero(w_ref) > 5
    # With the default stopping rule (relative change 1e-6) too.
    w_def, _ = fista(pb.X, pb.y, lam)
    assert lasso_objective(pb.X, pb.y, w_def, lam) == pytest.approx(theirs, rel=1e-6)
    sel = fit_lasso(pb.X, pb.y, 5, lam=lam)
    top = np.sort(np.argsort(-np.abs(w_ref), kind="stable")[:5])
    np.testing.assert_array_equal(sel.selected, top)


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_fista_reaches_the_l1_optimality_conditions(loss, small_cls):
    pb = small_cls
    lam = 0.3 * lambda_max(pb.X, pb.y, loss)
    w, _ = fista(pb.X, pb.y, lam, loss, tol=1e-10, max_iter=100_000)
    grad = _grad(pb.X, pb.y, w, loss)
    on = w != 0
    assert on.any()
    np.testing.assert_allclose(grad[on], -lam * np.sign(w[on]), atol=1e-7)
    assert np.all(np.abs(grad[~on]) <= lam + 1e-7)


@pytest.mark.parametrize("loss", ["squared", "squared_hinge"])
def test_lambda_for_s_is_the_largest_grid_value_reaching_s(loss, small_reg, small_cls):
    pb = small_reg if loss == "squared" else small_cls
    s = 8
    lam = lambda_for_s(pb.X, pb.y, s, loss)
    k = np.log(lam / lambda_max(pb.X, pb.y, loss)) / np.log(LAMBDA_RATIO)
    assert k >= 1 and k == pytest.approx(round(k), abs=1e-9)  # on the grid
    at, _ = fista(pb.X, pb.y, lam, loss, tol=1e-10, max_iter=100_000)
    above, _ = fista(pb.X, pb.y, lam / LAMBDA_RATIO, loss, tol=1e-10,
                     max_iter=100_000)
    assert np.count_nonzero(at) >= s > np.count_nonzero(above)
    sel = fit_lasso(pb.X, pb.y, s, loss=loss)
    assert sel.selected.size == s
    np.testing.assert_array_equal(
        sel.selected, np.sort(np.argsort(-np.abs(at), kind="stable")[:s]))


def test_lambda_for_s_caps_the_target_at_n():
    # n = 10 samples: an L1 solution has at most n nonzeros, so s = 20 is out of
    # reach; the path stops at the largest λ with nnz ≥ n instead.
    pb = make_regression(p=40, s=3, n=10, seed=1)
    lam = lambda_for_s(pb.X, pb.y, 20)
    assert lam == lambda_for_s(pb.X, pb.y, 10)
    sel = fit_lasso(pb.X, pb.y, 20)
    assert sel.selected.size >= 10


# -- Grafting -----------------------------------------------------------------------

@pytest.mark.parametrize("loss", ["squared", "squared_hinge"])
def test_grafting_exit_satisfies_the_gradient_test(loss):
    pb = (make_regression(p=30, s=4, n=40, seed=5) if loss == "squared"
          else make_classification(p=30, s=4, n=60, seed=5))
    p = pb.X.shape[1]
    lam = 0.3 * lambda_max(pb.X, pb.y, loss)
    # s = p: nothing is cut, so the selection is the whole active set A at exit.
    sel = fit_grafting(pb.X, pb.y, p, loss=loss, epochs=10, lam=lam, tol=1e-10,
                       max_inner=100_000)
    assert sel.n_iter < 10            # a pass admitted nothing, so it stopped early
    assert sel.peak_active >= sel.selected.size >= 1
    w = np.zeros(p)
    w[sel.selected] = sel.weights
    grad = _grad(pb.X, pb.y, w, loss)
    rejected = np.setdiff1d(np.arange(p), sel.selected)
    assert np.all(np.abs(grad[rejected]) <= lam * (1 + 1e-9))
    # and the active weights are L1-optimal on A.
    np.testing.assert_allclose(grad[sel.selected], -lam * np.sign(sel.weights),
                               atol=1e-7)


def test_grafting_keeps_the_top_s_and_needs_lam_for_a_stream(small_reg):
    pb = small_reg
    lam = 0.05 * lambda_max(pb.X, pb.y, "squared")
    sel = fit_grafting(pb.X, pb.y, 3, lam=lam)
    assert sel.selected.size == 3 and sel.peak_active > 3
    with pytest.raises(InputError, match="lam="):
        fit_grafting(as_stream(pb.X), pb.y, 3)


# -- online coordinate descent ------------------------------------------------------

def test_l1_cd_steps_are_exact_coordinate_minimisers():
    rng = np.random.default_rng(0)
    n, p = 25, 3
    X = rng.standard_normal((n, p))
    y = X @ np.array([1.5, -2.0, 0.7]) + 0.3 * rng.standard_normal(n)
    lam = 0.1
    epochs = 3
    # Brute force: each arrival minimises f + λ‖w‖₁ over its own coordinate.
    w = np.zeros(p)
    for _ in range(epochs):
        for j in range(p):
            rest = X @ w - X[:, j] * w[j]

            def h(t, j=j, rest=rest):
                r = rest + t * X[:, j] - y
                return 0.5 * (r @ r) / n + lam * abs(t)

            w[j] = minimize_scalar(h, bounds=(-10, 10), method="bounded",
                                   options={"xatol": 1e-12}).x
    sel = fit_l1_cd(X, y, p, epochs=epochs, lam=lam)
    np.testing.assert_array_equal(sel.selected, np.flatnonzero(np.abs(w) > 1e-8))
    np.testing.assert_allclose(sel.weights, w[sel.selected], atol=1e-7)


def test_l1_cd_by_hand():
    # n = 2, λ = 0.05, x0 = (1,0), x1 = (1,1), y = (1,1) = x1.  Pass 1: c0 = 1/2,
    # z = 1, w0 = soft(1, 0.1) = 0.9; then c1 = 1, x1ᵀg = −0.55, w1 = soft(0.55,
    # 0.05) = 0.5.  In the limit w0 leaves (|∂f/∂w0| = 0.025 ≤ λ) and w1 = 1 − λ.
    X = np.array([[1.0, 1.0], [0.0, 1.0]])
    y = np.array([1.0, 1.0])
    sel = fit_l1_cd(X, y, 2, epochs=1, lam=0.05)
    np.testing.assert_array_equal(sel.selected, [0, 1])
    np.testing.assert_allclose(sel.weights, [0.9, 0.5])
    sel = fit_l1_cd(X, y, 2, epochs=100, lam=0.05)
    np.testing.assert_array_equal(sel.selected, [1])
    np.testing.assert_allclose(sel.weights, [0.95])
    assert sel.peak_active == 2


def test_l0_cd_substitution_rule_by_hand():
    # n = 2, s = 1, squared loss, c_j = ‖x_j‖²/2.  Arrivals:
    #   x0 = (1,0): z = 1, room left -> S = {0}, w0 = 1, u = (1, 0)
    #   x1 = (0,1): g = (0, -3/2), z = 3 > |w0| -> substitute: S = {1}, w1 = 3
    #   x2 = (1,1): g = (-1/2, 0), c = 1, z = 1/2 < 3 -> rejected
    X = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    y = np.array([1.0, 3.0])
    for epochs, block_size in [(1, 1), (2, 2), (3, 256)]:
        sel = fit_l0_cd(as_stream(X, block_size=block_size), y, 1, epochs=epochs)
        np.testing.assert_array_equal(sel.selected, [1])
        np.testing.assert_allclose(sel.weights, [3.0])
        assert sel.peak_active == 1 and sel.n_iter == epochs
    # A tie |z| = |w_k*| rejects the incoming feature: x1 gets z = 2 = w0.
    sel = fit_l0_cd(np.eye(2), np.array([2.0, 2.0]), 1, epochs=1)
    np.testing.assert_array_equal(sel.selected, [0])
    np.testing.assert_allclose(sel.weights, [2.0])


def test_l0_cd_revisits_take_a_coordinate_step():
    # x0 = (1,0), x1 = (1,1), y = (1,3), s = 2.  Pass 1: w = (1, 3/2).  Pass 2:
    # w0 = 1 − 0.75/0.5 = −1/2, then w1 = 3/2 + 3/4; the limit is the fit (−2, 3).
    X = np.array([[1.0, 1.0], [0.0, 1.0]])
    y = np.array([1.0, 3.0])
    expected = {1: [1.0, 1.5], 2: [-0.5, 2.25], 300: [-2.0, 3.0]}
    for epochs, w in expected.items():
        sel = fit_l0_cd(X, y, 2, epochs=epochs)
        np.testing.assert_array_equal(sel.selected, [0, 1])
        np.testing.assert_allclose(sel.weights, w, rtol=1e-9)


def test_l0_cd_never_holds_more_than_s_and_l1_cd_can():
    pb = make_regression(p=200, s=10, n=100, seed=2)
    sel = fit_l0_cd(pb.X, pb.y, 10, epochs=3)
    assert sel.peak_active <= 10 and sel.selected.size <= 10
    sel = fit_l1_cd(pb.X, pb.y, 10, epochs=3)
    assert sel.peak_active >= 10 and sel.selected.size == 10


# -- comparators --------------------------------------------------------------------

def test_omp_is_sklearns_support(small_reg):
    sklearn = pytest.importorskip("sklearn.linear_model")
    pb = small_reg
    sel = fit_omp(pb.X, pb.y, 5)
    ref = sklearn.OrthogonalMatchingPursuit(n_nonzero_coefs=5, fit_intercept=False)
    coef = ref.fit(pb.X, pb.y).coef_
    np.testing.assert_array_equal(sel.selected, np.flatnonzero(coef))
    np.testing.assert_allclose(sel.weights, coef[sel.selected])
    assert sel.name == "OMP" and recall(sel.selected, pb.support) == 1.0


def test_l1_squared_hinge_is_liblinears_support(small_cls):
    svm = pytest.importorskip("sklearn.svm")
    pb = small_cls
    s = 5
    C = c_for_s(pb.X, pb.y, s)
    # The λ grid mapped by C = 1/(2nλ).
    lam = 1.0 / (2 * pb.X.shape[0] * C)
    k = np.log(lam / lambda_max(pb.X, pb.y, "squared_hinge")) / np.log(LAMBDA_RATIO)
    assert k == pytest.approx(round(k), abs=1e-9)

    def coef(C):
        return svm.LinearSVC(penalty="l1", loss="squared_hinge", dual=False, C=C,
                             fit_intercept=False, tol=1e-6, max_iter=10_000,
                             random_state=0).fit(pb.X, pb.y).coef_.ravel()

    at, below = coef(C), coef(C * LAMBDA_RATIO)
    assert np.count_nonzero(at) >= s > np.count_nonzero(below)
    sel = fit_l1_squared_hinge(pb.X, pb.y, s)
    assert sel.name == "L1 Hinge Loss Classification"
    np.testing.assert_array_equal(
        sel.selected, np.sort(np.argsort(-np.abs(at), kind="stable")[:s]))
    np.testing.assert_allclose(sel.weights, at[sel.selected], rtol=1e-6)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_abess_is_abess_support(task, small_reg, small_cls):
    abess = pytest.importorskip("abess")
    pb = small_reg if task == "regression" else small_cls
    if task == "regression":
        sel = fit_abess(pb.X, pb.y, 5)
        ref = abess.LinearRegression(support_size=[5], fit_intercept=False)
        ref.fit(pb.X, pb.y)
    else:
        sel = fit_abess(pb.X, pb.y, 5, loss="squared_hinge")
        ref = abess.LogisticRegression(support_size=[5], fit_intercept=False)
        ref.fit(pb.X, (pb.y + 1) / 2)
    coef = np.ravel(ref.coef_)
    np.testing.assert_array_equal(sel.selected, np.flatnonzero(coef))
    assert sel.name == "abess" and sel.selected.size == 5


def test_available_comparators():
    pytest.importorskip("sklearn")
    reg = available_comparators("regression")
    cls = available_comparators("classification")
    assert "L1 Hinge Loss Classification" not in reg
    assert {"L1 Hinge Loss Classification", "OMP"} <= set(cls)
    assert "OMP" in reg and set(reg) | set(cls) <= set(COMPARATORS)
    pb = make_classification(p=40, s=3, n=60, seed=0)
    for fit in cls.values():          # the uniform call f(X, y, s)
        assert fit(pb.X, pb.y, 3).selected.size <= 3
    with pytest.raises(InputError, match="unknown task"):
        available_comparators("ranking")


# -- bad input ----------------------------------------------------------------------

def _all_fits():
    fits = dict(METHODS)              # f(X, y, s, loss, ...) positionally too
    fits["OMP"] = lambda X, y, s, loss: fit_omp(X, y, s)
    fits["abess"] = fit_abess
    return fits


@pytest.mark.parametrize("name", sorted(_all_fits()))
def test_bad_input_is_refused_by_name(name):
    fit = _all_fits()[name]
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 10))
    y = np.sign(rng.standard_normal(20))
    Xnan = X.copy()
    Xnan[3, 4] = np.nan
    with pytest.raises(InputError, match="finite"):
        fit(Xnan, y, 3, "squared")
    with pytest.raises(InputError, match="s must"):
        fit(X, y, 11, "squared")
    with pytest.raises(InputError, match="labels have n = 19 samples"):
        fit(X, y[:-1], 3, "squared")
    if name != "OMP":
        with pytest.raises(InputError, match="labels"):
            fit(X, (y + 1) / 2, 3, "squared_hinge")


def test_bad_input_comparator_and_online_options():
    X = np.random.default_rng(0).standard_normal((20, 10))
    y01 = (np.arange(20) % 2).astype(float)
    with pytest.raises(InputError, match="labels"):
        fit_l1_squared_hinge(X, y01, 3)
    y = np.where(y01 > 0, 1.0, -1.0)
    for fit in (fit_grafting, fit_l1_cd, fit_l0_cd):
        with pytest.raises(InputError, match="epochs"):
            fit(X, y, 3, epochs=0)
    for fit in (fit_grafting, fit_l1_cd, fit_lasso):
        with pytest.raises(InputError, match="lam"):
            fit(X, y, 3, lam=-1.0)
    with pytest.raises(InputError, match="lam="):
        fit_l1_cd(as_stream(X), y, 3)
    with pytest.raises(InputError, match="labels have n = 19 samples"):
        fit_l0_cd(as_stream(X), y[:-1], 3)
    Xnan = X.copy()
    Xnan[0, 7] = np.inf
    with pytest.raises(InputError, match="feature 7"):
        fit_l0_cd(as_stream(Xnan), y, 3)
