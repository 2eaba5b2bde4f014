"""What every transport shares: polling that answers fast yet does not burn a core, a
process's share of its node (BLAS threads, whether it may spin), and the worker's side
of a carrier that delivers in order and loses nothing (MPI, shared memory)."""

import ctypes
import os
import signal
import time
from dataclasses import dataclass

from ..core.server_state import NonFiniteUpdate, ProtocolError
from ..errors import AsyosError, InputError
from ..solvers import messages


class WorkerFailed(AsyosError):
    """A worker process reported an exception, or broke the protocol: the carrier
    ends the run with its message.  ``bad_input``: the worker's exception was an
    ``InputError`` (a NaN in its shard, say), which exits with status 2 as it would
    in one process; anything else exits with 1."""

    def __init__(self, message: str, bad_input: bool = False):
        super().__init__(message)
        self.bad_input = bad_input

    @property
    def exit_status(self) -> int:
        return 2 if self.bad_input else 1


def handle_request(server, worker: int, message, who: str) -> list:
    """``AsyServer.handle`` on a carrier that loses nothing and keeps order (MPI,
    shared memory): a request that breaks the protocol can only come from a faulty
    worker, which ends the run (``WorkerFailed`` naming ``who``).  A non-finite
    update passes through: the data's, for the user to fix (exit status 2)."""
    try:
        return server.handle(worker, message)
    except NonFiniteUpdate:
        raise
    except ProtocolError as exc:
        raise WorkerFailed(f"{who}: {exc}") from None


PR_SET_PDEATHSIG = 1   # prctl(2)


def die_with_parent(parent: int) -> None:
    """End this process when ``parent`` (the process that started it) ends, however
    it ends, SIGKILL included: Linux's parent-death signal.  A worker left behind
    would wait minutes for a server that is gone.  Elsewhere a no-op."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):   # not Linux
        return
    if os.getppid() != parent:   # it ended before the signal was asked for
        os._exit(1)


def failure_report(exc: BaseException) -> bytes:
    """What a failing worker process sends to the server: whether it was bad input
    (one byte, b"2" or b"1"), then its exception's type and message."""
    flag = b"2" if isinstance(exc, InputError) else b"1"
    return flag + f"{type(exc).__name__}: {exc}".encode()


def reported_failure(who: str, report: bytes) -> WorkerFailed:
    """The ``WorkerFailed`` a ``failure_report`` from ``who`` stands for."""
    report = bytes(report)
    return WorkerFailed(f"{who}: {report[1:].decode(errors='replace')}",
                        bad_input=report[:1] == b"2")


class Backoff:
    """Wait between polls: yield the CPU for ``spin`` seconds, then sleep, doubling.

    Blocking MPI receives spin at 100 % CPU.  Polling with ``Iprobe``/``Test`` and this
    backoff (the pattern of mpi4py.futures) keeps a waiting rank's latency to a few
    microseconds while messages flow, and its CPU use near zero when idle (sleeps from
    ``start`` doubling up to ``cap`` seconds).  ``reset`` on traffic.  Spinning is only
    free with a core to spare: ``sched_yield`` does not hand a core to a busy process
    under Linux's fair scheduler, so on a full node ``NodeShare`` keeps ``spin`` short.
    """

    def __init__(self, spin: float = 1e-3, start: float = 2e-5, cap: float = 2e-4):
        self.spin, self.start, self.cap = spin, start, cap
        self.reset()

    def reset(self) -> None:
        self._since = None
        self._delay = self.start

    def sleep(self) -> None:
        now = time.perf_counter()
        if self._since is None:
            self._since = now
        if now - self._since < self.spin:
            os.sched_yield()
            return
        time.sleep(self._delay)
        self._delay = min(2.0 * self._delay, self.cap)


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, e.g. a batch job's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


SPARE_CORE_SPIN, FULL_NODE_SPIN = 1e-3, 5e-5   # seconds; measured, docs/benchmarks.md


@dataclass(frozen=True)
class NodeShare:
    """One of ``processes`` Asy-OS processes on a node: its BLAS threads and its polling.

    The OS kernel's gemvs (numba calls SciPy's OpenBLAS) start as many threads as the
    node has cores.  With several ranks per node those threads fight each other and
    the server, so each process takes ``cores // processes`` of them, the usual
    MPI+BLAS rule; an explicit ``threads`` wins.  A waiting process spins for long only
    when no process goes without a core; on a full node it spins briefly (an answer
    already on its way is caught without a sleep's latency) and then sleeps.  The
    measurements behind both rules are in docs/benchmarks.md ("Asy-OS over MPI").

    ``read_ahead``: whether a worker reads its next block in a thread while its kernel
    runs (``streams.prefetch``).  Only with a core to spare: on a node with a busy
    process per core the reading thread takes its core from a kernel, and the worker
    then waits for the GIL it holds (docs/benchmarks.md, "Reading ahead on a full
    node"), so there the worker reads between its pushes instead (``reading``).
    """

    threads: int
    spin_seconds: float
    read_ahead: bool = True

    @classmethod
    def of(cls, processes: int, threads: int | None = None,
           workers: int | None = None) -> "NodeShare":
        """The share of one of ``processes`` on this node, ``workers`` of which run
        kernels (default all; MPI's server rank mostly waits)."""
        cores = usable_cores()
        return cls(threads or max(1, cores // max(processes, 1)),
                   SPARE_CORE_SPIN if processes <= cores else FULL_NODE_SPIN,
                   read_ahead=(processes if workers is None else workers) < cores)

    def reading(self, stream):
        """``stream`` (a worker's shard) set to read ahead as this share allows."""
        stream.prefetch = self.read_ahead
        return stream

    def backoff(self) -> Backoff:
        return Backoff(spin=self.spin_seconds)

    def apply(self) -> None:
        """Limit this process's BLAS pools to ``threads`` (threadpoolctl).  A pool
        loaded later is not limited, and numba loads SciPy's BLAS when it compiles
        (a first run), so that one is loaded first."""
        import scipy.linalg.cython_blas  # noqa: F401
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=self.threads, user_api="blas")


def blas_threads_in_use() -> int:
    """The threads of this process's BLAS pools, as threadpoolctl reads them: what a
    worker reports in its results (the largest, if several libraries are loaded)."""
    import scipy.linalg.cython_blas  # noqa: F401
    from threadpoolctl import threadpool_info

    return max((pool["num_threads"] for pool in threadpool_info()
                if pool["user_api"] == "blas"), default=1)


def launched_by_mpi() -> bool:
    """True when started by mpiexec/mpirun with more than one process."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE"):
        value = os.environ.get(name)
        if value and value.isdigit() and int(value) > 1:
            return True
    return False



def carry_worker(link, driver, worker: int) -> None:
    """Carry worker ``worker``'s driver (``solvers.worker_loop.WorkerDriver``) over
    ``link`` to the server and back until it is done.  ``link``: ``send(message,
    dest, worker)``, ``poll(source)`` and ``wait(source)`` → (source, envelope) or
    None, ``drain()``; the server is source and destination 0.  Views are taken
    whenever they have arrived, the next push whenever the driver may step.  Its
    final report counts as communicating all its time outside the kernel and the
    reading of its blocks (the worker loop's own Python per push included), and
    apart the part of it blocked for a view or credit."""
    waited, began = 0.0, time.perf_counter()
    link.send(driver.start(), 0, worker)
    while True:
        while (received := link.poll(0)) is not None or driver.blocked:
            if received is None:   # blocked: waits for a view or credit
                blocked = time.perf_counter()
                received = link.wait(0)
                waited += time.perf_counter() - blocked
            driver.receive(received[1].body)
        if driver.ending:
            driver.advance()
            final = driver.final
            outside = time.perf_counter() - began - final.compute_seconds - \
                final.read_seconds
            link.send(driver.final_message(outside, blas_threads_in_use(), waited), 0,
                      worker)
            while not isinstance(link.wait(0)[1].body, messages.Done):
                pass
            link.drain()
            return
        if (push := driver.advance()) is not None:
            link.send(push, 0, worker)
