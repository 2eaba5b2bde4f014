"""The Asy-OS central server (spec §3.1, Algorithm 2) as a transport-free state machine.

The server holds u_C (length n), the clock (the number of pushes applied) and, per
worker, what it has pulled and pushed.  Transports (MPI, ZeroMQ, the simulator) only
feed it requests and carry its replies; none of them touches u_C.

Bounded staleness τ (spec §3.4, Assumption 2) is *enforced*: between a worker's pull and
its push, u_C receives at most τ other pushes.  The rule never defers a push (so it
cannot deadlock); it gates pulls.  With k workers in flight (pulled, not yet pushed),
worker t's remaining budget is τ − (clock − v_t).  Invariant: every in-flight budget is
≥ k − 1, so the in-flight pushes can land in any order within their bounds.  A pull is
granted only if the invariant still holds with the newcomer in flight (each budget ≥ k
and τ ≥ k); otherwise it waits, first come first served, until pushes shrink k.
With τ = 0 at most one worker is ever in flight: the run is a serial interleaving.

Pipelining (unbounded τ only): a push may carry the summed Δu of up to ``batch``
consecutive OS steps, and a worker may send ``window`` pushes before the view answering
the first arrives; meanwhile it steps from that view plus its own steps (spec §3.4,
staleness "others": a worker always sees its own pushes).  The clock counts steps.  A
push names the version of the view it was computed from, which must have been sent to
this worker in answer to one of its last ``window`` messages; its staleness counts only
the *other* workers' steps applied since that view.
"""

from collections import deque
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from ..errors import AsyosError
from .shards import budget_split


@njit(cache=True)
def all_finite(values) -> bool:
    """One pass, no temporaries: the server checks every n-vector it receives."""
    for value in values:
        if not np.isfinite(value):
            return False
    return True


class ProtocolError(AsyosError):
    """A request that breaks the protocol (unknown worker, wrong order, bad payload).

    Raised before any state changes; transports log it and drop the message.
    """


class DuplicatePush(ProtocolError):
    """A push whose sequence number was already applied (a resend): never reapplied."""


class OutOfOrderPush(ProtocolError):
    """A push that skips sequence numbers (one before it was lost): it waits for the
    worker's resend of the missing ones, in order."""


@dataclass
class WorkerRecord:
    """What the server knows of one worker (shard).

    ``applied`` is the sum of its applied Δu, so u_C = Σ_t applied_t always; with
    ``selected``/``weights``/``position`` (its last acknowledged kept set and how many
    features it has processed) a replacement can resume exactly where it stopped.
    """

    applied: np.ndarray
    pulled_version: int | None = None   # in flight when not None
    pushes: int = 0                     # steps applied
    messages: int = 0                   # pushes applied = the last sequence number
    position: int = 0
    finished: bool = False
    lost: bool = False
    selected: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    weights: np.ndarray = field(default_factory=lambda: np.zeros(0))
    contribution: np.ndarray | None = None   # X_S w_S as reported at the end
    staleness: list = field(default_factory=list)
    views: deque = field(default_factory=deque)   # (version, own steps, own messages)


class ServerState:
    """u_C, the clock and the staleness gate for q workers (ids 0..q-1)."""

    def __init__(self, n_samples: int, n_workers: int, staleness: int | None = None,
                 window: int = 1, batch: int = 1):
        if min(window, batch) < 1 or (max(window, batch) > 1 and staleness is not None):
            raise ValueError(f"window {window}, batch {batch}: both ≥ 1, and 1 under a "
                             "staleness bound")
        self.u = np.zeros(n_samples)
        self.clock = 0
        self.tau = staleness
        self.window, self.batch = window, batch
        self.workers = [WorkerRecord(np.zeros(n_samples)) for _ in range(n_workers)]
        self._waiting: deque[int] = deque()
        self._finished = 0
        self._lost = 0
        self.s: int | None = None
        self.granted: list[int] | None = None   # adaptive budgets, when switched on

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
            raise ProtocolError(f"worker {worker}: {name} contains NaN or inf")
        return values

    # -- the staleness gate -----------------------------------------------------------
    def _in_flight(self) -> list[WorkerRecord]:
        return [r for r in self.workers if r.pulled_version is not None]

    def _may_pull(self) -> bool:
        if self.tau is None:
            return True
        flying = self._in_flight()
        k = len(flying)
        return self.tau >= k and all(
            self.tau - (self.clock - r.pulled_version) >= k for r in flying)

    # -- requests ---------------------------------------------------------------------
    def request_pull(self, worker: int) -> list[int]:
        """Worker asks for u_C; returns the workers whose pull is granted now."""
        record = self._record(worker)
        if record.pulled_version is not None or worker in self._waiting:
            raise ProtocolError(f"worker {worker} pulled twice without pushing")
        self._waiting.append(worker)
        return self._grant()

    def _grant(self) -> list[int]:
        granted = []
        while self._waiting and self._may_pull():
            worker = self._waiting.popleft()
            record = self.workers[worker]
            record.pulled_version = self.clock
            record.views.append((self.clock, record.pushes, record.messages))
            granted.append(worker)
        return granted

    def is_waiting(self, worker: int) -> bool:
        """True while ``worker``'s pull waits for the staleness gate."""
        return worker in self._waiting

    def view(self, worker: int) -> tuple[np.ndarray, int]:
        """(u_C, version) for a worker whose pull was granted.

        u_C itself, not a copy: the transport copies it into its message at once.
        """
        return self.u, self.workers[worker].pulled_version

    def _view_used(self, record: WorkerRecord, worker: int, version, steps) -> tuple:
        """The view entry a push was computed from, checked, not trusted.

        It must have been sent to this worker in answer to one of its last ``window``
        messages, and the push may carry 1 to ``batch`` steps, or none under adaptive
        budgets: a worker's last push may only shrink it to its last granted budget
        (``worker_loop``'s settle).  Nothing changes here.
        """
        fewest = 0 if self.granted is not None else 1
        if not (isinstance(steps, (int, np.integer)) and fewest <= steps <= self.batch):
            raise ProtocolError(f"worker {worker} pushed {steps!r} steps in one message; "
                                f"{fewest} to {self.batch} allowed")
        oldest_allowed = record.messages + 1 - self.window
        for entry in record.views:
            if entry[0] == version and entry[2] >= oldest_allowed:
                return entry
        raise ProtocolError(f"worker {worker} pushed from view {version!r}, which it "
                            "was not sent or may no longer use")

    def push(self, worker: int, delta, version: int | None = None, steps: int = 1,
             seq: int | None = None, kept=None) -> tuple[int, list[int]]:
        """Apply Δu from ``worker``: the summed change of ``steps`` OS steps, all
        computed from view ``version`` (default: its latest) plus its own steps.

        ``seq`` (transports that may lose or repeat messages): the push's sequence
        number, 1, 2, ... per worker; an applied one raises DuplicatePush, a gap
        ProtocolError, so each push is applied at most once and in order.  ``kept``:
        (selected, weights, position) of the worker after these steps, its resume
        state.  Returns (their staleness: other workers' steps applied since that
        view, workers granted a pull).
        """
        record = self._record(worker)
        if seq is not None and seq <= record.messages:
            raise DuplicatePush(f"worker {worker}: push {seq} was already applied")
        if seq is not None and seq != record.messages + 1:
            raise OutOfOrderPush(f"worker {worker}: push {seq} skips "
                                f"{record.messages + 1}")
        if record.pulled_version is None:
            raise ProtocolError(f"worker {worker} pushed without a pull in flight")
        if version is None:
            version = record.pulled_version
        used = self._view_used(record, worker, version, steps)
        delta = self._vector(worker, "delta", delta)
        if kept is not None:
            kept = self._kept(worker, *kept[:2]) + (int(kept[2]),)
        while record.views[0] is not used:     # views are used in order: older expire
            record.views.popleft()
        staleness = self.clock - version - (record.pushes - used[1])
        self.u += delta
        record.applied += delta
        if kept is not None:
            record.selected, record.weights, record.position = kept
        self.clock += steps
        record.pulled_version = None
        record.pushes += steps
        record.messages += 1
        record.staleness.extend([staleness] * steps)
        return staleness, self._grant()

    def _kept(self, worker: int, selected, weights) -> tuple[np.ndarray, np.ndarray]:
        """Copies of a kept set (transports reuse their receive buffers), checked."""
        selected = np.array(selected, dtype=np.int64)
        weights = np.array(weights, dtype=np.float64)
        if selected.shape != weights.shape or selected.ndim != 1:
            raise ProtocolError(f"worker {worker}: {selected.size} indices but "
                                f"{weights.size} weights")
        if not all_finite(weights):
            raise ProtocolError(f"worker {worker}: weights contain NaN or inf")
        return selected, weights

    def finish(self, worker: int, selected, weights, contribution) -> list[int]:
        """A worker's final (S(t), w(t), X_S(t) w_S(t)): sent exactly once, at the end."""
        record = self._record(worker)
        if record.pulled_version is not None or worker in self._waiting:
            raise ProtocolError(f"worker {worker} finished with a pull in flight")
        selected, weights = self._kept(worker, selected, weights)
        if self.granted is not None and selected.size > self.granted[worker]:
            raise ProtocolError(f"worker {worker} finished with {selected.size} "
                                f"features, over its granted budget "
                                f"{self.granted[worker]}")
        record.contribution = self._vector(worker, "contribution", contribution).copy()
        record.selected, record.weights = selected, weights
        record.finished = True
        self._finished += 1
        if self.granted is not None:   # its unused slots go back to the others
            self.granted[worker] = selected.size
        return self._grant()

    # -- adaptive budgets (issue 5) ------------------------------------------------------
    def adapt_budgets(self, s: int) -> None:
        """Let the workers' budgets follow their weights: they start at s_t (spec §3.3)
        and are re-granted with every view by ``grant_budget``, Σ_t granted ≤ s always."""
        self.s = s
        self.granted = budget_split(s, len(self.workers))

    def wanted_budgets(self) -> dict[int, int]:
        """What each running worker should keep: one slot each, plus its share of the
        largest |w| of all running workers' last pushed weights (the slots the finished
        ones hold excluded), plus an even share of slots no weight claims yet.

        The extra slot is where a worker tries its newcomers; once one ranks among the
        global top it earns a slot, and a worker whose weights fall behind loses one:
        the union of the kept sets approaches the global top s of sequential OS.

        Those q trial slots are what Asy-OS still loses to sequential OS: with s + q
        slots it matches it.  One per worker is the measured optimum: none (for workers
        whose trials stay small, or whose weakest feature is near the threshold), two,
        or an incumbent bonus at the threshold all measured worse or within the noise
        of 8 seeds (docs/results.md, "Asy-OS recall against sequential OS").
        """
        running = [t for t, r in enumerate(self.workers) if not r.finished]
        room = self.s - sum(self.granted[t] for t, r in enumerate(self.workers)
                            if r.finished)
        top = max(room - len(running), 0)
        owners = np.concatenate([np.full(self.workers[t].weights.size, t)
                                 for t in running] or [np.zeros(0, np.int64)])
        magnitudes = np.concatenate([np.abs(self.workers[t].weights) for t in running]
                                    or [np.zeros(0)])
        ranked = owners[np.lexsort((owners, -magnitudes))[:top]]
        counts = {t: int(np.sum(ranked == t)) for t in running}
        spare = top - len(ranked)
        return {t: counts[t] + 1 + spare // len(running) + (1 if k < spare % len(running)
                                                            else 0)
                for k, t in enumerate(running)}

    def grant_budget(self, worker: int) -> int:
        """``worker``'s budget from now on (sent with its view): what it should keep,
        limited by the slots the other workers hold."""
        wanted = self.wanted_budgets()[worker]
        others = sum(self.granted) - self.granted[worker]
        self.granted[worker] = min(wanted, self.s - others)
        return self.granted[worker]

    # -- workers that come and go (ZeroMQ) ----------------------------------------------
    def lose(self, worker: int) -> list[int]:
        """``worker`` is gone (no heartbeat): it stops holding a pull or the gate.

        Its last acknowledged state stays; returns the workers granted a pull now.
        """
        record = self._record(worker)
        record.pulled_version = None
        record.views.clear()
        if worker in self._waiting:
            self._waiting.remove(worker)
        record.lost = True
        self._lost += 1
        return self._grant()

    def rejoin(self, worker: int) -> WorkerRecord:
        """A replacement takes over a lost worker: it resumes from the returned record
        (selected, weights, position, messages = its last sequence number)."""
        record = self._running(worker)
        if record.lost:
            record.lost = False
            self._lost -= 1
        record.pulled_version = None
        record.views.clear()
        if worker in self._waiting:
            self._waiting.remove(worker)
        return record

    def refresh(self, worker: int) -> bool:
        """Re-answer a worker whose view may have been lost: a newer view, if it holds
        a pull (granted; a waiting one is answered when granted).  True: send it."""
        record = self._record(worker)
        if record.pulled_version is None:
            return False
        record.pulled_version = self.clock
        record.views.append((self.clock, record.pushes, record.messages))
        return True

    # -- the end ----------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """Every worker finished (or was lost: see ``lost_workers``)."""
        return self._finished + self._lost == len(self.workers)

    @property
    def lost_workers(self) -> list[int]:
        return [t for t, r in enumerate(self.workers) if r.lost]

    def assemble(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Final w (sorted indices, weights) and max |u_C − Σ_t X_S(t) w_S(t)| (§7.1.4).

        A lost worker counts with its last acknowledged kept set and the Δu the server
        applied for it.  A lost or doubled push shows up as a large difference:
        callers fail on it.
        """
        if not self.done:
            missing = [t for t, r in enumerate(self.workers) if not r.finished]
            raise ProtocolError(f"workers {missing} have not finished")
        selected = np.concatenate([r.selected for r in self.workers])
        weights = np.concatenate([r.weights for r in self.workers])
        if np.unique(selected).size != selected.size:
            raise ProtocolError("workers' selected sets overlap")
        total = np.sum([r.applied if r.lost else r.contribution for r in self.workers],
                       axis=0)
        order = np.argsort(selected, kind="stable")
        return selected[order], weights[order], float(np.max(np.abs(self.u - total)))

    def staleness_stats(self) -> dict:
        """Max, mean and histogram of the staleness of every push."""
        values = np.concatenate([np.asarray(r.staleness, dtype=np.int64)
                                 for r in self.workers]) if self.workers else np.zeros(0)
        if values.size == 0:
            return {"max": 0, "mean": 0.0, "histogram": []}
        return {"max": int(values.max()), "mean": float(values.mean()),
                "histogram": np.bincount(values).tolist(), "bound": self.tau}

    # -- checkpoints ----------------------------------------------------------------------
    def snapshot(self) -> dict[str, np.ndarray]:
        """Plain arrays (saved without pickle) from which ``restore`` rebuilds the state.

        Pulls in flight are not kept: after a restart every worker resynchronises.
        """
        records = self.workers
        n = self.u.size
        return {
            "u": self.u.copy(), "clock": np.array(self.clock, dtype=np.int64),
            "settings": np.array([-1 if self.tau is None else self.tau, self.window,
                                  self.batch], dtype=np.int64),
            "counts": np.array([[r.pushes, r.messages, r.position, r.finished, r.lost]
                                for r in records], dtype=np.int64).reshape(-1, 5),
            "applied": np.array([r.applied for r in records]).reshape(-1, n),
            "contribution": np.array([np.zeros(n) if r.contribution is None
                                      else r.contribution for r in records]).reshape(-1, n),
            "kept_sizes": np.array([r.selected.size for r in records], dtype=np.int64),
            "selected": np.concatenate([r.selected for r in records] + [np.zeros(0, np.int64)]),
            "weights": np.concatenate([r.weights for r in records] + [np.zeros(0)]),
            "staleness_sizes": np.array([len(r.staleness) for r in records], np.int64),
            "staleness": np.concatenate([np.asarray(r.staleness, np.int64) for r in records]
                                        + [np.zeros(0, np.int64)]),
        }

    @classmethod
    def restore(cls, arrays) -> "ServerState":
        """The state ``snapshot`` saved (a mapping of arrays, e.g. an opened .npz)."""
        tau, window, batch = (int(v) for v in arrays["settings"])
        counts = arrays["counts"]
        state = cls(arrays["u"].size, counts.shape[0], None if tau < 0 else tau,
                    window, batch)
        state.u[:] = arrays["u"]
        state.clock = int(arrays["clock"])
        kept = np.cumsum(np.r_[0, arrays["kept_sizes"]])
        stale = np.cumsum(np.r_[0, arrays["staleness_sizes"]])
        for t, record in enumerate(state.workers):
            pushes, messages, position, finished, lost = (int(v) for v in counts[t])
            record.pushes, record.messages, record.position = pushes, messages, position
            record.finished, record.lost = bool(finished), bool(lost)
            record.applied[:] = arrays["applied"][t]
            if finished:
                record.contribution = arrays["contribution"][t].copy()
            record.selected = arrays["selected"][kept[t]:kept[t + 1]].copy()
            record.weights = arrays["weights"][kept[t]:kept[t + 1]].copy()
            record.staleness = arrays["staleness"][stale[t]:stale[t + 1]].tolist()
        state._finished = sum(r.finished for r in state.workers)
        state._lost = sum(r.lost for r in state.workers)
        return state
