"""A node's leader: one process per node between its workers and the server.

Without leaders every worker's push and view crosses the network on its own, so the
server's messages and bytes grow with the workers.  A leader (ps-lite's server groups;
Li et al., "Scaling Distributed Machine Learning with the Parameter Server", OSDI 2014)
gathers the pushes its node's workers made while it was busy, one per worker, and
sends them as one ``messages.Bundle`` with their Δu summed; the server answers with one
``messages.NodeView`` per node, u_C sent once, which the leader hands on.  So the
server's message rate and its bytes grow with nodes.

Nothing is decided here.  The server applies a bundle as its pushes one by one in the
order they reached the leader (``ServerState.push_bundle``): the clock, each step's
staleness and the credit spent are what they would be had the pushes come alone, and
the gate is passed once after the bundle, so the bound τ holds as before.

A bundle goes when every worker of the node still running has a push in it, or when
its first push has waited ``hold`` seconds: pushes of workers stepping side by side
arrive at random phases, and a leader that sent whatever it had at each moment
would send one push a bundle.  A push whose
worker already has one in the bundle starts the next bundle, and any other message
(a pull, a final report) is sent after the bundle before it, so every worker's
messages reach the server in the order it sent them.  Sans-I/O: the carrier moves the
messages and the n-vectors (``transport.mpi``).
"""

from collections.abc import Iterable

import numpy as np

from ..core.server_state import ProtocolError
from . import messages

EMPTY = np.zeros(0)


class NodeLeader:
    """The relay of ``workers`` (ids) to the server, for n-vectors of length ``n``;
    a bundle waits at most ``hold`` seconds for the node's other workers."""

    def __init__(self, workers: Iterable[int], n: int, hold: float = 0.0):
        self.workers = frozenset(int(t) for t in workers)
        self.hold = hold
        self._first = 0.0   # when the bundle's first push arrived
        self._pushes: list[tuple[int, messages.Push]] = []
        self._sum = np.zeros(n)
        self._done: set[int] = set()
        self.bundles = self.pushes = 0   # sent upward, for the results

    @property
    def finished(self) -> bool:
        """Every one of its workers was told DONE."""
        return len(self._done) == len(self.workers)

    def _check(self, worker: int) -> None:
        if worker not in self.workers:
            raise ProtocolError(f"worker {worker} is not one this leader relays "
                                f"({sorted(self.workers)})")

    def due(self, now: float) -> bool:
        """Whether the bundle should go now: every running worker has a push in it,
        or its first has waited ``hold`` seconds."""
        return bool(self._pushes) and (
            now - self._first >= self.hold or
            len(self._pushes) + len(self._done) >= len(self.workers))

    def from_worker(self, worker: int, body, now: float = 0.0
                    ) -> list[tuple[int, object]]:
        """A message of ``worker`` arrived at ``now`` (a push with its Δu in hand,
        which is added to the bundle's sum here: the caller may reuse its memory
        after): the (worker, message) pairs to send to the server now, in order."""
        self._check(worker)
        if isinstance(body, messages.Push):
            out = self.flush() if any(t == worker for t, _ in self._pushes) else []
            if not self._pushes:
                self._first = now
            self._sum += body.delta
            self._pushes.append((worker, messages.Push(
                body.seq, body.version, body.features, EMPTY, body.selected,
                body.weights, body.importance, body.position, body.more)))
            return out
        return self.flush() + [(worker, body)]

    def flush(self) -> list[tuple[int, object]]:
        """The pushes gathered so far as one bundle (nothing if none), under its first
        worker's id."""
        if not self._pushes:
            return []
        workers = np.array([t for t, _ in self._pushes], np.int64)
        bundle = messages.Bundle(workers, tuple(p for _, p in self._pushes),
                                 self._sum.copy())
        self.bundles += 1
        self.pushes += len(self._pushes)
        self._pushes.clear()
        self._sum[:] = 0.0
        return [(int(workers[0]), bundle)]

    def from_server(self, worker: int, body) -> list[tuple[int, object]]:
        """A message of the server for this node (``worker``: its header's id): the
        (worker, message) pairs to hand on.  A NodeView's u_C is the caller's to
        publish before it hands on the views (they carry none)."""
        if isinstance(body, messages.NodeView):
            pairs = list(zip(body.workers.tolist(), body.views, strict=True))
        elif isinstance(body, (messages.Ack, messages.Done)):
            pairs = [(worker, body)]
        else:
            raise ProtocolError(f"the server sent a leader a {type(body).__name__}")
        for t, message in pairs:
            self._check(t)
            if isinstance(message, messages.Done):
                self._done.add(t)
        return pairs
