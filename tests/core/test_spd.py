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


def test_a_block_lapack_finds_not_positive_definite_gets_the_loops_inverse():
    """Rounding can leave H_S a pivot ≤ 0; LAPACK then refuses it and the loop, which
    takes the smallest positive pivot there, answers instead: finite, never NaN."""
    from asyos.core.spd import _loop_inverse

    A = np.array([[1.0, 2.0], [2.0, 1.0]])   # indefinite
    out, expected = np.zeros((3, 3)), np.zeros((3, 3))
    spd_inverse(A.copy(), 2, out)
    _loop_inverse(A.copy(), 2, expected)
    assert np.isfinite(out).all() and np.array_equal(out, expected)


def test_the_inverse_through_lapack_loads_from_numbas_cache_in_a_new_process(tmp_path):
    """LAPACK is reached through named symbols each process registers, not addresses
    compiled in, so a second process loads the compiled inverse instead of compiling
    it again (a first run compiles for seconds)."""
    import os
    import subprocess
    import sys

    probe = ("import numpy as np\nfrom asyos.core.spd import spd_inverse\n"
             "out = np.zeros((3, 3))\nspd_inverse(np.eye(3) * 4.0, 3, out)\n"
             "assert np.allclose(out, np.eye(3) / 4.0), out\n"
             "print(sum(spd_inverse.stats.cache_hits.values()), "
             "sum(spd_inverse.stats.cache_misses.values()))")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", probe], capture_output=True,
                           text=True, env=env, timeout=300) for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    assert [run.stdout.split() for run in runs] == [["0", "1"], ["1", "0"]]
