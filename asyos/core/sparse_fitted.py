"""The fitted substitution rule on sparse (CSC) columns: an arrival costs what its
overlap with the kept set costs, O(nnz(x_j) + Σ_r c_r + m²) for most arrivals and
O(nnz(x_j) + Σ_r c_r + s·m + s) for the others (c_r the kept nonzeros in the
newcomer's row r, m the kept columns sharing a row with it), whatever n.

The rule is ``core/fitted_step.py``'s, decision for decision (``_propose`` and
``_accept`` are shared): the newcomer gets its Newton-fitted weight given S and the
kept coordinate whose removal costs the least objective makes way.  It is invariant to
the scale of each column up to the small ridge, so a rare word with one or two
nonzeros (‖x‖² tiny) is judged by the loss it removes, not by a step size set from the
columns seen so far, which is what makes the paper's magnitude rule keep such columns
on unscaled text (docs/algorithms.md, "Sparse columns").  Only where the numbers come
from differs from the dense kernel:

* x_jᵀg, x_jᵀDx_j and 1ᵀDx_j read g and D on the newcomer's nonzeros: O(nnz(x_j));
* b = X_SᵀDx_j reads the kept nonzeros of the newcomer's rows (``row_slot`` and
  ``row_val``: per row, the kept slots with a nonzero there and its value, kept
  current under moves), so only the m slots that share a row with x_j are touched;
  a = H_S⁻¹b reads the m rows of H_S⁻¹ for those slots: O(s·m), not O(s²); and
  at capacity not even that where the settled test (``_settles``, O(m²) from the
  m×m block) proves the newcomer makes no one leave, as it does for most arrivals
  once S has settled;
* X_Sᵀg is recomputed from the kept columns' nonzeros only after a move: O(nnz(X_S));
* a move updates u by Σ Δw_k x_k on the kept nonzeros and evaluates F in one pass.

An arrival that cannot pay (most of them, once S has settled) touches nothing else;
an empty column is skipped outright: it cannot lower the loss.

**The intercept** (``intercept=True``) is an unpenalised coordinate eliminated from
the model rather than a dense column: every quantity above is taken in the metric
D-centred on the intercept (x̃ = x − (1ᵀDx/1ᵀD1)·1, the Schur complement of the
intercept's curvature), which costs O(s) more per arrival: b̃ = b − e·e_j/1ᵀD1 has a
dense rank-one part, and H̃_S⁻¹b̃ = H̃_S⁻¹b − (e_j/1ᵀD1)·H̃_S⁻¹e with H̃_S⁻¹e (``he``)
recomputed after each move.  Each move shifts the
intercept by its Newton step given the weights' move.  No column is ever densified or
centred.  For the squared loss this is exactly least squares with an unpenalised
intercept, the same model the dense path fits by centring.
"""

from typing import NamedTuple

import numpy as np
from numba import njit
from numba.extending import register_jitable

from .fitted_step import (
    _HELPER,
    _PLAIN_HELPER,
    _PLAIN_KERNEL,
    _accept,
    _close_slots,
    _newton_on_s,
    _objective,
    _propose,
    _see_scale,
    along,
    apply_inverse,
    keep_s,
    refused,
    refused_before,
    remember_s_step,
    size_s_step,
    ungrouped,
    worth_a_move,
)
from .losses import hess_at
from .spd import spd_inverse

# Slots of ``SparseFit.extra``: whether the model has an intercept; 1ᵀD1 (+λ) at the
# last refresh; 1ᵀg at u; the intercept's value; the work of the arrivals' products
# (rows of the newcomers read, kept nonzeros read there, entries of H_S⁻¹ and of
# H_S⁻¹e read), which tests count; for the settled test (``_settles``), with ``gS``:
# β = min_l |w_l − v_l|/√[H̃_S⁻¹]_ll, eᵀH̃_S⁻¹e and eᵀH̃_S⁻¹gS; the arrivals it
# decided; whether it is on (1, the default; 0 forms every product, as a comparison);
# whether ``he`` and eᵀH̃_S⁻¹e are current (H̃_S⁻¹ and e unchanged since: a Newton
# step on S alone, most moves once S has settled, changes neither).
(INTERCEPT, DSUM, GSUM, OFFSET, WORK, BETA, E_HE, HE_G, SETTLED, SETTLE,
 HE_CURRENT) = range(11)
# The settled test's margin: it decides only where its bound clears the rule's own
# comparison by this relative amount (far above the products' rounding), and only
# where σ is not this small a part of c (no cancellation in c − bᵀH̃_S⁻¹b).
SETTLED_MARGIN = 1e-6


class SparseFit(NamedTuple):
    """What the sparse fitted rule holds besides ``FittedState``: O(n·s) numbers."""

    row_count: np.ndarray  # (n,) int64: the kept slots with a nonzero in each row ...
    row_slot: np.ndarray   # (n, c+1) int32: ... which they are (the first row_count)
    row_val: np.ndarray    # (n, c+1): ... and their values there
    e: np.ndarray          # (c+1,): X_SᵀD1, for the intercept's elimination
    he: np.ndarray         # (c+1,): H̃_S⁻¹e, current with ``extra[HE_CURRENT]``
    root: np.ndarray       # (c+1,): √[H̃_S⁻¹]_ll, current with ``on_s_current``
    overlap: np.ndarray    # (c+1,) int64: the slots sharing a row with the newcomer
    seen: np.ndarray       # (c+1,) bool: whether a slot is in ``overlap`` yet
    old_index: np.ndarray  # (c+1,) int64: the slots' features before a move
    old_table: np.ndarray  # (c+1, 2) int64: their pool entries before it
    extra: np.ndarray      # slots INTERCEPT … WORK


def sparse_fit(n_samples: int, capacity: int, intercept: bool) -> SparseFit:
    c = capacity + 1
    extra = np.zeros(HE_CURRENT + 1)
    extra[INTERCEPT] = 1.0 if intercept else 0.0
    extra[SETTLE] = 1.0
    return SparseFit(np.zeros(n_samples, np.int64), np.zeros((n_samples, c), np.int32),
                     np.zeros((n_samples, c)), np.zeros(c), np.zeros(c), np.zeros(c),
                     np.zeros(c, np.int64), np.zeros(c, np.bool_),
                     np.full(c, -1, np.int64), np.zeros((c, 2), np.int64), extra)


@register_jitable(**_HELPER)
def _row_add(sp, r, l, value):
    """Slot ``l`` has ``value`` in row ``r``."""
    t = sp.row_count[r]
    sp.row_slot[r, t] = l
    sp.row_val[r, t] = value
    sp.row_count[r] = t + 1


@register_jitable(**_HELPER)
def _row_remove(sp, r, l):
    """Slot ``l`` no longer has a nonzero in row ``r`` (the row's last entry fills
    its place)."""
    last = sp.row_count[r] - 1
    for t in range(last + 1):
        if sp.row_slot[r, t] == l:
            sp.row_slot[r, t] = sp.row_slot[r, last]
            sp.row_val[r, t] = sp.row_val[r, last]
            break
    sp.row_count[r] = last


@register_jitable(**_PLAIN_HELPER)
def sparse_refresh(table, rows, vals, size, u, y, loss, st, sp):
    """The curvature at ``u``, then H̃_S⁻¹ from the kept nonzeros: O(nnz(X_S)·s + s³).
    An overflowing product marks the scale as overflowing (``nu`` = inf)."""
    n = u.shape[0]
    info, extra = st.info[0], sp.extra
    lam = info.lam
    dsum = lam
    for r in range(n):
        st.curv[r] = hess_at(loss, u[r], y[r]) / n
        dsum += st.curv[r]
    extra[DSUM] = dsum
    H = np.zeros((max(size, 1), max(size, 1)))
    for l in range(size):
        start, stop = table[l, 0], table[l, 0] + table[l, 1]
        total = 0.0
        for e in range(start, stop):
            r = rows[e]
            d = st.curv[r] * vals[e]
            total += d
            for t in range(sp.row_count[r]):
                H[l, sp.row_slot[r, t]] += d * sp.row_val[r, t]
        sp.e[l] = total
    for l in range(size):
        if extra[INTERCEPT] != 0.0:
            for m in range(size):
                H[l, m] -= sp.e[l] * sp.e[m] / dsum
        H[l, l] += lam
        if not np.isfinite(H[l, l]):
            info.nu = np.inf
            return
    if size > 0:
        spd_inverse(H, size, st.inv)
    info.arrivals = 0
    info.swaps = 0
    info.refresh_due = False
    info.remembered = False
    info.on_s_current = False
    extra[HE_CURRENT] = 0.0


@register_jitable(**_HELPER)
def _sync(table, rows, vals, index, k, span, size, st, sp):
    """The rows' kept nonzeros and ``e`` follow the slots a move changed (O(nnz) a
    slot, times the kept nonzeros of its rows to find its entries): the slots below
    the old size ``k`` whose column changed lose their old one, then every changed
    slot below the new ``size`` takes its new one.  Slot ``k`` held no column."""
    for l in range(k):
        if index[l] != sp.old_index[l] or table[l, 0] != sp.old_table[l, 0]:
            start = sp.old_table[l, 0]
            for e in range(start, start + sp.old_table[l, 1]):
                _row_remove(sp, rows[e], l)
    for l in range(span):
        if l < k and index[l] == sp.old_index[l] and table[l, 0] == sp.old_table[l, 0]:
            continue
        sp.e[l] = 0.0
        if l < size:
            start = table[l, 0]
            total = 0.0
            for e in range(start, start + table[l, 1]):
                _row_add(sp, rows[e], l, vals[e])
                total += st.curv[rows[e]] * vals[e]
            sp.e[l] = total


@register_jitable(**_PLAIN_HELPER)
def _settles(inv, count, xg, c, f, bS, v, overlap, he, root, extra):
    """Whether a newcomer at capacity provably makes no kept slot leave, from the
    m = ``count`` slots it shares rows with (``overlap``, b on them in ``bS``) and
    ``f`` = 1ᵀDx_j/1ᵀD1 (0 without the intercept), before a = H̃_S⁻¹b̃ is formed
    (``v``, ``he``, ``root`` and ``extra`` as ``SparseFit``'s and ``FittedState``'s;
    the arrays it reads, not the two tuples: a call takes a reference to each array
    it is passed, an atomic operation each, and most arrivals make this call).

    σ = c − b̃ᵀH̃_S⁻¹b̃ and the newcomer's step d = (b̃ᵀv − x̃ᵀg)/σ are exact from the
    m×m block, ``he`` and the cached scalars; slot l's removal cost
    ½(w_l − v_l − a_l d)²/([H̃_S⁻¹]_ll + a_l²/σ) is at least ½(β − |d|√(b̃ᵀH̃_S⁻¹b̃))₊²σ/c,
    because |a_l| ≤ √([H̃_S⁻¹]_ll · b̃ᵀH̃_S⁻¹b̃) (Cauchy–Schwarz in the H̃_S⁻¹ inner
    product).  When that bound clears the newcomer's own cost ½σd², ``_propose`` would
    find no cheaper slot and take the S-step: the same decision, without its O(m·s)
    products.  Otherwise the caller forms them.  The m×m block itself (half of it) is
    read only where the O(m) bound (Σ_l |b_l|·√[H̃_S⁻¹]_ll)² on bᵀH̃_S⁻¹b does not
    already decide: about 3 arrivals in 4 at k = 300 on man pages."""
    bv, bhe, bound = 0.0, 0.0, 0.0
    for t in range(count):
        l = overlap[t]
        bl = bS[l]
        bv += bl * v[l]
        bhe += bl * he[l]
        bound += abs(bl) * root[l]
    if f != 0.0:
        bv -= f * extra[HE_G]
    # first with bᵀH̃_S⁻¹b ≤ (Σ_l |b_l|·√[H̃_S⁻¹]_ll)² (Cauchy–Schwarz again), O(m):
    # the test only gets harder as bᵀH̃_S⁻¹b grows, so passing it there decides
    if _clears(bound * bound, bv, bhe, xg, c, f, extra):
        return True
    bhb = 0.0
    for t in range(count):
        l = overlap[t]
        bl = bS[l]
        row = inv[l]
        inner = 0.5 * row[l] * bl
        for t2 in range(t):
            inner += row[overlap[t2]] * bS[overlap[t2]]
        bhb += bl * inner
    return _clears(2.0 * bhb, bv, bhe, xg, c, f, extra)


@register_jitable(**_PLAIN_HELPER)
def _clears(bhb, bv, bhe, xg, c, f, extra):
    """``_settles``'s comparison with bᵀH̃_S⁻¹b = ``bhb`` (or a bound above it), b̃ᵀv
    = ``bv``, bᵀH̃_S⁻¹e = ``bhe``."""
    ba = bhb
    if f != 0.0:
        ba += f * (f * extra[E_HE] - 2.0 * bhe)
    sigma = c - ba
    if not sigma > SETTLED_MARGIN * c:
        return False
    d = (bv - xg) / sigma
    slack = extra[BETA] - abs(d) * np.sqrt(max(ba, 0.0))
    if not slack > 0.0:
        return False
    return 0.5 * slack * slack * sigma / c * (1.0 - SETTLED_MARGIN) > 0.5 * sigma * d * d


@njit(**_PLAIN_KERNEL, nogil=True)
def sparse_fitted_run(kept, size, fill, capacity, block, u, y, loss, separate, damping,
                      st, sp):
    """The arrivals of the CSC ``block`` (``SparseBlock``) under the fitted rule, on a
    sparse kept set ``kept`` (``SparseColumns``; the pool has room for the block's
    nonzeros at ``fill``).  Sequential OS passes u = X_S w_S (plus the intercept),
    which is ``kept``'s contribution, ``separate`` False and ``damping`` 1; an Asy-OS
    worker passes its view of u, which its own changes are added to, ``separate``
    True, and its moves' ``damping`` (as ``fitted_local``'s).  Returns (size, fill,
    substitutions).

    One kernel with the arrival written in its loop, not an arrival inlined into a
    sequential and a worker kernel: numba's inlining copies the arrival's IR, which
    took about 0.4 s of a first sparse run (docs/benchmarks.md, "First run")."""
    table, rows, vals, index, weights, contribution = kept
    indptr, block_rows, block_vals, block_index = block
    n = u.shape[0]
    info, extra = st.info[0], sp.extra
    if separate:
        info.objective_current = False   # a new view
    extra[HE_CURRENT] = 0.0   # H̃_S⁻¹ or the kept set may have changed outside
    swaps = 0
    # b = X_SᵀDx_j is nonzero on the slots in ``overlap`` only, unless the intercept's
    # dense part was added (``b_dense``): only those are cleared for the next arrival
    b_dense, count = True, 0
    for b in range(block_index.shape[0]):
        x_rows = block_rows[indptr[b]:indptr[b + 1]]
        x_vals = block_vals[indptr[b]:indptr[b + 1]]
        j = block_index[b]
        m = x_rows.shape[0]
        k = size
        if m == 0:
            continue   # an empty column cannot lower the loss
        # a kept j has a nonzero in each of x_j's rows: its slot is among the first's
        pos = -1
        r = x_rows[0]
        for t in range(sp.row_count[r]):
            if index[sp.row_slot[r, t]] == j:
                pos = sp.row_slot[r, t]
        nu = 0.0
        for e in range(m):
            nu += x_vals[e] * x_vals[e]
        _see_scale(info, nu / n)
        if info.refresh_due and np.isfinite(info.nu):
            sparse_refresh(table, rows, vals, size, u, y, loss, st, sp)
        if not np.isfinite(info.nu):
            continue   # the data's scale overflows: the caller refuses it
        info.arrivals += 1
        lam, inv = info.lam, st.inv
        intercept = extra[INTERCEPT] != 0.0
        if not info.objective_current:
            info.objective = _objective(loss, u, y, weights, k, lam, st.g)
            total = 0.0
            for r in range(n):
                total += st.g[r]
            extra[GSUM] = total
            info.objective_current = True
            info.on_s_current = False
        before = info.objective
        dsum, gsum = extra[DSUM], extra[GSUM]
        # the newcomer's products, on its nonzeros only; b on the m kept slots that
        # share a row with it (``overlap``), unless it is kept (then b is not used)
        xg, xdx, ej = 0.0, 0.0, 0.0
        overlap, seen, read = sp.overlap, sp.seen, m
        if b_dense:
            st.bS[:] = 0.0
            b_dense = False
        for t in range(count):
            st.bS[overlap[t]] = 0.0
        count = 0
        for e in range(m):
            r = x_rows[e]
            xv = x_vals[e]
            d = st.curv[r] * xv
            xg += xv * st.g[r]
            xdx += d * xv
            ej += d
            if pos < 0:
                kept_here = sp.row_count[r]
                read += kept_here
                for t in range(kept_here):
                    l = sp.row_slot[r, t]
                    st.bS[l] += d * sp.row_val[r, t]
                    if not seen[l]:
                        seen[l] = True
                        overlap[count] = l
                        count += 1
        for t in range(count):
            seen[overlap[t]] = False
        if intercept:   # centred on the intercept in the D metric
            xg -= ej * gsum / dsum
            xdx -= ej * ej / dsum
        if not info.on_s_current:   # X_Sᵀg after a move: the kept nonzeros once
            gain = 0.5 * gsum * gsum / dsum if intercept else 0.0
            for l in range(k):
                total = 0.0
                start = table[l, 0]
                for e in range(start, start + table[l, 1]):
                    total += vals[e] * st.g[rows[e]]
                st.gS[l] = total + lam * weights[l]
                if intercept:
                    st.gS[l] -= sp.e[l] * gsum / dsum
            info.gain = gain + _newton_on_s(inv, k, st.gS, st.v)
            info.s_step_refused = False
            if intercept:
                if extra[HE_CURRENT] == 0.0:
                    extra[E_HE] = apply_inverse(inv, k, sp.e, sp.he)
                    extra[HE_CURRENT] = 1.0
                he_g = 0.0
                for i in range(k):
                    he_g += sp.he[i] * st.gS[i]
                extra[HE_G] = he_g
            beta = np.inf
            for l in range(k):
                sp.root[l] = np.sqrt(inv[l, l])
                beta = min(beta, abs(weights[l] - st.v[l]) / sp.root[l])
            extra[BETA] = beta
            info.on_s_current = True
        # at capacity, a newcomer that the bound shows makes no one leave takes the
        # S-step's proposal without a = H̃_S⁻¹b̃: O(m²), not O(m·s)
        settled = False
        if (extra[SETTLE] != 0.0 and pos < 0 and k == capacity and k > 0
                and ungrouped(st.group_of, info)):
            read += count * count
            settled = _settles(inv, count, xg, xdx + lam,
                               ej / dsum if intercept else 0.0, st.bS, st.v, overlap,
                               sp.he, sp.root, extra)
        if settled:
            extra[WORK] += read
            extra[SETTLED] += 1
            grows, swap, sigma = False, False, 1.0
            if not worth_a_move(False, info.gain * damping, before) or \
                    refused_before(info, False, loss, capacity):
                continue   # (``keep_s`` scales the gain by ``damping`` ≤ 1 alike)
            gain = keep_s(weights, k, damping, info.gain, st.v, st.w_new, st.drop)
        else:
            # a = H̃_S⁻¹b̃ from the rows of H̃_S⁻¹ (symmetric) of the overlapping
            # slots, and with the intercept b̃'s dense rank-one part through ``he``
            for i in range(k):
                st.a[i] = 0.0
            for t in range(count):
                l = overlap[t]
                bl = st.bS[l]
                row = inv[l]
                for i in range(k):
                    st.a[i] += row[i] * bl
            read += count * k
            if intercept and pos < 0:
                f = ej / dsum
                for i in range(k):
                    st.a[i] -= f * sp.he[i]
                    st.bS[i] -= sp.e[i] * f
                read += k
                b_dense = True
            extra[WORK] += read
            grows, swap, sigma, gain = _propose(index, weights, k, capacity, j, pos,
                                                xg, xdx + lam, info.gain, damping, st)
        moved = grows or swap
        if not worth_a_move(moved, gain, before) or \
                refused_before(info, moved, loss, capacity):
            continue
        span = k + 1 if moved else k
        if moved:   # the newcomer into the pool (kept only if the move is accepted)
            table[k, 0] = fill
            table[k, 1] = m
            for e in range(m):   # loops: see ``fitted_arrivals``' last one
                rows[fill + e] = x_rows[e]
                vals[fill + e] = x_vals[e]
        w_new = st.w_new
        shift = 0.0   # the intercept's Newton step given the weights' move
        if intercept:
            total = gsum
            for l in range(k):
                total += sp.e[l] * (w_new[l] - weights[l])
            if moved:
                total += ej * w_new[k]
            shift = -damping * total / dsum
        for r in range(n):
            st.trial[r] = u[r] + shift
        for l in range(span):
            delta = w_new[l] - (weights[l] if l < k else 0.0)
            if delta != 0.0:
                start = table[l, 0]
                for e in range(start, start + table[l, 1]):
                    st.trial[rows[e]] += delta * vals[e]
        if not moved:   # a Newton step on S alone, sized with the one before it
            alpha, beta = size_s_step(loss, u, st.trial, y, lam, weights, w_new, span,
                                      st.last_du, st.last_dw,
                                      info.remembered and not separate)
            if alpha != 1.0 or beta != 0.0:
                along(alpha, beta, u, st.trial, st.last_du, n)
                along(alpha, beta, weights, w_new, st.last_dw, span)
                shift = alpha * shift + beta * info.last_shift
        info.trials += 1
        after = _objective(loss, st.trial, y, w_new, span, lam, st.g_trial)
        if after > before * (1.0 + 1e-12) + 1e-300:
            refused(info, moved, loss, capacity)
            continue
        remember_s_step(moved or separate, u, st.trial, weights, w_new, k, st)
        info.last_shift = shift
        for l in range(span):
            sp.old_index[l] = index[l]
            sp.old_table[l, 0] = table[l, 0]
            sp.old_table[l, 1] = table[l, 1]
        size, dropped = _accept(index, weights, k, j, span, grows, swap, sigma, loss,
                                st)
        if swap:
            _close_slots(table, k, st.drop)
        if moved:
            fill += m
            _sync(table, rows, vals, index, k, span, size, st, sp)
            extra[HE_CURRENT] = 0.0
        total = 0.0
        for r in range(n):
            if separate:
                contribution[r] += st.trial[r] - u[r]
            u[r] = st.trial[r]
            st.g[r] = st.g_trial[r]
            total += st.g[r]
        extra[GSUM] = total
        extra[OFFSET] += shift
        info.objective = after
        info.on_s_current = False
        if dropped >= 0 and dropped != j:
            swaps += 1
    return size, fill, swaps


@njit(**_PLAIN_KERNEL)
def rebuild_rows(table, rows, vals, size, st, sp):
    """The rows' kept nonzeros and ``e`` from the kept columns afresh (after
    ``fitted_drop_to`` moved slots, or a load): O(n + nnz(X_S))."""
    sp.row_count[:] = 0
    sp.e[:] = 0.0
    for l in range(size):
        start = table[l, 0]
        for e in range(start, start + table[l, 1]):
            _row_add(sp, rows[e], l, vals[e])
            sp.e[l] += st.curv[rows[e]] * vals[e]
