"""Baselines of spec §6, all returning a ``Selection`` so they are scored alike.

``METHODS`` maps the paper's legend names (§5.6) to one uniform call
``f(X, y, s, loss=..., epochs=...)``; the batch methods ignore ``epochs``.
"""

from dataclasses import dataclass
from functools import wraps

import numpy as np


@dataclass(frozen=True, eq=False)  # eq=False: arrays make field-wise == ambiguous
class Selection:
    """What a baseline selected: sorted int64 indices, their weights (aligned), the
    number of iterations run, and the method's name as in the paper's legends.
    Online methods also report ``peak_active``, the most features (columns or
    nonzero weights) they held at once, to compare memory with OS (spec §7.4)."""

    selected: np.ndarray
    weights: np.ndarray
    n_iter: int
    name: str
    peak_active: int | None = None


# Imported last: the method modules import Selection from this module.
from .fgm import fit_fgm
from .grafting import fit_grafting
from .iht import fit_iht
from .lasso import fit_lasso, lambda_for_s
from .online_cd import fit_l0_cd, fit_l1_cd


def _batch(fit):
    """``fit`` with the uniform call: a batch method has no epochs to run."""
    @wraps(fit)
    def call(X, y, s, loss="squared", epochs=None):
        return fit(X, y, s, loss=loss)
    return call


METHODS = {
    "Proj-GD": _batch(fit_iht),
    "LASSO": _batch(fit_lasso),
    "FGM": _batch(fit_fgm),
    "Grafting": fit_grafting,
    "L1 coordinate descent": fit_l1_cd,
    "L0 coordinate descent": fit_l0_cd,
}

__all__ = ["METHODS", "Selection", "fit_fgm", "fit_grafting", "fit_iht", "fit_l0_cd", "fit_l1_cd",
           "fit_lasso", "lambda_for_s"]
