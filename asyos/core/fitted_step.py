"""The fitted substitution rule: an arrival of OS that compares like with like.

The paper's rule (Yang et al., KDD 2016, Algorithm 1) gives the newcomer one gradient
step from zero and drops the smallest |w|.  A newcomer's weight after one step is far
below its fitted value, so once the kept set has settled almost no newcomer can beat
the smallest kept weight, and the kept set freezes (docs/algorithms.md, "The fitted
substitution rule", has the measurements).  This rule instead, on every arrival of a
feature j outside the kept set S, with B = S ∪ {j}:

1. takes one Newton step of the ridge-regularised objective
   F(w) = L(X_B w_B) + (λ/2)‖w_B‖² on B, using the curvature H_B = X_Bᵀ D X_B + λI
   (D the per-sample second derivative of the loss).  The newcomer's weight is then
   its fitted weight given S, accounting for its correlation with S (the Schur
   complement σ = x_jᵀDx_j + λ − bᵀ H_S⁻¹ b, b = X_Sᵀ D x_j);
2. drops the coordinate of B whose removal costs the least objective under the
   quadratic model, w_k² / (2 [H_B⁻¹]_kk) (the optimal-brain-surgeon estimate; exact for
   the squared loss), re-optimising the others in the same model;
3. keeps the move only if F really fell (the model is exact for the squared loss, an
   approximation for the others).

When the newcomer is the cheapest to drop, the step is the Newton step on S alone; a
revisit of a kept feature is the same.  Memory: the kept columns (O(n·s)), H_S⁻¹
(O(s²)) and a few n-vectors.  An arrival costs O(n·s + s²): one pass over the kept
columns for X_Sᵀg and X_SᵀDx_j, one more to recompute X_S w_S when the weights change;
a swap updates H_S⁻¹ by a rank-one growth and downdate, O(s²).  While S and D stay
put, X_SᵀDx_j and H_S⁻¹X_SᵀDx_j of a run of arrivals are two matrix products
(``_batched``): the same flops, several times faster than a pass per arrival.  The
curvature D is frozen between refreshes (``refresh``: O(n·s² + s³)), which are due
when λ changes, at the start of each epoch, and for the classification losses after every
``refresh_every`` swaps or a rejected move.  Under the squared hinge the frozen D is
wrong on every sample that crossed the margin since, so a Newton step on S alone is
sized there by minimising F over it and the S-step before it (``size_s_step``).  With
groups (at most ``max_groups``), a
newcomer of a new group when the group budget is full can only displace a whole kept
group (``_drop_a_group``).  In an Asy-OS worker the moves are damped
(``fitted_local``'s ``damping``; ``FittedKeptSet.run_local`` sets it).
"""

from typing import NamedTuple

import numpy as np
from numba import njit, types
from numba.extending import overload, register_jitable

from .losses import SQUARED, SQUARED_HINGE, grad_at, hess_at, loss_and_grad
from .os_step import _FAST, _dot, vacate, vacate_entry
from .spd import spd_inverse, spd_solve

# How the fitted rule compiles (a first run waits for it: docs/benchmarks.md, "First
# run").  The arrival, the largest piece, is inlined into the kernels that loop over
# arrivals: as a kernel of its own it was compiled to machine code twice, alone and
# inside its caller (the sparse rule writes its larger arrival into its one kernel,
# ``sparse_fitted_run``: numba's inlining copies the IR it inlines).  Its helpers
# are kernels of their own, cached (a sparse or Asy-OS kernel loads those a
# sequential run compiled) and without a Python or C wrapper
# (only kernels call them): inlined as numba IR, a helper is copied into every caller.
# Division by zero is IEEE's (``error_model="numpy"``): the kernels guard their
# pivots, and Python's error model compiles an exception path into every division.
# The helpers the fast-math arrival inlined before keep ``fastmath``, so the sums
# round as they did.
_PLAIN_KERNEL = dict(cache=True, error_model="numpy")
_KERNEL = dict(_PLAIN_KERNEL, fastmath=_FAST)
_PLAIN_HELPER = dict(_PLAIN_KERNEL, no_cpython_wrapper=True, no_cfunc_wrapper=True)
_HELPER = dict(_PLAIN_HELPER, fastmath=_FAST)

# ``FittedState.info``: the fitted rule's scalars, one record (a structured array of
# length 1 that the kernels read and write by name, as numba compiles and caches it).
INFO = np.dtype([
    ("ridge", np.float64),           # λ relative to the largest ‖x‖²/n seen
    ("lam", np.float64),             # λ in force
    ("nu", np.float64),              # the running max ‖x‖²/n (inf: overflowing data)
    ("refresh_due", np.bool_),       # D and H_S⁻¹ are to be recomputed (``refresh``)
    ("arrivals", np.int64),          # arrivals since the last refresh
    ("swaps", np.int64),             # swaps since then ...
    ("refresh_every", np.int64),     # ... and between refreshes (classification)
    ("objective", np.float64),       # F at u ...
    ("objective_current", np.bool_),  # ... and whether it (and ``g``) are current
    ("on_s_current", np.bool_),      # ``gS``, ``v`` and ``gain`` current (u, w_S and
    ("gain", np.float64),            # H_S⁻¹ unchanged): the S-step's predicted gain
    ("s_step_refused", np.bool_),    # ... and F refused that step (``refused``)
    ("trials", np.int64),            # moves whose F was evaluated (tests count them)
    ("max_groups", np.int64),        # the group budget (0: no groups)
    ("batch_valid", np.bool_),       # ``products`` still hold X_SᵀDx for the block's
    #                                  next arrivals (neither S nor D changed since)
    ("remembered", np.bool_),        # ``last_du``/``last_dw`` hold the last move, an
    ("last_shift", np.float64),      # S-step (its intercept's part here), and
])                                   # neither S, D nor the view changed since
# An S-only Newton step whose predicted gain is below this fraction of F is skipped:
# it would cost passes over the kept columns and an O(s²) solve for nothing
# measurable.  At 1e-9, S-steps gaining under 1e-7 of F were 43 % of all trials at
# k = 300 on man pages (docs/benchmarks.md, "Negligible S-steps").
NEGLIGIBLE = 1e-7
# ``size_s_step``: at most this many Newton iterations on F over an S-step's
# coefficients, which stop once they move by less than this fraction of themselves;
# a step along one direction is kept within [``SHORTEST_STEP``, 1].
LENGTH_ITERATIONS = 4
LENGTH_TOLERANCE = 1e-3
SHORTEST_STEP = 1.0 / 64
# The most arrivals whose products X_SᵀDx_j are computed together (one matrix product,
# several times faster than one pass over the kept columns per arrival).
BATCH_ROWS = 64


class FittedState(NamedTuple):
    """What the fitted rule holds besides the kept set: O(n + s²) floats."""

    inv: np.ndarray     # (c+1, c+1): H_S⁻¹ on slots 0..size-1
    curv: np.ndarray    # (n,): D/n at the last refresh
    g: np.ndarray       # (n,): dL/du at u
    g_trial: np.ndarray  # (n,): dL/du after the move tried
    hx: np.ndarray      # (n,): D x_j
    fresh: np.ndarray   # (n,): X_B w_B of the move tried
    trial: np.ndarray   # (n,): u after the move tried
    gS: np.ndarray      # (c+1,): X_Sᵀ g + λ w_S
    bS: np.ndarray      # (c+1,): X_Sᵀ D x_j
    a: np.ndarray       # (c+1,): H_S⁻¹ b
    v: np.ndarray       # (c+1,): H_S⁻¹ gS (the Newton step on S)
    w_new: np.ndarray   # (c+1,): the weights of the move tried
    drop: np.ndarray    # (c+1,) bool: the slots the move tried drops
    products: np.ndarray  # (BATCH_ROWS, c+1): b = X_SᵀDx for a run of arrivals
    solved: np.ndarray  # (BATCH_ROWS, c+1): H_S⁻¹b for the same arrivals
    last_du: np.ndarray  # (n,): the last S-step's change of u ...
    last_dw: np.ndarray  # (c+1,): ... and of w_S (``INFO``'s ``remembered``)
    group_of: np.ndarray | None  # (p,) int64 group ids; None: no groups (and no
    #                              group code compiled: ``_group_swap``)
    info: np.ndarray    # (1,) ``INFO``: the scalars


def fitted_state(n_samples: int, capacity: int, ridge: float,
                 group_of: np.ndarray | None = None, max_groups: int = 0) -> FittedState:
    """An empty state for a kept set of ``capacity`` over ``n_samples``; λ is
    ``ridge`` times the largest ‖x‖²/n seen.  ``group_of``/``max_groups``: at most
    that many groups kept (group-aware OS), feature j in group ``group_of[j]``."""
    c = capacity + 1
    info = np.zeros(1, INFO)
    info["ridge"], info["refresh_due"] = ridge, True
    info["refresh_every"] = max(4, capacity // 4)
    info["max_groups"] = max_groups
    groups = None if group_of is None else \
        np.ascontiguousarray(group_of, dtype=np.int64)
    return FittedState(np.zeros((c, c)), *(np.zeros(n_samples) for _ in range(6)),
                       *(np.zeros(c) for _ in range(5)), np.zeros(c, np.bool_),
                       np.zeros((BATCH_ROWS, c)), np.zeros((BATCH_ROWS, c)),
                       np.zeros(n_samples), np.zeros(c), groups, info)


def _as_float64(a):
    """``a`` itself when it is float64 (no copy), else a float64 copy: np.dot wants
    both operands of one type.  Compiled through the overload below."""
    return a if a.dtype == np.float64 else a.astype(np.float64)


@overload(_as_float64)
def _as_float64_typed(a):
    if a.dtype == types.float64:
        return lambda a: a
    return lambda a: a.astype(np.float64)


@njit(**_KERNEL)
def refactor(cols, size, st):
    """H_S⁻¹ from scratch with the stored curvature: O(n·s² + s³).  Columns whose
    products overflow mark the scale as overflowing (``nu`` = inf): the caller refuses
    the data (``step_size.check_scale``)."""
    if size > 0:
        n = cols.shape[1]
        scaled = np.empty((size, n))
        for i in range(size):
            for r in range(n):
                scaled[i, r] = st.curv[r] * cols[i, r]
        full = np.dot(scaled, _as_float64(cols[:size]).T)   # X_S D X_Sᵀ
        H = np.empty((size, size))
        for i in range(size):   # + λI, symmetric to the last bit
            for l in range(i + 1):
                H[i, l] = full[i, l]
                H[l, i] = full[i, l]
            H[i, i] += st.info[0].lam
            if not np.isfinite(H[i, i]):
                st.info[0].nu = np.inf
                return
        spd_inverse(H, size, st.inv)
    st.info[0].arrivals = 0
    st.info[0].swaps = 0


@register_jitable(**_PLAIN_HELPER)
def refresh(cols, size, u, y, loss, st):
    """The curvature at ``u``, then ``refactor``."""
    n = u.shape[0]
    for r in range(n):
        st.curv[r] = hess_at(loss, u[r], y[r]) / n
    refactor(cols, size, st)
    st.info[0].refresh_due = False
    st.info[0].remembered = False
    st.info[0].on_s_current = False
    st.info[0].batch_valid = False


@register_jitable(**_HELPER)
def _grow(inv, k, a, sigma):
    """H⁻¹ of S ∪ {newcomer in slot k} from H_S⁻¹ (block inversion)."""
    for i in range(k):
        for l in range(k):
            inv[i, l] += a[i] * a[l] / sigma
        inv[i, k] = -a[i] / sigma
        inv[k, i] = -a[i] / sigma
    inv[k, k] = 1.0 / sigma


@register_jitable(**_HELPER)
def _remove(inv, last, d):
    """H⁻¹ of slots 0..last without slot d, with slot ``last`` moved into d (as
    ``vacate`` moves the columns)."""
    pivot = inv[d, d]
    for i in range(last + 1):
        if i != d:
            f = inv[i, d] / pivot
            for l in range(last + 1):
                if l != d:
                    inv[i, l] -= f * inv[d, l]
    if d != last:
        for l in range(last + 1):
            inv[d, l] = inv[last, l]
        for i in range(last + 1):
            inv[i, d] = inv[i, last]
    for l in range(last + 1):
        inv[last, l] = 0.0
        inv[l, last] = 0.0


@register_jitable(**_HELPER)
def _objective(loss, u, y, weights, k, lam, g):
    """F = L(u) + (λ/2)‖w‖², with dL/du written into ``g``."""
    total = 0.0
    for l in range(k):
        total += weights[l] * weights[l]
    return loss_and_grad(loss, u, y, g) + 0.5 * lam * total


def _group_swap(group_of, index, k, j, newcomer_cost, sigma, st):
    """Group-aware OS's part of a move: (whether j's group needs a kept group to
    leave, whether one does: ``_needs_a_group``, ``_drop_a_group``).  Compiled
    through the overload below, to nothing when there are no groups (``group_of``
    None): the group code is a fifth of the arrival kernel's compile time."""
    raise NotImplementedError   # only called from compiled code


@overload(_group_swap)
def _group_swap_typed(group_of, index, k, j, newcomer_cost, sigma, st):
    if isinstance(group_of, types.NoneType):
        return lambda group_of, index, k, j, newcomer_cost, sigma, st: (False, False)

    def swap(group_of, index, k, j, newcomer_cost, sigma, st):
        if not _needs_a_group(index, k, j, st):
            return False, False
        return True, _drop_a_group(index, k, newcomer_cost, sigma, st)
    return swap


def ungrouped(group_of, info):
    """Whether no group budget binds (``_group_swap`` then never swaps a group):
    compiled to True when there are no groups."""
    raise NotImplementedError   # only called from compiled code


@overload(ungrouped)
def _ungrouped_typed(group_of, info):
    if isinstance(group_of, types.NoneType):
        return lambda group_of, info: True
    return lambda group_of, info: info.max_groups <= 0


@register_jitable(**_PLAIN_HELPER)
def _needs_a_group(index, k, j, st):
    """Group-aware OS: j's group is not kept and ``max_groups`` groups are, so j can
    enter only if a whole kept group leaves."""
    limit = st.info[0].max_groups
    if limit <= 0:
        return False
    group = st.group_of[j]
    groups = 0
    for l in range(k):
        g = st.group_of[index[l]]
        if g == group:
            return False
        first = True
        for m in range(l):
            if st.group_of[index[m]] == g:
                first = False
                break
        if first:
            groups += 1
    return groups >= limit


@register_jitable(**_PLAIN_HELPER)
def _group_block(index, k, group, sigma, st, slots):
    """Group ``group``'s kept slots (into ``slots``), [H_B⁻¹]_GG and w_G: the pieces
    of its removal cost.  Returns (count, block, w_G)."""
    m = 0
    for l in range(k):
        if st.group_of[index[l]] == group:
            slots[m] = l
            m += 1
    block = np.empty((m, m))
    w_g = np.empty(m)
    for r in range(m):
        w_g[r] = st.w_new[slots[r]]
        for c in range(m):
            block[r, c] = st.inv[slots[r], slots[c]] + \
                st.a[slots[r]] * st.a[slots[c]] / sigma
    return m, block, w_g


@njit(**_PLAIN_KERNEL)
def _drop_a_group(index, k, newcomer_cost, sigma, st):
    """The kept group whose removal costs least in the model,
    ½ w_Gᵀ([H_B⁻¹]_GG)⁻¹ w_G, if it costs less than rejecting the newcomer: its slots
    are marked in ``st.drop`` and ``st.w_new`` re-optimised without them (the block
    form of the single drop).  Returns whether a group goes."""
    slots = np.empty(k, np.int64)
    best, chosen = newcomer_cost, -1
    for l in range(k):
        group = st.group_of[index[l]]
        m, block, w_g = _group_block(index, k, group, sigma, st, slots)
        if slots[0] != l:   # each group once, at its first slot
            continue
        cost = 0.5 * _dot(w_g, spd_solve(block, m, w_g))
        if cost < best * (1.0 - 1e-9):
            best, chosen = cost, group
    if chosen < 0:
        return False
    m, block, w_g = _group_block(index, k, chosen, sigma, st, slots)
    z = spd_solve(block, m, w_g)
    for l in range(k):
        delta = 0.0
        for r in range(m):
            delta += (st.inv[l, slots[r]] + st.a[l] * st.a[slots[r]] / sigma) * z[r]
        st.w_new[l] -= delta
    for r in range(m):
        st.w_new[k] += st.a[slots[r]] / sigma * z[r]
        st.w_new[slots[r]] = 0.0
        st.drop[slots[r]] = True
    return True


@register_jitable(**_HELPER)
def _see_scale(info, nu):
    """A column of ‖x‖²/n = ``nu`` arrives: a new largest one moves λ, which voids
    H_S⁻¹ and F."""
    if nu > info.nu:
        info.nu = nu
        info.lam = info.ridge * nu
        info.refresh_due = True
        info.objective_current = False


@register_jitable(**_HELPER)
def apply_inverse(inv, k, rhs, out):
    """out = H_S⁻¹rhs from the kept ``inv`` (symmetric, k × k); returns rhsᵀH_S⁻¹rhs."""
    form = 0.0
    for i in range(k):
        total = 0.0
        for l in range(k):
            total += inv[i, l] * rhs[l]
        out[i] = total
        form += total * rhs[i]
    return form


@register_jitable(**_HELPER)
def _newton_on_s(inv, k, gS, v):
    """v = H_S⁻¹gS (the Newton step on S) into ``v``; returns its predicted gain
    ½ gSᵀH_S⁻¹gS."""
    return 0.5 * apply_inverse(inv, k, gS, v)


@register_jitable(**_HELPER)
def _propose(index, weights, k, capacity, j, pos, xg, c, gain, damping, st):
    """The move an arrival proposes, from the products of the arrival (``st.gS``,
    ``st.bS``, ``st.a`` = H_S⁻¹b, ``st.v`` = H_S⁻¹gS, all current), the newcomer's
    x_jᵀg (``xg``) and c = x_jᵀDx_j + λ: the weights of B in ``st.w_new``, the slots
    it drops in ``st.drop``.  The same for dense and sparse columns (only where the
    products come from differs).  ``gain`` is the S-step's predicted gain.
    Returns (grows, swap, σ, gain scaled by ``damping``)."""
    inv, w_new, drop = st.inv, st.w_new, st.drop
    _step_on_s(weights, k, st.v, w_new)
    drop[:] = False
    grows, swap, sigma = False, False, 1.0
    if pos < 0:
        ba, ag = 0.0, 0.0
        for l in range(k):
            ba += st.bS[l] * st.a[l]
            ag += st.a[l] * st.gS[l]
        sigma = c - ba
        if sigma > 1e-9 * c:   # else x_j lies in the span of S: nothing to add
            dj = (ag - xg) / sigma
            for l in range(k):
                w_new[l] -= st.a[l] * dj
            w_new[k] = dj
            grouped, swap = _group_swap(st.group_of, index, k, j,
                                        0.5 * sigma * dj * dj, sigma, st)
            if grouped:
                pass
            elif k < capacity:
                grows = True
            else:
                d, best = k, 0.5 * sigma * dj * dj
                for l in range(k):
                    cost = 0.5 * w_new[l] * w_new[l] / (inv[l, l] +
                                                       st.a[l] * st.a[l] / sigma)
                    if cost < best * (1.0 - 1e-9):
                        d, best = l, cost
                if d < k:   # re-optimise B without slot d, in the same model
                    f = w_new[d] / (inv[d, d] + st.a[d] * st.a[d] / sigma)
                    for l in range(k):
                        w_new[l] -= f * (inv[l, d] + st.a[l] * st.a[d] / sigma)
                    w_new[k] += f * st.a[d] / sigma
                    w_new[d] = 0.0
                    drop[d] = swap = True
            if not (grows or swap):   # the newcomer costs least: the Newton step on S
                _step_on_s(weights, k, st.v, w_new)
    return grows, swap, sigma, _damped(weights, k, damping, gain, w_new, drop)


@register_jitable(**_HELPER)
def _step_on_s(weights, k, v, w_new):
    """The Newton step on S alone, w − v, into ``w_new`` (the newcomer's weight 0).
    These small helpers take the arrays they use, not ``FittedState``: a call takes a
    reference to every array it is passed, an atomic operation each, per arrival."""
    for l in range(k):
        w_new[l] = weights[l] - v[l]
    w_new[k] = 0.0


@register_jitable(**_HELPER)
def _damped(weights, k, damping, gain, w_new, drop):
    """The move in ``w_new`` shortened by ``damping`` (an Asy-OS worker's; the dropped
    slots, ``drop``, stay at 0); returns the predicted ``gain`` scaled the same way."""
    if damping < 1.0:
        for l in range(k):
            if not drop[l]:
                w_new[l] = weights[l] + damping * (w_new[l] - weights[l])
        w_new[k] *= damping
        gain *= damping
    return gain


@register_jitable(**_HELPER)
def keep_s(weights, k, damping, gain, v, w_new, drop):
    """The proposal of an arrival that makes no one leave and cannot grow the kept set
    (``_propose``'s last branch, reached without its products): the Newton step on S
    (``v`` = H_S⁻¹gS), damped, into ``w_new``; nothing dropped.  Returns the gain
    scaled by ``damping``."""
    _step_on_s(weights, k, v, w_new)
    drop[:] = False
    return _damped(weights, k, damping, gain, w_new, drop)


@register_jitable(**_HELPER)
def size_s_step(loss, u, trial, y, lam, weights, w_new, k, last_du, last_dw,
                remembered):
    """The coefficients (α, β) of the Newton step on S alone (u → ``trial``, w →
    ``w_new``) and of the S-step before it (``last_du``, ``last_dw``; β = 0 unless
    ``remembered``) that minimise F over u + α·(trial − u) + β·Δu_last, by Newton's
    method from (1, 0); (1, 0) for the other losses.

    Between refreshes the squared hinge's frozen curvature still counts samples that
    have since crossed the margin (and misses those that entered), so its S-steps
    overshoot or fall short, and a chain of them converged linearly, each a pass over
    the kept columns and each refused one a refresh.  F is piecewise quadratic along
    them: a few O(n) iterations land on its minimum, and the last step's direction
    makes the chain a conjugate-gradient-like one (Hestenes & Stiefel 1952: each
    step minimises over the new direction and the last one).  Along one direction α
    is kept within [``SHORTEST_STEP``, 1], so a damped Asy-OS worker's step (which
    passes ``remembered`` False) is never lengthened.  On man pages at k = 300 the
    first order tried 13,303 moves instead of 24,831 (docs/benchmarks.md, "S-steps
    sized over two directions").  Logistic curvature drifts smoothly: its steps came
    out at α ≈ 0.99, not worth the exponentials."""
    if loss != SQUARED_HINGE:
        return 1.0, 0.0
    n = u.shape[0]
    # the ridge's part: ‖w + α·d + β·e‖² with d = w_new − w, e = last_dw
    w_d, d_d, w_e, d_e, e_e = 0.0, 0.0, 0.0, 0.0, 0.0
    for l in range(k):
        d = w_new[l] - weights[l]
        w_d += weights[l] * d
        d_d += d * d
        if remembered:
            e = last_dw[l]
            w_e += weights[l] * e
            d_e += d * e
            e_e += e * e
    alpha, beta = 1.0, 0.0
    for _ in range(LENGTH_ITERATIONS):
        g_a, g_b, h_aa, h_ab, h_bb = 0.0, 0.0, 0.0, 0.0, 0.0
        for r in range(n):
            d = trial[r] - u[r]
            e = last_du[r] if remembered else 0.0
            at = u[r] + alpha * d + beta * e
            slope = grad_at(loss, at, y[r])
            curvature = hess_at(loss, at, y[r])
            g_a += slope * d
            h_aa += curvature * d * d
            if remembered:
                g_b += slope * e
                h_ab += curvature * d * e
                h_bb += curvature * e * e
        g_a = g_a / n + lam * (w_d + alpha * d_d + beta * d_e)
        h_aa = h_aa / n + lam * d_d
        if remembered:
            g_b = g_b / n + lam * (w_e + alpha * d_e + beta * e_e)
            h_ab = h_ab / n + lam * d_e
            h_bb = h_bb / n + lam * e_e
            det = h_aa * h_bb - h_ab * h_ab
            if not det > LENGTH_TOLERANCE * h_aa * h_bb:
                remembered = False   # the two directions are (nearly) one: along d
                beta = 0.0
                continue
            step_a = (h_bb * g_a - h_ab * g_b) / det
            step_b = (h_aa * g_b - h_ab * g_a) / det
            alpha -= step_a
            beta -= step_b
            if abs(step_a) <= LENGTH_TOLERANCE * abs(alpha) and \
                    abs(step_b) <= LENGTH_TOLERANCE * (abs(alpha) + abs(beta)):
                break
        else:
            if not h_aa > 0.0:
                break
            shorter = min(max(alpha - g_a / h_aa, SHORTEST_STEP), 1.0)
            if abs(shorter - alpha) <= LENGTH_TOLERANCE * alpha:
                return shorter, 0.0
            alpha = shorter
    return alpha, beta


@register_jitable(**_HELPER)
def along(alpha, beta, start, end, last, size):
    """``end`` moved to ``start`` + α·(``end`` − ``start``) + β·``last`` on its first
    ``size`` (``size_s_step``'s coefficients applied)."""
    for i in range(size):
        end[i] = start[i] + alpha * (end[i] - start[i]) + beta * last[i]


@register_jitable(**_HELPER)
def remember_s_step(forget, u, trial, weights, w_new, k, st):
    """After an accepted move, before u and w take it: an S-step's changes, kept for
    the next S-step (``size_s_step``); ``forget``: a move that changed S, or any move
    of an Asy-OS worker (whose S-steps are not sized over two directions), keeps
    nothing."""
    info = st.info[0]
    info.remembered = not forget
    if not forget:
        for r in range(u.shape[0]):
            st.last_du[r] = trial[r] - u[r]
        for l in range(k):
            st.last_dw[l] = w_new[l] - weights[l]


@register_jitable(**_HELPER)
def worth_a_move(moved, gain, before):
    """Whether an arrival's move is worth the passes over the kept columns it costs:
    a newcomer's always; the Newton step on S alone when its predicted ``gain`` is
    measurable.  (Taking an Asy-OS worker's S-only step once per view instead saved
    8 % of its kernel time but lost two strong features in about 1 run of 27 under
    oversubscription, against none in 60 without: docs/benchmarks.md.)"""
    return moved or gain > NEGLIGIBLE * abs(before) + 1e-300


@register_jitable(**_HELPER)
def refused(info, moved, loss, capacity):
    """F rose where the model predicted a fall: the frozen curvature has drifted, so
    a refresh is due for the classification losses (once it has served ``capacity``
    arrivals).  A refused Newton step on S alone is remembered: until u, w_S or H_S⁻¹
    change (``on_s_current`` falls), every arrival would propose the same step and F
    refuse it again, a pass over the kept columns each time for nothing."""
    if loss != SQUARED and info.arrivals >= capacity:
        info.refresh_due = True
    if not moved:
        info.s_step_refused = True


@register_jitable(**_HELPER)
def refused_before(info, moved, loss, capacity):
    """Whether the move is the Newton step on S that F has refused at this very
    point (``refused``); the refusal's effects are then those of refusing it again."""
    if moved or not info.s_step_refused:
        return False
    refused(info, moved, loss, capacity)
    return True


@register_jitable(**_HELPER)
def _accept(index, weights, k, j, span, grows, swap, sigma, loss, st):
    """A move F accepted: the weights of B, H_S⁻¹ grown by the newcomer and without
    the dropped slots, whose entries move as ``vacate`` moves them (a swap's caller
    then moves its columns the same way: ``_close_slots``; ``_accept`` itself takes
    no columns, so the dense and the sparse kernels share one compiled copy).
    Returns (new size, dropped): the feature that made way, -1 when B grew, -2 for
    the Newton step on S alone."""
    inv, w_new, drop, info = st.inv, st.w_new, st.drop, st.info[0]
    for l in range(span):
        weights[l] = w_new[l]
    dropped, size = -1, k
    if grows:
        _grow(inv, k, st.a, sigma)
        index[k] = j
        size = k + 1
    elif swap:
        _grow(inv, k, st.a, sigma)
        index[k] = j
        last = k
        for d in range(k - 1, -1, -1):   # from the top: slot ``last`` is never dropped
            if drop[d]:
                dropped = index[d]
                _remove(inv, last, d)
                vacate_entry(index, weights, last, d)
                last -= 1
        size = last + 1
        info.swaps += 1
        if loss != SQUARED and info.swaps >= info.refresh_every:
            info.refresh_due = True
    else:
        dropped = -2
    return size, dropped


@register_jitable(**_HELPER)
def _close_slots(slots, k, drop):
    """After a swap ``_accept`` took, the rows of ``slots`` (the dense columns, or a
    sparse kept set's slot table) move as its entries did: the top slot ``k`` and
    those below it fill the dropped slots from the top down."""
    last = k
    for d in range(k - 1, -1, -1):
        if drop[d]:
            if d != last:
                for r in range(slots.shape[1]):
                    slots[d, r] = slots[last, r]
            last -= 1


@register_jitable(**_HELPER)
def _try(cols, span, u, y, loss, contribution, separate, lam, weights, moved, st):
    """The move proposed (weights ``w_new`` on slots 0..span-1): X_B w_B into
    ``fresh``, the u it gives into ``trial`` (a worker's view plus its own change when
    ``separate``), a Newton step on S alone (not ``moved``) sized by ``size_s_step``,
    and F there (its gradient into ``g_trial``), returned."""
    n = u.shape[0]
    st.fresh[:] = 0.0
    for l in range(span):
        wl = st.w_new[l]
        if wl != 0.0:
            for r in range(n):
                st.fresh[r] += wl * cols[l, r]
    for r in range(n):
        st.trial[r] = u[r] + st.fresh[r] - contribution[r] if separate else st.fresh[r]
    if not moved:
        alpha, beta = size_s_step(loss, u, st.trial, y, lam, weights, st.w_new, span,
                                  st.last_du, st.last_dw,
                                  st.info[0].remembered and not separate)
        if alpha != 1.0 or beta != 0.0:
            along(alpha, beta, u, st.trial, st.last_du, n)
            along(alpha, beta, contribution, st.fresh, st.last_du, n)
            along(alpha, beta, weights, st.w_new, st.last_dw, span)
    return _objective(loss, st.trial, y, st.w_new, span, lam, st.g_trial)


@register_jitable(**_HELPER)
def fitted_arrivals(cols, index, weights, size, capacity, block, block_index, start, end,
                    u, y, loss, contribution, separate, damping, st, run):
    """The arrivals ``start`` ≤ b < ``end`` of ``block`` (feature ``block_index[b]``,
    column ``block[b]``) under the fitted rule.  Returns (new size, substitutions).

    Gradients and the objective are taken at ``u`` (the exact u = X_S w_S in
    sequential OS, where ``contribution`` is ``u`` itself and ``separate`` False; an
    Asy-OS worker's view, which its own change is added to, with ``separate`` True).
    ``damping`` γ ∈ (0, 1] scales the weights' move (a dropped weight still goes to
    zero): 1 in sequential OS; below 1 for Asy-OS workers, whose Newton steps on
    correlated shards would otherwise add up to an overshoot (a Jacobi iteration).
    ``run``: ``_batched``'s three integers (b = X_SᵀDx and H_S⁻¹b of a run of
    arrivals, used while ``batch_valid`` says they are still current).

    The arrival is written in this loop rather than inlined into the callers' loops:
    an arrival inlined as numba IR took a reference to each of its arrays on entry
    and released it on exit, some 60 atomic operations an arrival, a quarter of a
    small fit (docs/benchmarks.md, "Small fits")."""
    n = u.shape[0]
    info = st.info[0]
    swaps = 0
    for b in range(start, end):
        row, end_of_run = _batched(info, size, block.shape[0], b, run)
        if end_of_run > b:
            _products(cols, size, block, b, end_of_run, st.curv, st.inv, st.products,
                      st.solved)
        x = block[b]
        j = block_index[b]
        _see_scale(info, _dot(x, x) / n)
        if info.refresh_due and np.isfinite(info.nu):
            refresh(cols, size, u, y, loss, st)
        if not np.isfinite(info.nu):
            continue   # the data's scale overflows: the caller refuses it
        info.arrivals += 1
        lam, k = info.lam, size
        pos = -1
        for l in range(k):
            if index[l] == j:
                pos = l
        if not info.objective_current:
            info.objective = _objective(loss, u, y, weights, k, lam, st.g)
            info.objective_current = True
            info.on_s_current = False
        before = info.objective
        # one pass over the kept columns: D x into ``hx``; b = X_SᵀDx into ``bS`` (or
        # the batched row), a = H_S⁻¹b into ``a``; when stale, X_Sᵀg + λw into
        # ``gS`` and the Newton step on S with its predicted gain (written here, not
        # a helper passed ``FittedState``: see above)
        for r in range(n):
            st.hx[r] = st.curv[r] * x[r]
        fresh_products = not info.on_s_current
        batched = row >= 0 and info.batch_valid
        for l in range(k):
            sg, sb = 0.0, 0.0
            if batched:   # X_SᵀDx computed with the arrivals around it
                sb = st.products[row, l]
                if fresh_products:
                    for r in range(n):
                        sg += cols[l, r] * st.g[r]
            elif fresh_products:
                for r in range(n):
                    sg += cols[l, r] * st.g[r]
                    sb += cols[l, r] * st.hx[r]
            else:   # X_Sᵀg is unchanged since the last arrival: half the pass
                for r in range(n):
                    sb += cols[l, r] * st.hx[r]
            if fresh_products:
                st.gS[l] = sg + lam * weights[l]
            st.bS[l] = sb
        if fresh_products:
            info.gain = _newton_on_s(st.inv, k, st.gS, st.v)
            info.s_step_refused = False
        if batched:
            for i in range(k):
                st.a[i] = st.solved[row, i]
        else:
            apply_inverse(st.inv, k, st.bS, st.a)
        info.on_s_current = True
        gain = info.gain
        c = _dot(x, st.hx) + lam if pos < 0 else 0.0
        xg = _dot(x, st.g) if pos < 0 else 0.0
        grows, swap, sigma, gain = _propose(index, weights, k, capacity, j, pos, xg, c,
                                            gain, damping, st)
        moved = grows or swap
        if not worth_a_move(moved, gain, before) or \
                refused_before(info, moved, loss, capacity):
            continue
        span = k + 1 if moved else k
        if moved:
            info.batch_valid = False   # S changes (if F falls): batched products void
            for r in range(n):
                cols[k, r] = x[r]
        info.trials += 1
        after = _try(cols, span, u, y, loss, contribution, separate, lam, weights, moved,
                     st)
        if after > before * (1.0 + 1e-12) + 1e-300:
            refused(info, moved, loss, capacity)
            continue
        remember_s_step(moved or separate, u, st.trial, weights, st.w_new, k, st)
        size, dropped = _accept(index, weights, k, j, span, grows, swap, sigma, loss,
                                st)
        if swap:
            _close_slots(cols, k, st.drop)
        for r in range(n):   # loops: a slice assignment compiles numba's shape message
            u[r] = st.trial[r] if separate else st.fresh[r]
            if separate:
                contribution[r] = st.fresh[r]
            st.g[r] = st.g_trial[r]
        info.objective = after
        info.on_s_current = False
        if dropped >= 0 and dropped != j:
            swaps += 1
    return size, swaps


@register_jitable(**_PLAIN_HELPER)
def _batched(info, size, rows, b, run):
    """Where arrival ``b`` of a block of ``rows`` arrivals finds b = X_SᵀDx and H_S⁻¹b:
    (row, end), the row of ``st.products`` and ``st.solved`` that holds them or -1
    (the arrival computes them itself), and end > b where the caller is first to
    compute them for arrivals b ≤ i < end (``_products``).  They are computed for a
    run of arrivals at once, as two matrix products (several times faster than a pass
    over the kept columns per arrival); a move or a refresh voids them
    (``batch_valid``): S, D or H_S⁻¹ changed.  ``run`` = (first arrival, end, length
    of the next run): after a void the next arrival computes its own, then runs of 2,
    4, … up to ``BATCH_ROWS`` arrivals, so arrivals that move often waste at most as
    much as they use."""
    end = 0
    if not info.batch_valid and b < run[1]:   # voided within the run: start small
        run[1], run[2] = b, 1
    if b >= run[1]:
        if info.refresh_due or size == 0 or run[2] <= 1:
            run[1], run[2] = b + 1, 2   # a refresh is due, or just after a void:
            return -1, end              # this arrival computes its own
        end = min(rows, b + run[2])
        run[0], run[1], run[2] = b, end, min(2 * run[2], BATCH_ROWS)
        info.batch_valid = True
    return b - run[0], end


@register_jitable(**_PLAIN_HELPER)
def _products(cols, size, block, start, end, curv, inv, products, solved):
    """products[i, :size] = X_SᵀD x for the arrivals start ≤ i + start < end, and
    solved[i] = H_S⁻¹ products[i]: two BLAS products.  The first runs over the kept
    slots of the C-ordered buffer only (a view, no copy of float64 columns): an
    Asy-OS worker's buffer has room for s + 1 under adaptive budgets and holds about
    s/q.  Copies in loops: they compile in a fraction of the time of array
    expressions."""
    n, m = curv.shape[0], end - start
    scaled = np.empty((m, n))
    for i in range(m):
        for r in range(n):
            scaled[i, r] = block[start + i, r] * curv[r]
    p = np.dot(scaled, _as_float64(cols[:size]).T)
    P = np.empty((m, size))
    H = np.empty((size, size))
    for i in range(m):
        for l in range(size):
            P[i, l] = p[i, l]
            products[i, l] = p[i, l]
    for i in range(size):
        for l in range(size):
            H[i, l] = inv[i, l]
    q = np.dot(P, H[:size].T)   # H is symmetric: the types of the first product
    for i in range(m):
        for l in range(size):
            solved[i, l] = q[i, l]


@njit(**_PLAIN_KERNEL, nogil=True)
def fitted_block(cols, index, weights, size, capacity, block, block_index, u, y, loss,
                 st, run):
    """Sequential OS under the fitted rule over every column of ``block``; u is X_S w_S.
    ``run``: ``_batched``'s three integers, zero.  Returns (new size, substitutions)."""
    return fitted_arrivals(cols, index, weights, size, capacity, block, block_index, 0,
                           block.shape[0], u, y, loss, u, False, 1.0, st, run)


@njit(**_PLAIN_KERNEL, nogil=True)
def fitted_local(cols, index, weights, size, capacity, block, block_index, start, end,
                 u_local, y, loss, contribution, damping, st, run):
    """An Asy-OS worker's arrivals ``start`` ≤ b < ``end`` of ``block`` under the
    fitted rule, from its view ``u_local`` (its own changes are added to it as it
    goes), moves scaled by ``damping``.  ``run`` (``_batched``'s) lives as long as the
    block: a push covers a few arrivals, and the products X_SᵀDx of the next ones,
    computed with these, do not depend on the view (only S, D and H_S⁻¹ void them), so
    a worker's batched products grow to ``BATCH_ROWS`` arrivals as sequential OS's do.
    Returns (new size, substitutions)."""
    st.info[0].objective_current = False   # a new view
    return fitted_arrivals(cols, index, weights, size, capacity, block, block_index,
                           start, end, u_local, y, loss, contribution, True, damping,
                           st, run)


@njit(**_PLAIN_KERNEL)
def fitted_drop_to(cols, index, weights, size, limit, st):
    """Drop the cheapest kept coordinates (w_k² / [H_S⁻¹]_kk, re-optimising the rest
    in the model) until at most ``limit`` are kept; returns the new size.  The caller
    recomputes X_S w_S."""
    inv = st.inv
    while size > limit:
        d = 0
        for l in range(1, size):
            if weights[l] * weights[l] / inv[l, l] < weights[d] * weights[d] / inv[d, d]:
                d = l
        f = weights[d] / inv[d, d]
        for l in range(size):
            weights[l] -= f * inv[l, d]
        weights[d] = 0.0
        _remove(inv, size - 1, d)
        vacate(cols, index, weights, size - 1, d)
        size -= 1
    return size
