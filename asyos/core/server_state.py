"""The Asy-OS central server (Yang et al., KDD 2016, Algorithm 2) as a transport-free
state machine; the staleness rule is described in docs/architecture.md.

The server holds u_C (length n), the clock (the number of OS steps applied) and, per
worker, what it has been granted, sent and pushed.  Every carrier (the simulator, MPI,
ZeroMQ) feeds it the same requests through ``solvers.asy_server.AsyServer``; none of
them touches u_C.  What a push does to that state (its checks, its bookkeeping, the
gate below) runs compiled over arrays of the workers' counters (``core.credit_gate``).

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

import numpy as np

from ..errors import AsyosError, InputError
from . import credit_gate as gate
from .budgets import AdaptiveBudgets
from .credit_gate import (
    BUDGET,
    CLOCK,
    CREDIT,
    DEPTH,
    FINISHED,
    GIVEN_UP,
    GRANT_COUNT,
    GRANT_HEAD,
    GRANTS_FULL,
    HOLD,
    LOST,
    MESSAGES,
    NO_BUDGET,
    NO_LIMIT,
    PASSES_AHEAD,
    OWN,
    PASS_END,
    PASS_SIZE,
    POSITION,
    PUSHES,
    ROUND_SIZE,
    ROUNDS,
    ROUNDS_OPEN,
    SENT_COUNT,
    SENT_HEAD,
    STALE_COUNT,
    TAU,
    UNBOUNDED,
    WAITING,
    all_finite,
    apply_push,
)

GRANT_SLOTS = 8    # a worker's grants' ring at first (it grows to ``depth`` at most)
VIEW_ROWS = 64     # a worker's views at first (retired rows are dropped when full)


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


DIVERGED = "(its steps diverged: try a smaller --eta, or --standardize)"


def _cell(array: str, index: int, kind=int):
    """A property read from and written to cell ``index`` of the owner's ``array``
    attribute: a worker's counters are its row of the server's table, the server's
    settings the gate's settings array."""
    def get(owner):
        return kind(getattr(owner, array)[index])

    def put(owner, value):
        getattr(owner, array)[index] = value
    return property(get, put)


class WorkerRecord:
    """What the server knows of one worker (shard): its counters are its row of the
    server's table (``core.credit_gate``), the rest lives here.

    ``applied`` is the sum of its applied Δu, so u_C = Σ_t applied_t always; with
    ``selected``/``weights``/``position`` (its last acknowledged kept set and how many
    features it has processed) a replacement can resume exactly where it stopped.
    """

    __slots__ = ("state", "worker", "row", "selected", "weights", "_importance",
                 "contribution", "columns")

    credit = _cell("row", CREDIT)           # steps granted, cumulative
    pushes = _cell("row", PUSHES)           # steps applied
    messages = _cell("row", MESSAGES)       # pushes applied = the last sequence number
    position = _cell("row", POSITION)
    finished = _cell("row", FINISHED, bool)
    lost = _cell("row", LOST, bool)
    given_up = _cell("row", GIVEN_UP, bool)   # lost, and no replacement is waited for

    def __init__(self, state: "ServerState", worker: int):
        self.state, self.worker = state, worker
        self.row = state.table[worker]   # its counters (a view of the table)
        self.selected = np.zeros(0, np.int64)   # its kept features
        self.weights = np.zeros(0)
        self.importance = np.zeros(0)   # ≥ 0
        self.contribution: np.ndarray | None = None   # X_S w_S as reported at the end
        self.columns: np.ndarray | None = None        # ... and X_Sᵀ (k × n), the refit

    @property
    def importance(self) -> np.ndarray:
        return self._importance

    @importance.setter
    def importance(self, importance: np.ndarray) -> None:
        self._importance = importance
        if self.state.budgets is not None:   # what they rank; its size is the kept
            # set's (``_kept`` and ``finish`` check it)
            self.state.budgets.rank(self.worker, importance)

    @property
    def applied(self) -> np.ndarray:
        return self.state.applied[self.worker]

    @property
    def unspent(self) -> int:
        return int(self.row[CREDIT] - self.row[PUSHES])

    @property
    def staleness(self) -> list[int]:
        """The staleness of each of its applied steps, in order."""
        return self.state.staleness_of(self.worker).tolist()


class ServerState:
    """u_C, the clock and the credit gate for q workers (ids 0..q-1).

    ``staleness``: the bound τ (None: none); ``depth``: the most credit a worker holds;
    ``batch``: the most steps in one push.  The workers' counters, grants, views and
    the waiting queue are arrays that the compiled gate (``core.credit_gate``)
    reads and updates; the methods here check what comes in and say what the
    rules mean.
    """

    def __init__(self, n_samples: int, n_workers: int, staleness: int | None = None,
                 depth: int = 1, batch: int = 1):
        if min(depth, batch) < 1 or batch > depth:
            raise InputError(f"depth {depth}, batch {batch}: 1 ≤ batch ≤ depth")
        gate.warm()   # compiled (or loaded from cache) now, not in the first push
        self.u = np.zeros(n_samples)
        self.applied = np.zeros((n_workers, n_samples))   # each worker's Σ Δu
        self.table = np.zeros((n_workers, gate.COLUMNS), np.int64)
        self.settings = np.zeros(gate.SETTINGS, np.int64)
        self.settings[ROUNDS] = 1
        self.grants = np.zeros((n_workers, 1, 3), np.int64)   # sized by ``depth``
        self.queue = np.zeros(n_workers, np.int64)   # the waiting workers, in order
        self._answered = np.zeros(n_workers, np.int64)   # the gate's answer
        self._sent = [np.zeros((VIEW_ROWS, 3), np.int64) for _ in range(n_workers)]
        self._staleness = [np.zeros(64, np.int64) for _ in range(n_workers)]
        self.tau, self.depth, self.batch = staleness, depth, batch
        self.budgets: AdaptiveBudgets | None = None   # adaptive budgets, when on
        self.workers = [WorkerRecord(self, t) for t in range(n_workers)]
        self._finished = 0
        self._lost = 0
        self._passes_bound = False   # ``bound_passes`` was called

    # -- settings ---------------------------------------------------------------------
    clock = _cell("settings", CLOCK)   # OS steps applied to u_C: its version
    batch = _cell("settings", gate.BATCH)

    @property
    def tau(self) -> int | None:
        tau = int(self.settings[TAU])
        return None if tau == UNBOUNDED else tau

    @tau.setter
    def tau(self, tau: int | None) -> None:
        self.settings[TAU] = UNBOUNDED if tau is None else tau

    @property
    def depth(self) -> int:
        return int(self.settings[DEPTH])

    @depth.setter
    def depth(self, depth: int) -> None:
        """A new depth (``AsyServer.start`` sizes the pipeline for p)."""
        self.settings[DEPTH] = depth
        self._grants_room(min(depth, GRANT_SLOTS))

    def _grants_room(self, slots: int | None = None) -> None:
        """The grants' ring with ``slots`` slots, or (by default) twice as many where
        a grant filled a worker's: each grant holds a step of credit at least, so a
        worker holds ``depth`` grants at most, and the gate adds at most one per
        worker before the next look here.  The unspent grants are kept in order."""
        if slots is None:
            if not self.settings[GRANTS_FULL]:
                return
            slots = min(2 * self.grants.shape[1], self.depth)
        self.settings[GRANTS_FULL] = 0
        counts = self.table[:, GRANT_COUNT]
        most = int(counts.max(initial=0))   # a ring at ``depth`` grants stays full
        slots = max(slots, most + 1 if most < self.depth else most, 1)
        if slots == self.grants.shape[1]:
            return
        grants = np.zeros((self.table.shape[0], slots, 3), np.int64)
        for t in range(self.table.shape[0]):
            grants[t, :counts[t]] = self.grants_of(t)
        self.grants = grants
        self.table[:, GRANT_HEAD] = 0

    # -- what the tables hold, read ---------------------------------------------------
    def grants_of(self, worker: int) -> np.ndarray:
        """``worker``'s unspent grants: rows (version: the clock when the view was
        sent, own: its steps applied then, upto: its cumulative credit after the
        grant), oldest first (a copy)."""
        head, count = self.table[worker, GRANT_HEAD], self.table[worker, GRANT_COUNT]
        slots = self.grants.shape[1]
        return self.grants[worker, (head + np.arange(count)) % slots]

    def views_of(self, worker: int) -> np.ndarray:
        """The views sent to ``worker`` that its next push may name: rows (version,
        own steps then, budget granted with it or NO_BUDGET), oldest first."""
        head, count = self.table[worker, SENT_HEAD], self.table[worker, SENT_COUNT]
        return self._sent[worker][head:head + count]

    def staleness_of(self, worker: int) -> np.ndarray:
        """The staleness of each step of ``worker`` applied, in order."""
        return self._staleness[worker][:self.table[worker, STALE_COUNT]]

    @property
    def waiting(self) -> list[int]:
        """The workers whose request waits for credit, in the order they asked."""
        return self.queue[:self.settings[gate.N_WAITING]].tolist()

    def is_waiting(self, worker: int) -> bool:
        """True while ``worker``'s request waits for credit."""
        return bool(self.table[worker, WAITING])

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

    def _shaped(self, worker: int, name: str, values) -> np.ndarray:
        """``values`` as float64 of length n, or ProtocolError naming ``name``."""
        values = np.asarray(values)
        if values.dtype != np.float64 or values.shape != self.u.shape:
            raise ProtocolError(f"worker {worker}: {name} must be float64 of length "
                                f"{self.u.size}, got {values.dtype} {values.shape}")
        return values

    def _vector(self, worker: int, name: str, values) -> np.ndarray:
        values = self._shaped(worker, name, values)
        if not all_finite(values):
            raise self._diverged(worker, name)
        return values

    @staticmethod
    def _diverged(worker: int, name: str) -> NonFiniteUpdate:
        return NonFiniteUpdate(f"worker {worker}: {name} contains NaN or inf {DIVERGED}")

    # -- the credit gate --------------------------------------------------------------
    def exposure(self, worker: int, total: int | None = None) -> int:
        """The staleness worker's unspent credit may still reach: others' steps since
        its oldest unspent grant plus everything the others may still push (0 when it
        holds no credit).  The gate keeps it ≤ τ.  ``total``: Σ unspent of all
        workers, when the caller has it."""
        if self.workers[worker].unspent <= 0:
            return 0
        if total is None:
            total = int(np.sum(self.table[:, CREDIT] - self.table[:, PUSHES]))
        return int(gate.exposure(self.table, self.grants, worker, self.settings[CLOCK],
                                 total))

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
        self.table[:, PASS_END] = ends
        self.settings[HOLD] = 1
        self.settings[ROUND_SIZE], self.settings[ROUNDS] = round_size, rounds

    @property
    def pass_ends(self) -> list[int] | None:
        return self.table[:, PASS_END].tolist() if self.settings[HOLD] else None

    @property
    def round_size(self) -> int:
        return int(self.settings[ROUND_SIZE])

    @property
    def rounds(self) -> int:
        return int(self.settings[ROUNDS])

    @property
    def rounds_open(self) -> int:
        """The sweeps' barriers opened so far: 0 before every worker's passes end."""
        return int(self.settings[ROUNDS_OPEN])

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
        self.table[:, PASS_SIZE] = self._per_worker(sizes, "shard sizes")
        self._passes_bound = True

    @property
    def pass_sizes(self) -> list[int] | None:
        return self.table[:, PASS_SIZE].tolist() if self._passes_bound else None

    def _per_worker(self, values, what: str) -> list[int]:
        """``values`` as a list of ints, one per worker, or InputError naming
        ``what`` (nothing set)."""
        values = [int(value) for value in values]
        if len(values) != len(self.workers):
            raise InputError(f"{len(values)} {what} for {len(self.workers)} workers")
        return values

    def _passes_left(self, worker: int) -> int | None:
        """The credit ``worker`` may still get before the next of the sweeps'
        barriers opens or the slowest other worker's pass moves on (None: neither
        holds it).  Under ``bound_passes`` that is the end of the pass after the
        lowest pass of the others; every limit is read from one summary of all the
        workers (``credit_gate.pass_floor``), so the gate reads each in O(1)."""
        left = int(gate.limit_of(self.table, self.settings, worker))
        return None if left == NO_LIMIT else left

    def at_barrier(self, worker: int) -> bool:
        """Whether ``worker`` has applied every step it may take for now and waits:
        at the sweeps' barrier for the others' passes (``hold_sweeps``), or a pass
        ahead of the slowest other worker (``bound_passes``)."""
        return self.workers[worker].unspent <= 0 and \
            gate.limit_of(self.table, self.settings, worker) <= 0

    def request(self, worker: int) -> list[int]:
        """``worker`` asks for a view and credit; returns the workers to send a view
        now (``view``), in order."""
        self._record(worker)
        gate.enqueue(self.table, self.settings, self.queue, worker)
        return self._grant()

    def _grant(self) -> list[int]:
        """Answer the waiting workers that can be answered now.

        Credit goes first come, first served: behind a worker that must wait for
        credit, the others wait too.  A worker that still holds credit is answered at
        once, with new credit if it fits or a fresh view without: it can go on
        stepping, and a view of its that was lost must not leave its credit (which
        holds the others' gate) unknown to it.  A worker held at the sweeps'
        barrier (``hold_sweeps``) holds no credit and is passed over until it opens.
        A grant of k steps to worker r raises every other holder's exposure by k,
        so it is made only where every holder's stays ≤ τ (``exposure``).
        """
        answered = gate.grant_waiting(self.table, self.grants, self.settings,
                                      self.queue, self._answered)
        self._grants_room()
        return self._answered[:answered].tolist()

    def view(self, worker: int, grant: bool = True
             ) -> tuple[np.ndarray, int, int, int, int | None]:
        """(u_C, version, pushes applied, cumulative credit, budget granted) to send
        to ``worker`` now; records it as a view its pushes may name.

        u_C itself, not a copy: the carrier copies it into its message at once.
        Under adaptive budgets the view grants a budget (``AdaptiveBudgets.grant``), unless
        ``grant`` is False (the simulator offers every version, granting at steps);
        else the budget is None.
        """
        granted = self.budgets.grant(worker) if self.budgets is not None and grant \
            else None
        self.note_view(worker, granted)
        row = self.table[worker]
        return self.u, int(self.settings[CLOCK]), int(row[MESSAGES]), int(row[CREDIT]), \
            granted

    def note_view(self, worker: int, budget: int | None) -> None:
        """Record u_C as it is now as a view ``worker`` was sent (with ``budget``
        granted, or None), which its pushes may name."""
        budget = NO_BUDGET if budget is None else budget
        if gate.note_view(self.table, self.settings, self._sent[worker], worker, budget):
            return
        row, rows = self.table[worker], self._sent[worker]   # full: compact, or grow
        head, count = int(row[SENT_HEAD]), int(row[SENT_COUNT])
        if head:
            rows[:count] = rows[head:head + count]
        else:
            self._sent[worker] = np.concatenate([rows, np.zeros_like(rows)])
        row[SENT_HEAD] = 0
        gate.note_view(self.table, self.settings, self._sent[worker], worker, budget)

    def _room(self, worker: int, steps: int) -> np.ndarray:
        """``worker``'s staleness buffer, grown where it has no room for ``steps``
        more."""
        buffer = self._staleness[worker]
        wanted = int(self.table[worker, STALE_COUNT]) + steps
        if wanted > buffer.size:
            buffer = self._staleness[worker] = np.concatenate(
                [buffer, np.zeros(max(wanted, 2 * buffer.size) - buffer.size, np.int64)])
        return buffer

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
        row, kept = self._checked(worker, version, steps, seq, kept)
        delta = self._shaped(worker, "delta", delta)
        while True:
            staleness, answered = gate.push(
                self.table, self.grants, self.settings, self.queue, self._sent[worker],
                self._staleness[worker], self.u, self.applied[worker], delta, worker,
                row, steps, ask, self._answered)
            if staleness != gate.NO_ROOM:
                break
            self._room(worker, steps)
        if staleness == gate.NOT_FINITE:   # nothing changed
            raise self._diverged(worker, "delta")
        self._grants_room()
        self._keep(worker, kept)
        return staleness, self._answered[:answered].tolist()

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
        apply_push(self.u, self.applied[workers[0]], delta)
        staleness = []
        for (worker, _, steps, _, _, ask), (row, kept) in zip(pushes, checked):
            staleness.append(int(gate.count_push(
                self.table, self.grants, self.settings, self.queue, self._sent[worker],
                self._room(worker, steps), worker, row, steps, ask)))
            self._keep(worker, kept)
        return staleness, self._grant()

    def _checked(self, worker: int, version: int, steps: int, seq, kept):
        """The row of the view a push was computed from and its kept set, checked,
        not trusted: the view was sent to this worker and is no older than the
        grants whose credit the push spends (so the staleness bound covers it).
        Nothing changes here."""
        fewest = 0 if self.budgets is not None else 1
        if not (isinstance(worker, (int, np.integer)) and 0 <= worker < len(self.workers)):
            raise ProtocolError(f"unknown worker {worker!r}")
        count = steps if isinstance(steps, (int, np.integer)) else -1   # -1: refused
        numbered = seq is not None and isinstance(seq, (int, np.integer)) and seq >= 0
        if not isinstance(version, (int, np.integer)) or \
                not (seq is None or numbered):
            self._record(worker)
            raise ProtocolError(f"worker {worker}: push {seq!r} from view {version!r}: "
                                "both must be whole numbers ≥ 0")
        code, row = gate.check_push(self.table, self.grants, self.settings,
                                    self._sent[worker], worker, version, count,
                                    seq if numbered else -1, fewest)
        if code != gate.FITS:
            self._refuse(code, worker, version, steps, seq, fewest)
        if kept is not None:
            selected, weights, importance = self._kept(
                worker, kept[0], kept[1], kept[3] if len(kept) > 3 else None)
            kept = (selected, weights, int(kept[2]), importance)
        return row, kept

    def _refuse(self, code: int, worker: int, version, steps, seq, fewest) -> None:
        """The protocol error ``credit_gate.check_push`` found."""
        record = self._record(worker)   # (finished or lost: refused there)
        error, message = {
            gate.DUPLICATE: (DuplicatePush, f": push {seq} was already applied"),
            gate.SKIPS: (OutOfOrderPush, f": push {seq} skips {record.messages + 1}"),
            gate.STEPS_OUT_OF_RANGE: (ProtocolError, f" pushed {steps!r} steps in one "
                                      f"message; {fewest} to {self.batch} allowed"),
            gate.OVER_CREDIT: (ProtocolError, f" pushed {steps} steps with credit for "
                               f"{record.unspent}"),
        }.get(code, (ProtocolError, f" pushed from view {version!r}, which it was not "
                                    "sent or may no longer use"))
        raise error(f"worker {worker}{message}")

    def _keep(self, worker: int, kept) -> None:
        """A checked push's kept set, its resume state, recorded."""
        if kept is not None:
            record = self.workers[worker]
            record.selected, record.weights, position, record.importance = kept
            record.position = position

    def _kept(self, worker: int, selected, weights, importance=None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of a kept set and its importance (default |w|), checked: carriers
        reuse their receive buffers."""
        selected = np.array(selected, dtype=np.int64)
        weights = np.array(weights, dtype=np.float64)
        if selected.shape != weights.shape or selected.ndim != 1:
            raise ProtocolError(f"worker {worker}: {selected.size} indices but "
                                f"{weights.size} weights")
        importance = np.abs(weights) if importance is None else \
            np.array(importance, dtype=np.float64)
        fits = gate.kept_fits(weights, importance) if importance.shape == \
            selected.shape else gate.BAD_IMPORTANCE
        if fits == gate.WEIGHTS_NOT_FINITE:
            raise NonFiniteUpdate(f"worker {worker}: weights contain NaN or inf "
                                  f"{DIVERGED}")
        if fits == gate.BAD_IMPORTANCE:
            raise ProtocolError(f"worker {worker}: the importance of its kept set must "
                                f"be {selected.size} finite values ≥ 0")
        if self.budgets is not None and selected.size > self.budgets.held(worker):
            raise ProtocolError(f"worker {worker} keeps {selected.size} features, over "
                                f"the {self.budgets.held(worker)} it may hold")
        return selected, weights, importance

    def _release(self, worker: int) -> None:
        """``worker`` will spend no more credit: what it holds goes back."""
        gate.release(self.table, self.settings, self.queue, worker)

    def finish(self, worker: int, selected, weights, contribution,
               columns=None) -> list[int]:
        """A worker's final (S(t), w(t), X_S(t) w_S(t)) and, where it sends them, its
        kept columns X_S(t)ᵀ (``final_columns``): sent exactly once, at the end.  Its
        unspent credit returns; returns the workers to send a view now."""
        record = self._record(worker)
        selected, weights, _ = self._kept(worker, selected, weights)
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
        self._release(worker)
        if self.budgets is not None:   # its unused slots go back to the others
            self.budgets.released(worker, selected.size)
        return self._grant()

    # -- adaptive budgets ---------------------------------------------------------------
    def adapt_budgets(self, s: int) -> None:
        """Let the workers' budgets follow their weights (``core.budgets``): re-granted
        with every view from the global top s of the importance they push."""
        self.budgets = AdaptiveBudgets(s, self)

    # -- workers that come and go (ZeroMQ) ----------------------------------------------
    def lose(self, worker: int, may_return: bool = True) -> list[int]:
        """``worker`` is gone (no heartbeat, or its process exited:
        ``may_return=False``): its unspent credit is revoked, so it no longer holds
        the gate; its last acknowledged state stays.  Until it rejoins or is given up
        (``give_up``) it still holds the sweeps' barrier (``hold_sweeps``).  Returns
        the workers to send a view now."""
        record = self._record(worker)
        self._release(worker)
        record.lost, record.given_up = True, not may_return
        self._lost += 1
        return self._grant()

    def give_up(self, worker: int) -> list[int]:
        """No replacement for lost ``worker`` is waited for any longer: it no longer
        holds the sweeps' barrier.  Returns the workers to send a view now."""
        record = self._running(worker)
        if not record.lost:
            raise ProtocolError(f"worker {worker} is not lost")
        record.given_up = True
        return self._grant()

    def rejoin(self, worker: int) -> WorkerRecord:
        """A replacement (or the same worker, resynchronised) takes over: it resumes
        from the returned record (selected, weights, position, messages = its last
        sequence number, pushes = its steps), holding no credit."""
        record = self._running(worker)
        if record.lost:
            record.lost = record.given_up = False
            self._lost -= 1
        self._release(worker)
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
        values = np.concatenate([self.staleness_of(t) for t in range(len(self.workers))]
                                + [np.zeros(0, np.int64)])
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
            "staleness_sizes": self.table[:, STALE_COUNT].copy(),
            "staleness": np.concatenate([self.staleness_of(t) for t in range(len(records))]
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
            steps = arrays["staleness"][stale[t]:stale[t + 1]]
            state._room(t, steps.size)[:steps.size] = steps
            state.table[t, STALE_COUNT] = steps.size
            if reported[t]:
                record.columns = arrays["columns"][columns[t]:columns[t + 1]].copy()
        state._finished = sum(r.finished for r in state.workers)
        state._lost = sum(r.lost for r in state.workers)
        if "s" in arrays and int(arrays["s"]) >= 0:
            state.budgets = AdaptiveBudgets.restore(arrays, state)
        return state
