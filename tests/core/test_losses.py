import numpy as np
import pytest
import reference_os as ref

from asyos.core.losses import (LOGISTIC, SQUARED, SQUARED_HINGE, Loss, loss_grad,
                               loss_value)
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


@pytest.mark.parametrize("loss", [SQUARED, SQUARED_HINGE, LOGISTIC])
def test_the_fused_loss_and_gradient_are_the_per_sample_formulas_bit_for_bit(loss):
    """``loss_and_grad`` shares one exponential between the logistic loss and its
    gradient; what it returns is still exactly ``loss_at`` and ``grad_at``'s, over
    margins from −800 to 800 (where a naive e^(−yu) overflows) and at 0."""
    from numba import njit

    from asyos.core.losses import grad_at, loss_and_grad, loss_at

    @njit
    def per_sample(loss, u, y, out):
        total = 0.0
        for i in range(u.shape[0]):
            total += loss_at(loss, u[i], y[i])
            out[i] = grad_at(loss, u[i], y[i]) * (1.0 / u.shape[0])
        return total * (1.0 / u.shape[0])

    @njit
    def fused(loss, u, y, out):
        return loss_and_grad(loss, u, y, out)

    rng = np.random.default_rng(0)
    u = np.concatenate([np.linspace(-800.0, 800.0, 4001), [0.0, -0.0],
                        rng.standard_normal(500) * 5.0])
    y = np.where(rng.random(u.size) < 0.5, -1.0, 1.0)
    expected, got = np.zeros_like(u), np.zeros_like(u)
    assert fused(loss, u, y, got) == per_sample(loss, u, y, expected)
    assert np.array_equal(got, expected) and np.isfinite(got).all()
