"""Asy-OS on one machine (transport.shared): real forked worker processes sharing u_C
in memory, the server in the first worker's process."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sweeps import sweeps_begin_after_every_pass

from asyos.core.losses import Loss
from asyos.core.shards import shard_size
from asyos.datasets import make_classification, make_regression
from asyos.errors import InputError
from asyos.metrics import recall
from asyos.solvers.asy import AsyConfig
from asyos.solvers.sequential import fit_os
from asyos.streams import ArrayStream, as_stream
from asyos.streams.prefetch import prefetch as _prefetch
from asyos.transport import shared

ROOT = Path(__file__).resolve().parents[2]


def _shm() -> set:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def _check_invariants(result, config):
    """What every run of every carrier must keep: ≤ s features, the staleness bound,
    u_C = Σ_t X_S(t) w_S(t)."""
    stale, asy = result.asy["staleness"], result.asy
    ran = config.for_step(asy["step_seconds"] or 0.0)   # sized for its timed step
    assert (stale["bound"], asy["depth"], asy["batch"]) == \
        (ran.staleness, ran.depth, ran.batch)
    assert stale["max"] <= ran.staleness
    assert sum(stale["histogram"]) == result.n_steps
    assert result.asy["u_check_max_abs_diff"] <= 1e-10 * max(1.0, result.objective)
    assert result.selected.size <= config.s
    assert result.asy["transport"] == "shared"
    # the trace ends at the objective reported (after the fitted rule's joint refit)
    assert result.trace["objective"][-1] == result.objective


@pytest.mark.parametrize("q", [2, 3])
def test_workers_find_what_sequential_os_finds(q):
    """Over three seeds (a real run's interleaving varies: one seed may lose a
    feature that another run would keep; under 3× oversubscription about one run in
    24 lost two strong features here, so the objective is held to the median).  On a
    loaded two-core machine, one run in about 20 loses three of the 24 (recall gap
    0.125): seen at q = 2 before and after the workers stopped reading ahead there
    (1 of 18 runs before and none of 18 after, three seeds, with a busy loop beside
    them), so that is the worst a run may lose."""
    gaps, ratios = [], []
    for seed in range(3):
        problem = make_regression(p=1200, s=24, n=300, seed=seed)
        sequential = fit_os(problem.X, problem.y, 24, epochs=3)
        config = AsyConfig.build(24, q, epochs=3, n_features=1200)
        result = shared.run(as_stream(problem.X), problem.y, config, record_order=True)
        _check_invariants(result, config)
        assert not result.asy["partial"] and result.asy["lost_shards"] == []
        passes = [shard_size(1200, q, t) * 3 for t in range(q)]
        assert [w["steps"] for w in result.asy["workers"]] == \
            [steps + config.sweep * config.sweep_rounds for steps in passes]
        assert sweeps_begin_after_every_pass(result.asy["order"], passes, config.sweep,
                                             config.sweep_rounds)
        gaps.append(recall(sequential.selected, problem.support) -
                    recall(result.selected, problem.support))
        ratios.append(result.objective / sequential.objective)
    assert np.mean(gaps) <= 0.05 and max(gaps) <= 0.125
    assert np.median(ratios) <= 2.0


def test_worker_0_does_not_run_ahead_of_the_forked_workers():
    """Worker 0 is served at once, the others only between its pushes: with a
    one-push pipeline (τ = 8: 4 steps of credit, pushes of 4) it ran 768-964
    steps ahead of worker 1 here (of 2 × 2048) and ended its last pass while worker
    1 was far from the end of its own.  The host now waits for a worker that holds
    credit once it leads by two pipelines: 12 steps on an idle machine, 25 and 93 in
    full test runs and up to 113 with two busy loops beside it (a worker descheduled
    before it asks for credit holds none, and the host steps on meanwhile), so the
    test holds the lead to a quarter of a worker's steps, below the old 38-47 %."""
    for seed in range(2):
        problem = make_regression(p=2048, s=32, n=400, seed=seed)
        config = AsyConfig.build(32, 2, epochs=2, n_features=2048, staleness=8)
        result = shared.run(as_stream(problem.X), problem.y, config, record_order=True)
        _check_invariants(result, config)
        assert (result.asy["depth"], result.asy["batch"]) == (4, 4)
        order = np.array(result.asy["order"])[:, 0]
        lead = np.cumsum(order == 0) - np.cumsum(order == 1)
        assert lead.max() <= 2048 // 4, lead.max()


@pytest.mark.parametrize("seed", [0, 3])
def test_a_lone_worker_makes_sequential_os_s_moves(seed):
    """q = 1: no peer, τ = 0; the worker's kernel takes the same decisions as the
    sequential solver's (to rounding)."""
    problem = make_regression(p=900, s=20, n=250, seed=seed)
    sequential = fit_os(problem.X, problem.y, 20, epochs=3)
    config = AsyConfig.build(20, 1, epochs=3, n_features=900)
    assert config.staleness == 0 and config.batch > 64
    result = shared.run(as_stream(problem.X), problem.y, config)
    _check_invariants(result, config)
    np.testing.assert_array_equal(np.sort(result.selected), np.sort(sequential.selected))
    assert result.objective == pytest.approx(sequential.objective, rel=1e-8)


def test_classification_and_fixed_budgets():
    """Four seeds: with fixed budgets a worker keeps at most s/q, so its recall
    depends on how the true features fall in the shards (11 of 16 in one shard on
    two of these seeds); held to sequential OS on average (both: 0.69–0.81 a seed)."""
    recalls, gaps = [], []
    for seed in (4, 5, 6, 7):
        problem = make_classification(p=800, s=16, n=400, seed=seed)
        config = AsyConfig.build(16, 2, loss="logistic", epochs=3, n_features=800,
                                 budget="fixed")
        result = shared.run(as_stream(problem.X), problem.y, config)
        _check_invariants(result, config)
        assert all(w["kept"] <= 8 for w in result.asy["workers"])
        sequential = fit_os(problem.X, problem.y, 16, loss="logistic", epochs=3)
        recalls.append(recall(result.selected, problem.support))
        gaps.append(recall(sequential.selected, problem.support) - recalls[-1])
    assert min(recalls) >= 0.625 and np.mean(gaps) <= 0.1


def test_sparse_columns():
    from scipy import sparse

    problem = make_regression(p=600, s=12, n=300, seed=6)
    X = problem.X * (np.random.default_rng(0).random(problem.X.shape) < 0.5)
    y = X @ problem.w_true + 0.01 * np.random.default_rng(1).standard_normal(300)
    config = AsyConfig.build(12, 2, epochs=3, n_features=600)
    result = shared.run(as_stream(sparse.csc_matrix(X)), y, config)
    _check_invariants(result, config)
    assert recall(result.selected, problem.support) >= 0.9


@pytest.mark.parametrize("cores, reads_ahead", [(16, True), (2, False)])
def test_workers_read_ahead_only_with_a_core_to_spare(monkeypatch, cores, reads_ahead):
    """Two workers on two cores read their blocks between pushes: a reading thread
    would take a kernel's core and hold the GIL its worker waits for.  Counted in
    the first worker's process (the test's own), whose pass reads through
    ``prefetch`` only when it reads ahead."""
    from asyos.streams import base
    from asyos.transport import base as transport_base

    reads = []
    monkeypatch.setattr(transport_base, "usable_cores", lambda: cores)
    monkeypatch.setattr(base, "READ_AHEAD_BYTES", 0)   # small passes read ahead too
    monkeypatch.setattr(base, "prefetch", lambda items: reads.append(1) or
                        _prefetch(items))
    problem = make_regression(p=400, s=8, n=100, seed=1)
    config = AsyConfig.build(8, 2, epochs=2, n_features=400)
    stream = as_stream(problem.X)
    result = shared.run(stream, problem.y, config)
    _check_invariants(result, config)
    assert stream.prefetch   # the caller's stream is left as it was
    # each shard's first block (its ν, read before the run), the first worker's
    # once more where it reads ahead (its step timed, ``time_a_step``) and, reading
    # ahead, each of the first worker's passes, and each round of its closing
    # sweep: its scan and its arrivals
    assert len(reads) == 2 + ((1 + config.epochs + 2 * config.sweep_rounds)
                              if reads_ahead else 0)


class _Sabotaged(ArrayStream):
    """A stream whose reads in a forked worker fail (``how``) after a few blocks."""

    host = os.getpid()
    reads = 0
    how = "raise"

    def _read(self, indices):
        if os.getpid() != _Sabotaged.host:
            _Sabotaged.reads += 1
            if _Sabotaged.reads > 20:
                if _Sabotaged.how == "raise":
                    raise OSError("the disk went away")
                if _Sabotaged.how == "input":
                    raise InputError("feature 77 contains NaN or inf")
                os.kill(os.getpid(), signal.SIGKILL)
        return super()._read(indices)


def test_a_worker_that_fails_ends_the_run_with_its_message(monkeypatch):
    problem = make_regression(p=1200, s=12, n=200, seed=0)
    monkeypatch.setattr(_Sabotaged, "host", os.getpid())
    monkeypatch.setattr(_Sabotaged, "how", "raise")
    config = AsyConfig.build(12, 2, epochs=3, n_features=1200)
    with pytest.raises(shared.WorkerFailed, match="worker 1: OSError: the disk went away"):
        shared.run(_Sabotaged(problem.X, block_size=8), problem.y, config)


def test_bad_input_met_by_a_forked_worker_exits_2_with_one_line(monkeypatch, capsys):
    """A NaN only a forked worker reads is the user's to fix, as in one process:
    the CLI's one line and status 2, not a traceback; any other failure is 1."""
    from asyos.cli.options import guarded

    problem = make_regression(p=1200, s=12, n=200, seed=0)
    monkeypatch.setattr(_Sabotaged, "host", os.getpid())
    config = AsyConfig.build(12, 2, epochs=3, n_features=1200)
    for how, status in (("input", 2), ("raise", 1)):
        monkeypatch.setattr(_Sabotaged, "how", how)
        monkeypatch.setattr(_Sabotaged, "reads", 0)
        assert guarded(lambda: shared.run(_Sabotaged(problem.X, block_size=8),
                                          problem.y, config)) == status
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and error[0].startswith("asyos: error: worker 1: ")


def test_a_worker_killed_mid_run_is_lost_and_the_result_is_partial(monkeypatch):
    problem = make_regression(p=1200, s=12, n=200, seed=0)
    monkeypatch.setattr(_Sabotaged, "host", os.getpid())
    monkeypatch.setattr(_Sabotaged, "how", "kill")
    config = AsyConfig.build(12, 2, epochs=3, n_features=1200)
    result = shared.run(_Sabotaged(problem.X, block_size=8), problem.y, config)
    assert result.asy["partial"] and result.asy["lost_shards"] == ["1/2"]
    assert result.asy["workers"][1]["lost"]
    # the other one finished: its passes and its closing sweep
    assert result.asy["workers"][0]["steps"] == \
        shard_size(1200, 2, 0) * 3 + config.sweep * config.sweep_rounds
    assert result.asy["u_check_max_abs_diff"] <= 1e-10
    assert result.selected.size <= 12 + 1


# -- the command line, end to end ---------------------------------------------------------
def _run(*args, timeout=120, **popen):
    return subprocess.run([sys.executable, "-m", "asyos.run", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, **popen)


def test_cli_workers_runs_the_embedded_default(tmp_path):
    before = _shm()
    out = tmp_path / "r.json"
    proc = _run("--workers", "2", "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["asy"]["transport"] == "shared"
    assert result["asy"]["n_workers"] == 2
    assert result["truth"]["recall"] >= 0.95
    assert result["asy"]["staleness"]["max"] <= result["asy"]["staleness"]["bound"]
    assert "recall of the true support" in proc.stdout
    assert _shm() <= before
    shown = _run("--workers", "2", "-p", "400", "-s", "10")   # a progress bar
    assert shown.returncode == 0 and "Asy-OS, 2 workers" in shown.stderr
    # 3 passes over 400, then each worker's closing sweep: two rounds of 8
    assert "1232/1232" in shown.stderr


@pytest.mark.parametrize("args, message", [
    (["--workers", "0"], "workers must be ≥ 1"),
    (["--workers", "3", "--simulate", "2"], "without --simulate"),
    (["--workers", "200", "-s", "100"], "200"),
    (["--workers", "2", "--standardize"], "--standardize"),
    (["--workers", "2", "-s", "auto"], "auto"),
    (["--workers", "2", "--ranks-per-node", "2"], "run under mpiexec"),
])
def test_cli_workers_refuses_bad_input(args, message):
    proc = _run(*args, "--quiet")
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def _start_long_run(tmp_path, q=2, epochs=6):
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "asyos.run", "--workers", str(q),
                             "-p", "40000", "-s", "200", "--epochs", str(epochs),
                             "--quiet",
                             "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(_children(proc.pid)) < q - 1:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the workers never started"
        time.sleep(0.05)
    time.sleep(0.5)   # the workers are stepping
    return proc, out


def test_cli_a_killed_worker_gives_exit_3_and_partial_results(tmp_path):
    before = _shm()
    proc, out = _start_long_run(tmp_path)
    worker = _children(proc.pid)[0]
    os.kill(worker, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr
    assert "workers 1/2 died" in stderr
    result = json.loads(out.read_text())
    assert result["asy"]["partial"] and result["asy"]["lost_shards"] == ["1/2"]
    assert _shm() <= before


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_cli_interrupted_run_ends_every_worker(tmp_path, signum):
    before = _shm()
    # long enough that the signal never comes after the end, however warm the cache
    proc, _ = _start_long_run(tmp_path, q=3, epochs=60)
    workers = _children(proc.pid)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    # 128 + the signal, in one line, as every asyos command
    assert proc.returncode == 128 + signum, err
    assert ("asyos: interrupted" if signum == signal.SIGINT else
            "asyos: terminated") in err
    for pid in workers:   # reaped: no process of the run is left
        assert not Path(f"/proc/{pid}").exists() or \
            "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert _shm() <= before


def test_loss_enum_round_trips_through_the_fork():
    """The configuration a forked worker inherits is the parent's (no pickling)."""
    config = AsyConfig.build(4, 2, loss="squared_hinge", epochs=1, n_features=40)
    problem = make_classification(p=40, s=4, n=60, seed=2)
    result = shared.run(as_stream(problem.X), problem.y, config)
    assert config.loss is Loss.SQUARED_HINGE and result.n_steps == 40


def test_group_aware_shards_keep_at_most_s2_groups():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((200, 60))
    group_of = np.repeat(np.arange(12), 5)
    y = X[:, [0, 1, 25, 26]] @ np.array([2.0, -1.5, 1.0, 1.2]) + \
        0.05 * rng.standard_normal(200)
    config = AsyConfig.build(8, 2, epochs=3, n_features=60, s2=4, budget="fixed")
    result = shared.run(as_stream(X), y, config, group_of=group_of)
    _check_invariants(result, config)
    assert result.asy["groups_kept"] <= 4
    assert {0, 5} <= set(group_of[result.selected].tolist())
