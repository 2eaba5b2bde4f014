"""Nothing a run started outlives it: the estimators' loopback workers die with their
parent, and a SIGKILLed fit's folder (a copy of X, the run secret) is reclaimed by
the next one."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from asyos.transport.local import RUN_PREFIX, reclaim_orphans

# a parent that starts a child which asks to die with it, then waits forever
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import os, sys, time; from asyos.transport.base import die_with_parent; "
    "die_with_parent(int(sys.argv[1])); print(os.getpid(), flush=True); "
    "time.sleep(300)",
    str(__import__("os").getpid())], stdout=subprocess.PIPE, text=True)
print(child.stdout.readline().strip(), flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:   # a zombie (exited, not yet reaped by init) is gone too
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_worker_dies_with_its_killed_parent():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE,
                              text=True)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        parent.kill()


def test_a_dead_fits_folder_is_reclaimed_and_a_live_ones_kept():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    base = Path(tempfile.gettempdir())
    orphan = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{gone.pid}-", dir=base))
    (orphan / "X.npy").write_bytes(b"a copy of the data")
    live = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-", dir=base))
    try:
        reclaim_orphans()
        assert not orphan.exists() and live.exists()
    finally:
        for folder in (orphan, live):
            if folder.exists():
                for item in folder.iterdir():
                    item.unlink()
                folder.rmdir()


def test_a_gone_servers_secret_is_reclaimed_by_the_next_server(tmp_path):
    """A SIGKILLed server cannot remove its run secret: the next one removes the
    secrets whose port nobody listens on, and keeps a live server's."""
    import socket

    from asyos.transport.zeromq.common import write_secret

    live = socket.socket()
    live.bind(("127.0.0.1", 0))
    live.listen()
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    gone_port = free.getsockname()[1]
    free.close()   # nobody listens there now
    try:
        kept = tmp_path / f"127.0.0.1-{live.getsockname()[1]}.secret"
        stale = tmp_path / f"127.0.0.1-{gone_port}.secret"
        for secret in (kept, stale):
            secret.write_text("x" * 64)
        write_secret(tmp_path / "127.0.0.1-5555.secret")
        assert kept.exists() and not stale.exists()
    finally:
        live.close()


def test_a_refused_start_still_reclaims_a_gone_servers_secret(tmp_path):
    """A SIGKILLed server's secret goes with the next start even when that start is
    refused (here: a resume from a checkpoint that is not there), so an operator's
    failed --resume leaves nothing behind either."""
    import socket

    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    gone = tmp_path / "runs" / f"127.0.0.1-{free.getsockname()[1]}.secret"
    free.close()
    gone.parent.mkdir(mode=0o700)
    gone.write_text("x" * 64)
    proc = subprocess.run([sys.executable, "-m", "asyos", "server", "--workers", "2",
                           "-p", "50", "-s", "3", "--resume", "--checkpoint",
                           str(tmp_path / "missing.npz")],
                          env={**os.environ, "ASYOS_RUN_DIR": str(tmp_path / "runs")},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "missing.npz" in proc.stderr, proc.stderr
    assert not gone.exists()
