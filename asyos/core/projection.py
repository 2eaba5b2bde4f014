"""The exact bi-level projection SGHT (Xiang et al., KDD 2014), compiled with numba.

SGHT(v) keeps at most s1 entries of v, drawn from at most s2 groups, maximising the
retained ‖x‖² (every optimal x has x_i ∈ {v_i, 0}: Xiang et al., KDD 2014,
Proposition 1).  Neither greedy order is exact (neither "top s1 features, then drop
groups" nor "top s2 groups by norm, then top s1 features"), so the support comes from
the paper's dynamic program over groups (Algorithm 3), with the argmax recovered by
backtracking through a path table (Algorithm 4).

Two kernels share the DP and the recovery: ``bilevel_keep`` sorts everything and takes
any integer labels (a kept set of ≤ s1 + 1 features in group-aware OS);
``bilevel_keep_compact`` takes compact group ids and sorts only each group's top s1
(long vectors: ``bilevel_projection``, the SGHT solver).  The public
``bilevel_projection`` validates its input in Python first.

Both run the DP with s2 clamped to min(s2, s1, G) (``dp_budgets``): a larger group
budget binds nothing, and the table costs G·(s2+1)·(s1+1).  When the clamped s2 is
min(s1, G) the group budget cannot bind at all and the DP runs without its group axis
(``_top_counts``, the same comparisons bit for bit), so s2 ≥ s1, e.g. every feature
its own group, costs G·(s1+1).
"""

import numbers

import numpy as np
from numba import njit

from ..errors import InputError

__all__ = ["bilevel_keep", "bilevel_keep_compact", "bilevel_projection", "check_groups",
           "dp_budgets", "group_constraint"]


@njit(cache=True)
def _sgss_counts(w2, starts, s1, s2):
    """How many elements to take from each group (Xiang et al., KDD 2014, Algs. 3-4).

    ``w2`` holds the weights v_i² group after group (group i is
    ``w2[starts[i]:starts[i+1]]``, sorted largest first, so CH(i, t) is a prefix sum).
    T(i, j, k) = best weight from groups ≤ i, ≤ j groups, ≤ k elements; two layers of
    T and every layer of the path table P.  Ties go to "skip the group", then to the
    smallest t (the paper's strict > in increasing t).  Returns (cnt, W*).
    """
    n_groups = starts.shape[0] - 1
    prev = np.zeros((s2 + 1, s1 + 1))
    cur = np.zeros((s2 + 1, s1 + 1))
    path = np.zeros((n_groups, s2 + 1, s1 + 1), dtype=np.int32)
    ch = np.zeros(s1 + 1)
    for i in range(n_groups):
        first = starts[i]
        size = min(starts[i + 1] - first, s1)
        for t in range(size):                   # ch[t] = CH(i, t + 1)
            ch[t] = w2[first + t] + (ch[t - 1] if t > 0 else 0.0)
        cur[:, :] = prev                        # group i unused
        for j in range(1, s2 + 1):
            for k in range(1, s1 + 1):
                best = prev[j, k]
                choice = 0
                for t in range(1, min(k, size) + 1):
                    candidate = prev[j - 1, k - t] + ch[t - 1]
                    if candidate > best:
                        best = candidate
                        choice = t
                cur[j, k] = best
                path[i, j, k] = choice
        prev, cur = cur, prev
    cnt = np.zeros(n_groups, dtype=np.int64)
    j, k = s2, s1
    for i in range(n_groups - 1, -1, -1):       # Algorithm 4: backtracking
        cnt[i] = path[i, j, k]
        if cnt[i] > 0:
            j -= 1
            k -= cnt[i]
    return cnt, prev[s2, s1]


@njit(cache=True)
def _top_counts(w2, starts, s1):
    """``_sgss_counts`` when the group budget cannot bind (s2 ≥ min(s1, G)): the same
    recurrence, ties and backtracking without the j axis, in G·(s1+1) time and memory.

    Any k elements meet at most k groups, and groups ≤ i number i + 1, so
    T(i, j, k) = T(i, ∞, k) whenever j ≥ min(k, i + 1); that region is closed under
    the recurrence (both T(i−1, j, k) and T(i−1, j−1, k−t), t ≥ 1, stay in it) and
    under the backtracking from (G−1, s2, s1), so every comparison, path entry and
    count is the 3-D DP's own, bit for bit.  Returns (cnt, W*).
    """
    n_groups = starts.shape[0] - 1
    prev = np.zeros(s1 + 1)
    cur = np.zeros(s1 + 1)
    path = np.zeros((n_groups, s1 + 1), dtype=np.int32)
    ch = np.zeros(s1 + 1)
    for i in range(n_groups):
        first = starts[i]
        size = min(starts[i + 1] - first, s1)
        for t in range(size):
            ch[t] = w2[first + t] + (ch[t - 1] if t > 0 else 0.0)
        for k in range(1, s1 + 1):
            best = prev[k]
            choice = 0
            for t in range(1, min(k, size) + 1):
                candidate = prev[k - t] + ch[t - 1]
                if candidate > best:
                    best = candidate
                    choice = t
            cur[k] = best
            path[i, k] = choice
        prev, cur = cur, prev
    cnt = np.zeros(n_groups, dtype=np.int64)
    k = s1
    for i in range(n_groups - 1, -1, -1):
        cnt[i] = path[i, k]
        k -= cnt[i]
    return cnt, prev[s1]


@njit(cache=True)
def dp_budgets(n_groups, n_candidates, s1, s2):
    """The budgets the DP runs with: s1 ≤ the candidates it sees, s2 ≤ min(s1, G).

    Neither clamp changes the projection (k elements meet at most k groups, and
    there are only G), only the table, G·(s2+1)·(s1+1) cells; s2 = min(s1, G) means
    the group budget cannot bind and the DP drops its j axis (``_top_counts``)."""
    s1 = min(s1, n_candidates)
    return s1, min(s2, s1, n_groups)


@njit(cache=True)
def _keep(v, grouped, starts, s1, s2, keep):
    """Run the DP on ``v[grouped]`` (group after group, each largest |v| first, at
    least its top min(s1, size)) and mark the argmax support in ``keep``; returns W*."""
    n_groups = starts.shape[0] - 1
    s1, s2 = dp_budgets(n_groups, grouped.shape[0], s1, s2)
    w2 = v[grouped] ** 2
    if s2 == min(s1, n_groups):         # the group budget cannot bind
        cnt, total = _top_counts(w2, starts, s1)
    else:
        cnt, total = _sgss_counts(w2, starts, s1, s2)
    keep[:] = False
    for g in range(n_groups):
        for r in range(starts[g], starts[g] + cnt[g]):
            keep[grouped[r]] = True
    return total


@njit(cache=True)
def bilevel_keep(v, labels, s1, s2, keep):
    """Mark in ``keep`` the support of SGHT(v) with group ``labels[i]`` for v_i; for
    short vectors with any integer labels (a kept set in group-aware OS).

    Elements are ordered by group, then by |v| largest first (ties to the lower
    position), so each group's best t elements are its first t.  Returns
    W* = Σ_{kept} v_i².
    """
    size = v.shape[0]
    by_size = np.argsort(-np.abs(v), kind="mergesort")
    grouped = by_size[np.argsort(labels[by_size], kind="mergesort")]
    starts = np.zeros(size + 1, dtype=np.int64)
    n_groups = 0
    for r in range(size):
        if r == 0 or labels[grouped[r]] != labels[grouped[r - 1]]:
            starts[n_groups] = r
            n_groups += 1
    starts[n_groups] = size
    return _keep(v, grouped, starts[:n_groups + 1], s1, s2, keep)


@njit(cache=True)
def bilevel_keep_compact(v, ids, n_groups, s1, s2, keep):
    """``bilevel_keep`` for long vectors with compact ids 0..n_groups−1: a counting
    sort by group, then only each group's top min(s1, size) entries are sorted (a
    partition finds them), O(p + G·s1·log s1) instead of sorting all p."""
    p = v.shape[0]
    bounds = np.zeros(n_groups + 1, dtype=np.int64)
    for i in range(p):
        bounds[ids[i] + 1] += 1
    bounds = np.cumsum(bounds)
    fill = bounds[:-1].copy()
    members = np.empty(p, dtype=np.int64)       # by group, index order inside
    for i in range(p):
        members[fill[ids[i]]] = i
        fill[ids[i]] += 1
    grouped = np.empty(min(p, n_groups * max(s1, 1)), dtype=np.int64)
    starts = np.zeros(n_groups + 1, dtype=np.int64)
    for g in range(n_groups):
        inside = members[bounds[g]:bounds[g + 1]]
        take = min(s1, inside.shape[0])
        if 0 < take < inside.shape[0]:          # the top `take`, ties included
            negative = -np.abs(v[inside])
            cut = np.partition(negative, take - 1)[take - 1]
            inside = inside[negative <= cut]
        order = np.argsort(-np.abs(v[inside]), kind="mergesort")[:take]
        starts[g + 1] = starts[g] + take
        grouped[starts[g]:starts[g + 1]] = inside[order]
    return _keep(v, grouped[:starts[n_groups]], starts, s1, s2, keep)


def _check_budget(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise InputError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


def check_groups(groups, n_features: int) -> tuple[np.ndarray, int]:
    """Group labels, one per feature, as compact int64 ids 0..G−1 (in sorted label
    order) and G.  Labels may be integers or strings; NaN, non-integral floats and a
    wrong length raise InputError.  Groups are disjoint by construction (one label per
    feature), which the DP needs."""
    labels = np.asarray(groups)
    if labels.ndim != 1 or labels.shape[0] != n_features:
        raise InputError(f"groups must give one label per feature: expected "
                         f"{n_features} labels, got shape {labels.shape}")
    if labels.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(labels) | (labels != np.round(labels)))
        if bad.size:
            raise InputError(f"group label of feature {bad[0]} is {labels[bad[0]]!r}; "
                             "labels must be integers or strings")
    elif labels.dtype.kind not in "iuUS":
        raise InputError(f"group labels must be integers or strings, got dtype "
                         f"{labels.dtype}")
    if labels.dtype.kind in "iuf" and labels.size:
        low = labels.min()
        span = int(labels.max() - low) + 1
        if span <= 4 * labels.size:             # O(p): a table instead of a sort
            present = np.bincount((labels - low).astype(np.int64), minlength=span) > 0
            table = np.cumsum(present) - 1
            return table[(labels - low).astype(np.int64)], int(present.sum())
    names, ids = np.unique(labels, return_inverse=True)
    return ids.astype(np.int64).ravel(), len(names)


def bilevel_projection(v, groups, s1, s2) -> np.ndarray:
    """SGHT(v): the closest x to v with ≤ s1 nonzeros in ≤ s2 groups
    (Xiang et al., KDD 2014, problem (2)).

    ``groups[i]`` is feature i's group label.  Exact, by the dynamic program of the
    paper's Algorithms 3-4 in O(s1·s2·p + p log p) time and O(G·s1·s2) memory, with
    s2 first clamped to min(s2, s1, G) (no result changes; s2 = min(s1, G) drops the
    group axis: O(s1·p) and O(G·s1)); among equally good supports the DP's tie rule
    decides.  s1 = 0 or s2 = 0 gives x = 0.

    Parameters
    ----------
    v : array of shape (p,)
        The point to project.
    groups : int array of shape (p,)
        Each feature's group label.
    s1 : int
        The most nonzero entries.
    s2 : int
        The most groups holding them.

    Returns
    -------
    ndarray of shape (p,)
        The projection x.
    """
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 1:
        raise InputError(f"v must be a vector, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise InputError(f"v has NaN or inf at {int(np.flatnonzero(~np.isfinite(v))[0])}")
    ids, n_groups = check_groups(groups, v.shape[0])
    s1, s2 = _check_budget("s1", s1), _check_budget("s2", s2)
    keep = np.zeros(v.shape[0], dtype=np.bool_)
    bilevel_keep_compact(np.ascontiguousarray(v), ids, n_groups, s1, s2, keep)
    return np.where(keep, v, 0.0)


def group_constraint(groups, s2, n_features: int):
    """(group_of, s2) for a group-aware solver, checked; None when neither is given.

    ``groups``: one label per feature; ``s2``: the most groups kept, 1..G.
    """
    if groups is None and s2 is None:
        return None
    if groups is None or s2 is None:
        raise InputError("groups and s2 (the group budget) go together: give both, "
                         "or neither")
    group_of, n_groups = check_groups(groups, n_features)
    s2 = _check_budget("s2", s2)
    if not 1 <= s2 <= n_groups:
        raise InputError(f"s2 must be in 1..{n_groups} (the number of groups), got {s2}")
    return group_of, s2
