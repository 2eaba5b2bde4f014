"""Group-aware Asy-OS from the command line over real transports: mpiexec
and ZeroMQ processes, the budgets (≤ s1 features, ≤ s2 groups) and the u-check."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from test_mpi import MPIEXEC, ROOT, _mpiexec
from test_zeromq import _port, _wait
from test_zeromq_protocol import NO_GROUPS, SECRET, N, _exchange, _socket

from asyos.core.server_state import ServerState
from asyos.core.shards import group_owners
from asyos.solvers import messages as msg
from asyos.solvers.asy import AsyConfig, ServerMonitor, group_fingerprint
from asyos.solvers.sequential import fit_os
from asyos.solvers.worker_loop import WorkerPlan
from asyos.transport.wire import Kind, encode
from asyos.transport.zeromq import ZmqServer


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """X (60 × 120) in 15 groups of 8 (labels as text), y from groups 0, 4 and 8."""
    root = tmp_path_factory.mktemp("grouped")
    rng = np.random.default_rng(7)
    X = rng.standard_normal((60, 120))
    groups = np.repeat(np.arange(15), 8)
    w = np.zeros(120)
    w[[2, 5, 33, 36, 38, 65, 69]] = 1.5
    np.save(root / "X.npy", X)
    np.save(root / "y.npy", X @ w + 0.2 * rng.standard_normal(60))
    (root / "groups.txt").write_text("\n".join(f"pathway-{g:02d}" for g in groups))
    return root, X, groups


def _check(result, groups, s1, s2, q):
    asy = result["asy"]
    selected = np.asarray(result["selected"])
    assert selected.size <= s1 and len(set(groups[selected])) <= s2
    assert asy["groups_kept"] == len(set(groups[selected]))
    assert asy["n_workers"] == q and sum(asy["group_budgets"]) == s2
    assert asy["u_check_max_abs_diff"] < 1e-9
    return selected


def _is_sequential(result, root, X, groups):
    """A q = 1, τ = 0 run of s = 6, s2 = 2, η = 0.3, m = 2, 3 epochs is sequential
    group-aware OS with that fixed step."""
    _check(result, groups, 6, 2, 1)
    sequential = fit_os(X, np.load(root / "y.npy"), 6, eta=0.3, m=2.0, epochs=3,
                        groups=groups, s2=2)
    np.testing.assert_array_equal(result["selected"], sequential.selected)
    np.testing.assert_allclose(result["weights"], sequential.weights, atol=1e-10)


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH")
def test_mpiexec_cli_keeps_budgets_and_one_worker_is_sequential(grouped, tmp_path):
    root, X, groups = grouped
    data = ["-m", "asyos.run", "--data", str(root / "X.npy"), "--labels",
            str(root / "y.npy"), "--groups", str(root / "groups.txt"), "--quiet"]
    out = tmp_path / "r.json"
    proc = _mpiexec(4, *data, "-s", "9", "--group-sparsity", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("group budgets [1, 1, 1]") == 1      # rank 0 reports
    _check(json.loads(out.read_text()), groups, 9, 3, 3)
    # q = 1, τ = 0, a fixed step: the sequential group-aware run
    proc = _mpiexec(2, *data, "-s", "6", "--group-sparsity", "2", "--staleness", "0",
                    "--eta", "0.3", "--m", "2", "--epochs", "3", "--out",
                    str(tmp_path / "one.json"))
    assert proc.returncode == 0, proc.stderr
    _is_sequential(json.loads((tmp_path / "one.json").read_text()), root, X, groups)
    # more workers than the group budget: refused on every rank, one message
    proc = _mpiexec(4, *data, "-s", "9", "--group-sparsity", "2")
    assert proc.returncode == 2 and proc.stderr.count("asyos: error:") == 1
    assert "3 workers cannot share a group budget of s2 = 2" in proc.stderr


def _zmq(module, port, *args):
    return subprocess.Popen([sys.executable, "-m", module, *(
        ["--bind" if module == "asyos.server" else "--connect",
         f"tcp://127.0.0.1:{port}"]), *args], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def test_zeromq_workers_read_the_labels_and_keep_the_budgets(grouped, tmp_path):
    root, X, groups = grouped
    port, out = _port(), tmp_path / "r.json"
    server = _zmq("asyos.server", port, "--labels", str(root / "y.npy"), "-s", "9",
                  "--workers", "2", "--groups", str(root / "groups.txt"),
                  "--group-sparsity", "3", "--out", str(out), "--quiet")
    workers = [_zmq("asyos.worker", port, "--data", str(root / "X.npy"), "--groups",
                    str(root / "groups.txt"), "--shard", f"{t}/2") for t in range(2)]
    for code, _, err in _wait(server, *workers):
        assert code == 0, err
    result = json.loads(out.read_text())
    assert result["asy"]["transport"] == "zeromq"
    assert result["asy"]["group_budgets"] == [2, 1]
    selected = _check(result, groups, 9, 3, 2)
    owner = group_owners(groups, 15, 2)
    for t, worker in enumerate(result["asy"]["workers"]):   # whole groups, ≤ s2_t
        mine = selected[owner[groups[selected]] == t]
        assert worker["kept"] == mine.size
        assert len(set(groups[mine])) <= result["asy"]["group_budgets"][t]


def test_zeromq_refuses_other_labels_then_one_worker_is_sequential(grouped, tmp_path):
    """A worker without the labels, or with other ones, is refused (exit 2, the reason
    on stderr); the server keeps waiting for the right one, and with q = 1 and τ = 0
    the run is sequential group-aware OS."""
    root, X, groups = grouped
    (tmp_path / "other.txt").write_text("\n".join(str(j // 4) for j in range(120)))
    port, out = _port(), tmp_path / "r.json"
    server = _zmq("asyos.server", port, "--labels", str(root / "y.npy"), "-s", "6",
                  "--workers", "1", "--groups", str(root / "groups.txt"),
                  "--group-sparsity", "2", "--staleness", "0", "--eta", "0.3", "--m",
                  "2", "--epochs", "3", "--out", str(out), "--quiet")
    data = ["--data", str(root / "X.npy"), "--shard", "0/1"]
    for extra, reason in [([], "give the worker the server's --groups file"),
                          (["--groups", str(tmp_path / "other.txt")],
                           r"labels \(30 groups\) differ from the server's \(15 groups")]:
        [(code, _, err)] = _wait(_zmq("asyos.worker", port, *data, *extra))
        assert code == 2 and re.search(reason, err), err
    good = _zmq("asyos.worker", port, *data, "--groups", str(root / "groups.txt"))
    for code, _, err in _wait(server, good):
        assert code == 0, err
    _is_sequential(json.loads(out.read_text()), root, X, groups)


@pytest.mark.parametrize("fingerprint, refused", [
    (None, "give the worker the server's --groups file"),
    ("same", None),
    ("other", "differ from the server's"),
    ("short", "malformed group fingerprint"),
])
def test_a_hello_is_checked_against_the_servers_labels(fingerprint, refused):
    groups = np.repeat(np.arange(4), 3)
    config = AsyConfig.build(4, 1, eta=0.1, m=1.0, epochs=1, s2=2)
    server = ZmqServer("tcp://127.0.0.1:0", np.linspace(-1, 1, N), config,
                       group_of=groups, secret=SECRET)
    frame = {None: NO_GROUPS, "same": group_fingerprint(groups),
             "other": group_fingerprint(groups[::-1].copy()),
             "short": np.array([4])}[fingerprint]
    try:
        [reply] = _exchange(server, _socket(server),
                            encode(msg.Hello(1, 12, N, 1.0, frame, 12, SECRET)))
    finally:
        server.close()
    if refused is None:
        assert reply.kind == Kind.CONFIG
        plan = WorkerPlan.received(reply.body.plan_ints, reply.body.plan_floats)
        assert plan.group_budget == 2 and plan.capacity == 4
    else:
        assert reply.kind == Kind.REFUSE and refused in reply.body.reason


@pytest.mark.parametrize("selected, message", [
    ([0, 1, 2, 3], "kept 4 features, more than s = 3"),
    ([0, 2], "kept 2 groups, more than s2 = 1"),
    ([0, 1], None)])
def test_the_final_assembly_checks_both_budgets(selected, message):
    """What every carrier's server does at the end (``ServerMonitor.result``)."""
    config = AsyConfig.build(3, 1, eta=0.1, m=1.0, s2=1)
    state = ServerState(2, 1)
    state.finish(0, selected, np.ones(len(selected)), np.zeros(2))
    monitor = ServerMonitor(np.zeros(2), config, 4, group_of=np.array([0, 0, 1, 1]))
    stats = [{"steps": 0, "kept": len(selected)}]
    if message is None:
        assert monitor.result(state, stats, 0.1, 1.0).asy["groups_kept"] == 1
    else:
        with pytest.raises(RuntimeError, match=message):
            monitor.result(state, stats, 0.1, 1.0)
