"""The OS step (Yang et al., KDD 2016, Algorithm 1) for sparse columns: cost ∝ nonzeros
touched.

A dense step costs O(n·s) whatever the data.  With CSC columns, every quantity the step
needs lives on the rows where the kept columns or the newcomer are nonzero:

* g = dL/du is per-sample, so X_Sᵀ g and x_jᵀ g need g only on those rows;
* u = X_S w_S changes by Σ_k Δw_k x_k, again only on those rows;
* the loss (for the step-size safeguard) changes only there too.

So one step costs O(nnz(X_S) + nnz(x_j)), which for text-like data (a few hundred
nonzeros per column) is orders of magnitude below n·s.  The update rule itself is the
dense kernel's (``step_weights``, ``smallest_slot``, ``vacate``, ``adapt_eta``,
``safeguard``): only where the numbers come from differs.

Storage: the kept columns' (row, value) pairs live in one pool; ``table[k]`` is slot
k's (start, length) in it.  A newcomer is appended at the pool's end; a dropped column
only loses its table entry (no copy); the caller compacts the pool between blocks
(``SparseKeptSet``), so memory stays O(nnz(X_S)).
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from .losses import grad_at, loss_at, loss_value
from .os_step import adapt_eta, safeguard, smallest_slot, step_weights, vacate
from .step_size import ADAPTIVE, ETA, LAST_LOSS, SUBSTITUTIONS


@dataclass(frozen=True)
class CSCBlock:
    """b sparse columns as the kernel reads them: column k's rows and values are
    ``rows[indptr[k]:indptr[k+1]]`` and ``vals[...]`` (int64 rows; float64 or float32
    values, the stream's dtype).  Sliceable by column like a dense block."""

    indptr: np.ndarray
    rows: np.ndarray
    vals: np.ndarray
    n_samples: int

    def __len__(self) -> int:
        return self.indptr.shape[0] - 1

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1] - self.indptr[0])

    def __getitem__(self, columns: slice) -> "CSCBlock":
        start, stop, stride = columns.indices(len(self))
        if stride != 1:
            raise ValueError("a CSC block slices by contiguous columns only")
        stop = max(start, stop)
        lo, hi = self.indptr[start], self.indptr[stop]
        return CSCBlock(self.indptr[start:stop + 1] - lo, self.rows[lo:hi],
                        self.vals[lo:hi], self.n_samples)

    def toarray(self) -> np.ndarray:
        """The dense (b, n) block: for refits and for loading a resumed kept set."""
        dense = np.zeros((len(self), self.n_samples), self.vals.dtype)
        for k in range(len(self)):
            lo, hi = self.indptr[k], self.indptr[k + 1]
            dense[k, self.rows[lo:hi]] = self.vals[lo:hi]
        return dense

    @classmethod
    def from_dense(cls, block: np.ndarray) -> "CSCBlock":
        """The nonzeros of a dense (b, n) block."""
        nonzero = block != 0
        indptr = np.zeros(block.shape[0] + 1, np.int64)
        np.cumsum(nonzero.sum(axis=1), out=indptr[1:])
        columns, rows = np.nonzero(nonzero)
        return cls(indptr, rows.astype(np.int64), np.ascontiguousarray(
            block[columns, rows]), block.shape[1])


@njit(cache=True, nogil=True)
def sparse_contribution(table, rows, vals, weights, size, out):
    """out = X_S w_S from the pool, exactly (ends the drift of incremental updates)."""
    out[:] = 0.0
    for k in range(size):
        w = weights[k]
        start = table[k, 0]
        for e in range(start, start + table[k, 1]):
            out[rows[e]] += w * vals[e]


class SparseColumns(NamedTuple):
    """A sparse kept set's buffers, as ``sparse_steps`` reads and updates them (c is
    the capacity; slot c is the newcomer's until a slot is vacated)."""

    table: np.ndarray         # (c+1, 2) int64: slot k's (start, length) in the pool
    rows: np.ndarray          # the pool's rows (int64), ``fill`` of them in use
    vals: np.ndarray          # the pool's values (the stream's dtype)
    index: np.ndarray         # (c+1,) int64: slot k's feature
    weights: np.ndarray       # (c+1,): slot k's weight
    contribution: np.ndarray  # (n,): X_S w_S


class SparseBlock(NamedTuple):
    """A ``CSCBlock`` as the kernel reads it, with the features of its columns."""

    indptr: np.ndarray   # (b+1,) int64: column k is entries indptr[k]:indptr[k+1]
    rows: np.ndarray     # int64
    vals: np.ndarray     # the stream's dtype
    index: np.ndarray    # (b,) int64: column k is feature index[k]


class SparseScratch(NamedTuple):
    """Work space of ``sparse_steps``, reused from block to block."""

    g: np.ndarray        # (n,): dL/du, valid on the touched rows
    gS: np.ndarray       # (c+1,): X_Sᵀ g, then x_jᵀ g in slot ``size``
    w_old: np.ndarray    # (c+1,): the weights before the step
    mark: np.ndarray     # (n,) bool: rows touched by this step; all False between steps
    touched: np.ndarray  # (n,) int64: those rows, in the order met


@njit(cache=True, nogil=True)
def sparse_steps(kept, size, fill, capacity, block, u_grad, separate, y, loss, m, step,
                 scratch):
    """OS steps over ``block`` (a ``SparseBlock``) on the kept set's buffers ``kept``
    (``SparseColumns``) with ``size`` slots in use, at most ``capacity`` kept;
    returns (size, fill).

    Gradients are taken at ``u_grad``: the exact u = ``kept.contribution`` in
    sequential OS (``separate`` False: they are one array), a worker's view û in
    Asy-OS (``separate`` True: û also receives the worker's own change after each step:
    a worker always sees its own pushes).  ``step`` is ``os_block``'s state (η, the
    default rule's data, the substitution count); ``fill`` is the pool's used length,
    and the caller made room for the block's nonzeros.  ``scratch``
    (``SparseScratch``) has its ``mark`` all False; it is again on return.
    """
    table, rows, vals, index, weights, contribution = kept
    indptr, block_rows, block_vals, block_index = block
    g, gS, w_old, mark, touched = scratch
    n = y.shape[0]
    inv_n = 1.0 / n
    adaptive = step[ADAPTIVE] != 0.0
    if adaptive:
        step[LAST_LOSS] = loss_value(loss, u_grad, y)
    for b in range(block_index.shape[0]):
        j = block_index[b]
        lo, hi = indptr[b], indptr[b + 1]
        if adaptive:
            nu = 0.0
            for e in range(lo, hi):
                nu += block_vals[e] * block_vals[e]
            adapt_eta(step, nu * inv_n)
        eta = step[ETA]
        # g on the rows the kept columns and x_j touch; their loss before the step
        count = 0
        f_before = 0.0
        for k in range(size + 1):
            if k < size:
                start, stop = table[k, 0], table[k, 0] + table[k, 1]
                source_rows, source_vals = rows, vals
            else:
                start, stop = lo, hi
                source_rows, source_vals = block_rows, block_vals
            total = 0.0
            for e in range(start, stop):
                r = source_rows[e]
                if not mark[r]:
                    mark[r] = True
                    touched[count] = r
                    count += 1
                    g[r] = grad_at(loss, u_grad[r], y[r]) * inv_n
                    if adaptive:
                        f_before += loss_at(loss, u_grad[r], y[r])
                total += source_vals[e] * g[r]
            gS[k] = total
        xg = gS[size]
        w_old[:size] = weights[:size]
        if step_weights(index, weights, size, j, gS, eta, m) < 0:   # a newcomer
            table[size, 0] = fill
            table[size, 1] = hi - lo
            rows[fill:fill + hi - lo] = block_rows[lo:hi]
            vals[fill:fill + hi - lo] = block_vals[lo:hi]
            fill += hi - lo
            index[size] = j
            weights[size] = -eta * xg
            w_old[size] = 0.0
            size += 1
        drop = smallest_slot(weights, capacity) if size > capacity else -1
        # u += Σ_k Δw_k x_k, the dropped column's whole weight leaving
        for k in range(size):
            delta = (0.0 if k == drop else weights[k]) - w_old[k]
            if delta != 0.0:
                start = table[k, 0]
                for e in range(start, start + table[k, 1]):
                    change = delta * vals[e]
                    contribution[rows[e]] += change
                    if separate:
                        u_grad[rows[e]] += change
        if drop >= 0:
            if index[drop] != j:
                step[SUBSTITUTIONS] += 1.0
            vacate(table, index, weights, capacity, drop)
            size = capacity
        f_after = 0.0
        for t in range(count):
            r = touched[t]
            mark[r] = False
            if adaptive:
                f_after += loss_at(loss, u_grad[r], y[r])
        if adaptive:
            safeguard(step, step[LAST_LOSS] + (f_after - f_before) * inv_n)
    sparse_contribution(table, rows, vals, weights, size, contribution)
    return size, fill


def compact(table: np.ndarray, rows: np.ndarray, vals: np.ndarray, size: int,
            room: int):
    """Pool arrays holding the ``size`` live columns packed at the front, with at
    least ``room`` free entries after them; returns (rows, vals, fill).

    Called between blocks, before the pool could overflow: dropped columns leave
    holes, so packing is amortised over many steps; the pool doubles when the live
    columns themselves need it.
    """
    live = int(table[:size, 1].sum())
    capacity = rows.shape[0]
    if live + room > capacity:
        capacity = 2 * (live + room)
    new_rows = np.empty(capacity, rows.dtype)
    new_vals = np.empty(capacity, vals.dtype)
    fill = 0
    for k in range(size):
        start, length = table[k]
        new_rows[fill:fill + length] = rows[start:start + length]
        new_vals[fill:fill + length] = vals[start:start + length]
        table[k, 0] = fill
        fill += length
    return new_rows, new_vals, fill
