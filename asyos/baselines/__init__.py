"""Baselines of spec §6, all returning a ``Selection`` so they are scored alike."""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)  # eq=False: arrays make field-wise == ambiguous
class Selection:
    """What a baseline selected: sorted int64 indices, their weights (aligned), the
    number of iterations run, and the method's name as in the paper's legends."""

    selected: np.ndarray
    weights: np.ndarray
    n_iter: int
    name: str


# Imported last: iht imports Selection from this module.
from .iht import fit_iht

__all__ = ["Selection", "fit_iht"]
