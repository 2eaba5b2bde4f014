"""Recall of simulated Asy-OS against sequential OS on the same data, over several seeds.

A smaller version of ``benchmarks/asy_quality.py`` (docs/results.md, "Asy-OS recall
against sequential OS over many seeds"): regression with n = 1000, p = 2048, s = 32,
two scans, τ = q, seeds 0..3.  Measured: the mean gap to sequential OS is 0.000,
0.000 and -0.008 (worst seed -0.031) at q = 4, 8, 11 with adaptive budgets (trial slots
on top of s), -0.09, -0.15 and -0.17 with the paper's fixed budgets s/q; with the trial
slots within s it was -0.03 and -0.08 at q = 4 and 8.  The target (mean within 0.05,
every seed within 0.10) sits between, so the test fails with fixed budgets.  About 25 s.
"""

import numpy as np
import pytest

import asyos
from asyos.datasets import make_regression
from asyos.metrics import recall
from asyos.solvers.simulator import fit_simulated

P, S, N, EPOCHS, SEEDS = 2048, 32, 1000, 2, range(4)
QS, MEAN, WORST = (4, 8, 11), 0.05, 0.10   # the target for the recall gap


@pytest.fixture(scope="module")
def gaps():
    """Asy-OS recall - sequential OS recall per seed, by (budget rule, q)."""
    found = {}
    for seed in SEEDS:
        problem = make_regression(p=P, s=S, n=N, seed=seed)
        sequential = recall(asyos.fit_os(problem.X, problem.y, s=S, epochs=EPOCHS)
                            .selected, problem.support)
        for budget in ("adaptive", "fixed"):
            for q in QS:
                out = fit_simulated(problem.X, problem.y, S, q, delay=q, budget=budget,
                                    epochs=EPOCHS)
                found.setdefault((budget, q), []).append(
                    recall(out.selected, problem.support) - sequential)
    return {key: np.array(values) for key, values in found.items()}


@pytest.mark.slow
@pytest.mark.parametrize("q", QS)
def test_adaptive_budgets_stay_close_to_sequential_os(gaps, q):
    assert gaps["adaptive", q].mean() >= -MEAN and gaps["adaptive", q].min() >= -WORST, \
        gaps


@pytest.mark.slow
@pytest.mark.parametrize("q", QS)
def test_fixed_budgets_miss_the_same_target(gaps, q):
    """The target discriminates: the paper's fixed budgets s/q do not meet it."""
    assert gaps["fixed", q].mean() < -MEAN, gaps
