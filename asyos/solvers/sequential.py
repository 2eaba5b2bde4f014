"""Sequential Online Substitution over a feature stream
(Yang et al., KDD 2016, Algorithm 1).

Drives the compiled kernel block by block and epoch by epoch.  Holds y, u and the kept
set: O(n·s) memory whatever p is; X is never held.
"""

import time

import numpy as np

from ..core.kept_set import kept_set, warm_up
from ..core.losses import Loss, loss_value
from ..core.projection import group_constraint
from ..core.step_size import ETA, NU_MAX, SUBSTITUTIONS, StepSize, check_scale
from ..core.validate import check_at_least, check_labels, check_sparsity
from ..streams import FeatureStream, Standardized, as_stream
from .result import FitResult


def fit_os(source, y, s, *, loss="squared", eta="auto", m="auto", epochs=2,
           standardize=False, progress=None, groups=None, s2=None) -> FitResult:
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
    epochs : passes over the stream
    standardize : centre and scale each column as it arrives (weights then refer to
        standardized features; ``mean``/``scale`` map them back)
    progress : callable(k) told after every k feature steps
    groups, s2 : group-aware OS: ``groups[j]`` is feature j's group label,
        and the kept set holds at most ``s`` features in at most ``s2`` groups (the
        bi-level projection of SGHT on each arrival; ``core/group_step.py``)
    """
    loss = Loss.parse(loss)
    stream: FeatureStream = as_stream(source)
    if standardize:
        stream = Standardized(stream)
    y = check_labels(y, loss, stream.n_samples)
    s = check_sparsity(s, stream.n_features)
    epochs = check_at_least("epochs", epochs, 1, integer=True)
    constraint = group_constraint(groups, s2, stream.n_features)
    step = StepSize.parse(eta, m)
    m = step.block_factor(stream.n_samples, s)

    warm_up(stream.sparse and constraint is None)
    kept, blocks = kept_set(stream, s, constraint)
    state = step.state(loss, stream.n_samples, s)
    result = FitResult(selected=np.zeros(0, np.int64), weights=np.zeros(0),
                       substitutions_per_epoch=[])
    trace_every = max(1, epochs * stream.n_features // 200)
    next_trace = trace_every
    start = time.perf_counter()
    for epoch in range(epochs):
        before = state[SUBSTITUTIONS]
        for block_index, block in blocks(epoch):
            kept.run_block(block_index, block, y, loss, m, state)
            check_scale(state[NU_MAX])
            result.n_steps += len(block_index)
            if result.n_steps >= next_trace:  # ~200 points, whatever p is
                next_trace += trace_every
                for key, value in zip(("steps", "seconds", "objective"), (
                        result.n_steps, time.perf_counter() - start,
                        loss_value(int(loss), kept.contribution, y))):
                    result.trace[key].append(value)
            if progress is not None:
                progress(len(block_index))
        result.objective_per_epoch.append(float(loss_value(int(loss), kept.contribution,
                                                           y)))
        result.substitutions_per_epoch.append(int(state[SUBSTITUTIONS] - before))
    result.seconds = time.perf_counter() - start
    result.objective = result.objective_per_epoch[-1]
    result.selected, result.weights = kept.selected()
    result.eta = float(state[ETA])
    result.m = m
    result.kept_bytes = kept.nbytes
    if standardize:
        mean, scale = stream.stats(result.selected)
        result.standardization = {"mean": mean, "scale": scale}
    return result
