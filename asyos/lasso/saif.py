"""SAIF: safe active incremental feature selection (Ren, Huang, Huang & Qian 2018,
Algorithms 1-2), and the fused Lasso reduced to a Lasso by the tree transform of
their Section 4 (Theorems 6-7).

SAIF solves the problem restricted to a small active set A, and touches the other
features only through one scan per outer round, which both recruits violators (ADD)
and certifies the full problem.  So its cost scales with |A|, not with p (Ren et
al., Theorem 5), where dynamic screening pays O(np) per epoch until the gap is small.
It runs on the same units (features or groups) and kernels as
``screening.gap_safe_cd``.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
from numba import njit

from .screening import (
    K_EXTRA,
    MARGIN,
    DualPoint,
    anderson_step,
    bounded_scores,
    cd_epoch,
    dual_point,
    dual_value,
    penalty,
    sphere_screen,
    unit_score,
)

__all__ = ["WS_MIN", "ZETA", "fused_design", "fused_coef", "saif_cd"]

ZETA = 0.3    # ours: an inner solve stops at ζ × the last full gap (or at eps)
WS_MIN = 10   # the smallest A that ADD builds (Celer's p0 = 10)


@njit(cache=True)
def saif_cd(design, y, lam, iterate, active, n_act, bounds, stop, alpha0):
    """SAIF on the units A = ``active.order[:n_act]`` (``active``: ``UnitSet``) of
    ``design`` (``UnitDesign``) from ``iterate`` (``Iterate``; β is zero outside A),
    until the full gap is ≤ ``stop.eps`` or ``stop.max_epochs`` epochs ran
    (``Stopping``).

    Each round: CD on A, with the sub-problem's gap sphere (radius α·√(2G_A)/λ)
    deleting units every ``f_gap`` epochs (DEL), until G_A ≤ max(eps, ζ·last full
    gap) (ζ·G_A at the first check; ζ times less again after a round that ran no
    epoch, so every round makes progress), or ≤ eps once ADD has stopped or when
    the last ADD brought no new unit into A; then one scan of all units gives the
    full gap (stop when ≤ eps), removes for this λ every unit the full gap sphere
    certifies zero (Gap Safe), and ADD rebuilds A: the units with β_g ≠ 0 and, up
    to max(WS_MIN, 2·their number) units, the others in order of the dual distance
    (1 − ‖X_gᵀθ‖/w_g)/(‖X_g‖/w_g), so the surest violators first.  When no unit
    outside A is left, θ*_A = θ* (Ren et al., Theorem 1c): ADD stops and α = 1
    (α = α0 until then).

    Ours, after Celer (Massias, Gramfort & Salmon 2018) and skglm (Bertrand &
    Massias 2021): A sized by the support (SAIF's m_k = |A| surest violators and
    the strong-rule start let A reach ~4× the support on a Toeplitz-correlated
    path); θ the best dual point seen in the round (``screening.dual_point``), among
    the rescaled residuals (the warm start's is often the best) and their
    extrapolations, in every gap, sphere and scan; and Anderson acceleration of the
    CD epochs (``screening.anderson_step``), which cut the epochs of that path from
    13 140 to 7 530.  The extrapolation needs K + 1 gap checks in one round, so it
    only acts on long rounds: it changed no epoch count of benchmarks/lasso_path.py,
    but a degenerate path (tests/lasso/test_lasso_acceleration.py, sparse) needs it
    to converge at its last λ (5 370 epochs; over 10 000 without).

    A scan reads only the columns whose score bound (``bounds``: ``ScoreBounds``,
    updated in place, anchored at the last scan's ρ: the residual or its
    extrapolation) could set the maximum or fail the sphere test
    (``screening.bounded_scores``), so the full gap stays exact.

    Returns (|A|, full gap, epochs, scans).
    """
    M, gptr, w, lip, unit_norm = design
    beta, r = iterate
    units, in_act = active
    eps, max_epochs, f_gap = stop
    n_groups = gptr.shape[0] - 1
    scores = bounds.scores
    fresh = np.empty(n_groups, dtype=np.bool_)
    buf = np.empty(np.max(gptr[1:] - gptr[:-1]))
    score = np.empty(n_groups)
    spare = np.empty(n_groups)
    dual = DualPoint(np.empty_like(r), np.zeros((K_EXTRA + 1, r.shape[0])))
    hist_b = np.empty((K_EXTRA + 1, beta.shape[0]))
    hist_r = np.empty((K_EXTRA + 1, r.shape[0]))
    out = np.zeros(n_groups, dtype=np.bool_)      # certified zero at this λ
    prio = np.empty(n_groups)
    cand = np.empty(n_groups, dtype=np.int64)
    was = np.zeros(n_groups, dtype=np.int64)       # the round a unit was last in A
    is_add, alpha, eps_in, target = True, alpha0, eps, -1.0
    epochs = scans = 0
    while True:
        checks, best, scale, n_hist, first = 0, -np.inf, lam, 0, epochs
        while True:                                    # inner solve on A, with DEL
            primal = 0.5 * np.dot(r, r) + lam * penalty(beta, gptr, w, units, n_act)
            best, scale = dual_point(M, y, r, lam, gptr, w, units, n_act, score, spare,
                                     dual, checks, best, scale)
            checks += 1
            gap = max(0.0, primal - best)
            if target < 0.0:
                target = max(eps, ZETA * gap)
            if gap <= target or epochs >= max_epochs:
                break
            kept = sphere_screen(M, beta, r, gptr, unit_norm, units, n_act, score,
                                 scale, alpha * math.sqrt(2.0 * gap) / lam, in_act)
            if kept < n_act:                           # A changed: restart Anderson
                n_act, n_hist = kept, 0
            for _ in range(f_gap):
                cd_epoch(M, beta, r, lam, gptr, w, lip, units, n_act, buf)
                epochs += 1
                n_hist = anderson_step(M, y, beta, r, lam, gptr, w, units, n_act,
                                       hist_b, hist_r, n_hist)
        primal = 0.5 * np.dot(r, r) + lam * penalty(beta, gptr, w, units, n_act)
        scale = bounded_scores(M, dual.rho, lam, gptr, w, unit_norm, bounds, fresh)
        last_full = max(0.0, primal - dual_value(y, dual.rho, lam, scale))
        scans += 1
        if last_full <= eps or epochs >= max_epochs:
            return n_act, last_full, epochs, scans
        if not is_add:      # A certified, but the full gap is not there yet: add
            is_add = True       # again, and solve the sub-problem tighter
            eps_in = target = 0.1 * min(eps_in, gap)
            continue
        radius = math.sqrt(2.0 * last_full) / lam
        keep = n_cand = 0
        for k in range(n_act):                         # A's nonzero units stay
            g = units[k]
            was[g] = scans                             # in A this round
            if beta[gptr[g]:gptr[g + 1]].any():
                units[keep] = g
                keep += 1
            else:
                in_act[g] = False
        for g in range(n_groups):
            if in_act[g] or out[g]:
                continue
            s = scores[g] / scale
            if not fresh[g] and s + radius * unit_norm[g] >= 1.0 - MARGIN:
                scores[g] = unit_score(M, dual.rho, gptr, w, g)   # a bound: refine
                s = scores[g] / scale
            if s + radius * unit_norm[g] < 1.0 - MARGIN:
                out[g] = True
            else:
                prio[n_cand] = (1.0 - s) / unit_norm[g]
                cand[n_cand] = g
                n_cand += 1
        room = max(WS_MIN, 2 * keep) - keep
        n_act = keep
        if n_cand > room:                              # the `room` smallest prio
            cut = np.partition(prio[:n_cand], room - 1)[room - 1]
            for k in range(n_cand):
                if prio[k] < cut:
                    units[n_act] = cand[k]
                    n_act += 1
            for k in range(n_cand):                    # ties at the cut, to fill A
                if prio[k] == cut and n_act < keep + room:
                    units[n_act] = cand[k]
                    n_act += 1
        else:
            units[keep:keep + n_cand] = cand[:n_cand]
            n_act = keep + n_cand
        grew = False
        for k in range(keep, n_act):
            in_act[units[k]] = True
            grew |= was[units[k]] != scans
        target = max(eps_in, ZETA * last_full) if grew else eps_in
        if epochs == first:     # ours: a round without an epoch tightens the next
            target = ZETA * min(target, gap)
        if n_cand <= room:                  # Theorem 1c: θ*_A = θ*, A is complete
            is_add, alpha, target = False, 1.0, eps_in


def _tree_order(p: int, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parent, breadth-first order) of the tree with these edges, rooted at node 0;
    parent[0] = −1.  The caller has checked that the edges form a spanning tree."""
    nbrs = [[] for _ in range(p)]
    for u, v in edges:
        nbrs[u].append(v)
        nbrs[v].append(u)
    parent = np.full(p, -1, dtype=np.int64)
    order, seen, todo = [0], np.zeros(p, dtype=bool), deque([0])
    seen[0] = True
    while todo:
        u = todo.popleft()
        for v in nbrs[u]:
            if not seen[v]:
                seen[v], parent[v] = True, u
                order.append(v)
                todo.append(v)
    return parent, np.asarray(order, dtype=np.int64)


def fused_design(X: np.ndarray, y: np.ndarray, edges: np.ndarray):
    """The Lasso equivalent to min ½‖y − Xβ‖² + λ Σ_(u,v)∈tree |β_u − β_v| (Ren et
    al., eq. (17)).

    β = Tz with z_v = β_v − β_parent(v) and z_root = β_root (Theorem 6): the columns of
    XT are subtree sums, built by one bottom-up pass.  The root coordinate is not
    penalised; it is minimised out exactly by projecting y and the other columns
    orthogonally to the root column, so the dual point from the projected residual is
    the ρ⊥ of Theorem 7.  Returns (columns (p−1, n) as the C-ordered transpose, y⊥,
    state for ``fused_coef``).
    """
    p = X.shape[1]
    parent, order = _tree_order(p, edges)
    XT = np.array(X.T, dtype=np.float64, order="C")
    for v in order[:0:-1]:                          # children before parents
        XT[parent[v]] += XT[v]
    root = XT[0].copy()
    rr = float(root @ root)
    cols, y_perp = XT[order[1:]], y.copy()
    cross = cols @ root
    if rr > 0.0:
        cols -= np.outer(cross, root / rr)
        y_perp -= (root @ y / rr) * root
    return cols, y_perp, (parent, order, root @ y, rr, cross)


def fused_coef(z: np.ndarray, state) -> np.ndarray:
    """β from the Lasso solution z on the non-root nodes: the root coordinate is the
    exact least-squares fit of what is left, then β_v = z_v + β_parent(v) top-down."""
    parent, order, root_y, rr, cross = state
    z_root = (root_y - float(cross @ z)) / rr if rr > 0.0 else 0.0
    beta = np.empty(len(order))
    beta[0] = z_root
    for k, v in enumerate(order[1:]):
        beta[v] = z[k] + beta[parent[v]]
    return beta
