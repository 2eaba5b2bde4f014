"""Input checks shared by every system and front.  Kernels trust their input; these
do not.

One vocabulary: ``check_labels(y, loss, n_samples)`` (strict: ±1 for a classification
loss), ``binary_labels(y, n_samples)`` (any two values mapped to ±1, for the fronts
that accept a user's labels: the CLI and the estimators), ``check_sparsity(s, p)``,
``check_at_least(name, value, minimum)``, ``check_int(name, value, low, high)``,
``check_positive(name, value)``, ``check_choice(name, value, choices)``, and
for a batch method ``check_problem(X, y, s, loss)``.  Each raises ``InputError`` with
a message naming the offending value and what was expected, and is called before any
state is created or changed.
"""

import math
import numbers
import warnings

import numpy as np

from ..errors import DegenerateWarning, InputError
from .losses import Loss


def _label_vector(y: np.ndarray, n_samples: int | None) -> np.ndarray:
    """``y`` as a vector of n >= 2 labels (a column or row vector is flattened)."""
    if y.ndim == 2 and 1 in y.shape:
        y = y.ravel()
    if y.ndim != 1:
        raise InputError(f"labels must be a vector, got an array of shape {y.shape}")
    if y.size == 0:
        raise InputError("labels are empty")
    if y.size == 1:   # one sample: any feature fits it exactly, the selection is noise
        raise InputError("one sample is too few for a fit: need n >= 2 samples")
    if n_samples is not None and y.shape[0] != n_samples:
        raise InputError(f"labels have n = {y.shape[0]} samples but the features have "
                         f"n = {n_samples}")
    return y


def check_labels(y, loss: Loss, n_samples: int | None = None) -> np.ndarray:
    """Labels as a float64 vector of length n; ±1 for classification losses."""
    try:
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"labels are not numeric: {exc}") from None
    y = _label_vector(y, n_samples)
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise InputError(f"label {bad[0]} is NaN or inf")
    if loss.is_classification:
        wrong = np.flatnonzero((y != 1.0) & (y != -1.0))
        if wrong.size:
            raise InputError(f"loss {loss.name.lower()} needs labels in {{-1, +1}}; "
                             f"label {wrong[0]} is {y[wrong[0]]:g}")
    return np.ascontiguousarray(y)


def binary_labels(y, n_samples: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(classes, labels as ±1) for labels of exactly two distinct values: −1 for the
    smaller, ``classes[0]``, +1 for the larger, ``classes[1]``.

    Any two values will do ({0, 1}, {1, 2}, {-1, +1}, two strings); numeric labels
    must be finite.  One value, or more than two, is an InputError naming how many
    there are and the first few.  ``check_labels`` stays strict (±1) for the library's
    solvers; the fronts that take a user's labels (the CLI, the estimators) map them
    here first and record ``classes`` so that the user knows which one is +1.
    """
    y = _label_vector(np.asarray(y), n_samples)
    if y.dtype.kind == "c":
        raise InputError("labels are complex numbers")
    if y.dtype.kind in "iuf":
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size:
            raise InputError(f"label {bad[0]} is NaN or inf")
    try:
        classes, signs = np.unique(y, return_inverse=True)
    except TypeError as exc:   # object labels that cannot be ordered
        raise InputError(f"labels cannot be ordered: {exc}") from None
    if classes.size != 2:
        shown = ", ".join(f"{v:g}" if isinstance(v, float) else repr(v)
                          if isinstance(v, str) else str(v)
                          for v in classes[:5].tolist())
        raise InputError(f"a classification loss needs labels of exactly 2 distinct "
                         f"values (mapped to -1 and +1), got {classes.size}: {shown}"
                         + (", ..." if classes.size > 5 else ""))
    return classes, np.where(signs.ravel() == 1, 1.0, -1.0)


def warn_if_interpolating(s: int, n_samples: int) -> None:
    """Say so when s ≥ n: any n features then fit n labels exactly, the loss reaches
    0, and which features are kept (often fewer than s) says little about the data."""
    if s >= n_samples:
        warnings.warn(f"s = {s} is not below the n = {n_samples} samples: the fit can "
                      "interpolate the labels, and then which features are kept (as "
                      "few as n) says little; choose s < n", DegenerateWarning,
                      stacklevel=3)


def check_sparsity(s, n_features: int | None) -> int:
    """The budget s: an integer with 1 ≤ s ≤ p."""
    if isinstance(s, bool) or not isinstance(s, numbers.Integral):
        raise InputError(f"s must be an integer, got {s!r}")
    if s < 1:
        raise InputError(f"s must be at least 1, got {s}")
    if n_features is not None and s > n_features:
        raise InputError(f"s must be at most the number of features p = {n_features}, "
                         f"got {s}")
    return int(s)


def check_int(name: str, value, low: int, high: int | None = None) -> int:
    """``value`` as an int in [low, high), or InputError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value >= high):
        bound = f"in [{low}, {high})" if high is not None else f">= {low}"
        raise InputError(f"{name} must be {bound}, got {value}")
    return int(value)


def check_positive(name: str, value) -> float:
    """A finite number > 0 (a tolerance, a penalty, a regularisation constant)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(value) and value > 0):
        raise InputError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_choice(name: str, value, choices):
    """``value`` if it is one of ``choices``, or InputError listing them."""
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def check_at_least(name: str, value, minimum, *, integer: bool = False):
    """A finite number (an integer if ``integer``) with value ≥ ``minimum``."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        what = "an integer" if integer else "a number"
        raise InputError(f"{name} must be {what}, got {value!r}")
    if not (math.isfinite(value) and value >= minimum):
        raise InputError(f"{name} must be ≥ {minimum:g}, got {value!r}")
    return int(value) if integer else float(value)


def check_problem(X, y, s, loss) -> tuple[np.ndarray, np.ndarray, int, Loss]:
    """(X, y, s, loss) of a batch method (all p columns in memory), checked before any
    work is done."""
    loss = Loss.parse(loss)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise InputError(f"X must be a nonempty 2-D array, got shape {X.shape}")
    n, p = X.shape
    if not np.all(np.isfinite(X)):
        raise InputError("X must be finite (no NaN or inf)")
    return X, check_labels(y, loss, n), check_sparsity(s, p), loss


def check_stream_problem(stream, y, s, loss) -> tuple[np.ndarray, int, Loss]:
    """(y, s, loss) of an online method reading a feature stream; the stream checks its
    columns as it reads them (a NaN column raises InputError naming the feature)."""
    loss = Loss.parse(loss)
    y = check_labels(y, loss, stream.n_samples)
    return y, check_sparsity(s, stream.n_features), loss
