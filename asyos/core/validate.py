"""Input checks shared by every front.  Kernels trust their input; these do not.

Each check raises ``InputError`` with a message naming the offending value and what
was expected, and is called before any state is created or changed.
"""

import math
import numbers

import numpy as np

from ..errors import InputError
from .losses import Loss


def check_labels(y, loss: Loss, n_samples: int | None = None) -> np.ndarray:
    """Labels as a float64 vector of length n; ±1 for classification losses."""
    try:
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"labels are not numeric: {exc}") from None
    if y.ndim == 2 and 1 in y.shape:
        y = y.ravel()
    if y.ndim != 1:
        raise InputError(f"labels must be a vector, got an array of shape {y.shape}")
    if y.size == 0:
        raise InputError("labels are empty")
    if n_samples is not None and y.shape[0] != n_samples:
        raise InputError(f"labels have n = {y.shape[0]} samples but the features have "
                         f"n = {n_samples}")
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise InputError(f"label {bad[0]} is NaN or inf")
    if loss.is_classification:
        wrong = np.flatnonzero((y != 1.0) & (y != -1.0))
        if wrong.size:
            raise InputError(f"loss {loss.name.lower()} needs labels in {{-1, +1}}; "
                             f"label {wrong[0]} is {y[wrong[0]]:g}")
    return np.ascontiguousarray(y)


def check_sparsity(s, n_features: int | None) -> int:
    """The budget s: an integer with 1 ≤ s ≤ p."""
    if isinstance(s, bool) or not isinstance(s, numbers.Integral):
        raise InputError(f"s must be an integer, got {s!r}")
    if s < 1:
        raise InputError(f"s must be at least 1, got {s}")
    if n_features is not None and s > n_features:
        raise InputError(f"s = {s} is larger than the number of features p = {n_features}")
    return int(s)


def check_at_least(name: str, value, minimum, *, integer: bool = False):
    """A finite number (an integer if ``integer``) with value ≥ ``minimum``."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        what = "an integer" if integer else "a number"
        raise InputError(f"{name} must be {what}, got {value!r}")
    if not (math.isfinite(value) and value >= minimum):
        raise InputError(f"{name} must be ≥ {minimum:g}, got {value!r}")
    return int(value) if integer else float(value)
