"""Coordinate descent for the Lasso and group Lasso with gap-safe dynamic screening.

The Gap Safe rules of Fercoq, Gramfort & Salmon (2015), for groups those of Ndiaye,
Fercoq, Gramfort & Salmon (2017), applied dynamically as in Bonnefoy et al. (2014).
Everything works on *units*: groups of contiguous columns with a weight w_g; the
Lasso is the case of singletons with w = 1 (a group of size 1 with w = 1 reproduces
the Lasso exactly), so one set of kernels serves both, dense or sparse.  Scale:
½‖y − Xβ‖² + λ Σ_g w_g‖β_g‖; the fronts map scikit-learn's α to λ = n·α.

A design ``M`` is either the (p, n) C-ordered transpose of X (each column contiguous,
so x_jᵀv is one BLAS call), a CSC triple (data, indices, indptr), or a CSC quadruple
(data, indices, indptr, μ) standing for the implicitly centred X − 1μᵀ (how
scikit-learn fits an intercept on sparse X): x_jᵀv − μ_j·1ᵀv and v += a·x_j − aμ_j·1,
so X is never densified, at O(n) more per column touched when μ_j ≠ 0.  ``col_dot``
and ``col_axpy`` are compiled once per kind, so every kernel below exists once.

SAIF (``saif.py``) also uses the accelerations here: dual extrapolation of the
residuals (Massias, Gramfort & Salmon 2018, "Celer"; ``dual_point``), Anderson
acceleration of CD (Bertrand & Massias 2021; ``anderson_step``), both from
``extrapolation_weights``, and scans that skip the columns a Cauchy–Schwarz bound
already settles (``bounded_scores``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, types
from numba.extending import overload

__all__ = ["K_EXTRA", "MARGIN", "DualPoint", "Iterate", "ScoreBounds", "Stopping",
           "UnitDesign", "UnitSet", "col_axpy", "col_dot", "gap_safe_cd", "unit_scores"]

MARGIN = 1e-9   # ours: a sphere test must pass by τ (round-off safeguard)
K_EXTRA = 5     # differences per extrapolation (Celer's K − 1 = 5, skglm's K = 5)


class UnitDesign(NamedTuple):
    """X by units, as the solvers read it (``path.Design.units``)."""

    M: object              # the design: dense transpose or CSC tuple (module doc)
    gptr: np.ndarray       # (G+1,) int64: unit g is columns gptr[g]:gptr[g+1]
    w: np.ndarray          # (G,): the weights w_g
    lip: np.ndarray        # (G,): ‖X_g‖₂² (the block step, the group sphere test)
    unit_norm: np.ndarray  # (G,): ‖X_g‖₂/w_g


class Iterate(NamedTuple):
    """A solver's point, updated in place."""

    beta: np.ndarray   # (p,): the coefficients, zero outside the units kept
    r: np.ndarray      # (n,): the residual y − Xβ


class UnitSet(NamedTuple):
    """The units a solver works on: the first ``n`` of ``order``, which ``member``
    mirrors (the solver returns that ``n``)."""

    order: np.ndarray   # (G,) int64: the units kept first
    member: np.ndarray  # (G,) bool: unit g is kept


class DualPoint(NamedTuple):
    """The best dual point a solver has seen: θ = ``rho``/``scale``, where ``rho`` is
    the residual or its extrapolation; ``past`` holds the last residuals, one row per
    gap check (``dual_point``)."""

    rho: np.ndarray    # (n,)
    past: np.ndarray   # (K_EXTRA + 1, n)


class ScoreBounds(NamedTuple):
    """Upper bounds on every unit's score at an anchor point (``bounded_scores``);
    +inf bounds force exact scores."""

    scores: np.ndarray   # (G,): b_g ≥ ‖X_gᵀρ₀‖/w_g
    anchor: np.ndarray   # (n,): ρ₀


class Stopping(NamedTuple):
    """When a solve ends: the full duality gap at most ``eps``, or ``max_epochs``
    epochs run; the gap is checked every ``f_gap`` epochs."""

    eps: float
    max_epochs: int
    f_gap: int


def col_dot(M, j, v):
    """x_jᵀv for a design M (dense transpose, CSC triple or centred CSC quadruple)."""
    if isinstance(M, tuple):
        data, indices, indptr = M[:3]
        sl = slice(indptr[j], indptr[j + 1])
        acc = float(data[sl] @ v[indices[sl]])
        return acc - M[3][j] * float(v.sum()) if len(M) == 4 else acc
    return float(M[j] @ v)


def col_axpy(M, j, a, v):
    """v += a·x_j in place."""
    if isinstance(M, tuple):
        data, indices, indptr = M[:3]
        sl = slice(indptr[j], indptr[j + 1])
        v[indices[sl]] += a * data[sl]
        if len(M) == 4 and M[3][j] != 0.0:
            v -= a * M[3][j]
    else:
        v += a * M[j]


@overload(col_dot)
def _col_dot(M, j, v):
    if isinstance(M, types.Array):
        return lambda M, j, v: np.dot(M[j], v)

    if len(M) == 4:
        def centred(M, j, v):
            data, indices, indptr, mu = M
            acc = 0.0
            for k in range(indptr[j], indptr[j + 1]):
                acc += data[k] * v[indices[k]]
            return acc - mu[j] * np.sum(v) if mu[j] != 0.0 else acc
        return centred

    def csc(M, j, v):
        data, indices, indptr = M
        acc = 0.0
        for k in range(indptr[j], indptr[j + 1]):
            acc += data[k] * v[indices[k]]
        return acc
    return csc


@overload(col_axpy)
def _col_axpy(M, j, a, v):
    if isinstance(M, types.Array):
        def dense(M, j, a, v):
            col = M[j]
            for i in range(v.shape[0]):
                v[i] += a * col[i]
        return dense

    if len(M) == 4:
        def centred(M, j, a, v):
            data, indices, indptr, mu = M
            for k in range(indptr[j], indptr[j + 1]):
                v[indices[k]] += a * data[k]
            if mu[j] != 0.0:
                shift = a * mu[j]
                for i in range(v.shape[0]):
                    v[i] -= shift
        return centred

    def csc(M, j, a, v):
        data, indices, indptr = M
        for k in range(indptr[j], indptr[j + 1]):
            v[indices[k]] += a * data[k]
    return csc


@njit(cache=True)
def cd_epoch(M, beta, r, lam, gptr, w, lip, units, n_units, buf):
    """One cyclic block-CD epoch over units[:n_units] (block soft-thresholding):
    z = β_g + X_gᵀr/L_g, β_g ← max(0, 1 − λw_g/(L_g‖z‖))·z, r updated incrementally."""
    for k in range(n_units):
        g = units[k]
        a, b = gptr[g], gptr[g + 1]
        inv_l = 1.0 / lip[g]
        nz = 0.0
        for j in range(a, b):
            z = beta[j] + col_dot(M, j, r) * inv_l
            buf[j - a] = z
            nz += z * z
        nz = math.sqrt(nz)
        shrink = 0.0
        if nz > lam * w[g] * inv_l:
            shrink = 1.0 - lam * w[g] * inv_l / nz
        for j in range(a, b):
            new = shrink * buf[j - a]
            d = beta[j] - new
            if d != 0.0:
                col_axpy(M, j, d, r)
                beta[j] = new


@njit(cache=True)
def unit_score(M, r, gptr, w, g):
    """‖X_gᵀr‖/w_g."""
    acc = 0.0
    for j in range(gptr[g], gptr[g + 1]):
        c = col_dot(M, j, r)
        acc += c * c
    return math.sqrt(acc) / w[g]


@njit(cache=True)
def unit_scores(M, r, gptr, w, units, n_units, out):
    """out[k] = ‖X_gᵀr‖/w_g for g = units[k]; returns their maximum (0 if none)."""
    top = 0.0
    for k in range(n_units):
        out[k] = unit_score(M, r, gptr, w, units[k])
        top = max(top, out[k])
    return top


@njit(cache=True)
def bounded_scores(M, rho, lam, gptr, w, unit_norm, bounds, fresh):
    """max(λ, ‖X_gᵀρ‖/w_g over all units), reading as few columns as it can.

    ``bounds`` (``ScoreBounds``) holds b_g ≥ ‖X_gᵀρ₀‖/w_g at its anchor ρ₀; then
    ‖X_gᵀρ‖/w_g ≤ b_g + (‖X_g‖₂/w_g)·‖ρ − ρ₀‖ (Cauchy–Schwarz), and only the units
    whose bound reaches λ can set the maximum: those are computed exactly (``fresh``
    marks them), the others keep the shifted bound.  The anchor moves to ρ."""
    scores, anchor = bounds
    delta = math.sqrt(np.sum((rho - anchor) ** 2))
    anchor[:] = rho
    top = lam
    for g in range(scores.shape[0]):
        b = scores[g] + unit_norm[g] * delta
        fresh[g] = b >= lam * (1.0 - MARGIN)
        scores[g] = unit_score(M, rho, gptr, w, g) if fresh[g] else b
        if fresh[g]:
            top = max(top, scores[g])
    return top


@njit(cache=True)
def penalty(beta, gptr, w, units, n_units, packed=False):
    """Σ_g w_g‖β_g‖ over units[:n_units]: β full (zero on every other unit), or
    ``packed``, the units' coefficients one after another (Anderson's history)."""
    total = 0.0
    m = 0
    for k in range(n_units):
        g = units[k]
        acc = 0.0
        for j in range(gptr[g], gptr[g + 1]):
            value = beta[m] if packed else beta[j]
            acc += value * value
            m += 1
        total += w[g] * math.sqrt(acc)
    return total


@njit(cache=True)
def dual_value(y, rho, lam, scale):
    """D(θ) − ½‖y‖² at θ = ρ/scale: t·ρᵀy − ½t²‖ρ‖² with t = λ/scale (so P − D needs
    no ‖y‖²)."""
    t = lam / scale
    return t * np.dot(rho, y) - 0.5 * t * t * np.dot(rho, rho)


@njit(cache=True)
def extrapolation_weights(hist, c):
    """Anderson / Celer extrapolation weights from the K + 1 rows of ``hist`` (oldest
    first): with U = [h_2 − h_1, …, h_{K+1} − h_K], c = z/Σz where (UUᵀ)z = 1, so
    Σ c_k = 1 and ‖Σ c_k (h_{k+1} − h_k)‖ is least.  Fills c (length K); returns
    False when UUᵀ is singular to round-off."""
    k = hist.shape[0] - 1
    diff = hist[1:] - hist[:-1]
    a = diff @ diff.T
    z = np.ones(k)
    floor = 1e-14 * max(1e-300, np.trace(a))
    for i in range(k):                      # Gaussian elimination, partial pivoting
        piv = i + np.argmax(np.abs(a[i:, i]))
        if abs(a[piv, i]) <= floor:
            return False
        if piv != i:
            for col in range(k):
                a[i, col], a[piv, col] = a[piv, col], a[i, col]
            z[i], z[piv] = z[piv], z[i]
        for row in range(i + 1, k):
            f = a[row, i] / a[i, i]
            for col in range(i, k):
                a[row, col] -= f * a[i, col]
            z[row] -= f * z[i]
    for i in range(k - 1, -1, -1):
        for col in range(i + 1, k):
            z[i] -= a[i, col] * z[col]
        z[i] /= a[i, i]
    total = z.sum()
    if total == 0.0 or not np.isfinite(total):
        return False
    c[:] = z / total
    return True


@njit(cache=True)
def anderson_step(M, y, beta, r, lam, gptr, w, units, n_units, hist_b, hist_r, count):
    """Anderson acceleration of CD (Bertrand & Massias 2021, as in skglm): call after
    every epoch; records (β_A, r) as row ``count`` of ``hist_b``/``hist_r``, and
    once K + 1 are there, tries β_acc = Σ c_k β_{k+1} (``extrapolation_weights``)
    and keeps it if it lowers the primal, r then updated exactly from the change of
    β.  Returns the new count (0 after a try)."""
    m = 0
    for k in range(n_units):
        g = units[k]
        for j in range(gptr[g], gptr[g + 1]):
            hist_b[count, m] = beta[j]
            m += 1
    hist_r[count] = r
    if count + 1 < hist_b.shape[0]:
        return count + 1
    c = np.empty(hist_b.shape[0] - 1)
    if not extrapolation_weights(hist_b[:, :m], c):
        return 0
    b_acc = np.zeros(m)
    for i in range(c.shape[0]):
        b_acc += c[i] * hist_b[i + 1, :m]
    r_acc = c @ hist_r[1:]
    pen_acc = penalty(b_acc, gptr, w, units, n_units, True)
    if (0.5 * np.dot(r_acc, r_acc) + lam * pen_acc
            < 0.5 * np.dot(r, r) + lam * penalty(beta, gptr, w, units, n_units)):
        m = 0
        for k in range(n_units):
            g = units[k]
            for j in range(gptr[g], gptr[g + 1]):
                d = beta[j] - b_acc[m]
                if d != 0.0:
                    col_axpy(M, j, d, r)
                    beta[j] = b_acc[m]
                m += 1
    return 0


@njit(cache=True)
def dual_point(M, y, r, lam, gptr, w, units, n_units, score, spare, dual, n_checks,
               best, scale):
    """Keeps the best dual point seen since the units last grew: θ = ``dual.rho``/
    ``scale`` with D(θ) − ½‖y‖² = ``best`` (−inf: none yet), against the rescaled
    residual θ = r/scale_r and the extrapolated θ_acc = ρ_acc/scale_acc, each rescaled
    over units[:n_units] (a point stays feasible while units are only removed).
    Records r as the newest row of ``dual.past`` (``n_checks``: how many were
    recorded since the reset) and extrapolates once K residuals are there.
    ``score`` holds ‖X_gᵀρ‖/w_g of the kept point over the units (``spare``:
    scratch of the same length).  Returns the new (best, scale)."""
    rho, past = dual
    for i in range(past.shape[0] - 1):
        past[i] = past[i + 1]
    past[-1] = r
    best, scale = _keep_if_better(M, y, r, lam, gptr, w, units, n_units, score, spare,
                                  rho, best, scale)
    c = np.empty(past.shape[0] - 1)
    if n_checks + 1 >= past.shape[0] and extrapolation_weights(past, c):
        acc = c @ past[:-1]       # Celer combines the K oldest residuals
        best, scale = _keep_if_better(M, y, acc, lam, gptr, w, units, n_units, score,
                                      spare, rho, best, scale)
    return best, scale


@njit(cache=True)
def _keep_if_better(M, y, candidate, lam, gptr, w, units, n_units, score, spare, rho,
                    best, scale):
    """The dual point the residual ``candidate`` scales to, kept in ``rho`` (its
    scores in ``score``) when its dual value beats ``best``.  Returns (best, scale)."""
    top = unit_scores(M, candidate, gptr, w, units, n_units, spare)
    value = dual_value(y, candidate, lam, max(lam, top))
    if value > best:
        best, scale = value, max(lam, top)
        rho[:] = candidate
        score[:n_units] = spare[:n_units]
    return best, scale


@njit(cache=True)
def duality_gap(y, r, lam, pen, scale):
    """P(β) − D(θ) with θ = r/scale (the rescaled residual), expanded so it costs two
    dot products: D(θ) = t·rᵀy − ½t²‖r‖² with t = λ/scale.  Clamped at 0 (round-off)."""
    rr = np.dot(r, r)
    t = lam / scale
    return max(0.0, 0.5 * rr + lam * pen - t * np.dot(r, y) + 0.5 * t * t * rr)


@njit(cache=True)
def sphere_screen(M, beta, r, gptr, unit_norm, units, n_units, score, scale, radius,
                  alive):
    """Drop every unit with ‖X_gᵀθ‖/w_g + ρ‖X_g‖₂/w_g < 1 − τ (the Gap Safe sphere
    test; ‖X_g‖₂ is the spectral norm), θ = r/scale; a dropped nonzero unit is zeroed
    and its part put back into r.  Compacts units[:n_units] and score alike; returns
    the new count."""
    keep = 0
    for k in range(n_units):
        g = units[k]
        if score[k] / scale + radius * unit_norm[g] < 1.0 - MARGIN:
            alive[g] = False
            for j in range(gptr[g], gptr[g + 1]):
                if beta[j] != 0.0:
                    col_axpy(M, j, beta[j], r)
                    beta[j] = 0.0
        else:
            units[keep] = g
            score[keep] = score[k]
            keep += 1
    return keep


@njit(cache=True)
def full_gap(M, y, r, beta, lam, gptr, w, units, n_units, scores):
    """The full-problem certificate: θ rescaled over *all* units, one pass;
    scores (length G) receives ‖X_gᵀr‖/w_g of every unit.  β must vanish outside
    units[:n_units]."""
    every = np.arange(gptr.shape[0] - 1)
    top = unit_scores(M, r, gptr, w, every, every.shape[0], scores)
    return duality_gap(y, r, lam, penalty(beta, gptr, w, units, n_units),
                       max(lam, top))


@njit(cache=True)
def gap_safe_cd(design, y, lam, iterate, kept, n_units, scores, stop, screen):
    """Block CD on the units ``kept.order[:n_units]`` (``kept``: ``UnitSet``) of
    ``design`` (``UnitDesign``) from ``iterate`` (``Iterate``) until the duality gap
    ≤ ``stop.eps`` (``Stopping``).

    With ``screen`` the gap sphere B(θ, √(2G)/λ) removes units at the start (Gap Safe
    sequential: the warm-start residual at this λ) and every ``f_gap`` epochs;
    without it this is plain CD with the same gap checks.  The gap is the reduced
    problem's (θ rescaled over the surviving units); exit needs the full
    certificate too (the same number when nothing was removed), else the reduced
    target is tightened tenfold.
    Returns (surviving units, full-problem gap, epochs run); ``scores`` holds every
    unit's ‖X_gᵀr‖/w_g at the exit residual.
    """
    M, gptr, w, lip, unit_norm = design
    beta, r = iterate
    units, alive = kept
    eps, max_epochs, f_gap = stop
    buf = np.empty(np.max(gptr[1:] - gptr[:-1]))
    score = np.empty(n_units)
    target = eps
    epochs = 0
    while True:
        top = unit_scores(M, r, gptr, w, units, n_units, score)
        scale = max(lam, top)
        gap = duality_gap(y, r, lam, penalty(beta, gptr, w, units, n_units), scale)
        if gap <= target or epochs >= max_epochs:
            total = full_gap(M, y, r, beta, lam, gptr, w, units, n_units, scores)
            if total <= eps or epochs >= max_epochs:
                return n_units, total, epochs
            target = min(target, gap) * 0.1
        if screen:
            n_units = sphere_screen(M, beta, r, gptr, unit_norm, units, n_units, score,
                                    scale, math.sqrt(2.0 * gap) / lam, alive)
        for _ in range(f_gap):
            cd_epoch(M, beta, r, lam, gptr, w, lip, units, n_units, buf)
            epochs += 1
