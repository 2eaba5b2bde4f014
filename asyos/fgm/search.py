"""FGM's worst-case analysis (Tan, Tsang & Wang 2014, Algorithm 2) over the spaces it
selects from.

The most violated constraint is d = 1 on the B candidates with the largest scores
s = c², c = Xᵀr the loss gradient (r = −∂P/∂z).  A *space* says what the candidates
are and how to score them:

- ``ArraySpace``: the columns of a dense or scipy.sparse X (one BLAS/sparse pass);
- ``StreamSpace``: the columns of any ``FeatureStream``, block by block (out of core);
- ``GroupSpace``: groups of another space's features (Tan et al., Sections 2.3, 4.2
  and 4.3), s_g = ‖c_G‖², disjoint or overlapping (a shared feature is copied into
  each chosen group's block);
- ``PolynomialSpace``: the degree-2 products of ``InteractionStream``, scored from
  M = Xᵀ diag(r) X block by block without building a product column (Tan et al.,
  Section 6.2).

Scaling.  The raw scores c_j² = (x_jᵀr)² grow with ‖x_j‖², so which candidates win
depends on how the columns are scaled, and in the degree-2 space more so: a product
x_i·x_j inherits both factors' scales.  Tan et al. scale every base feature to [0, 1]
(their LIBSVM data); after standardization the products of rarely-nonzero features get
huge norms and win on norm, not on fit.  ``normalize=True`` (every space) makes the
method scale-invariant: each candidate column is used at unit norm, x_j/‖x_j‖, so it
scores (x_jᵀr)²/‖x_j‖² (a product (i, j): M_ij²/‖x_i∘x_j‖², with
‖x_i∘x_j‖² = ((X∘X)ᵀ(X∘X))_ij computed by a second block product), ``columns`` returns
the unit columns, and ``norms`` gives the factors that map weights back to raw columns.

Every space pushes its scores into one size-B min-heap (a compiled kernel), so memory is
O(B) beyond what the scores themselves need.  Ties go to the lower candidate number.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..streams import FeatureStream, InteractionStream

__all__ = ["ArraySpace", "GroupSpace", "PolynomialSpace", "StreamSpace", "TopB"]


@njit(cache=True, inline="always")
def _worse(s1, i1, s2, i2):
    """Is (s1, i1) ranked below (s2, i2)?  Lower score, or equal score and higher id."""
    return s1 < s2 or (s1 == s2 and i1 > i2)


@njit(cache=True)
def _sift_down(hs, hi, size, k):
    while True:
        lo = k
        for child in (2 * k + 1, 2 * k + 2):
            if child < size and _worse(hs[child], hi[child], hs[lo], hi[lo]):
                lo = child
        if lo == k:
            return
        hs[k], hs[lo] = hs[lo], hs[k]
        hi[k], hi[lo] = hi[lo], hi[k]
        k = lo


@njit(cache=True)
def _push(hs, hi, size, score, ident, skip):
    """Offer (score, id) to the heap (root = worst kept); returns the new size.
    ``skip`` is a sorted array of ids that may not enter (exclude_active)."""
    if skip.shape[0] > 0:
        pos = np.searchsorted(skip, ident)
        if pos < skip.shape[0] and skip[pos] == ident:
            return size
    if size < hs.shape[0]:
        k = size
        hs[k], hi[k] = score, ident
        while k > 0:                                   # sift up
            parent = (k - 1) // 2
            if not _worse(hs[k], hi[k], hs[parent], hi[parent]):
                break
            hs[k], hs[parent] = hs[parent], hs[k]
            hi[k], hi[parent] = hi[parent], hi[k]
            k = parent
        return size + 1
    if _worse(hs[0], hi[0], score, ident):
        hs[0], hi[0] = score, ident
        _sift_down(hs, hi, size, 0)
    return size


@njit(cache=True)
def push_scores(hs, hi, size, scores, ids, skip):
    """Offer every (scores[k], ids[k]) to the heap."""
    for k in range(scores.shape[0]):
        size = _push(hs, hi, size, scores[k], ids[k], skip)
    return size


@njit(cache=True)
def push_pairs(hs, hi, size, M, i0, j0, d, skip):
    """Offer the pair scores M[a, c]² of base features (i0 + a, j0 + c), i ≤ j, under
    ``InteractionStream``'s numbering: d + i·d − i(i−1)/2 + (j − i)."""
    for a in range(M.shape[0]):
        i = i0 + a
        row = d + i * d - i * (i - 1) // 2 - i
        for c in range(max(0, i - j0), M.shape[1]):
            size = _push(hs, hi, size, M[a, c] * M[a, c], row + j0 + c, skip)
    return size


class TopB:
    """The size-B heap of one worst-case search."""

    def __init__(self, B: int, skip: np.ndarray):
        self.scores = np.empty(B)
        self.ids = np.empty(B, dtype=np.int64)
        self.size = 0
        self.skip = skip

    def offer(self, scores: np.ndarray, ids: np.ndarray) -> None:
        self.size = push_scores(self.scores, self.ids, self.size,
                                np.ascontiguousarray(scores, dtype=np.float64),
                                np.ascontiguousarray(ids, dtype=np.int64), self.skip)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), best first (ties: lower id first)."""
        ids, scores = self.ids[:self.size], self.scores[:self.size]
        order = np.lexsort((ids, -scores))
        return ids[order].copy(), scores[order].copy()


def _unit(sq: np.ndarray) -> np.ndarray:
    """1/‖x‖ from ‖x‖² (a zero column scores 0 and keeps its weight: factor 1)."""
    return 1.0 / np.sqrt(np.where(sq > 0.0, sq, 1.0))


class _Space:
    """A candidate space: ``n_candidates`` to rank, ``n_features`` columns they map to.
    With ``normalize`` every column counts at unit norm (the module's Scaling)."""

    n_samples: int
    n_features: int
    n_candidates: int
    normalize: bool = False

    def norms(self, features: np.ndarray) -> np.ndarray:
        """‖x_j‖ of these features' raw columns (1 for a zero column)."""
        return 1.0 / _unit(np.einsum("ij,ij->i", *(2 * [self.raw_columns(features)])))

    def columns(self, features: np.ndarray) -> np.ndarray:
        """(k, n) C-contiguous float64 columns of these features (unit ones with
        ``normalize``)."""
        cols = self.raw_columns(features)
        if self.normalize:
            cols = cols * _unit(np.einsum("ij,ij->i", cols, cols))[:, None]
        return cols

    def raw_columns(self, features: np.ndarray) -> np.ndarray:
        """(k, n) C-contiguous float64 columns of these features, as given."""
        raise NotImplementedError

    def top(self, r: np.ndarray, B: int, skip: np.ndarray):
        """(ids, scores) of the B best candidates for the gradient weights r."""
        heap = TopB(B, skip)
        scores = self.scores(r)
        heap.offer(scores, np.arange(scores.size))
        return heap.result()

    def scores(self, r: np.ndarray) -> np.ndarray:
        """The score of every candidate (Tan et al., eq. (27)): s_j = c_j², c = Xᵀr."""
        c = self.correlations(r)
        return c * c

    def correlations(self, r: np.ndarray) -> np.ndarray:
        """c = Xᵀr over every feature (of the unit columns with ``normalize``)."""
        raise NotImplementedError

    def members(self, ids: np.ndarray) -> np.ndarray:
        """The features of these candidates, concatenated (a feature is its own)."""
        return np.asarray(ids, dtype=np.int64)


class ArraySpace(_Space):
    """The columns of an in-memory (n, m) array or scipy.sparse matrix (checked)."""

    def __init__(self, X, normalize: bool = False):
        self.X = X
        self.n_samples, self.n_features = X.shape
        self.n_candidates = self.n_features
        self.normalize = normalize
        if normalize:
            sq = (X.multiply(X).sum(axis=0) if hasattr(X, "multiply")
                  else np.einsum("ij,ij->j", X, X))
            self._inv = _unit(np.asarray(sq, dtype=np.float64).ravel())

    def correlations(self, r):
        c = np.asarray(self.X.T @ r, dtype=np.float64).ravel()
        return c * self._inv if self.normalize else c

    def raw_columns(self, features):
        cols = self.X[:, features]
        cols = cols.toarray() if hasattr(cols, "toarray") else cols
        return np.ascontiguousarray(cols.T, dtype=np.float64)


class StreamSpace(_Space):
    """The columns of a ``FeatureStream``, scored block by block, so X never has to
    fit in memory."""

    def __init__(self, stream: FeatureStream, normalize: bool = False):
        self.stream = stream
        self.n_samples = stream.n_samples
        self.n_features = self.n_candidates = stream.n_features
        self.normalize = normalize

    def _blocks(self, r):
        """(index, c) per block; c of the unit columns with ``normalize``."""
        for index, block in self.stream.blocks():
            c = np.asarray(block @ r.astype(block.dtype), dtype=np.float64).ravel()
            if self.normalize:
                sq = (block.multiply(block).sum(axis=1) if hasattr(block, "multiply")
                      else np.einsum("ij,ij->i", block, block, dtype=np.float64))
                c = c * _unit(np.asarray(sq, dtype=np.float64).ravel())
            yield index, c

    def top(self, r, B, skip):
        heap = TopB(B, skip)
        for index, c in self._blocks(r):
            heap.offer(c ** 2, index)
        return heap.result()

    def correlations(self, r):
        c = np.empty(self.n_features)
        for index, block_c in self._blocks(r):
            c[index] = block_c
        return c

    def raw_columns(self, features):
        return np.ascontiguousarray(self.stream.columns(features), dtype=np.float64)


class GroupSpace(_Space):
    """Groups of the features of ``base`` (Tan et al., eq. (28)): candidate g scores
    ‖c_{G_g}‖², computed from the one gradient c = Xᵀr of the base space.

    ``groups`` is a list of nonempty int arrays (checked by the caller).  Overlapping
    groups are the augmented-X construction of Tan et al. done implicitly: a shared
    feature keeps one c_j, and only the chosen groups' columns are copied into the
    cache.
    """

    def __init__(self, base: _Space, groups: list):
        self.base = base
        self.normalize = base.normalize
        self.n_samples = base.n_samples
        self.n_features = base.n_features
        self.n_candidates = len(groups)
        self._members = np.concatenate(groups).astype(np.int64)
        self._starts = np.cumsum([0, *(len(g) for g in groups)]).astype(np.int64)

    def scores(self, r):
        """‖c_G‖² per group."""
        c = self.base.correlations(r)
        return np.add.reduceat(c[self._members] ** 2, self._starts[:-1])

    def members(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        return np.concatenate([self._members[self._starts[g]:self._starts[g + 1]]
                               for g in ids]) if ids.size else ids

    def raw_columns(self, features):
        return self.base.raw_columns(features)


class PolynomialSpace(_Space):
    """The degree-2 space of ``InteractionStream`` (base features, then the products
    x_i·x_j, i ≤ j, in its numbering), searched implicitly (Tan et al., Algorithm 5).

    Scores: base feature j, (f_jᵀr)²; product (i, j), (M_ij)² with M = Xᵀ diag(r) X,
    computed for a (b × b) block of base features at a time by one BLAS call, so the
    search costs O(n·d²/2) flops and O(b² + B) memory instead of generating each of the
    d(d+1)/2 product columns.  Only the B chosen columns are ever built (``columns``).
    """

    def __init__(self, stream: InteractionStream, block: int = 512,
                 normalize: bool = False):
        self.stream = stream
        self.n_samples = stream.n_samples
        self.n_features = self.n_candidates = stream.n_features
        d = stream.n_base
        self._base = np.ascontiguousarray(stream.columns(np.arange(d)), np.float64)
        self._block = block
        self.normalize = normalize
        if normalize:
            self._square = self._base * self._base
            self._inv = _unit(self._square.sum(axis=1))

    def top(self, r, B, skip):
        """The B best; with ``normalize`` a second block product (X∘X)_Iᵀ(X∘X)_J
        gives the product columns' norms, so the search costs twice the flops."""
        heap = TopB(B, skip)
        base, d, step = self._base, self._base.shape[0], self._block
        c = base @ r
        heap.offer((c * self._inv) ** 2 if self.normalize else c ** 2, np.arange(d))
        for i0 in range(0, d, step):
            left = base[i0:i0 + step] * r                     # rows of diag(r)·X_I
            for j0 in range(i0, d, step):
                M = left @ base[j0:j0 + step].T               # X_Iᵀ diag(r) X_J
                if self.normalize:
                    sq = self._square[i0:i0 + step] @ self._square[j0:j0 + step].T
                    M = M * _unit(sq)
                heap.size = push_pairs(heap.scores, heap.ids, heap.size, M, i0, j0, d,
                                       heap.skip)
        return heap.result()

    def raw_columns(self, features):
        return np.ascontiguousarray(self.stream.columns(features), dtype=np.float64)


def block_scores(rows: np.ndarray, starts: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Σ_{j∈S_h} c_j² of every cached block h (the θ of the violation), from the
    cache alone."""
    c2 = (rows @ r) ** 2
    return np.add.reduceat(c2, starts[:-1]) if starts.size > 1 else np.zeros(0)

