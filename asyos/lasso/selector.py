"""LASSO by SAIF (squared loss) or FISTA, and the λ rule every L1 baseline shares
(the L1 baselines of Yang, Fujimaki, Kusumura & Liu, KDD 2016, Section 5).

The batch L1 baseline: min_w f(w) + λ‖w‖₁ with all p columns in memory.  The user gives
only s, so λ comes from a warm-started geometric path (``lambda_for_s``); Grafting and
online L1 coordinate descent get the same λ, which makes the L1 methods comparable.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..core.losses import Loss, loss_grad, loss_value
from ..core.prox import soft_threshold, spectral_norm_sq
from ..core.selection import Selection, selection
from ..core.validate import check_at_least, check_problem
from ..errors import ConvergenceWarning
from .path import make_design, solve_path

__all__ = ["LAMBDA_RATIO", "fista", "fit_lasso", "lambda_for_s", "lambda_max",
           "lasso_objective"]

LAMBDA_RATIO = 0.85     # our λ grid: λ_k = λ_max · 0.85^k
MAX_GRID_STEPS = 100    # 0.85^100 ≈ 1e-7: far below any λ that selects s ≤ n features


def lambda_max(X, y, loss) -> float:
    """‖Xᵀ dL/du(0)‖_∞: the smallest λ at which w = 0 is optimal."""
    loss = Loss.parse(loss)
    g = loss_grad(int(loss), np.zeros(len(y)), y, np.empty(len(y)))
    return float(np.max(np.abs(X.T @ g)))


def lasso_objective(X, y, w, lam: float, loss="squared") -> float:
    """f(w) + λ‖w‖₁ with f = L(Xw, y) (squared: (1/(2n))‖Xw − y‖²)."""
    loss = Loss.parse(loss)
    u = np.ascontiguousarray(X @ w, dtype=np.float64)
    return float(loss_value(int(loss), u, y) + lam * np.abs(w).sum())


def fista(X, y, lam: float, loss="squared", w0=None, lip: float | None = None,
          max_iter: int = 2000, tol: float = 1e-6, prox=None,
          convergence_warning=ConvergenceWarning) -> tuple[np.ndarray, int]:
    """min_w f(w) + λ‖w‖₁ by FISTA (Beck & Teboulle 2009); returns (w, iterations run).

    X, y are taken as given (callers check them).  Step 1/L with L = curv·‖X‖₂²/n
    (``lip`` if known, so a path computes it once).  Stops when ‖Δw‖ ≤ tol·‖w‖ or
    after ``max_iter`` steps.  Momentum is reset whenever it points uphill
    (O'Donoghue & Candès 2015, gradient scheme): same fixed point, but linear
    convergence on the well-conditioned active sets seen here instead of FISTA's
    ripples.  ``prox(z, t)``: the prox of t·penalty (default λ‖·‖₁, soft thresholding
    at λt), for other penalties such as the sparse group Lasso.  Stopping at
    ``max_iter`` warns with ``convergence_warning`` (None: silent, for inner solves
    whose caller judges convergence itself).
    """
    loss = Loss.parse(loss)
    n, k = X.shape
    w = np.zeros(k) if w0 is None else np.array(w0, dtype=np.float64)
    if lip is None:
        lip = loss.curvature * spectral_norm_sq(X) / n
    if lip <= 0.0:               # X = 0: f is constant, the prox of λ‖·‖₁ wins
        return np.zeros(k), 0
    if prox is None:
        def prox(z, t):
            return soft_threshold(z, lam * t)
    code = int(loss)
    g = np.empty(n)
    v = w.copy()
    t = 1.0
    it = 0
    for it in range(1, int(max_iter) + 1):
        loss_grad(code, X @ v, y, g)
        w_new = prox(v - (X.T @ g) / lip, 1.0 / lip)
        step = w_new - w
        if np.dot(v - w_new, step) > 0.0:    # momentum went uphill: restart it
            t = 1.0
            v = w_new.copy()
        else:
            t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
            v = w_new + ((t - 1.0) / t_new) * step
            t = t_new
        w = w_new
        if np.linalg.norm(step) <= tol * np.linalg.norm(w):
            break
    else:
        if convergence_warning is not None and it:
            change = np.linalg.norm(step) / max(np.linalg.norm(w), 1e-300)
            warnings.warn(f"FISTA stopped at max_iter={int(max_iter)} with a relative "
                          f"step of {change:.2g} (tol={tol:g}); raise max_iter",
                          convergence_warning, stacklevel=2)
    return w, it


def first_on_grid(lam_max: float, s: int, solve) -> tuple[float, np.ndarray, int]:
    """Walk the λ grid λ_max·0.85^k, calling ``solve(λ)`` (warm starts are
    the caller's); return (λ, coefficients, grid points tried) of the first λ whose
    solution has ≥ s nonzeros, else of the one with the most (the larger λ on ties)."""
    lam, best = lam_max, None
    for step in range(1, MAX_GRID_STEPS + 2):
        w = solve(lam)
        nnz = int(np.count_nonzero(w))
        if nnz >= s:
            return lam, w, step
        if best is None or nnz > best[0]:
            best = (nnz, lam, w)
        lam *= LAMBDA_RATIO
    return best[1], best[2], MAX_GRID_STEPS + 1


def _path(X, y, s: int, loss: Loss, max_iter: int,
          tol: float) -> tuple[float, np.ndarray, int]:
    """Walk the λ grid with warm starts; return (λ, w, total iterations).

    λ is the largest grid value with nnz(w) ≥ min(s, n): an L1 solution has at most
    n nonzeros, so for n < s (the paper's privacy protocol) the path stops where it
    saturates rather than chasing the spurious tiny weights of ever slower solves at
    λ → 0.  Should no grid value get there, the one with the most nonzeros is
    returned (the larger λ on ties).
    """
    state = {"w": np.zeros(X.shape[1]), "iterations": 0}
    if loss is Loss.SQUARED:
        design = make_design(X)

        def solve(lam):
            state["w"], it = _saif(design, y, lam, max_iter, tol, state["w"])
            state["iterations"] += it
            return state["w"]
    else:
        lip = loss.curvature * spectral_norm_sq(X) / X.shape[0]

        def solve(lam):
            state["w"], it = fista(X, y, lam, loss, w0=state["w"], lip=lip,
                                   max_iter=max_iter, tol=tol)
            state["iterations"] += it
            return state["w"]

    lam, w, _ = first_on_grid(lambda_max(X, y, loss), min(s, X.shape[0]), solve)
    return lam, w, state["iterations"]


def _saif(design, y, lam: float, max_epochs: int, tol: float,
          w0=None) -> tuple[np.ndarray, int]:
    """The squared-loss LASSO at λ (1/(2n) scale) by SAIF: CD epochs until the
    duality gap ≤ tol·‖y‖² (the CD works in the ½‖·‖² scale, at n·λ)."""
    res = solve_path(design, y, [design.n * lam], tol, "saif", max_epochs, w0)
    return res.coefs[0], int(res.epochs[0])


def lambda_for_s(X, y, s: int, loss="squared", max_iter: int = 2000,
                 tol: float = 1e-6) -> float:
    """The λ rule of Yang et al. (2016, Section 5) on our grid: the largest
    λ_max·0.85^k whose LASSO solution (warm-started FISTA along the grid) has at least
    s nonzeros (at least n if n < s, the most an L1 solution can have).  Grafting and
    online L1 coordinate descent use this λ too.  For the squared loss each grid point
    is solved by SAIF (``saif.py``) and ``tol`` is its relative duality gap; the other
    losses use FISTA."""
    X, y, s, loss = check_problem(X, y, s, loss)
    return _path(X, y, s, loss, max_iter, tol)[0]


def fit_lasso(X, y, s: int, loss="squared", lam: float | None = None,
              max_iter: int = 2000, tol: float = 1e-6) -> Selection:
    """LASSO: f(w) + λ‖w‖₁ by SAIF for the squared loss, FISTA for the
    others; selection = supp(w), cut to the top s by |w|.

    ``lam=None`` takes λ from the path of ``lambda_for_s`` (its solution, so the path is
    walked once); a given λ is solved from w = 0.  ``n_iter`` counts CD epochs
    (squared) or FISTA iterations.
    """
    X, y, s, loss = check_problem(X, y, s, loss)
    if lam is None:
        lam, w, n_iter = _path(X, y, s, loss, max_iter, tol)
    elif loss is Loss.SQUARED:
        w, n_iter = _saif(make_design(X), y, check_at_least("lam", lam, 0), max_iter, tol)
    else:
        w, n_iter = fista(X, y, check_at_least("lam", lam, 0), loss, max_iter=max_iter, tol=tol)
    return selection(np.arange(X.shape[1]), w, s, "LASSO", n_iter)
