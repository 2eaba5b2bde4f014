"""Standardize every column as it streams: centred, and scaled to ‖x‖²/n = 1."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .base import Block, FeatureStream


def column_stats(block: np.ndarray, center: bool = True,
                 scale: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(mean, scale) per row of a (b, n) block, with z = (x - mean) / scale.

    scale is the population standard deviation, so ‖z‖²/n = 1.  An exactly constant
    column gets mean = its value and scale = 1, so z is exactly zero (a rounding-noise
    scale would otherwise blow its round-off up to unit size) and w / scale stays
    finite.  ``center=False`` fixes mean = 0 (scale is then the root mean square);
    ``scale=False`` fixes scale = 1.
    """
    b = block.shape[0]
    mean = block.mean(axis=1) if center else np.zeros(b)
    spread = np.sqrt(np.mean((block - mean[:, None]) ** 2, axis=1)) if scale \
        else np.ones(b)
    constant = (block.max(axis=1) == block.min(axis=1)) & center
    mean[constant] = block[constant, 0]
    spread[constant | (spread == 0.0)] = 1.0
    return mean, spread


def standardize(block: np.ndarray, center: bool = True,
                scale: bool = True) -> np.ndarray:
    mean, spread = column_stats(block, center, scale)
    return np.ascontiguousarray((block - mean[:, None]) / spread[:, None])


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

    def _standardize(self, block: np.ndarray) -> np.ndarray:
        return standardize(block, self.center, self.scale)

    @property
    def n_samples(self) -> int:
        return self.stream.n_samples

    @property
    def n_features(self) -> int:
        return self.stream.n_features

    @property
    def reorderable(self) -> bool:
        return self.stream.reorderable

    def feature_indices(self) -> np.ndarray:
        return self.stream.feature_indices()

    def _holds(self, indices: np.ndarray) -> np.ndarray:
        return self.stream._holds(indices)

    def blocks(self, epoch: int = 0) -> Iterator[Block]:
        for index, block in self.stream.blocks(epoch):
            yield index, self._finish(index, self._standardize(block))

    def columns(self, indices) -> np.ndarray:
        raw = self.stream.columns(indices)
        return self._standardize(raw) if len(raw) else raw

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
            yield index, self._standardize(np.asarray(raw, dtype=np.float64))
