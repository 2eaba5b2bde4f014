"""Sequential Online Substitution over a feature stream
(Yang et al., KDD 2016, Algorithm 1).

Drives the compiled kernel block by block and epoch by epoch.  Holds y, u and the kept
set: O(n·s) memory whatever p is; X is never held.
"""

import sys
import time
import warnings
from contextlib import contextmanager

import numpy as np

from ..core.kept_set import check_ridge, kept_set, resolve_epochs, resolve_rule, warm_up
from ..core.losses import Loss, loss_value
from ..core.projection import group_constraint
from ..core.step_size import ETA, NU_MAX, SUBSTITUTIONS, StepSize, check_scale
from ..core.sweep import ClosingSweep, open_greedily, opening_batch, sweep_size
from ..core.validate import (
    check_at_least,
    check_labels,
    check_sparsity,
    warn_if_interpolating,
)
from ..errors import InputError, StallWarning, warn_constant_selected
from ..streams import FeatureStream, Standardized, as_stream
from .result import FitResult


_POOLS: dict = {}   # threadpoolctl's controller of the BLAS pools, and when it was made


def blas_pools():
    """threadpoolctl's controller of this process's BLAS pools.  Finding them walks
    every loaded shared library (about a millisecond, more than a small fit's
    kernel), so they are looked for again only after an import, which may have
    loaded another library."""
    import scipy.linalg.cython_blas  # noqa: F401  (numba loads it when it compiles)
    from threadpoolctl import ThreadpoolController

    modules = len(sys.modules)
    if _POOLS.get("modules") != modules:
        _POOLS.update(modules=modules,
                      pools=ThreadpoolController().select(user_api="blas"))
    return _POOLS["pools"]


@contextmanager
def blas_limit(threads: int | None):
    """At most ``threads`` BLAS threads inside the block (threadpoolctl); None, or
    pools already at ``threads``: no change."""
    pools = None if threads is None else blas_pools()
    if pools is None or all(pool.num_threads == threads
                            for pool in pools.lib_controllers):
        yield
        return
    with pools.limit(limits=threads, user_api="blas"):
        yield


def fit_os(source, y, s, *, loss="squared", eta="auto", m="auto", epochs="auto",
           standardize=False, progress=None, groups=None, s2=None,
           rule="auto", ridge=None, blas_threads: int | None = 1,
           intercept: bool = False, sweep="auto", start="auto") -> FitResult:
    """Select at most ``s`` features of ``source`` for labels ``y`` by OS.

    Parameters
    ----------
    source : FeatureStream or array-like
        The features, read column by column (``asyos.streams.as_stream``).
    y : array of length n
    s : int, the feature budget (1 ≤ s ≤ p)
    loss : "squared", "squared_hinge" or "logistic"
    eta : "auto" (default rule, ``asyos.core.step_size``) or a positive number
    m : "auto" or a block factor ≥ 1: kept coefficients step by η/m
    epochs : at most this many passes over the stream; under the fitted rule the run
        stops after a pass that substituted nothing and did not grow the kept set
        (the kept set and its fitted weights no longer change) or that lowered the
        loss by less than ``STALL`` of it (swaps that no longer pay).  "auto": 10 under the fitted rule, 2 under the
        paper's (``core.kept_set.resolve_epochs``)
    standardize : centre and scale each column as it arrives (weights then refer to
        standardized features; ``mean``/``scale`` map them back)
    progress : callable(k) told after every k feature steps
    groups, s2 : group-aware OS: ``groups[j]`` is feature j's group label,
        and the kept set holds at most ``s`` features in at most ``s2`` groups (the
        bi-level projection of SGHT on each arrival; ``core/group_step.py``)
    rule : the substitution rule: "fitted" (the newcomer's fitted weight against the
        cheapest drop, ``core/fitted_step.py``), "magnitude" (the paper's: one
        gradient step, drop the smallest |w|) or "auto" (fitted, except on sparse
        streams: ``core.kept_set.resolve_rule``)
    ridge : the fitted rule's λ relative to curv·max‖x‖²/n (None: 10/n for the
        classification losses, 1e-10 for the squared loss; ``default_ridge``)
    sweep : arrivals of the closing sweep after the last pass (``core/sweep.py``): every
        feature scored against the final residual, the best not kept offered once
        more; "auto": s/8, at least 8, under the fitted rule in a run of more than
        one pass, else none; 0: none
    start : how the kept set fills: "stream" (the first s arrivals, the paper's),
        "greedy" (before the first pass, the best-scoring features of the closing
        sweep's test, s/64 per read, at least 1: forward greedy as OMP, a batch at a
        time; ``core.sweep.open_greedily``) or "auto": greedy where s ≥ n/8, the
        stream is in memory and the run has a closing sweep: there the first
        arrivals are a poor start
    intercept : fit an unpenalised intercept with the weights (``result.intercept``):
        sparse streams under the fitted rule, which never centre a column
        (``core/sparse_fitted.py``); a dense stream is centred instead (the estimators'
        ``fit_intercept``)
    blas_threads : BLAS threads during the run (default 1: the kernels run on one
        core, and a multi-threaded BLAS on their small products collapses on a busy
        machine, docs/benchmarks.md); None leaves the process's setting

    Returns
    -------
    FitResult
        ``selected`` (sorted indices, at most ``s``), ``weights``, the objective per
        epoch, the trace against steps and seconds, substitutions per epoch, and the
        intercept or standardization when asked for.

    See Also
    --------
    asyos.OnlineSubstitutionRegressor, asyos.OnlineSubstitutionClassifier : the same
        as scikit-learn estimators.
    asyos.solvers.path.fit_path : the size s chosen by a criterion.
    """
    loss = Loss.parse(loss)
    stream: FeatureStream = as_stream(source)
    if standardize:
        stream = Standardized(stream)
    y = check_labels(y, loss, stream.n_samples)
    s = check_sparsity(s, stream.n_features)
    warn_if_interpolating(s, stream.n_samples)
    constraint = group_constraint(groups, s2, stream.n_features)
    step = StepSize.parse(eta, m)
    rule = resolve_rule(rule)
    epochs = resolve_epochs(epochs, rule)
    ridge = check_ridge(ridge)
    if blas_threads is not None:
        blas_threads = check_at_least("blas_threads", blas_threads, 1, integer=True)
    m = step.block_factor(stream.n_samples, s)

    kept, blocks = kept_set(stream, s, constraint, rule, ridge=ridge, loss=loss,
                            intercept=bool(intercept))
    size = min(sweep_size(sweep, s, rule, epochs), stream.n_features)
    closing = ClosingSweep(stream, blocks, y, loss, size) if size else None
    batch = opening_batch(start, s, stream.n_samples, size, stream.in_memory)
    opening = ClosingSweep(stream, blocks, y, loss, batch) if batch else None
    warm_up(kept)
    state = step.state(loss, stream.n_samples, s)
    with blas_limit(blas_threads):
        result = passes(kept, blocks, y, loss, m, state, epochs, rule == "fitted",
                        stream.n_features, progress, closing, opening)
    refuse_all_zero(result, stream, y)
    if intercept:
        result.intercept = kept.intercept
    if standardize:
        mean, scale = stream.stats(result.selected)
        result.standardization = {"mean": mean, "scale": scale}
    return result


def refuse_all_zero(result: FitResult, stream: FeatureStream, y) -> None:
    """An empty selection for labels that are not all zero: when every column of X
    is zero, that is an error (there is nothing to select), not a result that selects
    nothing.  Only an empty fit pays for the one read of X that tells."""
    if result.selected.size or not np.any(y):
        return
    for _, block in stream.blocks():
        if np.any(block):
            return
    raise InputError(f"every column of X is zero ({stream.n_samples} samples × "
                     f"{stream.n_features} features): there is nothing to select")


# A pass that lowers the loss by less than this fraction of it does not pay: the
# fitted rule stops there even if it still swapped (columns of near-equal gain
# trading places, typical of rare words: each fits a few rows' noise).
STALL = 1e-6


def stalled(objectives: list) -> bool:
    """The last pass lowered the loss by less than ``STALL`` of it."""
    return objectives[-2] - objectives[-1] <= STALL * abs(objectives[-2])


def _trace(result: FitResult, start: float, objective: float) -> None:
    """One point of the trace: steps so far, seconds since ``start``, the loss."""
    for key, value in zip(("steps", "seconds", "objective"),
                          (result.n_steps, time.perf_counter() - start, objective)):
        result.trace[key].append(value)


def passes(kept, blocks, y, loss: Loss, m: float, state, epochs: int, fitted: bool,
           n_features: int, progress=None, closing=None, opening=None) -> FitResult:
    """Up to ``epochs`` passes of ``kept`` over ``blocks`` (the fitted rule stops after
    a pass without a swap in which the kept set did not grow, or one that did not pay,
    ``stalled``), the first after the
    greedy ``opening`` (``core.sweep.open_greedily``; None: none), the last ending with
    the ``closing`` sweep (``core.sweep.ClosingSweep``; None: none); the result of
    where they end.  ``kept`` may start non-empty: a path over s warm-starts each size
    from the last (``solvers.path``)."""
    result = FitResult(selected=np.zeros(0, np.int64), weights=np.zeros(0),
                       substitutions_per_epoch=[])
    trace_every = max(1, epochs * n_features // 200)
    next_trace = trace_every
    start = time.perf_counter()
    if opening is not None:
        result.n_steps += open_greedily(kept, opening, y, loss, m, state, progress)
    for epoch in range(epochs):
        before, size = state[SUBSTITUTIONS], kept.size
        kept.start_epoch()
        for block_index, block in blocks(epoch):
            kept.run_block(block_index, block, y, loss, m, state)
            check_scale(state[NU_MAX])
            result.n_steps += len(block_index)
            if result.n_steps >= next_trace:  # ~200 points, whatever p is
                next_trace += trace_every
                _trace(result, start, loss_value(int(loss), kept.contribution, y))
            if progress is not None:
                progress(len(block_index))
        swaps = int(state[SUBSTITUTIONS] - before)
        grew = kept.size > size   # a kept set still filling has not converged
        last = epoch == epochs - 1 or (fitted and epoch > 0 and (
            (swaps == 0 and not grew) or stalled(result.objective_per_epoch + [
                float(loss_value(int(loss), kept.contribution, y))])))
        if last and closing is not None:   # the sweep ends the last pass; where it
            #                                  swapped, one more may follow
            block_index = block = None   # a view of the pass's O(p) order: let it go
            for block_index, block in closing.arrivals(
                    kept.contribution, kept.index[:kept.size], epoch):
                kept.run_block(block_index, block, y, loss, m, state)
                check_scale(state[NU_MAX])
                result.n_steps += len(block_index)
                if progress is not None:
                    progress(len(block_index))
            _trace(result, start, loss_value(int(loss), kept.contribution, y))
            last = epoch == epochs - 1 or state[SUBSTITUTIONS] - before == swaps
        result.objective_per_epoch.append(float(loss_value(int(loss), kept.contribution,
                                                           y)))
        result.substitutions_per_epoch.append(int(state[SUBSTITUTIONS] - before))
        if epoch > 0 and stalled(result.objective_per_epoch) and swaps and not fitted:
            warnings.warn(f"OS substituted {swaps} features in pass {epoch + 1} without "
                          "lowering the loss: the paper's rule is not scale-invariant; "
                          "standardize the columns or use rule='fitted'",
                          StallWarning, stacklevel=3)
        if last:
            break   # under the fitted rule, converged: another pass would change
            #         nothing, or nothing worth it (and the sweep swapped nothing)
    result.seconds = time.perf_counter() - start
    result.objective = result.objective_per_epoch[-1]
    result.selected, result.weights = kept.selected()
    warn_constant_selected(kept.constant_features())
    result.eta = float(state[ETA])
    result.m = m
    result.kept_bytes = kept.nbytes
    return result
