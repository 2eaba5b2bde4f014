"""The kernels that drive a step over a block of columns, for plain and group-aware OS.

One driver per use: ``os_block`` (sequential OS, exact gradients, the default step-size
rule) and ``os_local`` (an Asy-OS worker, gradients at its view û).  Each step is OS's
own (``os_step``) or, when ``max_groups`` > 0, group-aware OS's
(``group_step.group_os_step``: the same step, the bi-level projection); the choice is a
branch per step, so the drivers are written once.
"""

from typing import NamedTuple

import numpy as np
from numba import njit, types
from numba.extending import overload

from .group_step import group_os_step
from .losses import loss_value
from .os_step import _FAST, _dot, adapt_eta, os_step, safeguard
from .step_size import ADAPTIVE, ETA, SUBSTITUTIONS


class DenseColumns(NamedTuple):
    """A dense kept set's buffers, as the drivers read and update them (c is the
    capacity; slot c is the newcomer's until a slot is vacated)."""

    cols: np.ndarray          # (c+1, n): slot k's column (the stream's dtype)
    index: np.ndarray         # (c+1,) int64: slot k's feature
    weights: np.ndarray       # (c+1,): slot k's weight
    contribution: np.ndarray  # (n,): X_S w_S


class DenseScratch(NamedTuple):
    """Work space of the drivers, reused from block to block."""

    g: np.ndarray         # (n,): dL/du
    gS: np.ndarray        # (c+1,): X_Sᵀ g, then x_jᵀ g in slot ``size``
    previous: np.ndarray  # (n,): X_S w_S before a step (``os_local``)


class GroupLimit(NamedTuple):
    """Group-aware OS's constraint: at most ``max_groups`` groups among the kept
    features; ``max_groups`` 0 is plain OS (``PLAIN``)."""

    group_of: np.ndarray | None  # (p,) int64: feature j's group id (None: plain OS)
    max_groups: int


PLAIN = GroupLimit(None, 0)


def _group_step(cols, index, weights, size, capacity, x, j, u_grad, y, loss, eta, m,
                g, gS, contribution, group_of, max_groups):
    """``group_step.group_os_step``, compiled through the overload below to nothing
    when there are no groups (``group_of`` None): the bi-level projection is most of
    the drivers' compile time, and a plain run never takes it."""
    raise NotImplementedError   # only called from compiled code


@overload(_group_step)
def _group_step_typed(cols, index, weights, size, capacity, x, j, u_grad, y, loss, eta,
                      m, g, gS, contribution, group_of, max_groups):
    if group_of is types.none:
        return lambda cols, index, weights, size, capacity, x, j, u_grad, y, loss, \
            eta, m, g, gS, contribution, group_of, max_groups: (size, 0)
    return lambda cols, index, weights, size, capacity, x, j, u_grad, y, loss, eta, \
        m, g, gS, contribution, group_of, max_groups: group_os_step(
            cols, index, weights, size, capacity, x, j, u_grad, y, loss, eta, m, g,
            gS, contribution, group_of, max_groups)


@njit(cache=True, inline="always")
def _step(kept, size, capacity, x, j, u_grad, y, loss, eta, m, scratch, groups):
    """One step; returns (size, kept features dropped: a substitution count)."""
    cols, index, weights, contribution = kept
    g, gS = scratch.g, scratch.gS
    group_of, max_groups = groups
    if max_groups > 0:
        return _group_step(cols, index, weights, size, capacity, x, j, u_grad, y,
                           loss, eta, m, g, gS, contribution, group_of, max_groups)
    size, dropped = os_step(cols, index, weights, size, capacity, x, j, u_grad, y,
                            loss, eta, m, g, gS, contribution)
    return size, 1 if dropped >= 0 and dropped != j else 0


@njit(cache=True, nogil=True, fastmath=_FAST)   # nogil: prefetch reads meanwhile
def os_block(kept, size, capacity, block, block_index, y, loss, m, step, scratch,
             groups):
    """Sequential OS over every column of ``block`` (shape (b, n), column b feature
    ``block_index[b]``) on the kept set's buffers ``kept`` (``DenseColumns``) with
    ``size`` slots in use, at most ``capacity`` kept, gradients exact (at
    u = ``kept.contribution``).

    ``step`` is the step-size state of ``asyos.core.step_size`` (slots ``ETA`` …
    ``SUBSTITUTIONS``), updated in place.  With ``adaptive`` set,
    η = shrink · coef / ν_max, ν_max being the running max of ‖x‖²/n over the columns
    seen so far, and ``shrink`` halves whenever a step raises the loss (a safeguard
    the paper does not have).  ``scratch``: ``DenseScratch``; ``groups``:
    ``GroupLimit``.  Returns the new size.
    """
    u = kept.contribution
    n = u.shape[0]
    for b in range(block.shape[0]):
        x = block[b]
        if step[ADAPTIVE] != 0.0:
            adapt_eta(step, _dot(x, x) / n)
        size, dropped = _step(kept, size, capacity, x, block_index[b], u, y, loss,
                              step[ETA], m, scratch, groups)
        step[SUBSTITUTIONS] += dropped
        if step[ADAPTIVE] != 0.0:
            safeguard(step, loss_value(loss, u, y))
    return size


@njit(cache=True, nogil=True)
def os_local(kept, size, capacity, block, block_index, u_local, y, loss, eta, m,
             scratch, groups):
    """An Asy-OS worker's steps over ``block`` from its view ``u_local``; arguments
    as ``os_block``'s, η fixed.

    Gradients at the (stale) view; after each step the worker's own change
    X_S w_S − previous is added to ``u_local`` (a worker always sees its own
    pushes).  One row of ``block`` is exactly one Algorithm 3 iteration.
    Returns the new size.
    """
    contribution, previous = kept.contribution, scratch.previous
    for b in range(block.shape[0]):
        previous[:] = contribution
        size, _ = _step(kept, size, capacity, block[b], block_index[b], u_local, y,
                        loss, eta, m, scratch, groups)
        u_local += contribution - previous
    return size
