"""Group baselines of the SGHT experiment (Xiang, Yang & Ye, KDD 2014, Section 5.3):
sparse group Lasso, OMP and group OMP (gOMP).

- sgLasso: min f(w) + λ(α‖w‖₁ + (1−α) Σ_G √|G| ‖w_G‖₂) by ``lasso.fista`` with the
  exact prox of the sparse group penalty (soft thresholding, then group shrinkage;
  Simon et al. 2013).  No maintained PyPI package fits (the paper does not name
  its solver), so it is ours.
- OMP adds the feature, gOMP the group, most correlated with the residual, then refits
  least squares on everything chosen (squared loss; the paper's greedy baselines).
"""

from __future__ import annotations

import numpy as np

from ..core.losses import Loss
from ..core.projection import check_groups
from ..core.prox import soft_threshold
from ..core.selection import Selection
from ..core.validate import check_at_least, check_int, check_problem
from ..errors import InputError
from ..lasso.selector import fista, lambda_max

__all__ = ["fit_gomp", "fit_omp", "fit_sparse_group_lasso", "sparse_group_prox"]


def sparse_group_prox(z, t, lam, alpha, group_of, sizes):
    """prox of t·λ(α‖·‖₁ + (1−α)Σ_G √|G|‖·_G‖₂) at z (exact for disjoint groups)."""
    u = soft_threshold(z, t * lam * alpha)
    norms = np.sqrt(np.bincount(group_of, weights=u * u, minlength=sizes.size))
    level = t * lam * (1.0 - alpha) * np.sqrt(sizes)
    scale = np.where(norms > level, 1.0 - level / np.maximum(norms, 1e-300), 0.0)
    return u * scale[group_of]


def fit_sparse_group_lasso(X, y, groups, lam: float, alpha: float = 0.5,
                           loss="squared", max_iter: int = 2000,
                           tol: float = 1e-6) -> Selection:
    """Sparse group Lasso at one λ (and mix α ∈ [0, 1]); selection = supp(w)."""
    X, y, _, loss = check_problem(X, y, 1, loss)
    group_of, n_groups = check_groups(groups, X.shape[1])
    lam = check_at_least("lam", lam, 0)
    if isinstance(alpha, bool) or not (isinstance(alpha, (int, float))
                                       and 0.0 <= alpha <= 1.0):
        raise InputError(f"alpha must be a number in [0, 1], got {alpha!r}")
    sizes = np.bincount(group_of, minlength=n_groups).astype(np.float64)
    w, n_iter = fista(X, y, lam, loss, max_iter=max_iter, tol=tol,
                      prox=lambda z, t: sparse_group_prox(z, t, lam, alpha, group_of,
                                                          sizes))
    selected = np.flatnonzero(w).astype(np.int64)
    return Selection(selected=selected, weights=w[selected].copy(), n_iter=n_iter,
                     name="sgLasso")


def sparse_group_lambda_max(X, y, groups, alpha: float = 0.5) -> float:
    """An upper bound on the smallest λ with w = 0 optimal: λ_max of the Lasso over α
    (α > 0), else the group bound max_G ‖X_Gᵀ∇‖/√|G|; a grid's top."""
    X, y, _, _ = check_problem(X, y, 1, "squared")
    if alpha > 0:
        return lambda_max(X, y, Loss.SQUARED) / alpha
    group_of, n_groups = check_groups(groups, X.shape[1])
    grad = X.T @ y / X.shape[0]
    norms = np.sqrt(np.bincount(group_of, weights=grad * grad, minlength=n_groups))
    return float(np.max(norms / np.sqrt(np.bincount(group_of))))


def _greedy(X, y, k: int, candidates, name: str) -> Selection:
    """Add ``k`` times the candidate set (a feature, or a group's features) with the
    largest ‖X_Cᵀ r‖₂, then refit least squares on all chosen features."""
    chosen: list[int] = []
    w = np.zeros(0)
    residual = y.copy()
    used = np.zeros(len(candidates), dtype=bool)
    for _ in range(k):
        score = np.array([-np.inf if used[c] else
                          float(np.linalg.norm(X[:, idx].T @ residual))
                          for c, idx in enumerate(candidates)])
        best = int(np.argmax(score))
        if used[best]:
            break
        used[best] = True
        chosen.extend(candidates[best].tolist())
        w = np.linalg.lstsq(X[:, chosen], y, rcond=None)[0]
        residual = y - X[:, chosen] @ w
    order = np.argsort(chosen)
    selected = np.asarray(chosen, dtype=np.int64)[order]
    return Selection(selected=selected, weights=w[order], n_iter=int(used.sum()),
                     name=name)


def fit_omp(X, y, k: int) -> Selection:
    """Orthogonal matching pursuit with ``k`` features (squared loss)."""
    X, y, k, _ = check_problem(X, y, k, "squared")
    return _greedy(X, y, k, [np.array([j]) for j in range(X.shape[1])], "OMP")


def fit_gomp(X, y, groups, k: int) -> Selection:
    """Group OMP with ``k`` groups (squared loss)."""
    X, y, _, _ = check_problem(X, y, 1, "squared")
    group_of, n_groups = check_groups(groups, X.shape[1])
    k = check_int("k", k, 1, n_groups + 1)
    members = [np.flatnonzero(group_of == g) for g in range(n_groups)]
    return _greedy(X, y, k, members, "gOMP")
