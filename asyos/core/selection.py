"""What a selector returns, and the one rule that cuts its weights to s features.

Every method outside OS (the batch and online comparators, the Lasso family, SGHT,
FGM) reports a ``Selection`` made by ``selection``, so they are all scored alike: the
nonzero weights, cut to the s largest in magnitude (ties to the lower index), sorted
by feature index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Selection", "selection", "top_s"]


@dataclass(frozen=True, eq=False)  # eq=False: arrays make field-wise == ambiguous
class Selection:
    """What a baseline selected: sorted int64 indices, their weights (aligned), the
    number of iterations run, and the method's name as in the paper's legends.
    Online methods also report ``peak_active``, the most features (columns or
    nonzero weights) they held at once, to compare memory with OS."""

    selected: np.ndarray
    weights: np.ndarray
    n_iter: int
    name: str
    peak_active: int | None = None


def top_s(v: np.ndarray, s: int) -> np.ndarray:
    """Indices of the s largest |v_i|, ties to the lower index (stable sort)."""
    return np.argsort(-np.abs(v), kind="stable")[:s]


def selection(indices, weights, s: int, name: str, n_iter: int,
              peak_active: int | None = None) -> Selection:
    """The ``Selection`` every method returns: the nonzeros of (indices, weights), cut
    to the top s by |w| (ties to the lower index), sorted by index with aligned
    weights."""
    indices = np.asarray(indices, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    order = np.argsort(indices, kind="stable")
    indices, weights = indices[order], weights[order]
    nonzero = weights != 0.0
    indices, weights = indices[nonzero], weights[nonzero]
    if indices.size > s:
        keep = np.sort(top_s(weights, s))
        indices, weights = indices[keep], weights[keep]
    return Selection(selected=indices.copy(), weights=weights.copy(),
                     n_iter=int(n_iter), name=name, peak_active=peak_active)
