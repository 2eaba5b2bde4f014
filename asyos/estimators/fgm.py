"""scikit-learn fronts of the feature generating machine (``asyos.baselines.fgm``).

``FGMClassifier`` (squared hinge or logistic loss, two classes) and ``FGMRegressor``
(squared loss) select features by FGM's cutting plane and predict with the model FGM
fitted on them (Tan, Tsang & Wang 2014, Section 5.3: every subproblem re-fits the
active features, so no separate de-biasing step is needed).  ``polynomial_degree=2``
selects among the base features and their pairwise products (``InteractionStream``'s
numbering) without ever building the product matrix; ``groups=`` selects whole
groups.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..errors import InputError
from ..fgm.cutting_plane import check_fgm, fgm
from ..streams import InteractionStream, as_stream

__all__ = ["FGMClassifier", "FGMRegressor"]

_PARAMS_DOC = """
    Parameters
    ----------
    n_features_to_select : int or None, default=None
        Upper bound on the selected features (groups, with ``groups=``); FGM stops
        once that many are active.  None: only the tolerance and
        ``max_activations`` stop it.
    B : int, default=5
        Candidates (features or groups) activated per cutting-plane iteration.
    C : float, default=C_DEFAULT
        The weight of the loss: P = C·Σ_i ℓ(z_i) against ½(Σ_h ‖w_h‖)².
    groups : array-like or list of lists, default=None
        A group label per feature (disjoint groups), or a list of feature index
        lists (which may overlap).  Not with ``polynomial_degree`` > 1.
    polynomial_degree : {1, 2, 3}, default=1
        1: the features; 2: and their products x_i·x_j, i ≤ j, searched
        implicitly; 3: and the triple products, enumerated.
    fit_intercept : bool, default=True
        Learn the unpenalised bias b (FGM-SHIFT).
    max_activations : int or None, default=None
        Cap on the activations (None: 10, or 4·⌈n/B⌉ with a budget n).  A run that
        stops there (neither Tan et al.'s (37), (38) nor the budget met) issues
        scikit-learn's ``ConvergenceWarning``.
    tol : float, default=1e-3
        Stop when an activation lowers the objective by at most tol·F₀ (Tan et
        al., eq. (38)).
    inner_tol : float, default=1e-3
        The APG subproblem's relative-decrease tolerance.
    max_inner : int, default=20
        The APG subproblem's iteration cap.
    exclude_active : bool, default=False
        Rank only features not yet active (B new ones per activation); the
        default ranks all (the exact cutting plane).
    normalize_scores : bool, default=False
        False: candidates score c_j² = (x_jᵀr)², which grows with ‖x_j‖², so the
        selection assumes the features share a scale; Tan et al. scale them to
        [0, 1] (with ``polynomial_degree=2`` after standardization the products of
        rarely-nonzero features win on norm alone).  True: every candidate column
        (product columns included) is used at unit norm, scoring c_j²/‖x_j‖²,
        which makes the fit invariant to a positive rescaling of each feature;
        ``weights_`` still apply to the raw columns.
EXTRA
    Attributes
    ----------
    selected_ : ndarray of int
        Sorted feature numbers with a nonzero weight (in the mapped space for
        ``polynomial_degree`` > 1; ``InteractionStream(X, degree).terms`` decodes
        them).
    weights_ : ndarray
        Their weights.
    intercept_ : float
        The bias.
    coef_ : ndarray of shape (n_features,)
        Dense weights over the input features (``polynomial_degree=1`` only: the
        mapped space can be too large to hold densely).
    n_iter_ : int
        Activations run.
    result_ : FGMResult
        The whole run: objective, gaps, and why it stopped.
    n_features_in_ : int
        The number of features seen by ``fit``.

    See Also
    --------
    OnlineSubstitutionClassifier, OnlineSubstitutionRegressor : s features by
        online substitution, one pass over the columns at a time.
"""


def _fgm_doc(summary: str, C: str, extra: str = "") -> str:
    """A front's numpydoc: its summary, the shared parameters with its default C and
    its own ones (``extra``), the fitted attributes."""
    return summary + _PARAMS_DOC.replace("C_DEFAULT", C).replace("EXTRA\n", extra)


class _FGM(BaseEstimator):
    def __init__(self, n_features_to_select=None, *, B=5, C=1.0, groups=None,
                 polynomial_degree=1, fit_intercept=True, max_activations=None,
                 tol=1e-3, inner_tol=1e-3, max_inner=20, exclude_active=False,
                 normalize_scores=False):
        self.n_features_to_select = n_features_to_select
        self.B = B
        self.C = C
        self.groups = groups
        self.polynomial_degree = polynomial_degree
        self.fit_intercept = fit_intercept
        self.max_activations = max_activations
        self.tol = tol
        self.inner_tol = inner_tol
        self.max_inner = max_inner
        self.exclude_active = exclude_active
        self.normalize_scores = normalize_scores

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _fit(self, X, y, loss):
        space, y, loss = check_fgm(
            X, y, loss, self.n_features_to_select, groups=self.groups,
            degree=self.polynomial_degree, B=self.B, C=self.C, tol=self.tol,
            inner_tol=self.inner_tol, max_inner=self.max_inner,
            max_activations=self.max_activations,
            normalize=bool(self.normalize_scores))
        result = fgm(space, y, loss=loss, B=self.B, C=float(self.C),
                     n_select=self.n_features_to_select,
                     max_activations=self.max_activations, tol=self.tol,
                     inner_tol=self.inner_tol, max_inner=self.max_inner,
                     fit_intercept=bool(self.fit_intercept),
                     exclude_active=bool(self.exclude_active),
                     convergence_warning=ConvergenceWarning)
        self.result_ = result
        self.selected_, self.weights_ = result.selected, result.weights
        self.intercept_ = result.intercept
        self.n_iter_ = len(result.blocks)
        if self.polynomial_degree == 1:
            self.coef_ = np.zeros(self.n_features_in_)
            self.coef_[result.selected] = result.weights
        return self

    def _decision(self, X) -> np.ndarray:
        check_is_fitted(self, "result_")
        X = validate_data(self, X, accept_sparse=["csr", "csc"], dtype=np.float64,
                          reset=False)
        if self.polynomial_degree == 1:
            columns = X[:, self.selected_]
        else:
            stream = InteractionStream(as_stream(X), degree=self.polynomial_degree)
            columns = stream.columns(self.selected_).T
        return np.asarray(columns @ self.weights_).ravel() + self.intercept_


class FGMClassifier(ClassifierMixin, _FGM):
    __doc__ = _fgm_doc("""Binary classification with feature selection by FGM
    (squared hinge, or logistic with ``loss="logistic"``); the larger class label is
    the positive one.
    More than two classes raise InputError (one-vs-rest is left to scikit-learn's
    ``OneVsRestClassifier``).
""", "10.0", """    loss : {"squared_hinge", "logistic"}, default="squared_hinge"
        The loss ℓ of the margins.
""")

    def __init__(self, n_features_to_select=None, *, B=5, C=10.0, groups=None,
                 polynomial_degree=1, fit_intercept=True, max_activations=None,
                 tol=1e-3, inner_tol=1e-3, max_inner=20, exclude_active=False,
                 normalize_scores=False, loss="squared_hinge"):
        super().__init__(n_features_to_select, B=B, C=C, groups=groups,
                         polynomial_degree=polynomial_degree,
                         fit_intercept=fit_intercept, max_activations=max_activations,
                         tol=tol, inner_tol=inner_tol, max_inner=max_inner,
                         exclude_active=exclude_active,
                         normalize_scores=normalize_scores)
        self.loss = loss

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y):
        X, y = validate_data(self, X, y, accept_sparse=["csr", "csc"],
                             dtype=np.float64)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if self.classes_.size < 2:
            raise InputError("FGMClassifier needs two classes, got only one class")
        if self.classes_.size > 2:
            raise InputError(f"Only binary classification is supported; got "
                             f"{self.classes_.size} classes")
        if self.loss not in ("squared_hinge", "logistic"):
            raise InputError(f"loss must be 'squared_hinge' or 'logistic', got "
                             f"{self.loss!r}")
        return self._fit(X, np.where(y == self.classes_[1], 1.0, -1.0), self.loss)

    def decision_function(self, X) -> np.ndarray:
        """w'x + b: positive for ``classes_[1]``."""
        return self._decision(X)

    def predict(self, X) -> np.ndarray:
        positive = self.decision_function(X) > 0     # checks fitted first
        return self.classes_[positive.astype(int)]


class FGMRegressor(RegressorMixin, _FGM):
    __doc__ = _fgm_doc("""Least-squares regression with feature selection by FGM
    (P = C/2·Σ(y_i − z_i)², our extension of the paper's losses).
""", "1.0")

    def fit(self, X, y):
        X, y = validate_data(self, X, y, accept_sparse=["csr", "csc"],
                             dtype=np.float64, y_numeric=True)
        return self._fit(X, y, "squared")

    def predict(self, X) -> np.ndarray:
        return self._decision(X)
