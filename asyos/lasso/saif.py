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
    MARGIN,
    cd_epoch,
    duality_gap,
    full_gap,
    penalty,
    sphere_screen,
    unit_scores,
)

__all__ = ["ZETA", "fused_design", "fused_coef", "saif_cd"]

ZETA = 0.3   # ours: an inner solve stops at ζ × the last full gap (or at eps)


@njit(cache=True)
def saif_cd(design, y, lam, iterate, active, n_act, scores, stop, alpha0, gap0):
    """SAIF on the units A = ``active.order[:n_act]`` (``active``: ``UnitSet``) of
    ``design`` (``UnitDesign``) from ``iterate`` (``Iterate``; β is zero outside A),
    until the full gap is ≤ ``stop.eps`` or ``stop.max_epochs`` epochs ran
    (``Stopping``).

    Each round: CD on A, with the sub-problem's gap sphere (radius α·√(2G_A)/λ)
    deleting units every ``f_gap`` epochs (DEL), until G_A ≤ max(eps, ζ·last full
    gap) (ζ·G_A when the last round found no sure violator, so every round makes
    progress), or ≤ eps once ADD has stopped; then one scan of all units gives the full
    gap (stop when ≤ eps) and, while adding, the ADD test on R with α = 1 (Theorem 1c:
    nothing can violate → ADD stops, α = 1) or the m_k = |A| surest violators under
    the α-ball (Ren et al., Section 2.1).  ``gap0`` is the full gap at the start
    (from the caller's scan).  Returns (|A|, full gap, epochs, scans); ``scores``
    holds every unit's ‖X_gᵀr‖/w_g at the last scan.
    """
    M, gptr, w, lip, unit_norm = design
    beta, r = iterate
    units, in_act = active
    eps, max_epochs, f_gap = stop
    n_groups = gptr.shape[0] - 1
    buf = np.empty(np.max(gptr[1:] - gptr[:-1]))
    score = np.empty(n_groups)
    cand = np.empty(n_groups, dtype=np.int64)
    is_add, alpha, eps_in = True, alpha0, eps
    target = max(eps, ZETA * gap0)
    epochs = scans = 0
    while True:
        while True:                                    # inner solve on A, with DEL
            top = unit_scores(M, r, gptr, w, units, n_act, score)
            scale = max(lam, top)
            gap = duality_gap(y, r, lam, penalty(beta, gptr, w, units, n_act), scale)
            if gap <= target or epochs >= max_epochs:
                break
            n_act = sphere_screen(M, beta, r, gptr, unit_norm, units, n_act, score,
                                  scale, alpha * math.sqrt(2.0 * gap) / lam, in_act)
            for _ in range(f_gap):
                cd_epoch(M, beta, r, lam, gptr, w, lip, units, n_act, buf)
                epochs += 1
        last_full = full_gap(M, y, r, beta, lam, gptr, w, units, n_act, scores)
        scans += 1
        if last_full <= eps or epochs >= max_epochs:
            return n_act, last_full, epochs, scans
        if not is_add:      # A certified, but the full gap is not there yet: add
            is_add = True       # again, and solve the sub-problem tighter
            eps_in = target = 0.1 * min(eps_in, gap)
            continue
        radius = math.sqrt(2.0 * gap) / lam
        worst = 0.0
        n_cand = 0
        for g in range(n_groups):
            if in_act[g]:
                continue
            s = scores[g] / scale
            worst = max(worst, s + radius * unit_norm[g])
            if s - alpha * radius * unit_norm[g] > 1.0 + MARGIN:
                cand[n_cand] = g
                n_cand += 1
        target = max(eps_in, ZETA * last_full)
        if worst <= 1.0 + MARGIN:           # Theorem 1c: θ*_A = θ*, A is complete
            is_add, alpha, target = False, 1.0, eps_in
        elif n_cand == 0:   # ours: no sure violator: shrink the ball, trust it more
            target = ZETA * min(target, gap)
            alpha = min(1.0, 2.0 * alpha)
        if n_cand > max(1, n_act):          # the m_k = max(1, |A|) largest s_g
            order = np.argsort(-scores[cand[:n_cand]])
            cand[:n_cand] = cand[:n_cand][order]
            n_cand = max(1, n_act)
        for k in range(n_cand):
            units[n_act] = cand[k]
            in_act[cand[k]] = True
            n_act += 1


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
