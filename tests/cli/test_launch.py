"""launch.sh --zmq: real server and worker processes on 127.0.0.1 (hang guard on each)."""

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch.sh"
TIMEOUT = 120  # hang guard only
FAST = 30      # usage errors start no process
PROBLEM = ("-p", "600", "-s", "10")


def _env(**extra):
    return {**os.environ, "ASYOS_PYTHON": sys.executable, **extra}


def _launch(*args, timeout=TIMEOUT, **env):
    return subprocess.run(["bash", str(LAUNCH), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=_env(**env))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _left_behind(port: int) -> str:
    """Command lines of asyos servers or workers still using ``port``."""
    proc = subprocess.run(["pgrep", "-af", rf"asyos[.](server|worker) .*:{port}( |$)"],
                          capture_output=True, text=True, timeout=FAST)
    return proc.stdout


def _results(path: Path) -> dict:
    return json.loads(path.read_text())["asy"]


def test_zmq_mode_runs_a_server_and_its_workers(tmp_path):
    out, port = tmp_path / "r.json", _free_port()
    # --shuffle is worker-only and --seed=3 is shared: the server would reject the former.
    proc = _launch("--zmq", "2", "--port", str(port), *PROBLEM, "--seed=3", "--shuffle",
                   "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    asy = _results(out)
    assert asy["n_workers"] == 2 and asy["transport"] == "zeromq"
    assert asy["lost_shards"] == []
    # two workers on this machine share its cores for BLAS
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    assert [w["blas_threads"] for w in asy["workers"]] == [share, share]


def test_flags_after_double_dash_reach_the_server_and_print_its_summary(tmp_path):
    out, port = tmp_path / "r.json", _free_port()
    proc = _launch("--zmq", "3", "--port", str(port), "--", *PROBLEM, "--out", str(out),
                   "--blas-threads=2")
    assert proc.returncode == 0, proc.stderr
    assert "Asy-OS: 3 workers" in proc.stdout
    asy = _results(out)
    assert asy["n_workers"] == 3
    assert [w["blas_threads"] for w in asy["workers"]] == [2, 2, 2]   # forwarded


def test_a_failing_worker_stops_the_server(tmp_path):
    port = _free_port()
    proc = _launch("--zmq", "2", "--port", str(port), *PROBLEM, "--quiet",
                   "--data", "/nonexistent.npy")
    assert proc.returncode == 2, proc.stderr
    assert "no such file" in proc.stderr and "stopping the others" in proc.stderr
    assert _left_behind(port) == ""


def test_a_failing_server_stops_the_workers(tmp_path):
    # The workers alone would wait --server-timeout (120 s) for a server: the guard is shorter.
    port = _free_port()
    proc = _launch("--zmq", "2", "--port", str(port), *PROBLEM, "--quiet",
                   "--labels", str(tmp_path / "missing.npy"), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "stopping the others" in proc.stderr
    assert _left_behind(port) == ""


def test_sigterm_stops_everything_and_the_server_checkpoints(tmp_path):
    port, checkpoint = _free_port(), tmp_path / "ck.npz"
    launch = subprocess.Popen(["bash", str(LAUNCH), "--zmq", "2", "--port", str(port),
                               *PROBLEM, "--quiet", "--epochs", "1000000",
                               "--checkpoint", str(checkpoint), "--checkpoint-every", "0.2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=ROOT, env=_env())
    try:
        deadline = time.monotonic() + TIMEOUT
        while not checkpoint.exists():   # the server is serving (and handles SIGTERM)
            assert launch.poll() is None, launch.communicate()
            assert time.monotonic() < deadline, "no checkpoint"
            time.sleep(0.1)
        launch.send_signal(signal.SIGTERM)
        _, stderr = launch.communicate(timeout=TIMEOUT)
    finally:
        launch.kill()
    assert launch.returncode == 143, stderr
    assert _left_behind(port) == ""


def test_hosts_mode_runs_workers_through_ssh(tmp_path):
    """A stand-in ssh runs the remote command here: no real ssh."""
    keys = tmp_path / "keys"
    made = subprocess.run([sys.executable, "-m", "asyos.cli.main", "keys", str(keys)],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert made.returncode == 0, made.stderr
    remote = tmp_path / "remote dir's"   # the quoting must survive ssh's remote shell
    (remote / ".venv" / "bin").mkdir(parents=True)
    _script(remote / ".venv" / "bin" / "python", f'exec "{sys.executable}" "$@"')
    log, bin_dir = tmp_path / "ssh.log", tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "ssh", f'printf "%s\\n" "$*" >> "{log}"\n'
                             'for last; do :; done\nexec sh -c "$last"')
    hosts = tmp_path / "hosts"
    hosts.write_text("# workers\nalice@node1\n\n  node2   # the second one\n")
    out, port = tmp_path / "r.json", _free_port()
    proc = _launch("--zmq", "3", "--port", str(port), "--hosts", str(hosts),
                   "--keys", str(keys), *PROBLEM, "--quiet", "--out", str(out),
                   PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                   ASYOS_REMOTE_DIR=str(remote), ASYOS_SERVER_HOST="127.0.0.1")
    assert proc.returncode == 0, proc.stderr
    assert _results(out)["n_workers"] == 3
    calls = log.read_text().splitlines()
    assert [call.split()[3] for call in calls if "'--shard' '0/3'" in call] == ["alice@node1"]
    assert [call.split()[3] for call in calls if "'--shard' '1/3'" in call] == ["node2"]
    assert [call.split()[3] for call in calls if "'--shard' '2/3'" in call] == ["alice@node1"]
    assert all(f"'--connect' 'tcp://127.0.0.1:{port}'" in call for call in calls)


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("args, message", [
    (("--hosts", "deploy/hosts.example"), "give --keys DIR"),
    (("--feat", "600"), "write --features in full"),
    (("--bind", "tcp://0.0.0.0:1"), "--bind is set by launch.sh"),
    (("--port", "70000"), "must be a TCP port"),
    (("--data",), "--data needs a value"),
])
def test_usage_errors_fail_fast_with_status_2(args, message):
    proc = _launch("--zmq", "2", *args, timeout=FAST)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_no_workers_and_help():
    proc = _launch("--zmq", "0", timeout=FAST)
    assert proc.returncode == 2 and "Q >= 1" in proc.stderr
    proc = _launch("--zmq", "2", "-h", timeout=FAST)
    assert proc.returncode == 0 and "./launch.sh --zmq Q" in proc.stdout
