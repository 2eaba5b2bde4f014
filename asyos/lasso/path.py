"""The Lasso / group Lasso path by coordinate descent: no screening, gap-safe dynamic
screening (``screening.py``) or SAIF (``saif.py``), warm-started along λ (sequential
gap-safe screening, Fercoq, Gramfort & Salmon 2015; SAIF's warm starts, Ren et al.
2018, Section 5.3).

Python prepares a ``Design`` once (column or group norms, the unit layout) and checks
the inputs; the kernels trust it.  Scale: ½‖y − Xβ‖² + λ Σ_g w_g‖β_g‖ (λ = n·α).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import ConvergenceWarning, InputError
from .saif import WS_MIN, saif_cd
from .screening import (
    Iterate,
    ScoreBounds,
    Stopping,
    UnitDesign,
    UnitSet,
    gap_safe_cd,
    unit_scores,
)

__all__ = ["SCREENINGS", "Design", "PathResult", "check_xy", "make_design",
           "solve_path", "warn_unconverged"]

SCREENINGS = ("none", "gap_safe", "saif")
SOLVER_NAMES = {"none": "coordinate descent",
                "gap_safe": "coordinate descent with gap-safe screening",
                "saif": "SAIF"}
ALPHA0 = 0.5     # α0 shrinks the first ADD/DEL balls (Ren et al., Section 2.2; ours)
F_GAP = 10       # epochs between two gap checks (our value)


def check_xy(X, y) -> tuple[object, np.ndarray]:
    """(X as float64 ndarray or CSC matrix, y as float64 vector), or InputError."""
    if sp.issparse(X):
        if X.ndim != 2:
            raise InputError(f"X must be 2-D, got shape {X.shape}")
        X = sp.csc_matrix(X, dtype=np.float64, copy=True)  # sorted in place below
        X.sum_duplicates()
        X.sort_indices()
        finite = np.all(np.isfinite(X.data))
    else:
        X = np.asarray(X, dtype=np.float64)
        if not X.flags.writeable:   # read-only arrays would compile every kernel anew
            X = X.copy(order="F")
        if X.ndim != 2:
            raise InputError(f"X must be a 2-D array, got shape {X.shape}")
        finite = np.all(np.isfinite(X))
    n, p = X.shape
    if n == 0 or p == 0:
        raise InputError(f"X must be nonempty, got shape {X.shape}")
    if not finite:
        raise InputError("X must be finite (no NaN or inf)")
    y = np.array(y, dtype=np.float64)
    if y.ndim != 1 or y.shape[0] != n:
        raise InputError(f"y must be a vector of length n = {n}, got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise InputError("y must be finite (no NaN or inf)")
    return X, y


@dataclass(frozen=True, eq=False)
class Design:
    """X laid out for the kernels: ``M`` the (p, n) C-ordered transpose, a CSC
    triple, or a CSC quadruple carrying the column means μ (the implicitly centred
    X − 1μᵀ, see ``make_design``), columns permuted by ``order`` so each unit (group) is contiguous,
    ``gptr`` the unit bounds, ``w`` the weights, ``lip`` = ‖X_g‖₂² (the block step and
    the group sphere test) and ``unit_norm`` = ‖X_g‖₂/w_g."""

    M: object
    n: int
    p: int
    order: np.ndarray
    gptr: np.ndarray
    w: np.ndarray
    lip: np.ndarray
    unit_norm: np.ndarray

    @property
    def units(self) -> UnitDesign:
        """The arrays the solvers read."""
        return UnitDesign(self.M, self.gptr, self.w, self.lip, self.unit_norm)

    def scores(self, r: np.ndarray) -> np.ndarray:
        """‖X_gᵀr‖/w_g for every unit."""
        every = np.arange(len(self.w))
        out = np.empty(len(self.w))
        unit_scores(self.M, r, self.gptr, self.w, every, len(every), out)
        return out

    def lam_max(self, y: np.ndarray) -> float:
        """The smallest λ with β* = 0: max_g ‖X_gᵀy‖/w_g."""
        return float(self.scores(y).max())


def _spectral_sq(block) -> float:
    """‖X_g‖₂², from the (small) group block."""
    block = block.toarray() if sp.issparse(block) else block
    return float(np.linalg.norm(block, 2) ** 2) if block.size else 0.0


def _centred_spectral_sq(block, mu) -> float:
    """‖X_g − 1μ_gᵀ‖₂² of a sparse group block, from its Gram matrix (X_g is never
    densified: only the |g|×|g| product is)."""
    n = block.shape[0]
    gram = (block.T @ block).toarray() - n * np.outer(mu, mu)
    return float(max(np.linalg.eigvalsh(gram)[-1], 0.0)) if gram.size else 0.0


def make_design(X, groups=None, weights=None, center=None) -> Design:
    """The ``Design`` of checked X.  ``groups``: a label per column (None: every
    column is its own unit with w = 1, the Lasso); ``weights``: one per distinct
    label, in sorted label order (default √|g|).

    ``center`` (sparse X only): column means μ; the design is then X_c = X − 1μᵀ
    without forming it, as scikit-learn centres sparse input: X_cᵀr = Xᵀr − μ·1ᵀr,
    X_c β = Xβ − (μᵀβ)1, ‖x_j − μ_j1‖² = ‖x_j‖² − nμ_j² (a group's spectral norm
    from its |g|×|g| Gram matrix X_gᵀX_g − nμ_gμ_gᵀ)."""
    n, p = X.shape
    if groups is None:
        order = np.arange(p)
        gptr = np.arange(p + 1, dtype=np.int64)
        w = np.ones(p) if weights is None else np.asarray(weights, dtype=np.float64)
    else:
        labels = np.asarray(groups)
        order = np.argsort(labels, kind="stable")
        _, sizes = np.unique(labels, return_counts=True)
        gptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        w = (np.sqrt(sizes.astype(np.float64)) if weights is None
             else np.asarray(weights, dtype=np.float64))
    Xs = X if groups is None else X[:, order]
    mu = None
    if center is not None:
        if not sp.issparse(Xs):
            raise InputError("center is for sparse X (centre dense X directly)")
        mu = np.asarray(center, dtype=np.float64).ravel()[order]
    if sp.issparse(Xs):
        M = (Xs.data, Xs.indices.astype(np.int64), Xs.indptr.astype(np.int64))
        sq = np.zeros(p)
        filled = np.diff(Xs.indptr) > 0     # reduceat's segments must be nonempty
        sq[filled] = np.add.reduceat(Xs.data * Xs.data, Xs.indptr[:-1][filled])
        if mu is not None:
            M = (*M, mu)
            sq = np.maximum(sq - n * mu * mu, 0.0)
    else:
        M = np.ascontiguousarray(Xs.T)       # no copy for Fortran-ordered X
        sq = np.einsum("ij,ij->i", M, M)
    if groups is None:
        lip = sq
    else:
        lip = np.array([sq[a] if b - a == 1 else _spectral_sq(Xs[:, a:b])
                        if mu is None else _centred_spectral_sq(Xs[:, a:b], mu[a:b])
                        for a, b in zip(gptr[:-1], gptr[1:])])
    return Design(M=M, n=n, p=p, order=order, gptr=gptr, w=w, lip=lip,
                  unit_norm=np.sqrt(lip) / w)


@dataclass(frozen=True, eq=False)
class PathResult:
    """Per λ: coefficients (original column order), the full-problem duality gap
    (½‖·‖² scale, over all units), epochs, units kept at exit (|S| or |A|), full
    scans of X (SAIF's ADD/certificate scans; gap checks for the CD solvers), and the
    mask of units kept at exit (every other one is certified zero)."""

    coefs: np.ndarray
    gaps: np.ndarray
    epochs: np.ndarray
    n_kept: np.ndarray
    kept: np.ndarray


def solve_path(design: Design, y: np.ndarray, lams, tol: float,
               screening: str = "saif", max_epochs: int = 10_000,
               coef0=None, convergence_warning=ConvergenceWarning) -> PathResult:
    """Solve at each λ of ``lams`` (in the given order, warm-starting each from the
    last) until the full duality gap ≤ tol·‖y‖² (scikit-learn's rule).

    Sequential screening: each λ starts from every unit, screened at once with the
    warm-start residual (gap-safe sequential), or, for SAIF, from the last support
    and as many units again closest to violating at λ (``_saif_start``).

    A λ whose gap is still above tol·‖y‖² stopped at ``max_epochs``: one
    ``convergence_warning`` (a Warning class; None: none) names how many and the worst.
    """
    lams = np.asarray(lams, dtype=np.float64)
    eps = tol * float(y @ y)
    d = design
    n_units = len(d.w)
    live = np.flatnonzero(d.lip > 0.0)
    beta = np.zeros(d.p)
    r = y.copy()
    if coef0 is not None:
        beta[:] = coef0[d.order]
        r -= _matvec(d, beta)
    scores = d.scores(r)
    bounds = ScoreBounds(scores, r.copy())     # SAIF's: exact at r to begin with
    out = PathResult(coefs=np.zeros((len(lams), d.p)), gaps=np.zeros(len(lams)),
                     epochs=np.zeros(len(lams), dtype=np.int64),
                     n_kept=np.zeros(len(lams), dtype=np.int64),
                     kept=np.zeros((len(lams), n_units), dtype=bool))
    iterate, stop = Iterate(beta, r), Stopping(eps, max_epochs, F_GAP)
    for t, lam in enumerate(lams):
        units = np.empty(n_units, dtype=np.int64)
        keep = np.zeros(n_units, dtype=bool)
        if screening == "saif":
            start = _saif_start(d, beta, scores, lam, live)
            units[:len(start)] = start
            keep[start] = True
            k, gap, ep, _ = saif_cd(d.units, y, lam, iterate, UnitSet(units, keep),
                                    len(start), bounds, stop, ALPHA0)
        else:
            units[:len(live)] = live
            keep[live] = True
            k, gap, ep = gap_safe_cd(d.units, y, lam, iterate, UnitSet(units, keep),
                                     len(live), scores, stop, screening == "gap_safe")
        out.coefs[t, d.order] = beta
        out.gaps[t], out.epochs[t], out.n_kept[t] = gap, ep, k
        out.kept[t] = keep
    if convergence_warning is not None:
        warn_unconverged(out.gaps, eps, lams, out.epochs, screening, max_epochs,
                         convergence_warning, stacklevel=2)
    return out


def warn_unconverged(gaps, target, lams, epochs, screening: str, max_epochs: int,
                     category, stacklevel: int = 2, *, name: str | None = None,
                     scale: str = "½‖y − Xβ‖²", cap: str = "max_epochs") -> None:
    """One ``category`` warning if some λ stopped with its duality gap above
    ``target`` (its solve hit the epoch cap, checked every ``F_GAP`` epochs): the
    solver (``name``, default the screening's), the cap, how many λ and the worst gap
    against the target."""
    gaps = np.asarray(gaps, dtype=np.float64)
    bad = np.flatnonzero(gaps > target)
    if bad.size == 0:
        return
    worst = bad[np.argmax(gaps[bad])]
    ratio = f"{gaps[worst] / target:.3g} times " if target > 0 else "above "
    where = (f" at {bad.size} of {len(gaps)} λ values (the worst at λ = "
             f"{float(lams[worst]):.3g})" if len(gaps) > 1 else "")
    warnings.warn(f"{name or SOLVER_NAMES[screening]} stopped at {cap}="
                  f"{int(max_epochs)} ({int(epochs[worst])} epochs run){where} with "
                  f"duality gap {gaps[worst]:.3g}, {ratio}its target {target:.3g} "
                  f"set by tol, in the {scale} scale; raise {cap}, or standardize "
                  f"the columns of X", category, stacklevel=stacklevel + 1)


def _saif_start(d: Design, beta, scores, lam, live) -> np.ndarray:
    """SAIF's first active set at λ: the units of the warm start's support and, up to
    max(WS_MIN, twice their number), the others in order of the dual distance
    (λ − s_g)/‖X_g‖ at the last scan's score bounds s_g (ours, after Celer's working sets;
    any start is safe, as SAIF only uses it as its first A)."""
    nonzero = np.add.reduceat((beta != 0.0).astype(np.int64), d.gptr[:-1]) > 0
    rest = live[~nonzero[live]]
    room = min(max(WS_MIN, 2 * int(nonzero.sum())) - int(nonzero.sum()), len(rest))
    if room <= 0:
        return np.flatnonzero(nonzero)
    prio = (lam - scores[rest]) * d.w[rest] / np.sqrt(d.lip[rest])
    ranked = rest[np.argpartition(prio, room - 1)[:room]]
    return np.union1d(np.flatnonzero(nonzero), ranked)


def _matvec(d: Design, beta: np.ndarray) -> np.ndarray:
    """X β in the design's column order."""
    if isinstance(d.M, tuple):
        data, indices, indptr = d.M[:3]
        out = sp.csc_matrix((data, indices, indptr), shape=(d.n, d.p)) @ beta
        return out - float(d.M[3] @ beta) if len(d.M) == 4 else out
    return d.M.T @ beta
