"""A stream over a scipy.sparse matrix, densifying only the columns asked for."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .array import check_design_shape
from .base import FeatureStream


class SparseStream(FeatureStream):
    """Columns of a scipy.sparse (n, p) matrix.

    The matrix is converted to CSC once (column slicing is then O(nnz of the columns)),
    and a block densifies just its b columns: memory is O(nnz + b·n), never O(n·p).
    scipy is imported only here, and only when such a stream is made.
    """

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

    def _read(self, indices: np.ndarray) -> np.ndarray:
        # (n, b) CSC → transpose is (b, n) CSR → dense C-order (b, n), one copy.
        return self._X[:, indices].T.toarray()
