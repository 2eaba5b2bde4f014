"""Asy-OS on one machine: q worker processes and no server process.

The first worker's process also carries ``AsyServer`` (between its own pushes: its
requests are plain calls, no message), and the other q − 1 workers are forked from it.
Every n-vector travels through memory they all map (``node_memory.NodeVectors``:
u_C published under a sequence lock, each forked worker's Δu in its own ring of
slots), and so do the pushes and the views (``node_memory.Mailboxes``: a push's
fields in the record beside its Δu's slot, the newest view's version and credit in
the worker's view record): the staleness gate's clocks are in shared memory, and a
push costs no message and no system call.  A socket pair per worker carries the
rest (the first pull, the final report, a failure, DONE) as ``transport.wire``'s
frames with the n-vectors left empty; no pickle.

The staleness bound, the adaptive budgets, the final cut to s and the recorded
staleness are ``ServerState``'s, as on MPI and ZeroMQ: the credit of a view is
granted by the same gate.

The memory is anonymous shared mappings made before the fork: they have no name in
/dev/shm, so nothing outlives the run, whatever ends it (normal exit, an error,
SIGINT, SIGTERM, SIGKILL).  A worker that dies is lost (``ServerState.lose``, after
the pushes it posted whole are applied): the others finish, and the result is
marked partial (the CLI exits with status 3).  Each process uses one BLAS thread (q
processes share the machine's cores), waits by ``NodeShare``'s rule (spinning only
with a core to spare), and reads its blocks ahead in a thread only when a core is
left over (``NodeShare.read_ahead``).
"""

import mmap
import multiprocessing
import os
import select
import signal
import threading
import time
import warnings

from .._signals import held, release_in_child
from ..errors import InputError, Terminated
from ..solvers import messages
from ..solvers.asy import (
    AsyConfig,
    WorkerShard,
    shard_of,
    time_a_step,
    warm_worker,
    worker_driver,
)
from ..solvers.asy_server import AsyServer
from ..solvers.result import FitResult
from . import wire
from .base import (
    NodeShare,
    WorkerFailed,
    carry_worker,
    failure_report,
    handle_request,
    reported_failure,
)
from .node_memory import Mailboxes, MailLink, NodeVectors

MESSAGE, ERROR = b"M", b"E"   # the first byte of every message on a socket pair


class PipeLink:
    """A forked worker's socket pair to the server's process (``carry_worker``'s
    link interface; ``MailLink`` moves its pushes, views and n-vectors through
    memory)."""

    def __init__(self, conn, limits: wire.Limits):
        self.conn, self.limits = conn, limits
        self._poller = select.poll()
        self._poller.register(conn.fileno(), select.POLLIN)

    def send(self, message, dest: int, worker: int) -> None:
        self.conn.send_bytes(MESSAGE + wire.join(wire.encode(message, worker)))

    def poll(self, source=0):
        if not self._poller.poll(0):
            return None
        return self.wait(source)

    def wait(self, source=0):
        try:
            buffer = self.conn.recv_bytes()
        except (EOFError, OSError):
            raise SystemExit(1) from None   # the server's process is gone
        return 0, wire.decode(wire.split(memoryview(buffer)[1:]), self.limits)

    def drain(self) -> None:
        pass


def _worker_main(t: int, conn, others, shard: WorkerShard, y, config: AsyConfig,
                 eta: float, m: float, vectors: NodeVectors, mail: Mailboxes,
                 share: NodeShare) -> None:
    """A forked worker: its shard's OS steps, carried by ``carry_worker``.  It was
    forked with SIGINT and SIGTERM blocked (``_signals.held``): ^C is ignored (the
    server's process handles it and ends the workers), SIGTERM ends it."""
    release_in_child(interrupt=signal.SIG_IGN, terminate=signal.SIG_DFL)
    for other in others:
        other.close()
    try:
        driver = worker_driver(config, t, shard, y, eta, m)
        limits = wire.Limits.of(config, y.shape[0], vectors=False)
        carry_worker(MailLink(PipeLink(conn, limits), vectors, mail, t, y.shape[0],
                              share.backoff), driver, t)
    except SystemExit:
        raise
    except BaseException as exc:   # the server reports it and ends the run
        try:
            conn.send_bytes(ERROR + failure_report(exc))
        except OSError:
            pass
        os._exit(1)
    os._exit(0)


class _Host:
    """The server's process: ``AsyServer``, worker 0 in place, and the forked
    workers' socket pairs, served between worker 0's pushes.  (A serving thread
    beside worker 0's kernel, which releases the GIL, was slower on two cores: three
    runnable threads for two cores, docs/benchmarks.md.)"""

    def __init__(self, server: AsyServer, driver, conns, processes,
                 vectors: NodeVectors, mail: Mailboxes, limits: wire.Limits,
                 share: NodeShare, progress=None):
        self.server, self.driver, self.progress = server, driver, progress
        self.conns, self.processes = conns, processes
        self.vectors, self.mail, self.limits = vectors, mail, limits
        self.share = share
        self.gone: list[int] = []
        self.serving = 0.0   # seconds spent serving requests (worker 0's core)
        self._poller, self._fds = select.poll(), {}
        for t in range(1, len(conns)):
            for fd in (conns[t].fileno(), processes[t].sentinel):
                self._poller.register(fd, select.POLLIN)
                self._fds[fd] = t

    # -- delivery -------------------------------------------------------------------
    def deliver(self, replies) -> None:
        for t, reply in replies:
            if t == 0:
                self.driver.receive(reply)
                continue
            if t in self.gone or isinstance(reply, messages.Ack):
                continue   # (an ACK says nothing a worker here acts on)
            if isinstance(reply, messages.View):
                self.mail.write_view(t, self.vectors.outgoing(reply, self.server))
                continue
            try:
                self.conns[t].send_bytes(MESSAGE + wire.join(wire.encode(reply, t)))
            except OSError:   # it died: its sentinel says so next
                pass

    def handle(self, t: int, message) -> None:
        self.deliver(handle_request(self.server, t, message, f"worker {t}"))
        if self.progress is not None and isinstance(message, messages.Push):
            self.progress(message.features.size)

    # -- the forked workers -----------------------------------------------------------
    def collect(self, workers) -> int:
        """Apply the pushes ``workers`` posted (``Mailboxes``); returns how many."""
        count = 0
        for t in workers:
            if t in self.gone:
                continue
            start = time.perf_counter()
            try:
                for push in self.mail.pushes(t, self.vectors):
                    self.handle(t, push)
                    self.vectors.applied(t, push)
                    count += 1
            except wire.WireError as exc:
                raise WorkerFailed(f"worker {t} sent a malformed message: {exc}") \
                    from None
            self.serving += time.perf_counter() - start
        return count

    def receive(self, t: int) -> None:
        """A message on worker t's socket pair, after the pushes it posted before."""
        self.collect((t,))
        start = time.perf_counter()
        conn = self.conns[t]
        try:
            buffer = conn.recv_bytes()
        except (EOFError, OSError):
            return self.lose(t)
        if buffer[:1] == ERROR:
            raise reported_failure(f"worker {t}", buffer[1:])
        try:
            envelope = wire.decode(wire.split(memoryview(buffer)[1:]), self.limits)
        except wire.WireError as exc:
            raise WorkerFailed(f"worker {t} sent a malformed message: {exc}") from None
        body = self.vectors.incoming(t, envelope.body)
        self.handle(t, body)
        self.vectors.applied(t, body)
        self.serving += time.perf_counter() - start

    def serve_own(self, message) -> None:
        """Worker 0's request: a plain call, timed as serving."""
        start = time.perf_counter()
        self.handle(0, message)
        self.serving += time.perf_counter() - start

    def lose(self, t: int) -> None:
        """Worker t's process is gone (after its Final, only forgotten)."""
        if t in self.gone:
            return
        self.collect((t,))   # what it posted whole before it died
        self.gone.append(t)
        for fd in (self.conns[t].fileno(), self.processes[t].sentinel):
            self._poller.unregister(fd)
            del self._fds[fd]
        if not self.server.finished(t):
            self.deliver(self.server.lose(t, may_return=False))

    def ready(self, block: bool) -> None:
        """Apply what the forked workers posted and handle what they sent; ``block``:
        wait (``NodeShare.backoff``) until something came or a worker exited.  One
        look at the mailboxes, then one ``poll`` system call over every worker's
        socket and process sentinel (``Connection.poll`` costs ten times that)."""
        backoff = self.share.backoff() if block else None
        while True:
            handled = self.collect(range(1, len(self.conns)))
            events = self._poller.poll(0)
            for fd, _ in events:
                t = self._fds.get(fd)
                if t is None or t in self.gone:
                    continue
                conn = self.conns[t]
                if fd == conn.fileno():
                    self.receive(t)   # one message (EOF once it exited: gone)
                elif not conn.poll():
                    self.lose(t)      # its process exited, nothing left to read
            if handled or events or not block:
                return
            backoff.sleep()

    # -- the run ----------------------------------------------------------------------
    def ahead(self) -> bool:
        """Whether worker 0 is more than two pipelines ahead of a forked worker that
        holds credit (so a message from it is on its way).  Worker 0 is served at
        once and the others only between its pushes: with a one-push pipeline it
        ran far ahead and ended its last pass while the others were still fitting
        theirs, its kept set chosen against a residual they had not fitted yet (the
        bound limits staleness, not how far one worker's passes run ahead;
        docs/benchmarks.md, "Worker 0 kept in step").  Waiting costs no wall time:
        the slowest worker ends the run."""
        records, depth = self.server.state.workers, self.server.state.depth
        mine = records[0].pushes
        return any(mine > record.pushes + 2 * depth and record.unspent > 0
                   for t, record in enumerate(records[1:], 1)
                   if not (t in self.gone or record.finished or record.lost))

    def run(self) -> None:
        driver = self.driver
        self.serve_own(driver.start())
        while not self.server.done:
            if driver.finished or driver.blocked or self.ahead():
                if len(self.gone) == len(self.conns) - 1:
                    raise RuntimeError("the run cannot end: worker 0 waits for credit "
                                       "and no other worker is left to free it")
                self.ready(block=True)
                continue
            self.ready(block=False)
            if driver.ending:
                driver.advance()
                self.serve_own(driver.final_message(blas_threads=1))
                continue
            if (push := driver.advance()) is not None:
                self.serve_own(push)


def run(stream, y, config: AsyConfig, *, group_of=None, record_order: bool = False,
        eta_m: tuple[float, float] | None = None, progress=None) -> FitResult:
    """Asy-OS with ``config.n_workers`` workers on this machine; the result has the
    lost workers in ``asy["lost_shards"]`` and ``asy["partial"]``.

    ``stream``, ``y``: the whole data (each worker takes ``shard_of``);
    ``group_of``: checked compact group ids, or None.  The step is agreed as on MPI
    (the largest ν of the workers' first blocks) unless ``eta_m`` is given.
    ``progress``: called with the steps of every push applied (a progress bar).
    """
    if not hasattr(os, "fork"):
        raise InputError("Asy-OS on one machine (--workers) needs fork(): use the "
                         "simulator, or MPI")
    q, n = config.n_workers, y.shape[0]
    share = NodeShare.of(q, threads=1)
    share.apply()   # q processes on the cores
    shards = [shard_of(stream, config, t, group_of) for t in range(q)]
    for shard in shards:
        share.reading(shard.stream)
    warm_worker(shards[0], config)   # compiled once, inherited by the fork
    if eta_m is None:
        eta_m = config.eta_and_m(n, max(shard.nu for shard in shards))
    eta, m = eta_m
    config = config.for_step(time_a_step(shards[0], y, config))
    server = AsyServer(y, config, record_order=record_order, group_of=group_of)
    server.start(stream.n_features, eta, m)
    ring = config.depth // config.batch + 2
    host_pid = os.getpid()
    memory = mmap.mmap(-1, NodeVectors.nbytes(n, q, q - 1, ring))
    vectors = NodeVectors(memory, n, q, range(1, q), ring,
                          host_gone=lambda: os.getppid() != host_pid)
    capacity = max(config.capacities)
    mail = Mailboxes(mmap.mmap(-1, max(8, Mailboxes.nbytes(q - 1, ring, config.batch,
                                                           capacity))),
                     range(1, q), ring, config.batch, capacity)
    limits = wire.Limits.of(config, n, vectors=False)
    pairs = [multiprocessing.Pipe() for _ in range(q)]
    context = multiprocessing.get_context("fork")
    processes = [None]
    start = time.perf_counter()
    # From the first fork on, SIGTERM ends the run as ^C does (every worker ended).
    # Each fork runs with both held (``_signals.held``): one that lands meanwhile is
    # delivered just after it, once the new worker is in ``processes``, so it ends
    # the run instead of being lost in an at-fork callback.
    with _terminate_on(signal.SIGTERM):
        try:
            with warnings.catch_warnings():   # fork with BLAS's idle threads: safe
                warnings.simplefilter("ignore", DeprecationWarning)
                for t in range(1, q):
                    others = [end for i, pair in enumerate(pairs) for end in pair
                              if end is not pairs[t][1]]
                    process = context.Process(
                        target=_worker_main, daemon=True, name=f"asyos-worker-{t}",
                        args=(t, pairs[t][1], others, shards[t], y, config, eta, m,
                              vectors, mail, share))
                    with held():
                        process.start()
                        processes.append(process)
                        pairs[t][1].close()
            driver = worker_driver(config, 0, shards[0], y, eta, m)
            host = _Host(server, driver, [pair[0] for pair in pairs], processes,
                         vectors, mail, limits, share, progress)
            host.run()
        finally:
            with held():   # a second ^C does not cut the ending of the workers short
                for process in processes[1:]:
                    if process.is_alive():
                        process.terminate()
                for process in processes[1:]:
                    process.join(5)
                for pair in pairs:
                    pair[0].close()
    result = server.result("shared")
    lost = [f"{t}/{q}" for t in sorted(host.gone)
            if not server.finished(t)]
    result.asy.update(lost_shards=lost, partial=bool(lost), ring=ring,
                      wall_seconds=time.perf_counter() - start,
                      server_seconds=host.serving)
    return result


class _terminate_on:
    """SIGTERM raises ``Terminated`` (a KeyboardInterrupt) while the run goes on, so
    the forked workers are ended as on ^C and the CLI says "asyos: terminated" with
    status 143 (in the main thread; off it, where ``signal.signal`` cannot be called,
    SIGTERM keeps its disposition)."""

    def __init__(self, signum):
        self.signum = signum

    def __enter__(self):
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(self.signum, self._raise)

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(self.signum, self.previous)

    @staticmethod
    def _raise(signum, frame):
        raise Terminated

