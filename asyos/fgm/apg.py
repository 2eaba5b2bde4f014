"""FGM's subproblem (Tan, Tsang & Wang 2014, eq. (31)): the primal MKL problem on the
activated blocks,

    min_{w_1..w_t, b}  F(w, b) = ½ (Σ_h ‖w_h‖₂)² + P(Σ_h X_h w_h + b),

solved by their modified accelerated proximal gradient (Algorithms 3-4).

P(z) = C·Σ_i ℓ(z_i) is the loss with the weight C folded in; with the per-sample losses
of ``core.losses`` (a mean over the n samples) that is P = C·n·L(z), so every loss code
of ``asyos.Loss`` works here unchanged.  The activated columns live in one C-ordered
(k, n) cache, a row per column, and block h is the rows ``starts[h]:starts[h+1]``, so
every product is a BLAS gemv on contiguous memory.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..core.losses import loss_grad, loss_value

__all__ = ["apg", "block_norms", "prox_squared_l21", "subproblem_objective"]

ETA = 0.6          # backtracking factor (the authors' released code)
MAX_TRIALS = 60    # backtracking trials per step (0.6^-60 ≈ 2e13: τ can grow that far)


@njit(cache=True)
def prox_squared_l21(o, lam, out):
    """Tan et al., Algorithm 3 and Proposition 1: a = argmin_{a ≥ 0} ½‖a − o‖² +
    λ/2 (Σa)² for the block norms o; the block prox is then w_h = (a_h/o_h)·u_h.

    Sort o decreasingly into ō, ρ = the largest j with ō_j > λ/(1+jλ)·Σ_{i≤j} ō_i,
    ζ = λ/(1+ρλ)·Σ_{i≤ρ} ō_i and a_h = max(o_h − ζ, 0).
    """
    order = np.argsort(-o)
    total = 0.0
    zeta = 0.0
    for j in range(o.shape[0]):
        total += o[order[j]]
        threshold = lam / (1.0 + (j + 1) * lam) * total
        if o[order[j]] > threshold:
            zeta = threshold
    for h in range(o.shape[0]):
        out[h] = max(o[h] - zeta, 0.0)
    return out


@njit(cache=True)
def block_norms(w, starts):
    """‖w_h‖₂ for every block h."""
    t = starts.shape[0] - 1
    out = np.empty(t)
    for h in range(t):
        out[h] = math.sqrt(np.dot(w[starts[h]:starts[h + 1]], w[starts[h]:starts[h + 1]]))
    return out


@njit(cache=True)
def subproblem_objective(rows, starts, y, code, C, w, b):
    """F(w, b) of Tan et al., eq. (31), computed directly from the cached columns."""
    z = np.dot(w, rows) + b
    return C * y.shape[0] * loss_value(code, z, y) + 0.5 * np.sum(block_norms(w, starts)) ** 2


@njit(cache=True)
def _block_products(rows, starts, p):
    """(t, n) array of the per-block predictions p_h'x_ih (Tan et al., Section 5.5)."""
    t = starts.shape[0] - 1
    out = np.empty((t, rows.shape[1]))
    for h in range(t):
        out[h] = np.dot(p[starts[h]:starts[h + 1]], rows[starts[h]:starts[h + 1]])
    return out


@njit(cache=True)
def _block_dots(starts, p, q):
    t = starts.shape[0] - 1
    out = np.empty(t)
    for h in range(t):
        out[h] = np.dot(p[starts[h]:starts[h + 1]], q[starts[h]:starts[h + 1]])
    return out


@njit(cache=True)
def _bias_step(code, C, y, zu, c, grad_buf):
    """Tan et al., eq. (36): one steepest-descent step on b from c (Armijo);
    zu are the predictions without the bias.  The first trial is 1/(C·n), the inverse
    of b's Lipschitz bound."""
    n = y.shape[0]
    scale = C * n
    z = zu + c
    value = scale * loss_value(code, z, y)
    gb = scale * np.sum(loss_grad(code, z, y, grad_buf))
    step = 1.0 / scale
    for _ in range(MAX_TRIALS):
        if scale * loss_value(code, zu + (c - step * gb), y) <= value - 0.5 * step * gb * gb:
            break
        step *= ETA
    return c - step * gb


@njit(cache=True)
def apg(rows, starts, y, code, C, w, b, tau, fit_b, eps_in, max_iter):
    """Tan et al., Algorithm 4: FISTA on (31) with a backtracked τ, a block-coordinate
    Armijo step on the bias, and a function-value restart (our convention: the paper
    describes none).

    ``rows`` (k, n) are the cached columns, ``starts`` the block offsets (t + 1), ``w``
    (k,) and ``b`` the warm start.  Stops when the relative decrease of F is at most
    ``eps_in`` (41) or after ``max_iter`` iterations.  Returns (w, b, τ, F, iterations).
    """
    n = y.shape[0]
    scale = C * n
    t = starts.shape[0] - 1
    grad_buf = np.empty(n)
    a = np.empty(t)
    w = w.copy()
    w_old = w.copy()
    b_old = b
    t_old = 1.0
    t_cur = 1.0
    F_k = subproblem_objective(rows, starts, y, code, C, w, b)
    it = 0
    while it < max_iter:
        it += 1
        beta = (t_old - 1.0) / t_cur
        v = w + beta * (w - w_old)
        c = b + beta * (b - b_old) if fit_b else b
        # Section 5.5: the per-block products v_h'x_ih and g_h'x_ih serve every trial
        VX = _block_products(rows, starts, v)
        zv = VX.sum(axis=0) + c
        P_v = scale * loss_value(code, zv, y)
        g = np.dot(rows, scale * loss_grad(code, zv, y, grad_buf))
        GX = _block_products(rows, starts, g)
        vv = _block_dots(starts, v, v)
        gg = _block_dots(starts, g, g)
        vg = _block_dots(starts, v, g)
        tau *= ETA
        for _ in range(MAX_TRIALS):
            s = 1.0 / tau
            o = np.sqrt(np.maximum(vv - 2.0 * s * vg + s * s * gg, 0.0))
            prox_squared_l21(o, s, a)
            sc = np.zeros(t)
            for h in range(t):
                if o[h] > 0.0:
                    sc[h] = a[h] / o[h]
            z = np.dot(sc, VX - s * GX) + c
            reg = 0.5 * np.sum(a) ** 2
            F_u = scale * loss_value(code, z, y) + reg
            lin = np.sum(sc * (vg - s * gg) - vg)                     # ⟨g, u − v⟩
            dist = np.sum((sc - 1.0) ** 2 * vv - 2.0 * sc * (sc - 1.0) * s * vg
                          + (sc * s) ** 2 * gg)                       # ‖u − v‖²
            if F_u <= P_v + lin + 0.5 * tau * dist + reg + 1e-12 * abs(F_u):
                break
            tau /= ETA
        u = v - s * g
        for h in range(t):
            u[starts[h]:starts[h + 1]] *= sc[h]
        b_new = _bias_step(code, C, y, z - c, c, grad_buf) if fit_b else c
        F_new = scale * loss_value(code, z - c + b_new, y) + reg
        if F_new > F_k:                       # restart (our convention)
            if beta == 0.0:
                break                         # a plain step cannot descend: converged
            w_old = w.copy()
            b_old = b
            t_old = 1.0
            t_cur = 1.0
            continue
        w_old = w
        b_old = b
        w = u
        b = b_new
        t_old, t_cur = t_cur, 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t_cur * t_cur))
        done = it > 1 and (F_k - F_new) <= eps_in * abs(F_k)         # (41)
        F_k = F_new
        if done:
            break
    return w, b, tau, F_k, it
