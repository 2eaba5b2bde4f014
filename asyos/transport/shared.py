"""Asy-OS on one machine: q worker processes and no server process.

The first worker's process also carries ``AsyServer`` (between its own pushes: its
requests are plain calls, no message), and the other q − 1 workers are forked from it.
Every n-vector travels through memory they all map, never through a message:

* u_C is published by the server's process into a shared vector under a sequence
  lock (``SharedU``): a worker reads it when a view arrives, so a VIEW message carries
  only its version, credit, budget and η;
* each forked worker writes its Δu (and at the end X_S w_S) into its own ring of
  slots (``Slots``), and its PUSH says which push it is: the server applies the slot
  and counts it consumed, so a slot is never overwritten before it was applied.  The
  server keeps each worker's applied sum apart, so u_C = Σ_t X_S(t) w_S(t) exactly
  and the check at the end still runs;
* the messages themselves are ``transport.wire``'s frames with the n-vectors left
  empty (tens of bytes), over a socket pair per worker; no pickle.

The staleness bound, the adaptive budgets, the final cut to s and the recorded
staleness are ``ServerState``'s, as on MPI and ZeroMQ: the credit of a view is
granted by the same gate.  A worker reads u_C when the view's message arrives, which
may be newer than the view's version: its steps are then less stale than the server
records, never more.

The memory is an anonymous shared mapping made before the fork: it has no name in
/dev/shm, so nothing outlives the run, whatever ends it (normal exit, an error,
SIGINT, SIGTERM, SIGKILL).  A worker that dies is lost (``ServerState.lose``): the
others finish, and the result is marked partial (the CLI exits with status 3).  Each
process uses one BLAS thread (q processes share the machine's cores).
"""

import mmap
import multiprocessing
import os
import select
import signal
import time
import warnings
from dataclasses import replace

import numpy as np

from ..core.server_state import NonFiniteUpdate, ProtocolError
from ..errors import InputError
from ..solvers import messages
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
    Backoff,
    NodeShare,
    WorkerFailed,
    carry_worker,
    failure_report,
    reported_failure,
)

MESSAGE, ERROR = b"M", b"E"   # the first byte of every message on a socket pair


class SharedMemory:
    """An anonymous shared mapping carved into float64 and int64 arrays: forked
    processes inherit it; it has no name, so the kernel frees it with its last user."""

    def __init__(self, nbytes: int):
        self._map = mmap.mmap(-1, max(nbytes, 8))
        self._at = 0

    def take(self, shape, dtype) -> np.ndarray:
        count = int(np.prod(shape))
        array = np.frombuffer(self._map, dtype=dtype, count=count, offset=self._at)
        self._at += count * np.dtype(dtype).itemsize
        return array.reshape(shape)

    @staticmethod
    def size(n: int, q: int, ring: int) -> int:
        return 8 * (1 + 2 * q + n + q * ring * n)


class SharedU:
    """u_C and each worker's pushes applied, as the server last published them.

    One writer (the server's process) and q readers, with a sequence lock: the
    writer makes the counter odd, writes, makes it even; a reader copies and retries
    when the counter was odd or moved.  Ordered on x86-64 (stores are not reordered
    with stores, nor loads with loads)."""

    def __init__(self, memory: SharedMemory, n: int, q: int):
        self.sequence = memory.take(1, np.int64)
        self.through = memory.take(q, np.int64)
        self.u = memory.take(n, np.float64)

    def publish(self, u: np.ndarray, through) -> None:
        self.sequence[0] += 1
        self.u[:] = u
        self.through[:] = through
        self.sequence[0] += 1

    def read(self, into: np.ndarray, worker: int, writer: int) -> int:
        """Copy u_C into ``into``; returns the pushes of ``worker`` it includes.
        ``writer``: the server's process id (a copy never ends if it died
        mid-write: the worker exits)."""
        tries = 0
        while True:
            before = int(self.sequence[0])
            if before % 2 == 0:
                into[:] = self.u
                through = int(self.through[worker])
                if int(self.sequence[0]) == before:
                    return through
            tries += 1
            if tries % 4096 == 0 and os.getppid() != writer:
                raise SystemExit(1)


class Slots:
    """Each worker's ring of n-vector slots: push k of worker t goes in slot k mod
    ``ring``, and may be written once the server consumed push k − ``ring``."""

    def __init__(self, memory: SharedMemory, n: int, q: int, ring: int):
        self.ring = ring
        self.consumed = memory.take(q, np.int64)
        self.slots = memory.take((q, ring, n), np.float64)

    def slot(self, worker: int, number: int) -> np.ndarray:
        return self.slots[worker, number % self.ring]


class WorkerLink:
    """A forked worker's end: the ``Link`` interface ``carry_worker`` drives."""

    def __init__(self, conn, worker: int, shared: SharedU, slots: Slots,
                 limits: wire.Limits, host: int):
        self.conn, self.worker, self.shared, self.slots = conn, worker, shared, slots
        self.limits, self.host = limits, host
        self._u = np.zeros(shared.u.size)
        self._poller = select.poll()
        self._poller.register(conn.fileno(), select.POLLIN)

    def send(self, message, dest: int, worker: int) -> None:
        if isinstance(message, messages.Push):
            message = replace(message, delta=self._park(message.seq, message.delta))
        elif isinstance(message, messages.Final):
            message = replace(message, contribution=self._park(message.seq + 1,
                                                               message.contribution))
        self.conn.send_bytes(MESSAGE + wire.join(wire.encode(message, worker)))

    def _park(self, number: int, vector: np.ndarray) -> np.ndarray:
        """Write ``vector`` into slot ``number`` once the server consumed the push
        that slot held; the message then carries an empty frame in its place."""
        backoff = Backoff(spin=5e-5)
        while self.slots.consumed[self.worker] < number - self.slots.ring:
            if os.getppid() != self.host:
                raise SystemExit(1)   # the server's process is gone
            backoff.sleep()
        self.slots.slot(self.worker, number)[:] = vector
        return _EMPTY

    def poll(self, source=0):
        if not self._poller.poll(0):
            return None
        return self._receive()

    def wait(self, source=0):
        return self._receive()

    def _receive(self):
        try:
            buffer = self.conn.recv_bytes()
        except (EOFError, OSError):
            raise SystemExit(1) from None   # the server's process is gone
        envelope = wire.decode(wire.split(memoryview(buffer)[1:]), self.limits)
        body = envelope.body
        if isinstance(body, messages.View):
            through = self.shared.read(self._u, self.worker, self.host)
            envelope = replace(envelope, body=replace(body, u=self._u,
                                                      through=through))
        return 0, envelope

    def drain(self) -> None:
        pass


_EMPTY = np.zeros(0)


def _worker_main(t: int, conn, others, shard, y, config: AsyConfig, eta: float,
                 m: float, groups, shared: SharedU, slots: Slots, host: int) -> None:
    """A forked worker: its shard's OS steps, carried by ``carry_worker``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the server's process handles ^C
    for other in others:
        other.close()
    try:
        loop = worker_steps(config, t, shard, y, eta, m, groups)
        limits = wire.Limits(0, max(config.capacities), config.batch)
        link = WorkerLink(conn, t, shared, slots, limits, host)
        carry_worker(link, WorkerDriver(loop, y.shape[0]), t)
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

    def __init__(self, server: AsyServer, driver, conns, processes, shared: SharedU,
                 slots: Slots, limits: wire.Limits, progress=None):
        self.server, self.driver, self.progress = server, driver, progress
        self.conns, self.processes = conns, processes
        self.shared, self.slots, self.limits = shared, slots, limits
        self.published = -1
        self.gone: list[int] = []
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
            if t in self.gone:
                continue
            if isinstance(reply, messages.View):
                state = self.server.state
                if self.published != state.clock:
                    self.shared.publish(state.u, [r.messages for r in state.workers])
                    self.published = state.clock
                reply = replace(reply, u=_EMPTY)
            try:
                self.conns[t].send_bytes(MESSAGE + wire.join(wire.encode(reply, t)))
            except OSError:   # it died: its sentinel says so next
                pass

    def handle(self, t: int, message) -> None:
        try:
            replies = self.server.handle(t, message)
        except NonFiniteUpdate:
            raise
        except ProtocolError as exc:
            raise WorkerFailed(f"worker {t}: {exc}") from None
        self.deliver(replies)
        if self.progress is not None and isinstance(message, messages.Push):
            self.progress(message.features.size)

    # -- the forked workers -----------------------------------------------------------
    def receive(self, t: int) -> None:
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
        body = envelope.body
        if isinstance(body, messages.Push):
            body = replace(body, delta=self.slots.slot(t, body.seq))
        elif isinstance(body, messages.Final):
            body = replace(body, contribution=self.slots.slot(t, body.seq + 1))
        self.handle(t, body)
        if isinstance(body, messages.Push):
            self.slots.consumed[t] = body.seq
        elif isinstance(body, messages.Final):
            self.slots.consumed[t] = body.seq + 1

    def lose(self, t: int) -> None:
        """Worker t's process is gone (after its Final, only forgotten)."""
        if t in self.gone:
            return
        self.gone.append(t)
        for fd in (self.conns[t].fileno(), self.processes[t].sentinel):
            self._poller.unregister(fd)
            del self._fds[fd]
        if not self.server.state.workers[t].finished:
            self.deliver(self.server.lose(t))

    def ready(self, timeout) -> None:
        """Handle what the forked workers sent, waiting up to ``timeout`` seconds
        (None: until something arrives or a worker exits), then all that has
        arrived.  One ``poll`` system call over every worker's socket and process
        sentinel: a few µs when nothing waits (``Connection.poll`` costs ten times
        that)."""
        wait = None if timeout is None else 1000 * timeout
        while events := self._poller.poll(wait):
            wait = 0   # then everything that has arrived, without waiting
            for fd, _ in events:
                t = self._fds.get(fd)
                if t is None or t in self.gone:
                    continue
                conn = self.conns[t]
                if fd == conn.fileno():
                    self.receive(t)   # one message (EOF once it exited: gone)
                elif not conn.poll():
                    self.lose(t)      # its process exited, nothing left to read

    # -- the run ----------------------------------------------------------------------
    def run(self) -> None:
        driver = self.driver
        self.handle(0, driver.start())
        while not self.server.done:
            if driver.finished or driver.blocked:
                if len(self.gone) == len(self.conns) - 1:
                    raise RuntimeError("the run cannot end: worker 0 waits for credit "
                                       "and no other worker is left to free it")
                self.ready(None)
                continue
            self.ready(0)
            if driver.ending:
                driver.advance()
                self.handle(0, driver.final_message(blas_threads=1))
                continue
            self.handle(0, driver.advance())


def run(stream, y, config: AsyConfig, *, group_of=None, record_order: bool = False,
        eta_m: tuple[float, float] | None = None, progress=None) -> FitResult:
    """Asy-OS with ``config.n_workers`` workers on this machine; the result has the
    lost workers in ``asy["lost_shards"]`` and ``asy["partial"]``.

    ``stream``, ``y``: the whole data (each worker takes ``worker_shard``);
    ``group_of``: checked compact group ids, or None.  The step is agreed as on MPI
    (the largest ν of the workers' first blocks) unless ``eta_m`` is given.
    ``progress``: called with the steps of every push applied (a progress bar).
    """
    if not hasattr(os, "fork"):
        raise InputError("Asy-OS on one machine (--workers) needs fork(): use the "
                         "simulator, or MPI")
    q, n = config.n_workers, y.shape[0]
    NodeShare(threads=1, spin_seconds=0.0).apply()   # q processes on the cores
    shards = [worker_shard(stream, q, t, group_of) for t in range(q)]
    groups = [config.groups(t, group_of) for t in range(q)]
    warm_worker(shards[0], config, groups[0])   # compiled once, inherited by the fork
    if eta_m is None:
        eta_m = config.eta_and_m(n, max(first_block_nu(shard) for shard in shards))
    eta, m = eta_m
    server = AsyServer(y, config, record_order=record_order, group_of=group_of)
    server.start(stream.n_features, eta, m)
    ring = config.depth // config.batch + 2
    memory = SharedMemory(SharedMemory.size(n, q, ring))
    shared, slots = SharedU(memory, n, q), Slots(memory, n, q, ring)
    limits = wire.Limits(0, max(config.capacities), config.batch)
    pairs = [multiprocessing.Pipe() for _ in range(q)]
    context = multiprocessing.get_context("fork")
    processes = [None]
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():   # fork with BLAS's idle threads: safe here
            warnings.simplefilter("ignore", DeprecationWarning)
            for t in range(1, q):
                others = [end for i, pair in enumerate(pairs) for end in pair
                          if end is not pairs[t][1]]
                process = context.Process(
                    target=_worker_main, daemon=True, name=f"asyos-worker-{t}",
                    args=(t, pairs[t][1], others, shards[t], y, config, eta, m,
                          groups[t], shared, slots, os.getpid()))
                process.start()
                pairs[t][1].close()
                processes.append(process)
        driver = WorkerDriver(worker_steps(config, 0, shards[0], y, eta, m,
                                           groups[0]), n)
        host = _Host(server, driver, [pair[0] for pair in pairs], processes, shared,
                     slots, limits, progress)
        with _terminate_on(signal.SIGTERM):
            host.run()
    finally:
        for process in processes[1:]:
            if process.is_alive():
                process.terminate()
        for process in processes[1:]:
            process.join(5)
        for pair in pairs:
            pair[0].close()
    result = server.result("shared")
    lost = [f"{t}/{q}" for t in sorted(host.gone)
            if not server.state.workers[t].finished]
    result.asy.update(lost_shards=lost, partial=bool(lost), ring=ring,
                      wall_seconds=time.perf_counter() - start)
    return result


class _terminate_on:
    """SIGTERM raises KeyboardInterrupt while the run goes on, so the forked workers
    are ended and the CLI reports it like ^C (it runs in the main thread only)."""

    def __init__(self, signum):
        self.signum = signum

    def __enter__(self):
        self.previous = signal.signal(self.signum, self._raise)

    def __exit__(self, *exc):
        signal.signal(self.signum, self.previous)

    @staticmethod
    def _raise(signum, frame):
        raise KeyboardInterrupt

