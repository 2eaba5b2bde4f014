"""Sequential OS over streams: the numpy oracle, the default step, quality, errors."""

import warnings

import numpy as np
import pytest
import reference_os as ref

from asyos import InputError, fit_os
from asyos.baselines import fit_iht
from asyos.core.losses import Loss, loss_value
from asyos.datasets import make_regression
from asyos.metrics import recall
from asyos.streams import ArrayStream

LOSSES = ["squared", "squared_hinge", "logistic"]


_problem = ref.toy_problem


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("shuffle", [False, True])
def test_fit_os_equals_the_numpy_reference(loss, shuffle):
    X, y = _problem(loss)
    stream = ArrayStream(X, block_size=7, shuffle=shuffle, seed=4)
    eta = 0.3 if loss != "logistic" else 1.0
    result = fit_os(stream, y, 6, loss=loss, eta=eta, m=2.0, epochs=3,
                    rule="magnitude")
    S, W = [], np.zeros(0)
    for epoch in range(3):
        order = np.concatenate([idx for idx, _ in stream.blocks(epoch)])
        for j in order:
            S, W, _ = ref.os_step(X, y, S, W, int(j), 6, eta, 2.0, loss)
    order = np.argsort(S)
    np.testing.assert_array_equal(result.selected, np.asarray(S)[order])
    np.testing.assert_allclose(result.weights, W[order], rtol=0, atol=1e-10)
    u = X[:, result.selected] @ result.weights
    assert result.objective == pytest.approx(ref.value(loss, u, y), rel=1e-10)
    assert result.n_steps == 3 * 70


@pytest.mark.parametrize("loss", LOSSES)
def test_default_step_descends_and_needs_only_s(loss):
    X, y = _problem(loss, n=80, p=200, s=10, seed=1)
    result = fit_os(X, y, 10, loss=loss, epochs=4, rule="magnitude")
    assert result.eta > 0 and result.m >= 1
    assert len(result.selected) <= 10
    per_epoch = result.objective_per_epoch
    assert all(b <= a * (1 + 1e-9) for a, b in zip(per_epoch, per_epoch[1:]))
    assert result.objective < loss_value(int(Loss.parse(loss)), np.zeros(80), y)


def test_standardize_reports_the_scale_of_the_selected_features():
    X, y = _problem("squared", n=60, p=40, s=4, seed=2)
    X = X * np.linspace(0.1, 10, 40) + 3.0
    result = fit_os(X, y, 4, standardize=True, epochs=3)
    cols = X[:, result.selected]
    scale = result.standardization["scale"]
    np.testing.assert_allclose(result.standardization["mean"], cols.mean(axis=0))
    assert scale.shape == result.selected.shape and np.all(scale > 0)


@pytest.mark.slow
def test_quality_on_the_paper_regression_protocol():
    """p = 2000, s = 100, 2 epochs: recall ≥ 0.85 and within 0.05 of IHT."""
    os_recall, iht_recall = [], []
    for seed in range(3):
        problem = make_regression(p=2000, s=100, seed=seed)
        result = fit_os(problem.X, problem.y, 100, epochs=2)
        os_recall.append(recall(result.selected, problem.support))
        iht = fit_iht(problem.X, problem.y, 100)
        iht_recall.append(recall(iht.selected, problem.support))
    assert np.mean(os_recall) >= 0.85
    assert np.mean(iht_recall) - np.mean(os_recall) <= 0.05, (os_recall, iht_recall)


def _bad(match, *args, **kwargs):
    with pytest.raises(InputError, match=match):
        fit_os(*args, **kwargs)


def test_bad_input_is_named():
    X, y = _problem("squared")
    _bad("labels have n = 49", X, y[:-1], 3)
    _bad("s must be at least 1", X, y, 0)
    _bad("s must be at most the number of features", X, y, 71)
    _bad("unknown loss 'hinge'", X, y, 3, loss="hinge")
    _bad(r"needs labels in \{-1, \+1\}; label 0", X, y, 3, loss="squared_hinge")
    _bad("eta must be a positive", X, y, 3, eta=-1)
    _bad("m must be ≥ 1", X, y, 3, m=0.5)
    _bad("epochs must be ≥ 1", X, y, 3, epochs=0)
    bad = X.copy()
    bad[5, 13] = np.nan
    _bad("feature 13", bad, y, 3)
    y_nan = y.copy()
    y_nan[4] = np.inf
    _bad("label 4 is NaN or inf", X, y_nan, 3)
    _bad("one sample is too few for a fit: need n >= 2", X[:1], y[:1], 3)


@pytest.mark.parametrize("rule", ["fitted", "magnitude"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_a_constant_column_standing_in_for_an_intercept_is_warned(rule, sparse):
    """Without an intercept, a constant column soaks up y's mean: valid arithmetic, but
    rarely what was meant, so it is said (and not said once the columns are centred)."""
    import scipy.sparse

    from asyos.errors import DegenerateWarning

    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 12))
    X[:, 4], X[:, 7] = 1.0, 0.0
    y = 2 * X[:, 0] - X[:, 1] + 3.0
    data = scipy.sparse.csc_matrix(X) if sparse else X
    with pytest.warns(DegenerateWarning, match=r"constant column\(s\) \[4\]"):
        result = fit_os(data, y, 3, rule=rule, epochs=3)
    assert 4 in result.selected
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateWarning)
        centred = fit_os(data, y - y.mean(), 2, rule=rule, epochs=3)
    assert set(centred.selected) == {0, 1}


def test_os_runs_on_one_blas_thread_by_default_and_restores_the_setting():
    from asyos.transport.base import blas_threads_in_use

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 300)), rng.standard_normal(40)
    before, seen = blas_threads_in_use(), []
    fit_os(X, y, 5, rule="magnitude", progress=lambda k: seen.append(
        blas_threads_in_use()))
    assert set(seen) == {1} and blas_threads_in_use() == before
    with pytest.raises(InputError, match="blas_threads must be ≥ 1"):
        fit_os(X, y, 5, blas_threads=0)
    from asyos.solvers.path import fit_path  # a path of sizes: the same

    seen.clear()
    fit_path(X, y, [2, 4], progress=lambda k: seen.append(blas_threads_in_use()))
    assert set(seen) == {1} and blas_threads_in_use() == before
    with pytest.raises(InputError, match="blas_threads must be ≥ 1"):
        fit_path(X, y, [2, 4], blas_threads=0)


def test_s_not_below_n_is_said():
    """With s ≥ n any n features fit the labels exactly: the fit warns, not silently
    returning fewer than s features with a zero loss."""
    from asyos.errors import DegenerateWarning
    from asyos.solvers.path import fit_path

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 60)), rng.standard_normal(20)
    with pytest.warns(DegenerateWarning, match="s = 25 is not below the n = 20"):
        fit_os(X, y, 25)
    with pytest.warns(DegenerateWarning, match="s = 20 is not below the n = 20"):
        fit_path(X, y, [5, 20])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateWarning)
        fit_os(X, y, 19)


def test_a_path_that_picks_its_largest_size_says_so():
    """'auto' on a problem with more true features than the path reaches picked the
    last size without a word (recall 0.87 on the README's problem)."""
    from asyos.errors import PathEdgeWarning
    from asyos.solvers.path import fit_path

    problem = make_regression(p=400, s=30, n=200, seed=1)
    with pytest.warns(PathEdgeWarning, match="picked s = 10, the largest size"):
        path = fit_path(problem.X, problem.y, [5, 10])
    assert path.sizes[path.chosen] == 10
    with warnings.catch_warnings():
        warnings.simplefilter("error", PathEdgeWarning)
        path = fit_path(problem.X, problem.y, [20, 30, 45])
    assert path.sizes[path.chosen] != 45


class _FillingKeptSet:
    """A kept set that takes one more feature in each of its first ``fills`` passes
    and never swaps: what a refit of s features looks like when some of its grows
    are refused under a stale curvature and taken in a later pass."""

    def __init__(self, fills: int, n: int = 4):
        self.fills, self.size, self.passes = fills, 0, 0
        self.contribution = np.zeros(n)
        self.index = np.zeros(8, np.int64)
        self.nbytes = 0

    def start_epoch(self):
        self.passes += 1

    def run_block(self, block_index, block, y, loss, m, state):
        if self.passes <= self.fills:
            self.index[self.size] = self.size
            self.size += 1
        self.contribution[:] = y * (1.0 - 0.5 ** (self.size + 1))

    def selected(self):
        return np.arange(self.size), np.ones(self.size)

    def constant_features(self):
        return np.zeros(0, np.int64)


@pytest.mark.parametrize("fills", [1, 3, 5])
def test_the_fitted_rule_stops_only_after_a_pass_that_neither_swaps_nor_grows(fills):
    """A pass without a swap ends a fitted run only where the kept set did not grow
    either: a refit stopped at its second pass of grows kept 273 of 300 features."""
    from asyos.core.step_size import SUBSTITUTIONS, NU_MAX
    from asyos.solvers.sequential import passes

    kept = _FillingKeptSet(fills)
    state = np.zeros(max(SUBSTITUTIONS, NU_MAX) + 2)
    y = np.ones(4)
    blocks = lambda epoch: iter([(np.arange(2), np.zeros((2, 4)))])   # noqa: E731
    result = passes(kept, blocks, y, Loss.SQUARED, 1.0, state, 10, True, 2)
    assert kept.size == fills
    assert len(result.objective_per_epoch) == max(2, fills + 1)
