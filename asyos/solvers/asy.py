"""Asy-OS run plan and bookkeeping shared by every transport
(Yang et al., KDD 2016, Algorithms 2-3).

A transport builds an ``AsyConfig``, runs ``ServerState`` on the server and
``worker_loop`` on each worker, feeds each push to a ``ServerMonitor`` and finally asks
it for the run's result: the same ``FitResult`` whatever moved the bytes.
"""

import hashlib
import time
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from ..core.kept_set import (
    check_ridge,
    fitted_ridge,
    kept_set,
    resolve_epochs,
    resolve_rule,
    warm_up,
)
from ..core.losses import Loss, loss_value
from ..core.refit import joint_refit
from ..core.server_state import ServerState
from ..core.shards import budget_split, group_owners
from ..core.step_size import StepSize, check_scale
from ..core.sweep import sweep_rounds, sweep_size
from ..core.validate import check_at_least, check_choice, check_sparsity
from ..errors import InputError, warn_constant_selected
from ..streams.base import GroupShard
from .messages import COLUMNS_LIMIT
from .result import FitResult
from .worker_loop import WorkerDriver, WorkerPlan, worker_loop

PIPELINE = {"window": 2, "batch": 16}   # pushes in flight × most steps per push
#                                         (``worker_loop.PushSize``); docs/benchmarks.md
SOLO_BATCH = 512   # a lone worker's steps per push: two blocks, over which a push's fixed
#                   cost is spread (docs/benchmarks.md, "A lone worker's pushes")
MIN_BATCH = 8      # the automatic pipeline splits its depth into pushes no shorter
DEPTH_FRACTION, MAX_DEPTH = 256, 512   # on large p the depth grows to p/256 (a power
#                                        of two, ≤ 512): τ stays ≤ 1/128 of an epoch
#                                        at q = 2, and a push of cheap steps can carry
#                                        enough of them to pay for itself
PUSH_SECONDS = 2e-3   # with cheap steps the depth grows until a push can carry this
#                      much kernel time: its fixed cost (some 50–100 µs of Python on
#                      the server and the worker) is then a twentieth of it or less,
#                      and two pipelines per peer leave the gate slack (measured:
#                      docs/benchmarks.md, "The step timed on a block's second run")
BUDGETS = ("auto", "fixed", "adaptive")
STALENESS_PER_PEER = 2   # default τ: two pipelines per other worker (docs/benchmarks.md)
SHARD_FRACTION = 8       # credit ≤ 1/8 of a shard: small problems stay nearly serial
EPOCH_FRACTION = 16      # default τ ≤ 1/16 of an epoch (p < 16: τ = 0, serial)
TRIAL_SHARD = 32         # adaptive budgets' trial slots lie on top of s from p/q ≥ 32


def trials_on_top(n_workers: int, n_features: int | None) -> bool:
    """Whether adaptive budgets give each worker its trial slot on top of s (and cut
    back to s in each worker's last steps, ``AdaptiveBudgets.set_ends``) rather than
    within s.  On top from p/q ≥ ``TRIAL_SHARD`` (and while p is unknown, for the
    capacities): within s each worker's weakest feature must hold its own slot, which
    cost 0.05–0.08 of recall at q = 8–11 on the paper's protocol; on short shards the
    cut comes in the last few steps, too few to refit what remains (diabetes, p = 10,
    q = 2: R² 0.44–0.49 over interleavings on top, against 0.48–0.49 within).
    Measured in docs/results.md, "Asy-OS recall against sequential OS"."""
    return n_workers > 1 and (n_features is None or
                              n_features >= TRIAL_SHARD * n_workers)


def sweep_grows(config: "AsyConfig", n_samples: int) -> int:
    """The newcomers each worker's closing sweep may keep on top of its final budget
    (``AdaptiveBudgets.set_ends``, with the trial slots on top of s): the arrivals of
    one round of its sweep, under adaptive budgets and the fitted rule, where every
    worker's kept columns reach the server (n·(s + 1) values at most
    ``messages.COLUMNS_LIMIT``): the assembly cuts the grown kept sets to s and the
    refit on the columns kept makes the result's weights; else 0.  A later round's
    newcomers win their slots from the earlier's by the substitution rule: grown by
    every round, the union left the cut more noise to rank, and classification runs
    ended worse (docs/benchmarks.md, "The sweep in two rounds")."""
    capacity = config.s + 1
    if not (config.sweep and config.adaptive and resolve_rule(config.rule) == "fitted"
            and capacity * n_samples <= COLUMNS_LIMIT):
        return 0
    return config.sweep


@dataclass(frozen=True)
class AsyConfig:
    """Everything a worker needs besides its data: the server's handshake content."""

    s: int
    n_workers: int
    loss: Loss
    epochs: int
    eta: float | None = None          # None: the default rule (fixed for the run)
    m: float | None = None
    staleness: int | None = None      # τ, enforced; None = no bound
    depth: int = 1                    # credit: steps a worker may take unanswered
    batch: int = 1                    # OS steps summed into one push message
    s2: int | None = None             # group budget; None: no groups
    budget_rule: str = "adaptive"     # or "fixed": s_t = s/q, the paper
    sized_for: int | None = None      # p the automatic pipeline was sized for; -1:
    #                                   given by the user, None: p not known yet
    step_seconds: float | None = None   # a worker's step as timed before the run
    #                                     (``time_a_step``), when the pipeline was
    #                                     sized for it
    rule: str = "auto"                # the substitution rule (core.kept_set.RULES)
    ridge: float | None = None        # the fitted rule's relative ridge; None: default
    n_features: int | None = None     # p, once known
    sweep: int = 0                    # each worker's closing sweep (core/sweep.py)

    @classmethod
    def build(cls, s, n_workers, *, loss="squared", epochs="auto", eta="auto", m="auto",
              staleness="auto", window="auto", batch="auto",
              n_features=None, s2=None, budget="auto",
              rule="auto", ridge=None, sweep="auto") -> "AsyConfig":
        """Validated configuration; raises InputError naming the problem.

        ``staleness``: the bound τ the server enforces, "auto" (derived from the
        pipeline: ``STALENESS_PER_PEER`` pipelines per other worker, but at most
        1/``EPOCH_FRACTION`` of an epoch: on correlated columns a step that misses a
        tenth of an epoch of the others' updates costs fit, measured in
        docs/results.md, and the pipeline is sized to that bound) or None (no
        bound).  ``window``/``batch``: pushes a worker may have in flight and steps per
        push; their product is the worker's credit depth.  "auto": ``PIPELINE``, but
        never more than 1/``SHARD_FRACTION`` of a shard (on a small problem a whole
        shard in flight on one view is a different algorithm), and with a given τ no
        more than τ can feed.  ``s2``: the group budget of group-aware Asy-OS, already
        checked against the labels; each worker needs one group of it.  ``budget``:
        "fixed" (s_t = s/q, the paper), "adaptive" (the server re-grants budgets
        from a global |w| threshold, ``AdaptiveBudgets.grant``) or "auto":
        adaptive, which is measured closer to sequential OS at every q
        (docs/results.md), except with groups, where only fixed budgets exist, and
        for one worker, whose budget is s either way.
        ``rule``: the substitution rule every worker uses ("auto", "fitted",
        "magnitude"; ``core.kept_set.resolve_rule``) and ``ridge`` (the fitted rule's,
        as for ``fit_os``).  ``sweep``: the arrivals of each worker's closing sweep
        over its shard after its last pass (``core/sweep.py``; "auto": as sequential
        OS's for s).
        """
        s = check_sparsity(s, n_features)
        budget_split(s, n_workers)  # q ≤ s, q ≥ 1
        if s2 is not None and n_workers > s2:
            raise InputError(f"{n_workers} workers cannot share a group budget of "
                             f"s2 = {s2}: each worker needs at least one group (use "
                             f"at most {s2} workers)")
        step = StepSize.parse(eta, m)
        epochs = resolve_epochs(epochs, resolve_rule(rule),
                                asy=True)
        if staleness not in ("auto", None):
            staleness = check_at_least("staleness", staleness, 0, integer=True)
        given = {}
        for name, value in (("window", window), ("batch", batch)):
            if value != "auto":
                given[name] = check_at_least(name, value, 1, integer=True)
        automatic = staleness == "auto" and not given
        staleness, depth, batch = _pipeline(n_workers, staleness, given, n_features)
        check_choice("budget", budget, BUDGETS)
        if budget == "auto":   # a lone worker's budget is s whatever the rule: no
            #                        ranking to redo at each of its views
            budget = "fixed" if s2 is not None or n_workers == 1 else "adaptive"
        if s2 is not None and budget != "fixed":
            raise InputError("group-aware Asy-OS keeps fixed budgets (s1_t, s2_t); "
                             "adaptive budgets are not supported with groups")
        return cls(s, n_workers, Loss.parse(loss), epochs, step.eta, step.m, staleness,
                   depth, batch, s2=None if s2 is None else int(s2), budget_rule=budget,
                   sized_for=n_features if automatic else -1, rule=rule,
                   ridge=check_ridge(ridge), n_features=n_features,
                   sweep=sweep_size(sweep, s, resolve_rule(rule), epochs))

    def for_features(self, n_features: int) -> "AsyConfig":
        """This configuration once p is known (a ZeroMQ server learns it from its
        workers): the automatic pipeline and bound re-sized for p."""
        if self.sized_for is not None:
            return self if self.n_features == n_features else \
                replace(self, n_features=n_features)
        staleness, depth, batch = _pipeline(self.n_workers, "auto", {}, n_features,
                                            self.step_seconds)
        return replace(self, staleness=staleness, depth=depth, batch=batch,
                       sized_for=n_features, n_features=n_features)

    def for_step(self, seconds: float) -> "AsyConfig":
        """This configuration for workers whose OS step takes ``seconds``
        (``time_a_step``): an automatic pipeline deepens, within the bound's limits,
        until a push can carry ``PUSH_SECONDS`` of kernel time.  A pipeline or bound
        the user gave, or one not sized for p yet, stays as it is."""
        if self.sized_for is None or self.sized_for < 0 or not seconds > 0:
            return self
        staleness, depth, batch = _pipeline(self.n_workers, "auto", {},
                                            self.sized_for, seconds)
        return replace(self, staleness=staleness, depth=depth, batch=batch,
                       step_seconds=float(seconds))

    @property
    def most_batch(self) -> int:
        """The most steps a push of this run may carry, whatever p and the timed step
        turn out to be: the batch given, or the widest an automatic pipeline can be
        re-sized to (``for_features``, ``for_step``)."""
        return self.batch if self.sized_for == -1 else \
            max(self.batch, MAX_DEPTH, SOLO_BATCH)

    @property
    def damping(self) -> float:
        """The scale of a worker's moves under the fitted rule: 1/q.  q workers'
        Newton steps on their own shards, each from (nearly) the same view, add up
        like a Jacobi iteration and overshoot on correlated shards (R² −1500 on
        Toeplitz columns at q = 4); the average of q moves that each lower the
        objective lowers it too (convexity), and the sum of q moves scaled by 1/q
        is that average."""
        return 1.0 / self.n_workers

    @property
    def budgets(self) -> list[int]:
        """s_t: the fixed budgets, and where adaptive budgets start."""
        return budget_split(self.s, self.n_workers)

    @property
    def adaptive(self) -> bool:
        return self.budget_rule == "adaptive"

    @property
    def capacities(self) -> list[int]:
        """Each worker's kept-set size: s_t, or under adaptive budgets the most
        ``AdaptiveBudgets.grant`` can grant, all but one slot per other worker (each
        always holds one) of s + q with the trial slots on top (s + 1), or of s
        (s − q + 1)."""
        if self.adaptive:
            extra = self.n_workers if trials_on_top(self.n_workers, self.n_features) \
                else 0
            return [self.s + extra - self.n_workers + 1] * self.n_workers
        return self.budgets

    @property
    def group_budgets(self) -> list[int] | None:
        """s2_t, Σ_t s2_t = s2, or None without groups."""
        return None if self.s2 is None else budget_split(self.s2, self.n_workers)

    def plan(self, t: int, eta: float, m: float) -> WorkerPlan:
        """Worker t's plan under this configuration, as the real carriers run it (its
        push size adapts when it has peers: ``worker_loop.PushSize``)."""
        return WorkerPlan(self.capacities[t], self.loss, eta, m, self.epochs,
                          self.batch, self.rule, self.damping, self.ridge,
                          adaptive_push=self.n_workers > 1,
                          group_budget=0 if self.s2 is None else self.group_budgets[t],
                          sweep=self.sweep, sweep_rounds=self.sweep_rounds)

    @property
    def sweep_rounds(self) -> int:
        """Rounds of each worker's closing sweep (``core.sweep.sweep_rounds``)."""
        return sweep_rounds(self.n_workers)

    def groups(self, t: int, group_of) -> tuple | None:
        """``worker_loop``'s groups argument for worker t: (group_of, s2_t), or None."""
        if group_of is None:
            return None
        if self.s2 is None:
            raise InputError("group labels were given without a group budget s2")
        return group_of, self.group_budgets[t]

    def eta_and_m(self, n_samples: int, nu_max: float) -> tuple[float, float]:
        """(η, m) fixed for the whole run: the sequential rule at ν_max.

        Asy-OS cannot adapt η step by step (workers would disagree), so ν_max is the
        largest ‖x‖²/n of the workers' first blocks, agreed before the first pull.
        """
        rule = StepSize(self.eta, self.m)
        m = rule.block_factor(n_samples, self.s)
        if self.eta is not None:
            return self.eta, m
        check_scale(nu_max)
        coef = rule.coefficient(self.loss, n_samples, self.s)
        return coef / max(nu_max, np.finfo(float).tiny), m


def _pipeline(n_workers: int, staleness, given: dict, n_features,
              step_seconds: float | None = None) -> tuple:
    """(τ, depth, batch) from the user's ``staleness`` (a number, "auto" or None) and
    ``given`` window/batch, sized for p = ``n_features`` when known
    (``AsyConfig.build`` says why) and for a worker's step of ``step_seconds`` when
    timed (``AsyConfig.for_step``)."""
    if n_workers == 1 and not given and staleness == "auto":
        # no other worker's step can come between its view and its push: τ = 0, and
        # a push as long as the kernel's batched products (docs/benchmarks.md); two
        # in flight, so that a server in another process (MPI, ZeroMQ) answers one
        # while the worker steps on (with one, a lone MPI worker waited for each
        # answer: 0.2 s of a 3.6 s run at n = 2000, s = 256)
        return 0, PIPELINE["window"] * SOLO_BATCH, SOLO_BATCH
    peers = max(n_workers - 1, 1)
    limit = PIPELINE["window"] * PIPELINE["batch"]
    if n_features is not None:
        limit = max(limit, _power_of_two(min(MAX_DEPTH, n_features // DEPTH_FRACTION)))
        if step_seconds:   # cheap steps: pushes long enough to pay for themselves
            steps = int(np.ceil(PUSH_SECONDS / step_seconds))   # not rounded up to
            #  a power of two: a step timed 10 % cheaper then doubled the depth and τ
            limit = max(limit, min(MAX_DEPTH, PIPELINE["window"] * steps))
        limit = min(limit, max(1, n_features // (SHARD_FRACTION * n_workers)))
    bound = staleness
    if staleness == "auto" and n_features is not None:
        bound = n_features // EPOCH_FRACTION
    if isinstance(bound, int) and not given:
        limit = min(limit, max(1, bound // (STALENESS_PER_PEER * peers)))
    if "batch" in given:
        batch = given["batch"]
        window = given.get("window", max(1, limit // batch))
    else:   # the depth in ``PIPELINE["window"]`` pushes, or in one when those would
        #     carry fewer than ``MIN_BATCH`` steps each (a push has a fixed cost)
        window = given.get("window", PIPELINE["window"]
                           if limit // PIPELINE["window"] >= MIN_BATCH else 1)
        batch = max(1, limit // window)
    if staleness == "auto":
        staleness = STALENESS_PER_PEER * peers * window * batch
        if n_features is not None:
            staleness = min(staleness, bound)
    return staleness, window * batch, batch


def _power_of_two(k: int) -> int:
    """The largest power of two ≤ k (1 for k < 1)."""
    return 1 << max(int(k).bit_length() - 1, 0)


def worker_shard(stream, q: int, t: int, group_of=None):
    """Worker t's shard: the pieces of adjacent features ``shards.shard_piece`` deals
    it in turn (a static shard: the paper only says "from the pool"; pieces of one,
    the features j ≡ t (mod q), on small problems), or, with ``group_of`` (checked
    compact group ids), the whole groups ``shards.group_owners`` gives it.  Every transport and the simulator
    call this, so all shard alike."""
    if group_of is None:
        return stream.shard(q, t)
    owner = group_owners(group_of, int(group_of.max()) + 1, q)[group_of]
    return GroupShard(stream, owner, t)


def worker_driver(config: AsyConfig, t: int, shard: "WorkerShard", y, eta: float,
                  m: float) -> WorkerDriver:
    """Worker t's ``worker_loop`` on its ``shard`` (``shard_of``) under
    ``config.plan``, in its driver."""
    return WorkerDriver(worker_loop(shard.stream, y, config.plan(t, eta, m),
                                    groups=shard.groups), y.shape[0])


def warm_worker(shard: "WorkerShard", config: AsyConfig) -> None:
    """Compile (or load from numba's cache) the kernels a worker of ``config`` runs on
    its ``shard``, before its first pull: a worker compiling mid-run would hold the
    others at the staleness bound."""
    kept, _ = kept_set(shard.stream, 1, shard.groups, config.rule, ridge=config.ridge,
                       loss=config.loss, damping=config.damping)
    warm_up(kept, asy=True)


def time_a_step(shard: "WorkerShard", y, config: AsyConfig) -> float:
    """Seconds per OS step of a worker's kernel (compiled: ``warm_worker``) as most of
    a run's steps cost: its shard's first block is run once from u = 0 with its share
    of s, and timed on a second run over the same block from there.  The first run
    keeps nearly every arrival (the kept set fills, the residual is large) and costs
    2–3× a step of the later passes, where few arrivals are kept; timed on it, the
    pipeline came out shallower than the run needed, and how much shallower varied
    with the machine's load.  0.0 for an empty shard, or where the data makes the
    kernel refuse (the run then says so, naming the worker).  What a push must carry
    to pay for its fixed cost depends on it (``AsyConfig.for_step``): about 6 µs at
    the paper's size, 30–40 µs at n = 2000, s = 256 (docs/benchmarks.md)."""
    kept, blocks = kept_set(shard.stream, config.budgets[0], shard.groups, config.rule,
                            ridge=config.ridge, loss=config.loss,
                            damping=config.damping)
    try:
        eta, m = config.eta_and_m(y.shape[0], shard.nu)
        u = np.zeros(y.shape[0])
        for index, block in blocks(0):
            kept.run_local(index, block, u, y, config.loss, eta, m)
            start = time.perf_counter()
            kept.run_local(index, block, u, y, config.loss, eta, m)
            return (time.perf_counter() - start) / max(index.size, 1)
    except InputError:
        pass
    return 0.0


def _hash63(*buffers: bytes) -> int:
    """A 63-bit hash of ``buffers`` (an int64 a wire frame carries)."""
    digest = hashlib.blake2b(digest_size=8)
    for buffer in buffers:
        digest.update(buffer)
    return int.from_bytes(digest.digest(), "little") >> 1


def group_fingerprint(group_of) -> np.ndarray:
    """(number of groups, a 63-bit hash of the ids): what a ZeroMQ worker says of
    the labels it read, so the server refuses a worker with other labels."""
    return np.array([int(group_of.max()) + 1,
                     _hash63(np.ascontiguousarray(group_of, "<i8").tobytes())],
                    dtype=np.int64)


def data_fingerprint(stream) -> np.ndarray:
    """(bytes per value, a 63-bit hash of n, p and three columns: the first, the
    middle and the last): what a ZeroMQ worker says of the data it read, so the
    server refuses a worker whose file differs from the others' though its shape is
    the same.  Cheap on purpose: three columns are read, not the data."""
    n, p = stream.n_samples, stream.n_features
    columns = stream.columns(stream.feature_indices()[[0, p // 2, p - 1]])
    return np.array([stream.dtype.itemsize,
                     _hash63(np.array([n, p], "<i8").tobytes(),
                             np.ascontiguousarray(columns, "<f8").tobytes())],
                    dtype=np.int64)


class WorkerShard(NamedTuple):
    """Worker t's features, its ``worker_loop`` groups argument, and ν of its first
    block (the carriers agree on η from the largest, ``AsyConfig.eta_and_m``)."""
    stream: object
    groups: tuple | None
    nu: float


def shard_of(stream, config: AsyConfig, t: int, group_of=None) -> WorkerShard:
    """Worker t's ``WorkerShard`` of ``stream``: what every carrier that knows the
    configuration reads before the first pull (the simulator, shared memory, MPI)."""
    shard = worker_shard(stream, config.n_workers, t, group_of)
    return WorkerShard(shard, config.groups(t, group_of), first_block_nu(shard))


def constant_selected(selected, weights, columns) -> np.ndarray:
    """The ``selected`` features whose ``columns`` (k × n) are constant (all-zero
    included) and that carry a nonzero weight: what sequential OS warns about
    (``KeptSet.constant_features``), found by the server in the workers' final
    columns."""
    constant = (columns.max(axis=1) == columns.min(axis=1)) if len(columns) else \
        np.zeros(0, bool)
    return np.asarray(selected)[constant & (np.asarray(weights) != 0)]


def first_block_nu(stream) -> float:
    """max ‖x‖²/n over the first block of ``stream`` (0 for an empty stream)."""
    for _, block in stream.blocks(0):
        return float(np.max(np.einsum("ij,ij->i", block, block)) / block.shape[1])
    return 0.0


@dataclass
class ServerMonitor:
    """Loss trace of u_C over time, the push order, and the result at the end."""

    y: np.ndarray
    config: AsyConfig
    n_features: int
    record_order: bool = False
    group_of: np.ndarray | None = None  # group ids, to check the assembled s2 groups
    start: float = field(default_factory=time.perf_counter)
    trace: list = field(default_factory=list)      # (clock, seconds, loss)
    order: list = field(default_factory=list)      # (worker, feature) per push

    def __post_init__(self):
        total = max(self.config.epochs * self.n_features, 1)
        self._every = max(1, total // 200)
        self._next_trace = self._every
        self._next_epoch = max(self.n_features, 1)
        self.per_epoch: list[float] = []

    def skip_to(self, clock: int) -> None:
        """Continue a resumed run: the next trace and epoch points come after ``clock``."""
        while self._next_trace <= clock:
            self._next_trace += self._every
        while self._next_epoch <= clock:
            self._next_epoch += self.n_features

    def on_push(self, server: ServerState, worker: int, features) -> None:
        """After each push message (its ``features``: one per step it carries)."""
        if self.record_order:
            self.order.extend((worker, int(j)) for j in features)
        clock = server.clock
        epoch_done = clock >= self._next_epoch
        if clock >= self._next_trace or epoch_done:
            loss = loss_value(int(self.config.loss), server.u, self.y)
            self.trace.append((clock, time.perf_counter() - self.start, loss))
            while self._next_trace <= clock:
                self._next_trace += self._every
            if epoch_done:   # the first push at or past an epoch's worth of steps
                self.per_epoch.append(loss)
                while self._next_epoch <= clock:
                    self._next_epoch += self.n_features

    def _joint_worth(self, server: ServerState):
        """What the closing cut ranks the kept features by under the fitted rule:
        |w|·‖x‖/√n (``FittedKeptSet._worth``) of a joint fit of all of them, where
        every column was reported.  Each worker's own weights were fitted against
        views the others kept moving: a weak true feature and a noise feature that
        had absorbed another shard's misfit could rank either way, and the cut then
        dropped true features that the joint fit ranks far above the noise."""
        if resolve_rule(self.config.rule) != "fitted":
            return None
        ridge = fitted_ridge(self.config.loss, self.y.size, self.config.ridge)

        def worth(selected, weights):
            columns = server.final_columns(selected)
            if columns is None:
                return None
            fitted = joint_refit(columns, self.y, self.config.loss, ridge, weights)[0]
            return np.abs(fitted) * np.sqrt(np.einsum("kr,kr->k", columns, columns)
                                            / self.y.size)
        return worth

    def result(self, server: ServerState, workers: list[dict], eta: float,
               m: float) -> FitResult:
        """The run's result (what a sequential run has, plus Asy-OS statistics).

        Under the fitted rule the weights are refit jointly on the final support
        (``core.refit.joint_refit``) when every column of it was reported: each
        worker fitted its own against views the others kept moving, so that the
        weights, and the objective, depend on the features chosen and not on the
        interleaving.  u_C and the objective per epoch stay the run's; the trace
        gains the refit's point, so that it ends at the objective reported.
        """
        loss = self.config.loss
        selected, weights, difference = server.assemble(self._joint_worth(server))
        if selected.size == 0 and np.any(self.y) and not server.lost_workers:
            raise InputError("no worker kept a feature for labels that are not all "
                             "zero: every column of X is zero (or orthogonal to the "
                             "labels), so there is nothing to select")
        objective = before = loss_value(int(loss), server.u, self.y)
        refit = None
        columns = server.final_columns(selected)
        if columns is not None and resolve_rule(self.config.rule) == "fitted":
            ridge = fitted_ridge(loss, self.y.size, self.config.ridge)
            weights, u, steps = joint_refit(columns, self.y, loss, ridge, weights)
            objective = loss_value(int(loss), u, self.y)
            refit = {"objective_before": before, "newton_steps": steps}
            # the trace ends where the result does, when the refit is done
            self.trace.append((server.clock, time.perf_counter() - self.start,
                               objective))
        if columns is not None:
            warn_constant_selected(constant_selected(selected, weights, columns))
        # a lost worker with its trial slot on top of s keeps it: partial runs only
        slack = len(server.lost_workers) if server.budgets is not None and \
            server.budgets.on_top else 0
        groups_kept = check_budgets(selected, self.config, self.group_of, slack)
        asy = {"n_workers": self.config.n_workers, "budgets": self.config.budgets,
               "budget": self.config.budget_rule, "staleness": server.staleness_stats(),
               "u_check_max_abs_diff": difference, "workers": workers,
               # kept by the workers, cut at the assembly (still in u_C)
               "cut": sum(r.selected.size for r in server.workers) - selected.size}
        if self.record_order:
            asy["order"] = self.order
        if refit is not None:
            asy["refit"] = refit
        if self.config.s2 is not None:
            asy.update(group_budgets=self.config.group_budgets, groups_kept=groups_kept)
        return FitResult(
            selected=selected, weights=weights,
            objective_per_epoch=self.per_epoch[: self.config.epochs],
            objective=objective,
            eta=eta, m=m, n_steps=sum(w["steps"] for w in workers),
            seconds=time.perf_counter() - self.start,
            trace={"steps": [c for c, _, _ in self.trace],
                   "seconds": [t for _, t, _ in self.trace],
                   "objective": [v for _, _, v in self.trace]},
            asy=asy)


def check_budgets(selected: np.ndarray, config: AsyConfig, group_of=None,
                  slack: int = 0) -> int | None:
    """Fail loudly when the assembled w breaks ≤ s features (+ ``slack``: the trial
    slots of lost workers) or ≤ s2 groups; returns the number of groups kept (None
    without labels)."""
    if selected.size > config.s + slack:
        raise RuntimeError(f"the workers kept {selected.size} features, more than "
                           f"s = {config.s}" + (f" + {slack} lost" if slack else ""))
    if group_of is None:
        return None
    kept = int(np.unique(group_of[selected]).size)
    if config.s2 is not None and kept > config.s2:
        raise RuntimeError(f"the workers kept {kept} groups, more than s2 = {config.s2}")
    return kept


def check_u(difference: float, u: np.ndarray) -> None:
    """Fail loudly when u_C ≠ Σ_t X_S(t) w_S(t): a push was lost or doubled."""
    if not difference <= 1e-8 * (1.0 + float(np.max(np.abs(u)))):
        raise RuntimeError(f"u_C differs from the sum of the workers' contributions by "
                           f"{difference:.3g}: a push was lost or applied twice")
