"""How many pushes a second the Asy-OS server's data plane takes, in this process.

q synthetic workers flood one ``AsyServer`` with pushes that follow the protocol (a
worker pushes only from a view it was sent and within the credit it was granted,
each push a random Δu of ``--steps`` steps); no kernel runs, so what is timed is the
server's path for a push, split in its parts:

  decode     the push's frames to a message (``transport.wire.decode``: what MPI
             and ZeroMQ receive);
  handle     ``AsyServer.handle``: the checks, the staleness gate, u += Δu, the
             budgets' bookkeeping, the monitor;
  encode     the replies to frames (``transport.wire.encode``: a view carries u);
and beside them the physical floor at that n: numpy's ``u += Δu`` and a copy of u.
Each row is the best of ``--repeat`` rounds of ``--pushes`` pushes, q workers served
in turn.  The carriers' own costs (sockets, shared memory, MPI) come on top.

    python benchmarks/server_throughput.py [--n 1000 10000 100000] [--q 2 8 32 64]
        [--steps 16] [--pushes 2000] [--repeat 3] [--budget fixed adaptive]
"""

import argparse
import time

import numpy as np

from asyos.solvers import messages
from asyos.solvers.asy import AsyConfig
from asyos.solvers.asy_server import AsyServer
from asyos.transport import wire

FEATURES_PER_WORKER = 4096


class Flood:
    """q workers' protocol state against one server: each holds its newest view
    (version, cumulative credit) and its pushes so far."""

    def __init__(self, n: int, q: int, steps: int, seed: int = 0,
                 budget: str = "fixed"):
        p = q * FEATURES_PER_WORKER
        self.config = AsyConfig.build(4 * q, q, n_features=p, batch=steps,
                                      budget=budget, sweep=0, epochs=1000)
        rng = np.random.default_rng(seed)
        self.server = AsyServer(rng.standard_normal(n), self.config)
        self.server.start(p, 1.0, 1.0)
        self.delta = 1e-9 * rng.standard_normal(n)
        self.steps, self.q = steps, q
        self.version, self.credit = [None] * q, [0] * q
        self.pushed, self.seq = [0] * q, [0] * q
        self.limits = wire.Limits.of(self.config, n)
        for t in range(q):
            self.take(self.server.handle(t, messages.Pull()))

    def take(self, replies) -> None:
        for t, reply in replies:
            if isinstance(reply, messages.View):
                self.version[t], self.credit[t] = reply.version, reply.credit

    def next_push(self, t: int) -> messages.Push | None:
        """Worker t's next push, or None when it has no credit left (it then waits
        for a view the others' pushes release)."""
        steps = min(self.steps, self.credit[t] - self.pushed[t])
        if steps <= 0 or self.version[t] is None:
            return None
        self.pushed[t] += steps
        self.seq[t] += 1
        done = self.pushed[t] - steps   # features of its own shard, in turn
        features = t * FEATURES_PER_WORKER + (
            np.arange(done, done + steps, dtype=np.int64) % FEATURES_PER_WORKER)
        kept = np.array([t * FEATURES_PER_WORKER], dtype=np.int64)
        return messages.Push(self.seq[t], self.version[t], features, self.delta, kept,
                             np.ones(1), np.ones(1), self.pushed[t])


def timed_round(flood: Flood, pushes: int) -> dict:
    """``pushes`` pushes served in turn; the seconds of each part, summed."""
    seconds = dict.fromkeys(("decode", "handle", "encode"), 0.0)
    done, t = 0, 0
    idle = 0
    while done < pushes:
        worker, t = t, (t + 1) % flood.q
        push = flood.next_push(worker)
        if push is None:
            idle += 1
            if idle > flood.q:
                raise RuntimeError("every worker waits for credit: the flood stalled")
            continue
        idle = 0
        frames = [bytes(frame) for frame in wire.encode(push, worker)]
        start = time.perf_counter()
        message = wire.decode(frames, flood.limits).body
        decoded = time.perf_counter()
        replies = flood.server.handle(worker, message)
        handled = time.perf_counter()
        for to, reply in replies:
            wire.encode(reply, to)
        encoded = time.perf_counter()
        seconds["decode"] += decoded - start
        seconds["handle"] += handled - decoded
        seconds["encode"] += encoded - handled
        flood.take(replies)
        done += 1
    return seconds


def floor(n: int, repeat: int = 2000) -> tuple[float, float]:
    """Seconds of numpy's u += Δu and of a copy of u, at length n (best of 5)."""
    u, delta = np.zeros(n), np.ones(n)
    best_add = best_copy = np.inf
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            u += delta
        best_add = min(best_add, (time.perf_counter() - start) / repeat)
        start = time.perf_counter()
        for _ in range(repeat):
            u.copy()
        best_copy = min(best_copy, (time.perf_counter() - start) / repeat)
    return best_add, best_copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--q", type=int, nargs="+", default=[2, 8, 32, 64])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--pushes", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", nargs="+", default=["fixed", "adaptive"],
                        choices=["fixed", "adaptive"],
                        help="the budgets' rule (a run's default: adaptive)")
    args = parser.parse_args()
    print("| n | q | budgets | pushes/s | µs/push | decode | handle | encode | "
          "numpy u += Δu | copy of u |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in args.n:
        add, copy = floor(n)
        for q, budget in ((q, b) for q in args.q for b in args.budget):
            flood = Flood(n, q, args.steps, budget=budget)
            timed_round(flood, min(200, args.pushes))   # warm
            rounds = [timed_round(flood, args.pushes) for _ in range(args.repeat)]
            best = min(rounds, key=lambda r: sum(r.values()))
            per = {part: 1e6 * value / args.pushes for part, value in best.items()}
            total = sum(per.values())
            print(f"| {n} | {q} | {budget} | {1e6 / total:,.0f} | {total:.1f} | "
                  f"{per['decode']:.1f} | {per['handle']:.1f} | {per['encode']:.1f} | "
                  f"{1e6 * add:.2f} | {1e6 * copy:.2f} |", flush=True)


if __name__ == "__main__":
    main()
