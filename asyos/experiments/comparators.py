"""The comparators the experiments score OS against, by the paper's legend names.

``METHODS``: asyos's own implementations of the OS paper's comparators (Proj-GD, the
Lasso, FGM, Grafting, online L1/L0 coordinate descent), one uniform call
``f(X, y, s, loss=..., epochs=...)``; the batch methods ignore ``epochs``.
``COMPARATORS``: third-party ones, LIBLINEAR's L1 squared-hinge SVC, OMP, abess.

They need scikit-learn or abess, which the core must not depend on (the import-linter
contract keeps sklearn out of asyos.baselines), so they live here and import their
library only when called.  Each returns a ``Selection`` cut to s features like the
baselines in ``asyos.baselines``, so the experiments score them the same way.
"""

from __future__ import annotations

import importlib
from functools import partial, wraps

import numpy as np

from ..baselines import fit_grafting, fit_iht, fit_l0_cd, fit_l1_cd
from ..core.selection import Selection, selection
from ..core.validate import check_problem
from ..errors import InputError
from ..fgm import fit_fgm
from ..lasso import fit_lasso
from ..lasso.selector import first_on_grid, lambda_max

__all__ = ["METHODS", "COMPARATORS", "available_comparators", "c_for_s", "fit_abess",
           "fit_l1_squared_hinge", "fit_omp"]


def _l1_svc(C: float):
    from sklearn.svm import LinearSVC

    # LIBLINEAR -s 5 (primal L1-regularised L2-loss SVC), no bias term.
    return LinearSVC(penalty="l1", loss="squared_hinge", dual=False, C=C,
                     fit_intercept=False, tol=1e-6, max_iter=10_000, random_state=0)


def _c_path(X, y, s: int) -> tuple[float, np.ndarray, int]:
    """(C, coef, fits) for the smallest grid C with nnz ≥ min(s, n) (else the most
    nnz; an L1 solution has at most n nonzeros, as in ``lasso.lambda_for_s``).

    The grid is the λ grid of ``lasso.lambda_for_s`` mapped by C = 1/(2nλ), which
    makes LIBLINEAR's ‖w‖₁ + C·Σ_i max(0, 1 − y_i wᵀx_i)² equal to (λ‖w‖₁ + L)/λ with
    L the squared hinge of Yang et al. (2016, eq. (3)): C₀ = 1/(2nλ_max) gives w = 0,
    then C grows by 1/0.85 per step.
    """
    n = X.shape[0]
    lam, coef, fits = first_on_grid(
        lambda_max(X, y, "squared_hinge"), min(s, n),
        lambda lam: _l1_svc(1.0 / (2.0 * n * lam)).fit(X, y).coef_.ravel())
    return 1.0 / (2.0 * n * lam), coef, fits


def c_for_s(X, y, s: int) -> float:
    """The C that ``fit_l1_squared_hinge`` uses: the smallest C = 1/(2nλ), λ on the
    λ grid, whose L1 squared-hinge SVC has at least min(s, n) nonzeros."""
    X, y, s, _ = check_problem(X, y, s, "squared_hinge")
    return _c_path(X, y, s)[0]


def fit_l1_squared_hinge(X, y, s: int) -> Selection:
    """sklearn LinearSVC(penalty="l1", loss="squared_hinge", dual=False,
    fit_intercept=False), C increased on the grid until nnz ≥ s, then the top s by
    |w|.  Labels must be ±1.  ``n_iter`` = fits run along the grid."""
    X, y, s, _ = check_problem(X, y, s, "squared_hinge")
    _, coef, fits = _c_path(X, y, s)
    return selection(np.arange(X.shape[1]), coef, s, "L1 Hinge Loss Classification",
                     fits)


def fit_omp(X, y, s: int) -> Selection:
    """Orthogonal matching pursuit with s atoms, no intercept (sklearn).  It may stop
    with fewer if the residual vanishes.  ``n_iter`` = sklearn's ``n_iter_``."""
    X, y, s, _ = check_problem(X, y, s, "squared")
    from sklearn.linear_model import OrthogonalMatchingPursuit

    model = OrthogonalMatchingPursuit(n_nonzero_coefs=s, fit_intercept=False)
    coef = model.fit(X, y).coef_.ravel()
    return selection(np.arange(X.shape[1]), coef, s, "OMP", int(model.n_iter_))


def fit_abess(X, y, s: int, loss="squared") -> Selection:
    """abess (best-subset splicing) at support size s, no intercept.

    Squared loss: ``abess.LinearRegression``.  A classification loss (labels ±1): abess
    has no squared hinge, so ``abess.LogisticRegression`` on labels mapped to 0/1.
    ``n_iter`` is 0 (abess does not report one).
    """
    X, y, s, loss = check_problem(X, y, s, loss)
    import abess

    if loss.is_classification:
        model = abess.LogisticRegression(support_size=[s], fit_intercept=False)
        model.fit(X, (y > 0).astype(np.float64))
    else:
        model = abess.LinearRegression(support_size=[s], fit_intercept=False)
        model.fit(X, y)
    return selection(np.arange(X.shape[1]), np.ravel(model.coef_), s, "abess", 0)


def _batch(fit):
    """``fit`` with the uniform call: a batch method has no epochs to run."""
    @wraps(fit)
    def call(X, y, s, loss="squared", epochs=None):
        return fit(X, y, s, loss=loss)
    return call


METHODS = {
    "Proj-GD": _batch(fit_iht),
    "LASSO": _batch(fit_lasso),
    "FGM": _batch(fit_fgm),
    "Grafting": fit_grafting,
    "L1 coordinate descent": fit_l1_cd,
    "L0 coordinate descent": fit_l0_cd,
}

# name → (function, the library it needs, the tasks it applies to)
_TABLE = {
    "L1 Hinge Loss Classification": (fit_l1_squared_hinge, "sklearn",
                                     ("classification",)),
    "OMP": (fit_omp, "sklearn", ("regression", "classification")),
    "abess": (fit_abess, "abess", ("regression", "classification")),
}

COMPARATORS = {name: fit for name, (fit, _, _) in _TABLE.items()}

_LOSS = {"regression": "squared", "classification": "squared_hinge"}


def _imports(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def available_comparators(task: str) -> dict:
    """name → f(X, y, s) for the comparators that apply to ``task`` ("regression" or
    "classification") and whose library imports here; abess gets the task's loss."""
    if task not in _LOSS:
        raise InputError(f"unknown task {task!r}; expected regression or "
                         "classification")
    out = {}
    for name, (fit, module, tasks) in _TABLE.items():
        if task in tasks and _imports(module):
            out[name] = partial(fit, loss=_LOSS[task]) if fit is fit_abess else fit
    return out
