"""Synthetic problems and selection metrics of Yang, Fujimaki, Kusumura & Liu (KDD
2016, Section 5)."""

import numpy as np
import pytest

from asyos.datasets import Problem, _sign, make_classification, make_regression, paper_n
from asyos.errors import InputError
from asyos.metrics import (
    classification_error,
    evaluate,
    recall,
    recovery_error,
    refit_least_squares,
    refit_squared_hinge,
)

# --- datasets ---------------------------------------------------------------------

def test_paper_n_is_1_2_s_log2_p_rounded():
    # n = 1.2·s·log₂ p (Yang et al. 2016, Section 5), rounded to the nearest integer
    reg = [paper_n(100, p) for p in range(2000, 6001, 500)]
    assert reg == [1316, 1355, 1386, 1413, 1436, 1456, 1475, 1491, 1506]
    cls = [paper_n(100, p) for p in range(1000, 5001, 500)]
    assert cls[0] == 1196 and cls[-1] == 1475
    assert cls == [1196, 1266, 1316, 1355, 1386, 1413, 1436, 1456, 1475]


def test_regression_shapes_sparsity_and_default_n():
    pb = make_regression(p=300, s=17, seed=3)
    n = paper_n(17, 300)
    assert isinstance(pb, Problem) and pb.task == "regression"
    assert pb.X.shape == (n, 300) and pb.y.shape == (n,) and pb.w_true.shape == (300,)
    assert (pb.n_samples, pb.n_features, pb.s_true) == (n, 300, 17)
    assert pb.X.dtype == np.float64 and pb.support.dtype == np.int64
    assert np.count_nonzero(pb.w_true) == 17
    np.testing.assert_array_equal(pb.support, np.flatnonzero(pb.w_true))
    assert pb.X_test is None and pb.y_test is None and pb.seed == 3


def test_same_seed_same_problem_other_seed_other_problem():
    a, b = make_regression(p=200, s=10, n=50, seed=7), make_regression(p=200, s=10,
                                                                     n=50, seed=7)
    for name in ("X", "y", "w_true", "support"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    c = make_regression(p=200, s=10, n=50, seed=8)
    assert not np.array_equal(a.X, c.X) and not np.array_equal(a.support, c.support)
    d, e = (make_classification(p=200, s=10, n=50, seed=7) for _ in range(2))
    for name in ("X", "y", "X_test", "y_test"):
        np.testing.assert_array_equal(getattr(d, name), getattr(e, name))


def test_noise_level_is_sigma():
    pb = make_regression(p=400, s=20, n=4000, noise=0.1, seed=1)
    resid = pb.y - pb.X @ pb.w_true
    assert abs(resid.std() - 0.1) < 0.005 and abs(resid.mean()) < 0.01
    clean = make_regression(p=400, s=20, n=100, noise=0.0, seed=1)
    np.testing.assert_array_equal(clean.y, clean.X @ clean.w_true)


def test_classification_labels_and_independent_test_set():
    pb = make_classification(p=300, s=30, seed=2)
    n = paper_n(30, 300)
    assert pb.task == "classification" and pb.X.shape == (n, 300)
    assert pb.X_test.shape == (n, 300) and pb.y_test.shape == (n,)
    assert set(np.unique(pb.y)) == {-1.0, 1.0} and set(np.unique(pb.y_test)) == {-1, 1}
    np.testing.assert_array_equal(pb.y, np.where(pb.X @ pb.w_true >= 0, 1.0, -1.0))
    np.testing.assert_array_equal(pb.y_test,
                                  np.where(pb.X_test @ pb.w_true >= 0, 1.0, -1.0))
    # The test rows are fresh draws, not copies or reuses of the training rows.
    corr = np.corrcoef(pb.X.ravel(), pb.X_test.ravel())[0, 1]
    assert abs(corr) < 0.01 and not np.array_equal(pb.y, pb.y_test)


def test_sign_of_zero_is_plus_one():
    np.testing.assert_array_equal(_sign(np.array([0.0, -0.0, -2.0, 3.0])),
                                  [1.0, 1.0, -1.0, 1.0])


@pytest.mark.parametrize("kwargs", [
    {"s": 0}, {"s": 11, "p": 10}, {"p": 0}, {"n": 0}, {"noise": -0.1},
    {"noise": float("nan")}, {"s": 2.5}, {"p": True}, {"n": 10.0},
])
def test_bad_arguments_raise_input_error(kwargs):
    args = {"p": 10, "s": 3, "n": 20}
    args.update(kwargs)
    with pytest.raises(InputError):
        make_regression(**args)
    args.pop("noise", None)
    if "noise" not in kwargs:
        with pytest.raises(InputError):
            make_classification(**args)


# --- metrics ----------------------------------------------------------------------

def test_recall_hand_made():
    assert recall([1, 2, 3], [2, 3, 4, 5]) == 0.5
    assert recall(np.array([5, 4, 3, 2]), [2, 3, 4, 5]) == 1.0
    assert recall([2, 2, 2], [2, 3]) == 0.5  # duplicates count once
    assert recall([], [2, 3]) == 0.0
    assert recall(np.array([7, 9]), [2, 3]) == 0.0
    with pytest.raises(InputError):
        recall([1.5], [1])


def test_least_squares_refit_is_exact_without_noise():
    pb = make_regression(p=60, s=5, n=30, noise=0.0, seed=4)
    np.testing.assert_allclose(refit_least_squares(pb.X, pb.y, pb.support), pb.w_true,
                               atol=1e-10)
    extra = np.union1d(pb.support, [0, 1, 2, 58, 59])  # a superset, still < n columns
    w = refit_least_squares(pb.X, pb.y, extra)
    np.testing.assert_allclose(w, pb.w_true, atol=1e-10)
    assert recovery_error(pb.X, pb.y, extra, pb.w_true) < 1e-10
    assert recovery_error(pb.X, pb.y, [], pb.w_true) == 1.0
    with pytest.raises(InputError):
        refit_least_squares(pb.X, pb.y, [60])


def _hinge_grad(X, y, w, sel, ridge):
    Xs = X[:, sel]
    h = np.maximum(1.0 - y * (Xs @ w[sel]), 0.0)
    return -(Xs.T @ (y * h)) / y.size + ridge * w[sel]


def _hinge_obj(X, y, w, ridge):
    h = np.maximum(1.0 - y * (X @ w), 0.0)
    return 0.5 * h @ h / y.size + 0.5 * ridge * w @ w


@pytest.mark.parametrize("n, k", [(200, 10), (40, 120)])  # k > n needs the ridge
def test_squared_hinge_refit_is_stationary(n, k):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((n, 150))
    y = np.where(X[:, :3].sum(1) + 0.8 * rng.standard_normal(n) >= 0, 1.0, -1.0)
    sel = np.sort(rng.choice(150, size=k, replace=False))
    w = refit_squared_hinge(X, y, sel, ridge=1e-3)
    off = np.setdiff1d(np.arange(150), sel)
    assert np.all(w[off] == 0.0) and np.all(np.isfinite(w))
    assert np.linalg.norm(_hinge_grad(X, y, w, sel, 1e-3)) <= 1e-9
    # Numerically a minimum: no random perturbation on the selection decreases f.
    f0 = _hinge_obj(X, y, w, 1e-3)
    for _ in range(20):
        d = np.zeros(150)
        d[sel] = 1e-4 * rng.standard_normal(k)
        assert _hinge_obj(X, y, w + d, 1e-3) >= f0 - 1e-15


def test_squared_hinge_refit_separates_separable_data():
    pb = make_classification(p=200, s=20, n=300, seed=6)
    w = refit_squared_hinge(pb.X, pb.y, pb.support)
    assert np.mean(np.where(pb.X @ w >= 0, 1.0, -1.0) != pb.y) == 0.0
    assert np.linalg.norm(_hinge_grad(pb.X, pb.y, w, pb.support, 1e-6)) <= 1e-9
    assert np.all(refit_squared_hinge(pb.X, pb.y, []) == 0.0)


def test_classification_error_hand_made():
    X = np.array([[1.0, 0.0], [2.0, 5.0], [-1.0, 0.0], [-3.0, -5.0]])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    X_test = np.array([[1.0, 9.0], [-1.0, 9.0], [0.0, 9.0], [-2.0, 9.0]])
    y_test = np.array([1.0, 1.0, -1.0, -1.0])
    # Column 0 only: w_0 > 0, predictions +1, -1, +1 (sign 0 = +1), -1.
    assert classification_error(X, y, [0], X_test, y_test) == 0.5
    # The empty model predicts +1 everywhere.
    assert classification_error(X, y, [], X_test, y_test) == 0.5
    assert classification_error(X, y, [], X_test, -np.ones(4)) == 1.0


def test_evaluate_keys_and_empty_selection():
    reg = make_regression(p=80, s=5, n=60, seed=0)
    out = evaluate(reg, reg.support)
    assert set(out) == {"recall", "recovery_error"}
    assert out["recall"] == 1.0 and out["recovery_error"] < 0.05
    assert all(type(v) is float for v in out.values())
    assert evaluate(reg, []) == {"recall": 0.0, "recovery_error": 1.0}

    cls = make_classification(p=80, s=5, n=200, seed=0)
    out = evaluate(cls, cls.support)
    assert set(out) == {"recall", "test_error"} and out["recall"] == 1.0
    assert out["test_error"] < 0.1
    empty = evaluate(cls, np.array([], dtype=np.int64))
    assert empty == {"recall": 0.0, "test_error": float(np.mean(cls.y_test == -1))}
