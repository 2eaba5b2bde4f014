"""A Gaussian design generated column by column: X never exists anywhere.

Column j is ``default_rng([seed, j]).standard_normal(n)``, so any process can produce
any column, in any order, in O(n) memory: the synthetic problems of the paper
(Yang et al., KDD 2016, Section 5) at any p, and Asy-OS workers that generate only
their own shard.
"""

from __future__ import annotations

import numpy as np

from ..core.validate import check_int
from .array import check_design_shape
from .base import FeatureStream


class GaussianStream(FeatureStream):
    """iid N(0, 1) columns of an (n, p) design, regenerated on demand from a seed."""

    def __init__(self, n_samples: int, n_features: int, *, design_seed: int = 0,
                 block_size: int = 256, shuffle: bool = False, seed: int = 0,
                 dtype="float64"):
        super().__init__(block_size=block_size, shuffle=shuffle, seed=seed,
                         dtype=dtype)
        self.n_samples, self.n_features = check_design_shape(
            (n_samples, n_features), "the Gaussian design")
        self.design_seed = check_int("design_seed", design_seed, 0)

    def _read(self, indices: np.ndarray) -> np.ndarray:
        block = self._empty_block(len(indices), np.float64)
        for k, j in enumerate(indices):
            np.random.default_rng([self.design_seed, int(j)]).standard_normal(
                out=block[k])
        return block
