"""The path over s (solvers/path.py): warm-started sizes, and the size a criterion picks."""

import math
import warnings

import numpy as np
import pytest

from asyos.core.losses import Loss
from asyos.datasets import make_regression
from asyos.errors import InputError, PathEdgeWarning
from asyos.metrics import recall
from asyos.solvers.path import criterion_value, default_sizes, fit_path


@pytest.mark.parametrize("criterion", ["sic", "ebic"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_criterion_finds_the_true_size_in_regression(criterion, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((200, 600))
    support = np.sort(rng.choice(600, 8, replace=False))
    y = X[:, support] @ rng.choice([-1.0, 1.0], 8) + 0.5 * rng.standard_normal(200)
    path = fit_path(X, y, sizes=list(range(1, 16)), criterion=criterion)
    assert path.sizes[path.chosen] == 8
    assert recall(path.best.selected, support) == 1.0
    assert all(len(f.selected) <= s for f, s in zip(path.fits, path.sizes))
    # the loss only falls along a warm-started path of growing budgets
    objective = [f.objective for f in path.fits]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(objective, objective[1:]))
    summary = path.summary()
    assert summary["chosen"] == 8 and len(summary["values"]) == 15


def test_a_warm_path_ends_where_a_cold_fit_of_its_last_size_would():
    pb = make_regression(p=300, s=5, n=150, noise=0.1, seed=3)
    path = fit_path(pb.X, pb.y, sizes=[2, 4, 5])
    from asyos import fit_os

    cold = fit_os(pb.X, pb.y, 5)
    np.testing.assert_array_equal(path.fits[-1].selected, cold.selected)


def test_criterion_values():
    n, p, s = 100, 1000, 3
    rss_over_n = 0.5
    sic = criterion_value("sic", Loss.SQUARED, rss_over_n / 2, n, p, s)
    assert sic == pytest.approx(n * math.log(rss_over_n) +
                                s * math.log(p) * math.log(math.log(n)))
    ebic = criterion_value("ebic", Loss.LOGISTIC, 0.3, n, p, s)
    assert ebic == pytest.approx(2 * n * 0.3 + s * math.log(n) +
                                 2 * math.log(math.comb(p, s)))


def test_default_sizes():
    sizes = default_sizes(1000, 8192)
    assert sizes[0] == 1 and sizes[-1] == 57 and len(sizes) <= 20
    assert default_sizes(50, 3) == [1, 2, 3]
    assert default_sizes(1000, 8192, largest=5) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("kwargs, message", [
    ({"sizes": [3, 2]}, "increasing"),
    ({"sizes": []}, "increasing"),
    ({"sizes": [0, 2]}, "s must be at least 1"),
    ({"criterion": "aic"}, "criterion must be one of"),
    ({"max_features": 10_000}, "at most the number of features"),
])
def test_bad_paths_are_refused(kwargs, message):
    pb = make_regression(p=50, s=3, n=40, seed=0)
    with pytest.raises(InputError, match=message):
        fit_path(pb.X, pb.y, **kwargs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_default_grid_that_ends_at_its_best_size_goes_on(seed):
    """p = 500, s = 30 true features: abess's default largest size is 29, below the
    truth, and sic is lowest there.  The grid continues past it, warm-started, and
    stops a few sizes past its best; no warning, and the truth is found."""
    from asyos.solvers.path import PAST_BEST

    pb = make_regression(p=500, s=30, seed=seed)
    default = default_sizes(*pb.X.shape)
    assert default[-1] < 30
    with warnings.catch_warnings():
        warnings.simplefilter("error", PathEdgeWarning)
        path = fit_path(pb.X, pb.y, search="grid")
    assert path.sizes[:len(default)] == default and path.sizes[-1] > default[-1]
    assert len(path.sizes) - 1 - path.chosen == PAST_BEST   # stopped past its best
    assert recall(path.best.selected, pb.support) >= 0.95
    # a path the user bounded stays bounded, and says so
    with pytest.warns(PathEdgeWarning):
        bounded = fit_path(pb.X, pb.y, max_features=default[-1])
    assert bounded.sizes == default


@pytest.mark.parametrize("p, s, seed, search", [
    (5000, 50, 0, "auto"), (5000, 50, 1, "auto"), (2000, 100, 3, "auto"),
    (500, 30, 0, "refine"), (500, 30, 1, "refine")])
def test_the_doubling_search_finds_the_true_size(p, s, seed, search):
    """The squared loss's search on larger problems: s = 8, 16, 32, … warm-started
    until the backward elimination of the last fit is lowest well inside it, then OS
    at that size.  It finds the truth as the grid does (sizes are not given, so it
    may run past abess's default largest size), and its result is the last fit's."""
    from asyos.solvers.path import FIRST, INSIDE

    pb = make_regression(p=p, s=s, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PathEdgeWarning)
        path = fit_path(pb.X, pb.y, search=search)
    chosen = path.sizes[path.chosen]
    assert abs(chosen - s) <= max(1, s // 20)
    assert recall(path.best.selected, pb.support) >= 0.95
    assert len(path.best.selected) <= chosen
    doubling = [k for k in path.sizes if k != chosen]
    assert doubling[0] == FIRST and all(b == 2 * a for a, b in zip(doubling, doubling[1:]))
    elimination = path.extra["elimination"]
    assert elimination["from"] == max(path.sizes) and chosen <= INSIDE * max(path.sizes)
    assert len(elimination["values"]) == len(path.fits[-1].selected)
    assert path.summary()["chosen"] == chosen


@pytest.mark.parametrize("intercept", [False, True])
def test_backward_elimination_is_exact_least_squares(intercept):
    """RSS_k is the least-squares RSS of the k columns the elimination keeps (with an
    unpenalised intercept if asked), and each step drops the column whose removal
    costs least among those left."""
    from asyos.solvers.path import backward_rss

    rng = np.random.default_rng(4)
    X = rng.standard_normal((7, 40))
    y = X[:3].T @ np.array([3.0, -2.0, 1.0]) + 0.3 * rng.standard_normal(40) + \
        (5.0 if intercept else 0.0)   # an offset only the intercept can take

    def rss(rows):
        design = X[list(rows)].T
        if intercept:
            design = np.column_stack([design, np.ones(40)])
        if design.shape[1] == 0:
            return float(y @ y)
        residual = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
        return float(residual @ residual)

    order, values = backward_rss(X, y, intercept)
    assert sorted(order.tolist()) == list(range(7)) and values.shape == (8,)
    for k in range(1, 8):
        kept = order[:k].tolist()
        assert values[k] == pytest.approx(rss(kept), rel=1e-8)
        others = [rss([j for j in kept if j != i]) for i in kept]
        assert values[k - 1] == pytest.approx(min(others), rel=1e-8)
    assert set(order[:3].tolist()) == {0, 1, 2}


def test_the_doubling_search_is_for_the_squared_loss_on_a_free_path():
    pb = make_regression(p=50, s=3, n=40, seed=0)
    for kwargs in ({"loss": "logistic"}, {"sizes": [1, 2]}, {"max_features": 5}):
        labels = np.sign(pb.y) if kwargs.get("loss") else pb.y
        with pytest.raises(InputError, match="search='refine' is for the squared loss"):
            fit_path(pb.X, labels, search="refine", **kwargs)
    with pytest.raises(InputError, match="search must be one of"):
        fit_path(pb.X, pb.y, search="bisect")


def test_auto_keeps_the_grid_where_n_is_small_against_log_p():
    """n = 89, p = 600: least squares on a selected set passes noise features through
    the criterion (the doubling ran to n/2 in 5 of 8 seeds); "auto" runs the grid
    there, as before."""
    pb = make_regression(p=600, s=8, seed=3)
    assert default_sizes(*pb.X.shape)[-1] < 32
    path = fit_path(pb.X, pb.y)
    assert path.sizes[:9] == list(range(1, 10)) and "elimination" not in path.extra
    assert path.sizes[path.chosen] == 8
