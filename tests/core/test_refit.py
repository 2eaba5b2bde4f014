"""The Newton refit of a fixed support (``core.refit``): it finds the minimiser of
L(X_S w) + (λ/2)‖w‖² from any start, for every loss, so that an Asy-OS run's weights
and objective depend on its support alone."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos.core.losses import Loss, loss_value
from asyos.core.refit import joint_refit, loss_terms, newton_refit

LOSSES = list(Loss)


def _problem(seed, n=80, k=6, loss=Loss.SQUARED):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, k))
    w = rng.standard_normal(k)
    u = X @ w + 0.3 * rng.standard_normal(n)
    y = u if loss is Loss.SQUARED else np.where(u >= 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("loss", LOSSES, ids=lambda code: code.name.lower())
def test_loss_terms_are_the_compiled_loss_and_its_derivatives(loss):
    X, y = _problem(0, loss=loss)
    u = X @ np.linspace(-1, 1, X.shape[1])
    value, d1, d2 = loss_terms(loss, u, y)
    assert value == pytest.approx(loss_value(int(loss), u, y), rel=1e-12)
    eps = 1e-6
    for i in (0, 7, 31):
        up, down = u.copy(), u.copy()
        up[i] += eps
        down[i] -= eps
        slope = (loss_terms(loss, up, y)[0] - loss_terms(loss, down, y)[0]) / (2 * eps)
        assert d1[i] == pytest.approx(slope, rel=1e-5, abs=1e-10)
    assert np.all(d2 >= 0)


def test_the_squared_loss_refit_is_ridge_least_squares_in_one_step():
    X, y = _problem(1)
    lam = 1e-3
    w, steps = newton_refit(X, y, Loss.SQUARED, lam, start=np.full(X.shape[1], 5.0))
    exact = np.linalg.solve(X.T @ X / X.shape[0] + lam * np.eye(X.shape[1]),
                            X.T @ y / X.shape[0])
    np.testing.assert_allclose(w, exact, rtol=1e-10, atol=1e-12)
    assert steps == 1


@pytest.mark.parametrize("loss", LOSSES, ids=lambda code: code.name.lower())
@pytest.mark.parametrize("seed", range(5))
def test_a_start_at_the_minimiser_to_rounding_ends_at_once(loss, seed):
    """An Asy-OS run's refit starts at its workers' weights, where a Newton step
    promises less than F's rounding: Armijo's test then passed or failed by chance,
    and the refit backtracked through all its steps (100 steps, 2,000 evaluations of
    F on the squared loss at n = 1000, k = 64, with the gradient left at 2e-10)."""
    rng = np.random.default_rng(seed)
    n, k, lam = 1000, 64, 1e-10
    X = rng.standard_normal((n, k))
    u = X @ rng.standard_normal(k) + 3.0 * rng.standard_normal(n)
    y = u if loss is Loss.SQUARED else np.where(u >= 0, 1.0, -1.0)
    best, _ = newton_refit(X, y, loss, lam)
    hessian = X.T @ X / n + lam * np.eye(k)
    for size in (1.2e-10, 3e-10, 1e-9):
        g = rng.standard_normal(k)
        start = best + np.linalg.solve(hessian, size * g / np.linalg.norm(g))
        w, steps = newton_refit(X, y, loss, lam, start)
        _, d1, _ = loss_terms(loss, X @ w, y)
        assert steps <= 2
        assert np.linalg.norm(X.T @ d1 + lam * w) <= 1e-10


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), loss=st.sampled_from(LOSSES),
       scale=st.floats(0.0, 10.0))
def test_the_refit_reaches_the_same_minimiser_from_any_start(seed, loss, scale):
    """Two starts, one answer: the gradient of F vanishes there, and F is the same to
    rounding (what makes two Asy-OS runs with one support agree)."""
    X, y = _problem(seed, loss=loss)
    lam = 0.05
    rng = np.random.default_rng(seed + 1)
    w1, _ = newton_refit(X, y, loss, lam)
    w2, _ = newton_refit(X, y, loss, lam, start=scale * rng.standard_normal(X.shape[1]))
    np.testing.assert_allclose(w1, w2, rtol=1e-7, atol=1e-9)
    _, d1, _ = loss_terms(loss, X @ w1, y)
    assert np.linalg.norm(X.T @ d1 + lam * w1) <= 1e-8


def test_a_joint_refit_scales_its_ridge_by_the_largest_column_and_skips_zero_columns():
    X, y = _problem(2)
    columns = np.ascontiguousarray(X.T)
    w, u, _ = joint_refit(columns, y, Loss.SQUARED, 1e-2, np.zeros(X.shape[1]))
    nu = np.max(np.sum(X * X, axis=0)) / X.shape[0]
    expected, _ = newton_refit(X, y, Loss.SQUARED, 1e-2 * nu)
    np.testing.assert_allclose(w, expected, rtol=1e-10)
    np.testing.assert_allclose(u, X @ w, rtol=1e-12)
    start = np.array([0.5, -1.0])
    same, u, steps = joint_refit(np.zeros((2, 9)), np.ones(9), Loss.SQUARED, 1e-2, start)
    np.testing.assert_array_equal(same, start)
    assert steps == 0 and not u.any()
