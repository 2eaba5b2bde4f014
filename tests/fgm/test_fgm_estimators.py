"""FGMClassifier / FGMRegressor: scikit-learn's estimator checks, and that the fronts
fit what ``asyos.baselines.fgm`` fits."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

import asyos
from asyos import FGMClassifier, FGMRegressor
from asyos.errors import InputError
from asyos.fgm.cutting_plane import check_fgm, fgm
from asyos.streams import InteractionStream


@parametrize_with_checks([FGMClassifier(), FGMRegressor(),
                          FGMClassifier(polynomial_degree=2, max_activations=3),
                          FGMRegressor(polynomial_degree=2, B=2)])
def test_sklearn_checks(estimator, check, sklearn_checks_env):
    check(estimator)


def _data(seed=0, n=150, d=12):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    u = 2 * X[:, 0] * X[:, 3] - X[:, 5] + 0.5
    return X, u


def test_lazy_public_names():
    assert asyos.FGMClassifier is FGMClassifier and "FGMRegressor" in asyos.__all__


def test_classifier_is_the_baseline_with_mapped_labels():
    X, u = _data()
    labels = np.where(u > 0, "yes", "no")
    est = FGMClassifier(n_features_to_select=4, B=2, polynomial_degree=2).fit(X, labels)
    space, y, loss = check_fgm(X, np.where(u > 0, 1.0, -1.0), "squared_hinge", 4,
                               degree=2)
    ref = fgm(space, y, loss=loss, B=2, C=10.0, n_select=4, fit_intercept=True)
    np.testing.assert_array_equal(est.selected_, ref.selected)
    np.testing.assert_allclose(est.weights_, ref.weights, rtol=1e-12)
    assert est.selected_.size <= 4 and not hasattr(est, "coef_")
    stream = InteractionStream(X, degree=2)
    assert (0, 3) in stream.terms(est.selected_)      # the true interaction
    scores = stream.columns(est.selected_).T @ est.weights_ + est.intercept_
    np.testing.assert_allclose(est.decision_function(X), scores, rtol=1e-12)
    assert set(est.predict(X)) <= {"yes", "no"} and est.score(X, labels) > 0.9
    sparse = clone(est).fit(sp.csr_matrix(X), labels)
    np.testing.assert_array_equal(sparse.selected_, est.selected_)


def test_regressor_groups_and_coef():
    X, u = _data(1)
    y = X[:, 0] + X[:, 1] - 2 * X[:, 7] + 0.01 * np.random.default_rng(2).standard_normal(150)
    labels = np.arange(12) // 2                         # groups {0,1}, {2,3}, ...
    est = FGMRegressor(n_features_to_select=2, B=1, groups=labels).fit(X, y)
    assert set(est.selected_) <= {0, 1, 6, 7}
    assert est.coef_.shape == (12,) and est.score(X, y) > 0.99
    np.testing.assert_allclose(X @ est.coef_ + est.intercept_, est.predict(X))


def test_bad_input():
    X, u = _data()
    y = np.sign(u)
    with pytest.raises(InputError, match="Only binary"):
        FGMClassifier().fit(X, np.arange(150) % 3)
    with pytest.raises(InputError, match="loss"):
        FGMClassifier(loss="hinge").fit(X, y)
    with pytest.raises(InputError, match="B"):
        FGMRegressor(B=0).fit(X, u)
    with pytest.raises(InputError, match="cannot be combined"):
        FGMRegressor(groups=np.arange(12), polynomial_degree=2).fit(X, u)


@pytest.mark.parametrize("make", [
    lambda **kw: FGMRegressor(B=1, **kw),
    lambda **kw: FGMClassifier(B=1, **kw),
])
def test_fgm_warns_at_max_activations_and_not_when_it_stops_on_its_own(make):
    """The cap stops it 1 activation in; the tolerance (38) or the budget stops the
    others first, silently.  n_iter_ counts activations."""
    X, u = _data(3)
    y = (X[:, 0] + X[:, 1] - 2 * X[:, 7] if isinstance(make(), FGMRegressor)
         else np.where(u > 0, 1, 0))
    capped = make(max_activations=1)
    with pytest.warns(ConvergenceWarning, match=r"FGM stopped at max_activations=1 "
                      r"with the objective still falling by .*·F0 .*raise "
                      r"max_activations"):
        capped.fit(X, y)
    assert capped.n_iter_ == 1 and capped.result_.stop == "max_activations"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        for model in (make(tol=1e-2, max_activations=50),
                      make(n_features_to_select=3)):
            model.fit(X, y)
            assert model.result_.stop in ("tolerance", "budget", "no violation")
            assert model.n_iter_ == len(model.result_.blocks) >= 1


def test_fgm_solver_warns_with_asyos_class_and_can_be_silenced():
    from asyos.errors import ConvergenceWarning as AsyosConvergenceWarning
    from asyos.fgm import fit_fgm
    X, u = _data(4)
    with pytest.warns(AsyosConvergenceWarning, match=r"3 of 6 candidates active"):
        fit_fgm(X, np.sign(u), 6, "squared_hinge", B=1, max_activations=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_fgm(X, np.sign(u), 6, "squared_hinge", B=1, max_activations=3,
                convergence_warning=None)


@pytest.mark.parametrize("degree", [1, 2])
def test_normalize_scores_is_invariant_to_rescaling_the_features(degree):
    rng = np.random.default_rng(31)
    X, u = _data(seed=31, n=120, d=8)
    y = u > 0
    scale = rng.lognormal(0.0, 2.0, X.shape[1])
    # the invariance is the converged fit's: the default inner solve (1e-3, 20 steps)
    # left the two fits 1e-4 apart in a fresh environment (numpy 2.4, scipy 1.17)
    make = lambda: FGMClassifier(4, B=2, polynomial_degree=degree,  # noqa: E731
                                 normalize_scores=True, tol=0.0, inner_tol=1e-8,
                                 max_inner=200)
    a, b = make().fit(X, y), make().fit(X * scale, y)
    np.testing.assert_array_equal(a.selected_, b.selected_)
    np.testing.assert_allclose(a.decision_function(X),
                               b.decision_function(X * scale), rtol=1e-7, atol=1e-9)
    assert FGMClassifier().get_params()["normalize_scores"] is False
