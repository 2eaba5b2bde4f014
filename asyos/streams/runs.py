"""Which features a stream holds, as runs of consecutive indices: O(runs) memory.

A plain stream holds the range 0..p-1, one run; a shard of it holds its pieces
(``core.shards.shard_runs``), one run each.  Orders and index checks are computed
from the runs, a block at a time, instead of from the O(p) int64 indices (80 MB at
p = 10⁷) and copies of them.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..core.shards import shard_runs


class Runs:
    """The indices ``starts[k] + i`` for 0 ≤ i < ``lengths[k]``, run after run, in
    increasing order (a position is an index into that sequence)."""

    def __init__(self, starts, lengths):
        self.starts = np.asarray(starts, dtype=np.int64)
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])   # each run's first

    @classmethod
    def range(cls, size: int) -> "Runs":
        return cls([0], [size])

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def at(self, positions) -> np.ndarray:
        """The int64 indices at ``positions`` (a new array)."""
        positions = np.asarray(positions).astype(np.int64)
        if self.starts.size == 1:
            positions += self.starts[0]
            return positions
        run = np.searchsorted(self.offsets, positions, "right") - 1
        return self.starts[run] + (positions - self.offsets[run])

    def indices(self) -> np.ndarray:
        return self.at(np.arange(self.size))

    def chunks(self, size: int) -> Iterator[np.ndarray]:
        """The indices in pieces of ``size``, each made as it is needed."""
        for first in range(0, self.size, size):
            yield self.at(np.arange(first, min(first + size, self.size)))

    def holds(self, indices: np.ndarray) -> np.ndarray:
        """Boolean mask: which of the int64 ``indices`` are among these."""
        if not self.starts.size:
            return np.zeros(np.shape(indices), dtype=bool)
        run = np.maximum(np.searchsorted(self.starts, indices, "right") - 1, 0)
        offset = indices - self.starts[run]
        return (offset >= 0) & (offset < self.lengths[run])

    def shard(self, q: int, t: int) -> "Runs":
        """The runs of shard t of q of these (``core.shards.shard_runs`` over the
        positions), adjacent runs joined."""
        first, last = shard_runs(self.size, q, t)
        if not first.size:
            return Runs([], [])
        cuts = np.union1d(np.concatenate([first, last]), self.offsets)
        begin, end = cuts[:-1], cuts[1:]
        piece = np.searchsorted(first, begin, "right") - 1   # a segment ends at a cut:
        mine = (piece >= 0) & (begin < last[np.maximum(piece, 0)])   # in a piece or not
        starts, lengths = self.at(begin[mine]), (end - begin)[mine]
        joined = np.r_[True, starts[1:] != starts[:-1] + lengths[:-1]]
        return Runs(starts[joined], np.add.reduceat(lengths, np.flatnonzero(joined))
                    if lengths.size else lengths)
