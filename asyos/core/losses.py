"""Losses of spec §1 as compiled functions of u = Xw.

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
        """Curvature bound in u times n (spec §1 table): 1, 1, 1/4."""
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


@njit(cache=True)
def loss_value(loss, u, y):
    """L(u, y) for the code ``loss`` (spec §1)."""
    n = u.shape[0]
    total = 0.0
    if loss == 0:
        for i in range(n):
            r = u[i] - y[i]
            total += r * r
        return 0.5 * total / n
    if loss == 1:
        for i in range(n):
            h = 1.0 - y[i] * u[i]
            if h > 0.0:
                total += h * h
        return 0.5 * total / n
    for i in range(n):
        total += _log1p_exp(-y[i] * u[i])
    return total / n


@njit(cache=True)
def loss_grad(loss, u, y, out):
    """Write dL/du into ``out`` (length n) for the code ``loss`` (spec §1)."""
    n = u.shape[0]
    inv_n = 1.0 / n
    if loss == 0:
        for i in range(n):
            out[i] = (u[i] - y[i]) * inv_n
    elif loss == 1:
        for i in range(n):
            h = 1.0 - y[i] * u[i]
            out[i] = -h * y[i] * inv_n if h > 0.0 else 0.0
    else:
        for i in range(n):
            out[i] = -y[i] * _sigmoid(-y[i] * u[i]) * inv_n
    return out
