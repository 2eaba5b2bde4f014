"""The greedy opening: at large s the kept set fills as a forward greedy search
does, before the first pass, instead of with the first s arrivals."""

import numpy as np
import pytest
from sklearn.linear_model import OrthogonalMatchingPursuit

from asyos import fit_os
from asyos.core.sweep import OPENING_FROM, opening_batch
from asyos.errors import InputError


def correlated_design(seed: int, n: int = 200, p: int = 1000, true: int = 25):
    """AR(1) columns with neighbour correlation 0.5, ``true`` features of weight
    ±(1..2), noise sd 1: where single swaps from the first s arrivals stall."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, p))
    X = np.empty_like(Z)
    X[:, 0] = Z[:, 0]
    for j in range(1, p):
        X[:, j] = 0.5 * X[:, j - 1] + np.sqrt(0.75) * Z[:, j]
    w = np.zeros(p)
    w[rng.choice(p, true, replace=False)] = rng.choice([-1.0, 1.0], true) * (
        1 + rng.random(true))
    return X, X @ w + rng.standard_normal(n)


def omp_mse(X, y, k: int) -> float:
    omp = OrthogonalMatchingPursuit(n_nonzero_coefs=k, fit_intercept=False).fit(X, y)
    return float(np.mean((y - omp.predict(X)) ** 2))


def os_mse(X, y, k: int, **options) -> float:
    fit = fit_os(X, y, k, **options)
    residual = y - X[:, fit.selected] @ fit.weights
    return float(np.mean(residual ** 2))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_at_large_k_os_fits_the_training_data_as_well_as_omp(seed):
    """k = 80 of n = 200: the default (a greedy opening) is within 5 % of OMP's
    training MSE on every seed; filled with the first arrivals it was 27-34x."""
    X, y = correlated_design(seed)
    k = 80
    best = omp_mse(X, y, k)
    assert os_mse(X, y, k) <= 1.05 * best
    assert os_mse(X, y, k, start="stream") > 2 * best


def test_the_opening_is_on_by_default_only_at_large_s_with_a_closing_sweep():
    n = 1000
    assert opening_batch("auto", n // OPENING_FROM, n, sweep=8) >= 1
    assert opening_batch("auto", n // OPENING_FROM - 1, n, sweep=8) == 0
    assert opening_batch("auto", 500, n, sweep=0) == 0   # one pass, or the paper's rule
    assert opening_batch("greedy", 10, n, sweep=0) == 1
    assert opening_batch("greedy", 640, n, sweep=8) == 10   # 64 reads at most
    assert opening_batch("stream", 500, n, sweep=8) == 0
    assert opening_batch("auto", 500, n, sweep=8, in_memory=False) == 0   # from disk


@pytest.mark.parametrize("seed", [0, 1])
def test_a_greedy_opening_at_small_s_finds_the_truth(seed):
    """Asked for at small s (off by default there), the opening and the passes after
    it recover a strong support exactly, as the default does."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((300, 400))
    support = np.sort(rng.choice(400, 5, replace=False))
    y = X[:, support] @ (2 + rng.random(5)) + 0.1 * rng.standard_normal(300)
    greedy = fit_os(X, y, 5, start="greedy")
    assert greedy.selected.tolist() == support.tolist()
    assert greedy.objective == pytest.approx(fit_os(X, y, 5).objective, rel=1e-9)


def test_an_unknown_start_is_refused():
    X, y = correlated_design(0, n=50, p=40)
    with pytest.raises(InputError, match="start must be"):
        fit_os(X, y, 5, start="omp")
