"""What every baseline shares: input checks and the selection rule of spec §5.4.

One place for them so that every method refuses the same bad inputs with the same
messages, and cuts its result to s features the same way.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from ..core.losses import Loss
from ..errors import InputError
from ..streams import FeatureStream
from . import Selection

__all__ = ["check_labels", "check_lam", "check_problem", "check_s",
           "check_stream_problem", "selection", "soft_threshold", "top_s"]


def top_s(v: np.ndarray, s: int) -> np.ndarray:
    """Indices of the s largest |v_i|, ties to the lower index (stable sort)."""
    return np.argsort(-np.abs(v), kind="stable")[:s]


def soft_threshold(z, t):
    """soft(z, t) = sign(z)·max(|z| − t, 0), the prox of t‖·‖₁ (spec §6.2)."""
    return np.sign(z) * np.maximum(np.abs(z) - t, 0.0)


def check_lam(lam) -> float:
    """λ as a float, or InputError: a finite number ≥ 0."""
    if isinstance(lam, bool) or not isinstance(lam, Real) or not (
            math.isfinite(lam) and lam >= 0):
        raise InputError(f"lam must be a finite number >= 0, got {lam!r}")
    return float(lam)


def check_s(s, p: int) -> int:
    if isinstance(s, bool) or not isinstance(s, Integral) or not 1 <= s <= p:
        raise InputError(f"s must be an integer in 1..p = {p}, got {s!r}")
    return int(s)


def check_labels(y, n: int, loss: Loss) -> np.ndarray:
    """y as a contiguous float64 vector of length n; ±1 for a classification loss."""
    y = np.ascontiguousarray(y, dtype=np.float64)
    if y.ndim != 1 or y.shape[0] != n:
        raise InputError(f"y must have length n = {n}, got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise InputError("X and y must be finite (no NaN or inf)")
    if loss.is_classification and not np.all(np.abs(y) == 1.0):
        raise InputError(f"labels must be -1 or +1 for the {loss.name.lower()} loss")
    return y


def check_problem(X, y, s, loss) -> tuple[np.ndarray, np.ndarray, int, Loss]:
    """(X, y, s, loss) of a batch method, checked before any work is done."""
    loss = Loss.parse(loss)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise InputError(f"X must be a nonempty 2-D array, got shape {X.shape}")
    n, p = X.shape
    if not np.all(np.isfinite(X)):
        raise InputError("X and y must be finite (no NaN or inf)")
    y = check_labels(y, n, loss)
    return X, y, check_s(s, p), loss


def check_stream_problem(stream: FeatureStream, y, s,
                         loss) -> tuple[np.ndarray, int, Loss]:
    """(y, s, loss) of an online method; the stream checks its columns as it reads
    them (a NaN column raises InputError naming the feature)."""
    loss = Loss.parse(loss)
    y = check_labels(y, stream.n_samples, loss)
    return y, check_s(s, stream.n_features), loss


def selection(indices, weights, s: int, name: str, n_iter: int,
              peak_active: int | None = None) -> Selection:
    """The Selection of spec §5.4: the nonzeros of (indices, weights), cut to the top
    s by |w| (ties to the lower index), sorted by index with aligned weights."""
    indices = np.asarray(indices, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    order = np.argsort(indices, kind="stable")
    indices, weights = indices[order], weights[order]
    nonzero = weights != 0.0
    indices, weights = indices[nonzero], weights[nonzero]
    if indices.size > s:
        keep = np.sort(top_s(weights, s))
        indices, weights = indices[keep], weights[keep]
    return Selection(selected=indices.copy(), weights=weights.copy(),
                     n_iter=int(n_iter), name=name, peak_active=peak_active)
