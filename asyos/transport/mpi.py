"""Asy-OS over MPI: rank 0 serves ``ServerState``, ranks 1..q drive ``worker_loop``.

Only buffers move (upper-case mpi4py calls, float64 arrays; never pickle).  Messages,
worker → server (a 4-slot float64 header, then the payload):

| tag   | header                              | payload                          |
|-------|-------------------------------------|----------------------------------|
| PULL  | 0 0 0 0                             | —                                |
| PUSH  | version feature more 0          | Δu (n); more = 1: and pull again |
| FINAL | k steps compute_s comm_s            | indices (k), weights (k), X_S w_S (n) |
| ERROR | —                                   | UTF-8 text (MPI.BYTE)            |

server → worker: VIEW, header ``version 0 0 0`` then u_C (n).  MPI keeps the messages of
one pair in order, so a worker's push always lands before its next pull.  Both sides
poll (``Iprobe``/``Test`` with ``Backoff``) instead of blocking, which spins a core.
"""

import sys
import time

import numpy as np
from mpi4py import MPI

from ..core.kept_set import warm_up
from ..core.server_state import ServerState
from ..errors import InputError
from ..solvers.asy import AsyConfig, ServerMonitor, check_u, first_block_nu
from ..solvers.worker_loop import PULL, Final, Push, worker_loop
from .base import Backoff

PULL_TAG, PUSH_TAG, FINAL_TAG, ERROR_TAG, VIEW_TAG = 1, 2, 3, 4, 5
HEADER = 4


def _wait(request) -> None:
    """Complete ``request`` by polling with backoff (a blocking wait spins a core)."""
    backoff = Backoff()
    while not request.Test():
        backoff.sleep()


def _agree(comm, error: str | None, nu: float) -> tuple[str | None, float]:
    """Collective: did any rank fail to set up?  And the largest ν of the first blocks.

    A failing worker sends its message to rank 0 first (small, so it is buffered).
    """
    if error is not None and comm.Get_rank() != 0:
        comm.Send([error.encode(), MPI.BYTE], dest=0, tag=ERROR_TAG)
    flags = np.array([0.0 if error is None else 1.0, nu])
    comm.Allreduce(MPI.IN_PLACE, flags, op=MPI.MAX)
    if flags[0] == 0.0:
        return None, float(flags[1])
    if comm.Get_rank() == 0 and error is None:
        status = MPI.Status()
        comm.Probe(source=MPI.ANY_SOURCE, tag=ERROR_TAG, status=status)
        text = bytearray(status.Get_count(MPI.BYTE))
        comm.Recv([text, MPI.BYTE], source=status.Get_source(), tag=ERROR_TAG)
        error = f"rank {status.Get_source()}: {text.decode()}"
    return error or "setup failed", 0.0


def serve(comm, y: np.ndarray, config: AsyConfig, n_features: int, eta: float,
          m: float, record_order: bool = False) -> dict:
    """Rank 0: run the server state machine until every worker has finished."""
    n = y.shape[0]
    cpu_start = time.process_time()
    server = ServerState(n, config.n_workers, config.staleness)
    monitor = ServerMonitor(y, config, n_features, record_order)
    buf = np.empty(HEADER + 2 * max(config.budgets) + n)
    view = np.empty(HEADER + n)
    status = MPI.Status()
    backoff = Backoff()
    workers = [None] * config.n_workers
    sends = []
    while not server.done:
        if not comm.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
            backoff.sleep()
            continue
        backoff.reset()
        source, tag = status.Get_source(), status.Get_tag()
        worker = source - 1
        if tag == ERROR_TAG:
            text = bytearray(status.Get_count(MPI.BYTE))
            comm.Recv([text, MPI.BYTE], source=source, tag=tag)
            raise WorkerFailed(f"worker {worker} (rank {source}): {text.decode()}")
        count = status.Get_count(MPI.DOUBLE)
        comm.Recv([buf, count, MPI.DOUBLE], source=source, tag=tag)
        if tag == PULL_TAG:
            granted = server.request_pull(worker)
        elif tag == PUSH_TAG:
            _, granted = server.push(worker, buf[HEADER:count])
            monitor.on_push(server, worker, int(buf[1]))
            if buf[2]:  # the worker's next pull rides on its push
                granted += server.request_pull(worker)
        elif tag == FINAL_TAG:
            k = int(buf[0])
            granted = server.finish(worker, buf[HEADER:HEADER + k].astype(np.int64),
                                    buf[HEADER + k:HEADER + 2 * k],
                                    buf[HEADER + 2 * k:count])
            workers[worker] = {"steps": int(buf[1]), "compute_seconds": buf[2],
                               "communicate_seconds": buf[3],
                               "kept": k, "budget": config.budgets[worker]}
        else:
            raise WorkerFailed(f"rank {source} sent an unknown tag {tag}")
        for target in granted:
            _wait_all(sends)
            u, version = server.view(target)
            view[0] = version
            view[HEADER:] = u
            sends = [comm.Isend([view, MPI.DOUBLE], dest=target + 1, tag=VIEW_TAG)]
    _wait_all(sends)
    payload = monitor.payload(server, workers, eta, m)
    payload["asy"]["server_cpu_seconds"] = time.process_time() - cpu_start
    check_u(payload["asy"]["u_check_max_abs_diff"], server.u)
    return payload


def _wait_all(requests) -> None:
    for request in requests:
        _wait(request)


class WorkerFailed(RuntimeError):
    """A worker reported an exception; rank 0 aborts the job with its message."""


def work(comm, shard, y: np.ndarray, config: AsyConfig, eta: float, m: float) -> None:
    """Rank t ≥ 1: drive the worker loop, moving its requests over MPI."""
    worker = comm.Get_rank() - 1
    n = y.shape[0]
    header = np.zeros(HEADER)
    view = np.empty(HEADER + n)
    out = np.empty(HEADER + n)
    communicate = 0.0
    loop = worker_loop(shard, y, config.budgets[worker], config.loss, eta, m,
                       config.epochs)
    request = next(loop)
    pending = None   # a push not yet sent: it goes out with the next pull
    while True:
        start = time.perf_counter()
        if request is PULL:
            if pending is None:
                comm.Send([header, MPI.DOUBLE], dest=0, tag=PULL_TAG)
            else:
                pending[2] = 1.0
                comm.Send([pending, MPI.DOUBLE], dest=0, tag=PUSH_TAG)
                pending = None
            _wait(comm.Irecv([view, MPI.DOUBLE], source=0, tag=VIEW_TAG))
            communicate += time.perf_counter() - start
            request = loop.send((view[HEADER:], int(view[0])))
        elif isinstance(request, Push):
            out[0], out[1], out[2] = request.version, request.feature, 0.0
            out[HEADER:] = request.delta
            pending = out
            request = next(loop)
        elif isinstance(request, Final):
            if pending is not None:
                comm.Send([pending, MPI.DOUBLE], dest=0, tag=PUSH_TAG)
            k = request.selected.size
            final = np.concatenate([[k, request.steps, request.compute_seconds,
                                     communicate], request.selected.astype(np.float64),
                                    request.weights, request.contribution])
            comm.Send([final, MPI.DOUBLE], dest=0, tag=FINAL_TAG)
            communicate += time.perf_counter() - start
            return


def run(comm, open_worker_data, open_server_labels, config_factory,
        record_order: bool = False) -> dict | None:
    """Run Asy-OS on ``comm``; returns the payload on rank 0, None elsewhere.

    ``open_worker_data(q, t)`` → (shard stream, y, n_features) for worker t;
    ``open_server_labels()`` → (y, n_features); ``config_factory(q, n_features)`` →
    AsyConfig.  Setup errors on any rank end every rank with InputError (exit 2);
    a failure while running aborts the job from rank 0.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        raise InputError("Asy-OS needs at least 2 MPI ranks (a server and a worker); "
                         f"got {size}")
    q = size - 1
    error, nu, shard = None, 0.0, None
    try:
        if rank == 0:
            y, n_features = open_server_labels()
        else:
            shard, y, n_features = open_worker_data(q, rank - 1)
            nu = first_block_nu(shard)
        config = config_factory(q, n_features)
        warm_up()
    except InputError as exc:
        error = str(exc)
    error, nu = _agree(comm, error, nu)
    if error is not None:
        raise InputError(error)
    eta, m = config.step(y.shape[0], nu)
    if rank != 0:
        try:
            work(comm, shard, y, config, eta, m)
        except Exception as exc:  # report to rank 0, which aborts the job
            comm.Send([f"{type(exc).__name__}: {exc}".encode(), MPI.BYTE], dest=0,
                      tag=ERROR_TAG)
            _wait(comm.Irecv([np.empty(1), MPI.DOUBLE], source=0, tag=VIEW_TAG))
        return None
    try:
        return serve(comm, y, config, n_features, eta, m, record_order)
    except Exception as exc:
        code = 2 if isinstance(exc, InputError) or "InputError" in str(exc) else 1
        print(f"asyos: error: {exc}", file=sys.stderr, flush=True)
        comm.Abort(code)
