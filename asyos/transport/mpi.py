"""Asy-OS over MPI: rank 0 carries ``AsyServer``, the other ranks each a ``WorkerDriver``
or, with leaders, one rank per node a ``NodeLeader``.

A carrier only: every protocol message is ``transport.wire``'s frames packed into one
byte buffer (``wire.join``) and sent with upper-case mpi4py calls (never pickle) under
one tag; errors travel as UTF-8 text under another.  MPI keeps the messages of one
pair in order and loses none, so there are no resends; a rank that dies ends the job
(MPI's fault model), with one line from rank 0.  Both sides poll (``Iprobe``/``Test``
with ``Backoff``) instead of blocking, which spins a core, and each rank takes its
``NodeShare`` of the node's cores for BLAS.  Every rank opens the job itself (rank 0
reads only the features' shape and the labels), and the step size is agreed
collectively before the first pull.

Roles (``Roles``): without leaders rank t + 1 is worker t.  With leaders the lowest
rank of every node of two or more ranks that does not hold the server relays its
node's workers (``solvers.leader``): they exchange their n-vectors with it through the
node's shared window, as the server's node does with rank 0, and only the leader's
bundles and the server's node views cross the network.  The workers are the other
ranks, numbered in rank order.
"""

import os
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, replace

import numpy as np
from mpi4py import MPI

from ..core.server_state import NonFiniteUpdate, ProtocolError
from ..errors import InputError
from ..solvers.asy import (
    AsyConfig,
    shard_of,
    time_a_step,
    warm_worker,
    worker_driver,
)
from ..solvers import messages
from ..solvers.asy_server import AsyServer, warm_server
from ..solvers.leader import NodeLeader
from ..solvers.result import FitResult
from ..solvers.session import Timeouts
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
from .node_memory import EMPTY, NodeVectors, carry_on_node

MESSAGE_TAG, ERROR_TAG = 1, 4
INTERRUPTED = 130   # the exit status of a job stopped by ^C (SIGINT)
TERMINATED = 143    # ... and by SIGTERM, which mpiexec forwards to every rank
SIGNALLED = {INTERRUPTED: "interrupted", TERMINATED: "terminated"}
SIGNAL_CODES = {signal.SIGINT: INTERRUPTED, signal.SIGTERM: TERMINATED}
# A leader's bundle waits at most this many pushes' compute for the node's others.
HOLD_PUSHES = 0.5
HEARTBEAT_TIMEOUT = Timeouts.heartbeat_timeout   # ZeroMQ's: a rank silent this long
PULSES = 3        # ... hears from its server this many times a timeout at least
PATIENCE = 2      # ... and a rank whose server is that many timeouts silent gives up



def _wait(request, share: NodeShare) -> None:
    """Complete ``request`` by polling with backoff (a blocking wait spins a core)."""
    backoff = share.backoff()
    while not request.Test():
        backoff.sleep()


class RankLost(WorkerFailed):
    """A rank's peer said nothing, or took none of its messages, past the heartbeat
    timeout: MPI cannot tell a cut link or a stalled host from a slow one, nor go on
    without the peer's shards, so the run ends with the lost-shards status."""

    @property
    def exit_status(self) -> int:
        return 3


class Link:
    """One rank's end: send messages without waiting, receive them by polling.

    Nonblocking sends, because a long message (past MPI's eager limit) is only
    delivered when its receiver polls; the sender waits only when ``in_flight``
    messages are still on their way.  MPI has no liveness of its own (a TCP
    connection across a cut cable reports nothing for many minutes), so a rank that
    serves others sends each a HEARTBEAT when it has sent it nothing for a while
    (``pulse``), heartbeats are taken here and never returned, and with
    ``patience`` a wait for a peer that sends nothing, or takes nothing, for that
    many seconds raises ``RankLost``.
    """

    def __init__(self, comm, limits: wire.Limits, share: NodeShare, in_flight: int,
                 lean=frozenset(), name=lambda rank: f"rank {rank}",
                 patience: float | None = None):
        self.comm, self.limits, self.share, self.name = comm, limits, share, name
        self.in_flight, self.patience = in_flight, patience
        self.lean, self._lean_limits = lean, replace(limits, vectors=False)
        self.sent = self.received = 0   # bytes
        self._busy: deque = deque()          # (request, destination), oldest first
        self._status = MPI.Status()
        self.began = time.perf_counter()
        self.heard: dict[int, float] = {}    # source → when its last message came
        self.told: dict[int, float] = {}     # destination → when it was last sent one

    def send(self, message, dest: int, worker: int) -> None:
        buffer = wire.join(wire.encode(message, worker))
        self.sent += len(buffer)
        while self._busy and (len(self._busy) >= self.in_flight or
                              self._busy[0][0].Test()):
            self._complete(*self._busy.popleft())
        self.told[dest] = time.perf_counter()
        request = self.comm.Isend([buffer, MPI.BYTE], dest=dest, tag=MESSAGE_TAG)
        self._busy.append((request, dest, buffer))

    def _complete(self, request, dest: int, buffer=None) -> None:
        backoff, start = self.share.backoff(), time.perf_counter()
        while not request.Test():
            if self.patience is not None and \
                    time.perf_counter() - start > self.patience:
                raise RankLost(f"{self.name(dest)} has taken no message from "
                               f"{self.name(self.comm.Get_rank())} for "
                               f"{self.patience:g} s: a cut link or a stalled host")
            backoff.sleep()

    def pulse(self, peers, every: float, now: float) -> None:
        """A HEARTBEAT to each of ``peers`` (rank → a worker it carries) sent nothing
        for ``every`` seconds, so that it can tell this rank is alive."""
        for rank, worker in peers.items():
            if now - self.told.get(rank, self.began) > every:
                self.send(messages.Heartbeat(), rank, worker)

    def silent(self, source: int, now: float) -> float:
        """Seconds since ``source``'s last message (or since this link began)."""
        return now - self.heard.get(source, self.began)

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
        self.heard[source] = time.perf_counter()
        if tag == ERROR_TAG:
            raise reported_failure(self.name(source), buffer)
        if tag != MESSAGE_TAG:
            raise WorkerFailed(f"rank {source} sent an unknown tag {tag}")
        try:
            limits = self._lean_limits if source in self.lean else self.limits
            envelope = wire.decode(wire.split(buffer), limits)
        except wire.WireError as exc:
            raise WorkerFailed(f"rank {source} sent a malformed message: {exc}") \
                from None
        return None if isinstance(envelope.body, messages.Heartbeat) else \
            (source, envelope)

    def wait(self, source=MPI.ANY_SOURCE) -> tuple[int, wire.Envelope]:
        backoff = self.share.backoff()
        while (received := self.poll(source)) is None:
            if source != MPI.ANY_SOURCE:
                self.expect(source, time.perf_counter())
            backoff.sleep()
        return received

    def expect(self, source: int, now: float) -> None:
        """``RankLost`` when ``source`` has said nothing for ``patience`` seconds."""
        if self.patience is not None and self.silent(source, now) > self.patience:
            raise RankLost(f"{self.name(self.comm.Get_rank())} has heard nothing from "
                           f"{self.name(source)} for {self.patience:g} s: a cut link "
                           "or a stalled host")

    def drain(self) -> None:
        while self._busy:
            self._complete(*self._busy.popleft())


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




class Toward:
    """A worker's link whose server is rank ``hub`` (its node's leader): the worker's
    side speaks to "the server" (0) as ever."""

    def __init__(self, link: Link, hub: int):
        self.link, self.hub = link, hub

    def send(self, message, dest: int, worker: int) -> None:
        self.link.send(message, self.hub, worker)

    def poll(self, source=0):
        received = self.link.poll(self.hub)
        return None if received is None else (0, received[1])

    def wait(self, source=0):
        return 0, self.link.wait(self.hub)[1]

    def drain(self) -> None:
        self.link.drain()


@dataclass(frozen=True)
class Roles:
    """Who does what in a job of ``size`` ranks: rank 0 serves, ``leaders`` relay
    (rank → the workers it relays), and worker t is rank ``worker_ranks[t]``.
    ``heads[r]``: the lowest rank of rank r's node (its node's id)."""

    size: int
    heads: tuple[int, ...]
    worker_ranks: tuple[int, ...]
    leaders: dict     # leader's rank → the workers it relays
    worker_of: dict   # a worker's rank → its id
    servers: tuple    # each worker's server: its leader's rank, or 0

    @classmethod
    def of(cls, heads, leaders: bool) -> "Roles":
        """The roles for nodes ``heads`` (one per rank); with ``leaders``, the head
        of every node of ≥ 2 ranks without the server leads it."""
        heads = tuple(int(h) for h in heads)
        size = len(heads)
        leading = sorted({h for h in heads if h != heads[0] and heads.count(h) > 1}) \
            if leaders else []
        worker_ranks = tuple(r for r in range(1, size) if r not in leading)
        worker_of = {r: t for t, r in enumerate(worker_ranks)}
        led = {leader: [worker_of[r] for r in range(size)
                        if heads[r] == leader and r != leader] for leader in leading}
        servers = tuple(heads[r] if heads[r] in led else 0 for r in worker_ranks)
        return cls(size, heads, worker_ranks, led, worker_of, servers)

    @property
    def n_workers(self) -> int:
        return len(self.worker_ranks)

    def worker(self, rank: int) -> int | None:
        """The worker rank ``rank`` runs (None: the server or a leader)."""
        return self.worker_of.get(rank)

    def hub(self, rank: int) -> int | None:
        """The rank whose shared window ``rank``'s node uses (the server's, or its
        leader's), or None (no window: messages carry the n-vectors)."""
        head = self.heads[rank]
        if head == self.heads[0]:
            return 0 if self.heads.count(head) > 1 else None
        return head if head in self.leaders else None

    def server_of(self, worker: int) -> int:
        """The rank ``worker`` sends its messages to: its leader's, or 0."""
        return self.servers[worker]

    def speaker(self, worker: int) -> int:
        """The rank the server hears ``worker`` from: its leader's, or its own."""
        return self.servers[worker] or self.worker_ranks[worker]

    def name(self, rank: int) -> str:
        """``rank`` as an error message names it."""
        if rank in self.leaders:
            return f"the leader of workers {self.leaders[rank]} (rank {rank})"
        return f"worker {self.worker(rank)} (rank {rank})" if rank else \
            "the server (rank 0)"


class NodeWindow:
    """The n-vectors of a node's workers in an MPI-3 shared window
    (``Win.Allocate_shared`` on the node's communicator), allocated by its hub (rank 0
    on the server's node, the leader on a led one: the lowest rank of the node) and
    mapped by its workers.  Collective on ``group`` (the node)."""

    def __init__(self, comm, group, roles: Roles, n: int, config: AsyConfig,
                 share: NodeShare):
        self.window, self.vectors = None, None
        members = np.zeros(group.Get_size(), np.int64)   # buffers, never pickled
        group.Allgather(np.array([comm.Get_rank()], np.int64), members)
        hub = roles.hub(int(members[0]))
        sharing = [roles.worker(r) for r in members.tolist()
                   if roles.worker(r) is not None]
        if hub is None or not sharing:
            return
        ring = config.depth // config.batch + 2
        nbytes = NodeVectors.nbytes(n, config.n_workers, len(sharing), ring)
        here = group.Get_rank() == 0   # the hub: the node's lowest rank
        self.window = MPI.Win.Allocate_shared(nbytes if here else 0, 8, comm=group)
        buffer, _ = self.window.Shared_query(0)
        if here:
            np.frombuffer(buffer, np.uint8)[:] = 0
        _wait(group.Ibarrier(), share)   # zeroed before any rank uses it
        self.vectors = NodeVectors(buffer, n, config.n_workers, sharing, ring)

    def free(self) -> None:
        """Collective on the window's ranks; MPI releases its memory."""
        if self.window is not None:
            self.window.Free()
            self.window = self.vectors = None


def watch_every(timeout: float) -> float:
    """Seconds between two looks at the peers' silence (an idle rank polls every few
    microseconds): often enough to act within a tenth of the timeout."""
    return min(1.0, timeout / 10)


class Silence:
    """Liveness at the server: a rank that carries a worker that owes the server a
    message (``AsyServer.owes``: stepping, neither finished nor waiting for credit)
    and has said nothing, nor been answered, for ``timeout`` seconds is lost
    (``RankLost``).  ``watch`` also keeps every such rank hearing from the server
    (``Link.pulse``), so that one cut off from it gives up too (``run``)."""

    def __init__(self, roles: Roles, timeout: float, now: float):
        self.roles, self.timeout = roles, timeout
        self.speakers: dict[int, list[int]] = {}
        for t in range(roles.n_workers):
            self.speakers.setdefault(roles.speaker(t), []).append(t)
        self.peers = {rank: workers[0] for rank, workers in self.speakers.items()}
        self.last = dict.fromkeys(self.speakers, now)
        self._next = now   # spaced: the idle server polls every few microseconds

    def contact(self, rank: int, now: float) -> None:
        self.last[rank] = now

    def watch(self, link: Link, server: AsyServer, now: float) -> None:
        if now < self._next:
            return
        self._next = now + watch_every(self.timeout)
        for rank, workers in self.speakers.items():
            silent = now - self.last[rank]
            if silent > self.timeout and any(server.owes(t) for t in workers):
                raise RankLost(
                    f"{self.roles.name(rank)} has been silent for {silent:.1f} s, past "
                    f"the heartbeat timeout ({self.timeout:g} s), with its work "
                    "unfinished: a cut link or a stalled host (raise "
                    "--heartbeat-timeout if its steps are that slow); MPI cannot go "
                    "on without its shard")
        link.pulse(self.peers, self.timeout / PULSES, now)


def _send_replies(link: Link, replies, server: AsyServer, roles: Roles,
                  vectors: NodeVectors | None) -> None:
    """Send the server's ``replies``: a worker on the server's node gets its view
    through the window, a led worker's consecutive views go to its leader as one
    ``NodeView`` (u_C once), everything else as it is (to a led worker through its
    leader, after the views before it)."""
    pending: dict[int, list] = {}

    def flush(leader: int) -> None:
        views = pending.pop(leader, [])
        if views:
            link.send(messages.NodeView(
                server.u, views[0][1].version, np.array(server.pushes_applied()),
                np.array([t for t, _ in views], np.int64),
                tuple(messages.replace(view, u=EMPTY) for _, view in views)), leader,
                views[0][0])

    for target, reply in replies:
        leader = roles.server_of(target)
        if leader == 0:
            if vectors is not None and vectors.shares(target):
                reply = vectors.outgoing(reply, server)
            link.send(reply, roles.worker_ranks[target], target)
        elif isinstance(reply, messages.View):
            pending.setdefault(leader, []).append((target, reply))
        else:
            flush(leader)
            link.send(reply, leader, target)
    for leader in list(pending):
        flush(leader)


def _from_leader(server: AsyServer, roles: Roles, source: int, envelope,
                 relayed: dict) -> list:
    """A leader's message: a bundle of its workers' pushes, or one of their other
    requests as they sent it; the server's replies."""
    led, body = roles.leaders[source], envelope.body
    workers = body.workers.tolist() if isinstance(body, messages.Bundle) else \
        [envelope.worker]
    if not set(workers) <= set(led):
        raise WorkerFailed(f"{roles.name(source)} spoke for workers {workers}")
    if not isinstance(body, messages.Bundle):
        return handle_request(server, envelope.worker, body, roles.name(source))
    try:
        replies = server.handle_bundle(body)
    except NonFiniteUpdate:
        raise
    except ProtocolError as exc:
        raise WorkerFailed(f"{roles.name(source)}: {exc}") from None
    counts = relayed.setdefault(source, [0, 0])
    counts[0] += 1
    counts[1] += len(workers)
    return replies


def serve(comm, server: AsyServer, share: NodeShare, roles: Roles,
          vectors: NodeVectors | None = None,
          timeout: float = HEARTBEAT_TIMEOUT) -> FitResult:
    """Rank 0: carry the server's messages until every worker has finished.
    ``vectors``: the n-vectors of the workers on this node, through its shared window
    (their messages carry none); ``timeout``: ``Silence``'s."""
    cpu_start = time.process_time()
    config = server.config
    lean = frozenset() if vectors is None else \
        frozenset(roles.worker_ranks[t] for t in vectors.rows)
    link = Link(comm, wire.Limits.of(config, server.y.shape[0]), share,
                in_flight=config.n_workers * (config.depth + 1) + 1, lean=lean,
                name=roles.name, patience=timeout)
    serving = 0.0   # seconds from a request's arrival to its replies' sending
    relayed: dict[int, list[int]] = {}   # leader → [bundles, pushes]
    silence = Silence(roles, timeout, time.perf_counter())
    backoff = share.backoff()
    while not server.done:
        # also when never idle: a rank waiting for DONE must go on hearing from it
        silence.watch(link, server, time.perf_counter())
        if (received := link.poll()) is None:
            backoff.sleep()
            continue
        backoff.reset()
        source, envelope = received
        start = time.perf_counter()
        silence.contact(source, start)
        if source in roles.leaders:
            replies = _from_leader(server, roles, source, envelope, relayed)
        else:
            worker = roles.worker(source)
            if envelope.worker != worker:
                raise WorkerFailed(f"rank {source} spoke for worker {envelope.worker}")
            body = envelope.body if source not in lean else \
                vectors.incoming(worker, envelope.body)
            replies = handle_request(server, worker, body, roles.name(source))
            if source in lean:
                vectors.applied(worker, body)
        _send_replies(link, replies, server, roles, vectors)
        sent = time.perf_counter()
        for target, _ in replies:
            silence.contact(roles.speaker(target), sent)
        serving += sent - start
    link.drain()
    result = server.result("mpi")
    result.asy["server_cpu_seconds"] = time.process_time() - cpu_start
    result.asy["server_seconds"] = serving
    result.asy["shared_window_workers"] = \
        [] if vectors is None else sorted(vectors.rows)
    result.asy["leaders"] = [
        {"rank": rank, "workers": workers, "bundles": relayed.get(rank, [0, 0])[0],
         "pushes": relayed.get(rank, [0, 0])[1]}
        for rank, workers in sorted(roles.leaders.items())]
    result.asy["server_bytes"] = {
        "sent": link.sent, "received": link.received,
        "pushes": sum(server.pushes_applied())}
    return result


def work(comm, driver: WorkerDriver, config: AsyConfig, n: int, share: NodeShare,
         roles: Roles, vectors: NodeVectors | None = None,
         timeout: float = HEARTBEAT_TIMEOUT) -> None:
    """A worker's rank: carry its driver's messages to the server (or its node's
    leader) and back, its n-vectors through ``vectors`` when its node has a
    window; ``RankLost`` when its server is ``PATIENCE`` timeouts silent."""
    worker = roles.worker(comm.Get_rank())
    limits = wire.Limits.of(config, n, vectors=vectors is None)
    link = Link(comm, limits, share, in_flight=config.depth + 1, name=roles.name,
                patience=PATIENCE * timeout)
    hub = roles.server_of(worker)
    carry_on_node(Toward(link, hub) if hub else link, driver, worker, vectors, n)


def lead(comm, config: AsyConfig, n: int, share: NodeShare, roles: Roles,
         vectors: NodeVectors, hold: float, timeout: float = HEARTBEAT_TIMEOUT) -> None:
    """A leader's rank: relay its node's workers (``solvers.leader``) until each is
    done, their n-vectors through the node's window, the node's to the server in
    its messages, a bundle waiting at most ``hold`` seconds for the node's other
    workers.  Its workers hear from it as the server's do from the server
    (``Silence``); ``RankLost`` when the server is ``PATIENCE`` timeouts silent."""
    me = comm.Get_rank()
    leader = NodeLeader(roles.leaders[me], n, hold)
    peers = {roles.worker_ranks[t]: t for t in leader.workers}
    link = Link(comm, wire.Limits.of(config, n), share,
                in_flight=len(peers) * (config.depth + 1) + 1, lean=frozenset(peers),
                name=roles.name, patience=PATIENCE * timeout)
    backoff = share.backoff()
    watched = time.perf_counter()
    while not leader.finished:
        received = link.poll()
        if received is None:
            now = time.perf_counter()
            if leader.due(now):
                for t, message in leader.flush():
                    link.send(message, 0, t)
            if now - watched > watch_every(timeout):
                watched = now
                link.expect(0, now)
                link.pulse(peers, timeout / PULSES, now)
            backoff.sleep()
            continue
        backoff.reset()
        source, envelope = received
        if source == 0:
            body = envelope.body
            if isinstance(body, messages.NodeView):
                vectors.publish(body.u, body.version, body.through)
            for t, message in leader.from_server(envelope.worker, body):
                link.send(message, roles.worker_ranks[t], t)
            continue
        worker = roles.worker(source)
        if source not in peers or envelope.worker != worker:
            raise WorkerFailed(f"rank {source} spoke to {roles.name(me)} for worker "
                               f"{envelope.worker}")
        body = vectors.incoming(worker, envelope.body)
        now = time.perf_counter()
        out = leader.from_worker(worker, body, now)
        if leader.due(now):   # the node's every running worker is in the bundle
            out += leader.flush()
        for t, message in out:
            link.send(message, 0, t)
        vectors.applied(worker, body)
    link.drain()


def _roles(comm, node, ranks_per_node: int | None, leaders: bool):
    """The node each rank is on (``ranks_per_node`` splits a node further into
    groups of that many consecutive ranks: several "nodes" on one machine, for tests
    and for comparing with messages; 1 shares nothing) and the roles they give.
    Collective; returns (the node's communicator, roles)."""
    rank = comm.Get_rank()
    group = node.Split(rank // ranks_per_node, rank) if ranks_per_node else node.Dup()
    head = np.array([rank], np.int64)   # buffers, never pickled objects
    group.Allreduce(MPI.IN_PLACE, head, op=MPI.MIN)
    heads = np.zeros(comm.Get_size(), np.int64)
    comm.Allgather(head, heads)
    return group, Roles.of(heads, leaders)


def run(comm, open_job, config_factory, record_order: bool = False,
        threads: int | None = None, ranks_per_node: int | None = None,
        leaders: bool = False, hold: float | None = None,
        timeout: float = HEARTBEAT_TIMEOUT) -> FitResult | None:
    """Run Asy-OS on ``comm``; returns the result on rank 0, None elsewhere.

    Every rank opens the job itself: ``open_job(features)`` → (stream, y, group_of),
    group_of being checked compact group ids or None, and where ``features`` is False
    (the server's rank, a leader's) "stream" anything with ``n_features``
    (``io.describe.FeatureShape``: it reads no column); ``config_factory(q,
    n_features)`` → AsyConfig.  A worker takes its shard and group budget from
    ``shard_of``, as the simulator does; the server keeps the labels to check ≤ s2
    groups at the end.  Workers on the server's node exchange their n-vectors
    through a shared window (``NodeWindow``; ``ranks_per_node`` splits nodes
    further), as do a led node's with its leader (``leaders``: ``Roles``), the
    others in their messages.  Setup errors on any rank end every rank with
    InputError (exit 2); a failure while running aborts the job from rank 0.
    ``threads``: BLAS threads per rank (default: the node's cores shared among its
    ranks, ``NodeShare``).  ``hold``: the most seconds a leader's bundle waits for
    the node's other workers (default ``HOLD_PUSHES`` pushes' compute).
    ``timeout``: a rank silent this many seconds with its work unfinished ends the
    job with status 3 (``Silence``).
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        raise InputError("Asy-OS needs at least 2 MPI ranks (a server and a worker); "
                         f"got {size}")
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    # every rank of the node is past MPI_Init: its files have served (release_job_files)
    release_job_files()
    if node.Get_rank() == 0:
        reclaim_job_files()   # what jobs killed while they started left on this node
    group, roles = _roles(comm, node, ranks_per_node, leaders)
    worker = roles.worker(rank)
    working = np.array([worker is not None], np.int64)
    node.Allreduce(MPI.IN_PLACE, working, op=MPI.SUM)
    share = NodeShare.of(node.Get_size(), threads, workers=int(working[0]))
    share.apply()
    node.Free()
    q = roles.n_workers
    error, nu, step, shard = None, 0.0, 0.0, None
    try:
        if q < 1:
            raise InputError(f"{size} MPI ranks with leaders leave no worker")
        stream, y, group_of = open_job(worker is not None)
        config = config_factory(q, stream.n_features)
        if worker is not None:
            shard = shard_of(stream, config, worker, group_of)
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
        group.Free()
        raise InputError(error)
    n = y.shape[0]
    config = config.for_step(step)
    eta, m = config.eta_and_m(n, nu)
    window = NodeWindow(comm, group, roles, n, config, share)
    group.Free()
    if rank != 0:
        try:
            if worker is None:
                lead(comm, config, n, share, roles, window.vectors,
                     HOLD_PUSHES * config.batch * (config.step_seconds or 0.0)
                     if hold is None else hold, timeout)
            else:
                driver = worker_driver(config, worker, shard, y, eta, m)
                work(comm, driver, config, n, share, roles, window.vectors, timeout)
        except RankLost as exc:   # its server is gone or cut off: nobody to tell, and
            abort(comm, 3, str(exc), alone=True)   # the server, if alive, ends the rest
        except Exception as exc:  # report to rank 0, which aborts the job
            comm.Send([failure_report(exc), MPI.BYTE], dest=0, tag=ERROR_TAG)
            release_job_files()   # this rank's node, if rank 0 is on another
            # wait for rank 0's Abort: it never sends ERROR_TAG (views may be queued)
            _wait(comm.Irecv([np.empty(1), MPI.DOUBLE], source=0, tag=ERROR_TAG),
                  share)
        window.free()
        return None
    try:
        server = AsyServer(y, config, record_order=record_order, group_of=group_of)
        server.start(stream.n_features, eta, m)
        result = serve(comm, server, share, roles, window.vectors, timeout)
    except Exception as exc:
        abort(comm, exc.exit_status if isinstance(exc, WorkerFailed) else
              2 if isinstance(exc, InputError) else 1, str(exc))
    window.free()
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


def abort(comm, code: int, message: str | None, alone: bool = False) -> None:
    """End the whole job with ``code`` after one line on stderr (none for a
    ``message`` of None: another rank says it); ``alone``: end this rank only, cut
    off from the job's others (``MPI_Abort`` would wait for them).

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
    if not alone:
        comm.Abort(code)
    os._exit(code)
