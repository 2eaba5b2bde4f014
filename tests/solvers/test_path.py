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
def test_a_default_path_that_ends_at_its_best_size_goes_on(seed):
    """p = 500, s = 30 true features: abess's default largest size is 29, below the
    truth, and sic is lowest there.  The path continues past it, warm-started, and
    stops a few sizes past its best; no warning, and the truth is found."""
    from asyos.solvers.path import PAST_BEST

    pb = make_regression(p=500, s=30, seed=seed)
    default = default_sizes(*pb.X.shape)
    assert default[-1] < 30
    with warnings.catch_warnings():
        warnings.simplefilter("error", PathEdgeWarning)
        path = fit_path(pb.X, pb.y)
    assert path.sizes[:len(default)] == default and path.sizes[-1] > default[-1]
    assert len(path.sizes) - 1 - path.chosen == PAST_BEST   # stopped past its best
    assert recall(path.best.selected, pb.support) >= 0.95
    # a path the user bounded stays bounded, and says so
    with pytest.warns(PathEdgeWarning):
        bounded = fit_path(pb.X, pb.y, max_features=default[-1])
    assert bounded.sizes == default
