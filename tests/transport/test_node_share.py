"""A process's share of its node: BLAS threads and whether waiting may spin."""

import json
import subprocess
import sys

import pytest

from asyos.transport import base
from asyos.transport.base import FULL_NODE_SPIN, SPARE_CORE_SPIN, Backoff, NodeShare


@pytest.mark.parametrize("cores, processes, threads, spins", [
    (2, 1, 2, True), (2, 2, 1, True), (2, 3, 1, False), (16, 3, 5, True),
    (16, 12, 1, True), (16, 17, 1, False), (4, 0, 4, True)])
def test_cores_are_shared_among_the_node_processes(monkeypatch, cores, processes,
                                                    threads, spins):
    monkeypatch.setattr(base, "usable_cores", lambda: cores)
    share = NodeShare.of(processes)
    assert share.threads == threads
    assert share.spin_seconds == (SPARE_CORE_SPIN if spins else FULL_NODE_SPIN)
    assert FULL_NODE_SPIN < SPARE_CORE_SPIN
    assert share.backoff().spin == share.spin_seconds
    assert NodeShare.of(processes, threads=7).threads == 7   # explicit wins


@pytest.mark.parametrize("cores, processes, workers, reads_ahead", [
    (2, 1, None, True), (2, 2, None, False), (2, 3, None, False), (16, 12, None, True),
    (2, 2, 1, True), (2, 3, 2, False), (4, 3, 2, True)])
def test_a_worker_reads_ahead_only_with_a_core_to_spare(monkeypatch, cores, processes,
                                                      workers, reads_ahead):
    """The reading thread takes a core of its own; ``workers``: the processes that
    run kernels (MPI's server rank mostly waits)."""
    monkeypatch.setattr(base, "usable_cores", lambda: cores)
    share = NodeShare.of(processes, workers=workers)
    assert share.read_ahead is reads_ahead
    stream = type("Stream", (), {"prefetch": not reads_ahead})()
    assert share.reading(stream) is stream and stream.prefetch is reads_ahead


def test_without_spin_every_wait_sleeps(monkeypatch):
    """spin 0: the first wait already sleeps (sched_yield would not hand the core to
    a busy worker), and sleeps double up to the cap."""
    slept = []
    monkeypatch.setattr(base.time, "sleep", slept.append)
    monkeypatch.setattr(base.os, "sched_yield", lambda: slept.append("yield"))
    backoff = Backoff(spin=0.0, start=1e-5, cap=4e-5)
    for _ in range(4):
        backoff.sleep()
    assert slept == [1e-5, 2e-5, 4e-5, 4e-5]
    backoff.reset()
    backoff.sleep()
    assert slept[-1] == 1e-5


def test_apply_limits_the_blas_that_numba_calls():
    code = ("from asyos.transport.base import NodeShare; NodeShare.of(1, 1).apply(); "
            "import json; from threadpoolctl import threadpool_info; "
            "print(json.dumps([(i['filepath'], i['num_threads']) "
            "for i in threadpool_info() if i['user_api'] == 'blas']))")
    pools = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                      text=True, check=True, timeout=120).stdout)
    assert any("scipy" in path for path, _ in pools)   # SciPy's BLAS: numba's np.dot
    assert all(threads == 1 for _, threads in pools)


@pytest.mark.parametrize("command", [["asyos.run"], ["asyos.worker", "--shard", "0/1"]])
def test_a_bad_thread_count_exits_2(command):
    proc = subprocess.run([sys.executable, "-m", *command, "-p", "200", "-s", "5",
                           "--blas-threads", "0"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert "blas-threads must be ≥ 1, got 0" in proc.stderr


def test_sequential_run_on_one_blas_thread(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "-p", "300", "-s", "10",
                           "--blas-threads", "1", "--quiet", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["truth"]["recall"] > 0.5


@pytest.mark.parametrize("cores, q, reads_ahead", [(2, 1, True), (2, 2, False),
                                                   (8, 3, True)])
def test_a_loopback_zeromq_worker_reads_ahead_as_its_machine_allows(
        monkeypatch, tmp_path, cores, q, reads_ahead):
    """The q ZeroMQ workers an estimator starts share its machine, as ``--workers q``
    does; the worker's shard reads as its stream does."""
    import numpy as np

    from asyos.streams.npy import save_feature_major
    from asyos.transport.zeromq import process

    save_feature_major(tmp_path / "X.npy", np.ones((5, 12)))
    monkeypatch.setattr(base, "usable_cores", lambda: cores)
    monkeypatch.setattr(NodeShare, "apply", lambda self: None)   # BLAS: not here
    job = {"data": str(tmp_path / "X.npy"), "shuffle": False, "seed": 0,
           "dtype": "float64", "q": q, "threads": 1}
    stream = process.worker_stream(job)
    assert stream.prefetch is reads_ahead
    assert stream.shard(q, 0).prefetch is reads_ahead
