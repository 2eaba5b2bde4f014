"""DC: the continuous surrogate of SGHT's constrained model (Xiang, Wang & Ye,
"Efficient nonconvex sparse group feature selection via continuous and discrete
optimization", Artificial Intelligence 2015; Xiang, Shen & Ye, ICML 2013).

The discrete model min f(x) s.t. ‖x‖₀ ≤ s1, #groups(x) ≤ s2 with each count replaced
by the truncated ℓ1 function J_τ(z) = min(z/τ, 1):

    min f(x)  s.t.  Σ_j J_τ(|x_j|) ≤ s1,   Σ_G J_τ(‖x_G‖₂) ≤ s2,

f(x) = ‖Xx − y‖²/(2n).  J_τ(z) = z/τ − max(z/τ − 1, 0) is a difference of convex
functions; the DC algorithm bounds the concave part above at the iterate x^k, which
leaves the convex subproblem (their DC step, with T1 = {j : |x^k_j| ≥ τ} and
T2 = {G : ‖x^k_G‖ ≥ τ}: at the kink either subgradient is valid, and ≥ lets a group
pinned at τ by the ball grow past it)

    min f(x)  s.t.  Σ_{j∉T1} |x_j| ≤ τ(s1 − |T1|),   Σ_{G∉T2} ‖x_G‖₂ ≤ τ(s2 − |T2|).

Every point feasible for it is feasible for the truncated model (an entry of T1
counts at most 1), and x^k is feasible for it, so f never rises and every iterate
stays feasible.  The subproblem is solved by ADMM (Boyd et al. 2011, consensus form):
x against two copies z1, z2, each projected onto one constraint exactly (the ℓ1 ball
by the sort rule of Duchi et al. 2008; the group ball by that rule on the group
norms), the x-update one product with (XᵀX/n + 2ρI)⁻¹ factored once per fit.  The
ADMM result is projected onto the group ball, which keeps it in the ℓ1 ball (the
projection only scales groups down), so it is feasible exactly.  A DC step that does
not lower f ends the run.  Selection = supp(x).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..core.iterates import Iterates
from ..core.projection import check_groups
from ..core.selection import Selection
from ..core.validate import check_at_least, check_int, check_problem
from ..errors import ConvergenceWarning, InputError

__all__ = ["DCPath", "dc_solve", "fit_dc", "truncated_counts"]

# An entry at the kink |x| = τ counts 1 on either side; it joins T (its constraint
# freed) so that the next step can grow it past τ.  The ball's boundary is reached
# only up to the ADMM's accuracy, hence the relative slack.
KINK = 1.0 - 1e-6


@dataclass
class DCPath(Iterates):
    """The final iterate, f after every accepted DC step (f(0) first), the DC steps
    and ADMM iterations run, and whether f stopped falling before ``max_outer``."""

    n_outer: int = 0
    n_admm: int = 0


def truncated_counts(w, group_of, tau: float) -> tuple[float, float]:
    """(Σ_j J_τ(|w_j|), Σ_G J_τ(‖w_G‖₂)): the two constrained quantities."""
    norms = np.sqrt(np.bincount(group_of, weights=w * w))
    return (float(np.minimum(np.abs(w) / tau, 1.0).sum()),
            float(np.minimum(norms / tau, 1.0).sum()))


@njit(cache=True)
def _simplex_threshold(a, radius):
    """θ ≥ 0 with Σ max(a_i − θ, 0) = radius, for a ≥ 0 with Σ a > radius
    (Duchi, Shalev-Shwartz, Singer & Chandra 2008)."""
    u = np.sort(a)[::-1]
    total = u[0]
    theta = u[0] - radius       # the first entry always stays in the sum
    for i in range(1, u.shape[0]):
        total += u[i]
        t = (total - radius) / (i + 1)
        if u[i] - t > 0.0:
            theta = t
    return theta


@njit(cache=True)
def _ball_threshold(magnitudes, free, radius):
    """θ that shrinks the magnitudes not ``free`` onto {Σ ≤ radius}: 0 when they lie
    inside it already (the projection then changes nothing)."""
    total = 0.0
    count = 0
    for i in range(magnitudes.shape[0]):
        if not free[i]:
            total += magnitudes[i]
            count += 1
    if total <= radius:
        return 0.0
    a = np.empty(count)
    k = 0
    for i in range(magnitudes.shape[0]):
        if not free[i]:
            a[k] = magnitudes[i]
            k += 1
    return _simplex_threshold(a, radius)


@njit(cache=True)
def _project_l1(v, free, radius, out):
    """out = the projection of v onto {Σ_{j not free} |x_j| ≤ radius}."""
    theta = _ball_threshold(np.abs(v), free, radius)
    for j in range(v.shape[0]):
        if free[j]:
            out[j] = v[j]
        else:
            mag = abs(v[j]) - theta
            out[j] = math.copysign(mag, v[j]) if mag > 0.0 else 0.0


@njit(cache=True)
def _project_groups(v, group_of, n_groups, free, radius, out):
    """out = the projection of v onto {Σ_{G not free} ‖x_G‖₂ ≤ radius}."""
    norms = np.zeros(n_groups)
    for j in range(v.shape[0]):
        norms[group_of[j]] += v[j] * v[j]
    norms = np.sqrt(norms)
    theta = _ball_threshold(norms, free, radius)
    scale = np.ones(n_groups)
    for g in range(n_groups):
        if not free[g]:
            scale[g] = max(norms[g] - theta, 0.0) / norms[g] if norms[g] > 0 else 0.0
    for j in range(v.shape[0]):
        out[j] = v[j] * scale[group_of[j]]


@njit(cache=True)
def _admm(H, b, rho, x0, group_of, n_groups, free1, r1, free2, r2, max_iter, tol):
    """min ½xᵀQx − bᵀx s.t. x ∈ C1 ∩ C2 by consensus ADMM from x0; H =
    (Q + 2ρI)⁻¹.  Returns (a point of C1 ∩ C2, iterations)."""
    p = x0.shape[0]
    z1 = x0.copy()
    z2 = x0.copy()
    u1 = np.zeros(p)
    u2 = np.zeros(p)
    x = x0.copy()
    old1 = np.empty(p)
    old2 = np.empty(p)
    it = 0
    for it in range(1, max_iter + 1):
        x = H @ (b + rho * (z1 - u1 + z2 - u2))
        old1[:] = z1
        old2[:] = z2
        _project_l1(x + u1, free1, r1, z1)
        _project_groups(x + u2, group_of, n_groups, free2, r2, z2)
        u1 += x - z1
        u2 += x - z2
        primal = math.sqrt(np.sum((x - z1) ** 2) + np.sum((x - z2) ** 2))
        dual = rho * math.sqrt(np.sum((z1 - old1) ** 2) + np.sum((z2 - old2) ** 2))
        scale = max(math.sqrt(np.sum(x * x)), 1e-12)
        if primal <= tol * scale and dual <= tol * scale:
            break
    out = np.empty(p)
    _project_groups(z1, group_of, n_groups, free2, r2, out)
    return out, it


def dc_solve(X, y, s1, groups, s2, tau: float = 0.5, max_outer: int = 50,
             max_admm: int = 2000, tol: float = 1e-6, admm_tol: float = 1e-6,
             convergence_warning=ConvergenceWarning) -> DCPath:
    """The DC algorithm from x = 0 on the truncated-ℓ1 model (module docstring).

    Stops when a DC step lowers f by at most ``tol`` relative (or not at all), or
    after ``max_outer`` steps, which issues ``convergence_warning`` (None: none).  ``tau``: the truncation level of J_τ, in the units of
    the weights (an entry above τ counts as a whole feature).
    """
    X, y, s1, _ = check_problem(X, y, s1, "squared")
    group_of, n_groups = check_groups(groups, X.shape[1])
    s2 = check_int("s2", s2, 1, n_groups)
    tau = check_at_least("tau", tau, 0.0)
    if tau == 0.0 or not math.isfinite(tau):
        raise InputError(f"tau must be a finite number > 0, got {tau!r}")
    n, p = X.shape
    Q, b = X.T @ X / n, X.T @ y / n
    rho = max(float(np.trace(Q)) / p, 1e-12)
    d, V = np.linalg.eigh(Q)
    H = (V / (d + 2.0 * rho)) @ V.T

    def value(w):
        r = X @ w - y
        return 0.5 * float(r @ r) / n

    w = np.zeros(p)
    path = DCPath(w=w, objective=[value(w)])
    for _ in range(int(max_outer)):
        free1 = np.abs(w) >= tau * KINK
        free2 = np.sqrt(np.bincount(group_of, weights=w * w, minlength=n_groups)) \
            >= tau * KINK
        r1 = tau * max(s1 - int(free1.sum()), 0)
        r2 = tau * max(s2 - int(free2.sum()), 0)
        w_new, iters = _admm(H, b, rho, w, group_of, n_groups, free1, r1, free2, r2,
                             int(max_admm), float(admm_tol))
        path.n_outer += 1
        path.n_admm += int(iters)
        f_new = value(w_new)
        f = path.objective[-1]
        if f_new >= f:
            path.converged = True
            break
        w = w_new
        path.objective.append(f_new)
        if f - f_new <= tol * max(f, np.finfo(float).tiny):
            path.converged = True
            break
    return path.finish(w, convergence_warning, f"DC stopped at max_outer="
                       f"{int(max_outer)} steps with the objective still falling; "
                       "raise max_outer")


def fit_dc(X, y, s1, groups, s2, tau: float = 0.5, max_outer: int = 50,
           max_admm: int = 2000, tol: float = 1e-6) -> Selection:
    """DC (Xiang, Wang & Ye 2015) at the budgets (s1, s2); selection = supp(x)."""
    path = dc_solve(X, y, s1, groups, s2, tau=tau, max_outer=max_outer,
                    max_admm=max_admm, tol=tol)
    selected = np.flatnonzero(path.w).astype(np.int64)
    return Selection(selected=selected, weights=path.w[selected].copy(),
                     n_iter=path.n_outer, name="DC")
