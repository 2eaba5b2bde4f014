"""The closing sweep: after the last pass, every feature is scored against the final
residual and the best ones not kept are offered once more.

Within a pass OS judges each arrival against the residual of the moment it arrives.
Early in a pass that residual still holds the misfit of features yet to come, and a
weak true feature can lose to noise there; after a fixed number of passes, which weak
features a run keeps then depends on the order of the stream (docs/algorithms.md,
"The closing sweep").  One more read of the stream scores every feature by
|x_jᵀ∇L(u)| / ‖x_j‖ at the final u, the size of the loss's gradient along the unit
column (the test of Grafting, Perkins & Theiler 2003), and the ``size`` best that
are not kept arrive once more.  The substitution rule judges them as any arrival, so a sweep
swaps only where the rule finds a gain.  It reads the stream once more, computing one
dot product per feature, and holds the scores of at most 2·``size`` features.
"""

import math

import numpy as np

from ..errors import InputError
from .losses import Loss, loss_grad
from .sparse_step import CSCBlock
from .validate import check_at_least

SWEEP_FRACTION = 8   # "auto": s/8 arrivals, at least SWEEP_LEAST
SWEEP_LEAST = 8
SWEEP_ROUNDS = 2   # Asy-OS with peers: rounds of each worker's sweep (``sweep_rounds``)
OPENING_FROM = 8     # "auto": the greedy opening from s ≥ n/OPENING_FROM ...
OPENING_ROUNDS = 64  # ... in at most this many reads of the stream


def sweep_size(sweep, s: int, rule: str, epochs: int) -> int:
    """Arrivals of the closing sweep: ``sweep`` (an integer ≥ 0; 0: none) or "auto":
    ceil(s/``SWEEP_FRACTION``), at least ``SWEEP_LEAST``, under the fitted rule when
    the run makes more than one pass.  None under the paper's rule, which is kept as
    the paper has it, and none in one pass: its stream may be one that cannot be read
    twice, and where it can, the sweep's read costs a large share of the run when
    steps are cheap (a third of the pass on a dense p = 10⁶ from disk,
    docs/benchmarks.md, "The closing sweep")."""
    if isinstance(sweep, str) and sweep == "auto":
        if rule != "fitted" or epochs < 2:
            return 0
        return max(SWEEP_LEAST, math.ceil(s / SWEEP_FRACTION))
    return check_at_least("sweep", sweep, 0, integer=True)


def sweep_rounds(n_workers: int) -> int:
    """Rounds of each Asy-OS worker's closing sweep, each scored at a view that holds
    every worker's steps before it (``ServerState.hold_sweeps``): ``SWEEP_ROUNDS``
    with peers, one for a lone worker, as sequential OS.

    With peers, the first round scores a residual that still holds the signal of the
    true features no worker kept at the end of its passes: its strong ones rank
    first, and weak true features rank behind features correlated with that misfit.
    A second round, scored once the first round's newcomers are fitted, finds them
    (docs/algorithms.md, "The closing sweep").  Sequential OS's one kept set leaves
    no such misfit."""
    return SWEEP_ROUNDS if n_workers > 1 else 1


def _scores(block, g: np.ndarray) -> np.ndarray:
    """|x_jᵀg| / ‖x_j‖ for each column of a dense (b, n) block or a ``CSCBlock`` (0 for
    an all-zero column)."""
    if isinstance(block, CSCBlock):
        counts = np.diff(block.indptr)
        column = np.repeat(np.arange(len(block)), counts)
        start = block.indptr[0]
        rows, vals = block.rows[start:start + counts.sum()], \
            block.vals[start:start + counts.sum()].astype(np.float64, copy=False)
        dots, squares = (np.bincount(column, weights=w, minlength=len(block)).astype(
            np.float64, copy=False) for w in (vals * g[rows], vals * vals))
    else:   # in the block's own type (float32 from disk): a ranking needs no more
        values = np.asarray(block)
        dots = (values @ g.astype(values.dtype, copy=False)).astype(np.float64)
        squares = np.einsum("ij,ij->i", values, values).astype(np.float64)
    norms = np.sqrt(squares)
    return np.divide(np.abs(dots), norms, out=np.zeros_like(dots), where=norms > 0)


def sweep_candidates(blocks, u: np.ndarray, y: np.ndarray, loss: Loss,
                     kept: np.ndarray, size: int, stream=None) -> np.ndarray:
    """The ``size`` features of ``blocks`` (a callable giving an iterator of
    (block_index, block)) with the largest |x_jᵀ∇L(u)| / ‖x_j‖ that are not in
    ``kept``, sorted by index (fewer where fewer score above 0); scored in one product
    where ``stream``'s ``column_scores`` can (``blocks`` is then not read)."""
    g = loss_grad(int(loss), np.ascontiguousarray(u, dtype=np.float64), y,
                  np.empty(u.shape[0]))
    best_index, best_score = np.zeros(0, np.int64), np.zeros(0)
    kept = np.asarray(kept, np.int64)
    whole = None if stream is None else stream.column_scores(g)
    for block_index, score in [whole] if whole is not None else (
            (block_index, _scores(block, g)) for block_index, block in blocks()):
        fresh = (score > 0) & ~np.isin(block_index, kept)
        best_index = np.concatenate([best_index, block_index[fresh]])
        best_score = np.concatenate([best_score, score[fresh]])
        if best_index.size > 2 * size:
            top = np.argpartition(-best_score, size - 1)[:size]
            best_index, best_score = best_index[top], best_score[top]
    if best_index.size > size:
        best_index = best_index[np.argpartition(-best_score, size - 1)[:size]]
    return np.sort(best_index)


class ClosingSweep:
    """The closing sweep of one kept set over ``stream`` (the whole stream for
    sequential OS, a worker's shard for Asy-OS): ``blocks`` is the reader the kept set
    was made with (``core.kept_set.kept_set``: the stream's ``blocks`` or
    ``step_blocks``), ``size`` ≥ 1 the arrivals it offers (``sweep_size``)."""

    def __init__(self, stream, blocks, y: np.ndarray, loss: Loss, size: int):
        self.stream, self.blocks, self.y, self.loss = stream, blocks, y, loss
        self.size = size

    def arrivals(self, u: np.ndarray, kept: np.ndarray, epoch: int):
        """The candidates at ``u`` (the final u, or a worker's view of it), as blocks
        in the kept set's form; ``epoch``: the pass whose order the scan reads."""
        candidates = sweep_candidates(lambda: self.blocks(epoch), u, self.y,
                                      self.loss, kept, self.size, self.stream)
        if candidates.size == 0:
            return iter(())
        return getattr(self.stream.subset(candidates), self.blocks.__name__)(0)


def opening_batch(start, s: int, n_samples: int, sweep: int,
                  in_memory: bool = True) -> int:
    """Features the greedy opening admits per read of the stream (0: no opening, the
    kept set fills with the first s arrivals).  ``start``: "greedy", "stream" or
    "auto": greedy where the run has a closing sweep (``sweep`` > 0: the stream is
    read again, under the fitted rule), the stream is in memory (up to 64 more reads
    cost little there) and s ≥ n/``OPENING_FROM``.  There the first s arrivals are a
    poor start: the rule's single swaps end in a local optimum with up to 5 times
    OMP's training error at s = n/2 (docs/results.md, "Large k")."""
    if start not in ("auto", "greedy", "stream"):
        raise InputError(f"start must be 'auto', 'greedy' or 'stream', got {start!r}")
    if start == "stream" or (start == "auto" and (
            not sweep or not in_memory or OPENING_FROM * s < n_samples)):
        return 0
    return max(1, math.ceil(s / OPENING_ROUNDS))


def open_greedily(kept, opening: ClosingSweep, y, loss: Loss, m: float, state,
                  progress=None) -> int:
    """Fill ``kept`` before the first pass as a forward greedy search does, ``opening.
    size`` features per read: the features not kept with the largest
    |x_jᵀ∇L(u)| / ‖x_j‖ at the current u (OMP's choice, a batch at a time) arrive
    and, the set not being full, are admitted.  Returns the arrivals made."""
    steps = 0
    while kept.size < kept.limit:
        before = kept.size
        for block_index, block in opening.arrivals(kept.contribution,
                                                   kept.index[:kept.size], 0):
            kept.run_block(block_index, block, y, loss, m, state)
            steps += len(block_index)
            if progress is not None:
                progress(len(block_index))
        if kept.size == before:   # nothing scored above 0, or nothing was admitted
            break
    return steps
