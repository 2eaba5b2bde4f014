"""Adaptive budgets: how many features each Asy-OS worker may keep, re-granted from
the weights all workers report.

The paper splits s evenly (s_t = s/q, Yang et al., KDD 2016, Section 4); a shard that
holds more of the strong features than s/q then loses some.  Here the server ranks
the importance of every worker's kept features (``KeptSet.importance``) and grants
each worker, with every view, its share of the global top s plus one trial slot for
its newcomers (docs/architecture.md, "Adaptive budgets", says why the trial slots lie
on top of s on long shards and within it on short ones).  ``AdaptiveBudgets``
reads the server's records and table of the workers (what they pushed, whether they
finished or were lost, the credit they hold) and never changes them.

Words: a *budget* is how many features a worker may keep (s_t); *granted* is the
latest budget sent with a view; *held* is the most it may be keeping now (a budget it
may have acted on); a *final* budget is fixed once its credit reaches the *end* of its
shard (its shard's size times the epochs).  Where the workers' closing sweeps *grow*
(``set_ends``), a worker's sweep may add its newcomers on top of its final budget, and
the assembly cuts the union back to the global top s (``ServerState.assemble``).
"""

import numpy as np
from numba import njit

from .credit_gate import (
    BUDGET,
    COLUMNS,
    CREDIT,
    FINISHED,
    LOST,
    MESSAGES,
    NO_BUDGET,
    PUSHES,
)
from .shards import budget_split

NONE = -1   # no final budget yet; no end (trial slots within s)


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


@njit(cache=True)
def committed_slots(table, granted, final, kept):
    """What each worker was last granted (a finished one: what it kept, less what
    its sweep grew over its final budget, which ``closing_cut`` settles: counted,
    it took the slots of a worker that rejoins later)."""
    slots = np.empty(table.shape[0], np.int64)
    for t in range(table.shape[0]):
        if table[t, FINISHED]:
            slots[t] = kept[t] if final[t] == NONE else min(kept[t], final[t])
        else:
            slots[t] = granted[t] if final[t] == NONE else final[t]
    return slots


@njit(cache=True)
def taken_slots(table, granted, final, kept, on_top):
    """The slots of the top s each worker has taken for good, NONE while it is
    open (``AdaptiveBudgets.settled`` says what counts)."""
    slots = committed_slots(table, granted, final, kept)
    for t in range(table.shape[0]):
        if not (table[t, FINISHED] or table[t, LOST] or final[t] != NONE):
            slots[t] = NONE
        elif table[t, LOST] and final[t] == NONE:
            slots[t] = max(kept[t] - (1 if on_top else 0), 1)
    return slots


@njit(cache=True)
def share_slots(table, granted, final, on_top, s, ranked, sizes, shares):
    """Each open worker's share (``AdaptiveBudgets.shares``) in ``shares``, NONE for
    the others (``ranked[t, :sizes[t]]``: worker t's importance); returns how many
    are open."""
    taken = taken_slots(table, granted, final, sizes, on_top)
    q = table.shape[0]
    n_open, settled, total = 0, 0, 0
    for t in range(q):
        if taken[t] == NONE:
            n_open += 1
            total += sizes[t]
        else:
            settled += taken[t]
    shares[:] = NONE
    if n_open == 0:
        return 0
    # trial slots on top of s (``set_ends``) or, on short shards, within it
    top = max(s - settled - (0 if on_top else n_open), 0)
    values, owned = np.empty(total), np.empty(n_open, np.int64)
    at, k = 0, 0
    for t in range(q):
        if taken[t] == NONE:
            size = sizes[t]
            values[at:at + size] = ranked[t, :size]
            owned[k] = size
            at, k = at + size, k + 1
    counts = top_counts(values, owned, top)
    left = top - counts.sum()
    each, extra = left // n_open, left % n_open
    k = 0
    for t in range(q):
        if taken[t] == NONE:
            shares[t] = counts[k] + each + (1 if k < extra else 0)
            k += 1
    return n_open


@njit(cache=True)
def held_slots(table, views, granted, kept, worker):
    """``AdaptiveBudgets.held`` of ``worker``, whose views are ``views``."""
    if table[worker, FINISHED]:
        return kept[worker]
    most = kept[worker]
    for row in range(views.shape[0]):
        if views[row, BUDGET] != NO_BUDGET:
            most = max(most, views[row, BUDGET])
    if table[worker, MESSAGES] == 0:
        most = max(most, granted[worker])
    return most


@njit(cache=True)
def settled_slots(table, granted, final, kept, on_top):
    """Σ of the slots the workers took for good (``taken_slots``)."""
    settled = 0
    for slots in taken_slots(table, granted, final, kept, on_top):
        if slots != NONE:
            settled += slots
    return settled


@njit(cache=True)
def grant_on_top(table, granted, final, end, ranked, sizes, shares, s, grow, worker):
    """``AdaptiveBudgets.grant`` where the trial slots lie on top of s: ``worker``'s
    budget from now on, its granted (and final) budget recorded."""
    if final[worker] != NONE:
        if grow and table[worker, PUSHES] >= end[worker]:   # its sweep
            return min(final[worker] + grow, s + 1)   # ≤ its capacity
        return final[worker]
    n_open = share_slots(table, granted, final, True, s, ranked, sizes, shares)
    committed = committed_slots(table, granted, final, sizes)
    others = committed.sum() - committed[worker]
    most = max(granted[worker], s + table.shape[0] - others)
    if table[worker, CREDIT] >= end[worker]:
        room = s - settled_slots(table, granted, final, sizes, True) - (n_open - 1)
        final[worker] = max(1, min(shares[worker], room, most))
        granted[worker] = final[worker]
        return final[worker]
    granted[worker] = max(1, min(shares[worker] + 1, most))
    return granted[worker]


def warm_budgets() -> None:
    """Load (or compile) the budgets' kernels."""
    top_counts(np.zeros(1), np.ones(1, np.int64), 1)
    ones = np.ones(1, np.int64)
    table = np.zeros((1, COLUMNS), np.int64)
    taken_slots(table, ones, ones, ones, True)
    share_slots(table, ones, ones, True, 1, np.zeros((1, 1)), ones, ones.copy())
    held_slots(table, np.zeros((1, 3), np.int64), ones, ones, 0)
    grant_on_top(table, ones.copy(), ones.copy(), ones, np.zeros((1, 1)), ones,
                 ones.copy(), 1, 0, 0)


class AdaptiveBudgets:
    """The budgets of the workers of ``state`` (the server's ``ServerState``: its
    workers' records and table, read only), sharing ``s``.

    They start at s_t (the paper's split) and are re-granted with every view by
    ``grant``.  While it runs, a worker holds its share of the global top s plus one
    trial slot.  After ``set_ends`` the trial slots lie on top of s, so the latest
    budgets granted sum to at most s + q, and from the view that lets a worker reach
    the end of its shard it keeps its final share of the top s, without the trial
    slot: the features all workers end with number at most s (with growing sweeps,
    at most s + q·``grow`` until ``closing_cut`` keeps the top s).  Without it (short
    shards: ``solvers.asy.trials_on_top``) they lie within s, and the budgets any
    worker may be holding sum to at most s at every moment (``held``).

    Each worker's budget state is a cell of three arrays, read in bulk at every view:
    the latest budget granted (with a view); its final budget (NONE until its credit
    reaches its end); its end, the steps it takes in all (NONE: trial slots within
    s).
    """

    def __init__(self, s: int, state):
        self.s, self.state, self.workers, self.table = s, state, state.workers, state.table
        q = len(self.workers)
        self._granted = np.array(budget_split(s, q), np.int64)
        self._final = np.full(q, NONE, np.int64)
        self._end = np.full(q, NONE, np.int64)
        self._shares = np.zeros(q, np.int64)
        # each worker's kept set's importance, row t's first ranked_sizes[t] values
        # (its kept set's size): a worker holds at most s + 1 (its ``held``), rows
        # grow where one says more
        self.ranked, self.ranked_sizes = np.zeros((q, s + 2)), np.zeros(q, np.int64)
        for t, record in enumerate(self.workers):
            self.rank(t, record.importance)
        self.grow = 0   # the newcomers a closing sweep may add (``set_ends``)
        warm_budgets()   # compiled now, not mid-run

    def rank(self, worker: int, importance: np.ndarray) -> None:
        """``worker``'s kept set and its ``importance`` are now these."""
        if importance.size > self.ranked.shape[1]:
            self.ranked = np.pad(self.ranked, ((0, 0), (0, importance.size)))
        self.ranked[worker, :importance.size] = importance
        self.ranked_sizes[worker] = importance.size

    @property
    def granted(self) -> list[int]:
        return self._granted.tolist()

    @property
    def final(self) -> list[int | None]:
        return [None if f == NONE else f for f in self._final.tolist()]

    @property
    def on_top(self) -> bool:
        """Whether the trial slots lie on top of s (``set_ends`` was called)."""
        return bool(self._end[0] != NONE)

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
        ends = [int(end) for end in ends]
        if len(ends) != self._end.size:
            raise ValueError(f"{len(ends)} ends for {self._end.size} workers")
        self._end[:] = ends
        self.grow = int(grow)

    def held(self, worker: int) -> int:
        """The most features ``worker`` may hold now: its last pushed kept set, or any
        budget sent with a view it may have acted on since (all of them before its
        first push: its initial share counts too)."""
        return int(held_slots(self.table, self.state.views_of(worker), self._granted,
                              self.ranked_sizes, worker))

    def released(self, worker: int, kept: int) -> None:
        """``worker`` finished keeping ``kept`` features: its unused slots go back to
        the others."""
        self._granted[worker] = kept

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
        return int(settled_slots(self.table, self._granted, self._final,
                                 self.ranked_sizes, self.on_top))

    def committed(self) -> np.ndarray:
        """What each worker was last granted (``committed_slots``)."""
        return committed_slots(self.table, self._granted, self._final,
                               self.ranked_sizes)

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
        share_slots(self.table, self._granted, self._final, self.on_top, self.s,
                    self.ranked, self.ranked_sizes, self._shares)
        return {t: share for t, share in enumerate(self._shares.tolist())
                if share != NONE}

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
        if self.on_top:
            return int(grant_on_top(self.table, self._granted, self._final, self._end,
                                    self.ranked, self.ranked_sizes, self._shares,
                                    self.s, self.grow, worker))
        # trial slots within s: Σ held ≤ s at every moment
        share_slots(self.table, self._granted, self._final, False, self.s, self.ranked,
                    self.ranked_sizes, self._shares)
        others = sum(self.held(t) for t in range(len(self.workers)) if t != worker)
        granted = max(1, min(int(self._shares[worker]) + 1, self.s - others))
        self._granted[worker] = granted
        return granted

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> dict[str, np.ndarray]:
        """Plain arrays for ``ServerState.snapshot`` (the ends are the server's to set
        again at its start)."""
        return {"s": np.array(self.s, dtype=np.int64), "granted": self._granted.copy(),
                "final": self._final.copy()}   # NONE = -1: none yet

    @classmethod
    def restore(cls, arrays, state) -> "AdaptiveBudgets":
        budgets = cls(int(arrays["s"]), state)
        budgets._granted[:] = arrays["granted"]
        budgets._final[:] = np.where(arrays["final"] < 0, NONE, arrays["final"])
        return budgets
