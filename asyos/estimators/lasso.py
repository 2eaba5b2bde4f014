"""scikit-learn fronts for the Lasso family: ``Lasso``, ``GroupLasso``, ``FusedLasso``
and ``lasso_path``, solved by coordinate descent with gap-safe screening or SAIF
(``asyos.baselines.cd_path``; Fercoq, Gramfort & Salmon 2015, Ren et al. 2018).

Objective in scikit-learn's scale, (1/(2n))‖y − Xw − b‖² + α·penalty; the solvers work
in the ½‖·‖² scale with λ = n·α, so ``dual_gap_`` is their gap divided by n,
as scikit-learn reports it, and ``tol`` is scikit-learn's: stop when the gap ≤ tol·‖y‖²
(½ scale).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data

from ..core.validate import check_choice, check_int, check_positive
from ..errors import InputError
from ..lasso.path import (
    SCREENINGS,
    SOLVER_NAMES,
    check_xy,
    make_design,
    solve_path,
    warn_unconverged,
)
from ..lasso.saif import fused_coef, fused_design

__all__ = ["FusedLasso", "GroupLasso", "Lasso", "lasso_path"]


_COMMON = """\
    alpha : float, default=1.0
        The weight α of the penalty, in scikit-learn's scale (the solvers use
        λ = n·α on ½‖y − Xw‖²).
    fit_intercept : bool, default=True
        Fit b by centring X and y (sparse X is centred implicitly, never densified).
    tol : float, default=1e-4
        Stop when the duality gap is at most tol·‖y‖² (½ scale), as scikit-learn.
    screening : {"saif", "gap_safe", "none"}, default="saif"
        How features are screened: SAIF (Ren et al. 2018), gap-safe rules
        (Fercoq, Gramfort & Salmon 2015), or plain coordinate descent.
    max_iter : int, default=10000
        The most coordinate-descent epochs; a fit that stops there warns
        (``ConvergenceWarning``)."""

_FITTED = """\
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        The weights w.
    intercept_ : float
        b (0.0 without ``fit_intercept``).
    dual_gap_ : float
        The duality gap at the end, in scikit-learn's scale (at most tol·‖y‖²/n
        on success).
    n_iter_ : int
        Coordinate-descent epochs (1 when the first check already proves the
        answer, e.g. w = 0 at α ≥ α_max, as scikit-learn expects n_iter_ ≥ 1).
    n_features_in_ : int
        The number of features seen by ``fit``.

    See Also
    --------"""


def _documented(cls):
    """Fill a Lasso-family docstring's shared parameters and its fitted attributes
    (which end with the See Also heading, the class's own entries after it)."""
    cls.__doc__ = cls.__doc__.replace("{common}", _COMMON).replace("{fitted}",
                                                                   _FITTED)
    return cls


class _ScreenedLinear(RegressorMixin, BaseEstimator):
    """Shared fit: checks, centring for the intercept, one solve at λ = n·α."""

    _sparse_ok = True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._sparse_ok
        return tags

    def fit(self, X, y):
        """Fit at α; the intercept (if any) is the mean fit of the centred data."""
        check_positive("alpha", self.alpha)
        check_positive("tol", self.tol)
        check_int("max_iter", self.max_iter, 1)
        check_choice("screening", self.screening, SCREENINGS)
        try:
            X, y = validate_data(self, X, y, accept_sparse="csc", dtype=np.float64,
                                 y_numeric=True)
        except ValueError as err:
            raise InputError(str(err)) from err
        if sp.issparse(X) and not self._sparse_ok:
            raise InputError(f"{type(self).__name__} does not take sparse X")
        X, y = check_xy(X, y)
        self._check_structure(X.shape[1])
        center = None
        if self.fit_intercept:
            x_mean, y_mean = np.asarray(X.mean(axis=0)).ravel(), float(y.mean())
            y = y - y_mean
            if sp.issparse(X):      # centred implicitly (O(nnz)), never densified
                center = x_mean
            else:
                X = X - x_mean
        n = X.shape[0]
        coef, gap, epochs = self._solve(X, y, n * float(self.alpha), center)
        warn_unconverged([gap / n], self.tol * float(y @ y) / n, [self.alpha],
                         [epochs], self.screening, self.max_iter, ConvergenceWarning,
                         name=f"{type(self).__name__} "
                              f"({SOLVER_NAMES[self.screening]})",
                         scale="(1/(2n))‖y − Xw‖²", cap="max_iter")
        self.coef_ = coef
        self.intercept_ = (y_mean - float(x_mean @ coef)) if self.fit_intercept else 0.0
        self.dual_gap_ = gap / n
        self.n_iter_ = max(1, int(epochs))
        return self

    def predict(self, X):
        """X w + b."""
        check_is_fitted(self)
        try:
            X = validate_data(self, X, accept_sparse="csr", dtype=np.float64,
                              reset=False)
        except ValueError as err:
            raise InputError(str(err)) from err
        return np.asarray(X @ self.coef_).ravel() + self.intercept_

    def _check_structure(self, p):
        """Check the group / graph parameters against p (nothing for the Lasso)."""

    def _solve_units(self, X, y, lam, groups=None, weights=None, center=None):
        res = solve_path(make_design(X, groups, weights, center), y, [lam], self.tol,
                         self.screening, max_epochs=self.max_iter,
                         convergence_warning=None)     # fit warns, in its own scale
        return res.coefs[0], float(res.gaps[0]), int(res.epochs[0])


@_documented
class Lasso(_ScreenedLinear):
    """min (1/(2n))‖y − Xw − b‖² + α‖w‖₁ by coordinate descent with gap-safe
    screening or SAIF (the default); dense or sparse X.  With ``fit_intercept`` and
    sparse X the columns are centred implicitly, as scikit-learn does (products with
    X − 1μᵀ, never formed), so X is never densified.

    Parameters
    ----------
{common}

{fitted}
    GroupLasso, FusedLasso : the same solvers for other penalties.
    lasso_path : the solutions along a grid of α.
    OnlineSubstitutionRegressor : a model of s features without a penalty to tune.
    """

    def __init__(self, alpha=1.0, *, fit_intercept=True, tol=1e-4, screening="saif",
                 max_iter=10_000):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.screening = screening
        self.max_iter = max_iter

    def _solve(self, X, y, lam, center=None):
        return self._solve_units(X, y, lam, center=center)


@_documented
class GroupLasso(_ScreenedLinear):
    """min (1/(2n))‖y − Xw − b‖² + α Σ_g w_g‖w_g‖₂ by block coordinate
    descent with the group gap-safe test or SAIF over groups.

    Parameters
    ----------
    groups : array-like of shape (n_features,), default=None
        One label per feature; None: every feature alone (the Lasso).
    weights : array-like of shape (n_groups,), default=None
        One weight w_g > 0 per distinct label, in sorted label order (default
        √|g|).
{common}

{fitted}
    Lasso : one feature per group.
    SGHTRegressor : at most s features in at most s2 groups, without a penalty.
    """

    def __init__(self, alpha=1.0, *, groups=None, weights=None, fit_intercept=True,
                 tol=1e-4, screening="saif", max_iter=10_000):
        self.alpha = alpha
        self.groups = groups
        self.weights = weights
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.screening = screening
        self.max_iter = max_iter

    def _check_structure(self, p):
        if self.groups is None:
            n_groups = p
        else:
            groups = np.asarray(self.groups)
            if groups.shape != (p,):
                raise InputError(f"groups must give one label per feature ({p}), "
                                 f"got shape {groups.shape}")
            n_groups = len(np.unique(groups))
        if self.weights is not None:
            w = np.asarray(self.weights, dtype=np.float64)
            if w.shape != (n_groups,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
                raise InputError(f"weights must be {n_groups} finite numbers > 0, "
                                 "one per group")

    def _solve(self, X, y, lam, center=None):
        return self._solve_units(X, y, lam, self.groups, self.weights, center)


@_documented
class FusedLasso(_ScreenedLinear):
    """min (1/(2n))‖y − Xw − b‖² + α Σ_(u,v)∈E |w_u − w_v| over the edges E of a tree
    on the features, by the subtree-sum transform to a Lasso (Ren et al. 2018,
    Section 4).  The transformed columns are dense, so sparse X is refused.

    Parameters
    ----------
    edges : array-like of shape (n_features - 1, 2), default=None
        Node pairs forming a tree on the features (None: the chain 0–1–…–(p−1),
        the 1-D fused Lasso).  A general graph must be reduced to a spanning tree
        by the caller.
{common}

{fitted}
    Lasso : the transformed problem's solver.
    """

    _sparse_ok = False

    def __init__(self, alpha=1.0, *, edges=None, fit_intercept=True, tol=1e-4,
                 screening="saif", max_iter=10_000):
        self.alpha = alpha
        self.edges = edges
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.screening = screening
        self.max_iter = max_iter

    def _tree(self, p):
        if self.edges is None:
            return np.column_stack([np.arange(p - 1), np.arange(1, p)])
        return np.asarray(self.edges)

    def _check_structure(self, p):
        edges = self._tree(p)
        if (edges.shape != (p - 1, 2) or not np.issubdtype(edges.dtype, np.integer)
                or edges.size and (edges.min() < 0 or edges.max() >= p)):
            raise InputError(f"edges must be p - 1 = {p - 1} pairs of feature "
                             f"indices in 0..{p - 1}, got shape {edges.shape}")
        root = np.arange(p)                      # union-find: a tree has no cycle
        for u, v in edges:
            while root[u] != u:
                u = root[u]
            while root[v] != v:
                v = root[v]
            if u == v:
                raise InputError("edges must form a tree (they contain a cycle)")
            root[u] = v

    def _solve(self, X, y, lam, center=None):
        p = X.shape[1]
        cols, y_perp, state = fused_design(X, y, self._tree(p))
        if p == 1:
            return fused_coef(np.zeros(0), state), 0.0, 0
        z, gap, epochs = self._solve_units(cols.T, y_perp, lam)
        return fused_coef(z, state), gap, epochs


def lasso_path(X, y, *, alphas=None, n_alphas=100, eps=1e-3, tol=1e-6,
               screening="saif", max_iter=10_000, coef_init=None, return_n_iter=False):
    """The Lasso (1/(2n))‖y − Xw‖² + α‖w‖₁ (no intercept) along α, warm-started.

    Like ``sklearn.linear_model.lasso_path``: α sorted decreasing, by default
    ``n_alphas`` log-spaced from α_max = ‖Xᵀy‖_∞/n down to eps·α_max; each solve stops
    at duality gap ≤ tol·‖y‖².  Returns (alphas, coefs of shape
    (p, n_alphas), dual gaps in scikit-learn's scale), and the epochs per α with
    ``return_n_iter``.  An α still above its gap target at ``max_iter`` epochs gives
    a ``ConvergenceWarning`` (scikit-learn's), one for the whole path.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n, p)
    y : array-like of shape (n,)
    alphas : array-like, optional
        The penalties to solve at (sorted decreasing); default the log-spaced grid.
    n_alphas : int
        How many penalties on the default grid.
    eps : float
        The default grid's smallest α over α_max.
    tol : float
        Each solve stops at a duality gap ≤ tol·‖y‖².
    screening : {"saif", "gap_safe", "none"}
        How the solver leaves out features whose weight is provably 0: "saif"
        (default) lets features in by violation and removes them by gap-safe tests,
        "gap_safe" removes them from the full set, "none" solves on every feature.
    max_iter : int
        The most epochs per α.
    coef_init : array-like of shape (p,), optional
        The weights the first α starts from.
    return_n_iter : bool
        Also return the epochs each α took.

    Returns
    -------
    alphas : ndarray of shape (n_alphas,)
    coefs : ndarray of shape (p, n_alphas)
    dual_gaps : ndarray of shape (n_alphas,)
    n_iters : list of int
        Only with ``return_n_iter``.
    """
    X, y = check_xy(X, y)
    check_positive("tol", tol)
    check_int("max_iter", max_iter, 1)
    check_choice("screening", screening, SCREENINGS)
    n, p = X.shape
    design = make_design(X)
    if alphas is None:
        check_int("n_alphas", n_alphas, 1)
        check_positive("eps", eps)
        top = design.lam_max(y) / n or 1.0     # y ⟂ X: w = 0 at every α > 0
        alphas = top * np.geomspace(1.0, eps, n_alphas)
    alphas = np.sort(np.asarray(alphas, dtype=np.float64).ravel())[::-1]
    if alphas.size == 0 or not np.all(np.isfinite(alphas)) or alphas.min() <= 0:
        raise InputError("alphas must be a nonempty list of finite numbers > 0")
    if coef_init is not None:
        coef_init = np.asarray(coef_init, dtype=np.float64)
        if coef_init.shape != (p,) or not np.all(np.isfinite(coef_init)):
            raise InputError(f"coef_init must be {p} finite numbers")
    res = solve_path(design, y, n * alphas, tol, screening, max_iter, coef_init,
                     convergence_warning=None)
    warn_unconverged(res.gaps / n, tol * float(y @ y) / n, alphas, res.epochs,
                     screening, max_iter, ConvergenceWarning,
                     name=f"lasso_path ({SOLVER_NAMES[screening]})",
                     scale="(1/(2n))‖y − Xw‖²", cap="max_iter")
    if return_n_iter:
        return alphas, res.coefs.T.copy(), res.gaps / n, res.epochs.copy()
    return alphas, res.coefs.T.copy(), res.gaps / n
