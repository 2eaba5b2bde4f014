"""n_features_to_select="auto": the model size chosen along a warm-started path, by an
information criterion or by cross-validation."""

import numpy as np
import pytest

from asyos import (
    OnlineSubstitutionClassifier,
    OnlineSubstitutionRegressor,
    OnlineSubstitutionSelector,
)
from asyos.errors import InputError


def _sparse_truth(seed, n=200, p=400, k=6, task="regression"):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 3.0          # an intercept to find as well
    support = np.sort(rng.choice(p, k, replace=False))
    u = (X[:, support] - 3.0) @ rng.choice([-1.0, 1.0], k)
    if task == "regression":
        return X, u + 5.0 + 0.5 * rng.standard_normal(n), support
    return X, np.where(u + 0.3 * rng.standard_normal(n) > 0, "yes", "no"), support


@pytest.mark.parametrize("criterion", ["sic", "ebic", "cv"])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_regressor_finds_the_true_size(criterion, seed):
    # at n = 200, p = 400 the criteria add 1-2 noise features on some seeds: a good
    # search finds noise features that each cut n·log RSS by about 2 log p, near
    # their penalties; at n = p = 1000 they pick 6 on every seed we tried
    X, y, support = _sparse_truth(seed, **({} if criterion == "cv" else
                                           {"n": 1000, "p": 1000}))
    model = OnlineSubstitutionRegressor("auto", criterion=criterion,
                                        max_features=15).fit(X, y)
    assert np.flatnonzero(model.support_).tolist() == support.tolist()
    path = model.history_["path"]
    assert path["criterion"] == criterion and path["chosen"] == 6
    assert path["sizes"][-1] == 15 and len(path["values"]) == len(path["sizes"])
    assert model.score(X, y) > 0.9


def test_the_classifier_and_selector_choose_a_size_per_problem():
    X, y, support = _sparse_truth(2, n=400, task="classification")
    model = OnlineSubstitutionClassifier("auto", loss="logistic",
                                         max_features=12).fit(X, y)
    chosen = model.history_[0]["path"]["chosen"]
    assert 3 <= chosen <= 12 and model.support_.sum() == chosen
    assert len(set(np.flatnonzero(model.support_)) & set(support)) >= 4
    assert model.score(X, y) > 0.85
    selector = OnlineSubstitutionSelector("auto", loss="logistic", max_features=12)
    assert selector.fit_transform(X, y).shape == (400, chosen)


def test_auto_refuses_what_it_cannot_do():
    X, y, _ = _sparse_truth(0, n=60, p=30)
    with pytest.raises(InputError, match="n_workers=1"):
        OnlineSubstitutionRegressor("auto", n_workers=2).fit(X, y)
    with pytest.raises(InputError, match="criterion must be one of"):
        OnlineSubstitutionRegressor("auto", criterion="aic").fit(X, y)
    with pytest.raises(InputError, match="needs the rows of X in memory"):
        OnlineSubstitutionRegressor("auto", criterion="cv").fit_stream(
            np.asfortranarray(X), y)
    with pytest.raises(InputError, match="max_features must be"):
        OnlineSubstitutionRegressor("auto", max_features=0).fit(X, y)
    with pytest.raises(InputError, match="or 'auto'"):
        OnlineSubstitutionRegressor("many").fit(X, y)
