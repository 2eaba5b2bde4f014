"""Group-aware Online Substitution: a kept set of ≤ s1 features in ≤ s2 groups.

The step is OS's own (``os_step.advance``: block step η/m, newcomer step η); only the
projection changes.  After the newcomer joins, S ∪ {j} is projected onto {≤ s1
features, ≤ s2 groups} by the exact bi-level projection of SGHT (Xiang et al., KDD 2014,
Algorithms 3-4; ``projection.bilevel_keep``) on the weights of S ∪ {j}.  When S ∪ {j}
meets at most s2 groups only the feature budget can bind, and the exact projection is
OS's own drop of the smallest |w| (Xiang et al., KDD 2014, Lemma 1), so that case runs
``os_step.smallest_slot`` with OS's tie rule: with s2 ≥ the number of groups,
group-aware OS *is* OS, step for step.  Otherwise the DP may drop the newcomer, or a
whole group (several features) to admit it.

A feature's group is read from ``group_of`` (compact int64 ids, one per feature), so
the kept set needs no extra per-slot state.
"""

import numpy as np
from numba import njit

from .os_step import advance, gradients, recompute, smallest_slot, vacate
from .projection import bilevel_keep


@njit(cache=True)
def _n_groups(labels):
    """Number of distinct values in a short integer array."""
    ordered = np.sort(labels)
    count = 0
    for r in range(ordered.shape[0]):
        if r == 0 or ordered[r] != ordered[r - 1]:
            count += 1
    return count


@njit(cache=True)
def _project(cols, index, weights, size, capacity, group_of, max_groups):
    """Project slots 0..size-1 (the newcomer last) onto ≤ capacity features in
    ≤ max_groups groups; returns (size, kept features dropped)."""
    newcomer = group_of[index[size - 1]]
    labels = np.empty(size, dtype=np.int64)
    shared = False
    for k in range(size):
        labels[k] = group_of[index[k]]
        if k < size - 1 and labels[k] == newcomer:
            shared = True
    if shared or _n_groups(labels) <= max_groups:   # only s1 can bind (Lemma 1)
        if size <= capacity:
            return size, 0
        d = smallest_slot(weights, capacity)
        vacate(cols, index, weights, capacity, d)
        return capacity, 0 if d == capacity else 1
    keep = np.zeros(size, dtype=np.bool_)
    bilevel_keep(weights[:size], labels, capacity, max_groups, keep)   # the SGHT DP
    dropped = 0
    newcomer_slot = size - 1
    for k in range(size - 1, -1, -1):    # slots above k are kept: move the last into k
        if not keep[k]:
            dropped += k != newcomer_slot
            vacate(cols, index, weights, size - 1, k)
            keep[k] = keep[size - 1]
            size -= 1
    return size, dropped


@njit(cache=True, fastmath={"reassoc", "contract", "nsz", "arcp"})
def group_os_step(cols, index, weights, size, capacity, x, j, u_grad, y, loss, eta, m,
                  g, gS, contribution, group_of, max_groups):
    """``os_step`` with the bi-level projection; returns (size, kept features dropped)."""
    xg = gradients(cols, size, x, u_grad, y, loss, g, gS)
    grown = advance(cols, index, weights, size, x, j, xg, gS, eta, m)
    dropped = 0
    if grown >= 0:
        size, dropped = _project(cols, index, weights, grown, capacity, group_of,
                                 max_groups)
    recompute(weights, cols, size, contribution)
    return size, dropped
