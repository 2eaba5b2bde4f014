"""The Online Substitution step (Yang et al., KDD 2016, Algorithm 1), compiled once.

The OS update rule is written once, in pieces that every kernel shares: ``step_weights``
(block step η/m on the kept set, step η on a revisited j), ``advance`` (plus the
newcomer, from zero), ``smallest_slot`` (the projection's drop of the smallest |w|) and
``vacate``.  ``_substitute`` composes them for OS; group-aware OS
(``core/group_step.py``) pairs ``advance`` with the bi-level projection, and the sparse
kernel (``core/sparse_step.py``) uses them on CSC columns.

``os_step`` feeds ``_substitute`` the gradient products at a given ``u_grad`` (stale in
an Asy-OS worker; the exact u in sequential OS) and recomputes X_S w_S: two
passes over the kept columns, O(n·s), each a plain loop accumulating in float64 (for
float32 columns too: half the memory), vectorised under ``_FAST``.  ``os_block`` drives ``os_step`` over a block of columns for the sequential
solver, with the default step-size rule.

Slot convention (the tie rule, which the paper leaves open; see docs/algorithms.md,
"Conventions where the papers are silent"): the kept set lives in slots 0..size-1 of a
(capacity+1, n) buffer.  A newcomer is written to slot ``size``.  When the set
overflows, the dropped slot is argmin |w| with ties resolved towards the newcomer, then
towards the lowest slot; the newcomer (slot ``capacity``) then moves into the freed
slot: an O(n) copy instead of an O(n·s) shift.
"""

from numba import njit

from .losses import loss_grad
from .step_size import COEF, ETA, LAST_LOSS, NU_MAX, SHRINK

# Reassociation lets LLVM vectorise the dot products; no flag that assumes finite values.
_FAST = {"reassoc", "contract", "nsz", "arcp"}


@njit(cache=True, fastmath=_FAST)
def _dot(a, b):
    total = 0.0
    for r in range(a.shape[0]):
        total += a[r] * b[r]
    return total


@njit(cache=True, fastmath=_FAST)
def _matvec(cols, size, v, out):
    """out[k] = x_kᵀ v for the kept slots k < size (X_Sᵀ g), accumulated in float64
    whatever the columns' type.  Plain loops over the whole C-ordered buffer: a
    BLAS call on s × n costs more than it saves, and a slice ``cols[:size]`` is typed
    as any-layout, which numba does not vectorise.  Not inlined: every kernel calls
    the same compiled loops, so the sums round alike in all of them."""
    n = cols.shape[1]
    for k in range(size):
        total = 0.0
        for r in range(n):
            total += cols[k, r] * v[r]
        out[k] = total


@njit(cache=True, fastmath=_FAST)
def _vecmat(w, cols, size, out):
    """out = Σ_{k < size} w_k x_k (X_S w_S), like ``_matvec``."""
    n = cols.shape[1]
    for r in range(n):
        out[r] = 0.0
    for k in range(size):
        wk = w[k]
        for r in range(n):
            out[r] += wk * cols[k, r]


@njit(cache=True, inline="always")
def step_weights(index, weights, size, j, gS, eta, m):
    """Algorithm 1's block step on the kept slots: η/m, or η for j itself on a
    revisit (a convention; see docs/algorithms.md, "Conventions where the papers are
    silent"); returns j's slot, or -1 when j is a newcomer.

    ``gS[k]`` = x_kᵀ g at the pre-step point.  Shared by the dense and sparse kernels.
    """
    pos = -1
    for k in range(size):
        if index[k] == j:
            pos = k
            break
    block_step = eta / m
    for k in range(size):
        weights[k] -= (eta if k == pos else block_step) * gS[k]
    return pos


@njit(cache=True, inline="always")
def smallest_slot(weights, last):
    """The slot to drop among 0..last (the projection onto ‖w‖₀ ≤ s): argmin |w|,
    ties towards slot ``last`` (the newcomer), then towards the lowest slot."""
    d = last
    smallest = abs(weights[last])
    for k in range(last):
        if abs(weights[k]) < smallest:
            smallest = abs(weights[k])
            d = k
    return d


@njit(cache=True, inline="always")
def advance(cols, index, weights, size, x, j, xg, gS, eta, m):
    """Algorithm 1's gradient steps given the gradient products: ``step_weights``, and a
    newcomer written to slot ``size`` with weight −η·x_jᵀg.  Returns the new size, or
    -1 on a revisit (nothing added, so nothing to project).  The dense kernels' step;
    OS drops by ``smallest_slot``, group-aware OS by the bi-level projection."""
    if step_weights(index, weights, size, j, gS, eta, m) >= 0:
        return -1
    for r in range(x.shape[0]):
        cols[size, r] = x[r]
    index[size] = j
    weights[size] = -eta * xg
    return size + 1


@njit(cache=True, inline="always")
def _substitute(cols, index, weights, size, capacity, x, j, xg, gS, eta, m):
    """One step of Algorithm 1 given the gradient products; returns (size, dropped).

    ``gS[k]`` = x_kᵀ g for the kept slots and ``xg`` = x_jᵀ g, all at the pre-step point.
    On a revisit j steps by η from its weight and nothing is projected.
    """
    grown = advance(cols, index, weights, size, x, j, xg, gS, eta, m)
    if grown < 0:
        return size, -1
    if grown <= capacity:
        return grown, -1
    d = smallest_slot(weights, capacity)
    dropped = index[d]
    vacate(cols, index, weights, capacity, d)
    return capacity, dropped


@njit(cache=True, inline="always")
def vacate(cols, index, weights, last, d):
    """Slot ``d`` leaves the kept set: the feature in slot ``last`` moves into it (an
    O(n) copy; for the sparse kernel ``cols`` is its (start, length) slot table) and
    slot ``last`` is cleared."""
    if d != last:
        for r in range(cols.shape[1]):
            cols[d, r] = cols[last, r]
    vacate_entry(index, weights, last, d)


@njit(cache=True, inline="always")
def vacate_entry(index, weights, last, d):
    """``vacate`` without the columns: the feature and weight of slot ``last`` move
    into slot ``d``, and slot ``last`` is cleared."""
    if d != last:
        index[d] = index[last]
        weights[d] = weights[last]
    index[last] = -1
    weights[last] = 0.0


@njit(cache=True)
def drop_to(cols, index, weights, size, limit):
    """Drop the smallest |w| (ties: the lowest slot) until at most ``limit`` are kept;
    returns the new size.  An adaptive budget that was lowered takes effect
    this way; the change reaches u_C with the next push."""
    while size > limit:
        d = 0
        for k in range(1, size):
            if abs(weights[k]) < abs(weights[d]):
                d = k
        vacate(cols, index, weights, size - 1, d)
        size -= 1
    return size


@njit(cache=True)
def shrink(cols, index, weights, size, limit, contribution):
    """``drop_to`` for the dense kept set, then X_S w_S recomputed."""
    size = drop_to(cols, index, weights, size, limit)
    recompute(weights, cols, size, contribution)
    return size


@njit(cache=True, inline="always")
def recompute(weights, cols, size, contribution):
    """contribution = X_S w_S, exactly (Algorithm 1 recomputes u at every step)."""
    _vecmat(weights, cols, size, contribution)


@njit(cache=True, inline="always")
def gradients(cols, size, x, u_grad, y, loss, g, gS):
    """g = dL/du at ``u_grad`` and gS = X_Sᵀ g; returns x_jᵀ g."""
    loss_grad(loss, u_grad, y, g)
    _matvec(cols, size, g, gS)  # X_Sᵀ g
    return _dot(x, g)


@njit(cache=True, inline="always")
def adapt_eta(step, nu):
    """The default rule (``asyos.core.step_size``): η = shrink · coef / ν_max, ν_max
    the running max of ‖x‖²/n; ``step`` is the step-size state."""
    if nu > step[NU_MAX]:
        step[NU_MAX] = nu
    if step[NU_MAX] > 0.0:
        step[ETA] = step[SHRINK] * step[COEF] / step[NU_MAX]


@njit(cache=True, inline="always")
def safeguard(step, f):
    """A safeguard the paper does not have: halve η's shrink factor whenever a step
    raised the loss."""
    if f > step[LAST_LOSS] * (1.0 + 1e-12) + 1e-15:
        step[SHRINK] *= 0.5
    step[LAST_LOSS] = f


@njit(cache=True, fastmath=_FAST)
def os_step(cols, index, weights, size, capacity, x, j, u_grad, y, loss, eta, m, g,
            gS, contribution):
    """One OS step on feature ``j`` with column ``x``; returns (new size, dropped index).

    Gradients are all taken at ``u_grad`` (the pre-step point; a stale view in Asy-OS).
    ``contribution`` receives X_S w_S after the step (it may alias ``u_grad``).
    The dropped index is -1 when nothing was dropped, ``j`` on a rejection.
    """
    xg = gradients(cols, size, x, u_grad, y, loss, g, gS)
    size, dropped = _substitute(cols, index, weights, size, capacity, x, j, xg, gS,
                                eta, m)
    recompute(weights, cols, size, contribution)
    return size, dropped
