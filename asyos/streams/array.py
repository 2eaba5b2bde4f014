"""A stream over an in-memory dense (n, p) array."""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core.compile_notice import compile_notice
from ..errors import InputError
from .base import DTYPES, FeatureStream

LINE = 64   # bytes in a cache line
SMALL_COPY_BYTES = 1 << 20   # a C-ordered X this small is read from a Fortran copy


@njit(cache=True, nogil=True)
def gather_columns(X, indices, out):
    """out[k] = X[:, indices[k]] for a C-ordered X, a cache line of ``out``'s rows at
    a time: the rows of X that line covers are read along (the block's values of
    each lie side by side when its columns are near each other) and every line of
    ``out`` is written whole.  Column by column, every value read was a cache line of
    its own; in tiles of 64 rows, two and a half times slower than in lines
    (docs/benchmarks.md, "Blocks used again")."""
    n = X.shape[0]
    rows = max(1, LINE // out.itemsize)
    for first in range(0, n, rows):
        last = min(first + rows, n)
        for k in range(indices.size):
            j = indices[k]
            for i in range(first, last):
                out[k, i] = X[i, j]


def gathers(X) -> bool:
    """Whether ``gather_columns`` reads X's columns: X in C order (and not also in
    Fortran order, where its transpose's rows are the columns) of a float type the
    kernels take, in the machine's byte order."""
    return X.ndim == 2 and X.flags.c_contiguous and not X.flags.f_contiguous and \
        X.dtype in DTYPES


def warm_gather(X) -> None:
    """Load (or compile, once per machine) ``gather_columns`` for X's type, when a
    stream over X is made rather than in a timed pass (a read-only X has a signature
    of its own)."""
    tiny = np.zeros((1, 1), X.dtype)
    tiny.flags.writeable = X.flags.writeable
    with compile_notice(lock=False):
        gather_columns(tiny, np.zeros(1, np.int64), np.empty((1, 1), X.dtype))


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
    use); each block is one gather from ``X.T``, its rows when X is Fortran-ordered
    (the fast case), X's rows a cache line at a time when it is C-ordered
    (``gather_columns``).  A C-ordered X of at most ``SMALL_COPY_BYTES`` is copied
    once into Fortran order instead: a small fit reads every column several times
    (its passes and the closing sweep), and one copy costs about one gather.
    """

    in_memory = True

    def __init__(self, X, *, block_size: int = 256, shuffle: bool = False,
                 seed: int = 0, dtype="float64"):
        super().__init__(block_size=block_size, shuffle=shuffle, seed=seed,
                         dtype=dtype)
        X = np.asarray(X)
        if X.dtype.kind not in "biuf":
            raise InputError(f"X must hold numbers, got dtype {X.dtype}")
        self.n_samples, self.n_features = check_design_shape(X.shape, "X")
        if gathers(X) and X.nbytes <= SMALL_COPY_BYTES:
            X = np.asfortranarray(X)
        elif gathers(X):
            warm_gather(X)
        self._XT = X.T
        self._norms = None

    def column_scores(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Every feature's |x_jᵀg| / ‖x_j‖ (0 for an empty column) in one product in
        X's own floating type (an integer X is read a block at a time instead: the
        product would copy it)."""
        XT = self._XT
        if XT.dtype.kind != "f":
            return None
        if self._norms is None:
            self._norms = np.sqrt(np.einsum("ij,ij->i", XT, XT, dtype=np.float64))
        dots = np.abs(XT @ g.astype(XT.dtype, copy=False)).astype(np.float64)
        return np.arange(self.n_features), np.divide(
            dots, self._norms, out=np.zeros(self.n_features), where=self._norms > 0)

    def _read(self, indices: np.ndarray) -> np.ndarray:
        """One gather into a block used again (``streams.pool``): of Xᵀ's rows
        (``np.take``; mode="clip": the indices were checked, and with "raise" ``out``
        would be a copy) or, where X is in C order, by ``gather_columns``
        (docs/benchmarks.md, "Blocks used again")."""
        block = self._empty_block(len(indices), self._XT.dtype)
        if self._XT.flags.c_contiguous:
            return np.take(self._XT, indices, axis=0, mode="clip", out=block)
        if gathers(self._XT.T):
            gather_columns(self._XT.T, np.asarray(indices, np.int64), block)
            return block
        block[...] = self._XT[indices]   # any other layout (a strided view, integers)
        return block
