"""Losses as compiled functions of u = Xw: squared and squared hinge (Yang et al.,
KDD 2016, eqs. (2)-(3)) and logistic.

A loss is identified by one ``Loss`` code (an IntEnum, defined only here) so that the
compiled OS kernel can take it as a plain integer; the branch on the code sits outside
the per-sample loops.
"""

import math
from enum import IntEnum

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


@njit(cache=True, inline="always")
def _log1p_exp(z):
    """log(1 + exp(z)) without overflow."""
    if z > 0.0:
        return z + math.log1p(math.exp(-z))
    return math.log1p(math.exp(z))


@njit(cache=True, inline="always")
def _sigmoid(z):
    """1 / (1 + exp(-z)) without overflow."""
    if z >= 0.0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@njit(cache=True, inline="always")
def loss_at(loss, u, y):
    """n · L for one sample: ½(u − y)², ½max(0, 1 − yu)², log(1 + e^(−yu)).

    The per-sample formulas are written once, here, in ``grad_at`` and ``hess_at``; the vector
    functions below and the sparse kernel (which touches only some samples) use them.
    """
    if loss == 0:
        r = u - y
        return 0.5 * r * r
    if loss == 1:
        h = 1.0 - y * u
        return 0.5 * h * h if h > 0.0 else 0.0
    return _log1p_exp(-y * u)


@njit(cache=True, inline="always")
def grad_at(loss, u, y):
    """n · dL/du for one sample."""
    if loss == 0:
        return u - y
    if loss == 1:
        h = 1.0 - y * u
        return -h * y if h > 0.0 else 0.0
    return -y * _sigmoid(-y * u)


@njit(cache=True, inline="always")
def hess_at(loss, u, y):
    """n · d²L/du² for one sample (squared hinge: 1 on the active margin, its
    generalised second derivative)."""
    if loss == 0:
        return 1.0
    if loss == 1:
        return 1.0 if y * u < 1.0 else 0.0
    p = _sigmoid(y * u)
    return p * (1.0 - p)


@njit(cache=True, fastmath={"reassoc", "contract", "nsz", "arcp"})
def loss_value(loss, u, y):
    """L(u, y) for the code ``loss``."""
    n = u.shape[0]
    total = 0.0
    # one loop per code: the constant code lets each loop be vectorised
    if loss == 0:
        for i in range(n):
            total += loss_at(0, u[i], y[i])
    elif loss == 1:
        for i in range(n):
            total += loss_at(1, u[i], y[i])
    else:
        for i in range(n):
            total += loss_at(2, u[i], y[i])
    return total / n


@njit(cache=True, inline="always")
def loss_and_grad(loss, u, y, out):
    """L(u, y), with dL/du written into ``out``: one pass where both are needed."""
    n = u.shape[0]
    inv_n = 1.0 / n
    total = 0.0
    for i in range(n):
        total += loss_at(loss, u[i], y[i])
        out[i] = grad_at(loss, u[i], y[i]) * inv_n
    return total * inv_n


@njit(cache=True)
def loss_grad(loss, u, y, out):
    """Write dL/du into ``out`` (length n) for the code ``loss``."""
    n = u.shape[0]
    inv_n = 1.0 / n
    if loss == 0:
        for i in range(n):
            out[i] = grad_at(0, u[i], y[i]) * inv_n
    elif loss == 1:
        for i in range(n):
            out[i] = grad_at(1, u[i], y[i]) * inv_n
    else:
        for i in range(n):
            out[i] = grad_at(2, u[i], y[i]) * inv_n
    return out
