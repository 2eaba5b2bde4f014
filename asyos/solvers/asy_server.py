"""The Asy-OS server, written once for every carrier: a message in, replies out.

``AsyServer.handle(worker, message)`` applies a ``solvers.messages`` request to the
state machine (``core.server_state``: u_C, the clock, the credit gate that bounds
staleness, adaptive budgets), feeds the monitor (loss trace, push order) and returns
the (worker, message) pairs to send.  The simulator, MPI and ZeroMQ only move these;
what differs between them (who is alive, resends, checkpoints) stays in the carrier.
"""

import numpy as np

from ..core import credit_gate
from ..core.budgets import warm_budgets
from ..core.credit_gate import BUDGET, NO_BUDGET, UPTO, VERSION
from ..core.losses import loss_value
from ..core.server_state import DuplicatePush, NotARequest, OutOfOrderPush, ServerState
from ..core.shards import shard_sizes
from . import messages
from .asy import AsyConfig, ServerMonitor, check_u, sweep_grows, trials_on_top
from .result import FitResult

SECONDS = ("compute_seconds", "read_seconds", "communicate_seconds", "wait_seconds")
RISE = 0.05   # the safeguard's tolerance: a round 5 % above the lowest loss halves η


def warm_server() -> None:
    """Load the server's compiled helpers (numba's cache) now, not at the first push
    of a run.  An MPI server rank calls it while its workers warm their kernels: after
    them, a lone worker waited a quarter of a second for its first view."""
    values = np.zeros(1)
    credit_gate.warm()
    warm_budgets()
    loss_value(0, values, values)


class AsyServer:
    """u_C and everything the server decides, for q workers.

    ``n_features`` may come later (``start``: ZeroMQ learns p from the workers'
    HELLOs); ``state``: a restored ``ServerState`` to continue from.
    """

    def __init__(self, y: np.ndarray, config: AsyConfig, *, state: ServerState = None,
                 record_order: bool = False, group_of=None):
        self.y, self.config = y, config
        self.record_order, self.group_of = record_order, group_of
        if state is None:
            state = ServerState(y.shape[0], config.n_workers, config.staleness,
                                config.depth, config.batch)
            if config.adaptive:
                state.adapt_budgets(config.s)
        self.state = state
        warm_server()
        self.monitor: ServerMonitor | None = None
        self.eta = self.m = None
        self.shrink, self._lowest_loss, self._steps_in_round = 1.0, np.inf, 0
        self.stats: list[dict | None] = [None] * config.n_workers

    def start(self, n_features: int, eta: float, m: float) -> None:
        """Fix p and the step (and size the automatic pipeline for p, when the
        configuration did not know it); the run can begin."""
        config = self.config.for_features(n_features)
        if config is not self.config and not self.state.clock:
            self.config = config
            self.state.tau, self.state.depth, self.state.batch = \
                config.staleness, config.depth, config.batch
        self.eta, self.m = eta, m
        q = self.config.n_workers
        sizes = shard_sizes(n_features, q, self.group_of)
        passes = sizes * self.config.epochs
        if self.config.adaptive and trials_on_top(q, n_features):   # no groups here
            self.state.budgets.set_ends(passes.tolist(),
                                        sweep_grows(self.config, self.y.shape[0]))
        if self.config.sweep and q > 1:
            self.state.hold_sweeps(passes, self.config.sweep, self.config.sweep_rounds)
        if q > 1:
            self.state.bound_passes(sizes)
        self.monitor = ServerMonitor(self.y, self.config, n_features, self.record_order,
                                     self.group_of)
        self.monitor.skip_to(self.state.clock)

    @property
    def step_size(self) -> float:
        """η in force: the agreed η, halved each time a round of steps left the loss
        of u_C more than ``RISE`` above the lowest it has been, when η is the default
        rule.

        Sequential OS halves η when a step raises the loss; stale steps and
        substitutions raise it by chance, and halving on each such rise shrinks η
        until the run stalls (a round of q pushes froze the kept set on the paper's
        protocol at q = 4: recall 0.08–0.44 against 0.89 for sequential OS).  So the
        server looks once per round of q · depth steps (every worker's pipeline
        once) and only at a real rise: what a step size too large for the staleness
        does (R² −6 on correlated columns without this guard).  A halving starts a
        new reference (the loss then): compared with the lowest loss ever, a rise
        that the smaller steps cannot undo at once (a budget cut's dropped weights)
        would halve η every round after it, down to 1e-267 and a frozen run.
        """
        return self.eta * self.shrink

    def _safeguard(self, steps: int) -> None:
        if self.config.eta is not None:   # the user's η is kept as given
            return
        self._steps_in_round += steps
        if self._steps_in_round < self.config.n_workers * self.config.depth:
            return
        self._steps_in_round = 0
        loss = loss_value(int(self.config.loss), self.state.u, self.y)
        if loss > self._lowest_loss * (1.0 + RISE):
            self.shrink *= 0.5
            self._lowest_loss = loss
        else:
            self._lowest_loss = min(self._lowest_loss, loss)

    @property
    def started(self) -> bool:
        return self.monitor is not None

    @property
    def done(self) -> bool:
        return self.state.done

    @property
    def clock(self) -> int:
        """Updates applied to u_C so far: its version."""
        return self.state.clock

    @property
    def u(self) -> np.ndarray:
        """u_C itself, not a copy (a carrier copies it out at once)."""
        return self.state.u

    def finished(self, worker: int) -> bool:
        """Whether ``worker``'s final report was applied."""
        return self.state.workers[worker].finished

    def owes(self, worker: int) -> bool:
        """Whether ``worker`` owes the server a message: it is neither finished nor
        waiting for credit, so it is stepping (or its reply is on its way to it)."""
        return not self.finished(worker) and not self.state.is_waiting(worker)

    def pushes_applied(self) -> list[int]:
        """Each worker's pushes applied to u_C (its last sequence number)."""
        return [record.messages for record in self.state.workers]

    # -- requests ---------------------------------------------------------------------
    def handle(self, worker: int, message) -> list[tuple[int, object]]:
        """Apply one request of ``worker``; the replies to send, in order.

        Raises ``core.server_state.ProtocolError`` (nothing changed) for a request that
        breaks the protocol; the carrier decides what that costs the worker.
        """
        if isinstance(message, messages.Push):
            return self._push(worker, message)
        if isinstance(message, messages.Pull):
            return self._answer(worker, self.views(self.state.request(worker)))
        if isinstance(message, messages.Final):
            return self._final(worker, message)
        raise NotARequest(f"not a worker request: {type(message).__name__}")

    def _answer(self, worker: int, replies: list) -> list:
        """``replies`` to a request of ``worker`` that asked for a view, with an ACK
        of its pushes when it is held at the sweeps' barrier: a worker that resends
        while it waits (ZeroMQ) then hears from the server, and is not left to
        resend pushes that were applied."""
        if self.state.at_barrier(worker):
            replies.append((worker, messages.Ack(self.state.workers[worker].messages)))
        return replies

    def views(self, workers) -> list[tuple[int, messages.View]]:
        """A view for each of ``workers``, with its credit (and budget granted)."""
        replies = []
        for t in workers:
            u, version, through, credit, granted = self.state.view(t)
            replies.append((t, messages.View(u, version, through, credit, granted or 0,
                                             self.step_size)))
        return replies

    def _push(self, t: int, push: messages.Push) -> list:
        try:
            _, granted = self.state.push(t, push.delta, push.version,
                                         push.features.size, seq=push.seq,
                                         kept=(push.selected, push.weights,
                                               push.position, push.importance),
                                         ask=push.more)
        except DuplicatePush:   # a resend whose answer was lost: answer again
            if push.more:
                return self._answer(t, self.views(self.state.request(t)))
            return [(t, messages.Ack(self.state.workers[t].messages))]
        except OutOfOrderPush:  # the worker resends the missing ones, in order
            return []
        self.monitor.on_push(self.state, t, push.features)
        self._safeguard(push.features.size)
        if push.more:
            return self._answer(t, self.views(granted))
        return [(t, messages.Ack(self.state.workers[t].messages))] + \
            self.views(granted)

    def handle_bundle(self, bundle: messages.Bundle) -> list[tuple[int, object]]:
        """Apply a node leader's ``messages.Bundle`` (its carrier has checked that
        the leader speaks for those workers); the replies to send, in order: an ACK
        for each push that wants no view, then the views the gate grants after the
        whole bundle, then an ACK for each asking worker held at the sweeps'
        barrier (as ``handle`` orders them for one push).  Raises ProtocolError
        (nothing changed) as ``handle`` does; a leader's pushes are never resent."""
        pushes = [(int(t), push.version, push.features.size, push.seq,
                   (push.selected, push.weights, push.position, push.importance),
                   push.more) for t, push in zip(bundle.workers, bundle.pushes,
                                                 strict=True)]
        _, granted = self.state.push_bundle(pushes, bundle.delta)
        replies = []
        for t, push in zip(bundle.workers.tolist(), bundle.pushes):
            self.monitor.on_push(self.state, t, push.features)
            self._safeguard(push.features.size)
            if not push.more:
                replies.append((t, messages.Ack(self.state.workers[t].messages)))
        replies += self.views(granted)
        for t, push in zip(bundle.workers.tolist(), bundle.pushes):
            if push.more and self.state.at_barrier(t):
                replies.append((t, messages.Ack(self.state.workers[t].messages)))
        return replies

    def _final(self, t: int, final: messages.Final) -> list:
        record = self.state.workers[t]
        if record.finished:
            return [(t, messages.Done())]
        if final.seq != record.messages:   # pushes still on their way: it resends
            return []
        budget = self._current_budget(t)
        granted = self.state.finish(t, final.selected, final.weights,
                                    final.contribution, final.columns)
        self.stats[t] = {"steps": int(final.steps), "kept": int(final.selected.size),
                         "budget": budget,
                         "blas_threads": int(final.blas_threads),
                         **dict(zip(SECONDS, np.asarray(final.seconds).tolist()))}
        return [(t, messages.Done())] + self.views(granted)

    def _current_budget(self, t: int) -> int:
        """Worker ``t``'s budget as the results report it: s_t, or with adaptive
        budgets the most it may hold now."""
        return self.state.budgets.held(t) if self.config.adaptive else \
            self.config.budgets[t]

    def lose(self, worker: int, may_return: bool = True
             ) -> list[tuple[int, messages.View]]:
        """``worker`` is gone: its credit is revoked; the views now grantable."""
        return self.views(self.state.lose(worker, may_return))

    def give_up(self, worker: int) -> list[tuple[int, messages.View]]:
        """Lost ``worker`` will not be replaced: the views now grantable."""
        return self.views(self.state.give_up(worker))

    # -- a simulated delivery (solvers/simulator.py) -----------------------------------
    def offer(self, workers) -> int:
        """Record the current u_C as a view each of ``workers`` may act on, without
        credit or budget (the simulator offers every version and schedules which one
        a worker reads); returns the oldest version any of them may still name."""
        for t in workers:
            self.state.view(t, grant=False)
        return min((int(self.state.views_of(t)[0, VERSION]) for t in workers),
                   default=self.state.clock)

    def aged_view(self, worker: int, age: int, last_read: int,
                  steps: int = 1) -> tuple[int, int]:
        """The view ``worker`` reads when it reads u_C as it was ``age`` updates ago
        for a push of up to ``steps`` steps: the newest offered version at least that
        old that it may still use (never older than ``last_read``, nor than the
        credit those steps spend; else the oldest it may), with the budget granted
        now (recorded as a view it may act on).  Returns (version, budget
        granted)."""
        record = self.state.workers[worker]
        upto = record.pushes + min(steps, record.unspent)
        grants = self.state.grants_of(worker)
        holding = np.flatnonzero(grants[:, UPTO] >= upto)   # the grant spent
        floor = max(int(grants[holding[0] if holding.size else -1, VERSION]), last_read)
        views = self.state.views_of(worker)
        usable = views[(views[:, VERSION] >= floor) & (views[:, BUDGET] == NO_BUDGET),
                       VERSION]
        old_enough = usable[usable <= self.state.clock - age]
        chosen = int(old_enough[-1] if old_enough.size else usable[0])
        granted = self.state.budgets.grant(worker) if self.config.adaptive else 0
        if granted:   # granted now: recorded as a view it may act on (held budgets)
            self.state.note_view(worker, granted)
        return chosen, granted

    def rejoin(self, worker: int) -> None:
        """``worker`` (a replacement, or the same one resynchronised) takes over from
        its record, holding no credit until it asks for a view."""
        self.state.rejoin(worker)

    # -- the end ----------------------------------------------------------------------
    def result(self, transport: str) -> FitResult:
        """The run's result; fails loudly when u_C ≠ Σ_t X_S(t) w_S(t)."""
        workers = []
        for t, record in enumerate(self.state.workers):
            stats = self.stats[t] or {"steps": record.pushes, "kept": record.selected.size,
                                      "budget": self._current_budget(t),
                                      **dict.fromkeys(SECONDS, 0.0)}
            workers.append({**stats, "pushes": record.messages, "lost": record.lost})
        result = self.monitor.result(self.state, workers, self.step_size, self.m)
        result.asy.update(transport=transport, depth=self.config.depth,
                          batch=self.config.batch,
                          step_seconds=self.config.step_seconds)
        check_u(result.asy["u_check_max_abs_diff"], self.state.u)
        return result
