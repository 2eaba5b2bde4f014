"""Asy-OS over ZeroMQ on this machine: a loopback server here, q worker processes.

The real transport end to end (separate processes, TCP on 127.0.0.1, the wire format,
``ZmqServer`` and ``ZmqWorker`` processes started by ``zeromq.process``) without a
launcher script: what the
estimators' ``backend="zeromq"`` runs.  The workers are other processes, so they
cannot share an in-memory array: the stream is written once to a temporary
feature-major ``.npy`` that every worker maps (O(n·p) disk, O(block) memory).  The run
ends with an error, and every worker is stopped, when a worker fails or ``timeout``
seconds pass.
"""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from .._files import reserve, space_checked
from ..core.validate import check_at_least, check_labels
from ..errors import InputError, PartialRun
from ..solvers.asy import AsyConfig
from ..solvers.result import FitResult
from ..streams import FeatureStream
from .base import NodeShare
from .zeromq import ZmqServer, process
from .zeromq.common import write_secret

LOOPBACK = "tcp://127.0.0.1:*"   # any free port


def spool(stream: FeatureStream, path: Path) -> None:
    """Write every column of ``stream`` into a Fortran-order (n, p) ``.npy``, its
    blocks allocated before it is mapped (``_files.reserve``: a full disk is then
    one line, not a SIGBUS), the file removed if it cannot be written whole."""
    shape = (stream.n_samples, stream.n_features)
    with space_checked(path, path):
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": np.lib.format.dtype_to_descr(stream.dtype),
                    "fortran_order": True, "shape": shape})
            reserve(f, f.tell() + shape[0] * shape[1] * stream.dtype.itemsize)
        out = np.lib.format.open_memmap(path, mode="r+")
        for index, block in stream.blocks(0):
            out[:, index] = block.T
        out.flush()
        del out


class _Workers:
    """The worker processes, their logs, and the checks the server runs between
    steps."""

    def __init__(self, endpoint: str, data: Path, stream: FeatureStream, q: int,
                 logs: Path, deadline: float, timeout: float, secret: Path):
        self.deadline, self.timeout = deadline, timeout
        self.logs = [logs / f"worker{t}.log" for t in range(q)]
        self.procs = [process.start(endpoint, data, t, q, dtype=stream.dtype.name,
                                    shuffle=stream.shuffle, seed=stream.seed,
                                    timeout=timeout, threads=NodeShare.of(q).threads,
                                    log=self.logs[t], secret=secret)
                      for t in range(q)]

    def check(self) -> None:
        for t, proc in enumerate(self.procs):
            code = proc.poll()
            if code == 2:   # bad input, said in one line
                line = self.logs[t].read_text(errors="replace").strip().splitlines()
                raise InputError(f"worker {t}: " + (line[-1].removeprefix(
                    "asyos: error: ") if line else "bad input"))
            if code not in (None, 0):
                tail = self.logs[t].read_text(errors="replace").strip()[-2000:]
                raise RuntimeError(f"ZeroMQ worker {t} exited with status {code}: "
                                   f"{tail}")
        if time.monotonic() > self.deadline:
            raise TimeoutError(f"Asy-OS over ZeroMQ did not finish in {self.timeout:g} "
                               "s (timeout)")

    def stop(self, grace: float) -> None:
        """Give the workers ``grace`` seconds to exit; terminate, then kill, any that
        do not."""
        for proc in self.procs:
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


RUN_PREFIX = "asyos-zmq-"   # + the owner's pid: a run's folder (data copy, secret)


def reclaim_orphans() -> None:
    """Remove the run folders of processes that died without removing them (a
    SIGKILLed fit): they hold a copy of X and a run secret."""
    for folder in Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}*-*"):
        pid = folder.name[len(RUN_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or folder.stat().st_uid != os.getuid():
            continue
        try:   # (transport may not import io's ``alive``: sibling layers)
            os.kill(int(pid), 0)
        except ProcessLookupError:   # its owner is gone
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:      # alive, another user's
            pass


def fit_loopback(stream: FeatureStream, y, s, n_workers, *, loss="squared",
                 epochs="auto", eta="auto", m="auto", staleness="auto", budget="auto",
                 timeout: float = 300.0, rule="auto", ridge=None,
                 sweep="auto") -> FitResult:
    """Asy-OS with ``n_workers`` worker processes over loopback ZeroMQ;
    returns its result (as ``asyos server`` writes it)."""
    config = AsyConfig.build(s, n_workers, loss=loss, epochs=epochs, eta=eta, m=m,
                             staleness=staleness, n_features=stream.n_features,
                             budget=budget, rule=rule, ridge=ridge, sweep=sweep)
    y = check_labels(y, config.loss, stream.n_samples)
    timeout = check_at_least("timeout", timeout, 1e-3)
    reclaim_orphans()
    with tempfile.TemporaryDirectory(prefix=f"{RUN_PREFIX}{os.getpid()}-") as tmp:
        data = Path(tmp) / "X.npy"
        spool(stream, data)
        secret = Path(tmp) / "run.secret"   # in the run's private (0700) directory
        server = ZmqServer(LOOPBACK, y, config, secret=write_secret(secret))
        workers, result = None, None
        try:
            workers = _Workers(server.endpoint, data, stream, config.n_workers,
                               Path(tmp), time.monotonic() + timeout, timeout, secret)
            result = server.serve(check=workers.check)
        finally:
            server.close()
            if workers is not None:   # finished workers exit at once; after an error
                workers.stop(5.0 if result is not None else 0.0)   # none waits
    if result.asy["lost_shards"]:
        raise PartialRun(f"Asy-OS over ZeroMQ lost shards "
                         f"{', '.join(result.asy['lost_shards'])}")
    return result
