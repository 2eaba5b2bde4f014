"""The kept set S of OS: at most ``capacity`` columns, their indices and weights.

Memory is O(n·s): one (capacity+1, n) buffer (a row per kept column, so a column is
contiguous), plus the contribution X_S w_S.  This object is the whole state of a
sequential OS run and of an Asy-OS worker.  Its n-long buffers start on a cache line
(``aligned_zeros``).
"""

import numpy as np

from ..errors import InputError
from .aligned import aligned_zeros
from .compile_notice import compile_notice
from .drivers import PLAIN, DenseColumns, DenseScratch, GroupLimit, os_block, os_local
from .fitted_step import (
    fitted_block,
    fitted_drop_to,
    fitted_local,
    fitted_state,
    refactor,
)
from .group_step import group_os_step
from .losses import Loss, loss_value
from .os_step import drop_to, os_step, recompute, shrink
from .sparse_fitted import (
    OFFSET,
    rebuild_rows,
    sparse_fit,
    sparse_fitted_run,
)
from .sparse_step import (
    CSCBlock,
    SparseBlock,
    SparseColumns,
    SparseScratch,
    compact,
    sparse_contribution,
    sparse_steps,
)
from .step_size import NU_MAX, SUBSTITUTIONS, check_scale
from .validate import check_at_least, check_choice, check_positive


class _Kept:
    """What every kept set holds besides its columns: indices, weights, X_S w_S."""

    def __init__(self, n_samples: int, capacity: int):
        self.capacity = int(capacity)
        self.n_samples = int(n_samples)
        self.index = np.full(self.capacity + 1, -1, dtype=np.int64)
        self.weights = np.zeros(self.capacity + 1)
        self.size = 0
        self.limit = self.capacity   # an adaptive budget may lower it
        self.contribution = aligned_zeros(self.n_samples)  # X_S w_S, exact after a step
        self._g = aligned_zeros(self.n_samples)      # dL/du scratch
        self._gS = np.zeros(self.capacity + 1)       # X_Sᵀ g scratch
        self._rms = np.zeros(self.capacity + 1)      # ‖x‖/√n of slot k's column ...
        self._rms_of = np.full(self.capacity + 1, -1, np.int64)   # ... feature

    @property
    def nbytes(self) -> int:
        """Bytes held by the kept set: grows with n·s (or nnz(X_S)), never with p."""
        return sum(a.nbytes for a in vars(self).values() if isinstance(a, np.ndarray))

    def start_epoch(self) -> None:
        """A new pass over the stream begins (the fitted rule refreshes its model)."""

    def selected(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices, weights) of the kept features, sorted by feature index."""
        order = np.argsort(self.index[: self.size], kind="stable")
        return self.index[: self.size][order].copy(), self.weights[: self.size][order].copy()

    def importance(self) -> np.ndarray:
        """What each kept feature (in ``selected``'s order) is worth, comparable across
        Asy-OS workers, which rank them for adaptive budgets: |w| under the paper's
        rule, whose columns share a scale only when the data is standardized."""
        order = np.argsort(self.index[: self.size], kind="stable")
        return self._worth()[order]

    def _worth(self) -> np.ndarray:
        return np.abs(self.weights[: self.size])

    def constant_features(self) -> np.ndarray:
        """Kept features whose column is constant (all-zero included) and whose weight
        is not 0: with no intercept in the model, such a column stands in for one."""
        weighted = self.weights[: self.size] != 0
        slots = np.flatnonzero(self._constant_slots() & weighted)
        return np.sort(self.index[slots])

    def _constant_slots(self) -> np.ndarray:
        cols = self.cols[: self.size]
        return cols.max(axis=1, initial=-np.inf) == cols.min(axis=1, initial=np.inf)

    def _check_load(self, indices, columns, weights) -> int:
        k = len(indices)
        if k > self.capacity or columns.shape != (k, self.n_samples) or len(weights) != k:
            raise ValueError(f"cannot load {k} features into a kept set of capacity "
                             f"{self.capacity} and n = {self.n_samples}")
        return k

    def _load_dense(self, indices, columns, weights) -> int:
        """A saved kept set into the dense buffers (dense kept sets); returns its
        size."""
        k = self._check_load(indices, columns, weights)
        self.cols[:k], self.index[:k], self.weights[:k] = columns, indices, weights
        self.size = k
        self.contribution[:] = self.weights[:k] @ self.cols[:k]
        return k


class KeptSet(_Kept):
    """Retained features of one OS process (sequential solver or Asy-OS worker),
    with dense columns."""

    groups = PLAIN    # plain OS; see GroupKeptSet

    def __init__(self, n_samples: int, capacity: int, dtype=np.float64):
        super().__init__(n_samples, capacity)
        # columns in the stream's storage type; weights, u and gradients in float64
        self.cols = aligned_zeros((self.capacity + 1, self.n_samples), dtype)
        self._previous = aligned_zeros(self.n_samples)  # X_S w_S before a step
        # the same arrays, as the drivers take them (none is ever reallocated)
        self._buffers = DenseColumns(self.cols, self.index, self.weights,
                                     self.contribution)
        self._scratch = DenseScratch(self._g, self._gS, self._previous)

    def step(self, j: int, x: np.ndarray, u_grad: np.ndarray, y: np.ndarray,
             loss: Loss, eta: float, m: float) -> int:
        """One OS step with gradients at ``u_grad``; returns the dropped index or -1."""
        self.size, dropped = os_step(self.cols, self.index, self.weights, self.size,
                                     self.capacity, x, int(j), u_grad, y, int(loss),
                                     float(eta), float(m), self._g, self._gS,
                                     self.contribution)
        return int(dropped)

    def run_block(self, block_index: np.ndarray, block: np.ndarray, y: np.ndarray,
                  loss: Loss, m: float, step_state: np.ndarray) -> None:
        """Sequential OS over a block, gradients at the exact u = X_S w_S."""
        self.size = os_block(self._buffers, self.size, self.limit, block, block_index,
                             y, int(loss), float(m), step_state, self._scratch,
                             self.groups)

    def run_local(self, block_index: np.ndarray, block: np.ndarray, u_local: np.ndarray,
                  y: np.ndarray, loss: Loss, eta: float, m: float, start: int = 0,
                  end: int | None = None, fresh: bool = True) -> int | None:
        """An Asy-OS worker's steps over features ``start:end`` of a block from its
        view ``u_local`` (updated).  Returns its substitutions where the rule counts
        them (the fitted rules), else None.  ``fresh``: ``u_local`` is a new view,
        not the one a push began in an earlier block (the fitted rules scale their
        moves per view, ``FittedKeptSet._damping``)."""
        block_index, block = block_index[start:end], block[start:end]
        self.size = os_local(self._buffers, self.size, self.limit, block, block_index,
                             u_local, y, int(loss), float(eta), float(m), self._scratch,
                             self.groups)
        return None

    def twin(self):
        """(a 2-sample kept set of this kind and storage type, room for 2, a block):
        ``warm_up`` runs it to compile exactly these kernels (a group-aware kept set
        runs the same ones: its group labels are an int64 array either way)."""
        return KeptSet(2, 2, self.cols.dtype), np.eye(2, dtype=self.cols.dtype)

    def set_limit(self, limit: int) -> None:
        """Keep at most ``limit`` (1..capacity) features from now on: an Asy-OS worker's
        adaptive budget.  Lowering it drops the smallest |w| at once."""
        self.limit = max(1, min(int(limit), self.capacity))
        if self.size > self.limit:
            self.size = shrink(self.cols, self.index, self.weights, self.size,
                               self.limit, self.contribution)

    def load(self, indices: np.ndarray, columns: np.ndarray, weights: np.ndarray) -> None:
        """Start from a saved kept set (a replacement worker resuming a lost one)."""
        self._load_dense(indices, columns, weights)


class GroupKeptSet(KeptSet):
    """A kept set of at most ``capacity`` features in at most ``max_groups`` groups
    (group-aware OS); ``group_of[j]`` is feature j's group id (int64,
    trusted: validate before).  The drivers take the bi-level projection's branch."""

    def __init__(self, n_samples: int, capacity: int, group_of: np.ndarray,
                 max_groups: int, dtype=np.float64):
        super().__init__(n_samples, capacity, dtype)
        self.groups = GroupLimit(np.ascontiguousarray(group_of, dtype=np.int64),
                                 int(max_groups))

    def step(self, j, x, u_grad, y, loss: Loss, eta, m) -> int:
        """One step with gradients at ``u_grad``; returns how many kept features left."""
        self.size, dropped = group_os_step(
            self.cols, self.index, self.weights, self.size, self.capacity, x, int(j),
            u_grad, y, int(loss), float(eta), float(m), self._g, self._gS,
            self.contribution, *self.groups)
        return int(dropped)

    def groups_kept(self) -> int:
        """Distinct groups among the kept features (≤ ``max_groups`` always)."""
        return int(np.unique(self.groups.group_of[self.index[:self.size]]).size)


RULES = ("auto", "fitted", "magnitude")
FITTED_EPOCHS = 10   # the fitted rule's cap on passes; it stops after one without a
#                      swap or a growth of the kept set
PAPER_EPOCHS = 2     # passes of the paper's rule by default
ASY_FITTED_EPOCHS = 3   # Asy-OS workers under the fitted rule: they cannot stop alone


def resolve_rule(rule: str) -> str:
    """The substitution rule in force: "auto" is the fitted rule, on dense and sparse
    streams alike (it is scale-invariant, so unscaled sparse columns are judged by the
    loss they remove: ``core/sparse_fitted.py``); "magnitude" is the paper's."""
    check_choice("rule", rule, RULES)
    return "fitted" if rule == "auto" else rule


def resolve_epochs(epochs, rule: str, asy: bool = False) -> int:
    """Passes over the stream: ``epochs``, or for "auto" ``FITTED_EPOCHS`` under the
    fitted rule (a cap: the run ends after a pass without a swap) and ``PAPER_EPOCHS``
    otherwise; for Asy-OS (``asy``), whose workers cannot tell a converged run,
    ``ASY_FITTED_EPOCHS`` under the fitted rule (3 passes measured closer to
    sequential OS than 2, docs/results.md) and ``PAPER_EPOCHS`` otherwise."""
    if isinstance(epochs, str) and epochs == "auto":
        if rule == "fitted":
            return ASY_FITTED_EPOCHS if asy else FITTED_EPOCHS
        return PAPER_EPOCHS
    return check_at_least("epochs", epochs, 1, integer=True)


def kept_set(stream, capacity: int, groups=None, rule: str = "auto",
             ridge: float | None = None, loss: Loss = Loss.SQUARED,
             damping: float = 1.0, intercept: bool = False):
    """(kept set, its block reader) for ``stream``: under the fitted rule a
    ``FittedKeptSet`` on dense blocks; else the stream's own (dense, or CSC for a
    sparse stream, ``FeatureStream.kept_set``), or with ``groups`` =
    (group_of, max_groups) a group-aware one, which reads dense blocks.
    ``ridge``: the fitted rule's relative ridge (None: ``default_ridge``);
    ``damping``: the scale of its moves in an Asy-OS worker (``FittedKeptSet``);
    ``intercept``: a sparse stream's fitted kept set fits an intercept too
    (``SparseFittedKeptSet``; other kept sets are given centred columns instead)."""
    rule = resolve_rule(rule)
    if intercept and not (stream.sparse and rule == "fitted" and groups is None):
        raise InputError("intercept=True is for sparse streams under the fitted rule "
                         "without groups; centre dense columns instead "
                         "(standardize=True, or the estimators' fit_intercept)")
    if rule == "fitted":
        ridge = fitted_ridge(loss, stream.n_samples, ridge)
        if stream.sparse and groups is None:
            return SparseFittedKeptSet(stream.n_samples, capacity, ridge, stream.dtype,
                                       damping=damping, intercept=intercept), \
                stream.step_blocks
        return FittedKeptSet(stream.n_samples, capacity, ridge, stream.dtype,
                             *(groups or (None, 0)), damping=damping), stream.blocks
    if groups is None:
        return stream.kept_set(capacity), stream.step_blocks
    return GroupKeptSet(stream.n_samples, capacity, groups[0], groups[1],
                        stream.dtype), stream.blocks


def check_ridge(ridge) -> float | None:
    """The fitted rule's relative ridge as given: None (``default_ridge``) or a
    number > 0."""
    return None if ridge is None else check_positive("ridge", ridge)


def default_ridge(loss: Loss, n_samples: int) -> float:
    """The fitted rule's λ relative to the curvature of the largest column: 10/n for
    the classification losses (separable data would otherwise send the weights to
    infinity; 1/n to 100/n measured alike, docs/results.md), 1e-10 for the squared
    loss (only to keep H_S invertible: the weights are least squares to ~1e-10)."""
    return 10.0 / n_samples if loss.is_classification else 1e-10


def fitted_ridge(loss: Loss, n_samples: int, ridge: float | None) -> float:
    """The fitted rule's λ relative to the largest ‖x‖²/n: ``ridge`` (None:
    ``default_ridge``) in units of the loss's curvature bound."""
    ridge = default_ridge(loss, n_samples) if ridge is None else ridge
    return ridge * loss.curvature


class FittedKeptSet(_Kept):
    """A dense kept set under the fitted substitution rule (``core/fitted_step.py``):
    the same interface as ``KeptSet``, plus H_S⁻¹ (O(s²))."""

    def __init__(self, n_samples: int, capacity: int, ridge: float, dtype=np.float64,
                 group_of=None, max_groups: int = 0, damping: float = 1.0):
        super().__init__(n_samples, capacity)
        self.cols = aligned_zeros((self.capacity + 1, self.n_samples), dtype)
        self.model = fitted_state(self.n_samples, self.capacity, ridge, group_of,
                                  max_groups)
        self.damping = damping   # an Asy-OS worker's least scale of its moves
        self.scale = 1.0      # its scale now
        self._seen = np.inf   # the loss at its last view
        self._eta = None      # the first η a worker was given: the server's shrinking
        #                       of η (its safeguard) scales the moves by as much
        self._moves = 1.0     # the scale of the moves from the current view
        self._block, self._run = None, np.zeros(3, np.int64)   # ``fitted_local``'s

    def twin(self):
        # with groups, the kernels that hold the group code (``_group_swap``)
        grouped = self.model.group_of is not None
        twin = FittedKeptSet(2, 2, self.model.info[0]["ridge"], self.cols.dtype,
                             group_of=np.zeros(2, np.int64) if grouped else None,
                             max_groups=1 if grouped else 0, damping=self.damping)
        return twin, np.eye(2, dtype=self.cols.dtype)

    def start_epoch(self) -> None:
        self.model.info[0]["refresh_due"] = True   # refresh H_S⁻¹ (ends rounding drift)

    def _worth(self) -> np.ndarray:
        """|w_k|·‖x_k‖/√n: the weight of the column standardized to ‖x‖²/n = 1, so
        that a column's scale does not decide its rank (on standardized data, |w|).
        ‖x_k‖/√n is computed once per slot and feature (a worker pushes often)."""
        k = self.size
        slots = np.flatnonzero(self._rms_of[:k] != self.index[:k])
        if slots.size:
            self._rms[slots] = np.sqrt(self._squares(slots) / self.n_samples)
            self._rms_of[slots] = self.index[slots]
        return np.abs(self.weights[:k]) * self._rms[:k]

    def _squares(self, slots: np.ndarray) -> np.ndarray:
        """‖x‖² of the columns in ``slots``, in one product (a lone worker's push of
        two blocks changes a dozen)."""
        columns = self.cols[slots].astype(np.float64, copy=False)
        return np.einsum("kr,kr->k", columns, columns)

    def run_block(self, block_index, block, y, loss: Loss, m: float,
                  step_state: np.ndarray) -> None:
        """Sequential OS over a block; η and m are not used by this rule."""
        self._block, self._run[:] = None, 0   # its own run of batched products
        self.size, swaps = fitted_block(self.cols, self.index, self.weights, self.size,
                                        self.limit, block, block_index,
                                        self.contribution, y, int(loss), self.model,
                                        self._run)
        step_state[SUBSTITUTIONS] += swaps
        step_state[NU_MAX] = self.model.info[0]["nu"]   # the driver checks its scale

    def run_local(self, block_index, block, u_local, y, loss: Loss, eta: float,
                  m: float, start: int = 0, end: int | None = None,
                  fresh: bool = True) -> int:
        """An Asy-OS worker's arrivals ``start:end`` of a block from its view
        ``u_local`` (``fresh``: as ``KeptSet.run_local``); returns its
        substitutions.  The batched products of a block's arrivals outlive a call
        (``fitted_local``): a worker passes the same block for all its pushes."""
        damping = self._damping(u_local, y, loss, eta) if fresh else self._moves
        if start == 0 or block is not self._block:   # a new block (streams may
            self._block, self._run[:] = block, 0    # reuse one buffer for all)
        end = block.shape[0] if end is None else end
        self.size, swaps = fitted_local(self.cols, self.index, self.weights, self.size,
                                        self.limit, block, block_index, start, end,
                                        u_local, y, int(loss), self.contribution,
                                        damping, self.model, self._run)
        check_scale(self.model.info[0]["nu"])
        return swaps

    def _damping(self, u_local, y, loss: Loss, eta: float) -> float:
        """The scale of a worker's moves from this view on: halved when the loss at
        the view rose since the last (the others' moves and ours overshot), else
        grown back towards 1; and shrunk as the server shrank η."""
        if self._eta is None:
            self._eta = eta
        seen = loss_value(int(loss), u_local, y)
        if seen > self._seen * (1.0 + 1e-9):
            self.scale = max(self.damping, 0.5 * self.scale)
        else:
            self.scale = min(1.0, 1.25 * self.scale)
        self._seen = seen
        self._moves = self.scale * min(1.0, eta / self._eta)
        return self._moves

    def set_limit(self, limit: int) -> None:
        """As ``KeptSet.set_limit``, dropping the cheapest coordinates in the model."""
        self.limit = max(1, min(int(limit), self.capacity))
        if self.size > self.limit:
            self.size = fitted_drop_to(self.cols, self.index, self.weights, self.size,
                                       self.limit, self.model)
            recompute(self.weights, self.cols, self.size, self.contribution)
            self.model.info[["objective_current", "batch_valid", "remembered"]] = \
                False   # S changed

    def _scale_of(self, columns) -> None:
        """ν, the largest ‖x‖²/n of loaded ``columns`` (k, n), and λ = ridge · ν."""
        info = self.model.info[0]
        nu = float(np.max(np.einsum("kr,kr->k", columns, columns))) / \
            self.n_samples if len(columns) else 0.0
        info["nu"], info["lam"] = nu, info["ridge"] * nu

    def load(self, indices, columns, weights) -> None:
        """Start from a saved kept set; the model is rebuilt at the next arrival."""
        k = self._load_dense(indices, columns, weights)
        self._scale_of(self.cols[:k])
        info = self.model.info[0]
        # until the next arrival computes the loss's curvature at u, its bound
        self.model.curv[:] = 1.0 / self.n_samples
        refactor(self.cols, k, self.model)
        info["refresh_due"], info["objective_current"], info["batch_valid"] = \
            True, False, False
        info["remembered"] = False


class _Pool:
    """The kept columns' nonzeros in one pool, a (start, length) entry a slot: a drop
    only moves a table entry; the pool is packed between blocks when it fills."""

    def _pool(self, dtype) -> None:
        self.table = np.zeros((self.capacity + 1, 2), np.int64)  # (start, length)
        self.rows = np.zeros(1024, np.int64)
        self.vals = np.zeros(1024, dtype)
        self.fill = 0

    def _room(self, nnz: int) -> None:
        """Room at the pool's end for ``nnz`` more nonzeros (a block's)."""
        if self.fill + nnz > self.rows.shape[0]:
            self.rows, self.vals, self.fill = compact(self.table, self.rows, self.vals,
                                                      self.size, nnz)

    def _constant_slots(self) -> np.ndarray:
        """No nonzero, or a nonzero in every row all of one value."""
        constant = np.zeros(self.size, np.bool_)
        for slot, (start, length) in enumerate(self.table[: self.size]):
            values = self.vals[start:start + length]
            constant[slot] = length == 0 or (length == self.n_samples
                                             and values.min() == values.max())
        return constant

    def _load_pool(self, indices, columns, weights) -> int:
        k = self._check_load(indices, columns, weights)
        block = CSCBlock.from_dense(np.asarray(columns, self.vals.dtype))
        self.table[:k, 0], self.table[:k, 1] = block.indptr[:-1], np.diff(block.indptr)
        self.rows, self.vals = block.rows.copy(), block.vals.copy()
        self.fill = block.nnz
        self.index[:k], self.weights[:k] = indices, weights
        self.size = k
        sparse_contribution(self.table, self.rows, self.vals, self.weights, k,
                            self.contribution)
        return k


class SparseKeptSet(_Pool, _Kept):
    """The kept set for sparse (CSC) streams: the same interface as ``KeptSet``, but
    each step costs O(nnz(X_S) + nnz(x_j)) instead of O(n·s) (``sparse_step``), and
    the columns take O(nnz(X_S)) memory."""

    def __init__(self, n_samples: int, capacity: int, dtype=np.float64):
        _Kept.__init__(self, n_samples, capacity)
        self._pool(dtype)
        self._mark = np.zeros(self.n_samples, np.bool_)
        self._touched = np.zeros(self.n_samples, np.int64)
        self._w_old = np.zeros(self.capacity + 1)
        self._scratch = SparseScratch(self._g, self._gS, self._w_old, self._mark,
                                      self._touched)

    def _steps(self, block_index, block: CSCBlock, u_grad, separate, y, loss, m,
               step_state, capacity) -> None:
        self._room(block.nnz)
        kept = SparseColumns(self.table, self.rows, self.vals, self.index, self.weights,
                             self.contribution)
        self.size, self.fill = sparse_steps(
            kept, self.size, self.fill, capacity,
            SparseBlock(block.indptr, block.rows, block.vals, block_index), u_grad,
            separate, y, int(loss), float(m), step_state, self._scratch)

    def twin(self):
        dense = np.eye(2, dtype=self.vals.dtype)
        return SparseKeptSet(2, 2, self.vals.dtype), CSCBlock.from_dense(dense)

    def run_block(self, block_index: np.ndarray, block: CSCBlock, y: np.ndarray,
                  loss: Loss, m: float, step_state: np.ndarray) -> None:
        """Sequential OS over a CSC block, gradients at the exact u = X_S w_S."""
        self._steps(block_index, block, self.contribution, False, y, loss, m,
                    step_state, self.limit)

    def run_local(self, block_index: np.ndarray, block: CSCBlock, u_local: np.ndarray,
                  y: np.ndarray, loss: Loss, eta: float, m: float, start: int = 0,
                  end: int | None = None, fresh: bool = True) -> None:
        """An Asy-OS worker's steps over a CSC block from its view ``u_local``
        (substitutions not counted: None), as ``KeptSet.run_local``."""
        block_index, block = block_index[start:end], block[start:end]
        fixed = np.array([float(eta), 0.0, 0.0, 0.0, 1.0, np.inf, 0.0])
        self._steps(block_index, block, u_local, True, y, loss, m, fixed, self.limit)

    def set_limit(self, limit: int) -> None:
        """As ``KeptSet.set_limit``."""
        self.limit = max(1, min(int(limit), self.capacity))
        if self.size > self.limit:
            self.size = drop_to(self.table, self.index, self.weights, self.size,
                                self.limit)
            sparse_contribution(self.table, self.rows, self.vals, self.weights,
                                self.size, self.contribution)

    def load(self, indices: np.ndarray, columns: np.ndarray, weights: np.ndarray) -> None:
        """Start from a saved kept set; ``columns`` dense (k, n)."""
        self._load_pool(indices, columns, weights)


class SparseFittedKeptSet(_Pool, FittedKeptSet):
    """A sparse kept set under the fitted rule (``core/sparse_fitted.py``): an
    arrival costs what the newcomer's overlap with the kept columns costs; the
    columns are held as nonzeros and once more a row at a time (O(n·s)).  ``intercept``: fit an unpenalised intercept with the
    weights, without centring any column (sequential OS only)."""

    def __init__(self, n_samples: int, capacity: int, ridge: float, dtype=np.float64,
                 damping: float = 1.0, intercept: bool = False):
        _Kept.__init__(self, n_samples, capacity)
        self._pool(dtype)
        self.model = fitted_state(self.n_samples, self.capacity, ridge)
        self.sparse = sparse_fit(self.n_samples, self.capacity, intercept)
        self.damping, self.scale = damping, 1.0
        self._seen, self._eta = np.inf, None

    @property
    def intercept(self) -> float:
        """The intercept fitted with the weights (0 without ``intercept``)."""
        return float(self.sparse.extra[OFFSET])

    def _squares(self, slots: np.ndarray) -> np.ndarray:
        squares = np.empty(slots.size)
        for i, (start, length) in enumerate(self.table[slots]):
            values = self.vals[start:start + length].astype(np.float64, copy=False)
            squares[i] = np.dot(values, values)
        return squares

    def twin(self):
        twin = SparseFittedKeptSet(2, 2, self.model.info[0]["ridge"], self.vals.dtype,
                                   damping=self.damping)
        return twin, CSCBlock.from_dense(np.eye(2, dtype=self.vals.dtype))

    def _columns(self) -> SparseColumns:
        return SparseColumns(self.table, self.rows, self.vals, self.index, self.weights,
                             self.contribution)

    def start_epoch(self) -> None:
        """Refresh H_S⁻¹, and X_S w_S exactly (ends the drift of the moves' updates)."""
        sparse_contribution(self.table, self.rows, self.vals, self.weights, self.size,
                            self.contribution)
        self.contribution += self.intercept
        self.model.info[0]["refresh_due"] = True
        self.model.info[0]["objective_current"] = False

    def run_block(self, block_index, block: CSCBlock, y, loss: Loss, m: float,
                  step_state: np.ndarray) -> None:
        """Sequential OS over a CSC block; η and m are not used by this rule."""
        self._room(block.nnz)
        self.size, self.fill, swaps = sparse_fitted_run(
            self._columns(), self.size, self.fill, self.limit,
            SparseBlock(block.indptr, block.rows, block.vals, block_index),
            self.contribution, y, int(loss), False, 1.0, self.model, self.sparse)
        step_state[SUBSTITUTIONS] += swaps
        step_state[NU_MAX] = self.model.info[0]["nu"]

    def run_local(self, block_index, block: CSCBlock, u_local, y, loss: Loss,
                  eta: float, m: float, start: int = 0, end: int | None = None,
                  fresh: bool = True) -> int:
        """An Asy-OS worker's arrivals ``start:end`` of a CSC block from its view
        ``u_local`` (``fresh``: as ``KeptSet.run_local``); returns its
        substitutions."""
        block_index, block = block_index[start:end], block[start:end]
        damping = self._damping(u_local, y, loss, eta) if fresh else self._moves
        self._room(block.nnz)
        self.size, self.fill, swaps = sparse_fitted_run(
            self._columns(), self.size, self.fill, self.limit,
            SparseBlock(block.indptr, block.rows, block.vals, block_index), u_local,
            y, int(loss), True, damping, self.model, self.sparse)
        check_scale(self.model.info[0]["nu"])
        return swaps

    def set_limit(self, limit: int) -> None:
        """As ``FittedKeptSet.set_limit``."""
        self.limit = max(1, min(int(limit), self.capacity))
        if self.size > self.limit:
            self.size = fitted_drop_to(self.table, self.index, self.weights, self.size,
                                       self.limit, self.model)
            rebuild_rows(self.table, self.rows, self.vals, self.size, self.model,
                         self.sparse)
            sparse_contribution(self.table, self.rows, self.vals, self.weights,
                                self.size, self.contribution)
            self.model.info[["objective_current", "remembered"]] = False

    def load(self, indices, columns, weights) -> None:
        """Start from a saved kept set; the model is rebuilt at the next arrival."""
        k = self._load_pool(indices, columns, weights)
        self._scale_of(columns)
        rebuild_rows(self.table, self.rows, self.vals, k, self.model, self.sparse)
        info = self.model.info[0]
        info["refresh_due"], info["objective_current"], info["remembered"] = \
            True, False, False


def _kernels_of(twin, block, use: str) -> str:
    """A name for the kernels a twin compiles: its kind, storage type, use and
    whether it carries groups."""
    values = block.vals if isinstance(block, CSCBlock) else block
    grouped = getattr(getattr(twin, "model", None), "group_of", None) is not None
    return f"{type(twin).__name__}-{values.dtype}-{use}{'-groups' if grouped else ''}"


# The kernels' names (``_kernels_of``) this process has warmed up: numba keeps what
# it compiled or loaded, so a second warm-up of a set would only take its lock files
# again (a fraction of a millisecond, a share of a small fit).
_WARM: set[str] = set()


def warm_up(*kept_sets, asy: bool = False) -> None:
    """Compile, or load from numba's on-disk cache, the kernels each kept set will
    run, before a run's clock starts: a two-sample twin of the same kind and storage
    type takes one block (for an Asy-OS worker, ``asy``, a local block, and apart
    a budget cut).  Only what the run needs is compiled; the first run on a machine
    compiles, which takes seconds, so that wait is announced once on stderr.  Each
    set of kernels (a twin's kind, storage type and use) has its own compile lock:
    processes starting together compile each set once, and meanwhile another set if
    there is one: under ``mpiexec -n 3`` one worker compiles the local block while
    the other compiles the budget cut, and a ZeroMQ worker, which warms both rules
    before its server names one, one rule's sets while another worker compiles the
    other's."""
    y, index = np.ones(2), np.arange(2)
    state = np.array([0.1, 1.0, 1.0, 0.0, 1.0, np.inf, 0.0])
    uses = ("worker", "cut") if asy else ("sequential",)
    warm_ups = [(*kept.twin(), use) for kept in kept_sets for use in uses]
    warm_ups = [item for item in warm_ups if _kernels_of(*item) not in _WARM]
    if not warm_ups:   # each set already ran in this process: nothing to load
        return
    with compile_notice() as turns:
        for twin, block, use in turns(warm_ups, lambda item: _kernels_of(*item)):
            if use == "worker":   # a worker steps from its view ...
                twin.run_local(index, block, np.zeros(2), y, Loss.SQUARED, 0.1, 1.0)
            elif use == "cut":    # ... and a budget cut drops features (a kernel
                twin.load(index, np.eye(2), np.ones(2))   # compiled mid-run stalls
                twin.set_limit(1)   # its worker for seconds: recall 0.58, not 1)
            else:
                twin.run_block(index, block, y, Loss.SQUARED, 1.0, state)
            _WARM.add(_kernels_of(twin, block, use))
