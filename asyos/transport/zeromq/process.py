"""A loopback worker process: what ``transport.local.fit_loopback`` starts, one per
shard.  Its whole job travels as one JSON argument, so the transport starts its own
workers without going through the command-line front (``asyos worker``)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from ...errors import InputError
from ...solvers.session import Timeouts
from ...streams import NpyStream
from ..base import NodeShare, die_with_parent
from .worker import ServerGone, ZmqWorker


def start(endpoint: str, data: Path, t: int, q: int, *, dtype: str, shuffle: bool,
          seed: int, timeout: float, threads: int, log: Path,
          secret: Path) -> subprocess.Popen:
    """Start worker ``t`` of ``q`` on its shard of the feature-major ``data``; its
    stderr goes to ``log``; it reads the run secret from the file ``secret`` (never
    from its command line, which other users can see)."""
    job = {"endpoint": endpoint, "data": str(data), "t": t, "q": q, "dtype": dtype,
           "shuffle": shuffle, "seed": seed, "timeout": timeout, "threads": threads,
           "secret": str(secret), "parent": os.getpid()}
    with open(log, "wb") as err:
        return subprocess.Popen([sys.executable, "-m", __name__, json.dumps(job)],
                                stdout=subprocess.DEVNULL, stderr=err)


def worker_stream(job: dict) -> NpyStream:
    """The job's data, read as one of its q workers on this machine may
    (``NodeShare``: its BLAS threads, and reading ahead only with a core to spare;
    its shard inherits that)."""
    share = NodeShare.of(job["q"], job["threads"])
    share.apply()
    return share.reading(NpyStream(job["data"], shuffle=job["shuffle"],
                                   seed=job["seed"], dtype=job["dtype"]))


def main(argv=None) -> int:
    job = json.loads((sys.argv[1:] if argv is None else argv)[0])
    die_with_parent(job["parent"])   # a killed estimator leaves no worker waiting
    try:
        stream = worker_stream(job)
        worker = ZmqWorker(job["endpoint"], stream, job["t"], job["q"],
                           timeouts=Timeouts(server_timeout=job["timeout"]),
                           secret_file=Path(job["secret"]))
    except InputError as exc:
        print(f"asyos: error: {exc}", file=sys.stderr)
        return 2
    try:
        worker.run()
    except InputError as exc:   # its data, found bad mid-run (NaN, overflowing scale)
        print(f"asyos: error: {exc}", file=sys.stderr)
        return 2
    except ServerGone as exc:
        print(f"asyos: error: shard {job['t']}/{job['q']}: {exc}", file=sys.stderr)
        return 1
    finally:
        worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
