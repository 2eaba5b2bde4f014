"""The fractional sparse group models frac(1,2) and frac(2,1), the SGHT paper's
penalty baselines for bi-level and group selection (Xiang, Yang & Ye, KDD 2014,
Section 5.3, after Xiang, Yuan, Fan, Wang, Thompson & Ye, KDD 2013).

Our reconstruction (the SGHT paper names the models but does not define them; see
docs/algorithms.md, "The fractional models frac(1,2) and frac(2,1)"):

    min_x f(x) + λ Σ_G ‖x_G‖_q^{1/2},      q = 1: frac(1,2),   q = 2: frac(2,1),

f(x) = ‖Xx − y‖²/(2n).  The square root of a group norm is what a factorised
bi-level model — each group's weights written as a group scale times a feature
vector, x_G = α_G β_G, with λ1|α_G| + λ2‖β_G‖_q as penalty (our choice, not checked
against the KDD 2013 text) — comes to once α is minimised out: min over α of
λ1|α| + λ2‖x_G‖_q/|α| = 2√(λ1λ2‖x_G‖_q).  The outer
square root prunes groups; an inner ℓ1 norm also prunes features inside a group
(bi-level), an inner ℓ2 norm keeps a chosen group whole (group selection).

Solved by iteratively reweighted convex problems (a majorize-minimize scheme): √t
lies below its tangent, so with ω_G = 1/(2√(‖x^k_G‖_q + ε)) the weighted convex
problem min f(x) + λ Σ_G ω_G ‖x_G‖_q (a weighted Lasso for q = 1, a weighted group
Lasso for q = 2, by ``lasso.fista`` with the exact prox) does not raise the smoothed
objective F_ε(x) = f(x) + λ Σ_G √(‖x_G‖_q + ε).  The first solve has ω = 1 (the
convex ℓ_{q,1} model); each later one starts from the last iterate.  Selection =
supp(x).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.iterates import Iterates
from ..core.projection import check_groups
from ..core.prox import soft_threshold, spectral_norm_sq
from ..core.selection import Selection
from ..core.validate import check_at_least, check_problem
from ..errors import ConvergenceWarning, InputError
from ..lasso.selector import fista

__all__ = ["FracPath", "frac_objective", "frac_solve", "fit_frac"]

INNER = (1, 2)   # q of frac(1,2) and frac(2,1)


@dataclass
class FracPath(Iterates):
    """The final iterate, F_ε after every accepted solve (the convex start first;
    non-increasing after it), the solves run and whether F_ε stopped falling
    (relative change ≤ tol, or none) before ``max_reweight``."""

    n_reweight: int = 0


def _group_norms(w, group_of, n_groups, q):
    if q == 1:
        return np.bincount(group_of, weights=np.abs(w), minlength=n_groups)
    return np.sqrt(np.bincount(group_of, weights=w * w, minlength=n_groups))


def frac_objective(X, y, w, groups, lam: float, q: int, eps: float = 0.0) -> float:
    """F_ε(w) = ‖Xw − y‖²/(2n) + λ Σ_G √(‖w_G‖_q + ε)."""
    group_of, n_groups = check_groups(groups, X.shape[1])
    r = X @ w - y
    norms = _group_norms(w, group_of, n_groups, q)
    return 0.5 * float(r @ r) / X.shape[0] + lam * float(np.sqrt(norms + eps).sum())


def _weighted_prox(q, group_of):
    """prox of t·Σ_G c_G ‖·_G‖_q for the thresholds c (one per group)."""
    if q == 1:
        return lambda z, t, c: soft_threshold(z, t * c[group_of])

    def group_shrink(z, t, c):
        norms = np.sqrt(np.bincount(group_of, weights=z * z, minlength=c.size))
        level = t * c
        scale = np.where(norms > level, 1.0 - level / np.maximum(norms, 1e-300), 0.0)
        return z * scale[group_of]
    return group_shrink


def frac_solve(X, y, groups, lam: float, q: int, eps: float = 1e-3,
               max_reweight: int = 30, max_iter: int = 1000,
               tol: float = 1e-6, convergence_warning=ConvergenceWarning) -> FracPath:
    """The reweighted scheme of the module docstring at one λ; ``q`` = 1 (frac(1,2))
    or 2 (frac(2,1)); ``eps`` the smoothing ε of the group norms.  Stopping after
    ``max_reweight`` reweightings issues ``convergence_warning`` (None: none)."""
    X, y, _, _ = check_problem(X, y, 1, "squared")
    group_of, n_groups = check_groups(groups, X.shape[1])
    lam = check_at_least("lam", lam, 0.0)
    eps = check_at_least("eps", eps, 0.0)
    if q not in INNER or isinstance(q, bool):
        raise InputError(f"q must be 1 (frac(1,2)) or 2 (frac(2,1)), got {q!r}")
    if eps == 0.0:
        raise InputError("eps must be > 0 (the weights are 1/(2√(‖x_G‖ + ε)))")
    prox = _weighted_prox(q, group_of)
    lip = spectral_norm_sq(X) / X.shape[0]
    p = X.shape[1]
    w = np.zeros(p)
    weights = np.ones(n_groups)
    path = FracPath(w=w)
    for it in range(1, int(max_reweight) + 1):
        c = lam * weights
        w_new, _ = fista(X, y, lam, "squared", w0=w, lip=lip, max_iter=max_iter,
                         tol=tol, prox=lambda z, t, c=c: prox(z, t, c),
                         convergence_warning=None)
        f_new = frac_objective(X, y, w_new, group_of, lam, q, eps)
        path.n_reweight = it
        if path.objective and f_new >= path.objective[-1]:   # no further gain
            path.converged = True
            break
        change = abs(path.objective[-1] - f_new) if path.objective else math.inf
        w = w_new
        path.objective.append(f_new)
        weights = 0.5 / np.sqrt(_group_norms(w, group_of, n_groups, q) + eps)
        if change <= tol * max(abs(f_new), 1e-300):
            path.converged = True
            break
    return path.finish(w, convergence_warning, f"frac({q},{3 - q}) stopped at "
                       f"max_reweight={int(max_reweight)} reweightings with the "
                       "objective still falling; raise max_reweight")


def fit_frac(X, y, groups, lam: float, q: int, eps: float = 1e-3,
             max_reweight: int = 30, max_iter: int = 1000,
             tol: float = 1e-6) -> Selection:
    """frac(1,2) (``q=1``) or frac(2,1) (``q=2``) at one λ; selection = supp(x)."""
    path = frac_solve(X, y, groups, lam, q, eps=eps, max_reweight=max_reweight,
                      max_iter=max_iter, tol=tol)
    selected = np.flatnonzero(path.w).astype(np.int64)
    return Selection(selected=selected, weights=path.w[selected].copy(),
                     n_iter=path.n_reweight, name=f"frac({q},{3 - q})")
