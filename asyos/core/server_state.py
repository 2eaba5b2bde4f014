"""The Asy-OS central server (Yang et al., KDD 2016, Algorithm 2) as a transport-free
state machine; the staleness rule is described in docs/architecture.md.

The server holds u_C (length n), the clock (the number of OS steps applied) and, per
worker, what it has been granted, sent and pushed.  Every carrier (the simulator, MPI,
ZeroMQ) feeds it the same requests through ``solvers.asy_server.AsyServer``; none of
them touches u_C.

**Bounded staleness, enforced, at pipeline speed** (stale-synchronous-parallel style).
The staleness of a step is the number of *other* workers' steps applied to u_C between
the view it was computed from and its own application (a worker always sees its own
steps).  A worker may only push steps it holds *credit* for; credit comes with a view,
and a step that spends a grant's credit is computed from that grant's view or a newer
one.  For every worker t holding unspent credit, let V_t be the view of its oldest
unspent grant; the server keeps

    others' steps applied since V_t  +  Σ_{u≠t} unspent credit of u   ≤   τ,

since the others can apply no more than their credit before t's steps land.  A grant
of k steps to worker r raises the second term of every other holder by k, so it is
made only where it fits (first come, first served; at least one step); pushes never
wait, and credit always drains, so the rule cannot deadlock.  Each worker holds at most
``depth`` steps of credit: the pipeline (steps a worker may take before the answer to
its push arrives).  τ = None: no bound, every grant is a full top-up.

With closing sweeps (``hold_sweeps``) a worker is granted no credit past its passes
until every worker's passes are over, nor past a round of its sweep until every
worker's round is: the sweeps then all score the same, fitted residual.
"""

from collections import deque
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from ..errors import AsyosError, InputError
from .budgets import AdaptiveBudgets

PASSES_AHEAD = 1   # ``ServerState.bound_passes``: how far a worker may run ahead


@njit(cache=True, fastmath={"reassoc"})
def all_finite(values, least=-np.inf) -> bool:
    """Whether every value is finite (and ≥ ``least``): no temporaries; the server
    checks every n-vector and kept set it receives.  Finiteness is summed, not
    tested value by value (value·0 is NaN exactly where value is not finite, and
    reassociating the sum only lets it run in vector lanes): a loop that returns
    early is not vectorised, and this is a pass over every Δu a push brings (5×
    faster at n = 10⁵)."""
    poisoned = 0.0
    for i in range(values.shape[0]):
        poisoned += values[i] * 0.0
    if not poisoned == 0.0:
        return False
    if least > -np.inf:
        for i in range(values.shape[0]):
            if values[i] < least:
                return False
    return True


@njit(cache=True)
def apply_push(u, applied, delta) -> None:
    """u += Δu and the worker's Σ Δu += Δu in one pass over the three."""
    for i in range(delta.shape[0]):
        u[i] += delta[i]
        applied[i] += delta[i]


def _exposure(record, clock: int, total: int) -> int:
    """``ServerState.exposure`` of ``record`` (it holds credit) at ``clock``, with
    ``total`` the workers' unspent credit summed: a function, not a method, because
    the gate works it out for every holder at every push."""
    oldest = record.grants[0]
    unspent = record.credit - record.pushes
    return (clock - oldest.version) - (record.pushes - oldest.own) + total - unspent


class ProtocolError(AsyosError):
    """A request that breaks the protocol (unknown worker, wrong order, bad payload).

    Raised before any state changes; carriers report it (MPI ends the job, ZeroMQ
    resynchronises the worker).
    """


class NotARequest(ProtocolError):
    """A message that no worker sends to the server (a VIEW, a CONFIG...) was handed
    to it: dropped, and nothing changes.  Its own class, so that a real ``TypeError``
    inside the server is a bug that surfaces, not a message that was dropped."""


class NonFiniteUpdate(ProtocolError, InputError):
    """A worker's push or kept set holds NaN or inf: its steps diverged (the data's
    scale or the step size).  Every carrier ends the run with this one line (exit 2):
    resending or resynchronising would compute the same numbers again."""


class DuplicatePush(ProtocolError):
    """A push whose sequence number was already applied (a resend): never reapplied."""


class OutOfOrderPush(ProtocolError):
    """A push that skips sequence numbers (one before it was lost): it waits for the
    worker's resend of the missing ones, in order."""


@dataclass
class Grant:
    """Credit sent with one view: steps computed from that view or a newer one."""

    version: int   # the clock when the view was sent
    own: int       # the worker's steps applied then
    upto: int      # the worker's cumulative credit after this grant


@dataclass
class SentView:
    """A view sent to a worker, which its pushes may name."""

    version: int
    own: int             # the worker's steps applied then
    budget: int | None   # the budget granted with it (adaptive budgets)


@dataclass
class WorkerRecord:
    """What the server knows of one worker (shard).

    ``applied`` is the sum of its applied Δu, so u_C = Σ_t applied_t always; with
    ``selected``/``weights``/``position`` (its last acknowledged kept set and how many
    features it has processed) a replacement can resume exactly where it stopped.
    """

    applied: np.ndarray
    credit: int = 0                     # steps granted, cumulative
    pushes: int = 0                     # steps applied
    messages: int = 0                   # pushes applied = the last sequence number
    position: int = 0
    finished: bool = False
    lost: bool = False
    given_up: bool = False              # lost, and no replacement is waited for
    selected: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    weights: np.ndarray = field(default_factory=lambda: np.zeros(0))
    importance: np.ndarray = field(default_factory=lambda: np.zeros(0))  # ≥ 0
    contribution: np.ndarray | None = None   # X_S w_S as reported at the end ...
    columns: np.ndarray | None = None        # ... and X_Sᵀ (k × n), for the refit
    staleness: list = field(default_factory=list)
    grants: deque = field(default_factory=deque)   # Grant, oldest unspent first
    sent: deque = field(default_factory=deque)     # SentView its next push may name

    @property
    def unspent(self) -> int:
        return self.credit - self.pushes


class ServerState:
    """u_C, the clock and the credit gate for q workers (ids 0..q-1).

    ``staleness``: the bound τ (None: none); ``depth``: the most credit a worker holds;
    ``batch``: the most steps in one push.
    """

    def __init__(self, n_samples: int, n_workers: int, staleness: int | None = None,
                 depth: int = 1, batch: int = 1):
        if min(depth, batch) < 1 or batch > depth:
            raise InputError(f"depth {depth}, batch {batch}: 1 ≤ batch ≤ depth")
        self.u = np.zeros(n_samples)
        all_finite(self.u)   # compiled (or loaded from cache) now, not in the first push
        all_finite(self.u, 0.0)
        self.clock = 0
        self.tau = staleness
        self.depth, self.batch = depth, batch
        self.workers = [WorkerRecord(np.zeros(n_samples)) for _ in range(n_workers)]
        self._waiting: deque[int] = deque()
        self._finished = 0
        self._lost = 0
        self.budgets: AdaptiveBudgets | None = None   # adaptive budgets, when on
        self.pass_ends: list[int] | None = None   # ``hold_sweeps``: each one's passes
        self.round_size, self.rounds = 0, 1   # ``hold_sweeps``: the sweeps' rounds
        self._rounds_open = 0   # barriers opened: 0 before every worker's passes end
        self.pass_sizes: list[int] | None = None  # ``bound_passes``: each one's shard
        # bumped by every change a worker's limit depends on; ``_floor`` is computed
        # once per revision, so a push's gate reads each worker's limit in O(1)
        self._revision, self._floor_of = 0, (-1, None)

    # -- checks -----------------------------------------------------------------------
    def _running(self, worker: int) -> WorkerRecord:
        """The record of a known worker that has not finished."""
        if not (isinstance(worker, (int, np.integer)) and 0 <= worker < len(self.workers)):
            raise ProtocolError(f"unknown worker {worker!r}")
        record = self.workers[worker]
        if record.finished:
            raise ProtocolError(f"worker {worker} has already finished")
        return record

    def _record(self, worker: int) -> WorkerRecord:
        record = self._running(worker)
        if record.lost:
            raise ProtocolError(f"worker {worker} was declared lost; it must rejoin")
        return record

    def _vector(self, worker: int, name: str, values) -> np.ndarray:
        values = np.asarray(values)
        if values.dtype != np.float64 or values.shape != self.u.shape:
            raise ProtocolError(f"worker {worker}: {name} must be float64 of length "
                                f"{self.u.size}, got {values.dtype} {values.shape}")
        if not all_finite(values):
            raise NonFiniteUpdate(f"worker {worker}: {name} contains NaN or inf (its "
                                  "steps diverged: try a smaller --eta, or "
                                  "--standardize)")
        return values

    # -- the credit gate --------------------------------------------------------------
    def _others_since(self, record: WorkerRecord, version: int, own: int) -> int:
        """Other workers' steps applied since a view (``own``: this one's steps then)."""
        return (self.clock - version) - (record.pushes - own)

    def exposure(self, worker: int, total: int | None = None) -> int:
        """The staleness worker's unspent credit may still reach: others' steps since
        its oldest unspent grant plus everything the others may still push (0 when it
        holds no credit).  The gate keeps it ≤ τ.  ``total``: Σ unspent of all
        workers, when the caller has it."""
        record = self.workers[worker]
        if record.unspent <= 0:
            return 0
        if total is None:
            total = sum(r.unspent for r in self.workers)
        return _exposure(record, self.clock, total)

    # -- the closing sweeps' barrier --------------------------------------------------
    def hold_sweeps(self, ends, round_size: int = 0, rounds: int = 1) -> None:
        """Let no worker's closing sweep begin before every worker's passes are over:
        ``ends[t]``, the steps of worker t's passes (its shard's size times the
        epochs).  Until then a worker is granted no credit past its passes, so the
        view that lets it sweep is one that holds every worker's passes: a sweep
        scores its shard against the residual of the fitted passes, not of a worker
        still fitting its own (a worker that ran ahead, as a lone rank on a shared
        core can, otherwise swept against a residual the others had not fitted yet;
        docs/architecture.md, "The sweeps' barrier").  A finished worker holds no
        one back, nor a lost one given up (``lose(may_return=False)``, ``give_up``);
        one that may still rejoin does: the others' sweeps would score a residual
        that its shard's features have not fitted, and kept noise that correlated
        with them in place of weak true features.

        ``rounds`` > 1: each worker's sweep comes in rounds of ``round_size`` steps
        (``core.sweep.sweep_rounds``), and round k + 1 waits the same way for every
        worker's round k (its steps to ``ends[t] + (k + 1)·round_size``; a worker
        whose round found fewer ends its sweep and finishes): each round scores a
        residual that holds the others' newcomers of the round before."""
        ends = self._per_worker(ends, "pass ends")
        if round_size < 0 or rounds < 1:
            raise InputError(f"sweeps in {rounds} rounds of {round_size} steps")
        self.pass_ends = ends
        self._revision += 1
        self.round_size, self.rounds = int(round_size), int(rounds)

    def bound_passes(self, sizes) -> None:
        """Let no worker run more than ``PASSES_AHEAD`` passes ahead of another that
        may still step: ``sizes[t]``, the features of worker t's shard.  A worker
        is granted no credit past the end of the pass after the one the slowest
        other is in (a finished worker, or a lost one given up, holds no one).

        The staleness bound limits how old a view is, not how far a worker's passes
        run ahead of another's, and a worker that has no credit (one that has not
        started, or is lost) holds no one's gate: a worker on a cut link did not
        start before another ran all four of its passes alone.  Those passes fit its
        shard against a residual that still held the missing shard's signal; it
        kept noise correlated with that signal in place of weak true features of its
        own, and had no pass left to fit once the missing worker came back (a
        network partition lost two true features of 20).  Bounded, it keeps its
        later passes for then.  It costs a fast worker no time where the slow one
        finishes: the run waits for the slow one's remaining passes anyway (the
        sweeps' barrier, ``hold_sweeps``); a worker that is lost and given up
        (``give_up``) releases the others."""
        self.pass_sizes = self._per_worker(sizes, "shard sizes")
        self._revision += 1

    def _per_worker(self, values, what: str) -> list[int]:
        """``values`` as a list of ints, one per worker, or InputError naming
        ``what`` (nothing set)."""
        values = [int(value) for value in values]
        if len(values) != len(self.workers):
            raise InputError(f"{len(values)} {what} for {len(self.workers)} workers")
        return values

    def _floor(self) -> tuple[int | None, int, int | None]:
        """What every worker's limit is read from, once per change (a push's gate asks
        each waiting worker's: O(q²) a push at q = 64 when each limit looked at every
        other worker): the lowest pass any worker that may still step is in, how
        many are in it, and the next lowest (``bound_passes``); and the sweeps'
        barriers opened so far (``hold_sweeps``)."""
        revision, floor = self._floor_of
        if revision == self._revision:
            return floor
        low, count, second = None, 0, None
        if self.pass_sizes is not None:
            for r, size in zip(self.workers, self.pass_sizes):
                if size == 0 or r.finished or r.given_up:
                    continue
                index = r.pushes // size
                if low is None or index < low:
                    low, count, second = index, 1, low
                elif index == low:
                    count += 1
                elif second is None or index < second:
                    second = index
        while self.pass_ends is not None and self._rounds_open < self.rounds:
            offset = self._rounds_open * self.round_size
            if not all(r.finished or r.given_up or r.pushes >= end + offset
                       for r, end in zip(self.workers, self.pass_ends)):
                break
            self._rounds_open += 1
        floor = (low, count, second)
        self._floor_of = (self._revision, floor)
        return floor

    def _passes_left(self, worker: int) -> int | None:
        """The credit ``worker`` may still get before the next of the sweeps'
        barriers opens or the slowest other worker's pass moves on (None: neither
        holds it).  Under ``bound_passes`` that is the end of the pass after the
        lowest pass of the others."""
        low, count, second = self._floor()   # (and opens the barriers reached)
        record, limit = self.workers[worker], None
        size = 0 if self.pass_sizes is None else self.pass_sizes[worker]
        if size:
            alone = count == 1 and not (record.finished or record.given_up) and \
                record.pushes // size == low
            others = second if alone else low
            if others is not None:
                limit = (others + 1 + PASSES_AHEAD) * size
        if self.pass_ends is not None and self._rounds_open < self.rounds:
            barrier = self.pass_ends[worker] + self._rounds_open * self.round_size
            limit = barrier if limit is None else min(limit, barrier)
        return None if limit is None else limit - record.credit

    def at_barrier(self, worker: int) -> bool:
        """Whether ``worker`` has applied every step it may take for now and waits:
        at the sweeps' barrier for the others' passes (``hold_sweeps``), or a pass
        ahead of the slowest other worker (``bound_passes``)."""
        left = self._passes_left(worker)
        return left is not None and left <= 0 and self.workers[worker].unspent <= 0

    def _grantable(self, worker: int) -> int:
        """How many steps of credit ``worker`` may be granted now (0: it waits)."""
        record = self.workers[worker]
        wanted = self.depth - record.unspent
        left = self._passes_left(worker)
        if left is not None:
            wanted = min(wanted, left)
        if self.tau is None or wanted <= 0:
            return max(wanted, 0)
        records = self.workers
        total = sum(r.credit - r.pushes for r in records)
        if total - records[worker].unspent > self.tau:   # its own new view could not hold
            return 0
        clock, room = self.clock, wanted
        for t, r in enumerate(records):
            if t != worker and r.credit > r.pushes:
                room = min(room, self.tau - _exposure(r, clock, total))
        return max(room, 0)

    def request(self, worker: int) -> list[int]:
        """``worker`` asks for a view and credit; returns the workers to send a view
        now (``view``), in order."""
        self._record(worker)
        if worker not in self._waiting:
            self._waiting.append(worker)
        return self._grant()

    def _grant(self) -> list[int]:
        """Answer the waiting workers that can be answered now.

        Credit goes first come, first served: behind a worker that must wait for
        credit, the others wait too.  A worker that still holds credit is answered at
        once, with new credit if it fits or a fresh view without: it can go on
        stepping, and a view of its that was lost must not leave its credit (which
        holds the others' gate) unknown to it.  A worker held at the sweeps'
        barrier (``hold_sweeps``) holds no credit and is passed over until it opens.
        """
        granted, blocked = [], False
        for worker in list(self._waiting):
            record = self.workers[worker]
            if blocked and record.unspent <= 0:   # waits, at a barrier or behind one
                continue
            if self.at_barrier(worker):   # at the sweeps' barrier: no one waits behind it
                continue
            k = 0 if blocked else self._grantable(worker)
            if k <= 0 and record.unspent <= 0:
                blocked = True
                continue
            self._waiting.remove(worker)
            if k > 0:
                record.credit += k
                record.grants.append(Grant(self.clock, record.pushes, record.credit))
            granted.append(worker)
        return granted

    def is_waiting(self, worker: int) -> bool:
        """True while ``worker``'s request waits for credit."""
        return worker in self._waiting

    def view(self, worker: int, grant: bool = True
             ) -> tuple[np.ndarray, int, int, int, int | None]:
        """(u_C, version, pushes applied, cumulative credit, budget granted) to send
        to ``worker`` now; records it as a view its pushes may name.

        u_C itself, not a copy: the carrier copies it into its message at once.
        Under adaptive budgets the view grants a budget (``AdaptiveBudgets.grant``), unless
        ``grant`` is False (the simulator offers every version, granting at steps);
        else the budget is None.
        """
        record = self.workers[worker]
        granted = self.budgets.grant(worker) if self.budgets is not None and grant \
            else None
        record.sent.append(SentView(self.clock, record.pushes, granted))
        return self.u, self.clock, record.messages, record.credit, granted

    def _view_used(self, record: WorkerRecord, worker: int, version, steps) -> SentView:
        """The view a push was computed from, checked, not trusted: sent to this
        worker, and no older than the grants whose credit the push spends (so the
        staleness bound covers it).  Nothing changes here."""
        fewest = 0 if self.budgets is not None else 1
        if not (isinstance(steps, (int, np.integer)) and fewest <= steps <= self.batch):
            raise ProtocolError(f"worker {worker} pushed {steps!r} steps in one message; "
                                f"{fewest} to {self.batch} allowed")
        if steps > record.unspent:
            raise ProtocolError(f"worker {worker} pushed {steps} steps with credit for "
                                f"{record.unspent}")
        newest = None
        for grant in record.grants:   # the grant holding the push's last step
            if grant.upto >= record.pushes + steps:
                newest = grant
                break
        for sent in record.sent:
            if sent.version == version and (newest is None or version >= newest.version):
                return sent
        raise ProtocolError(f"worker {worker} pushed from view {version!r}, which it "
                            "was not sent or may no longer use")

    def push(self, worker: int, delta, version: int, steps: int = 1,
             seq: int | None = None, kept=None, ask: bool = False
             ) -> tuple[int, list[int]]:
        """Apply Δu from ``worker``: the summed change of ``steps`` OS steps, all
        computed from view ``version`` plus its own steps.

        ``seq`` (carriers that may lose or repeat messages): the push's sequence
        number, 1, 2, ... per worker; an applied one raises DuplicatePush, a gap
        OutOfOrderPush, so each push is applied at most once and in order.  ``kept``:
        (selected, weights, position[, importance]) of the worker after these steps,
        its resume state and what adaptive budgets rank (default |w|).  ``ask``: the
        push also asks for a view, as ``request`` then would, in the same pass of the
        gate (the waiting workers before it come first either way, and one the push's
        grants left waiting would wait again).  Returns (their staleness, workers to
        send a view now).
        """
        record, used, kept = self._checked(worker, version, steps, seq, kept)
        delta = self._vector(worker, "delta", delta)
        apply_push(self.u, record.applied, delta)
        return self._count(worker, record, used, steps, kept, ask), self._grant()

    def push_bundle(self, pushes, delta) -> tuple[list[int], list[int]]:
        """Apply the pushes of a node's leader: ``pushes`` = (worker, version, steps,
        seq, kept, ask) as ``push`` takes them, of distinct workers, in the order they
        reached the leader, and ``delta`` their Δu summed.  They count as that many
        pushes in that order (the clock, each step's staleness, the credit spent), u_C
        moves once by their sum, and the gate is passed once, after the last: the
        views it grants are of u_C with all of them.  Every push is checked before
        anything changes, so a bad one leaves the state as it was.  The sum is added
        to the first worker's Σ Δu: under a leader only a node's sum is known (a
        leader's death is its node's).  Returns (each push's staleness, workers to
        send a view now)."""
        workers = [entry[0] for entry in pushes]
        if not workers or len(set(workers)) != len(workers):
            raise ProtocolError(f"a bundle must hold pushes of distinct workers, got "
                                f"{workers}")
        checked = [self._checked(worker, version, steps, seq, kept)
                   for worker, version, steps, seq, kept, _ in pushes]
        delta = self._vector(workers[0], "the bundle's delta", delta)
        apply_push(self.u, checked[0][0].applied, delta)
        staleness = [self._count(entry[0], record, used, entry[2], kept, entry[5])
                     for entry, (record, used, kept) in zip(pushes, checked)]
        return staleness, self._grant()

    def _checked(self, worker: int, version: int, steps: int, seq, kept):
        """A push's record, the view it used and its kept set, checked: nothing
        changes here."""
        record = self._record(worker)
        if seq is not None and seq <= record.messages:
            raise DuplicatePush(f"worker {worker}: push {seq} was already applied")
        if seq is not None and seq != record.messages + 1:
            raise OutOfOrderPush(f"worker {worker}: push {seq} skips "
                                f"{record.messages + 1}")
        used = self._view_used(record, worker, version, steps)
        if kept is not None:
            kept = self._kept(worker, *kept[:2]) + (int(kept[2]), self._importance(
                worker, kept[3] if len(kept) > 3 else np.abs(kept[1]), kept[0]))
        return record, used, kept

    def _count(self, worker: int, record: WorkerRecord, used: SentView, steps: int,
               kept, ask: bool) -> int:
        """A checked push's bookkeeping, its Δu applied: the clock, the credit it
        spent, the views it retires; returns its staleness."""
        staleness = self._others_since(record, used.version, used.own)
        if kept is not None:
            record.selected, record.weights, record.position, record.importance = kept
        self.clock += steps
        record.pushes += steps
        self._revision += 1
        record.messages += 1
        record.staleness.extend([staleness] * steps)
        while record.grants and record.grants[0].upto <= record.pushes:
            record.grants.popleft()
        while record.sent[0] is not used:   # views are used in order: older expire
            record.sent.popleft()
        if ask and worker not in self._waiting:
            self._waiting.append(worker)
        return staleness

    def _kept(self, worker: int, selected, weights) -> tuple[np.ndarray, np.ndarray]:
        """Copies of a kept set (carriers reuse their receive buffers), checked."""
        selected = np.array(selected, dtype=np.int64)
        weights = np.array(weights, dtype=np.float64)
        if selected.shape != weights.shape or selected.ndim != 1:
            raise ProtocolError(f"worker {worker}: {selected.size} indices but "
                                f"{weights.size} weights")
        if not all_finite(weights):
            raise NonFiniteUpdate(f"worker {worker}: weights contain NaN or inf (its "
                                  "steps diverged: try a smaller --eta, or "
                                  "--standardize)")
        if self.budgets is not None and selected.size > self.budgets.held(worker):
            raise ProtocolError(f"worker {worker} keeps {selected.size} features, over "
                                f"the {self.budgets.held(worker)} it may hold")
        return selected, weights

    def _importance(self, worker: int, importance, selected) -> np.ndarray:
        """A copy of a kept set's importance, checked: one finite value ≥ 0 each."""
        importance = np.array(importance, dtype=np.float64)
        if importance.shape != np.shape(selected) or not all_finite(importance, 0.0):
            raise ProtocolError(f"worker {worker}: the importance of its kept set must "
                                f"be {np.size(selected)} finite values ≥ 0")
        return importance

    def _release(self, worker: int, record: WorkerRecord) -> None:
        """``worker`` will spend no more credit: what it holds goes back."""
        record.credit = record.pushes
        record.grants.clear()
        if worker in self._waiting:
            self._waiting.remove(worker)

    def finish(self, worker: int, selected, weights, contribution,
               columns=None) -> list[int]:
        """A worker's final (S(t), w(t), X_S(t) w_S(t)) and, where it sends them, its
        kept columns X_S(t)ᵀ (``final_columns``): sent exactly once, at the end.  Its
        unspent credit returns; returns the workers to send a view now."""
        record = self._record(worker)
        selected, weights = self._kept(worker, selected, weights)
        contribution = self._vector(worker, "contribution", contribution)
        if columns is not None and np.size(columns) == 0 and selected.size:
            columns = None   # not sent (``messages.COLUMNS_LIMIT``)
        if columns is not None:
            columns = np.array(columns, dtype=np.float64)
            if columns.shape != (selected.size, self.u.size) or \
                    not all_finite(columns.ravel()):
                raise ProtocolError(f"worker {worker}: its kept columns must be "
                                    f"{selected.size} × {self.u.size} finite values")
        record.contribution, record.columns = contribution.copy(), columns
        worth = dict(zip(record.selected.tolist(), record.importance.tolist()))
        record.selected, record.weights = selected, weights
        # as its last push ranked them (``AdaptiveBudgets.closing_cut``)
        record.importance = np.array([worth.get(j, 0.0) for j in selected.tolist()])
        record.finished = True
        self._finished += 1
        self._revision += 1
        self._release(worker, record)
        if self.budgets is not None:   # its unused slots go back to the others
            self.budgets.released(worker, selected.size)
        return self._grant()

    # -- adaptive budgets ---------------------------------------------------------------
    def adapt_budgets(self, s: int) -> None:
        """Let the workers' budgets follow their weights (``core.budgets``): re-granted
        with every view from the global top s of the importance they push."""
        self.budgets = AdaptiveBudgets(s, self.workers)

    # -- workers that come and go (ZeroMQ) ----------------------------------------------
    def lose(self, worker: int, may_return: bool = True) -> list[int]:
        """``worker`` is gone (no heartbeat, or its process exited:
        ``may_return=False``): its unspent credit is revoked, so it no longer holds
        the gate; its last acknowledged state stays.  Until it rejoins or is given up
        (``give_up``) it still holds the sweeps' barrier (``hold_sweeps``).  Returns
        the workers to send a view now."""
        record = self._record(worker)
        self._release(worker, record)
        record.lost, record.given_up = True, not may_return
        self._lost += 1
        self._revision += 1
        return self._grant()

    def give_up(self, worker: int) -> list[int]:
        """No replacement for lost ``worker`` is waited for any longer: it no longer
        holds the sweeps' barrier.  Returns the workers to send a view now."""
        record = self._running(worker)
        if not record.lost:
            raise ProtocolError(f"worker {worker} is not lost")
        record.given_up = True
        self._revision += 1
        return self._grant()

    def rejoin(self, worker: int) -> WorkerRecord:
        """A replacement (or the same worker, resynchronised) takes over: it resumes
        from the returned record (selected, weights, position, messages = its last
        sequence number, pushes = its steps), holding no credit."""
        record = self._running(worker)
        if record.lost:
            record.lost = record.given_up = False
            self._revision += 1
            self._lost -= 1
        self._release(worker, record)
        return record

    # -- the end ----------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """Every worker finished (or was lost: see ``lost_workers``)."""
        return self._finished + self._lost == len(self.workers)

    @property
    def lost_workers(self) -> list[int]:
        return [t for t, r in enumerate(self.workers) if r.lost]

    def assemble(self, worth=None) -> tuple[np.ndarray, np.ndarray, float]:
        """Final w (sorted indices, weights) and max |u_C − Σ_t X_S(t) w_S(t)|.

        A lost worker counts with its last acknowledged kept set (less its surplus
        over s: ``AdaptiveBudgets.lost_cut``) and the Δu the server applied for it.
        Where the closing sweeps grew, the kept sets are cut to the global top s
        first (``AdaptiveBudgets.closing_cut``; lost workers' included), ranked by
        ``worth(indices, weights)`` of all the kept features where it gives one (a
        joint fit: ``ServerMonitor.result``), else by the importance each worker
        last pushed.  A lost or doubled push shows up as a large difference:
        callers fail on it.
        """
        if not self.done:
            missing = [t for t, r in enumerate(self.workers) if not r.finished]
            raise ProtocolError(f"workers {missing} have not finished")
        kept = [(r.selected, r.weights, r.importance) for r in self.workers]
        if self.budgets is not None and self.budgets.grow:   # the global top s
            ranked = None if worth is None else worth(
                np.concatenate([k[0] for k in kept]), np.concatenate([k[1] for k in kept]))
            if ranked is not None:
                splits = np.cumsum([k[0].size for k in kept])[:-1]
                kept = [(k[0], k[1], r) for k, r in zip(kept, np.split(ranked, splits))]
            kept = [tuple(a[at] for a in k) for k, at in
                    zip(kept, self.budgets.closing_cut(kept))]
        for t, size in (self.budgets.lost_cut() if self.budgets else {}).items():
            record = self.workers[t]
            strongest = np.sort(np.argsort(-record.importance, kind="stable")[:size])
            kept[t] = (record.selected[strongest], record.weights[strongest],
                       record.importance[strongest])
        selected = np.concatenate([k[0] for k in kept])
        weights = np.concatenate([k[1] for k in kept])
        if np.unique(selected).size != selected.size:
            raise ProtocolError("workers' selected sets overlap")
        total = np.sum([r.applied if r.lost else r.contribution for r in self.workers],
                       axis=0)
        order = np.argsort(selected, kind="stable")
        return selected[order], weights[order], float(np.max(np.abs(self.u - total)))

    def final_columns(self, selected) -> np.ndarray | None:
        """X_Sᵀ (k × n) of the assembled ``selected``, from the workers' final
        reports; None when a column was not reported (a lost worker's)."""
        rows = {}
        for record in self.workers:
            if record.columns is not None:
                rows.update(zip(record.selected.tolist(), record.columns))
        if not all(j in rows for j in selected.tolist()):
            return None
        return np.array([rows[j] for j in selected.tolist()]).reshape(-1, self.u.size)

    def staleness_stats(self) -> dict:
        """Max, mean and histogram of the staleness of every step, and the bound."""
        values = np.concatenate([np.asarray(r.staleness, dtype=np.int64)
                                 for r in self.workers]) if self.workers else np.zeros(0)
        if values.size == 0:
            return {"max": 0, "mean": 0.0, "histogram": [], "bound": self.tau}
        return {"max": int(values.max()), "mean": float(values.mean()),
                "histogram": np.bincount(values).tolist(), "bound": self.tau}

    # -- checkpoints ----------------------------------------------------------------------
    def snapshot(self) -> dict[str, np.ndarray]:
        """Plain arrays (saved without pickle) from which ``restore`` rebuilds the state.

        Credit and views in flight are not kept: after a restart every worker
        resynchronises and asks again.
        """
        records = self.workers
        n = self.u.size
        return {
            "u": self.u.copy(), "clock": np.array(self.clock, dtype=np.int64),
            "settings": np.array([-1 if self.tau is None else self.tau, self.depth,
                                  self.batch], dtype=np.int64),
            "counts": np.array([[r.pushes, r.messages, r.position, r.finished, r.lost]
                                for r in records], dtype=np.int64).reshape(-1, 5),
            "applied": np.array([r.applied for r in records]).reshape(-1, n),
            "contribution": np.array([np.zeros(n) if r.contribution is None
                                      else r.contribution for r in records]).reshape(-1, n),
            "kept_sizes": np.array([r.selected.size for r in records], dtype=np.int64),
            "reported": np.array([r.columns is not None for r in records], np.int64),
            "columns": np.concatenate([r.columns for r in records
                                       if r.columns is not None] + [np.zeros((0, n))]),
            "selected": np.concatenate([r.selected for r in records] + [np.zeros(0, np.int64)]),
            "weights": np.concatenate([r.weights for r in records] + [np.zeros(0)]),
            "importance": np.concatenate([r.importance for r in records] +
                                         [np.zeros(0)]),
            "staleness_sizes": np.array([len(r.staleness) for r in records], np.int64),
            "staleness": np.concatenate([np.asarray(r.staleness, np.int64) for r in records]
                                        + [np.zeros(0, np.int64)]),
            **(self.budgets.snapshot() if self.budgets is not None else {
                "s": np.array(-1, dtype=np.int64), "granted": np.zeros(0, np.int64),
                "final": np.full(len(records), -1, np.int64)}),
        }

    @classmethod
    def restore(cls, arrays) -> "ServerState":
        """The state ``snapshot`` saved (a mapping of arrays, e.g. an opened .npz)."""
        tau, depth, batch = (int(v) for v in arrays["settings"])
        counts = arrays["counts"]
        state = cls(arrays["u"].size, counts.shape[0], None if tau < 0 else tau,
                    depth, batch)
        state.u[:] = arrays["u"]
        state.clock = int(arrays["clock"])
        kept = np.cumsum(np.r_[0, arrays["kept_sizes"]])
        stale = np.cumsum(np.r_[0, arrays["staleness_sizes"]])
        reported = arrays["reported"] if "reported" in arrays else \
            np.zeros(counts.shape[0])   # a checkpoint of protocol 9: no columns
        columns = np.cumsum(np.r_[0, arrays["kept_sizes"] * (reported > 0)])
        for t, record in enumerate(state.workers):
            pushes, messages, position, finished, lost = (int(v) for v in counts[t])
            record.pushes, record.messages, record.position = pushes, messages, position
            record.credit = pushes
            record.finished, record.lost = bool(finished), bool(lost)
            record.applied[:] = arrays["applied"][t]
            if finished:
                record.contribution = arrays["contribution"][t].copy()
            record.selected = arrays["selected"][kept[t]:kept[t + 1]].copy()
            record.weights = arrays["weights"][kept[t]:kept[t + 1]].copy()
            record.importance = arrays["importance"][kept[t]:kept[t + 1]].copy()
            record.staleness = arrays["staleness"][stale[t]:stale[t + 1]].tolist()
            if reported[t]:
                record.columns = arrays["columns"][columns[t]:columns[t + 1]].copy()
        state._finished = sum(r.finished for r in state.workers)
        state._lost = sum(r.lost for r in state.workers)
        if "s" in arrays and int(arrays["s"]) >= 0:
            state.budgets = AdaptiveBudgets.restore(arrays, state.workers)
        return state
