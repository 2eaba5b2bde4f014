"""Round-trip latency and pushes per second of the two transports, side by side in one run.

A worker process and a server process exchange the messages Asy-OS moves, encoded by
``asyos.transport.wire`` as the real carriers encode them: a ``messages.Push`` (a
batch of 8 feature indices, Δu of n float64, an empty kept set) answered by a
``messages.View`` (u_C, n float64).  For each n and each transport, after a short
warm-up:

* round trip: the worker sends one push and waits for its view, again and again for
  ``--seconds``; median and 90th percentile µs per round trip;
* pushes/s: the worker keeps up to ``--window`` pushes unanswered (Asy-OS's pipeline)
  and the server answers each with a view, for ``--seconds``; answered pushes per second.

A ``Final`` answered by ``Done`` ends each n.  MPI (``mpiexec -n 2``, rank 0 serves,
rank 1 works): each rank sends and polls through its own ``asyos.transport.mpi.Link``,
as ``mpi.serve`` and ``mpi.work`` do.  ZeroMQ: a ROUTER server and a DEALER worker in
two processes on tcp://127.0.0.1 send ``wire.encode`` frames, decoded and checked on
arrival, as ``asyos.transport.zeromq`` does.  The servers do no arithmetic: only moving
the messages is timed.  The script starts both transports' processes itself (MPI with
the ``mpiexec`` beside this Python), one transport after the other, and prints one
table.

    python benchmarks/transport.py [--sizes 1000 100000] [--seconds 1.5] [--window 8]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zmq

from asyos.solvers import messages
from asyos.transport import wire

RUN_ID, TAG = 0x5EED, 1        # ZeroMQ: every message's run id and configuration tag
BUDGET, BATCH = 64, 8          # the limits decode checks: s = 64 kept, batch of 8 steps
WARM_UP = 0.2                  # seconds of round trips before each n is measured
ANSWER_TIMEOUT_MS = 30_000     # a ZeroMQ worker gives up on a silent server
FEATURES = np.arange(BATCH, dtype=np.int64)        # the push's batch of steps
KEPT, WEIGHTS = np.zeros(0, np.int64), np.zeros(0)  # its kept set


# -- the messages, the same for both transports ----------------------------------------------
def push(seq: int, delta: np.ndarray) -> messages.Push:
    return messages.Push(seq, seq - 1, FEATURES, delta, KEPT, WEIGHTS,
                         np.abs(WEIGHTS), position=BATCH * seq, more=True)


def view(body: messages.Push, u: np.ndarray) -> messages.View:
    return messages.View(u, body.version + 1, body.seq, credit=BATCH * body.seq)


def final(seq: int, n: int) -> messages.Final:
    return messages.Final(seq, BATCH * seq, KEPT, WEIGHTS, np.zeros(n),
                          np.zeros((KEPT.size, n)))


def expect(body, kind: type) -> None:
    if not isinstance(body, kind):
        raise SystemExit(f"expected a {kind.__name__}, got {type(body).__name__}")


def limits(n: int, run_id: int = 0) -> wire.Limits:
    return wire.Limits(n, BUDGET, BATCH, run_id)


# -- the measurements, the same for both transports ------------------------------------------
def round_trips(link, seconds: float) -> list[float]:
    """Seconds of each push → view round trip, for ``seconds``."""
    times = []
    end = time.perf_counter() + seconds
    while (start := time.perf_counter()) < end:
        link.push()
        link.take()
        times.append(time.perf_counter() - start)
    return times


def pipelined(link, seconds: float, window: int) -> float:
    """Answered pushes per second with up to ``window`` of them unanswered."""
    sent = answered = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        if sent - answered == window:
            link.take()
            answered += 1
        link.push()
        sent += 1
    for _ in range(sent - answered):
        link.take()
    return sent / (time.perf_counter() - start)


def measure(link, n: int, args) -> dict:
    round_trips(link, WARM_UP)
    times = np.array(round_trips(link, args.seconds)) * 1e6
    rate = pipelined(link, args.seconds, args.window)
    link.final()
    return {"n": n, "rtt_median_us": float(np.median(times)),
            "rtt_p90_us": float(np.percentile(times, 90)), "round_trips": times.size,
            "pushes_per_s": rate}


# -- MPI -------------------------------------------------------------------------------------
def mpi_role(args) -> None:
    """Under ``mpiexec -n 2``: rank 0 serves each n in turn, rank 1 measures it."""
    import mpi4py
    from mpi4py import MPI

    from asyos.transport.base import NodeShare
    from asyos.transport.mpi import Link

    comm = MPI.COMM_WORLD
    if comm.Get_size() != 2:
        raise SystemExit("--role mpi needs exactly 2 ranks (mpiexec -n 2)")
    share = NodeShare.of(comm.Get_size())   # how long a waiting rank spins (mpi.run)

    def serve(n: int) -> None:
        """Answer each push with a view until the worker's Final (as ``mpi.serve``)."""
        u = np.random.default_rng(1).standard_normal(n)
        link = Link(comm, limits(n), share, in_flight=args.window + 1)
        while not isinstance(body := link.wait(1)[1].body, messages.Final):
            expect(body, messages.Push)
            link.send(view(body, u), 1, 0)
        link.send(messages.Done(), 1, 0)
        link.drain()

    class Worker:
        """Rank 1's side: pushes out, views back (like ``mpi.work``)."""

        def __init__(self, n: int):
            self.link = Link(comm, limits(n), share, in_flight=args.window + 1)
            self.delta = np.random.default_rng(0).standard_normal(n)
            self.n, self.seq = n, 0

        def push(self) -> None:
            self.seq += 1
            self.link.send(push(self.seq, self.delta), 0, 0)

        def take(self) -> None:
            expect(self.link.wait(0)[1].body, messages.View)

        def final(self) -> None:
            self.link.send(final(self.seq, self.n), 0, 0)
            expect(self.link.wait(0)[1].body, messages.Done)
            self.link.drain()

    if comm.Get_rank() == 0:
        for n in args.sizes:
            serve(n)
        return
    cases = [measure(Worker(n), n, args) for n in args.sizes]
    library = " ".join(MPI.Get_library_version().splitlines()[0].split())
    print(json.dumps({"library": f"mpi4py {mpi4py.__version__} ({library})",
                      "cases": cases}))


# -- ZeroMQ ----------------------------------------------------------------------------------
def zmq_server_role(args) -> None:
    """A ROUTER answering every push with a view until the worker's Final, for each n
    (like ``ZmqServer``: decode the frames after the identity, encode the answer)."""
    server = zmq.Context.instance().socket(zmq.ROUTER)
    server.linger = 5000                    # the last Done must get out
    server.bind(args.endpoint)
    for n in args.sizes:
        checked = limits(n, RUN_ID)
        u = np.random.default_rng(1).standard_normal(n)
        answer = None
        while not isinstance(answer, messages.Done):
            frames = server.recv_multipart(copy=False)
            envelope = wire.decode(frames[1:], checked)
            if isinstance(envelope.body, messages.Final):
                answer = messages.Done()
            else:
                expect(envelope.body, messages.Push)
                answer = view(envelope.body, u)
            server.send_multipart([frames[0].bytes, *wire.encode(
                answer, envelope.worker, run_id=RUN_ID, tag=TAG)])
    server.close()


def zmq_worker_role(args) -> None:
    """A DEALER measuring each n against the server at ``--endpoint`` (as
    ``ZmqWorker`` sends and receives)."""
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.linger = 0
    dealer.connect(args.endpoint)

    class Worker:
        def __init__(self, n: int):
            self.checked = limits(n, RUN_ID)
            self.delta = np.random.default_rng(0).standard_normal(n)
            self.n, self.seq = n, 0

        def send(self, message) -> None:
            dealer.send_multipart(wire.encode(message, 0, run_id=RUN_ID, tag=TAG),
                                  copy=False)

        def receive(self, kind: type) -> None:
            if not dealer.poll(ANSWER_TIMEOUT_MS):
                raise SystemExit(f"no answer from {args.endpoint} within "
                                 f"{ANSWER_TIMEOUT_MS / 1000:.0f} s")
            frames = dealer.recv_multipart(copy=False)
            expect(wire.decode(frames, self.checked).body, kind)

        def push(self) -> None:
            self.seq += 1
            self.send(push(self.seq, self.delta))

        def take(self) -> None:
            self.receive(messages.View)

        def final(self) -> None:
            self.send(final(self.seq, self.n))
            self.receive(messages.Done)

    cases = [measure(Worker(n), n, args) for n in args.sizes]
    dealer.close()
    print(json.dumps({"library": f"pyzmq {zmq.__version__} (libzmq {zmq.zmq_version()})",
                      "cases": cases}))


# -- the driver ------------------------------------------------------------------------------
def start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float) -> str:
    """Stdout of ``proc``; its whole process group is killed if it runs past ``timeout``."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise SystemExit(f"{' '.join(proc.args)} hung: killed after {timeout:.0f} s")
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(proc.args)} failed:\n{err}")
    return out


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_mpi(role: list[str], timeout: float) -> dict:
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
    return json.loads(finish(start([mpiexec, "-n", "2", *role, "mpi"]), timeout))


def run_zmq(role: list[str], timeout: float) -> dict:
    endpoint = ["--endpoint", f"tcp://127.0.0.1:{free_port()}"]
    server = start([*role, "zmq-server", *endpoint])
    try:
        result = json.loads(finish(start([*role, "zmq-worker", *endpoint]), timeout))
        finish(server, timeout)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.communicate()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100000],
                        help="float64 values of Δu and u_C per message")
    parser.add_argument("--seconds", type=float, default=1.5,
                        help="length of each measurement (round trips, then pushes/s)")
    parser.add_argument("--window", type=int, default=8,
                        help="most pushes unanswered while measuring pushes/s")
    parser.add_argument("--role", choices=["mpi", "zmq-server", "zmq-worker"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    args = parser.parse_args()
    roles = {"mpi": mpi_role, "zmq-server": zmq_server_role,
             "zmq-worker": zmq_worker_role}
    if args.role:
        return roles[args.role](args)

    role = [sys.executable, str(Path(__file__).resolve()), "--sizes",
            *map(str, args.sizes), "--seconds", str(args.seconds), "--window",
            str(args.window), "--role"]
    timeout = 60 + 3 * len(args.sizes) * (WARM_UP + 2 * args.seconds)
    results = {"MPI": run_mpi(role, timeout), "ZeroMQ": run_zmq(role, timeout)}
    for name, result in results.items():
        print(f"{name:>6}: {result['library']}")
    print(f"{args.seconds:g} s per measurement; pushes/s with up to {args.window} "
          "unanswered")
    print(f"{'transport':>9} {'n':>7} {'RTT median us':>14} {'RTT p90 us':>11} "
          f"{'pushes/s':>9}  ZeroMQ/MPI (RTT, pushes/s)")
    for i, n in enumerate(args.sizes):
        mpi, zero = (results[name]["cases"][i] for name in ("MPI", "ZeroMQ"))
        for name, case in (("MPI", mpi), ("ZeroMQ", zero)):
            ratio = "" if case is mpi else (
                f"{zero['rtt_median_us'] / mpi['rtt_median_us']:.1f}x, "
                f"{zero['pushes_per_s'] / mpi['pushes_per_s']:.2f}x")
            print(f"{name:>9} {n:>7} {case['rtt_median_us']:>14.1f} "
                  f"{case['rtt_p90_us']:>11.1f} {case['pushes_per_s']:>9.0f}  "
                  f"{ratio}".rstrip())


if __name__ == "__main__":
    main()
