"""Round-trip latency and pushes per second of the two transports, side by side in one run.

A worker process and a server process exchange the messages Asy-OS moves: a push (a
header and Δu, n float64) answered by a view (a header and u_C, n float64).  For each
n and each transport, after a short warm-up:

* round trip: the worker sends one push and waits for its view, again and again for
  ``--seconds``; median and 90th percentile µs per round trip;
* pushes/s: the worker keeps up to ``--window`` pushes unanswered (Asy-OS's pipeline)
  and the server answers each with a view, for ``--seconds``; answered pushes per second.

MPI (``mpiexec -n 2``, rank 0 serves, rank 1 works) moves float64 buffers of 4 + n
values with the calls of ``asyos.transport.mpi``: ``Isend`` through a ``SendRing``,
``Irecv`` posted before the push, the server polling ``Iprobe`` with ``Backoff`` and
receiving with ``Recv``.  ZeroMQ runs a ROUTER server and a DEALER worker in two
processes on tcp://127.0.0.1, with ``asyos.transport.wire`` frames (a 48-byte header,
one feature index, Δu and an empty kept set; the view is the header and u_C), decoded
and checked on arrival like ``asyos.transport.zeromq`` does.  The servers do no
arithmetic: only moving the messages is timed.  The script starts both transports'
processes itself, one transport after the other, and prints one table.

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
from collections import deque
from pathlib import Path

import numpy as np
import zmq

from asyos.transport.base import Backoff
from asyos.transport.wire import MORE, Kind, Limits, decode, encode

RUN_ID = 0x5EED
BUDGET, BATCH = 64, 8          # the limits decode checks: s = 64 kept, batch of 8 steps
WARM_UP = 0.2                  # seconds of round trips before each n is measured
ANSWER_TIMEOUT_MS = 30_000     # a ZeroMQ worker gives up on a silent server


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

    from asyos.transport.mpi import FINAL_TAG, HEADER, PUSH_TAG, VIEW_TAG, SendRing

    comm = MPI.COMM_WORLD

    def wait(request) -> None:
        backoff = Backoff()
        while not request.Test():
            backoff.sleep()

    class Link:
        """Rank 1's side: Irecv the view, then Isend the push (like ``mpi.work``)."""

        def __init__(self, n: int):
            self.delta = np.random.default_rng(0).standard_normal(n)
            self.pushes = SendRing(comm, args.window + 1, HEADER + n)
            self.inbox = [np.empty(HEADER + n) for _ in range(args.window)]
            self.replies = deque()          # (Irecv request, buffer), oldest first
            self.seq = 0

        def push(self) -> None:
            buffer = self.inbox.pop()
            self.replies.append((comm.Irecv([buffer, MPI.DOUBLE], source=0, tag=VIEW_TAG),
                                 buffer))
            message = self.pushes.buffer()
            message[:HEADER] = 0, 1.0, self.seq, 0.0   # k = 0 features, more, version
            message[HEADER:] = self.delta
            self.pushes.send(message, message.size, 0, PUSH_TAG)
            self.seq += 1

        def take(self) -> None:
            request, buffer = self.replies.popleft()
            wait(request)
            self.inbox.append(buffer)

        def final(self) -> None:
            self.pushes.drain()
            comm.Send([np.zeros(HEADER), MPI.DOUBLE], dest=0, tag=FINAL_TAG)

    def serve(n: int) -> None:
        """Answer every push with a view until the worker's FINAL (like ``mpi.serve``)."""
        u = np.random.default_rng(1).standard_normal(n)
        buf = np.empty(HEADER + n)
        views = SendRing(comm, args.window + 1, HEADER + n)
        status, backoff = MPI.Status(), Backoff()
        while True:
            if not comm.Iprobe(source=1, tag=MPI.ANY_TAG, status=status):
                backoff.sleep()
                continue
            backoff.reset()
            tag = status.Get_tag()
            comm.Recv([buf, status.Get_count(MPI.DOUBLE), MPI.DOUBLE], source=1, tag=tag)
            if tag == FINAL_TAG:
                views.drain()
                return
            view = views.buffer()
            view[:HEADER] = buf[2], buf[2], 0.0, 0.0    # version, pushes applied
            view[HEADER:] = u
            views.send(view, view.size, 1, VIEW_TAG)

    if comm.Get_size() != 2:
        raise SystemExit("--role mpi needs exactly 2 ranks (mpiexec -n 2)")
    if comm.Get_rank() == 0:
        for n in args.sizes:
            serve(n)
        return
    cases = [measure(Link(n), n, args) for n in args.sizes]
    library = " ".join(MPI.Get_library_version().splitlines()[0].split())
    print(json.dumps({"library": f"mpi4py {mpi4py.__version__} ({library})",
                      "cases": cases}))


# -- ZeroMQ ----------------------------------------------------------------------------------
def zmq_server_role(args) -> None:
    """A ROUTER answering every PUSH with a VIEW until the worker's FINAL, for each n."""
    server = zmq.Context.instance().socket(zmq.ROUTER)
    server.linger = 0
    server.bind(args.endpoint)
    for n in args.sizes:
        limits = Limits(n=n, budget=BUDGET, batch=BATCH, run_id=RUN_ID)
        u = np.random.default_rng(1).standard_normal(n)
        while True:
            frames = server.recv_multipart(copy=False)
            identity, message = frames[0].bytes, decode(frames[1:], limits)
            if message.kind == Kind.FINAL:
                break
            server.send_multipart([identity, *encode(Kind.VIEW, message.worker, u,
                                                     run_id=RUN_ID, seq=message.seq,
                                                     a=message.a)])
    server.close()


def zmq_worker_role(args) -> None:
    """A DEALER measuring each n against the server at ``--endpoint``."""
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.linger = 5000                    # the last FINAL must get out
    dealer.connect(args.endpoint)

    class Link:
        """The worker's side, framed as ``ZmqWorker`` frames its pushes."""

        def __init__(self, n: int):
            self.limits = Limits(n=n, budget=BUDGET, batch=BATCH, run_id=RUN_ID)
            self.delta = np.random.default_rng(0).standard_normal(n)
            self.feature = np.zeros(1, dtype=np.int64)
            self.kept, self.weights = np.zeros(0, dtype=np.int64), np.zeros(0)
            self.seq = 0

        def push(self) -> None:
            dealer.send_multipart(encode(Kind.PUSH, 0, self.feature, self.delta,
                                         self.kept, self.weights, flags=MORE,
                                         run_id=RUN_ID, seq=self.seq, a=self.seq,
                                         b=self.seq), copy=False)
            self.seq += 1

        def take(self) -> None:
            if not dealer.poll(ANSWER_TIMEOUT_MS):
                raise SystemExit(f"no view from {args.endpoint} within "
                                 f"{ANSWER_TIMEOUT_MS / 1000:.0f} s")
            message = decode(dealer.recv_multipart(copy=False), self.limits)
            if message.kind != Kind.VIEW:
                raise SystemExit(f"expected a VIEW, got {message.kind.name}")

        def final(self) -> None:
            dealer.send_multipart(encode(Kind.FINAL, 0, self.kept, self.weights,
                                         self.delta, np.zeros(3), run_id=RUN_ID),
                                  copy=False)

    cases = [measure(Link(n), n, args) for n in args.sizes]
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
