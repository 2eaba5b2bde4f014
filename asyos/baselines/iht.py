"""Proj-GD / IHT: projected gradient onto {‖w‖₀ ≤ s} (Yuan, Li & Zhang 2014), as
compared with OS by Yang, Fujimaki, Kusumura & Liu (KDD 2016).

The batch L0 baseline: it sees all p columns at once (memory O(np)), which is what OS
avoids.  Step 1/L with L = curv·‖X‖₂²/n, the smoothness constant of f.
"""

from __future__ import annotations

import numpy as np

from ..core.losses import loss_grad
from ..core.prox import spectral_norm_sq
from ..core.selection import Selection, top_s
from ..core.validate import check_int, check_problem
from ..errors import InputError

__all__ = ["fit_iht", "hard_threshold"]


def hard_threshold(v, s: int) -> np.ndarray:
    """H_s(v): keep the s entries of largest |v_i| (ties: lower index first), zero
    the rest; the tie rule makes the projection deterministic."""
    s = check_int("s", s, 0)
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 1:
        raise InputError(f"v must be 1-D, got shape {v.shape}")
    out = np.zeros_like(v)
    keep = top_s(v, int(s))
    out[keep] = v[keep]
    return out


def fit_iht(X, y, s: int, loss="squared", max_iter: int = 500,
            tol: float = 1e-6) -> Selection:
    """Proj-GD: w ← H_s(w − (1/L) Xᵀ dL/du(Xw)) from w = 0.

    Stops when the kept set is unchanged and ‖Δw‖ ≤ tol‖w‖, or after ``max_iter``
    steps.  Selection = supp(w), the nonzeros of the final iterate.
    """
    X, y, s, loss = check_problem(X, y, s, loss)
    n, p = X.shape
    lip = loss.curvature * spectral_norm_sq(X) / n
    w = np.zeros(p)
    g = np.empty(n)
    kept = None
    n_iter = 0
    if lip > 0.0:
        step = 1.0 / lip
        for n_iter in range(1, int(max_iter) + 1):
            loss_grad(int(loss), X @ w, y, g)
            v = w - step * (X.T @ g)
            new_kept = np.sort(top_s(v, s))
            w_new = np.zeros(p)
            w_new[new_kept] = v[new_kept]
            same = kept is not None and np.array_equal(new_kept, kept)
            small = np.linalg.norm(w_new - w) <= tol * np.linalg.norm(w_new)
            w, kept = w_new, new_kept
            if same and small:
                break
    selected = np.flatnonzero(w).astype(np.int64)
    return Selection(selected=selected, weights=w[selected].copy(), n_iter=n_iter,
                     name="Proj-GD")
