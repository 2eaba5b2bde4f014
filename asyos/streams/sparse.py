"""A stream over a scipy.sparse matrix: CSC blocks for the sparse OS kernel."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..core.kept_set import SparseKeptSet
from ..core.sparse_step import CSCBlock
from ..errors import InputError
from .array import check_design_shape
from .base import FeatureStream
from .prefetch import prefetch


class SparseStream(FeatureStream):
    """Columns of a scipy.sparse (n, p) matrix.

    The matrix is converted to CSC once (column slicing is then O(nnz of the columns)).
    OS reads it through ``step_blocks``: ``CSCBlock``s for ``SparseKeptSet``, whose
    steps cost O(nnz) instead of O(n·s).  ``blocks`` (for the baselines and
    refits) densifies just b columns: memory O(nnz + b·n), never O(n·p).  scipy is
    imported only here, and only when such a stream is made.
    """

    sparse = True

    def __init__(self, X, *, block_size: int = 256, shuffle: bool = False,
                 seed: int = 0, dtype="float64"):
        super().__init__(block_size=block_size, shuffle=shuffle, seed=seed,
                         dtype=dtype)
        import scipy.sparse as sp

        if not sp.issparse(X):
            raise InputError(f"SparseStream needs a scipy.sparse matrix, got "
                             f"{type(X).__name__}")
        if X.dtype.kind not in "biuf":
            raise InputError(f"X must hold numbers, got dtype {X.dtype}")
        self.n_samples, self.n_features = check_design_shape(X.shape, "X")
        self._X = sp.csc_matrix(X)
        self._X.sum_duplicates()
        self._X.sort_indices()   # rows ascending: the kernel walks u and g in order

    def _read(self, indices: np.ndarray) -> np.ndarray:
        # (n, b) CSC → transpose is (b, n) CSR → dense C-order (b, n), one copy.
        return self._X[:, indices].T.toarray()

    def kept_set(self, capacity: int) -> SparseKeptSet:
        return SparseKeptSet(self.n_samples, capacity, self.dtype)

    def step_blocks(self, epoch: int = 0) -> Iterator:
        return self.csc_blocks_in(self.order(epoch), self.block_size)

    def csc_blocks_in(self, order: np.ndarray, block_size: int) -> Iterator:
        """(indices, CSCBlock) batches of the columns ``order``, read ahead in a
        thread like ``blocks``; a NaN or inf is refused naming its feature."""
        raw = (self._csc(order[start:start + block_size])
               for start in range(0, len(order), block_size))
        return prefetch(raw) if self.prefetch else raw

    def _csc(self, index: np.ndarray) -> tuple[np.ndarray, CSCBlock]:
        part = self._X[:, index]
        finite = np.isfinite(part.data)
        if not finite.all():
            column = np.searchsorted(part.indptr, np.argmin(finite), side="right") - 1
            raise InputError(f"feature {int(index[column])} contains NaN or inf")
        return index, CSCBlock(part.indptr.astype(np.int64),
                               part.indices.astype(np.int64),
                               np.ascontiguousarray(part.data, dtype=self.dtype),
                               self.n_samples)
