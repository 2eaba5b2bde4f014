"""The Asy-OS worker (spec §3.2, Algorithm 3): the only worker code, for every transport.

``worker_loop`` is a generator that yields requests and is sent replies, so it never
touches a socket or a communicator: the simulator, MPI and ZeroMQ drive it.

    request = next(loop)              # PULL
    request = loop.send((u_hat, v))   # Push(delta, version)
    request = next(loop)              # PULL again ... then Final(...)

Each iteration: pull û, one OS step of ``os_step`` on the worker's kept set plus its next
feature with gradients at û, push Δu = X_S(t) w_S(t) − (its previous contribution).
"""

import time
from dataclasses import dataclass

import numpy as np

from ..core.kept_set import KeptSet
from ..core.losses import Loss
from ..streams import FeatureStream

PULL = "pull"


@dataclass
class Push:
    delta: np.ndarray       # exact change of this worker's contribution to u_C
    version: int            # the version of u_C the step was computed from
    feature: int            # the feature this step processed (for replays and stats)


@dataclass
class Final:
    selected: np.ndarray
    weights: np.ndarray
    contribution: np.ndarray   # X_S(t) w_S(t): the server checks Σ_t of these = u_C
    steps: int
    compute_seconds: float


def worker_loop(stream: FeatureStream, y: np.ndarray, capacity: int, loss: Loss,
                eta: float, m: float, epochs: int):
    """Run OS on ``stream`` (this worker's shard) with a kept set of ``capacity``."""
    kept = KeptSet(stream.n_samples, capacity)
    previous = np.zeros(stream.n_samples)
    steps, compute = 0, 0.0
    for epoch in range(epochs):
        for block_index, block in stream.blocks(epoch):
            for j, x in zip(block_index, block):
                u_hat, version = yield PULL
                start = time.perf_counter()
                previous[:] = kept.contribution
                kept.step(j, x, u_hat, y, loss, eta, m)
                delta = kept.contribution - previous
                compute += time.perf_counter() - start
                steps += 1
                yield Push(delta, version, int(j))
    selected, weights = kept.selected()
    yield Final(selected, weights, kept.contribution.copy(), steps, compute)
