"""SGHT: projected gradient onto {≤ s1 features in ≤ s2 groups} (Xiang, Yang & Ye,
KDD 2014, Algorithms 1-2).

The batch bi-level baseline.  Each step projects w − ∇f(w)/L exactly with the DP of
``core/projection.py``; L comes from a backtracking line search started at the
Barzilai-Borwein estimate (or a constant), as in the paper's four variants (its
Section 2 and Table 1):

    ISTA     BB start, sufficient decrease (4)     ISTA-L   BB start, Lipschitz test (3)
    FISTA    BB start, Lipschitz test at u_m       FISTA-C  constant start, as FISTA

f is the mean loss L(Xw, y) used throughout asyos (squared, squared hinge, logistic),
so L ≈ 1 for columns with ‖x‖²/n ≈ 1: the floor L ≥ 1 of the BB start is in the same
units.

FISTA is not monotone, least of all on a nonconvex set: a step that raises f restarts
the momentum (O'Donoghue & Candès 2015, function-value restart) and is replaced by a
plain projected-gradient step from the last iterate, which the Lipschitz test makes
monotone (Beck & Teboulle 2009, MFISTA).  Every variant thus stops only at a relative
decrease ≤ tol, at a plain step that no longer decreases f, or at ``max_iter``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.iterates import Iterates
from ..core.losses import loss_grad, loss_value
from ..core.projection import bilevel_keep_compact, group_constraint
from ..core.selection import Selection
from ..core.validate import check_choice, check_problem
from ..errors import ConvergenceWarning, InputError

__all__ = ["STARTS", "VARIANTS", "SGHTPath", "fit_sght", "sght_from_starts",
           "sght_solve", "start_point"]

VARIANTS = ("ISTA", "ISTA-L", "FISTA", "FISTA-C")
STARTS = ("zero", "least_squares", "ridge", "correlation")
DELTA = 1e-5          # δ of the sufficient-decrease test (ours: the paper gives none)
MAX_BACKTRACKS = 100  # η = 2: L grows by 2^100, far past any Lipschitz constant


@dataclass
class SGHTPath(Iterates):
    """The final iterate, the objective after every accepted iteration, the
    iterations run (rejected FISTA steps included), whether the solver converged
    (``False``: it stopped at ``max_iter``), the last relative decrease of f and the
    number of momentum restarts."""

    n_iter: int = 0
    change: float = math.inf
    restarts: int = 0


class _Problem:
    """f, ∇f and the projection of one (X, y, loss, groups, s1, s2)."""

    def __init__(self, X, y, loss, group_of, s1, s2):
        self.X, self.y, self.code = X, y, int(loss)
        self.n_groups = int(group_of.max()) + 1
        # s2 > min(s1, G) binds nothing but would cost a G·(s2+1)·(s1+1) table
        self.group_of, self.s1, self.s2 = group_of, s1, min(s2, s1, self.n_groups)
        self._g = np.empty(X.shape[0])
        self._keep = np.empty(X.shape[1], dtype=np.bool_)

    def value(self, w) -> float:
        return float(loss_value(self.code, np.ascontiguousarray(self.X @ w), self.y))

    def value_grad(self, w) -> tuple[float, np.ndarray]:
        u = np.ascontiguousarray(self.X @ w)
        loss_grad(self.code, u, self.y, self._g)
        return float(loss_value(self.code, u, self.y)), self.X.T @ self._g

    def project(self, v) -> np.ndarray:
        """SGHT(v): the exact DP of Xiang et al. (Algorithms 3-4)."""
        bilevel_keep_compact(v, self.group_of, self.n_groups, self.s1, self.s2,
                             self._keep)
        return np.where(self._keep, v, 0.0)


def _start_l(variant, z, grad, z_old, grad_old) -> float:
    """Xiang et al., Section 2.1: L_k = max(1, α_k), α_k = ΔgᵀΔz/‖Δz‖² (BB), or 1
    for FISTA-C."""
    if variant == "FISTA-C" or z_old is None:
        return 1.0
    dz = z - z_old
    norm2 = float(dz @ dz)
    if norm2 == 0.0:
        return 1.0
    return max(1.0, float((grad - grad_old) @ dz) / norm2)


def _line_search(problem, variant, z, fz, grad, w_prev, f_prev, L, eta):
    """Grow L by η until the test (3) or (4) of Xiang et al. holds; returns
    (w, f(w), L)."""
    for _ in range(MAX_BACKTRACKS):
        w = problem.project(z - grad / L)
        fw = problem.value(w)
        if variant == "ISTA":          # sufficient decrease (4)
            step = w - w_prev
            accept = fw <= f_prev - 0.5 * L * DELTA * float(step @ step)
        else:                          # Lipschitz (3) at the gradient point z
            step = w - z
            accept = fw <= fz + float(grad @ step) + 0.5 * L * float(step @ step)
        if accept:
            break
        L *= eta
    return w, fw, L


def sght_solve(X, y, s1, groups, s2, loss="squared", variant="ISTA-L", eta=2.0,
               max_iter=1000, tol=1e-6,
               convergence_warning=ConvergenceWarning, w0=None) -> SGHTPath:
    """Xiang et al., Algorithm 1 (ISTA) or 2 (FISTA) from w = 0 (or from ``w0``
    projected onto the constraint set): returns the iterate and its objective
    history.

    Stops when the relative change of the objective is ≤ ``tol`` or the objective is
    ≤ ``tol`` times its start (an exact fit), when a plain step
    from the iterate (no momentum) does not decrease it (only rounding can make it
    rise), or after ``max_iter`` iterations.  A FISTA step that raises f is rejected:
    the momentum restarts (function-value restart, O'Donoghue & Candès 2015) and the
    next step is a plain one from the current iterate, so f never rises (monotone
    FISTA, Beck & Teboulle 2009).  Stopping at ``max_iter`` issues
    ``convergence_warning`` (a Warning class; None: none) with the last relative
    decrease.
    """
    X, y, s1, loss = check_problem(X, y, s1, loss)
    group_of, s2 = group_constraint(groups, s2, X.shape[1])
    check_choice("variant", variant, VARIANTS)
    if isinstance(eta, bool) or not (isinstance(eta, (int, float)) and eta > 1
                                     and math.isfinite(eta)):
        raise InputError(f"eta (the backtracking factor) must be a number > 1, "
                         f"got {eta!r}")
    problem = _Problem(X, y, loss, group_of, s1, s2)
    if w0 is None:
        w = np.zeros(X.shape[1])
    else:
        w0 = np.asarray(w0, dtype=np.float64)
        if w0.shape != (X.shape[1],) or not np.all(np.isfinite(w0)):
            raise InputError(f"w0 must be a finite vector of {X.shape[1]} weights, "
                             f"got shape {w0.shape}")
        w = problem.project(w0)
    w_old = w
    f = problem.value(w)
    path = SGHTPath(w=w, objective=[f])
    fista = variant.startswith("FISTA")
    alpha_old, alpha = 0.0, 1.0          # FISTA's α_{m−2}, α_{m−1} (Algorithm 2)
    z_old = grad_old = None
    for it in range(1, int(max_iter) + 1):
        z = w
        momentum = fista and it > 1 and bool(np.any(w != w_old))
        if fista:
            if momentum:
                z = w + ((alpha_old - 1.0) / alpha) * (w - w_old)
            alpha_old, alpha = alpha, 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * alpha * alpha))
        fz, grad = problem.value_grad(z)
        L = _start_l(variant, z, grad, z_old, grad_old)
        w_new, f_new, _ = _line_search(problem, variant, z, fz, grad, w, f, L, eta)
        z_old, grad_old = z, grad
        path.n_iter = it
        if f_new > f:
            if not momentum:   # a plain step from w cannot rise but by rounding
                path.converged = True
                break
            # function-value restart (O'Donoghue & Candès 2015): drop the momentum;
            # the next step is then a plain one from w, monotone as in MFISTA
            # (Beck & Teboulle 2009)
            w_old, (alpha_old, alpha) = w, (0.0, 1.0)
            path.restarts += 1
            continue
        w_old, w = w, w_new
        path.objective.append(f_new)
        change = f - f_new
        f = f_new
        path.change = change / max(abs(f), np.finfo(float).tiny)
        # f within tol of zero, relative to where it started, is an exact fit (an
        # interpolating support, s1 ≥ n): its relative decrease stays put as f → 0
        if path.change <= tol or f <= tol * path.objective[0]:
            path.converged = True
            break
    return path.finish(w, convergence_warning, f"SGHT ({variant}) stopped at "
                       f"max_iter={int(max_iter)} iterations with the objective still "
                       f"falling by {path.change:.2g} per iteration (relative; "
                       f"tol={tol:g}); raise max_iter, or scale the columns of X to "
                       "‖x‖²/n ≈ 1 (the step sizes start from L = 1)")


def start_point(name: str, X, y) -> np.ndarray | None:
    """A start for SGHT (projected by ``sght_solve``): "zero" (None, the paper's),
    "least_squares" (the minimum-norm least-squares fit X⁺y), "ridge" (the ridge fit
    with a unit penalty on the mean-loss scale, (XᵀX/n + I)⁻¹Xᵀy/n) or
    "correlation" (Xᵀy/n)."""
    check_choice("start", name, STARTS)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, p = X.shape
    if name == "zero":
        return None
    if name == "least_squares":
        return np.linalg.lstsq(X, y, rcond=None)[0]
    if name == "ridge":
        return np.linalg.solve(X.T @ X / n + np.eye(p), X.T @ y / n)
    return X.T @ y / n


def sght_from_starts(X, y, s1, groups, s2, starts=("zero",), **options) -> SGHTPath:
    """``sght_solve`` (with ``options``) from each start named in ``starts`` (see
    ``start_point``); returns the run that ends at the least objective (SGHT is a
    local method: a start that locks onto a wrong group ends higher)."""
    if isinstance(starts, str) or not isinstance(starts, (tuple, list)) or not starts:
        raise InputError(f"starts must be a nonempty sequence of {', '.join(STARTS)}, "
                         f"got {starts!r}")
    for name in starts:
        check_choice("start", name, STARTS)
    return min((sght_solve(X, y, s1, groups, s2, w0=start_point(name, X, y), **options)
                for name in starts), key=lambda run: run.objective[-1])


def fit_sght(X, y, s1, groups, s2, loss="squared", variant="ISTA-L", eta=2.0,
             max_iter=1000, tol=1e-6,
             convergence_warning=ConvergenceWarning, starts=("zero",)) -> Selection:
    """SGHT (Xiang et al., Algorithm 1): at most ``s1`` features from at most ``s2``
    groups (``groups[j]``: feature j's label).  Selection = the nonzeros of the final
    iterate of the best run over ``starts`` (``sght_from_starts``)."""
    path = sght_from_starts(X, y, s1, groups, s2, starts, loss=loss, variant=variant,
                            eta=eta, max_iter=max_iter, tol=tol,
                            convergence_warning=convergence_warning)
    selected = np.flatnonzero(path.w).astype(np.int64)
    return Selection(selected=selected, weights=path.w[selected].copy(),
                     n_iter=path.n_iter, name="SGHT")
