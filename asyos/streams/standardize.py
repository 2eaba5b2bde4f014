"""Standardize every column as it streams: centred, and scaled to ‖x‖²/n = 1."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numba import njit

from ..core.compile_notice import compile_notice
from .base import Block, FeatureStream


SUMS = {"reassoc"}   # sums in any order (vectorised); NaN and inf kept as they are


@njit(cache=True, nogil=True, fastmath=SUMS)
def _row_stats(row, center, scale):
    """(mean, scale) of one row: ``column_stats``'s rule."""
    n = row.size
    constant = center
    for i in range(1, n):   # a row that is not constant says so at once
        if row[i] != row[0]:
            constant = False
            break
    total = 0.0
    for i in range(n):
        total += row[i]
    mean = (row[0] if constant else total / n) if center else 0.0
    spread = 1.0
    if scale:
        squares = 0.0
        for i in range(n):
            squares += (row[i] - mean) ** 2
        spread = np.sqrt(squares / n)
        if constant or spread == 0.0:
            spread = 1.0
    return mean, spread


@njit(cache=True, nogil=True, fastmath=SUMS)
def _standardize_rows(block, center, scale, mean, spread, out):
    """Each row's ``_row_stats`` into ``mean``/``spread`` and, where ``out`` has
    rows, the row standardized into it: one read of each row from memory (a row of
    n values stays in the cache for the later loops), where numpy took five passes
    over the block and two new arrays."""
    for k in range(block.shape[0]):
        row = block[k]
        shift, spread[k] = _row_stats(row, center, scale)
        mean[k] = shift
        if out.shape[0]:
            into, times = out[k], 1.0 / spread[k]   # 1 without ``scale``: exact
            for i in range(row.size):
                into[i] = (row[i] - shift) * times


def column_stats(block: np.ndarray, center: bool = True,
                 scale: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(mean, scale) per row of a (b, n) block, with z = (x - mean) / scale.

    scale is the population standard deviation, so ‖z‖²/n = 1.  An exactly constant
    column gets mean = its value and scale = 1, so z is exactly zero (a rounding-noise
    scale would otherwise blow its round-off up to unit size) and w / scale stays
    finite.  ``center=False`` fixes mean = 0 (scale is then the root mean square);
    ``scale=False`` fixes scale = 1.
    """
    block = np.ascontiguousarray(block, dtype=np.float64)
    mean, spread = np.empty(len(block)), np.empty(len(block))
    _standardize_rows(block, bool(center), bool(scale), mean, spread,
                      np.empty((0, block.shape[1])))
    return mean, spread


def standardize(block: np.ndarray, center: bool = True, scale: bool = True,
                out: np.ndarray | None = None) -> np.ndarray:
    """(x - mean) / scale of each row of ``block`` (``column_stats``), into ``out``
    (a C-contiguous float64 array of the block's shape) or a new array."""
    block = np.ascontiguousarray(block, dtype=np.float64)
    out = np.empty(block.shape) if out is None else out
    _standardize_rows(block, bool(center), bool(scale), np.empty(len(block)),
                      np.empty(len(block)), out)
    return out


class Standardized(FeatureStream):
    """Any stream, with each column centred and scaled so that ‖x‖²/n = 1.

    Standardizing puts every feature on the same footing for the step size and the
    substitution rule without a preprocessing pass: the statistics of a
    column are computed from the column itself as it arrives.  Weights learned on
    the standardized features map back with ``coef_raw = w / scale`` (and an
    intercept shift of ``-Σ coef_raw·mean``), using ``stats``.
    Order, shuffling and sharding are the wrapped stream's.  ``center=False`` or
    ``scale=False`` leave out that half (the estimators centre without scaling to fit
    an intercept; the paper's model has none).
    """

    def __init__(self, stream: FeatureStream, *, center: bool = True,
                 scale: bool = True):
        super().__init__(block_size=stream.block_size, shuffle=stream.shuffle,
                         seed=stream.seed, dtype=stream.dtype)
        self.stream = stream
        self.center, self.scale = bool(center), bool(scale)
        with compile_notice(lock=False):   # loaded (or compiled) now, not in a pass
            standardize(np.ones((1, 2)))

    def _standardize(self, block: np.ndarray) -> np.ndarray:
        """``standardize`` into an array of this stream's pool (``streams.pool``)."""
        return standardize(block, self.center, self.scale,
                           self._empty_block(len(block), np.float64))

    @property
    def n_samples(self) -> int:
        return self.stream.n_samples

    @property
    def n_features(self) -> int:
        return self.stream.n_features

    @property
    def reorderable(self) -> bool:
        return self.stream.reorderable

    @property
    def in_memory(self) -> bool:
        return self.stream.in_memory

    def feature_indices(self) -> np.ndarray:
        return self.stream.feature_indices()

    def _holds(self, indices: np.ndarray) -> np.ndarray:
        return self.stream._holds(indices)

    def columns(self, indices) -> np.ndarray:
        raw = self.stream.columns(indices)
        return self._standardize(raw).astype(self.dtype, copy=False) if len(raw) \
            else raw

    def stats(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """(mean, scale) of the raw columns ``indices``: z = (x - mean) / scale."""
        raw = self.stream.columns(indices)
        if not len(raw):
            return np.zeros(0), np.ones(0)
        return column_stats(raw, self.center, self.scale)

    def shard(self, q: int, t: int) -> FeatureStream:
        return Standardized(self.stream.shard(q, t), center=self.center,
                            scale=self.scale)

    def _read(self, indices: np.ndarray) -> np.ndarray:
        return self._standardize(self.stream._read(indices))

    def _raw_blocks(self, order: np.ndarray, block_size: int) -> Iterator[Block]:
        for index, raw in self.stream._raw_blocks(order, block_size):
            yield index, self._standardize(raw)   # (float64 in ``standardize``)
