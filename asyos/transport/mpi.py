"""Asy-OS over MPI: rank 0 carries ``AsyServer``, ranks 1..q each a ``WorkerDriver``.

A carrier only: every protocol message is ``transport.wire``'s frames packed into one
byte buffer (``wire.join``) and sent with upper-case mpi4py calls (never pickle) under
one tag; errors travel as UTF-8 text under another.  MPI keeps the messages of one
pair in order and loses none, so there are no resends; a rank that dies ends the job
(MPI's fault model), with one line from rank 0.  Both sides poll (``Iprobe``/``Test``
with ``Backoff``) instead of blocking, which spins a core, and each rank takes its
``NodeShare`` of the node's cores for BLAS.  Every rank opens the job itself (rank 0
reads only the features' shape and the labels), and the step size is agreed
collectively before the first pull.
"""

import os
import sys
import time
from collections import deque

import numpy as np
from mpi4py import MPI

from ..core.server_state import NonFiniteUpdate, ProtocolError
from ..errors import InputError
from ..solvers.asy import (
    AsyConfig,
    first_block_nu,
    warm_worker,
    worker_shard,
    worker_steps,
)
from ..solvers.asy_server import AsyServer
from ..solvers.result import FitResult
from ..solvers.worker_loop import WorkerDriver
from . import wire
from .base import (
    NodeShare,
    WorkerFailed,
    carry_worker,
    failure_report,
    reported_failure,
)

MESSAGE_TAG, ERROR_TAG = 1, 4


def _wait(request, share: NodeShare) -> None:
    """Complete ``request`` by polling with backoff (a blocking wait spins a core)."""
    backoff = share.backoff()
    while not request.Test():
        backoff.sleep()


class Link:
    """One rank's end: send messages without waiting, receive them by polling.

    Nonblocking sends, because a long message (past MPI's eager limit) is only
    delivered when its receiver polls; the sender waits only when ``in_flight``
    messages are still on their way.
    """

    def __init__(self, comm, limits: wire.Limits, share: NodeShare, in_flight: int):
        self.comm, self.limits, self.share = comm, limits, share
        self.in_flight = in_flight
        self._busy: deque = deque()          # (request, buffer), oldest first
        self._status = MPI.Status()

    def send(self, message, dest: int, worker: int) -> None:
        buffer = wire.join(wire.encode(message, worker))
        while self._busy and (len(self._busy) >= self.in_flight or
                              self._busy[0][0].Test()):
            _wait(self._busy.popleft()[0], self.share)
        self._busy.append((self.comm.Isend([buffer, MPI.BYTE], dest=dest,
                                           tag=MESSAGE_TAG), buffer))

    def poll(self, source=MPI.ANY_SOURCE) -> tuple[int, wire.Envelope] | None:
        """The next message that has arrived, as (source, envelope), or None.

        An error report from a worker raises ``WorkerFailed`` with its text."""
        status = self._status
        if not self.comm.Iprobe(source=source, tag=MPI.ANY_TAG, status=status):
            return None
        source, tag = status.Get_source(), status.Get_tag()
        buffer = bytearray(status.Get_count(MPI.BYTE))
        self.comm.Recv([buffer, MPI.BYTE], source=source, tag=tag)
        if tag == ERROR_TAG:
            raise reported_failure(f"worker {source - 1} (rank {source})", buffer)
        if tag != MESSAGE_TAG:
            raise WorkerFailed(f"rank {source} sent an unknown tag {tag}")
        try:
            return source, wire.decode(wire.split(buffer), self.limits)
        except wire.WireError as exc:
            raise WorkerFailed(f"rank {source} sent a malformed message: {exc}") \
                from None

    def wait(self, source=MPI.ANY_SOURCE) -> tuple[int, wire.Envelope]:
        backoff = self.share.backoff()
        while (received := self.poll(source)) is None:
            backoff.sleep()
        return received

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


def _warm_node(node, rank: int, size: int, warm, share: NodeShare) -> str | None:
    """Collective on the node: its first worker warms up first (on a first run it
    compiles, and numba caches the kernels on disk), then the others, which load
    them; a node of q workers compiling the same kernels at once would take q times
    the CPU.  ``warm``: this rank's warm-up, None for the server or a rank whose
    setup failed.  Returns an error message or None."""
    first = node.allreduce(rank if warm is not None else size, op=MPI.MIN)
    error = None
    for leader in (True, False):
        if warm is not None and (rank == first) == leader:
            try:
                warm()
            except Exception as exc:   # reported by _agree, like a setup error
                error = f"{type(exc).__name__}: {exc}"
        _wait(node.Ibarrier(), share)   # polled: a blocking barrier spins a core
    return error


def _limits(config: AsyConfig, n: int) -> wire.Limits:
    return wire.Limits(n, max(config.capacities), config.batch)


def serve(comm, server: AsyServer, share: NodeShare) -> FitResult:
    """Rank 0: carry the server's messages until every worker has finished."""
    cpu_start = time.process_time()
    config = server.config
    link = Link(comm, _limits(config, server.y.shape[0]), share,
                in_flight=config.n_workers * (config.depth + 1) + 1)
    while not server.done:
        source, envelope = link.wait()
        worker = source - 1
        if envelope.worker != worker:
            raise WorkerFailed(f"rank {source} spoke for worker {envelope.worker}")
        try:
            replies = server.handle(worker, envelope.body)
        except NonFiniteUpdate:
            raise   # the user's to fix: exit 2
        except ProtocolError as exc:
            raise WorkerFailed(f"worker {worker} (rank {source}): {exc}") from None
        for target, reply in replies:
            link.send(reply, target + 1, target)
    link.drain()
    result = server.result("mpi")
    result.asy["server_cpu_seconds"] = time.process_time() - cpu_start
    return result


def work(comm, driver: WorkerDriver, config: AsyConfig, n: int,
         share: NodeShare) -> None:
    """Rank t ≥ 1: carry the worker driver's messages to rank 0 and back."""
    link = Link(comm, _limits(config, n), share, in_flight=config.depth + 1)
    carry_worker(link, driver, comm.Get_rank() - 1)


def run(comm, open_job, config_factory, record_order: bool = False,
        threads: int | None = None) -> FitResult | None:
    """Run Asy-OS on ``comm``; returns the result on rank 0, None elsewhere.

    Every rank opens the job itself: ``open_job()`` → (stream, y, group_of), group_of
    being checked compact group ids or None, and rank 0's "stream" anything with
    ``n_features`` (``io.describe.FeatureShape``: the server reads no column);
    ``config_factory(q, n_features)`` → AsyConfig.  A worker takes its shard and group budget from ``worker_shard``, as
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
    except InputError as exc:
        error = str(exc)
    warm = None if shard is None else (lambda: warm_worker(shard, config, groups))
    error = _warm_node(node, rank, size, warm, share) or error
    node.Free()
    error, nu = _agree(comm, error, nu)
    if error is not None:
        raise InputError(error)
    eta, m = config.eta_and_m(y.shape[0], nu)
    if rank != 0:
        try:
            loop = worker_steps(config, rank - 1, shard, y, eta, m, groups)
            work(comm, WorkerDriver(loop, y.shape[0]), config, y.shape[0], share)
        except Exception as exc:  # report to rank 0, which aborts the job
            comm.Send([failure_report(exc), MPI.BYTE], dest=0, tag=ERROR_TAG)
            # wait for rank 0's Abort: it never sends ERROR_TAG (views may be queued)
            _wait(comm.Irecv([np.empty(1), MPI.DOUBLE], source=0, tag=ERROR_TAG),
                  share)
        return None
    try:
        server = AsyServer(y, config, record_order=record_order, group_of=group_of)
        server.start(stream.n_features, eta, m)
        return serve(comm, server, share)
    except Exception as exc:
        bad_input = isinstance(exc, InputError) or \
            (isinstance(exc, WorkerFailed) and exc.bad_input)
        abort(comm, 2 if bad_input else 1, str(exc))


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
