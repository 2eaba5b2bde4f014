"""The kernels that drive a step over a block of columns, for plain and group-aware OS.

One driver per use: ``os_block`` (sequential OS, exact gradients, the default step-size
rule) and ``os_local`` (an Asy-OS worker, gradients at its view û).  Each step is OS's
own (``os_step``) or, when ``max_groups`` > 0, group-aware OS's
(``group_step.group_os_step``: the same step, the bi-level projection); the choice is a
branch per step, so the drivers are written once.
"""

import numpy as np
from numba import njit

from .group_step import group_os_step
from .losses import loss_value
from .os_step import _FAST, _dot, adapt_eta, os_step, safeguard
from .step_size import ADAPTIVE, ETA, SUBSTITUTIONS

NO_GROUPS = np.zeros(0, np.int64)   # ``group_of`` of a plain kept set (max_groups 0)


@njit(cache=True, inline="always")
def _step(cols, index, weights, size, capacity, x, j, u_grad, y, loss, eta, m, g, gS,
          contribution, group_of, max_groups):
    """One step; returns (size, kept features dropped: a substitution count)."""
    if max_groups > 0:
        return group_os_step(cols, index, weights, size, capacity, x, j, u_grad, y,
                             loss, eta, m, g, gS, contribution, group_of, max_groups)
    size, dropped = os_step(cols, index, weights, size, capacity, x, j, u_grad, y,
                            loss, eta, m, g, gS, contribution)
    return size, 1 if dropped >= 0 and dropped != j else 0


@njit(cache=True, nogil=True, fastmath=_FAST)   # nogil: prefetch reads meanwhile
def os_block(cols, index, weights, size, capacity, block, block_index, u, y, loss,
             m, g, gS, step, group_of, max_groups):
    """Sequential OS over every column of ``block`` (shape (b, n)), gradients exact.

    ``step`` is the step-size state of ``asyos.core.step_size`` (slots ``ETA`` …
    ``SUBSTITUTIONS``), updated in place.  With ``adaptive`` set,
    η = shrink · coef / ν_max, ν_max being the running max of ‖x‖²/n over the columns
    seen so far, and ``shrink`` halves whenever a step raises the loss (a safeguard
    the paper does not have).  Returns the new size.
    """
    n = u.shape[0]
    for b in range(block.shape[0]):
        x = block[b]
        if step[ADAPTIVE] != 0.0:
            adapt_eta(step, _dot(x, x) / n)
        size, dropped = _step(cols, index, weights, size, capacity, x, block_index[b],
                              u, y, loss, step[ETA], m, g, gS, u, group_of, max_groups)
        step[SUBSTITUTIONS] += dropped
        if step[ADAPTIVE] != 0.0:
            safeguard(step, loss_value(loss, u, y))
    return size


@njit(cache=True, nogil=True)
def os_local(cols, index, weights, size, capacity, block, block_index, u_local, y, loss,
             eta, m, g, gS, contribution, previous, group_of, max_groups):
    """An Asy-OS worker's steps over ``block`` from its view ``u_local``.

    Gradients at the (stale) view, fixed η; after each step the worker's own change
    X_S w_S − previous is added to ``u_local`` (a worker always sees its own
    pushes).  One row of ``block`` is exactly one Algorithm 3 iteration.
    Returns the new size.
    """
    for b in range(block.shape[0]):
        previous[:] = contribution
        size, _ = _step(cols, index, weights, size, capacity, block[b], block_index[b],
                        u_local, y, loss, eta, m, g, gS, contribution, group_of,
                        max_groups)
        u_local += contribution - previous
    return size
