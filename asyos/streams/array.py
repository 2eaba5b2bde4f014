"""A stream over an in-memory dense (n, p) array."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .base import FeatureStream


def check_design_shape(shape: tuple, what: str) -> tuple[int, int]:
    """(n, p) of a design, or InputError: OS needs n ≥ 1 samples and p ≥ 1 features."""
    if len(shape) != 2:
        raise InputError(f"{what} must be 2-D (n_samples, n_features), got shape "
                         f"{tuple(shape)}")
    n, p = (int(v) for v in shape)
    if n < 1 or p < 1:
        raise InputError(f"{what} must have at least one sample and one feature, got "
                         f"shape ({n}, {p})")
    return n, p


class ArrayStream(FeatureStream):
    """Columns of a dense numpy array X of shape (n, p), any memory order.

    X is kept by reference, not copied (so it must not change while the stream is in
    use); each block is one gather from ``X.T``, which is C-contiguous when X is
    Fortran-ordered (the fast case) and strided otherwise.
    """

    def __init__(self, X, *, block_size: int = 256, shuffle: bool = False,
                 seed: int = 0, dtype="float64"):
        super().__init__(block_size=block_size, shuffle=shuffle, seed=seed,
                         dtype=dtype)
        X = np.asarray(X)
        if X.dtype.kind not in "biuf":
            raise InputError(f"X must hold numbers, got dtype {X.dtype}")
        self.n_samples, self.n_features = check_design_shape(X.shape, "X")
        self._XT = X.T

    def _read(self, indices: np.ndarray) -> np.ndarray:
        """One gather into a block used again (``streams.pool``).  Where a column of
        X is strided (X in C order), the block is gathered row by row, the b values
        of each row of X side by side, and then transposed: ``np.take`` column by
        column into the block was 45 times slower at the paper's size, and numpy's
        fancy indexing 1.3 times (docs/benchmarks.md, "Blocks used again").
        mode="clip": the indices were checked (with "raise", ``out`` would be a
        copy)."""
        block = self._empty_block(len(indices), self._XT.dtype)
        if self._XT.flags.c_contiguous:
            return np.take(self._XT, indices, axis=0, mode="clip", out=block)
        rows = np.take(self._XT.T, indices, axis=1, mode="clip",
                       out=self._scratch((self.n_samples, len(indices)),
                                         self._XT.dtype))
        block[...] = rows.T
        return block
