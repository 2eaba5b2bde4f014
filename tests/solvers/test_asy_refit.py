"""An Asy-OS run under the fitted rule ends with its support refit jointly: runs whose
interleavings differ but that chose the same features end with the same weights and
objective, on the simulator and on the shared-memory carrier (real processes)."""

import numpy as np
import pytest

from asyos.core.kept_set import fitted_ridge
from asyos.core.losses import Loss, loss_value
from asyos.core.refit import joint_refit
from asyos.datasets import make_classification, make_regression
from asyos.solvers.simulator import fit_simulated
from asyos.streams import as_stream
from asyos.transport.backends import fit_asy

SEEDS = [0, 3]


def _expected(X, y, result, loss):
    """The refit of ``result``'s support written out: what the server must report."""
    columns = np.ascontiguousarray(X[:, result.selected].T)
    ridge = fitted_ridge(loss, y.size, None)
    w, u, _ = joint_refit(columns, y, loss, ridge, np.zeros(result.selected.size))
    return w, loss_value(int(loss), u, y)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_runs_with_one_support_end_with_one_objective(seed, loss):
    make = make_regression if loss == "squared" else make_classification
    problem = make(n=200, p=120, s=6, seed=seed)
    runs = [fit_simulated(problem.X, problem.y, 6, 3, delay=delay, loss=loss, sweep=0)
            for delay in (0, 2, 5)]   # no closing cut: u_C holds the support alone
    supports = {tuple(run.selected) for run in runs}
    assert len(supports) == 1, supports   # an easy problem: every interleaving agrees
    before = [run.asy["refit"]["objective_before"] for run in runs]
    assert max(before) - min(before) > 1e-9 * max(before)   # the runs did differ ...
    weights, objective = _expected(problem.X, problem.y, runs[0], Loss.parse(loss))
    for run in runs:                                  # ... and their results do not
        np.testing.assert_allclose(run.weights, weights, rtol=1e-7, atol=1e-10)
        assert run.objective == pytest.approx(objective, rel=1e-10)
        assert run.objective <= run.asy["refit"]["objective_before"] * (1 + 1e-12)
        assert run.objective_per_epoch[-1] == pytest.approx(
            run.asy["refit"]["objective_before"], rel=0.5)   # the trace stays the run's


def test_the_shared_memory_carrier_refits_from_the_columns_its_workers_send():
    problem = make_regression(n=150, p=96, s=5, seed=1)
    result = fit_asy("shared", as_stream(problem.X), problem.y, 5, 2, loss="squared",
                     epochs="auto", eta="auto", m="auto", rule="auto", ridge=None)
    weights, objective = _expected(problem.X, problem.y, result, Loss.SQUARED)
    np.testing.assert_allclose(result.weights, weights, rtol=1e-7, atol=1e-10)
    assert result.objective == pytest.approx(objective, rel=1e-10)
    assert result.asy["refit"]["newton_steps"] >= 1


def test_the_papers_rule_keeps_its_own_weights():
    problem = make_regression(n=150, p=60, s=5, seed=2)
    result = fit_simulated(problem.X, problem.y, 5, 2, delay=1, rule="magnitude")
    assert "refit" not in result.asy
    u = problem.X[:, result.selected] @ result.weights
    assert result.objective == pytest.approx(loss_value(0, u, problem.y), rel=1e-9)


def test_columns_past_the_limit_are_not_sent_and_the_run_keeps_its_weights(
        monkeypatch):
    """Past ``messages.COLUMNS_LIMIT`` values (n × kept) a worker's FINAL carries no
    columns: the run ends as before the refit existed, with its own weights."""
    from asyos.solvers import messages

    monkeypatch.setattr(messages, "COLUMNS_LIMIT", 10)
    problem = make_regression(n=150, p=60, s=5, seed=2)
    result = fit_simulated(problem.X, problem.y, 5, 2, delay=1)
    assert "refit" not in result.asy
    u = problem.X[:, result.selected] @ result.weights
    assert result.objective == pytest.approx(loss_value(0, u, problem.y), rel=1e-9)
