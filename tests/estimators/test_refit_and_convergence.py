"""The estimators' labels (any two classes, one-vs-rest in the selector too), the
refit on the selected columns, and the convergence report (``n_iter_``,
ConvergenceWarning)."""

import warnings

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, LogisticRegression

from asyos import (
    InputError,
    OnlineSubstitutionClassifier,
    OnlineSubstitutionRegressor,
    OnlineSubstitutionSelector,
)
from asyos.core.losses import Loss, loss_value
from asyos.core.validate import binary_labels, check_labels

TRUE = [3, 10, 17]
ESTIMATORS = [OnlineSubstitutionRegressor, OnlineSubstitutionClassifier,
              OnlineSubstitutionSelector]


def _regression(n=80, p=30, seed=0, noise=1.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + rng.uniform(-3, 3, p)
    y = X[:, TRUE] @ np.array([2.0, -3.0, 1.5]) + 4.0 + noise * rng.standard_normal(n)
    return X, y


def _imbalanced(seed=1, noise=0.8):
    """Two classes, 78 % positive, driven by columns 4 and 9 (off-centre)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((200, 20)) + 2.0
    margin = X[:, 4] - X[:, 9] + 1.2 + noise * rng.standard_normal(200)
    return X, (margin > 0).astype(int)


def _four_classes(n=400, p=20, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, np.array(["a", "b", "c", "d"])[np.argmax(X[:, [1, 5, 8, 11]], axis=1)]


def _mean_loss(model, X, signs, loss):
    u = X @ np.ravel(model.coef_) + float(np.ravel(model.intercept_)[0])
    return loss_value(int(loss), u, signs)


# -- labels: any two values, one mapping function --------------------------------------
def test_binary_labels_maps_the_smaller_value_to_minus_one():
    classes, signs = binary_labels(np.array([1.0, 2.0, 2.0, 1.0]), 4)
    assert classes.tolist() == [1.0, 2.0] and signs.tolist() == [-1, 1, 1, -1]
    classes, signs = binary_labels(["yes", "no", "yes"])
    assert classes.tolist() == ["no", "yes"] and signs.tolist() == [1, -1, 1]
    np.testing.assert_array_equal(binary_labels([-1, 1, 1])[1], [-1.0, 1.0, 1.0])
    for labels, message in [([0, 1, 2, 1], r"exactly 2 distinct .*got 3: 0, 1, 2"),
                            ([5, 5, 5], "got 1: 5"),
                            (np.arange(40.0), r"got 40: 0, 1, 2, 3, 4, \.\.\."),
                            ([0.0, np.nan, 1.0], "label 1 is NaN"),
                            (np.zeros((2, 2)), "vector")]:
        with pytest.raises(InputError, match=message):
            binary_labels(labels)
    with pytest.raises(InputError, match="n = 3 samples but the features have n = 4"):
        binary_labels([0, 1, 0], 4)
    # the library's own entry points stay strict
    with pytest.raises(InputError, match=r"needs labels in \{-1, \+1\}"):
        check_labels([0.0, 1.0], Loss.LOGISTIC)


@pytest.mark.parametrize("Estimator", [OnlineSubstitutionClassifier,
                                       OnlineSubstitutionSelector])
def test_any_two_labels_fit_as_their_plus_minus_one_mapping(Estimator):
    X, y = _imbalanced()
    signs = np.where(y == 1, 1.0, -1.0)
    reference = Estimator(2, loss="logistic", epochs=3).fit(X, signs)
    for labels in (y, y + 1, np.where(y == 1, "pos", "neg")):
        model = Estimator(2, loss="logistic", epochs=3).fit(X, labels)
        assert model.classes_.tolist() == np.unique(labels).tolist()
        np.testing.assert_array_equal(model.coef_, reference.coef_)
        np.testing.assert_array_equal(model.intercept_, reference.intercept_)


# -- multiclass selector: one-vs-rest --------------------------------------------------
def test_the_selector_is_one_vs_rest_on_iris():
    X, y = load_iris(return_X_y=True)
    selector = OnlineSubstitutionSelector(1, loss="logistic", epochs=3).fit(X, y)
    assert selector.classes_.tolist() == [0, 1, 2]
    assert selector.coef_.shape == (3, 4) and selector.intercept_.shape == (3,)
    assert all(np.count_nonzero(row) <= 1 for row in selector.coef_)
    assert 1 <= selector.support_.sum() <= 3      # the union: up to n_classes × s
    assert selector.coef_[:, ~selector.support_].any() is np.False_
    assert selector.transform(X).shape == (150, selector.support_.sum())
    assert len(selector.history_) == 3 and selector.n_iter_.shape == (3,)
    # the same runs as the classifier's
    classifier = OnlineSubstitutionClassifier(1, loss="logistic", epochs=3).fit(X, y)
    np.testing.assert_array_equal(selector.coef_, classifier.coef_)
    np.testing.assert_array_equal(selector.support_, classifier.support_)


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_the_selector_on_four_classes_is_one_binary_run_per_class(loss):
    X, y = _four_classes()
    selector = OnlineSubstitutionSelector(1, loss=loss, epochs=4).fit(X, y)
    assert selector.coef_.shape == (4, 20)
    # s = 1 per class: each class finds the one column that drives it
    assert [np.flatnonzero(row).tolist() for row in selector.coef_] == [[1], [5], [8],
                                                                          [11]]
    assert np.flatnonzero(selector.support_).tolist() == [1, 5, 8, 11]
    assert selector.transform(X).shape == (400, 4)
    for k, c in enumerate(selector.classes_):   # class c vs the rest: +1 = c
        alone = OnlineSubstitutionSelector(1, loss=loss, epochs=4).fit(X, y == c)
        np.testing.assert_array_equal(alone.coef_, selector.coef_[k])
        assert alone.intercept_ == selector.intercept_[k]
        assert alone.n_iter_ == selector.n_iter_[k]
    # with s = 2 the union holds more than s features
    wider = OnlineSubstitutionSelector(2, loss=loss, epochs=4).fit(X, y)
    assert 2 < wider.support_.sum() <= 8


# -- refit -----------------------------------------------------------------------------
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("standardize", [False, True])
def test_squared_refit_is_least_squares_on_the_support(fit_intercept, standardize):
    X, y = _regression()
    model = OnlineSubstitutionRegressor(5, refit=True, fit_intercept=fit_intercept,
                                        standardize=standardize).fit(X, y)
    support = np.flatnonzero(model.support_)
    assert support.size == 5
    exact = LinearRegression(fit_intercept=fit_intercept).fit(X[:, support], y)
    np.testing.assert_allclose(model.coef_[support], exact.coef_, rtol=1e-9, atol=1e-10)
    assert model.intercept_ == pytest.approx(exact.intercept_, abs=1e-9)
    assert not model.coef_[~model.support_].any()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_refit_never_loses_training_loss_and_wins_on_imbalanced_classes():
    X, y = _regression(noise=2.0)
    # the paper's rule: OS's own coefficients after one pass are not least squares
    plain = OnlineSubstitutionRegressor(5, epochs=1, rule="magnitude").fit(X, y)
    refit = OnlineSubstitutionRegressor(5, epochs=1, rule="magnitude",
                                        refit=True).fit(X, y)
    np.testing.assert_array_equal(refit.support_, plain.support_)   # same selection
    mse = [np.mean((m.predict(X) - y) ** 2) for m in (plain, refit)]
    assert mse[1] < mse[0]
    # the fitted rule's coefficients are least squares on the support already
    plain = OnlineSubstitutionRegressor(5, epochs=1, rule="fitted").fit(X, y)
    refit = OnlineSubstitutionRegressor(5, epochs=1, rule="fitted",
                                        refit=True).fit(X, y)
    np.testing.assert_allclose(plain.coef_, refit.coef_, rtol=1e-6, atol=1e-9)
    X, y = _imbalanced()
    signs = np.where(y == 1, 1.0, -1.0)
    for loss in (Loss.LOGISTIC, Loss.SQUARED_HINGE):
        plain, refit = (OnlineSubstitutionClassifier(
            2, loss=loss.name.lower(), epochs=4, refit=r).fit(X, y)
            for r in (False, True))
        np.testing.assert_array_equal(refit.support_, plain.support_)
        before, after = (_mean_loss(m, X, signs, loss) for m in (plain, refit))
        assert after < 0.95 * before, (loss, before, after)   # joint (w, b) fit
        assert refit.score(X, y) >= plain.score(X, y)


def test_logistic_refit_is_close_to_scikit_learn_on_the_support():
    X, y = _imbalanced()
    model = OnlineSubstitutionClassifier(2, loss="logistic", refit=True,
                                         epochs=4).fit(X, y)
    support = np.flatnonzero(model.support_)
    assert support.tolist() == [4, 9]
    exact = LogisticRegression(C=1e8, tol=1e-12, max_iter=10_000).fit(X[:, support], y)
    np.testing.assert_allclose(model.coef_[0, support], exact.coef_[0], rtol=1e-4)
    assert model.intercept_[0] == pytest.approx(exact.intercept_[0], rel=1e-4)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_squared_hinge_refit_is_a_stationary_point(fit_intercept):
    X, y = _imbalanced()
    signs = np.where(y == 1, 1.0, -1.0)
    model = OnlineSubstitutionClassifier(2, refit=True, fit_intercept=fit_intercept,
                                         epochs=4).fit(X, y)
    support = np.flatnonzero(model.support_)
    w, b = model.coef_[0, support], model.intercept_[0]
    if not fit_intercept:
        assert b == 0.0

    def objective(theta):
        return loss_value(1, X[:, support] @ theta[:-1] + theta[-1], signs)

    gradient = approx_fprime(np.append(w, b), objective, 1e-7)
    assert np.abs(gradient if fit_intercept else gradient[:-1]).max() < 1e-5


def test_a_separable_refit_stays_finite_and_separates():
    X, y = _imbalanced(noise=0.0)
    model = OnlineSubstitutionClassifier(2, loss="logistic", refit=True,
                                         epochs=4).fit(X, y)
    assert np.all(np.isfinite(model.coef_)) and np.isfinite(model.intercept_).all()
    assert model.score(X, y) == 1.0


def test_multiclass_refit_is_per_class_on_its_own_support():
    X, y = _four_classes()
    model = OnlineSubstitutionSelector(2, loss="logistic", refit=True, epochs=4)
    model.fit(X, y)
    for k, c in enumerate(model.classes_):
        support = np.flatnonzero(model.coef_[k])
        assert support.size == 2
        exact = LogisticRegression(C=1e8, tol=1e-12, max_iter=10_000).fit(
            X[:, support], y == c)
        np.testing.assert_allclose(model.coef_[k, support], exact.coef_[0], rtol=1e-4)


# -- convergence: n_iter_ and ConvergenceWarning ---------------------------------------
def test_one_epoch_that_substitutes_warns_with_the_count():
    X, y = _regression(noise=0.0)
    model = OnlineSubstitutionRegressor(3, epochs=1)
    with pytest.warns(ConvergenceWarning, match=r"OS still substituted (\d+) features "
                      r"in its last epoch \(epochs=1\); give more epochs") as record:
        model.fit(X, y)
    assert model.n_iter_ == 1 and isinstance(model.n_iter_, int)
    count = model.history_["substitutions_per_epoch"][-1]
    assert count > 0 and f"substituted {count} features" in str(record[0].message)


def _no_convergence_warning(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return model.fit(X, y)


def test_no_warning_when_the_last_epoch_substituted_nothing():
    X, y = _regression(noise=0.0)
    model = OnlineSubstitutionRegressor(3, epochs=5).fit(X, y)
    counts = model.history_["substitutions_per_epoch"]
    assert counts[-1] == 0     # a clear support: OS settles within 5 epochs
    _no_convergence_warning(OnlineSubstitutionRegressor(3, epochs=5), X, y)
    # epochs run, however many that was (a run may stop early)
    assert model.n_iter_ == len(counts) == len(model.history_["objective_per_epoch"])
    assert 1 <= model.n_iter_ <= 5
    # s = p: nothing is ever dropped, even in one epoch
    whole = _no_convergence_warning(OnlineSubstitutionRegressor(30, epochs=1), X, y)
    assert whole.history_["substitutions_per_epoch"] == [0] and whole.n_iter_ == 1


def test_asy_os_runs_report_epochs_and_never_warn():
    X, y = _regression(noise=0.0)
    model = _no_convergence_warning(
        OnlineSubstitutionRegressor(3, epochs=1, n_workers=3, delay=2,
                                    backend="simulated"), X, y)
    assert "substitutions_per_epoch" not in model.history_
    assert model.n_iter_ == len(model.history_["objective_per_epoch"]) == 1


def test_one_vs_rest_reports_epochs_and_warnings_per_class():
    X, y = _four_classes()
    model = OnlineSubstitutionClassifier(2, epochs=1, n_orders=1)   # one run per class
    with pytest.warns(ConvergenceWarning, match=r"class \w vs rest: OS still "
                      "substituted"):
        model.fit(X, y)
    assert model.n_iter_.tolist() == [1, 1, 1, 1]
    binary = OnlineSubstitutionClassifier(2, epochs=3).fit(*_imbalanced())
    assert isinstance(binary.n_iter_, int) and 1 <= binary.n_iter_ <= 3


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_refit_is_a_parameter_stored_as_given(Estimator):
    model = Estimator(refit=True)
    assert model.get_params()["refit"] is True
    assert Estimator().get_params()["refit"] is False
