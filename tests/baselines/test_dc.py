"""DC on the truncated-ℓ1 sparse group model (Xiang, Wang & Ye 2015): its exact
projections, feasibility and monotone descent, recovery, and a brute-force oracle."""

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos import InputError
from asyos.baselines.dc import (
    _project_groups,
    _project_l1,
    dc_solve,
    fit_dc,
    truncated_counts,
)
from asyos.errors import ConvergenceWarning


def bilevel_problem(seed, n=100, groups=10, size=6, active=3, per_group=2, noise=0.0):
    rng = np.random.default_rng(seed)
    p = groups * size
    group_of = np.repeat(np.arange(groups), size)
    truth = np.zeros(p)
    for g in rng.choice(groups, active, replace=False):
        where = g * size + rng.choice(size, per_group, replace=False)
        truth[where] = rng.uniform(2, 4, per_group) * rng.choice([-1.0, 1.0], per_group)
    X = rng.standard_normal((n, p))
    return X, X @ truth + noise * rng.standard_normal(n), group_of, truth


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**16), radius=st.floats(0.0, 5.0))
def test_l1_projection_is_the_nearest_point_of_the_ball(seed, radius):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(12) * 2
    free = rng.random(12) < 0.3
    out = np.empty(12)
    _project_l1(v, free, radius, out)
    assert np.all(out[free] == v[free])
    assert np.abs(out[~free]).sum() <= radius + 1e-9
    # nearer to v than any other point of the set (random points on its boundary)
    for _ in range(20):
        z = v.copy()
        d = rng.standard_normal(12)
        d[free] = 0.0
        z[~free] = d[~free] * radius / max(np.abs(d).sum(), 1e-12)
        z[free] += 0.1 * rng.standard_normal(int(free.sum()))
        assert np.sum((v - out) ** 2) <= np.sum((v - z) ** 2) + 1e-9


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**16), radius=st.floats(0.0, 5.0))
def test_group_projection_scales_groups_onto_the_ball(seed, radius):
    rng = np.random.default_rng(seed)
    group_of = np.repeat(np.arange(4), 3)
    v = rng.standard_normal(12) * 2
    free = rng.random(4) < 0.3
    out = np.empty(12)
    _project_groups(v, group_of, 4, free, radius, out)
    norms = np.sqrt(np.bincount(group_of, weights=out * out))
    assert norms[~free].sum() <= radius + 1e-9
    for g in range(4):
        block, before = out[group_of == g], v[group_of == g]
        if free[g]:
            assert np.all(block == before)
        else:  # a scaled-down copy of the group: the projection only shrinks it
            scale = np.linalg.norm(block) / np.linalg.norm(before)
            assert 0.0 <= scale <= 1.0 + 1e-12
            np.testing.assert_allclose(block, scale * before, atol=1e-12)
    # a binding constraint: every shrunk group lost the same norm θ (or all of it)
    lost = np.sqrt(np.bincount(group_of, weights=v * v)) - norms
    shrunk = ~free & (norms > 0)
    if np.sqrt(np.bincount(group_of, weights=v * v))[~free].sum() > radius and \
            shrunk.any():
        theta = lost[shrunk][0]
        np.testing.assert_allclose(lost[shrunk], theta, atol=1e-9)
        assert np.all(np.sqrt(np.bincount(group_of, weights=v * v))[~free & ~shrunk]
                      <= theta + 1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_objective_never_rises_and_iterates_stay_feasible(seed):
    X, y, group_of, _ = bilevel_problem(seed, n=60, noise=1.0)
    path = dc_solve(X, y, 8, group_of, 3, tau=0.2)
    assert np.all(np.diff(path.objective) < 0)
    assert path.objective[-1] < 0.5 * path.objective[0]
    features, groups = truncated_counts(path.w, group_of, 0.2)
    assert features <= 8 + 1e-7 and groups <= 3 + 1e-7


@pytest.mark.parametrize("seed", range(10))
def test_noiseless_easy_problem_is_recovered(seed):
    X, y, group_of, truth = bilevel_problem(seed)
    selection = fit_dc(X, y, 6, group_of, 3, tau=1.0)
    assert set(selection.selected) == set(np.flatnonzero(truth))
    np.testing.assert_allclose(selection.weights, truth[selection.selected],
                               rtol=1e-3)


def brute_force(X, y, group_of, s1, s2):
    """The least f over supports of ≤ s1 features in ≤ s2 groups (least squares)."""
    best, best_support = np.inf, ()
    for k in range(1, s1 + 1):
        for support in itertools.combinations(range(X.shape[1]), k):
            if len(set(group_of[list(support)])) > s2:
                continue
            cols = X[:, support]
            r = y - cols @ np.linalg.lstsq(cols, y, rcond=None)[0]
            value = 0.5 * float(r @ r) / X.shape[0]
            if value < best:
                best, best_support = value, support
    return best, set(best_support)


@pytest.mark.parametrize("seed", range(10))
def test_tiny_problems_reach_the_brute_force_support(seed):
    # p = 8 in 4 groups of 2, 2 features in 1 group.  The truncated model contains
    # the discrete one (an s-sparse x has Σ J_τ ≤ s), so its optimum is at most the
    # discrete optimum; DC must reach that, with its entries ≥ τ on the best support
    X, y, group_of, _ = bilevel_problem(seed, n=40, groups=4, size=2, active=1,
                                        per_group=2, noise=0.5)
    best, support = brute_force(X, y, group_of, 2, 1)
    path = dc_solve(X, y, 2, group_of, 1, tau=0.1)
    assert set(np.flatnonzero(np.abs(path.w) >= 0.1)) == support
    assert path.objective[-1] <= best + 1e-9


def test_bad_input_is_refused():
    X, y, group_of, _ = bilevel_problem(0, n=20, groups=3, size=2)
    with pytest.raises(InputError, match="tau"):
        dc_solve(X, y, 2, group_of, 1, tau=0.0)
    with pytest.raises(InputError, match="s2"):
        dc_solve(X, y, 2, group_of, 4)


def test_stopping_at_max_outer_warns():
    X, y, group_of, _ = bilevel_problem(0, n=60, noise=1.0)
    with pytest.warns(ConvergenceWarning, match="DC stopped at max_outer=1 "):
        path = dc_solve(X, y, 8, group_of, 3, tau=0.2, max_outer=1)
    assert not path.converged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dc_solve(X, y, 8, group_of, 3, tau=0.2).converged
