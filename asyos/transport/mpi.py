"""Asy-OS over MPI: rank 0 serves ``ServerState``, ranks 1..q drive ``worker_loop``.

Only buffers move (upper-case mpi4py calls, float64 arrays; never pickle).  Messages,
worker → server (a 5-slot float64 header, then the payload):

| tag   | header                    | payload                                          |
|-------|---------------------------|--------------------------------------------------|
| PULL  | 0 0 0 0 0                 | — (the first pull; later pulls ride on pushes)   |
| PUSH  | k more version K position | k features, the kept set after them: K indices, K weights; Σ Δu (n) of the k steps from one view |
| FINAL | k steps threads 0 0       | seconds computing, reading, communicating (3), indices (k), weights (k), X_S w_S (n) |
| ERROR | —                         | UTF-8 text (MPI.BYTE)                            |

(PUSH: more = 1 asks for a view in answer; k = 0 only for a settle push under adaptive
budgets.  The kept set is the server's record of the worker's weights, from which
adaptive budgets are granted.)

server → worker: VIEW, header ``version through budget 0 0`` then u_C (n), where
``through`` is the number of that worker's pushes applied and ``budget`` the one granted
from now on under adaptive budgets (0: fixed budgets).  MPI keeps the messages of
one pair in order, so a worker's push always lands before its next pull.  Both sides
poll (``Iprobe``/``Test`` with ``Backoff``) instead of blocking, which spins a core, and
each rank takes its ``NodeShare`` of the node's cores for BLAS.
"""

import os
import sys
import time
from collections import deque

import numpy as np
from mpi4py import MPI

from ..core.kept_set import warm_up
from ..core.server_state import ServerState
from ..errors import InputError
from ..solvers.asy import (
    AsyConfig,
    ServerMonitor,
    check_u,
    first_block_nu,
    worker_shard,
)
from ..solvers.worker_loop import PULL, SETTLE, Final, LocalView, Push, worker_loop
from .base import NodeShare, blas_threads_in_use

PULL_TAG, PUSH_TAG, FINAL_TAG, ERROR_TAG, VIEW_TAG = 1, 2, 3, 4, 5
HEADER = 5
SECONDS = ("compute_seconds", "read_seconds", "communicate_seconds")   # per worker


def _wait(request, share: NodeShare) -> None:
    """Complete ``request`` by polling with backoff (a blocking wait spins a core)."""
    backoff = share.backoff()
    while not request.Test():
        backoff.sleep()


class SendRing:
    """``size`` send buffers of ``length`` float64, each reused once its Isend is done.

    Nonblocking sends, because a long message (past MPI's eager limit) is only
    delivered when its receiver polls; the sender waits only when every buffer is
    still in flight.
    """

    def __init__(self, comm, size: int, length: int, share: NodeShare):
        self.comm, self.share = comm, share
        self._free = [np.empty(length) for _ in range(size)]
        self._busy: deque = deque()          # (request, buffer), oldest first

    def buffer(self) -> np.ndarray:
        while self._busy and (not self._free or self._busy[0][0].Test()):
            request, buffer = self._busy.popleft()
            _wait(request, self.share)
            self._free.append(buffer)
        return self._free.pop()

    def send(self, buffer: np.ndarray, length: int, dest: int, tag: int) -> None:
        """Isend the first ``length`` values of ``buffer`` (from ``buffer()``)."""
        request = self.comm.Isend([buffer, length, MPI.DOUBLE], dest=dest, tag=tag)
        self._busy.append((request, buffer))

    def drain(self) -> None:
        for request, _ in self._busy:
            _wait(request, self.share)


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
          m: float, share: NodeShare, record_order: bool = False,
          group_of=None) -> dict:
    """Rank 0: run the server state machine until every worker has finished;
    ``group_of`` lets the final assembly check ≤ s2 groups."""
    n = y.shape[0]
    cpu_start = time.process_time()
    server = ServerState(n, config.n_workers, config.staleness, config.window,
                         config.batch)
    if config.adaptive:
        server.adapt_budgets(config.s)
    monitor = ServerMonitor(y, config, n_features, record_order, group_of)
    capacity = max(config.capacities)
    buf = np.empty(HEADER + max(3, config.batch) + 2 * capacity + n)
    views = SendRing(comm, config.n_workers * config.window + 1, HEADER + n, share)
    status = MPI.Status()
    backoff = share.backoff()
    workers = [None] * config.n_workers
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
            k, kept = int(buf[0]), int(buf[3])
            at = HEADER + k
            _, granted = server.push(worker, buf[at + 2 * kept:count], int(buf[2]), k,
                                     kept=(buf[at:at + kept].astype(np.int64),
                                           buf[at + kept:at + 2 * kept], int(buf[4])))
            monitor.on_push(server, worker, buf[HEADER:at])
            if buf[1]:  # the worker's next pull rides on its push
                granted += server.request_pull(worker)
        elif tag == FINAL_TAG:
            k, at = int(buf[0]), HEADER + 3
            granted = server.finish(worker, buf[at:at + k].astype(np.int64),
                                    buf[at + k:at + 2 * k], buf[at + 2 * k:count])
            workers[worker] = {"steps": int(buf[1]), "kept": k,
                               "budget": config.budgets[worker],
                               "blas_threads": int(buf[2]),
                               **dict(zip(SECONDS, buf[HEADER:at].tolist()))}
        else:
            raise WorkerFailed(f"rank {source} sent an unknown tag {tag}")
        for target in granted:
            view = views.buffer()
            u, view[0] = server.view(target)
            view[1] = server.workers[target].messages
            view[2] = server.grant_budget(target) if config.adaptive else 0
            view[HEADER:] = u
            views.send(view, view.size, target + 1, VIEW_TAG)
    views.drain()
    payload = monitor.payload(server, workers, eta, m)
    payload["asy"]["server_cpu_seconds"] = time.process_time() - cpu_start
    check_u(payload["asy"]["u_check_max_abs_diff"], server.u)
    return payload


class WorkerFailed(RuntimeError):
    """A worker reported an exception; rank 0 aborts the job with its message."""


def work(comm, shard, y: np.ndarray, config: AsyConfig, eta: float, m: float,
         share: NodeShare, groups=None) -> None:
    """Rank t ≥ 1: drive the worker loop, moving its requests over MPI (``groups``:
    (group_of, s2_t) for group-aware OS).

    Every push carries the next pull.  Up to ``config.window`` of them may await their
    view while the worker steps from ``LocalView`` (window 1: it waits for each).
    Pushes go out with ``Isend``: a long message waits for the server to match it,
    and the worker must not wait with it.
    """
    worker = comm.Get_rank() - 1
    n = y.shape[0]
    view = LocalView(n, config.window)
    inbox = [np.empty(HEADER + n) for _ in range(config.window)]
    capacity = config.capacities[worker]
    pushes = SendRing(comm, config.window + 1, HEADER + config.batch + 2 * capacity + n,
                      share)
    replies = deque()                     # (Irecv request, buffer), oldest first
    communicate = 0.0

    def absorb(wait_while) -> None:
        """Take the views that arrived; wait for more while ``wait_while()``."""
        backoff = share.backoff()
        while replies:
            request, buffer = replies[0]
            if request.Test():
                replies.popleft()
                view.answered(buffer[HEADER:], int(buffer[0]), int(buffer[1]),
                              int(buffer[2]) if config.adaptive else None)
                inbox.append(buffer)
            elif wait_while():
                backoff.sleep()
            else:
                return

    def expect_view(delta=None) -> None:
        view.requested(delta)
        buffer = inbox.pop()
        replies.append((comm.Irecv([buffer, MPI.DOUBLE], source=0, tag=VIEW_TAG), buffer))

    loop = worker_loop(shard, y, capacity, config.loss, eta, m, config.epochs,
                       config.batch, groups=groups, settle=config.adaptive)
    request = next(loop)
    comm.Send([np.zeros(HEADER), MPI.DOUBLE], dest=0, tag=PULL_TAG)
    expect_view()
    while True:
        start = time.perf_counter()
        if request is PULL or request is SETTLE:   # SETTLE: answered by the newest view
            absorb((lambda: view.must_wait) if request is PULL else
                   (lambda: view.unanswered > 0))
            communicate += time.perf_counter() - start
            request = loop.send(view.current())
        elif isinstance(request, Push):
            push, request = request, next(loop)   # (reading is timed by the loop)
            start = time.perf_counter()
            k, kept = push.features.size, push.selected.size
            more = request is PULL or request is SETTLE
            message = pushes.buffer()
            message[:HEADER] = k, float(more), push.version, kept, push.position
            at = HEADER + k
            message[HEADER:at] = push.features
            message[at:at + kept] = push.selected
            message[at + kept:at + 2 * kept] = push.weights
            at += 2 * kept
            message[at:at + n] = push.delta
            if more:
                expect_view(push.delta)
            pushes.send(message, at + n, 0, PUSH_TAG)
            communicate += time.perf_counter() - start
        elif isinstance(request, Final):
            absorb(lambda: view.unanswered > 0)
            pushes.drain()
            k = request.selected.size
            final = np.concatenate([[k, request.steps, blas_threads_in_use(), 0.0, 0.0,
                                     request.compute_seconds,
                                     request.read_seconds, communicate],
                                    request.selected.astype(np.float64),
                                    request.weights, request.contribution])
            comm.Send([final, MPI.DOUBLE], dest=0, tag=FINAL_TAG)
            return


def run(comm, open_job, config_factory, record_order: bool = False,
        threads: int | None = None) -> dict | None:
    """Run Asy-OS on ``comm``; returns the payload on rank 0, None elsewhere.

    Every rank opens the job itself: ``open_job()`` → (stream, y, group_of), group_of
    being checked compact group ids or None; ``config_factory(q, n_features)`` →
    AsyConfig.  A worker takes its shard and group budget from ``worker_shard``, as
    the simulator does; the server keeps the labels to check ≤ s2 groups at the end.
    Setup errors on any rank end every rank with InputError (exit 2); a failure
    while running aborts the job from rank 0.  ``threads``: BLAS threads per rank
    (default: the node's cores shared among its ranks, ``NodeShare``).
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        raise InputError("Asy-OS needs at least 2 MPI ranks (a server and a worker); "
                         f"got {size}")
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    share = NodeShare.of(node.Get_size(), threads)
    node.Free()
    share.apply()
    q = size - 1
    error, nu, shard, groups = None, 0.0, None, None
    try:
        stream, y, group_of = open_job()
        config = config_factory(q, stream.n_features)
        if rank != 0:
            shard = worker_shard(stream, q, rank - 1, group_of)
            groups = config.groups(rank - 1, group_of)
            nu = first_block_nu(shard)
        warm_up()
    except InputError as exc:
        error = str(exc)
    error, nu = _agree(comm, error, nu)
    if error is not None:
        raise InputError(error)
    eta, m = config.step(y.shape[0], nu)
    if rank != 0:
        try:
            work(comm, shard, y, config, eta, m, share, groups)
        except Exception as exc:  # report to rank 0, which aborts the job
            comm.Send([f"{type(exc).__name__}: {exc}".encode(), MPI.BYTE], dest=0,
                      tag=ERROR_TAG)
            # wait for rank 0's Abort: it never sends ERROR_TAG (views may be queued)
            _wait(comm.Irecv([np.empty(1), MPI.DOUBLE], source=0, tag=ERROR_TAG),
                  share)
        return None
    try:
        return serve(comm, y, config, stream.n_features, eta, m, share, record_order,
                     group_of)
    except Exception as exc:
        abort(comm, 2 if isinstance(exc, InputError) or "InputError" in str(exc) else 1,
              str(exc))


def abort(comm, code: int, message: str) -> None:
    """End the whole job with ``code`` after one line on stderr.

    mpiexec forwards a rank's stderr through a pipe and stops forwarding when the job
    aborts: without the pause the line is sometimes lost, leaving a bare exit status.
    MPICH's Abort can return before the job is torn down; this rank must not go on
    (into a barrier that would release the other ranks to print the error again).
    """
    print(f"asyos: error: {message}", file=sys.stderr, flush=True)
    time.sleep(0.2)
    comm.Abort(code)
    os._exit(code)
