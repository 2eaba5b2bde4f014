"""Group-aware Online Substitution: a kept set of ≤ s1 features in ≤ s2 groups.

The step is OS's own (``os_step.advance``: block step η/m, newcomer step η); only the
projection changes.  After the newcomer joins, S ∪ {j} is projected onto {≤ s1
features, ≤ s2 groups} by the exact bi-level projection of SGHT (sght spec §2.2,
``projection.bilevel_keep``) on the weights of S ∪ {j}.  When S ∪ {j} meets at most s2
groups only the feature budget can bind, and the exact projection is OS's own drop of
the smallest |w| (sght spec Lemma 1), so that case runs ``os_step.smallest_slot`` with OS's
tie rule: with s2 ≥ the number of groups, group-aware OS *is* OS, step for step.
Otherwise the DP may drop the newcomer, or a whole group (several features) to admit
it.

A feature's group is read from ``group_of`` (compact int64 ids, one per feature), so
the kept set needs no extra per-slot state.
"""

import numpy as np
from numba import njit

from .kept_set import KeptSet
from .losses import Loss, loss_value
from .os_step import (
    _dot,
    adapt_eta,
    advance,
    gradients,
    recompute,
    safeguard,
    smallest_slot,
    vacate,
)
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
    bilevel_keep(weights[:size], labels, capacity, max_groups, keep)   # spec §2.2
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


@njit(cache=True, nogil=True)
def group_os_block(cols, index, weights, size, capacity, block, block_index, u, y, loss,
                   m, g, gS, step, group_of, max_groups):
    """``os_block`` (sequential, exact gradients, default step rule) with the
    bi-level projection; ``step[6]`` counts the kept features dropped."""
    n = u.shape[0]
    for b in range(block.shape[0]):
        x = block[b]
        if step[1] != 0.0:
            adapt_eta(step, _dot(x, x) / n)
        size, dropped = group_os_step(cols, index, weights, size, capacity, x,
                                      block_index[b], u, y, loss, step[0], m, g, gS, u,
                                      group_of, max_groups)
        step[6] += dropped
        if step[1] != 0.0:
            safeguard(step, loss_value(loss, u, y))
    return size


@njit(cache=True, nogil=True)
def group_os_local(cols, index, weights, size, capacity, block, block_index, u_local, y,
                   loss, eta, m, g, gS, contribution, previous, group_of, max_groups):
    """``os_local`` (an Asy-OS worker's steps from its view) with the bi-level
    projection."""
    for b in range(block.shape[0]):
        previous[:] = contribution
        size, _ = group_os_step(cols, index, weights, size, capacity, block[b],
                                block_index[b], u_local, y, loss, eta, m, g, gS,
                                contribution, group_of, max_groups)
        u_local += contribution - previous
    return size


class GroupKeptSet(KeptSet):
    """A kept set of at most ``capacity`` features in at most ``max_groups`` groups;
    ``group_of[j]`` is feature j's group id (int64, trusted: validate before)."""

    def __init__(self, n_samples: int, capacity: int, group_of: np.ndarray,
                 max_groups: int, dtype=np.float64):
        super().__init__(n_samples, capacity, dtype)
        self.group_of = group_of
        self.max_groups = int(max_groups)

    def step(self, j, x, u_grad, y, loss: Loss, eta, m) -> int:
        """One step with gradients at ``u_grad``; returns how many kept features left."""
        self.size, dropped = group_os_step(
            self.cols, self.index, self.weights, self.size, self.capacity, x, int(j),
            u_grad, y, int(loss), float(eta), float(m), self._g, self._gS,
            self.contribution, self.group_of, self.max_groups)
        return int(dropped)

    def run_block(self, block_index, block, y, loss: Loss, m, step_state) -> None:
        self.size = group_os_block(
            self.cols, self.index, self.weights, self.size, self.capacity, block,
            block_index, self.contribution, y, int(loss), float(m), self._g, self._gS,
            step_state, self.group_of, self.max_groups)

    def run_local(self, block_index, block, u_local, y, loss: Loss, eta, m) -> None:
        self.size = group_os_local(
            self.cols, self.index, self.weights, self.size, self.limit, block,
            block_index, u_local, y, int(loss), float(eta), float(m), self._g, self._gS,
            self.contribution, self._previous, self.group_of, self.max_groups)

    def groups_kept(self) -> int:
        """Distinct groups among the kept features (≤ ``max_groups`` always)."""
        return int(np.unique(self.group_of[self.index[:self.size]]).size)


def kept_set(stream, capacity: int, groups=None):
    """(kept set, its block reader) for ``stream``: the stream's own (dense, or CSC
    for a sparse stream, ``FeatureStream.kept_set``), or with ``groups`` =
    (group_of, max_groups) a group-aware one, which reads dense blocks."""
    if groups is None:
        return stream.kept_set(capacity), stream.step_blocks
    return GroupKeptSet(stream.n_samples, capacity, groups[0], groups[1],
                        stream.dtype), stream.blocks
