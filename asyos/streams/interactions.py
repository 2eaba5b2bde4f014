"""Polynomial feature spaces generated on the fly: products of d base features.

OS chooses among the d base features, their d(d+1)/2 pairwise products (squares
included) and, with ``degree=3``, the d(d+1)(d+2)/6 triple products, without ever
materialising them: only the d base columns are held, O(n·d), and a block of
products is computed when it is read.  d = 2000 gives 2,003,000 features.

Feature numbering, lexicographic within each degree: 0..d-1 are the base features;
then the pairs (i, j), i ≤ j, in the order (0,0), (0,1), …, (0,d-1), (1,1), …; then
the triples (i, j, l), i ≤ j ≤ l, likewise.  ``terms(indices)`` decodes numbers into
base-feature tuples and ``names`` into "x3*x17".  Shards (``shard(q, t)``) take their
pieces of the numbering (``core.shards.shard_piece``), so each Asy-OS worker generates
only its own products.
"""

from __future__ import annotations

import numpy as np

from ..core.validate import check_int
from ..errors import InputError
from .base import FeatureStream


def _pairs(m):
    """Number of pairs (j, l) with j ≤ l among m features: m(m+1)/2."""
    return m * (m + 1) // 2


def _per_degree(d: int) -> list[int]:
    """How many products of exactly 1, 2 and 3 of d features (repeats allowed)."""
    return [d, _pairs(d), d * (d + 1) * (d + 2) // 6]


class InteractionStream(FeatureStream):
    """The degree-≤ ``degree`` products of the columns of ``base``, (n, d) or a stream."""

    def __init__(self, base, degree: int = 2, *, block_size: int = 256,
                 shuffle: bool = False, seed: int = 0, dtype="float64"):
        super().__init__(block_size=block_size, shuffle=shuffle, seed=seed,
                         dtype=dtype)
        self.degree = check_int("degree", degree, 1, 4)
        if isinstance(base, FeatureStream):
            columns = base.columns(base.feature_indices())
        else:
            from .array import ArrayStream

            stream = ArrayStream(base)
            columns = stream.columns(stream.feature_indices())
        self._base = np.ascontiguousarray(columns, dtype=np.float64)  # (d, n)
        d, self.n_samples = self._base.shape
        self.n_base = d
        self._starts = np.cumsum([0, *_per_degree(d)[: self.degree]])  # first of each
        self.n_features = int(self._starts[-1])
        # triples: how many have a first index below i, for i = 0..d
        self._triples_before = np.concatenate(
            [[0], np.cumsum(_pairs(d - np.arange(d, dtype=np.int64)))])

    def terms(self, indices) -> list[tuple[int, ...]]:
        """The base features whose product each number is, e.g. 2 → (2,), d → (0, 0)."""
        index = self._check_indices(indices)
        parts = self._decode(index)
        return [tuple(int(part[k]) for part in parts if part[k] >= 0)
                for k in range(index.size)]

    def names(self, indices) -> list[str]:
        return ["*".join(f"x{i}" for i in term) for term in self.terms(indices)]

    def _decode(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Three arrays of base indices (-1 where the term has fewer factors)."""
        d = self.n_base
        first, second, third = (np.full(index.size, -1, dtype=np.int64) for _ in range(3))
        degree = np.searchsorted(self._starts, index, side="right")   # 1, 2 or 3
        one = degree == 1
        first[one] = index[one]
        two = degree == 2
        first[two], second[two] = self._pair(index[two] - self._starts[1], d)
        three = degree == 3
        if three.any():
            rest = index[three] - self._starts[2]
            i = np.searchsorted(self._triples_before, rest, side="right") - 1
            j, l = self._pair(rest - self._triples_before[i], d - i)
            first[three], second[three], third[three] = i, j + i, l + i
        return first, second, third

    @staticmethod
    def _pair(k: np.ndarray, m) -> tuple[np.ndarray, np.ndarray]:
        """Pair number k among m features → (i, j), i ≤ j, lexicographic."""
        m = np.asarray(m, dtype=np.int64)
        # pairs before row i: i·m − i(i−1)/2; solve for the largest i with that ≤ k
        b = 2 * m + 1
        i = np.floor((b - np.sqrt(np.maximum(b * b - 8 * k, 0))) / 2).astype(np.int64)
        before = i * m - i * (i - 1) // 2
        i = np.where(before > k, i - 1, i)                       # float rounding
        before = i * m - i * (i - 1) // 2
        over = k - before >= m - i
        i = np.where(over, i + 1, i)
        before = i * m - i * (i - 1) // 2
        return i, i + (k - before)

    def _read(self, indices: np.ndarray) -> np.ndarray:
        first, second, third = self._decode(indices)
        block = self._base[first].copy()
        has2 = second >= 0
        block[has2] *= self._base[second[has2]]
        has3 = third >= 0
        block[has3] *= self._base[third[has3]]
        return block


def interaction_count(d: int, degree: int = 2) -> int:
    """How many features ``InteractionStream`` makes from d base features."""
    d = check_int("d", d, 1)
    if degree not in (1, 2, 3):
        raise InputError(f"degree must be 1, 2 or 3, got {degree!r}")
    return sum(_per_degree(d)[:degree])
