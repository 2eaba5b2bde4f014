"""Selection quality: recall, refits and the errors of the paper's figures
(Yang et al., KDD 2016, Section 5).

Every method is judged the same way: its selected columns are refit on the training
data (least squares, or a ridge-stabilised squared hinge), and the refit is scored.
An empty selection is legal and scores as the zero model.
"""

from __future__ import annotations

import numpy as np

from .core.losses import Loss
from .core.refit import newton_refit
from .errors import InputError

__all__ = [
    "classification_error",
    "evaluate",
    "recall",
    "recovery_error",
    "refit_least_squares",
    "refit_squared_hinge",
]


def _indices(selected, p: int | None = None, name: str = "selected") -> np.ndarray:
    """Sorted unique int64 indices; refuses non-integers and (given p) out-of-range."""
    arr = np.asarray(selected).ravel()
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    integral = arr.dtype.kind in "iu" or (arr.dtype.kind == "f"
                                          and np.all(np.isfinite(arr))
                                          and np.all(arr == np.round(arr)))
    if not integral:
        raise InputError(f"{name} must hold integer feature indices")
    idx = np.unique(arr.astype(np.int64))
    if idx[0] < 0 or (p is not None and idx[-1] >= p):
        top = "p-1" if p is None else p - 1
        raise InputError(f"{name} holds an index outside 0..{top}")
    return idx


def _matrix_and_labels(X, y) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2:
        raise InputError(f"X must be 2-D, got shape {X.shape}")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise InputError(f"y must have length n = {X.shape[0]}, got shape {y.shape}")
    return X, y


def _sign(v: np.ndarray) -> np.ndarray:
    """sign with sign(0) = +1 (our convention; the paper does not say)."""
    return np.where(v >= 0.0, 1.0, -1.0)


def recall(selected, support) -> float:
    """|Ŝ ∩ supp(w*)| / |supp(w*)|."""
    sel = _indices(selected)
    supp = _indices(support, name="support")
    if supp.size == 0:
        raise InputError("recall needs a nonempty true support")
    return float(np.intersect1d(sel, supp, assume_unique=True).size / supp.size)


def refit_least_squares(X, y, selected) -> np.ndarray:
    """Ordinary least squares on the selected columns, zero elsewhere."""
    X, y = _matrix_and_labels(X, y)
    sel = _indices(selected, X.shape[1])
    w = np.zeros(X.shape[1])
    if sel.size:
        w[sel] = np.linalg.lstsq(X[:, sel], y, rcond=None)[0]
    return w


def refit_squared_hinge(X, y, selected, ridge: float = 1e-6,
                        max_iter: int = 100) -> np.ndarray:
    """Squared-hinge refit on the selected columns, zero elsewhere.

    Minimises (1/(2n)) Σ max(0, 1 − y_i x_iᵀw)² + (ridge/2)‖w‖² by the semismooth
    Newton method (``core.refit.newton_refit``): the generalised Hessian
    X_AᵀX_A/n + ridge·I on the active set A = {i : 1 − y_i x_iᵀw > 0} is positive
    definite thanks to the ridge, even when more columns than samples are selected,
    and Newton ends in a few steps once A settles.
    """
    X, y = _matrix_and_labels(X, y)
    if not (np.isfinite(ridge) and ridge > 0):
        raise InputError(f"ridge must be > 0, got {ridge!r}")
    sel = _indices(selected, X.shape[1])
    w_full = np.zeros(X.shape[1])
    if sel.size:
        w_full[sel] = newton_refit(X[:, sel], y, Loss.SQUARED_HINGE, ridge,
                                   max_steps=max_iter)[0]
    return w_full


def recovery_error(X, y, selected, w_true) -> float:
    """‖ŵ_refit − w*‖₂ / ‖w*‖₂ with the least-squares refit; the
    absolute error if w* = 0."""
    w_hat = refit_least_squares(X, y, selected)
    w_true = np.asarray(w_true, dtype=np.float64)
    if w_true.shape != w_hat.shape:
        raise InputError(f"w_true must have length p = {w_hat.size}, "
                         f"got shape {w_true.shape}")
    norm = float(np.linalg.norm(w_true))
    err = float(np.linalg.norm(w_hat - w_true))
    return err / norm if norm > 0 else err


def classification_error(X, y, selected, X_test, y_test, ridge: float = 1e-6) -> float:
    """Test error of sign(X_test ŵ) (sign(0) = +1) after the squared-hinge refit on
    (X, y)."""
    w_hat = refit_squared_hinge(X, y, selected, ridge=ridge)
    X_test, y_test = _matrix_and_labels(X_test, y_test)
    if X_test.shape[1] != w_hat.size:
        raise InputError(f"X_test must have p = {w_hat.size} columns, "
                         f"got {X_test.shape[1]}")
    return float(np.mean(_sign(X_test @ w_hat) != y_test))


def evaluate(problem, selected) -> dict:
    """Scores of a selection on a synthetic ``Problem``: recall, and ``recovery_error``
    (regression) or ``test_error`` (classification), as plain floats."""
    out = {"recall": recall(selected, problem.support)}
    if problem.task == "regression":
        out["recovery_error"] = recovery_error(problem.X, problem.y, selected,
                                               problem.w_true)
    elif problem.task == "classification":
        out["test_error"] = classification_error(problem.X, problem.y, selected,
                                                 problem.X_test, problem.y_test)
    else:
        raise InputError(f"unknown task {problem.task!r}")
    return out
