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
        # mode="clip": the indices were checked (with "raise", ``out`` is a copy)
        return np.take(self._XT, indices, axis=0, mode="clip",
                       out=self._empty_block(len(indices), self._XT.dtype))
