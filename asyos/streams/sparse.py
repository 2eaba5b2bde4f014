"""Streams of sparse columns: CSC blocks for the sparse OS kernel.

``CSCColumns`` is what every such stream shares (the kept set that reads CSC blocks,
the blocks themselves with their NaN/inf check, b columns densified for baselines and
refits); a subclass only says how to slice a set of columns (``_slice``).
``SparseStream`` slices an in-memory scipy matrix, ``CSCFileStream``
(``streams/csc_file.py``) a ``.csc`` directory on disk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from ..core.kept_set import SparseKeptSet
from ..core.sparse_step import CSCBlock
from ..errors import InputError
from .array import check_design_shape
from .base import FeatureStream
from .prefetch import prefetch


# Columns per block where the caller names no ``block_size``: a block costs about
# 60-100 µs of Python (its slice, the kernel's call), which the short columns of text
# (a few nonzeros each) repay only over thousands of arrivals: 256 columns a block
# were a tenth of a fit on man pages (docs/benchmarks.md, "Small fits").  At most
# BLOCK_COLUMNS, and on average at most BLOCK_NONZEROS nonzeros (a block is a copy of
# its columns), never fewer than 256 columns (every stream's default).
BLOCK_COLUMNS = 4096
BLOCK_NONZEROS = 1 << 20


def columns_per_block(n_features: int, nnz: int) -> int:
    """The block size of a sparse stream of ``n_features`` columns holding ``nnz``
    nonzeros, where its caller names none."""
    mean = max(nnz / max(n_features, 1), 1.0)
    return int(min(BLOCK_COLUMNS, max(256, BLOCK_NONZEROS // mean)))


class CSCColumns(FeatureStream):
    """A stream whose columns are sparse: OS reads it through ``step_blocks``
    (``CSCBlock``s for ``SparseKeptSet``, whose steps cost O(nnz) instead of O(n·s));
    ``blocks`` (baselines, refits) densifies just b columns at a time.

    Subclasses implement ``_slice(index)``: (indptr int (b+1,) from 0, rows int,
    values) of the columns ``index`` in that order, rows ascending in each column.
    """

    sparse = True
    _norms = None   # ‖x_j‖ of every feature, once ``column_scores`` has needed them

    def _slice(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _what(self) -> str:
        """Prefix of the NaN/inf message (a file stream names its path)."""
        return ""

    def _read(self, indices: np.ndarray) -> np.ndarray:
        indptr, rows, vals = self._slice(indices)
        dense = np.zeros((len(indices), self.n_samples), vals.dtype)
        dense[np.repeat(np.arange(len(indices)), np.diff(indptr)), rows] = vals
        return dense

    def kept_set(self, capacity: int) -> SparseKeptSet:
        return SparseKeptSet(self.n_samples, capacity, self.dtype)

    def step_blocks(self, epoch: int = 0) -> Iterator:
        # the order a block at a time: an unshuffled stream never holds it whole
        return self.csc_blocks_of(self.order_chunks(epoch, self.block_size))

    def csc_blocks_in(self, order: np.ndarray, block_size: int) -> Iterator:
        """(indices, CSCBlock) batches of the columns ``order``, read ahead in a
        thread like ``blocks``; a NaN or inf is refused naming its feature."""
        return self.csc_blocks_of(order[start:start + block_size]
                                  for start in range(0, len(order), block_size))

    def csc_blocks_of(self, chunks: Iterable[np.ndarray],
                      read_ahead: bool | None = None) -> Iterator:
        """(indices, CSCBlock) of each index piece of ``chunks`` in turn, read ahead
        in a thread like ``blocks``; ``read_ahead``: whether to (None: as this
        stream's ``prefetch`` says; a shard passes its own)."""
        raw = (self._csc(index) for index in chunks)
        return prefetch(raw) if (self.prefetch if read_ahead is None else read_ahead) \
            else raw

    def _matrix(self):
        """The whole matrix as scipy CSC where the stream holds it in memory (rows
        checked), else None."""
        return None

    def column_scores(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Every feature's |x_jᵀg| / ‖x_j‖ (0 for an empty column) in one product,
        where the matrix is in memory."""
        X = self._matrix()
        if X is None:
            return None
        if self._norms is None:
            self._norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=0),
                                             np.float64).ravel())
        dots = np.abs(X.T @ g)
        return np.arange(self.n_features), np.divide(
            dots, self._norms, out=np.zeros(self.n_features), where=self._norms > 0)

    def _csc(self, index: np.ndarray) -> tuple[np.ndarray, CSCBlock]:
        indptr, rows, vals = self._slice(index)
        finite = np.isfinite(vals)
        if not finite.all():
            column = np.searchsorted(indptr, np.argmin(finite), side="right") - 1
            raise InputError(f"{self._what()}feature {int(index[column])} contains "
                             "NaN or inf")
        return index, CSCBlock(indptr.astype(np.int64, copy=False),
                               rows.astype(np.int64, copy=False),
                               np.ascontiguousarray(vals, dtype=self.dtype),
                               self.n_samples)


class SparseStream(CSCColumns):
    """Columns of a scipy.sparse (n, p) matrix.

    The matrix is converted to CSC once (column slicing is then O(nnz of the columns)):
    memory O(nnz + b·n), never O(n·p).  scipy is imported only here, and only when
    such a stream is made.  ``block_size`` None: ``columns_per_block``.
    """

    def __init__(self, X, *, block_size: int | None = None, shuffle: bool = False,
                 seed: int = 0, dtype="float64"):
        super().__init__(block_size=256 if block_size is None else block_size,
                         shuffle=shuffle, seed=seed, dtype=dtype)
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
        if block_size is None:
            self.block_size = columns_per_block(self.n_features, self._X.nnz)
        # a block is a view or one gather from memory: cheaper in the caller than
        # handed over by a reading thread (about 50 µs a block, a fifth of a one-order
        # fit on real text: docs/benchmarks.md, "The settled test, reads in the
        # caller, the sweep in one product")
        self.prefetch = False

    def _matrix(self):
        return self._X

    def _slice(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        X = self._X
        return slice_columns(X.indptr, X.indices, X.data, index)


def slice_columns(indptr, indices, data, index: np.ndarray):
    """(indptr from 0, rows, values) of the columns ``index`` of the CSC arrays:
    views for a run of consecutive columns (the unshuffled order's blocks); else one
    gather of the columns' entries (numpy, no scipy matrix made)."""
    first, last = int(index[0]), int(index[-1])
    if last - first + 1 == index.size and np.all(np.diff(index) == 1):
        lo, hi = indptr[first], indptr[last + 1]
        return indptr[first:last + 2] - lo, indices[lo:hi], data[lo:hi]
    starts = indptr[index]
    counts = indptr[index + 1] - starts
    out = np.zeros(index.size + 1, np.int64)
    np.cumsum(counts, out=out[1:])
    at = np.repeat(starts - out[:-1], counts) + np.arange(out[-1])
    return out, indices[at], data[at]
