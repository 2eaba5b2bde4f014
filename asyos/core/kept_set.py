"""The kept set of spec §2.1: at most ``capacity`` columns, their indices and weights.

Memory is O(n·s): one (capacity+1, n) buffer (a row per kept column, so a column is
contiguous), plus the contribution X_S w_S.  This object is the whole state of a
sequential OS run and of an Asy-OS worker.
"""

import numpy as np

from .losses import Loss
from .os_step import os_block, os_local, os_step, shrink


class KeptSet:
    """Retained features of one OS process (sequential solver or Asy-OS worker)."""

    def __init__(self, n_samples: int, capacity: int, dtype=np.float64):
        self.capacity = int(capacity)
        self.n_samples = int(n_samples)
        # columns in the stream's storage type; weights, u and gradients in float64
        self.cols = np.zeros((self.capacity + 1, self.n_samples), dtype=dtype)
        self.index = np.full(self.capacity + 1, -1, dtype=np.int64)
        self.weights = np.zeros(self.capacity + 1)
        self.size = 0
        self.limit = self.capacity   # an adaptive budget (issue 5) may lower it
        self.contribution = np.zeros(self.n_samples)  # X_S w_S, exact after every step
        self._g = np.zeros(self.n_samples)           # dL/du scratch
        self._gS = np.zeros(self.capacity + 1)       # X_Sᵀ g scratch
        self._previous = np.zeros(self.n_samples)    # X_S w_S before a step (workers)

    @property
    def nbytes(self) -> int:
        """Bytes held by the kept set: grows with n·s, never with p."""
        return sum(a.nbytes for a in (self.cols, self.index, self.weights,
                                      self.contribution, self._g, self._gS,
                                      self._previous))

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
        self.size = os_block(self.cols, self.index, self.weights, self.size,
                             self.capacity, block, block_index, self.contribution, y,
                             int(loss), float(m), self._g, self._gS, step_state)

    def run_local(self, block_index: np.ndarray, block: np.ndarray, u_local: np.ndarray,
                  y: np.ndarray, loss: Loss, eta: float, m: float) -> None:
        """An Asy-OS worker's steps over a block from its view ``u_local`` (updated)."""
        self.size = os_local(self.cols, self.index, self.weights, self.size,
                             self.limit, block, block_index, u_local, y, int(loss),
                             float(eta), float(m), self._g, self._gS, self.contribution,
                             self._previous)

    def set_limit(self, limit: int) -> None:
        """Keep at most ``limit`` (1..capacity) features from now on: an Asy-OS worker's
        adaptive budget.  Lowering it drops the smallest |w| at once."""
        self.limit = max(1, min(int(limit), self.capacity))
        if self.size > self.limit:
            self.size = shrink(self.cols, self.index, self.weights, self.size,
                               self.limit, self.contribution)

    def load(self, indices: np.ndarray, columns: np.ndarray, weights: np.ndarray) -> None:
        """Start from a saved kept set (a replacement worker resuming a lost one)."""
        k = len(indices)
        if k > self.capacity or columns.shape != (k, self.n_samples) or len(weights) != k:
            raise ValueError(f"cannot load {k} features into a kept set of capacity "
                             f"{self.capacity} and n = {self.n_samples}")
        self.cols[:k], self.index[:k], self.weights[:k] = columns, indices, weights
        self.size = k
        self.contribution[:] = self.weights[:k] @ self.cols[:k]

    def selected(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices, weights) of the kept features, sorted by feature index."""
        order = np.argsort(self.index[: self.size], kind="stable")
        return self.index[: self.size][order].copy(), self.weights[: self.size][order].copy()


def warm_up() -> None:
    """Load every compiled kernel (from numba's on-disk cache) before timing starts.

    The first call of each kernel costs ~0.1-0.5 s; runs that time themselves, and
    MPI ranks that would otherwise stall each other one by one, call this first.
    """
    from .losses import loss_value
    from .server_state import all_finite

    all_finite(np.ones(2))
    y = np.ones(2)
    for loss in Loss:
        for dtype in (np.float64, np.float32):
            kept = KeptSet(2, 1, dtype)
            column = np.ones((1, 2), dtype=dtype)
            kept.step(0, column[0], kept.contribution, y, loss, 0.1, 1.0)
            kept.run_local(np.arange(1), column, np.zeros(2), y, loss, 0.1, 1.0)
            kept.run_block(np.arange(1), column, y, loss, 1.0,
                           np.array([0.1, 1.0, 1.0, 0.0, 1.0, np.inf, 0.0]))
        loss_value(int(loss), kept.contribution, y)
