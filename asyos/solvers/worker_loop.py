"""The Asy-OS worker (spec §3.2, Algorithm 3): the only worker code, for every transport.

``worker_loop`` is a generator that yields requests and is sent replies, so it never
touches a socket or a communicator: the simulator, MPI and ZeroMQ drive it.

    request = next(loop)              # PULL
    request = loop.send((u_hat, v))   # Push(delta, version, features)
    request = next(loop)              # PULL again ... then Final(...)

Each iteration: pull û, one OS step of ``os_step`` on the worker's kept set plus its next
feature with gradients at û, push Δu = X_S(t) w_S(t) − (its previous contribution).
With ``batch`` > 1 a push carries the sum of several such steps.
"""

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..core.kept_set import kept_set
from ..core.losses import Loss
from ..streams import FeatureStream

PULL = "pull"
SETTLE = "settle"   # a pull to answer with the newest view (every answer awaited)


@dataclass
class Push:
    delta: np.ndarray       # exact change of this worker's contribution to u_C
    version: int            # the version of u_C the steps were computed from
    features: np.ndarray    # the features these steps processed, in order (int64)
    selected: np.ndarray    # the kept set after them (int64) ...
    weights: np.ndarray     # ... and its weights: the worker's resume state
    position: int           # features processed so far (this push included)


@dataclass
class Final:
    selected: np.ndarray
    weights: np.ndarray
    contribution: np.ndarray   # X_S(t) w_S(t): the server checks Σ_t of these = u_C
    steps: int
    compute_seconds: float     # in the OS kernel
    read_seconds: float        # getting this worker's columns from its stream


class LocalView:
    """The û a worker steps from when it does not wait for every answer (spec §3.4).

    Each push (and the first pull) asks the server for a view of u_C; up to ``window``
    may be unanswered while the worker keeps stepping.  Pushes are numbered 1, 2, ...;
    a view says through which push it includes this worker's updates.  û is the
    newest view plus this worker's own pushes it does not include yet (staleness
    "others": a worker always sees its own pushes), so only the other workers' steps
    are stale, and the server records by how much.  A lost view is covered by the
    next one.  window 1: the worker waits for every answer, û is exactly the view.
    Transport-free: MPI and ZeroMQ call ``requested`` when they send and ``answered``
    when a view arrives.
    """

    def __init__(self, n_samples: int, window: int = 1, last_push: int = 0):
        self.window = window
        self.u_hat = np.zeros(n_samples)
        self.version = -1
        self.budget = None
        self.last_push = last_push
        self._unanswered: deque = deque()   # (push number, own Δu or None), in order

    @property
    def unanswered(self) -> int:
        return len(self._unanswered)

    @property
    def must_wait(self) -> bool:
        """No view yet, or ``window`` requests unanswered: the next step must wait."""
        return self.version < 0 or self.unanswered >= self.window

    def requested(self, delta: np.ndarray | None = None, answer: bool = True) -> int:
        """A request went out: a push of ``delta`` (numbered, returned), or a plain
        pull (None; answered by any view through the last push).  ``answer`` False:
        a last push that asks for no view."""
        if delta is not None:
            self.last_push += 1
            self.u_hat += delta
        if answer:
            self._unanswered.append((self.last_push, delta))
        return self.last_push

    def answered(self, u: np.ndarray, version: int, through: int,
                 budget: int | None = None) -> None:
        """A view arrived that includes this worker's pushes 1..``through`` (and,
        under adaptive budgets, the ``budget`` the server grants from now on)."""
        while self._unanswered and self._unanswered[0][0] <= through:
            self._unanswered.popleft()
        self.version = version
        self.budget = budget
        self.u_hat[:] = u
        for _, delta in self._unanswered:
            if delta is not None:
                self.u_hat += delta

    def current(self) -> tuple:
        """The reply to the worker loop's pull: (û, version[, budget])."""
        if self.budget is None:
            return self.u_hat, self.version
        return self.u_hat, self.version, self.budget


def worker_loop(stream: FeatureStream, y: np.ndarray, capacity: int, loss: Loss,
                eta: float, m: float, epochs: int, batch: int = 1, resume=None,
                groups=None, settle: bool = False):
    """Run OS on ``stream`` (this worker's shard) with a kept set of ``capacity``.

    Each pull is followed by up to ``batch`` steps (one compiled call; after the first,
    each step also sees this worker's own earlier steps) and one push of their sum.
    ``resume``: (selected, weights, position) of a worker this one replaces — its
    kept set and the number of features it had processed.  ``groups``:
    (group_of, s2_t) for group-aware OS (issue 8), at most s2_t groups kept.

    A reply to a pull is (û, version) or, under adaptive budgets (issue 5),
    (û, version, budget): the worker keeps at most ``budget`` ≤ ``capacity`` features
    from then on, dropping its smallest at once when it was lowered (that change is
    part of the next push, so u_C = Σ_t X_S(t) w_S(t) still holds).  ``settle``
    (transports whose views arrive after the worker has moved on): one last pull after
    the last step, ``SETTLE``, which the transport answers with the newest view once
    every request is answered, then a push of no steps that shrinks the kept set to
    that view's budget (Δu = 0 when it fits), so the final kept set respects the last
    budget the server granted and the server's pull is answered.
    """
    n = stream.n_samples
    kept, blocks = kept_set(stream, capacity, groups)
    u_local, before = np.zeros(n), np.zeros(n)
    steps, compute, read = 0, 0.0, [0.0]
    first_epoch, skip = 0, 0
    if resume is not None:
        selected, weights, steps = resume
        kept.load(np.asarray(selected, np.int64), stream.columns(selected),
                  np.asarray(weights, np.float64))
        first_epoch, skip = divmod(steps, max(stream.n_features, 1))
    for epoch in range(first_epoch, epochs):
        for block_index, block in _timed(blocks(epoch), read):
            if skip:   # a resumed worker passes over what its predecessor processed
                block_index, block, skip = block_index[skip:], block[skip:], \
                    max(skip - block_index.size, 0)
            for first in range(0, block_index.size, batch):
                features = block_index[first:first + batch]
                u_hat, version, *budget = yield PULL
                start = time.perf_counter()
                u_local[:] = u_hat
                before[:] = kept.contribution
                if budget:
                    kept.set_limit(budget[0])
                    u_local += kept.contribution - before   # its own change, seen
                kept.run_local(features, block[first:first + batch], u_local, y, loss,
                               eta, m)
                delta = kept.contribution - before
                compute += time.perf_counter() - start
                steps += features.size
                yield Push(delta, version, features.copy(), *kept.selected(), steps)
    if settle:
        _, version, *budget = yield SETTLE
        before[:] = kept.contribution
        if budget:
            kept.set_limit(budget[0])
        yield Push(kept.contribution - before, version, np.zeros(0, np.int64),
                   *kept.selected(), steps)
    selected, weights = kept.selected()
    yield Final(selected, weights, kept.contribution.copy(), steps, compute, read[0])


def _timed(items, seconds: list):
    """Yield from ``items``, adding the time spent producing them to ``seconds[0]``."""
    iterator = iter(items)
    while True:
        start = time.perf_counter()
        item = next(iterator, None)
        seconds[0] += time.perf_counter() - start
        if item is None:
            return
        yield item
