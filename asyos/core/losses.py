"""Losses as compiled functions of u = Xw: squared and squared hinge (Yang et al.,
KDD 2016, eqs. (2)-(3)) and logistic.

A loss is identified by one ``Loss`` code (an IntEnum, defined only here) so that the
compiled OS kernel can take it as a plain integer; the branch on the code sits outside
the per-sample loops.
"""

import math
from enum import IntEnum

import numpy as np
from numba import njit

from ..errors import InputError


class Loss(IntEnum):
    SQUARED = 0
    SQUARED_HINGE = 1
    LOGISTIC = 2

    @property
    def curvature(self) -> float:
        """Curvature bound in u times n: 1, 1, 1/4."""
        return 0.25 if self is Loss.LOGISTIC else 1.0

    @property
    def is_classification(self) -> bool:
        return self is not Loss.SQUARED

    @classmethod
    def parse(cls, name) -> "Loss":
        """Accept a ``Loss``, or its name (``squared``, ``squared_hinge``, ``logistic``)."""
        if isinstance(name, Loss):
            return name
        try:
            return cls[str(name).strip().upper().replace("-", "_")]
        except KeyError:
            known = ", ".join(m.name.lower() for m in cls)
            raise InputError(f"unknown loss {name!r}; expected one of: {known}") from None


# The codes as plain integers, for the compiled kernels' branches (numba reads module
# integers as constants; an IntEnum member would not compile in nopython mode).
SQUARED, SQUARED_HINGE, LOGISTIC = (int(code) for code in Loss)


def dual_loss_term(loss: Loss, r, y, C: float) -> float:
    """h(α) = −C Σ_i L*(−α_i/C) of FGM's dual (Tan et al., JMLR 2014, Lemma 1), the
    loss's conjugate at the dual point α read off r = −∂P/∂z (α = r for the squared
    loss, α_i = r_i y_i for the classification losses).  A new loss adds its
    conjugate here."""
    if loss is Loss.SQUARED:
        return float(r @ y - r @ r / (2.0 * C))
    alpha = r * y
    if loss is Loss.SQUARED_HINGE:
        return float(alpha.sum() - alpha @ alpha / (2.0 * C))
    if loss is Loss.LOGISTIC:
        q = np.clip(alpha / C, 1e-300, 1.0 - 1e-16)
        return float(-C * np.sum(q * np.log(q) + (1.0 - q) * np.log1p(-q)))
    raise NotImplementedError(f"no conjugate written for the loss {loss.name}")


@njit(cache=True, inline="always")
def _log1p_exp_from(z, e):
    """log(1 + exp(z)) without overflow, given e = exp(−|z|)."""
    if z > 0.0:
        return z + math.log1p(e)
    return math.log1p(e)


@njit(cache=True, inline="always")
def _sigmoid_from(z, e):
    """1 / (1 + exp(−z)) without overflow, given e = exp(−|z|)."""
    if z >= 0.0:
        return 1.0 / (1.0 + e)
    return e / (1.0 + e)


@njit(cache=True, inline="always")
def _log1p_exp(z):
    """log(1 + exp(z)) without overflow."""
    return _log1p_exp_from(z, math.exp(-abs(z)))


@njit(cache=True, inline="always")
def _sigmoid(z):
    """1 / (1 + exp(−z)) without overflow."""
    return _sigmoid_from(z, math.exp(-abs(z)))


@njit(cache=True, inline="always")
def loss_at(loss, u, y):
    """n · L for one sample: ½(u − y)², ½max(0, 1 − yu)², log(1 + e^(−yu)).

    The per-sample formulas are written once, here, in ``grad_at`` and ``hess_at``; the vector
    functions below and the sparse kernel (which touches only some samples) use them.
    """
    if loss == SQUARED:
        r = u - y
        return 0.5 * r * r
    if loss == SQUARED_HINGE:
        h = 1.0 - y * u
        return 0.5 * h * h if h > 0.0 else 0.0
    return _log1p_exp(-y * u)


@njit(cache=True, inline="always")
def grad_at(loss, u, y):
    """n · dL/du for one sample."""
    if loss == SQUARED:
        return u - y
    if loss == SQUARED_HINGE:
        h = 1.0 - y * u
        return -h * y if h > 0.0 else 0.0
    return -y * _sigmoid(-y * u)


@njit(cache=True, inline="always")
def hess_at(loss, u, y):
    """n · d²L/du² for one sample (squared hinge: 1 on the active margin, its
    generalised second derivative)."""
    if loss == SQUARED:
        return 1.0
    if loss == SQUARED_HINGE:
        return 1.0 if y * u < 1.0 else 0.0
    p = _sigmoid(y * u)
    return p * (1.0 - p)


@njit(cache=True, fastmath={"reassoc", "contract", "nsz", "arcp"})
def loss_value(loss, u, y):
    """L(u, y) for the code ``loss``."""
    n = u.shape[0]
    total = 0.0
    # one loop per code: the constant code lets each loop be vectorised
    if loss == SQUARED:
        for i in range(n):
            total += loss_at(SQUARED, u[i], y[i])
    elif loss == SQUARED_HINGE:
        for i in range(n):
            total += loss_at(SQUARED_HINGE, u[i], y[i])
    else:
        for i in range(n):
            total += loss_at(LOGISTIC, u[i], y[i])
    return total / n


@njit(cache=True, inline="always")
def loss_and_grad(loss, u, y, out):
    """L(u, y), with dL/du written into ``out``: one pass where both are needed.  The
    logistic loss and its gradient share one exponential, e^(−|yu|) (``loss_at`` and
    ``grad_at`` take one each; the same numbers): the fitted rule evaluates F on
    every move it tries, and there the exponentials were most of a trial."""
    n = u.shape[0]
    inv_n = 1.0 / n
    total = 0.0
    if loss == LOGISTIC:
        for i in range(n):
            z = -y[i] * u[i]
            e = math.exp(-abs(z))
            total += _log1p_exp_from(z, e)
            out[i] = -y[i] * _sigmoid_from(z, e) * inv_n
        return total * inv_n
    for i in range(n):
        total += loss_at(loss, u[i], y[i])
        out[i] = grad_at(loss, u[i], y[i]) * inv_n
    return total * inv_n


@njit(cache=True)
def loss_grad(loss, u, y, out):
    """Write dL/du into ``out`` (length n) for the code ``loss``."""
    n = u.shape[0]
    inv_n = 1.0 / n
    if loss == SQUARED:
        for i in range(n):
            out[i] = grad_at(SQUARED, u[i], y[i]) * inv_n
    elif loss == SQUARED_HINGE:
        for i in range(n):
            out[i] = grad_at(SQUARED_HINGE, u[i], y[i]) * inv_n
    else:
        for i in range(n):
            out[i] = grad_at(LOGISTIC, u[i], y[i]) * inv_n
    return out
