"""The Asy-OS server's own cost per request, without the carriers or the kernels.

Runs ``asyos run --workers Q`` once in this process on a regression problem,
recording every request the server handled (worker, message) in order, then hands
the same requests to a fresh ``AsyServer`` again and again and reports the best time
per request.  The server is deterministic given the order of its requests, so the
replay makes the same replies; what it measures is ``AsyServer.handle``'s Python:
``ServerState``'s bookkeeping, the credit gate, adaptive budgets and the monitor.

    python benchmarks/server_replay.py [--n 1000] [--p 8192] [--s 64] [--workers 2]
                                       [--repeat 7]
"""

import argparse
import copy
import time

import numpy as np

from asyos.datasets import make_regression
from asyos.solvers.asy import AsyConfig
from asyos.solvers.asy_server import AsyServer
from asyos.streams import as_stream
from asyos.transport import shared


def record(args) -> dict:
    """One run's requests, and what its server was started with."""
    run = {"requests": []}
    handle, start = shared._Host.handle, AsyServer.start

    def recording_handle(host, t, message):
        run["requests"].append((t, copy.deepcopy(message)))
        return handle(host, t, message)

    def recording_start(server, n_features, eta, m):
        run.update(y=server.y.copy(), config=server.config, p=n_features, eta=eta, m=m)
        return start(server, n_features, eta, m)

    shared._Host.handle, AsyServer.start = recording_handle, recording_start
    try:
        problem = make_regression(p=args.p, s=args.s, n=args.n, seed=0)
        config = AsyConfig.build(args.s, args.workers, epochs=3, n_features=args.p)
        shared.run(as_stream(problem.X), problem.y, config)
    finally:
        shared._Host.handle, AsyServer.start = handle, start
    return run


def replay(run) -> float:
    server = AsyServer(run["y"], run["config"])
    server.start(run["p"], run["eta"], run["m"])
    begin = time.perf_counter()
    for t, message in run["requests"]:
        server.handle(t, message)
    return time.perf_counter() - begin


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--p", type=int, default=8192)
    parser.add_argument("--s", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    run = record(args)
    replay(run)   # warm
    best = min(replay(run) for _ in range(args.repeat))
    count = len(run["requests"])
    print(f"n = {args.n}, p = {args.p}, s = {args.s}, q = {args.workers}: {count} "
          f"requests, best of {args.repeat} replays {1e3 * best:.1f} ms, "
          f"{1e6 * best / count:.1f} µs per request")
    assert np.isfinite(best)


if __name__ == "__main__":
    main()
