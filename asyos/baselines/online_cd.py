"""Naive online coordinate descent, L1 and L0.

Yang, Fujimaki, Kusumura & Liu (KDD 2016, Section 5) only name these two baselines;
the update rules below are our convention (docs/algorithms.md, "Conventions where the
papers are silent").

The simplest online baselines: each arriving feature gets one coordinate step and
nothing else moves.  They read the same stream as OS, so comparing them with OS shows
what OS's block step on the retained features buys.  L1: memory u plus a sparse w (no
columns kept: x_j comes back next pass).  L0: u plus s stored columns, like OS.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core.losses import loss_grad
from ..core.selection import Selection, selection
from ..core.validate import (
    check_at_least,
    check_int,
    check_problem,
    check_stream_problem,
)
from ..errors import InputError
from ..lasso.selector import lambda_for_s
from ..streams import FeatureStream, as_stream

__all__ = ["fit_l0_cd", "fit_l1_cd"]


def _setup(X, y, s, loss, epochs):
    """(stream, y, s, loss, epochs, array-or-None) after the shared checks."""
    if isinstance(X, FeatureStream):
        y, s, loss = check_stream_problem(X, y, s, loss)
        stream, array = X, None
    else:
        array, y, s, loss = check_problem(X, y, s, loss)
        stream = as_stream(array)
    return stream, y, s, loss, check_int("epochs", epochs, 1), array


def _f64(block: np.ndarray) -> np.ndarray:
    """A float32 stream's block in float64, the kernels' one type (no copy if it is)."""
    return np.ascontiguousarray(block, dtype=np.float64)


# The per-feature loops are sequential (each step moves u, which the next gradient
# needs), so they run compiled, one stream block per call.

@njit(cache=True)
def _l1_block(loss, curv, lam, block, wb, u, y, g, nnz, peak):
    """The L1 step on each row x of ``block`` in turn; wb holds their current weights.
    Returns the running (nnz, peak nnz)."""
    n = u.shape[0]
    for k in range(block.shape[0]):
        x = block[k]
        loss_grad(loss, u, y, g)
        c = curv * np.dot(x, x) / n
        if c <= 0.0:
            continue                      # a zero column cannot change f
        z = wb[k] - np.dot(x, g) / c
        t = lam / c
        new = z - t if z > t else (z + t if z < -t else 0.0)
        d = new - wb[k]
        if d != 0.0:
            for i in range(n):
                u[i] += x[i] * d
        nnz += (new != 0.0) - (wb[k] != 0.0)
        peak = max(peak, nnz)
        wb[k] = new
    return nnz, peak


def fit_l1_cd(X, y, s: int, loss="squared", epochs: int = 2,
              lam: float | None = None) -> Selection:
    """Online L1 coordinate descent.

    On arrival of j: c_j = curv·‖x_j‖²/n, z = w_j − x_jᵀg/c_j, w_j ← soft(z, λ/c_j),
    u += x_j Δw_j.  For the squared loss that is the exact minimiser of f + λ‖w‖₁ in
    w_j; for the others a majorised step.  λ defaults to ``lambda_for_s`` (needs X as
    an array; a stream needs ``lam=``).  ``n_iter`` = passes; ``peak_active`` = the
    most nonzero weights held at once.  Selection: supp(w), top s by |w|.
    """
    stream, y, s, loss, epochs, array = _setup(X, y, s, loss, epochs)
    if lam is None:
        if array is None:
            raise InputError("L1 coordinate descent over a FeatureStream needs lam= "
                             "(the default λ comes from the LASSO path, which needs X "
                             "as an array)")
        lam = lambda_for_s(array, y, s, loss)
    lam = check_at_least("lam", lam, 0)
    n = stream.n_samples
    w: dict[int, float] = {}                  # the sparse w: nonzeros only
    u = np.zeros(n)
    g = np.empty(n)
    nnz = peak = 0
    for epoch in range(epochs):
        for index, block in stream.blocks(epoch):
            wb = np.array([w.get(j, 0.0) for j in index.tolist()])
            nnz, peak = _l1_block(int(loss), loss.curvature, lam, _f64(block), wb, u,
                                  y, g, nnz, peak)
            for j, v in zip(index.tolist(), wb.tolist()):
                if v != 0.0:
                    w[j] = v
                else:
                    w.pop(j, None)
    return selection(list(w), list(w.values()), s, "L1 coordinate descent", epochs,
                     peak_active=int(peak))


@njit(cache=True)
def _l0_block(loss, curv, block, index, S, W, XS, size, u, y, g):
    """The L0 step on each row of ``block`` in turn; (S, W, XS)[:size] is the kept
    set, XS has exactly s rows.  Returns the new size."""
    n = u.shape[0]
    s = XS.shape[0]
    for k in range(block.shape[0]):
        x = block[k]
        j = index[k]
        loss_grad(loss, u, y, g)
        c = curv * np.dot(x, x) / n
        if c <= 0.0:
            continue                      # a zero column cannot change f
        pos = -1
        for q in range(size):
            if S[q] == j:
                pos = q
                break
        old = W[pos] if pos >= 0 else 0.0
        z = old - np.dot(x, g) / c
        if pos < 0 and size < s:          # room left: add j (even with z = 0)
            pos = size
            S[pos] = j
            size += 1
        elif pos < 0:                     # full: substitute the smallest |w| ...
            kmin = 0
            for q in range(1, size):
                if abs(W[q]) < abs(W[kmin]):
                    kmin = q              # ties: the lowest position
            if not abs(z) > abs(W[kmin]):
                continue                  # ... only if |z| beats it (ties reject j)
            for i in range(n):
                u[i] -= XS[kmin, i] * W[kmin]
            pos = kmin
            S[pos] = j
            old = 0.0
        if pos >= 0:
            XS[pos] = x
            W[pos] = z
            for i in range(n):
                u[i] += x[i] * (z - old)
    return size


def fit_l0_cd(X, y, s: int, loss="squared", epochs: int = 2) -> Selection:
    """Online L0 coordinate descent.

    On arrival of j: z = w_j − x_jᵀg/c_j (w_j = 0 if j is not kept).  A kept j takes
    w_j = z; a new j is added while fewer than s are kept; otherwise it replaces
    k* = argmin |w_k| (lowest position on ties) iff |z| > |w_k*|.  Only the s kept
    columns are stored; u is recomputed from them after every pass.  ``n_iter`` =
    passes; ``peak_active`` = the most columns held (≤ s).  Selection: the kept
    features with nonzero weight.
    """
    stream, y, s, loss, epochs, _ = _setup(X, y, s, loss, epochs)
    n = stream.n_samples
    S = np.full(s, -1, dtype=np.int64)
    W = np.zeros(s)
    XS = np.zeros((s, n))
    u = np.zeros(n)
    g = np.empty(n)
    size = 0
    for epoch in range(epochs):
        for index, block in stream.blocks(epoch):
            size = _l0_block(int(loss), loss.curvature, _f64(block), index, S, W, XS,
                             size, u, y, g)
        u = XS[:size].T @ W[:size]            # drop the incremental rounding
    return selection(S[:size], W[:size], s, "L0 coordinate descent", epochs,
                     peak_active=int(size))
