"""An Asy-OS run over ZeroMQ on loopback, started as a user would: ``asyos server``
and q ``asyos worker`` processes (for end-to-end tests)."""

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUARD = 120   # seconds per process: a hang guard, not a speed assertion


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def asyos(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "asyos", *map(str, args)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_on_loopback(q: int, server_args, worker_args) -> None:
    """Start the server (``server_args`` besides --bind and --workers) and q workers
    (``worker_args`` besides --connect and --shard); every one must exit 0.  A server
    that fails leaves its workers waiting: they are stopped."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    procs = [asyos("server", "--bind", endpoint, "--workers", q, *server_args)]
    procs += [asyos("worker", "--connect", endpoint, *worker_args, "--shard", f"{t}/{q}")
              for t in range(q)]
    try:
        for proc in procs:
            proc.wait(timeout=GUARD)
            assert proc.returncode == 0, proc.stderr.read()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
