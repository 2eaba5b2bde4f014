"""Asy-OS in one process: q virtual workers over the real server (Yang et al., KDD
2016, Section 4's staleness model).

For staleness studies on one machine.  The simulator is a carrier that hands the
protocol's messages over in memory: the workers are the same ``WorkerDriver``s around
``worker_loop`` that MPI and ZeroMQ drive, the server is the same ``AsyServer`` (it
checks every view a push names and records its staleness) and the results are the
same result.  Only the delivery of views is scheduled, deterministically for a seed:

* **delay mode** (default): the workers take turns (round-robin over those that still
  have features, or a seeded random pick); at its turn worker t reads u_C as it was
  τ_k updates ago (τ_k = ``delay``, or uniform in 0..``delay`` with ``random_delay``;
  ``delay`` None is the paper's τ_max = q), plus its own later pushes (a worker always
  sees its own steps).  A worker cannot read a version older than the one it read
  last, nor one older than the credit it spends (``core.server_state``); then it
  reads the oldest it may.
* **virtual clock** (``clock=Clock(...)``, or ``(a, c_comm)``): each push of a
  worker costs its steps, its substitutions and its own share of the push on its own
  core, then waits its turn at the one server (a queue served one push at a time, on
  worker 0's core for the shared-memory carrier, behind a network link for remote
  workers).  A worker pulls at the start of a push the u_C applied by then, and its
  push is applied when the server is done with it, so staleness arises from the
  timing as on a real machine with one core per worker; the result carries
  ``virtual_seconds`` and a trace against virtual time, from which speedups on more
  cores than this machine has are modelled (``Clock`` says what each term stands
  for).
"""

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from ..core.losses import Loss
from ..core.projection import group_constraint
from ..core.validate import check_at_least, check_labels
from ..errors import InputError
from ..streams import as_stream
from . import messages
from .asy import AsyConfig, shard_of
from .asy_server import AsyServer
from .result import FitResult
from .worker_loop import WorkerDriver, worker_loop

ORDERS = ("round_robin", "random")
UNBOUNDED = 1 << 30   # the credit of a clock with no window: more steps than a run
ARRIVE, START = 0, 1  # the virtual clock's events (a push arriving first, at a tie)


def fit_simulated(source, y, s, n_workers, *, delay=None, random_delay=False,
                  order="round_robin", clock=None, budget="auto", loss="squared",
                  epochs="auto", eta="auto", m="auto", seed=0, record_order=False,
                  groups=None, s2=None, rule="auto", ridge=None,
                  sweep="auto") -> FitResult:
    """Run Asy-OS with ``n_workers`` virtual workers in this process.

    Parameters
    ----------
    source, y, s, loss, eta, m, epochs, rule, ridge, sweep : as for ``fit_os``
        The data, the budget and the workers' OS (``epochs`` "auto": 3 passes;
        ``sweep``: each worker's closing sweep, over its shard).
    n_workers : int
        q, the virtual workers, each on its shard (``asy.worker_shard``).
    delay : int or None, default=None
        τ, the age in updates of the u_C every step reads (None: q, the paper's).
    random_delay : bool, default=False
        Each step draws its age from 0..τ instead (seeded by ``seed``).
    order : "round_robin", "random" or a sequence of worker indices
        Which worker steps next: in turn, a seeded random pick, or an explicit
        schedule (e.g. the order a real run recorded, ``result.asy["order"]``).
    clock : Clock, (a, c_comm) or None, default=None
        The virtual-clock mode instead of ``delay``: steps, pushes and the server
        cost what ``Clock`` says (a pair (a, c_comm) is ``Clock(0, a, c_comm)``,
        the paper's a·n·(|S(t)| + 2) + c_comm per step and a free server), and the
        staleness is what those times make it (the module's docstring).
    budget : "auto", "adaptive" or "fixed", default="auto"
        "fixed": s/q per worker (the paper's); "adaptive": the server re-grants the
        budgets from a global |w| threshold with every view
        (``AdaptiveBudgets.grant``); "auto": adaptive, fixed with groups.
    seed : int, default=0
        The seed of ``random_delay`` and ``order="random"``.
    record_order : bool, default=False
        Keep the worker of every step in ``result.asy["order"]``.
    groups, s2 : array of group labels and the group budget, or None
        Group-aware Asy-OS: each shard is a set of whole groups and the workers'
        budgets (s1_t, s2_t) sum to (s, s2).

    Returns
    -------
    FitResult
        The selection, with ``asy`` holding the workers' budgets, the staleness of
        every step and its bound, and the u_C check (``virtual_seconds`` in the
        virtual-clock mode).
    """
    loss = Loss.parse(loss)
    stream = as_stream(source)
    n, p = stream.n_samples, stream.n_features
    y = check_labels(y, loss, n)
    q = check_at_least("n_workers", n_workers, 1, integer=True)
    if clock is None:
        tau = q if delay is None else check_at_least("delay", delay, 0, integer=True)
        if isinstance(order, str) and order not in ORDERS:
            raise InputError(f"order must be one of {', '.join(ORDERS)} or a list of "
                             f"workers, got {order!r}")
    else:
        if delay is not None or random_delay:
            raise InputError("the virtual clock makes its own staleness: give either "
                             "clock or delay, not both")
        tau = None
        clock = _check_clock(clock)
    # the delay or the clock is the staleness model: no gate, and credit deep enough
    # to read what it makes (the clock's window, as a real pipeline's credit); the
    # delay schedules single steps, the clock pushes of its batch
    batch = 1 if clock is None else max(1, round(clock.batch))
    depth = tau + 1 if clock is None else clock.window or UNBOUNDED
    group_of, s2 = group_constraint(groups, s2, p) or (None, None)
    config = AsyConfig.build(s, q, loss=loss, epochs=epochs, eta=eta, m=m,
                             staleness=None, window=-(-depth // batch), batch=batch,
                             n_features=p, s2=s2, budget=budget, rule=rule,
                             ridge=ridge, sweep=sweep)
    shards = [shard_of(stream, config, t, group_of) for t in range(q)]
    eta_m = config.eta_and_m(n, max(shard.nu for shard in shards))
    sim = _Simulation(y, config, shards, eta_m, p, record_order, group_of)
    if clock is None:
        sim.run_delayed(tau, random_delay, order, np.random.default_rng(seed))
    else:
        sim.run_clocked(clock)
    return sim.result()


@dataclass(frozen=True)
class Clock:
    """What the virtual clock charges, in seconds (docs/algorithms.md, "The cost
    model").

    * A worker holding |S| features spends ``step + column · n · (|S| + 2)`` on each
      feature step (a fixed part, and the kept columns, the new one and the
      residual: the paper's a·n·(|S| + 2) is ``Clock(0, a)``), ``swap`` for each
      substitution (a newcomer kept in place of another: the fitted rule solves
      again for the kept weights, so the first passes cost the most; a rule that
      does not count them is charged for each newcomer its push keeps), and
      ``push / batch`` of its own time per step outside its kernel: a push
      carries ``batch`` steps, and the worker loop's Python around the kernel, the
      encoding, the sending and the reading of a view are shared by them.
    * The server applies pushes one at a time, in the order they reach it, and
      spends ``serve / batch`` per step on them (a push's bookkeeping, shared by its
      steps).  ``host``: it runs on worker 0's core, between worker 0's steps (the
      shared-memory carrier), so every push it serves delays worker 0; otherwise it
      has a core of its own.
    * The last ``remote`` workers are on other machines: their pushes reach the
      server ``latency`` later and their views come back ``latency`` later, and the
      server's link carries their Δu and view (16·n bytes a push) at ``bandwidth``
      bytes per second, one push at a time, like its time.
    * ``window``: the steps a worker may have pushed but not yet applied before it
      waits (the pipeline that the staleness bound allows; 0: no limit).
    """

    step: float
    column: float = 0.0
    swap: float = 0.0
    push: float = 0.0
    serve: float = 0.0
    batch: float = 1.0
    host: bool = False
    remote: int = 0
    latency: float = 0.0
    bandwidth: float = math.inf
    window: int = 0

    def compute(self, n: int, kept: int) -> float:
        """A step's compute with ``kept`` features held: the kept columns, the new
        one and the residual, n·(|S| + 2) numbers read."""
        return self.step + self.column * n * (kept + 2)

    def checked(self) -> "Clock":
        values = {"step": self.step, "column": self.column, "swap": self.swap,
                  "push": self.push, "serve": self.serve, "latency": self.latency}
        for name, value in values.items():
            if not (math.isfinite(value) and value >= 0):
                raise InputError(f"clock: {name} must be a finite number ≥ 0, got "
                                 f"{value!r}")
        if self.step + self.column <= 0:
            raise InputError("clock: a step must cost something (step or column > 0)")
        if not self.bandwidth > 0:
            raise InputError(f"clock: bandwidth must be > 0, got {self.bandwidth!r}")
        if not (math.isfinite(self.batch) and self.batch >= 1):
            raise InputError(f"clock: batch (steps per push) must be ≥ 1, got "
                             f"{self.batch!r}")
        for name in ("remote", "window"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 0:
                raise InputError(f"clock: {name} must be an integer ≥ 0, got "
                                 f"{value!r}")
        return self


def _check_clock(clock) -> Clock:
    if isinstance(clock, Clock):
        return clock.checked()
    try:
        a, c_comm = (float(v) for v in clock)
    except (TypeError, ValueError):
        raise InputError(f"clock must be a Clock or (a, c_comm), two numbers; got "
                         f"{clock!r}") from None
    if not (np.isfinite(a) and np.isfinite(c_comm) and a > 0 and c_comm >= 0):
        raise InputError(f"clock needs a > 0 and c_comm ≥ 0, got ({a}, {c_comm})")
    return Clock(step=0.0, column=a, push=c_comm)


class _Simulation:
    """The server, the q worker drivers and the u_C versions they may read."""

    def __init__(self, y, config: AsyConfig, shards, eta_m, n_features, record_order,
                 group_of):
        n, q = y.shape[0], config.n_workers
        self.config = config
        self.server = AsyServer(y, config, record_order=record_order, group_of=group_of)
        self.server.start(n_features, *eta_m)
        # pushes of the configured batch (1 in delay mode), never resized
        plans = [replace(config.plan(t, *eta_m), adaptive_push=False)
                 for t in range(q)]
        self.drivers = [WorkerDriver(worker_loop(shards[t].stream, y, plans[t],
                                                 groups=shards[t].groups), n)
                        for t in range(q)]
        self.credit = [0] * q                # the newest credit the server granted
        self.kept = [0] * q                  # |S(t)| after each worker's last push
        self.applied = [[] for _ in range(q)]   # the clock after each one's pushes
        self.history: dict[int, np.ndarray] = {}   # the versions a worker may read
        self.virtual: list[float] = []       # virtual time of each trace point
        self.now = 0.0
        for t in range(q):
            self._deliver(self.server.handle(t, self.drivers[t].start()))
        self._publish()

    @property
    def active(self) -> list[int]:
        return [t for t, d in enumerate(self.drivers) if not d.finished]

    def _deliver(self, replies) -> None:
        """The server's answers: only their credit matters here (views are read from
        the history, at the scheduled age)."""
        for t, reply in replies:
            if isinstance(reply, messages.View):
                self.credit[t] = max(self.credit[t], reply.credit)

    def _publish(self) -> None:
        """A new version of u_C, offered to every running worker; versions no worker
        may read any more are forgotten."""
        self.history[self.server.clock] = self.server.u.copy()
        oldest = self.server.offer(self.active)
        for version in [v for v in self.history if v < oldest]:
            del self.history[version]

    def _read(self, t: int, age: int) -> None:
        """Deliver to worker t the newest version at least ``age`` updates old that it
        may still use (``AsyServer.aged_view``)."""
        version, granted = self.server.aged_view(t, age, self.drivers[t].view.version,
                                                 self.config.batch)
        # its pushes in that version, by number (the server counts their steps)
        through = bisect.bisect_right(self.applied[t], version)
        self.drivers[t].receive(messages.View(self.history[version], version, through,
                                              self.credit[t], granted,
                                              self.server.step_size))

    def may_step(self, t: int) -> bool:
        """Whether worker t holds credit: always, but while the closing sweeps'
        barrier holds it (``ServerState.hold_sweeps``)."""
        return self.credit[t] > self.drivers[t].view.spent

    def _step(self, t: int) -> None:
        """Worker t steps from its view and pushes; the server applies it."""
        self._apply(t, self.drivers[t].advance())

    def _apply(self, t: int, push) -> None:
        """The server applies worker t's push (and its final report after its
        last), at ``self.now``; None: its last pull took no steps."""
        driver = self.drivers[t]
        if push is not None:
            self._deliver(self.server.handle(t, push))
            self.kept[t] = push.selected.size
            self.applied[t].append(self.server.clock)
        if driver.ending:   # its last step: Final
            driver.advance()
            self._deliver(self.server.handle(t, driver.final_message()))
        if len(self.server.monitor.trace) > len(self.virtual):
            self.virtual.append(self.now)
        self._publish()

    def run_delayed(self, tau: int, random_delay: bool, order, rng) -> None:
        turn = 0
        schedule = None if isinstance(order, str) else iter(order)
        while self.active:
            active = [t for t in self.active if self.may_step(t)]
            if schedule is not None:
                t = next(schedule, None)
                if t not in active:
                    raise InputError(f"the schedule names {t!r} at step "
                                     f"{self.server.clock + 1}, but the workers that "
                                     f"may step now are {active}")
            elif order == "random":
                t = active[int(rng.integers(len(active)))]
            else:
                t = min(active, key=lambda w: (w - turn) % len(self.drivers))
                turn = t + 1
            age = int(rng.integers(tau + 1)) if random_delay else tau
            self._read(t, age)
            self._step(t)

    def run_clocked(self, clock: Clock) -> None:
        """Events in time order: a worker starts a push (it reads the u_C applied by
        then, a remote worker's as it was ``latency`` before, and takes its steps),
        its push reaches the server, which applies it when it has served it
        (``Clock``); the next push starts at once, or when the window allows."""
        n, q, batch = self.server.u.size, len(self.drivers), self.config.batch
        scale = batch / clock.batch   # the costs per push, for pushes of ``batch``
        remote = range(max(q - clock.remote, 0), q)
        lag = [clock.latency if t in remote else 0.0 for t in range(q)]
        link = 16 * n / clock.bandwidth
        serve = [scale * (clock.serve + (link if t in remote else 0.0))
                 for t in range(q)]
        own = scale * clock.push
        times, versions = [0.0], [0]   # when each version of u_C was applied
        waiting = [deque(maxlen=max(1, -(-clock.window // batch))) for _ in range(q)]
        start, finish = [0.0] * q, [0.0] * q
        pending = [None] * q
        held = [np.zeros(0, np.int64) for _ in range(q)]   # for newcomers
        events = [(0.0, START, t) for t in range(q)]
        free = 0.0   # when the server is done with the pushes it has had
        barred = []  # workers held at the sweeps' barrier
        while events:
            now, kind, t = heapq.heappop(events)
            if kind == START:
                if not self.may_step(t):   # at the sweeps' barrier: until it opens
                    barred.append(t)
                    continue
                if clock.host and t == 0:
                    now = max(now, free)   # its core serves what has arrived first
                seen = versions[bisect.bisect_right(times, now - lag[t]) - 1]
                self._read(t, self.server.clock - seen)
                push = pending[t] = self.drivers[t].advance()
                if push is None:   # its last pull took no steps: its final report
                    finish[t] = now
                    heapq.heappush(events, (now + lag[t], ARRIVE, t))
                    continue
                swaps = self.drivers[t].swaps
                if swaps is None:   # a rule that does not count them: newcomers kept
                    swaps = np.setdiff1d(push.selected, held[t],
                                         assume_unique=True).size
                held[t] = push.selected
                start[t] = now
                finish[t] = now + push.features.size * clock.compute(
                    n, self.kept[t]) + clock.swap * swaps + own
                heapq.heappush(events, (finish[t] + lag[t], ARRIVE, t))
                continue
            begins = max(now, free)
            if clock.host and t and now < finish[0]:
                begins = max(begins, finish[0])   # worker 0's core: between its pushes
            free = self.now = begins + serve[t]
            self._apply(t, pending[t])
            times.append(free)
            versions.append(self.server.clock)
            for w in [w for w in barred if self.may_step(w)]:
                barred.remove(w)
                heapq.heappush(events, (free, START, w))
            if self.drivers[t].finished:
                continue
            waiting[t].append(free)
            nxt = free if clock.host and t == 0 else finish[t]
            if clock.window and len(waiting[t]) == waiting[t].maxlen:
                nxt = max(nxt, waiting[t][0] + lag[t])   # the bound: wait for credit
            heapq.heappush(events, (nxt, START, t))

    def result(self) -> FitResult:
        result = self.server.result("simulator")
        if self.virtual:
            result.virtual_seconds = self.now
            # the joint refit's point, if any, at the end (the model does not time it)
            points = len(result.trace["steps"])
            result.trace["virtual_seconds"] = self.virtual + \
                [self.now] * (points - len(self.virtual))
        return result
