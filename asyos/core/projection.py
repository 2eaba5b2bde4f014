"""The exact bi-level projection of SGHT (sght spec §2.1-2.2), compiled with numba.

SGHT(v) keeps at most s1 entries of v, drawn from at most s2 groups, maximising the
retained ‖x‖² (every optimal x has x_i ∈ {v_i, 0}, spec Proposition 1).  Neither greedy
order is exact (spec §5 O3), so the support comes from the dynamic program of spec
§2.2 over groups, with the argmax recovered by backtracking through a path table.

``bilevel_keep`` is the kernel: it works on any integer labels (a kept set's group
labels in group-aware OS, compact labels in ``bilevel_projection``).  The public
``bilevel_projection`` validates its input in Python first.
"""

import numbers

import numpy as np
from numba import njit

from ..errors import InputError

__all__ = ["bilevel_keep", "bilevel_projection", "check_groups", "group_constraint"]


@njit(cache=True)
def _sgss_counts(w2, starts, s1, s2):
    """Spec §2.2, Algorithms 3-4: how many elements to take from each group.

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
def bilevel_keep(v, labels, s1, s2, keep):
    """Mark in ``keep`` the support of SGHT(v) with group ``labels[i]`` for v_i.

    Elements are ordered by group, then by |v| largest first (ties to the lower
    position), so each group's best t elements are its first t (spec §2.1).  Returns
    W* = Σ_{kept} v_i².  Labels are any integers; s1, s2 ≥ 0.
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
    s1 = min(s1, size)              # larger budgets bind nothing: smaller tables
    s2 = min(s2, n_groups)
    w2 = v[grouped] ** 2
    cnt, total = _sgss_counts(w2, starts[:n_groups + 1], s1, s2)
    keep[:] = False
    for g in range(n_groups):
        for r in range(starts[g], starts[g] + cnt[g]):
            keep[grouped[r]] = True
    return total


def _check_budget(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise InputError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


def check_groups(groups, n_features: int) -> tuple[np.ndarray, int]:
    """Group labels, one per feature, as compact int64 ids 0..G−1 (in sorted label
    order) and G.  Labels may be integers or strings; NaN, non-integral floats and a
    wrong length raise InputError.  Groups are disjoint by construction (one label per
    feature), which the DP needs (spec §1)."""
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
    names, ids = np.unique(labels, return_inverse=True)
    return ids.astype(np.int64).ravel(), len(names)


def bilevel_projection(v, groups, s1, s2) -> np.ndarray:
    """SGHT(v): the closest x to v with ≤ s1 nonzeros in ≤ s2 groups (sght spec §2.1).

    ``groups[i]`` is feature i's group label.  Exact, by the O(s1·s2·p + p log p)
    dynamic program of spec §2.2; among equally good supports the DP's tie rule
    decides.  s1 = 0 or s2 = 0 gives x = 0.
    """
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 1:
        raise InputError(f"v must be a vector, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise InputError(f"v has NaN or inf at {int(np.flatnonzero(~np.isfinite(v))[0])}")
    ids, _ = check_groups(groups, v.shape[0])
    s1, s2 = _check_budget("s1", s1), _check_budget("s2", s2)
    keep = np.zeros(v.shape[0], dtype=np.bool_)
    bilevel_keep(np.ascontiguousarray(v), ids, s1, s2, keep)
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
