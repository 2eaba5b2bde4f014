"""Pure arithmetic of splitting work among q workers."""

import numpy as np

from ..errors import InputError


def budget_split(s: int, q: int) -> list[int]:
    """Capacities s_t = s // q + [t < s % q]: Σ s_t = s exactly, each ≥ 1 (needs q ≤ s)."""
    if q < 1:
        raise InputError(f"the number of workers must be at least 1, got {q}")
    if q > s:
        raise InputError(f"{q} workers cannot share a budget of s = {s} features: "
                         f"each worker needs at least one (use at most {s} workers)")
    return [s // q + (1 if t < s % q else 0) for t in range(q)]


LAYOUT = 2     # how shards are cut, as checkpoints record it: 1, j ≡ t (mod q) at
#                every p; 2, pieces of ``shard_piece`` features
PIECE = 256    # the most consecutive features in one piece of a shard
SPREAD = 64    # the fewest pieces each of q shards gets, where p allows


def shard_piece(p: int, q: int) -> int:
    """How many consecutive features (positions) of p one piece of a shard holds.

    Shard t of q holds the pieces t, t + q, t + 2q, … of the features cut in pieces
    of this many: with pieces of one, the features j ≡ t (mod q) (the convention of
    Yang et al., 2016, who only say "from the pool"), which every problem with
    p < 128·q gets.  Longer pieces let a worker read its shard in runs of adjacent
    columns: one of q interleaved columns made it read (or step over) every column
    of the file, a fifth of its time at the paper's size on two cores
    (docs/benchmarks.md, "Shards in pieces").  At least ``SPREAD`` pieces per shard
    keep the shards within p/(64·q) features of each other in size, and spread a run
    of adjacent strong features over the workers unless it is wider than a piece."""
    return max(1, min(PIECE, p // (SPREAD * q)))


def shard_runs(p: int, q: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, stops) of the runs of consecutive positions of p that shard t of q
    holds (``shard_piece``), in increasing order: O(p / piece), never O(p)."""
    piece = shard_piece(p, q)
    starts = np.arange(t * piece, p, q * piece, dtype=np.int64)
    return starts, np.minimum(starts + piece, p)


def shard_size(p: int, q: int, t: int) -> int:
    """How many of p features shard t of q holds (``shard_runs``)."""
    starts, stops = shard_runs(p, q, t)
    return int((stops - starts).sum())


def shard_sizes(p: int, q: int, group_of=None) -> np.ndarray:
    """How many features each of q shards holds: ``shard_size``, or with
    ``group_of`` (compact group ids) the whole groups ``group_owners`` gives each."""
    if group_of is None:
        return np.array([shard_size(p, q, t) for t in range(q)], dtype=np.int64)
    group_of = np.asarray(group_of, dtype=np.int64)
    owner = group_owners(group_of, int(group_of.max()) + 1, q)
    return np.bincount(owner[group_of], minlength=q).astype(np.int64)


def group_owners(group_of, n_groups: int, q: int) -> np.ndarray:
    """Worker of each group, so that shards are whole groups: groups go,
    largest first, to the worker with the fewest features so far (ties: the lower
    worker); every worker gets at least one group (needs q ≤ number of groups)."""
    if q > n_groups:
        raise InputError(f"{q} workers cannot share {n_groups} groups: each worker "
                         f"needs a whole group (use at most {n_groups} workers)")
    sizes = np.bincount(group_of, minlength=n_groups)
    owner = np.empty(n_groups, dtype=np.int64)
    load = np.zeros(q, dtype=np.int64)
    for rank, g in enumerate(np.argsort(-sizes, kind="stable")):
        t = rank if rank < q else int(np.argmin(load))
        owner[g] = t
        load[t] += sizes[g]
    return owner
