"""scikit-learn estimators for bi-level selection: at most s1 features in at most s2
groups, by batch SGHT (Xiang, Yang & Ye, KDD 2014, Algorithms 1-2) or group-aware
Online Substitution.

``groups`` gives each feature's group label (None: every feature its own group, so
the group budget is a second feature budget).  ``solver="sght"`` runs projected
gradient with the exact bi-level projection (``variant`` picks one of the paper's
four step schemes; ``starts`` the points it runs from, keeping the run with the least
objective: "zero", the paper's, and "least_squares", "ridge", "correlation", see
``sght.solver.start_point``); ``solver="os"`` runs group-aware OS over the columns
(``epochs`` passes), which never holds more than s1 + 1 columns.

Intercept: with ``fit_intercept`` the columns are centred first.  For the squared loss
this is exact (the best b for any w is ȳ − x̄ᵀw); for the classification losses the
selection runs on the centred X with b = 0 and ``intercept_`` is then the exact 1-D
minimiser of L(X_c w + b, y), shifted by −x̄ᵀ``coef_``.  Inputs are dense; the
classifier is binary (scikit-learn's multiclass checks are skipped by its tags).
"""

import numpy as np
from scipy.optimize import minimize_scalar
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from ..core.losses import Loss, loss_value
from ..core.projection import check_groups
from ..core.validate import check_at_least, check_choice
from ..errors import InputError
from ..sght.solver import VARIANTS, sght_from_starts
from ..solvers.sequential import fit_os

SOLVERS = ("sght", "os")


_PARAMETERS = """\
    Parameters
    ----------
    n_features_to_select : int, default=None
        s1: the most nonzero coefficients (None: half of p, at least 1).
    n_groups_to_select : int, default=None
        s2: the most groups they may lie in (None: half of the groups, at least 1).
    groups : array-like of shape (n_features,), default=None
        Each feature's group label (None: every feature its own group, so s2 is a
        second feature budget).
    loss : LOSSES
        The loss of the fit.
    solver : {"sght", "os"}, default="sght"
        "sght": projected gradient with the exact bi-level projection (Xiang, Yang
        & Ye 2014); "os": group-aware Online Substitution over the columns, which
        never holds more than s1 + 1 of them.
    variant : {"ISTA", "ISTA-L", "FISTA", "FISTA-C"}, default="ISTA-L"
        SGHT's step scheme, the paper's four (Xiang et al., Table 1): a
        Barzilai-Borwein start with a sufficient-decrease test (ISTA) or a
        Lipschitz test (ISTA-L, FISTA), or a constant start (FISTA-C).
    max_iter : int, default=1000
        SGHT's iteration cap; a run stopped there before its relative decrease
        reached ``tol`` issues scikit-learn's ``ConvergenceWarning``.
    tol : float, default=1e-6
        SGHT's relative-decrease tolerance.
    epochs : int, default=2
        Passes of ``solver="os"`` over the columns.
    fit_intercept : bool, default=True
        Centre the columns first; for the classification losses ``intercept_`` is
        then the exact 1-D minimiser given the weights.
    starts : tuple of str, default=("zero",)
        The points SGHT runs from, keeping the run with the least objective:
        "zero" (the paper's), "least_squares", "ridge", "correlation".

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        The weights (at most s1 nonzero, in at most s2 groups).
    intercept_ : float
        The bias.
    support_ : ndarray of bool
        Which coefficients are nonzero.
    n_groups_selected_ : int
        The groups they lie in.
    n_iter_ : int
        SGHT iterations, or OS feature steps.
    n_features_in_ : int
        The number of features seen by ``fit``.

    See Also
    --------
    GroupLasso : a convex relaxation with a penalty to tune.
    OnlineSubstitutionRegressor, OnlineSubstitutionClassifier : s features by online
        substitution.
"""


class _BiLevel(BaseEstimator):
    """Parameters and the fitting path both estimators share."""

    _losses = ("squared",)

    def __init__(self, n_features_to_select=None, n_groups_to_select=None, *,
                 groups=None, loss="squared", solver="sght", variant="ISTA-L",
                 max_iter=1000, tol=1e-6, epochs=2, fit_intercept=True,
                 starts=("zero",)):
        self.n_features_to_select = n_features_to_select
        self.n_groups_to_select = n_groups_to_select
        self.groups = groups
        self.loss = loss
        self.solver = solver
        self.variant = variant
        self.max_iter = max_iter
        self.tol = tol
        self.epochs = epochs
        self.fit_intercept = fit_intercept
        self.starts = starts

    def _check_params(self, p: int):
        """(loss, group ids, s1, s2), or InputError naming the bad parameter."""
        if self.loss not in self._losses:
            raise InputError(f"{type(self).__name__}: loss must be one of "
                             f"{', '.join(self._losses)}, got {self.loss!r}")
        check_choice("solver", self.solver, SOLVERS)
        check_choice("variant", self.variant, VARIANTS)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise InputError(f"fit_intercept must be True or False, got "
                             f"{self.fit_intercept!r}")
        check_at_least("max_iter", self.max_iter, 1, integer=True)
        check_at_least("epochs", self.epochs, 1, integer=True)
        check_at_least("tol", self.tol, 0.0)
        groups = np.arange(p) if self.groups is None else self.groups
        group_of, n_groups = check_groups(groups, p)
        s1 = _budget("n_features_to_select", self.n_features_to_select, p)
        s2 = _budget("n_groups_to_select", self.n_groups_to_select, n_groups)
        return Loss.parse(self.loss), group_of, s1, s2

    def _fit(self, X, y, loss: Loss, group_of, s1: int, s2: int) -> None:
        mean = X.mean(axis=0) if self.fit_intercept else np.zeros(X.shape[1])
        Xc = X - mean
        offset = float(y.mean()) if self.fit_intercept and loss is Loss.SQUARED else 0.0
        if self.solver == "sght":
            path = sght_from_starts(Xc, y - offset, s1, group_of, s2, self.starts,
                                    loss=loss, variant=self.variant,
                                    max_iter=self.max_iter, tol=self.tol,
                                    convergence_warning=ConvergenceWarning)
            coef, self.n_iter_ = path.w, path.n_iter
        else:
            result = fit_os(Xc, y - offset, s1, loss=loss, epochs=self.epochs,
                            groups=group_of, s2=s2)
            coef = np.zeros(X.shape[1])
            coef[result.selected] = result.weights
            self.n_iter_ = result.n_steps
        if self.fit_intercept and loss is not Loss.SQUARED:   # exact 1-D minimiser
            u = np.ascontiguousarray(Xc @ coef)
            offset = float(minimize_scalar(
                lambda b: loss_value(int(loss), u + b, y)).x)
        self.coef_ = coef
        self.intercept_ = offset - float(mean @ coef)
        self.support_ = coef != 0
        self.n_groups_selected_ = int(np.unique(group_of[self.support_]).size)

    def _data(self, X, y):
        try:
            return validate_data(self, X, y, dtype=np.float64,
                                 y_numeric=not isinstance(self, ClassifierMixin))
        except ValueError as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(str(exc)) from exc

    def _decision(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return X @ self.coef_ + self.intercept_


def _budget(name: str, value, limit: int) -> int:
    """None → half of ``limit`` (at least 1), else an integer in 1..limit."""
    if value is None:
        return max(1, limit // 2)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
            and 1 <= value <= limit:
        return int(value)
    raise InputError(f"{name} must be an integer in 1..{limit}, got {value!r}")


class SGHTRegressor(RegressorMixin, _BiLevel):
    __doc__ = """Least squares with at most ``n_features_to_select`` nonzero
    coefficients in at most ``n_groups_to_select`` groups.

""" + _PARAMETERS.replace("LOSSES", '{"squared"}, default="squared"')

    def fit(self, X, y):
        X, y = self._data(X, y)
        loss, group_of, s1, s2 = self._check_params(X.shape[1])
        self._fit(X, np.asarray(y, dtype=np.float64), loss, group_of, s1, s2)
        return self

    def predict(self, X):
        return self._decision(X)


class SGHTClassifier(ClassifierMixin, _BiLevel):
    __doc__ = """Binary linear classifier with at most ``n_features_to_select``
    features in at most ``n_groups_to_select`` groups.  ``solver="os"`` runs
    group-aware OS under the fitted substitution rule (its weights are
    Newton-fitted, so the logistic fit passes scikit-learn's
    ``check_classifiers_train`` even on its 2-feature data).

""" + _PARAMETERS.replace("LOSSES", '{"squared_hinge", "logistic"}, '
                          'default="squared_hinge"')

    _losses = ("squared_hinge", "logistic")

    def __init__(self, n_features_to_select=None, n_groups_to_select=None, *,
                 groups=None, loss="squared_hinge", solver="sght", variant="ISTA-L",
                 max_iter=1000, tol=1e-6, epochs=2, fit_intercept=True,
                 starts=("zero",)):
        super().__init__(n_features_to_select, n_groups_to_select, groups=groups,
                         loss=loss, solver=solver, variant=variant, max_iter=max_iter,
                         tol=tol, epochs=epochs, fit_intercept=fit_intercept,
                         starts=starts)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y):
        X, y = self._data(X, y)
        loss, group_of, s1, s2 = self._check_params(X.shape[1])
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if self.classes_.size != 2:   # scikit-learn's wording, which its checks expect
            kind = type_of_target(y, input_name="y")
            raise InputError(f"Only binary classification is supported. The type of "
                             f"the target is {kind} ({self.classes_.size} class"
                             f"{'es' if self.classes_.size > 1 else ''}).")
        self._fit(X, np.where(y == self.classes_[1], 1.0, -1.0), loss, group_of, s1, s2)
        return self

    def decision_function(self, X):
        return self._decision(X)

    def predict(self, X):
        positive = self.decision_function(X) > 0    # checks fitted first
        return self.classes_[positive.astype(int)]
