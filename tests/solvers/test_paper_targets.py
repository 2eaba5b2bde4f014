"""OS recall against Proj-GD, online L1 CD and Grafting, checked with the experiment
runner itself (fixed seeds).

Small enough for the suite: regression at p = 2000, s = 100, 5 seeds (the paper's
protocol, fewer repetitions), two scans.
"""

import pytest

from asyos.experiments.sweeps import vs_p


def _recall(result, method):
    [entry] = [e for e in result.summary if e["method"] == method]
    return entry["recall"]


@pytest.mark.slow
def test_os_is_within_003_of_proj_gd_and_above_online_l1(tmp_path):
    result = vs_p(tmp_path, tasks=("regression",), ps={"regression": [2000]}, s=100,
                  reps=5, methods=["OS", "Proj-GD", "L1 coordinate descent"],
                  progress=False)
    os_recall = _recall(result, "OS")
    assert os_recall >= _recall(result, "Proj-GD") - 0.03, result.table
    assert os_recall >= _recall(result, "L1 coordinate descent"), result.table


@pytest.mark.slow
def test_os_is_at_least_as_good_as_grafting(tmp_path):
    """Grafting re-optimises its active set at every admission (~60 s at p = 2000,
    s = 100): compared on a smaller instance of the protocol."""
    result = vs_p(tmp_path, tasks=("regression",), ps={"regression": [1000]}, s=40,
                  reps=2, methods=["OS", "Grafting"], progress=False)
    assert _recall(result, "OS") >= _recall(result, "Grafting") - 1e-9, result.table


@pytest.mark.slow
def test_recall_falls_gently_with_workers_under_adaptive_budgets(tmp_path):
    """q = 10 loses at most 0.1 recall against q = 1 (τ = q), where fixed budgets s/q
    lose more: the adaptive budgets close most of that gap."""
    from asyos.experiments.sweeps import vs_workers

    result = vs_workers(tmp_path, tasks=("regression",), ps={"regression": [2000]},
                        s=100, reps=5, workers=[1, 10], progress=False,
                        variants=[("adaptive", "q"), ("fixed", "q")])
    recall = {(e["method"], e["workers"]): e["recall"] for e in result.summary}
    adaptive, fixed = "adaptive budgets, τ = q", "fixed budgets, τ = q"
    assert recall[adaptive, 10] >= recall[adaptive, 1] - 0.1, result.table
    assert recall[adaptive, 10] > recall[fixed, 10], result.table
