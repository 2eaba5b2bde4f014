import numpy as np
import pytest
import reference_os as ref

from asyos.core.losses import Loss, loss_grad, loss_value
from asyos.errors import InputError

LOSSES = ["squared", "squared_hinge", "logistic"]


def _data(loss, n=40, seed=0):
    rng = np.random.default_rng(seed)
    u = 3 * rng.standard_normal(n)
    y = rng.standard_normal(n)
    if loss != "squared":
        y = np.where(y >= 0, 1.0, -1.0)
    return u, y


@pytest.mark.parametrize("loss", LOSSES)
def test_value_and_gradient_match_numpy(loss):
    u, y = _data(loss)
    code = int(Loss.parse(loss))
    assert loss_value(code, u, y) == pytest.approx(ref.value(loss, u, y), rel=1e-12)
    g = loss_grad(code, u, y, np.empty_like(u))
    np.testing.assert_allclose(g, ref.grad_u(loss, u, y), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("loss", LOSSES)
def test_gradient_is_the_derivative_of_the_value(loss):
    u, y = _data(loss, n=12, seed=1)
    code = int(Loss.parse(loss))
    g = loss_grad(code, u, y, np.empty_like(u))
    h = 1e-6
    for i in range(u.size):
        e = np.zeros_like(u)
        e[i] = h
        fd = (loss_value(code, u + e, y) - loss_value(code, u - e, y)) / (2 * h)
        assert fd == pytest.approx(g[i], abs=1e-8)


def test_logistic_is_stable_for_huge_margins():
    u = np.array([1e4, -1e4, 800.0, -800.0])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    code = int(Loss.LOGISTIC)
    value = loss_value(code, u, y)
    g = loss_grad(code, u, y, np.empty(4))
    assert np.isfinite(value) and np.all(np.isfinite(g))
    assert value == pytest.approx((1e4 + 800.0) / 4)
    np.testing.assert_allclose(g, [0.0, -0.25, 0.25, 0.0], atol=1e-300)


def test_curvature_and_parse():
    assert Loss.parse("squared-hinge") is Loss.SQUARED_HINGE
    assert Loss.LOGISTIC.curvature == 0.25 and Loss.SQUARED.curvature == 1.0
    with pytest.raises(InputError, match="unknown loss 'hinge'"):
        Loss.parse("hinge")
