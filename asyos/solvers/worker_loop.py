"""The Asy-OS worker (Yang et al., KDD 2016, Algorithm 3): the only worker code, for
every carrier.

``worker_loop`` is a generator that yields requests and is sent replies, so it never
touches a socket or a communicator; ``WorkerDriver`` turns it into protocol messages
(``solvers.messages``), which the simulator, MPI and ZeroMQ carry:

    driver = WorkerDriver(worker_loop(...), n)
    send(driver.start())                  # Pull
    while not driver.finished:
        if driver.blocked: driver.receive(wait_for_a_view())
        else: send(driver.advance())      # Push ..., then Final (None: nothing)

Each iteration: one OS step of ``os_step`` on the worker's kept set plus its next
feature with gradients at û, push Δu = X_S(t) w_S(t) − (its previous contribution).
A push carries the sum of up to ``batch`` steps, as many as the worker's credit allows.
"""

import math
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..core.kept_set import RULES, kept_set, warm_up
from ..core.losses import Loss
from ..core.server_state import ProtocolError
from ..core.sweep import ClosingSweep
from ..streams import FeatureStream
from . import messages

PULL = "pull"


@dataclass(frozen=True)
class WorkerPlan:
    """What one Asy-OS worker runs besides its shard and the labels: made once by
    ``AsyConfig.plan`` for every carrier, and what ZeroMQ's CONFIG carries (integers
    as int64, the rest as float64: ``ints``/``floats``, checked by ``received``).

    ``capacity``: the most features its kept set holds; ``batch``: the most steps in
    one push, ``adaptive_push``: fewer when a push's cost allows (``PushSize``: real
    carriers with more than one worker); ``group_budget``: s2_t, the most groups it
    keeps (0: not group-aware); ``damping``, ``ridge``: the fitted rule's
    (``AsyConfig.damping``, ``fit_os``); ``sweep``: the arrivals of each round of its
    closing sweep (``core/sweep.py``; 0: none), ``sweep_rounds`` ≥ 1 its rounds."""

    capacity: int
    loss: Loss
    eta: float
    m: float
    epochs: int
    batch: int = 1
    rule: str = "auto"
    damping: float = 1.0
    ridge: float | None = None
    adaptive_push: bool = False
    group_budget: int = 0
    sweep: int = 0
    sweep_rounds: int = 1

    INTS = ("capacity", "loss", "epochs", "batch", "rule", "adaptive_push",
            "group_budget", "sweep", "sweep_rounds")
    FLOATS = ("eta", "m", "damping", "ridge")

    def ints(self) -> np.ndarray:
        return np.array([self.capacity, int(self.loss), self.epochs, self.batch,
                         RULES.index(self.rule), int(self.adaptive_push),
                         self.group_budget, self.sweep, self.sweep_rounds],
                        dtype=np.int64)

    def floats(self) -> np.ndarray:
        return np.array([self.eta, self.m, self.damping,
                         0.0 if self.ridge is None else self.ridge], dtype=np.float64)

    @classmethod
    def received(cls, ints, floats) -> "WorkerPlan":
        """The plan a CONFIG carries; a ``ProtocolError`` naming what is out of
        range (the server sent what no server sends)."""
        capacity, loss, epochs, batch, rule, adaptive, groups, sweep, rounds = \
            (int(v) for v in ints)
        eta, m, damping, ridge = (float(v) for v in floats)
        if loss not in {int(code) for code in Loss}:
            raise ProtocolError(f"CONFIG names loss {loss}")
        if rule not in range(len(RULES)):
            raise ProtocolError(f"CONFIG names substitution rule {rule}; known: "
                             f"0..{len(RULES) - 1}")
        if min(capacity, epochs, batch, rounds) < 1 or min(groups, sweep) < 0 or \
                adaptive not in (0, 1):
            raise ProtocolError(f"CONFIG names capacity {capacity}, epochs {epochs}, "
                             f"batch {batch}, group budget {groups}, adaptive "
                             f"{adaptive}, sweep {sweep} in {rounds} rounds")
        if not (eta > 0 and m >= 1 and 0 < damping <= 1 and ridge >= 0 and
                all(math.isfinite(v) for v in (eta, m, ridge))):
            raise ProtocolError(f"CONFIG names eta {eta!r}, m {m!r}, damping "
                             f"{damping!r}, ridge {ridge!r}")
        return cls(capacity, Loss(loss), eta, m, epochs, batch, RULES[rule], damping,
                   None if ridge == 0.0 else ridge, bool(adaptive), groups, sweep,
                   rounds)


@dataclass
class Steps:
    """What a run of steps yields (the carrier's PUSH is made from it)."""

    delta: np.ndarray       # exact change of this worker's contribution to u_C
    version: int            # the version of u_C the steps were computed from
    features: np.ndarray    # the features these steps processed, in order (int64)
    selected: np.ndarray    # the kept set after them (int64) ...
    weights: np.ndarray     # ... and its weights: the worker's resume state
    importance: np.ndarray  # ... and their worth (``KeptSet.importance``)
    position: int           # features processed so far (this push included)
    swaps: int | None = None   # its substitutions, where the rule counts them


@dataclass
class Finish:
    """What the loop ends with (the carrier's FINAL is made from it)."""

    selected: np.ndarray
    weights: np.ndarray
    contribution: np.ndarray   # X_S(t) w_S(t): the server checks Σ_t of these = u_C
    columns: np.ndarray        # X_S(t)ᵀ (float64), for the server's joint refit
    #                            ((0, n) past ``messages.COLUMNS_LIMIT``)
    steps: int
    compute_seconds: float     # in the OS kernel
    read_seconds: float        # getting this worker's columns from its stream


class LocalView:
    """The û a worker steps from, and the credit it may spend.

    û is the newest view plus this worker's own pushes that view does not include yet
    (staleness counts only the other workers' steps: a worker always sees its own).
    Credit arrives with views, cumulative (a lost or repeated view does no harm); the
    worker steps only while it holds some, which is how the server bounds staleness
    without making it wait for every answer (docs/architecture.md).
    """

    def __init__(self, n_samples: int, last_push: int = 0, steps: int = 0):
        self.u_hat = np.zeros(n_samples)
        self.version = -1
        self.budget = 0      # the budget the last view granted (0: none)
        self.eta = 0.0       # the server's η, once it sends one (it only shrinks)
        self.last_push = last_push
        self.credit = self.spent = steps
        self._own: deque = deque()   # (push number, its Δu) not in the view yet

    @property
    def allowed(self) -> int:
        return self.credit - self.spent

    @property
    def may_step(self) -> bool:
        return self.version >= 0 and self.allowed > 0

    def pushed(self, delta: np.ndarray, steps: int) -> int:
        """A push of ``steps`` steps went out; returns its number."""
        self.last_push += 1
        self.spent += steps
        self.u_hat += delta
        self._own.append((self.last_push, delta))
        return self.last_push

    def answered(self, view: messages.View) -> None:
        """A view arrived (an older one than the last, reordered, only adds credit)."""
        self.credit = max(self.credit, view.credit)
        if view.eta > 0:
            self.eta = view.eta if self.eta == 0 else min(self.eta, view.eta)
        if view.version < self.version:
            return
        while self._own and self._own[0][0] <= view.through:
            self._own.popleft()
        self.version, self.budget = view.version, view.budget
        self.u_hat[:] = view.u
        for _, delta in self._own:
            self.u_hat += delta

    def current(self) -> tuple:
        """The reply to the worker loop's pull: (û, version, steps allowed, budget
        granted or 0, η in force or 0)."""
        return self.u_hat, self.version, self.allowed, self.budget, self.eta


class PushSize:
    """How many steps a worker's next push takes: as few as keep the time it spends
    outside its kernel per push (sending, the server's bookkeeping, waiting for a
    view) under 1/``RATIO`` of the kernel's time for the push, and at most ``batch``
    (the server's limit; the worker's credit limits it too).  Fewer steps per push
    mean fresher views; a push's fixed cost, some 100 µs of Python on the server and
    the worker, must still be paid for by enough steps (docs/benchmarks.md, "Asy-OS
    against sequential OS on one machine").  ``adaptive`` False: always ``batch``."""

    RATIO = 10
    SMOOTHING = 0.25   # weight of the newest push in the running means

    def __init__(self, batch: int, adaptive: bool = True):
        self.batch, self.adaptive = batch, adaptive
        self.size = batch            # until a push was timed
        self._per_step = self._outside = None

    def timed(self, steps: int, kernel: float, outside: float) -> None:
        """A push of ``steps`` steps took ``kernel`` seconds, and ``outside`` seconds
        passed between it and the previous push's end."""
        if not self.adaptive or steps <= 0:
            return
        per_step = kernel / steps
        if self._per_step is None:
            self._per_step, self._outside = per_step, outside
        else:
            a = self.SMOOTHING
            self._per_step += a * (per_step - self._per_step)
            self._outside += a * (outside - self._outside)
        wanted = self.RATIO * self._outside / max(self._per_step, 1e-9)
        self.size = int(min(self.batch, max(1, np.ceil(wanted))))


def worker_loop(stream: FeatureStream, y: np.ndarray, plan: WorkerPlan, resume=None,
                groups=None):
    """Run OS on ``stream`` (this worker's shard) as ``plan`` says.

    Each pull is answered by (û, version, allowed, granted, η) and followed by up to
    min(``batch``, allowed) steps (a compiled call per block they cover; after the
    first, each step also sees this worker's own earlier steps) and one push of their
    sum;
    ``adaptive_push``: fewer steps when a push's cost outside the kernel allows
    (``PushSize``: the real carriers with more than one worker; a lone worker's views
    are its own steps, and fresher ones would gain nothing).  ``granted`` > 0
    (a budget granted under adaptive budgets): keep at most that many features from
    now on, dropping the smallest at once when it was lowered (the change is part of
    the next push, so u_C = Σ_t X_S(t) w_S(t) still holds).  η > 0: the server's step
    size from now on (it shrinks it when a push raised the loss), else ``eta``.
    After its passes, ``plan.sweep`` > 0: its closing sweep (``core/sweep.py``), the
    shard scored at its û and the best features it does not keep stepped once more,
    pushed like any other steps, in ``plan.sweep_rounds`` rounds, each scored at a
    new view (a round that finds fewer than ``plan.sweep`` ends the sweep).
    ``resume``: (selected, weights, position) of a worker this one replaces.
    ``groups``: (group_of, s2_t) for group-aware OS, at most s2_t groups kept.
    """
    n = stream.n_samples
    loss, eta, m, epochs = plan.loss, plan.eta, plan.m, plan.epochs
    kept, blocks = kept_set(stream, plan.capacity, groups, plan.rule, ridge=plan.ridge,
                            loss=loss, damping=plan.damping)
    warm_up(kept, asy=True)   # compiled before the first pull, not during it
    u_local, before = np.zeros(n), np.zeros(n)
    steps, compute, read = 0, 0.0, [0.0]
    size, pushed = PushSize(plan.batch, plan.adaptive_push), None
    first_epoch, skip = 0, 0
    if resume is not None:
        selected, weights, steps = resume
        kept.load(np.asarray(selected, np.int64), stream.columns(selected),
                  np.asarray(weights, np.float64))
        first_epoch, skip = divmod(steps, max(stream.n_features, 1))

    def arrivals(source, reply=None):
        """The steps over ``source``'s (features, block) pairs, a push at a time
        (``reply``: the answer to a pull already made, for its first push).

        A push of a fixed size (a lone worker's, ``asy.SOLO_BATCH``: two blocks) that
        ends a block goes on into the next, and past the end of a pass, from the same
        view: its fixed cost is paid per push, not per block.  An adaptive push
        (``PushSize``) ends with its block: its size is chosen anew at every push,
        and on one machine the host serves the other workers between its own pushes,
        which a block's end then also is (docs/benchmarks.md, "A lone worker's
        pushes")."""
        nonlocal compute, steps, pushed, u_local
        source = iter(source)
        block_index, first = np.zeros(0, np.int64), 0
        while True:
            while first >= block_index.size:
                item = next(source, None)
                if item is None:
                    return
                (block_index, block), first = item, 0
            u_hat, version, allowed, granted, eta_now = \
                (yield PULL) if reply is None else reply
            reply = None
            start, reading = time.perf_counter(), read[0]
            u_local[:] = u_hat
            before[:] = kept.contribution
            if granted:
                kept.set_limit(granted)
                u_local += kept.contribution - before   # its own change, seen
            room, features, swaps = min(size.size, allowed), [], []
            while True:
                last = min(first + room, block_index.size)
                swaps.append(kept.run_local(block_index, block, u_local, y, loss,
                                            eta_now or eta, m, first, last,
                                            fresh=not features))
                features.append(block_index[first:last])
                room, first = room - (last - first), last
                if room == 0 or size.adaptive or (item := next(source, None)) is None:
                    break
                (block_index, block), first = item, 0
            features = np.concatenate(features)
            delta = kept.contribution - before
            end = time.perf_counter()
            kernel = end - start - (read[0] - reading)   # a block read on the way
            compute += kernel
            size.timed(features.size, kernel, 0.0 if pushed is None else start - pushed)
            steps += features.size
            yield Steps(delta, version, features, *kept.selected(), kept.importance(),
                        steps, None if swaps[0] is None else sum(swaps))
            pushed = time.perf_counter()

    def passes():
        skip_left = skip   # a resumed worker passes over what its predecessor did
        for epoch in range(first_epoch, epochs):
            kept.start_epoch()
            for block_index, block in _timed(blocks(epoch), read):
                if skip_left:
                    block_index, block, skip_left = block_index[skip_left:], \
                        block[skip_left:], max(skip_left - block_index.size, 0)
                yield block_index, block

    yield from arrivals(passes())
    # the closing sweep's rounds, each at the û of a view that holds every worker's
    # steps before it (the server grants no credit past them before:
    # ``ServerState.hold_sweeps``); a worker resumed in its predecessor's sweep offers
    # what is left of it
    swept = max(0, steps - epochs * stream.n_features)
    first_round, done = divmod(swept, plan.sweep) if plan.sweep else \
        (plan.sweep_rounds, 0)
    for _ in range(first_round, plan.sweep_rounds):
        left, done = plan.sweep - done, 0
        reply = yield PULL
        start = time.perf_counter()
        candidates = ClosingSweep(stream, blocks, y, loss, left).arrivals(
            reply[0], kept.selected()[0], epochs - 1)
        read[0] += time.perf_counter() - start
        before_round = steps
        yield from arrivals(_timed(candidates, read), reply)
        if steps - before_round < left:   # fewer worth offering: no next round
            break
    selected, weights = kept.selected()
    columns = np.asarray(stream.columns(selected), dtype=np.float64) \
        if selected.size * n <= messages.COLUMNS_LIMIT else np.zeros((0, n))
    yield Finish(selected, weights, kept.contribution.copy(), columns, steps, compute,
                 read[0])


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


class Unacknowledged:
    """A worker's side of "nothing lost" over a carrier that may drop messages: its
    pushes the server has not acknowledged, and its final message, resent in order on
    a timeout until the server answers (it applies each push at most once, by its
    sequence number, and ignores a FINAL it has).  What is kept is the carrier's
    business (a message, or its encoded frames); this class only decides what is due.
    """

    def __init__(self):
        self._pushes: dict[int, object] = {}
        self.final = None

    def sent(self, seq: int, item) -> None:
        """Push ``seq`` went out as ``item``."""
        self._pushes[seq] = item

    def answered(self, message) -> None:
        """A VIEW or an ACK acknowledges every push up to its ``through``."""
        if isinstance(message, (messages.View, messages.Ack)):
            for seq in [s for s in self._pushes if s <= message.through]:
                del self._pushes[seq]

    def __bool__(self) -> bool:
        """Whether a push still waits for its acknowledgement."""
        return bool(self._pushes)

    def due(self, blocked: bool) -> list:
        """What to send again after a timeout: the final message once it is out,
        else the unacknowledged pushes in order and, when the worker is ``blocked``
        (it needs credit), a PULL, whose answer brings a view and credit."""
        if self.final is not None:
            return [self.final]
        return [self._pushes[seq] for seq in sorted(self._pushes)] + \
            ([messages.Pull()] if blocked else [])


class WorkerDriver:
    """One worker's side of the protocol, for every carrier: views in, requests out.

    ``last_push``/``steps``: where a resumed worker starts (its last push's number and
    the steps applied, which is also the credit it has spent).
    """

    def __init__(self, loop, n_samples: int, last_push: int = 0, steps: int = 0):
        self.loop = loop
        self.view = LocalView(n_samples, last_push, steps)
        self.request = next(loop)
        self.final: Finish | None = None
        self.swaps: int | None = None   # the substitutions of its last push's steps

    def start(self) -> messages.Pull:
        return messages.Pull()

    def receive(self, message) -> None:
        """A view (anything else is the carrier's business)."""
        if isinstance(message, messages.View):
            self.view.answered(message)

    @property
    def blocked(self) -> bool:
        """True while it needs a view or credit before its next step."""
        return self.request is PULL and not self.view.may_step

    @property
    def ending(self) -> bool:
        """Its last push is out: ``advance`` finishes it."""
        return isinstance(self.request, Finish)

    @property
    def finished(self) -> bool:
        return self.final is not None

    def advance(self):
        """Take the next steps: the push to send (None: it has finished, send
        ``final_message``; or, rarely, its last pull took no steps, a closing sweep
        with nothing to offer, and it is now ``ending``)."""
        if self.ending:
            self.final = self.request
            return None
        push = self.loop.send(self.view.current())
        if isinstance(push, Finish):
            self.request = push
            return None
        self.request = next(self.loop)
        self.swaps = push.swaps   # of these steps (None: not counted): the simulator's
        seq = self.view.pushed(push.delta, push.features.size)
        return messages.Push(seq, push.version, push.features, push.delta,
                             push.selected, push.weights, push.importance,
                             push.position, more=self.request is PULL)

    def final_message(self, communicate_seconds: float = 0.0,
                      blas_threads: int = 0, wait_seconds: float = 0.0
                      ) -> messages.Final:
        """Its final report; ``communicate_seconds``: its time outside the kernel,
        ``wait_seconds`` of which blocked for a view or credit."""
        final = self.final
        return messages.Final(self.view.last_push, final.steps, final.selected,
                              final.weights, final.contribution, final.columns,
                              np.array([final.compute_seconds, final.read_seconds,
                                        communicate_seconds, wait_seconds]),
                              blas_threads)
