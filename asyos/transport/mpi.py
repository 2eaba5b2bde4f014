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
import signal
import sys
import time
from collections import deque
from dataclasses import replace

import numpy as np
from mpi4py import MPI

from ..errors import InputError
from ..solvers.asy import (
    AsyConfig,
    shard_of,
    time_a_step,
    warm_worker,
    worker_driver,
)
from ..solvers.asy_server import AsyServer, warm_server
from ..solvers.result import FitResult
from ..solvers.worker_loop import WorkerDriver
from . import wire
from .base import (
    NodeShare,
    WorkerFailed,
    failure_report,
    handle_request,
    reported_failure,
)
from .mpich_files import reclaim_job_files, release_job_files
from .node_memory import NodeVectors, carry_on_node

MESSAGE_TAG, ERROR_TAG = 1, 4
INTERRUPTED = 130   # the exit status of a job stopped by ^C (SIGINT)
TERMINATED = 143    # ... and by SIGTERM, which mpiexec forwards to every rank
SIGNALLED = {INTERRUPTED: "interrupted", TERMINATED: "terminated"}
SIGNAL_CODES = {signal.SIGINT: INTERRUPTED, signal.SIGTERM: TERMINATED}


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

    def __init__(self, comm, limits: wire.Limits, share: NodeShare, in_flight: int,
                 lean=frozenset()):
        self.comm, self.limits, self.share = comm, limits, share
        self.in_flight = in_flight
        self.lean, self._lean_limits = lean, replace(limits, vectors=False)
        self.sent = self.received = 0   # bytes
        self._busy: deque = deque()          # (request, buffer), oldest first
        self._status = MPI.Status()

    def send(self, message, dest: int, worker: int) -> None:
        buffer = wire.join(wire.encode(message, worker))
        self.sent += len(buffer)
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
        self.received += len(buffer)
        if tag == ERROR_TAG:
            raise reported_failure(f"worker {source - 1} (rank {source})", buffer)
        if tag != MESSAGE_TAG:
            raise WorkerFailed(f"rank {source} sent an unknown tag {tag}")
        try:
            limits = self._lean_limits if source in self.lean else self.limits
            return source, wire.decode(wire.split(buffer), limits)
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


def _agree(comm, error: str | None, nu: float, step: float,
           share: NodeShare) -> tuple[str | None, float, float]:
    """Collective: did any rank fail to set up?  And the largest ν of the first blocks
    and the slowest worker's step (``time_a_step``: the pipeline is sized for it).

    A failing worker sends its message to rank 0 first (small, so it is buffered).
    Polled with backoff: the server's rank arrives at once and waits while a worker
    compiles its kernels on a cold cache, and a blocking wait would spin the core that
    worker needs.
    """
    if error is not None and comm.Get_rank() != 0:
        comm.Send([error.encode(), MPI.BYTE], dest=0, tag=ERROR_TAG)
    flags = np.array([0.0 if error is None else 1.0, nu, step])
    _wait(comm.Iallreduce(MPI.IN_PLACE, flags, op=MPI.MAX), share)
    if flags[0] == 0.0:
        return None, float(flags[1]), float(flags[2])
    if comm.Get_rank() == 0 and error is None:
        status = MPI.Status()
        comm.Probe(source=MPI.ANY_SOURCE, tag=ERROR_TAG, status=status)
        text = bytearray(status.Get_count(MPI.BYTE))
        comm.Recv([text, MPI.BYTE], source=status.Get_source(), tag=ERROR_TAG)
        error = f"rank {status.Get_source()}: {text.decode()}"
    return error or "setup failed", 0.0, 0.0




def serve(comm, server: AsyServer, share: NodeShare,
          vectors: NodeVectors | None = None) -> FitResult:
    """Rank 0: carry the server's messages until every worker has finished.
    ``vectors``: the n-vectors of the workers on this node, through its shared window
    (their messages carry none)."""
    cpu_start = time.process_time()
    config = server.config
    lean = frozenset() if vectors is None else frozenset(t + 1 for t in vectors.rows)
    link = Link(comm, wire.Limits.of(config, server.y.shape[0]), share,
                in_flight=config.n_workers * (config.depth + 1) + 1, lean=lean)
    serving = 0.0   # seconds from a request's arrival to its replies' sending
    while not server.done:
        source, envelope = link.wait()
        start = time.perf_counter()
        worker = source - 1
        if envelope.worker != worker:
            raise WorkerFailed(f"rank {source} spoke for worker {envelope.worker}")
        body = envelope.body if source not in lean else \
            vectors.incoming(worker, envelope.body)
        replies = handle_request(server, worker, body,
                                 f"worker {worker} (rank {source})")
        if source in lean:
            vectors.applied(worker, body)
        for target, reply in replies:
            if target + 1 in lean:
                reply = vectors.outgoing(reply, server)
            link.send(reply, target + 1, target)
        serving += time.perf_counter() - start
    link.drain()
    result = server.result("mpi")
    result.asy["server_cpu_seconds"] = time.process_time() - cpu_start
    result.asy["server_seconds"] = serving
    result.asy["shared_window_workers"] = \
        [] if vectors is None else sorted(vectors.rows)
    result.asy["server_bytes"] = {
        "sent": link.sent, "received": link.received,
        "pushes": sum(server.pushes_applied())}
    return result


def work(comm, driver: WorkerDriver, config: AsyConfig, n: int,
         share: NodeShare, vectors: NodeVectors | None = None) -> None:
    """Rank t ≥ 1: carry the worker driver's messages to rank 0 and back, its
    n-vectors through ``vectors`` when it shares the server's node."""
    worker = comm.Get_rank() - 1
    limits = wire.Limits.of(config, n, vectors=vectors is None)
    carry_on_node(Link(comm, limits, share, in_flight=config.depth + 1), driver, worker,
                  vectors, n)


class ServerNode:
    """The ranks that share memory with the server's rank, and their n-vectors in an
    MPI-3 shared window (``Win.Allocate_shared`` on ``Comm.Split_type``'s node),
    allocated by rank 0 and mapped by the others.  ``ranks_per_node`` splits each
    node further into groups of that many consecutive ranks (several "nodes" on one
    machine, for tests and for comparing with messages: 1 shares nothing).
    Collective on ``comm``."""

    def __init__(self, comm, node, n: int, config: AsyConfig, share: NodeShare,
                 ranks_per_node: int | None = None):
        rank = comm.Get_rank()
        group = node.Split(rank // ranks_per_node, rank) if ranks_per_node \
            else node.Dup()
        here = np.array([rank == 0], np.int8)   # buffers, never pickled objects
        group.Allreduce(MPI.IN_PLACE, here, op=MPI.MAX)
        flags = np.zeros(comm.Get_size(), np.int8)
        comm.Allgather(here, flags)
        with_server = bool(here[0])
        sharing = [r - 1 for r in np.flatnonzero(flags).tolist() if r]
        self.window, self.vectors = None, None
        if with_server and sharing:
            ring = config.depth // config.batch + 2
            nbytes = NodeVectors.nbytes(n, config.n_workers, len(sharing), ring)
            self.window = MPI.Win.Allocate_shared(nbytes if rank == 0 else 0, 8,
                                                  comm=group)
            buffer, _ = self.window.Shared_query(0)
            if rank == 0:
                np.frombuffer(buffer, np.uint8)[:] = 0
            _wait(group.Ibarrier(), share)   # zeroed before any rank uses it
            self.vectors = NodeVectors(buffer, n, config.n_workers, sharing, ring)
        group.Free()

    def mine(self, rank: int) -> NodeVectors | None:
        """The vectors rank ``rank`` exchanges through the window, or None."""
        if self.vectors is None or (rank and not self.vectors.shares(rank - 1)):
            return None
        return self.vectors

    def free(self) -> None:
        """Collective on the window's ranks; MPI releases its memory."""
        if self.window is not None:
            self.window.Free()
            self.window = self.vectors = None


def run(comm, open_job, config_factory, record_order: bool = False,
        threads: int | None = None, ranks_per_node: int | None = None
        ) -> FitResult | None:
    """Run Asy-OS on ``comm``; returns the result on rank 0, None elsewhere.

    Every rank opens the job itself: ``open_job()`` → (stream, y, group_of), group_of
    being checked compact group ids or None, and rank 0's "stream" anything with
    ``n_features`` (``io.describe.FeatureShape``: the server reads no column);
    ``config_factory(q, n_features)`` → AsyConfig.  A worker takes its shard and
    group budget from ``shard_of``, as the simulator does; the server keeps the
    labels to check ≤ s2 groups at the end.  Workers on the server's node exchange
    their n-vectors through a shared window (``ServerNode``; ``ranks_per_node``
    splits nodes further), the others in their messages.  Setup errors on any rank
    end every rank with InputError (exit 2); a failure while running aborts the job
    from rank 0.  ``threads``: BLAS threads per rank (default: the node's cores
    shared among its ranks, ``NodeShare``).
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        raise InputError("Asy-OS needs at least 2 MPI ranks (a server and a worker); "
                         f"got {size}")
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    server_here = np.array([rank == 0], np.int8)   # a buffer, never a pickled object
    node.Allreduce(MPI.IN_PLACE, server_here, op=MPI.MAX)
    # every rank of the node is past MPI_Init: its files have served (release_job_files)
    release_job_files()
    if node.Get_rank() == 0:
        reclaim_job_files()   # what jobs killed while they started left on this node
    share = NodeShare.of(node.Get_size(), threads,
                         workers=node.Get_size() - int(server_here[0]))
    share.apply()
    q = size - 1
    error, nu, step, shard = None, 0.0, 0.0, None
    try:
        stream, y, group_of = open_job()
        config = config_factory(q, stream.n_features)
        if rank != 0:
            shard = shard_of(stream, config, rank - 1, group_of)
            share.reading(shard.stream)
            nu = shard.nu
    except InputError as exc:
        error = str(exc)
    if shard is not None:   # one rank of the machine compiles, on a cold cache; the
        try:                # others wait and load its kernels (core/compile_notice)
            warm_worker(shard, config)
            step = time_a_step(shard, y, config)
        except Exception as exc:   # reported by _agree, like a setup error
            error = f"{type(exc).__name__}: {exc}"
    if rank == 0:   # while the workers warm and time their kernels
        warm_server()
    error, nu, step = _agree(comm, error, nu, step, share)
    if error is not None:
        node.Free()
        raise InputError(error)
    n = y.shape[0]
    config = config.for_step(step)
    eta, m = config.eta_and_m(n, nu)
    server_node = ServerNode(comm, node, n, config, share, ranks_per_node)
    node.Free()
    vectors = server_node.mine(rank)
    if rank != 0:
        try:
            driver = worker_driver(config, rank - 1, shard, y, eta, m)
            work(comm, driver, config, n, share, vectors)
        except Exception as exc:  # report to rank 0, which aborts the job
            comm.Send([failure_report(exc), MPI.BYTE], dest=0, tag=ERROR_TAG)
            release_job_files()   # this rank's node, if rank 0 is on another
            # wait for rank 0's Abort: it never sends ERROR_TAG (views may be queued)
            _wait(comm.Irecv([np.empty(1), MPI.DOUBLE], source=0, tag=ERROR_TAG),
                  share)
        server_node.free()
        return None
    try:
        server = AsyServer(y, config, record_order=record_order, group_of=group_of)
        server.start(stream.n_features, eta, m)
        result = serve(comm, server, share, vectors)
    except Exception as exc:
        bad_input = isinstance(exc, InputError) or \
            (isinstance(exc, WorkerFailed) and exc.bad_input)
        abort(comm, 2 if bad_input else 1, str(exc))
    server_node.free()
    return result


class aborting_on_signals:
    """While the job runs: SIGINT and SIGTERM end it at once, from whatever this rank
    is doing, with one ``abort`` (status 130 or 143; rank 0 says "asyos: interrupted"
    or "asyos: terminated").  Raising ``KeyboardInterrupt`` instead would let code
    that catches it keep the rank going: llvmlite's callbacks while numba compiles
    or loads a kernel print the exception and ignore it.  The previous handlers come
    back at the end, so what follows (rank 0 writing the results, which removes its
    temporary files on ^C) ends by raising as before.  Main thread only."""

    def __init__(self, comm):
        self.comm = comm

    def __enter__(self):
        self.previous = {signum: signal.signal(signum, self._abort)
                         for signum in SIGNAL_CODES}
        return self

    def __exit__(self, *exc):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _abort(self, signum, frame):
        code = SIGNAL_CODES[signum]
        abort(self.comm, code, SIGNALLED[code] if self.comm.Get_rank() == 0 else None)


def abort(comm, code: int, message: str | None) -> None:
    """End the whole job with ``code`` after one line on stderr (none for a
    ``message`` of None: another rank says it).

    mpiexec forwards a rank's stderr through a pipe and stops forwarding when the job
    aborts: without the pause the line is sometimes lost, leaving a bare exit status.
    MPICH's Abort can return before the job is torn down; this rank must not go on
    (into a barrier that would release the other ranks to print the error again).
    """
    try:   # a second signal must not cut this short: the Abort ends every rank
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
    except ValueError:   # not the main thread: it cannot
        pass
    if message is not None:
        try:
            print(f"asyos: {message}" if code in SIGNALLED else
                  f"asyos: error: {message}", file=sys.stderr, flush=True)
        except (OSError, RuntimeError):   # stderr gone, or a signal mid-write
            pass
    release_job_files()
    time.sleep(0.2)
    comm.Abort(code)
    os._exit(code)
