"""The experiments CLI (asyos.experiments): tiny in-process runs of every experiment,
the CLI's usage errors, and the speedup arithmetic on hand-made traces."""

import csv
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asyos.core.selection import Selection
from asyos.datasets import paper_n
from asyos.errors import InputError
from asyos.experiments import speedup as sp
from asyos.experiments import sweeps
from asyos.experiments.runner import mean_se
from asyos.io.results import load_result
from asyos.solvers.result import FitResult

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(ps=[300, 400], s=10, reps=2, progress=False)


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _finite(row: dict, *columns) -> bool:
    return all(math.isfinite(float(row[c])) for c in columns)


def _png(path: Path) -> None:
    assert path.exists() and path.stat().st_size > 1000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_vs_p_one_row_per_setting_method_and_rep(tmp_path):
    result = sweeps.vs_p(tmp_path, **TINY)
    rows = _rows(tmp_path / "vs-p.csv")
    _png(tmp_path / "vs-p.png")
    expected = 0
    for task in sweeps.TASKS:
        methods = sweeps.method_table(task)
        assert {"OS", "Proj-GD", "LASSO", "Grafting", "L1 coordinate descent",
                "L0 coordinate descent"} <= set(methods)
        expected += 2 * 2 * len(methods)
        mine = [r for r in rows if r["task"] == task]
        assert {(r["p"], r["method"], r["rep"]) for r in mine} == {
            (str(p), m, str(rep))
            for p in (300, 400) for m in methods for rep in (0, 1)}
        error = "recovery_error" if task == "regression" else "test_error"
        for row in mine:
            assert not row.get("failure"), row
            assert _finite(row, "recall", error, "seconds")
            assert 0 <= float(row["recall"]) <= 1
            assert int(row["n_selected"]) <= 10
            assert row["n"] == str(paper_n(10, int(row["p"]))) and row["epochs"] == "2"
    assert len(rows) == expected == len(result.rows)
    assert "OS" in result.table and "±" in result.table


def test_vs_epochs_runs_os_and_the_online_baselines_per_scan_count(tmp_path):
    sweeps.vs_epochs(tmp_path, tasks="regression", epochs=[1, 2], **TINY)
    rows = _rows(tmp_path / "vs-epochs.csv")
    _png(tmp_path / "vs-epochs.png")
    methods = {"OS", "Grafting", "L1 coordinate descent", "L0 coordinate descent"}
    assert {(r["p"], r["method"], r["epochs"], r["rep"]) for r in rows} == {
        (str(p), m, str(e), str(rep)) for p in (300, 400) for m in methods
        for e in (1, 2) for rep in (0, 1)}
    assert len(rows) == 2 * 4 * 2 * 2
    assert all(_finite(r, "recall", "recovery_error") for r in rows)
    assert {r["task"] for r in rows} == {"regression"}


def test_vs_workers_simulates_tau_equal_q_and_plots_staleness(tmp_path):
    sweeps.vs_workers(tmp_path, workers=[1, 2, 5], **TINY)
    rows = _rows(tmp_path / "vs-workers.csv")
    _png(tmp_path / "vs-workers.png")
    _png(tmp_path / "vs-workers-staleness.png")
    variants = {sweeps.variant_name(*v): v for v in sweeps.VARIANTS}
    assert len(rows) == 2 * 2 * 3 * 2 * 4  # tasks × p × q × reps × variants
    assert {r["method"] for r in rows} == set(variants)
    for row in rows:
        q = int(row["workers"])
        error = "recovery_error" if row["task"] == "regression" else "test_error"
        assert _finite(row, "recall", error, "staleness_mean")
        _, delay = variants[row["method"]]
        assert int(row["staleness_max"]) <= (q if delay == "q" else 0)
        counts = [int(c) for c in row["staleness_histogram"].split()]
        assert sum(counts) > 0 and len(counts) - 1 == int(row["staleness_max"])
        assert int(row["n_selected"]) <= 10             # adaptive budgets too: ≤ s
    assert {int(r["staleness_max"]) for r in rows if r["workers"] == "1"} == {0}


def test_a_pool_of_jobs_gives_the_same_rows_as_one_process(tmp_path):
    kwargs = dict(tasks="regression", workers=[1, 2], ps=[300], s=10, reps=2,
                  progress=False)
    one = sweeps.vs_workers(tmp_path / "one", jobs=1, **kwargs).rows
    two = sweeps.vs_workers(tmp_path / "two", jobs=2, **kwargs).rows
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in one]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in two]


def test_selection_keeps_the_s_largest_weights():
    sel = Selection(np.array([1, 4, 7, 9]), np.array([0.1, -3.0, 2.0, 0.5]), 1, "x")
    assert sweeps.selection(sel, 2).tolist() == [4, 7]
    fitted = FitResult(np.array([3, 1]), np.array([0.5, 0.25]))
    assert sweeps.selection(fitted, 5).tolist() == [1, 3]
    assert sweeps.selection([3, 1], 5).tolist() == [1, 3]


def test_mean_and_standard_error():
    assert mean_se([1.0, 3.0]) == (2.0, 1.0, 2)
    assert mean_se([2.0]) == (2.0, 0.0, 1)
    assert mean_se([float("nan"), 4.0])[:2] == (4.0, 0.0)


@pytest.mark.parametrize("args, message", [
    (["vs-p", "--reps", "0"], "--reps: must be >= 1"),
    (["vs-q"], "invalid choice: 'vs-q'"),
    (["vs-p", "--jobs", "0"], "--jobs: must be >= 1"),
    (["speedup", "--cluster", "6by2"], "expected MACHINESxWORKERS"),
    (["speedup", "--cluster", "0x2"], "at least one machine"),
    (["speedup", "--latency", "-1"], "--latency: must be a finite number > 0"),
    (["speedup", "--bandwidth", "fast"], "--bandwidth: expected a number"),
    (["vs-p", "-s", "10"], "-s: for speedup only"),
    (["vs-workers", "--cluster", "6x2"], "--cluster: for speedup only"),
])
def test_cli_usage_errors_exit_2_with_a_message(args, message):
    proc = subprocess.run([sys.executable, "-m", "asyos.experiments", *args],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_asyos_experiments_subcommand_is_wired():
    from asyos.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["experiments", "vs-p", "--reps", "0"])
    assert exit_info.value.code == 2


# ------------------------------------------------------------------ speedup arithmetic
def test_time_to_threshold_interpolates_between_trace_points():
    seconds, objective = [1.0, 2.0, 3.0, 4.0], [1.0, 0.5, 0.3, 0.2]
    assert sp.time_to_threshold(seconds, objective, 0.4) == pytest.approx(2.5)
    assert sp.time_to_threshold(seconds, objective, 0.3) == pytest.approx(3.0)
    assert sp.time_to_threshold(seconds, objective, 2.0) == 1.0     # starts below
    assert sp.time_to_threshold(seconds, objective, 0.1) == math.inf
    assert sp.threshold_of(0.25) == pytest.approx(1.05 * 0.25)


def test_speedup_of_hand_made_traces():
    # sequential OS ends at 0.2 → threshold 0.21, reached by the sequential run at
    # 8 s, by q = 2 at 2 s, by q = 4 at 1.29 s (between its points at 0.5 s and 1.5 s);
    # q = 8 ends at 0.3 and never reaches it: speedup 0, not a looser threshold
    runs = {"seq": ([2.0, 8.0, 10.0], [1.0, 0.21, 0.2]),
            "q2": ([1.0, 2.0, 3.0], [1.0, 0.21, 0.2]),
            "q4": ([0.5, 1.5, 4.0], [1.0, 0.0, 0.0]),
            "q8": ([0.5, 1.0], [1.0, 0.3])}
    threshold, times, gains = sp.speedups(runs, "seq")
    assert threshold == pytest.approx(0.21)
    assert times["q4"] == pytest.approx(0.5 + 0.79)
    assert times["seq"] == pytest.approx(8.0) and times["q2"] == pytest.approx(2.0)
    assert times["q8"] == math.inf
    assert gains == pytest.approx({"seq": 1.0, "q2": 4.0, "q4": 8.0 / 1.29, "q8": 0.0})


def test_cost_model_recovers_the_step_line_push_and_serve():
    # steps cost 3 µs + 2e-9·n·(|S| + 2); pushes of 10 steps; a worker spends 50 µs
    # a push outside its kernel, the server 15 µs a push
    n, s, step, column, push, serve = 100, 8, 3e-6, 2e-9, 5e-5, 1.5e-5
    empty = dict(selected=np.zeros(0, np.int64), weights=np.zeros(0))
    sequential = FitResult(**empty, n_steps=1000,
                           seconds=1000 * (step + column * n * (s + 2)))
    workers = [{"steps": 500, "pushes": 50, "budget": 4 + 2 * t,
                "compute_seconds": 500 * (step + column * n * (6 + 2 * t)),
                "communicate_seconds": 0.0 if t == 0 else 40 * push,
                "read_seconds": 0.0 if t == 0 else 10 * push} for t in range(2)]
    # worker 0 hosts the server: its run's time is its kernel, its pushes and serving
    wall = workers[0]["compute_seconds"] + 50 * push + 100 * serve
    parallel = FitResult(**empty, asy={"workers": workers, "wall_seconds": wall,
                                       "server_seconds": 100 * serve})
    fitted = sp.fit_cost_model([sequential, parallel], n, s, host=True)
    assert (fitted.step, fitted.column) == pytest.approx((step, column))
    assert fitted.push == pytest.approx(push) and fitted.serve == pytest.approx(serve)
    assert fitted.host and sp.steps_per_push(parallel) == 10
    # sequential OS alone, one budget: the paper's line through the origin
    alone = sp.fit_cost_model([sequential], n, s, host=False)
    assert alone.step == 0 and alone.column == pytest.approx(
        (step + column * n * (s + 2)) / (n * (s + 2)))
    over_mpi = sp.fit_cost_model([sequential, parallel], n, s, host=False)
    assert over_mpi.push == pytest.approx(push / 2)
    # a step that costs more with fewer columns (its fixed work dominates): flat
    for worker, seconds in zip(workers, (6e-6, 5e-6)):
        worker["compute_seconds"] = 500 * seconds
    flat = sp.fit_cost_model([parallel], n, s, host=True)
    assert (flat.step, flat.column) == pytest.approx((5.5e-6, 0.0))



def test_the_model_simulates_the_pipeline_the_runs_had():
    """The measured runs timed their step and sized their pipeline for it; the
    virtual clock gets the same window (the paper's size: 2 × 128 for 7.5 µs)."""
    from asyos.solvers.simulator import Clock

    empty = dict(selected=np.zeros(0, np.int64), weights=np.zeros(0))
    runs = [FitResult(**empty), *(FitResult(**empty, asy={"step_seconds": step})
                                  for step in (7e-6, 8e-6, 7.5e-6, None))]
    assert sp.timed_step(runs) == pytest.approx(7.5e-6)
    assert sp.timed_step(runs[:1]) is None
    clock = Clock(5e-6)
    assert sp._clock_for(clock, 2, 64, 8192, step_seconds=7.5e-6).window == 256
    assert sp._clock_for(clock, 2, 64, 8192).window == 32          # p alone
    assert sp._clock_for(clock, 2, 64, 8192, step_seconds=1e-4).window == 40
    assert sp._clock_for(clock, 2, 64, 8192, step_seconds=1e-3).window == 32

@pytest.mark.parametrize("carrier", [
    "shared", pytest.param("mpi", marks=pytest.mark.skipif(
        not sp.mpiexec_path().exists(), reason="no mpiexec next to python"))],
    ids=["shared-memory", "over-MPI"])   # an id "mpi" would mark it pytest-mpi's
def test_speedup_real_runs_for_one_and_two_workers(tmp_path, carrier):
    result = sp.speedup(tmp_path, tasks="regression", p=600, n=200, s=16,
                        max_workers=2, reps=1, timeout=120, model_workers=(1, 2),
                        progress=False, carrier=carrier)
    rows = _rows(tmp_path / "speedup.csv")
    _png(tmp_path / "speedup.png")
    measured = [r for r in rows if r["kind"] == "measured"]
    method = sp.CARRIERS[carrier]
    assert [(r["method"], r["workers"]) for r in measured] == [
        ("OS (sequential)", "1"), (method, "1"), (method, "2")]
    assert float(measured[0]["speedup"]) == 1.0
    assert _finite(measured[0], "t_threshold")
    for row in measured:   # a run that never reaches sequential OS's level: speedup 0
        assert _finite(row, "speedup", "recall", "recovery_error")
        assert (float(row["speedup"]) > 0) == math.isfinite(float(row["t_threshold"]))
        assert "j mod q" in row["partition"] and Path(row["result_file"]).exists()
        if row["method"] != method:
            continue
        assert float(row["wall_error"]) == pytest.approx(
            float(row["predicted_seconds"]) / float(row["seconds"]) - 1)
        assert load_result(row["result_file"]).asy["server_seconds"] > 0
        if float(row["speedup"]) > 0:
            assert float(row["model_error"]) == pytest.approx(
                float(row["predicted_speedup"]) / float(row["speedup"]) - 1)
    predicted = [r for r in rows if r["kind"] == "predicted"]
    assert [(r["workers"], r["method"]) for r in predicted] == [
        ("1", "Asy-OS (virtual clock)"), ("2", "Asy-OS (virtual clock)"),
        ("12", "Asy-OS (virtual clock, 6 machines x 2)")]
    for row in predicted:
        assert _finite(row, "speedup", "model_step", "model_column", "model_serve",
                       "seconds")
        assert float(row["model_step"]) + float(row["model_column"]) > 0
        assert float(row["model_serve"]) > 0
    assert float(predicted[-1]["latency"]) == sp.LATENCY
    assert len(result.rows) == 6


def test_method_selection_per_task():
    from asyos.experiments.sweeps import method_table

    both = ["OS", "L1 Hinge Loss Classification"]
    assert list(method_table("regression", both)) == ["OS"]
    assert list(method_table("classification", both)) == both
    with pytest.raises(InputError, match="unknown method"):
        method_table("regression", ["OS", "Lassoo"])
