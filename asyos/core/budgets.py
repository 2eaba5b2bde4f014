"""Adaptive budgets: how many features each Asy-OS worker may keep, re-granted from
the weights all workers report.

The paper splits s evenly (s_t = s/q, Yang et al., KDD 2016, Section 4); a shard that
holds more of the strong features than s/q then loses some.  Here the server ranks
the importance of every worker's kept features (``KeptSet.importance``) and grants
each worker, with every view, its share of the global top s plus one trial slot for
its newcomers (docs/architecture.md, "Adaptive budgets", says why the trial slots lie
on top of s on long shards and within it on short ones).  Each worker's budget state
is its own ``Budget``; ``AdaptiveBudgets`` reads the workers' records (what they
pushed, whether they finished or were lost, the credit they hold) and never changes
them.

Words: a *budget* is how many features a worker may keep (s_t); *granted* is the
latest budget sent with a view; *held* is the most it may be keeping now (a budget it
may have acted on); a *final* budget is fixed once its credit reaches the *end* of its
shard (its shard's size times the epochs).  Where the workers' closing sweeps *grow*
(``set_ends``), a worker's sweep may add its newcomers on top of its final budget, and
the assembly cuts the union back to the global top s (``ServerState.assemble``).
"""

from dataclasses import dataclass

import numpy as np
from numba import njit

from .shards import budget_split


@njit(cache=True)
def top_counts(values, sizes, top):
    """How many of each owner's ``values`` are among the ``top`` largest of all:
    the owners' values lie one after another, ``sizes[k]`` of owner k, and a tie
    goes to the earlier owner.  One compiled call: the server ranks the workers'
    kept features at every view it grants."""
    owner = np.empty(values.size, np.int64)
    at = 0
    for k in range(sizes.size):
        for _ in range(sizes[k]):
            owner[at] = k
            at += 1
    order = np.argsort(-values, kind="mergesort")   # stable: ties in owner order
    counts = np.zeros(sizes.size, np.int64)
    for i in range(min(top, values.size)):
        counts[owner[order[i]]] += 1
    return counts


@dataclass
class Budget:
    """One worker's budget state."""

    granted: int              # the latest budget granted (with a view)
    final: int | None = None  # fixed once its credit reaches ``end``
    end: int | None = None    # its steps in all (trial slots on top of s), else None


class AdaptiveBudgets:
    """The budgets of the workers whose records are ``workers`` (the server's
    ``WorkerRecord`` list, read only), sharing ``s``.

    They start at s_t (the paper's split) and are re-granted with every view by
    ``grant``.  While it runs, a worker holds its share of the global top s plus one
    trial slot.  After ``set_ends`` the trial slots lie on top of s, so the latest
    budgets granted sum to at most s + q, and from the view that lets a worker reach
    the end of its shard it keeps its final share of the top s, without the trial
    slot: the features all workers end with number at most s (with growing sweeps,
    at most s + q·``grow`` until ``closing_cut`` keeps the top s).  Without it (short
    shards: ``solvers.asy.trials_on_top``) they lie within s, and the budgets any
    worker may be holding sum to at most s at every moment (``held``).
    """

    def __init__(self, s: int, workers: list):
        self.s, self.workers = s, workers
        self.of = [Budget(b) for b in budget_split(s, len(workers))]
        self.grow = 0   # the newcomers a closing sweep may add (``set_ends``)
        top_counts(np.zeros(1), np.ones(1, np.int64), 1)   # compiled now, not mid-run

    @property
    def granted(self) -> list[int]:
        return [b.granted for b in self.of]

    @property
    def final(self) -> list[int | None]:
        return [b.final for b in self.of]

    @property
    def on_top(self) -> bool:
        """Whether the trial slots lie on top of s (``set_ends`` was called)."""
        return self.of[0].end is not None

    def set_ends(self, ends, grow: int = 0) -> None:
        """The steps each worker takes in all (its shard's size times the epochs):
        a view whose credit reaches them grants the worker its final budget.

        ``grow`` > 0: the arrivals of each worker's closing sweep, which it may keep on
        top of its final budget (a view granted once all its passes are applied says
        so).  A final budget is fixed from the ranking at the end of the passes, when
        the true features no worker holds yet are not in it: a worker at its final
        budget with only true features could take one its sweep found only by
        dropping another of its own, while another worker's final budget kept slots
        for noise.  Grown, the sweeps' newcomers all compete in the global cut to s
        at the assembly (docs/architecture.md, "The closing cut")."""
        for budget, end in zip(self.of, ends, strict=True):
            budget.end = int(end)
        self.grow = int(grow)

    def held(self, worker: int) -> int:
        """The most features ``worker`` may hold now: its last pushed kept set, or any
        budget sent with a view it may have acted on since (all of them before its
        first push: its initial share counts too)."""
        record = self.workers[worker]
        if record.finished:
            return record.selected.size
        budgets = [v.budget for v in record.sent if v.budget is not None]
        if record.messages == 0:
            budgets.append(self.of[worker].granted)
        return max([record.selected.size, *budgets])

    def released(self, worker: int, kept: int) -> None:
        """``worker`` finished keeping ``kept`` features: its unused slots go back to
        the others."""
        self.of[worker].granted = kept

    def settled(self) -> int:
        """Slots of the top s taken for good: finished workers' kept sets, the final
        budgets of workers in their last steps, and a lost worker's kept set less its
        trial slot where those lie on top of s (it can drop nothing until it rejoins,
        it needs at least one slot then, and it is granted its final share of what is
        left then; its final budget, if it had one, holds).  Counting the trial slot
        too cut the survivors' final budgets by one for a worker that was only slow:
        a run whose worker was paused past the heartbeat timeout lost a true feature
        the undisturbed run kept.  If it never rejoins, ``lost_cut`` drops its
        surplus from the result."""
        return sum(taken for t, record in enumerate(self.workers)
                   if (taken := self._taken(t, record)) is not None)

    def _taken(self, t: int, record) -> int | None:
        """The slots of the top s worker t has taken for good (``settled``), or None
        while it is open: running, without a final budget."""
        budget = self.of[t]
        if not (record.finished or record.lost or budget.final is not None):
            return None
        if record.lost and budget.final is None:
            return max(record.selected.size - (1 if self.on_top else 0), 1)
        return self.committed(t)

    def closing_cut(self, kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
                    ) -> list[np.ndarray]:
        """Where the closing sweeps grew (``set_ends``) and ``kept`` (each worker's
        (indices, weights, importance)) holds more than s features: the positions in
        each worker's kept set of the global top s by importance, its kept set's
        order kept; else every position.  What a worker's sweep added and the cut
        drops is still in u_C; the result's weights are refit on what is kept."""
        sizes = np.array([len(k[0]) for k in kept], np.int64)
        if not self.grow or sizes.sum() <= self.s:
            return [np.arange(size) for size in sizes]
        counts = top_counts(np.concatenate([k[2] for k in kept] + [np.zeros(0)]),
                            sizes, self.s)
        return [np.sort(np.argsort(-k[2], kind="stable")[:count])
                for k, count in zip(kept, counts)]

    def lost_cut(self) -> dict[int, int]:
        """How many of its kept features each worker lost for good contributes to the
        result, where the kept sets hold more than s (a lost worker's trial slot, not
        counted by ``settled``): its most important ones.  The run is partial, so its
        result is the acknowledged weights less those; u_C still holds them."""
        excess = sum(r.selected.size for r in self.workers) - self.s
        keep = {}
        if self.grow:   # ``closing_cut`` ranks every kept set, lost ones included
            return keep
        for t, record in enumerate(self.workers):
            if record.lost and excess > 0:
                drop = min(excess, record.selected.size - 1)
                keep[t], excess = record.selected.size - drop, excess - drop
        return keep

    def shares(self) -> dict[int, int]:
        """Each open worker's share (running, no final budget yet) of the slots of the
        top s not settled: how many of the most important of the open workers' last
        pushed kept features are its own (``KeptSet.importance``: |w| under the
        paper's rule, the square root of the cost of dropping it under the fitted
        rule, which does not depend on the column's scale), plus an even share of the
        slots no weight claims yet.  ``grant`` adds the trial slot.

        The trial slot is where a worker tries its newcomers; once one ranks among the
        global top it earns a slot, and a worker whose weights fall behind loses one:
        the union of the kept sets approaches the global top s of sequential OS.  The
        trial slots lie on top of the s: taken from the s, each worker's weakest
        feature had to survive in its own slot, which cost 0.05–0.08 of recall at
        q = 8–11 (docs/results.md, "Asy-OS recall against sequential OS").
        """
        open_, importances, settled = [], [], 0   # one pass: asked at every view
        for t, record in enumerate(self.workers):
            taken = self._taken(t, record)
            if taken is None:
                open_.append(t)
                importances.append(record.importance)
            else:
                settled += taken
        if not open_:
            return {}
        # trial slots on top of s (``set_ends``) or, on short shards, within it
        top = max(self.s - settled - (0 if self.on_top else len(open_)), 0)
        counts = top_counts(np.concatenate(importances),
                            np.array([v.size for v in importances], np.int64),
                            top).tolist()   # Python ints: read once each below
        each, extra = divmod(top - sum(counts), len(open_))
        return {t: count + each + (1 if k < extra else 0)
                for k, (t, count) in enumerate(zip(open_, counts))}

    def committed(self, worker: int) -> int:
        """What ``worker`` was last granted (a finished one: what it kept, less what
        its sweep grew over its final budget, which ``closing_cut`` settles: counted,
        it took the slots of a worker that rejoins later)."""
        record, budget = self.workers[worker], self.of[worker]
        if record.finished:
            return record.selected.size if budget.final is None else \
                min(record.selected.size, budget.final)
        return budget.granted if budget.final is None else budget.final

    def grant(self, worker: int) -> int:
        """``worker``'s budget from now on (sent with its view).

        Trial slots within s: its share plus the trial slot, limited by what the
        others may be holding.  On top of s (``set_ends``), an open worker gets its
        share plus the trial slot; once its credit reaches the end of its shard, its
        final share, fixed, and never so large that an open worker could not keep one
        feature, so the final budgets sum to at most s.  There the latest grants sum
        to at most s + q: a worker gets more than it had only from what the others'
        grants leave, and never less because of them (a budget lowered drops features
        for good, so only its own share may lower it).
        """
        budget = self.of[worker]
        if budget.final is not None:
            if self.grow and self.workers[worker].pushes >= budget.end:   # its sweep
                return min(budget.final + self.grow, self.s + 1)   # ≤ its capacity
            return budget.final
        shares = self.shares()
        q = len(self.workers)
        if not self.on_top:   # trial slots within s: Σ held ≤ s at every moment
            others = sum(self.held(t) for t in range(q) if t != worker)
            budget.granted = max(1, min(shares[worker] + 1, self.s - others))
            return budget.granted
        others = sum(self.committed(t) for t in range(q) if t != worker)
        most = max(budget.granted, self.s + q - others)
        if self.workers[worker].credit >= budget.end:
            room = self.s - self.settled() - (len(shares) - 1)
            budget.final = budget.granted = max(1, min(shares[worker], room, most))
            return budget.final
        budget.granted = max(1, min(shares[worker] + 1, most))
        return budget.granted

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> dict[str, np.ndarray]:
        """Plain arrays for ``ServerState.snapshot`` (the ends are the server's to set
        again at its start)."""
        return {"s": np.array(self.s, dtype=np.int64),
                "granted": np.array(self.granted, dtype=np.int64),
                "final": np.array([-1 if f is None else f for f in self.final],
                                  dtype=np.int64)}

    @classmethod
    def restore(cls, arrays, workers: list) -> "AdaptiveBudgets":
        budgets = cls(int(arrays["s"]), workers)
        for budget, granted, final in zip(budgets.of, arrays["granted"],
                                          arrays["final"], strict=True):
            budget.granted = int(granted)
            budget.final = None if final < 0 else int(final)
        return budgets
