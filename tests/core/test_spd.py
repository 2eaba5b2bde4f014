"""The hand-written SPD inverse and solve (``core/spd.py``) against numpy's."""

import numpy as np
import pytest

from asyos.core.spd import spd_inverse, spd_solve


@pytest.mark.parametrize("m", [1, 2, 7, 64, 301])
def test_the_inverse_and_the_solve_of_the_leading_block(m):
    """Only A[:m, :m] is read and out[:m, :m] written (the fitted rule's H_S⁻¹ lives
    in the leading block of a larger buffer)."""
    rng = np.random.default_rng(m)
    B = rng.standard_normal((m + 2, m + 2))
    H = B @ B.T + 0.5 * np.eye(m + 2)
    out = np.full((m + 2, m + 2), 7.0)
    spd_inverse(H.copy(), m, out)
    expected = np.linalg.inv(H[:m, :m])
    np.testing.assert_allclose(out[:m, :m], expected, rtol=1e-8,
                               atol=1e-10 * np.abs(expected).max())
    assert np.array_equal(out[:m, :m], out[:m, :m].T)
    assert (out[m:] == 7.0).all() and (out[:, m:] == 7.0).all()
    b = rng.standard_normal(m + 2)
    np.testing.assert_allclose(spd_solve(H.copy(), m, b), expected @ b[:m],
                               rtol=1e-8, atol=1e-10 * np.abs(expected @ b[:m]).max())
