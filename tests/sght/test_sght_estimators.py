"""SGHTRegressor / SGHTClassifier: scikit-learn's own checks, and the bi-level budget."""

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import parametrize_with_checks

from asyos import InputError, SGHTClassifier, SGHTRegressor


@parametrize_with_checks([SGHTRegressor(), SGHTClassifier(),
                          SGHTRegressor(solver="os"),
                          SGHTClassifier(loss="logistic", solver="os")])
def test_sklearn_checks(estimator, check, sklearn_checks_env):
    check(estimator)


def _grouped(seed=0, n=120, classify=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 60)) + 3.0                 # off-centre: intercept matters
    groups = np.repeat(np.arange(12), 5)
    w = np.zeros(60)
    w[[0, 1, 2, 25, 26, 27]] = [3, -2, 2, 2, 3, -3]       # groups 0 and 5
    y = (X - 3.0) @ w + 1.5 + 0.1 * rng.standard_normal(n)
    return X, (np.where(y > 1.5, "yes", "no") if classify else y), groups


@pytest.mark.parametrize("solver", ["sght", "os"])
def test_regressor_keeps_both_budgets_and_finds_the_groups(solver):
    X, y, groups = _grouped()
    model = SGHTRegressor(6, 2, groups=groups, solver=solver, epochs=4).fit(X, y)
    assert model.support_.sum() <= 6 and model.n_groups_selected_ <= 2
    assert set(groups[model.support_]) == {0, 5}
    assert model.score(X, y) > 0.99


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_classifier_labels_and_group_budget(loss):
    X, y, groups = _grouped(classify=True)
    model = SGHTClassifier(6, 2, groups=groups, loss=loss).fit(X, y)
    assert set(model.predict(X)) <= {"yes", "no"}
    assert model.n_groups_selected_ <= 2 and model.score(X, y) > 0.9


def test_grid_search_over_the_two_budgets():
    X, y, groups = _grouped(1)
    search = GridSearchCV(SGHTRegressor(groups=groups),
                          {"n_features_to_select": [3, 6], "n_groups_to_select": [1, 2]},
                          cv=3).fit(X, y)
    assert search.best_params_ == {"n_features_to_select": 6, "n_groups_to_select": 2}


@pytest.mark.parametrize("params, message", [
    (dict(n_groups_to_select=13), "n_groups_to_select"),
    (dict(n_features_to_select=0), "n_features_to_select"),
    (dict(solver="cd"), "solver"),
    (dict(groups=np.arange(5)), "one label per feature"),
    (dict(loss="logistic"), "loss"),
])
def test_bad_parameters_raise_input_error(params, message):
    X, y, groups = _grouped()
    with pytest.raises(InputError, match=message):
        SGHTRegressor(**({"groups": groups} | params)).fit(X, y)
