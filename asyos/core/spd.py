"""Small symmetric positive definite systems in numba: the fitted rule's H_S⁻¹ is
rebuilt from scratch with these (``fitted_step.refactor``, ``sparse_fitted``), and a
group's cost of dropping solved (``fitted_step``'s group moves).

Hand-written rather than ``np.linalg``: numba compiles its LAPACK bindings for
seconds on a first run, and the systems are s × s with s small.
"""

import numpy as np
from numba import njit


@njit(cache=True, error_model="numpy")
def _cholesky(A, m):
    """A[:m, :m] (symmetric positive definite) → its lower Cholesky factor, in
    place.  A pivot that rounding made ≤ 0 is taken as the smallest positive one."""
    for j in range(m):
        d = A[j, j]
        for k in range(j):
            d -= A[j, k] * A[j, k]
        d = np.sqrt(max(d, 1e-300))
        A[j, j] = d
        for i in range(j + 1, m):
            total = A[i, j]
            for k in range(j):
                total -= A[i, k] * A[j, k]
            A[i, j] = total / d


@njit(cache=True, error_model="numpy")
def spd_solve(A, m, b):
    """A⁻¹b for the SPD A[:m, :m] (A is overwritten by its factor)."""
    _cholesky(A, m)
    z = b[:m].copy()
    for i in range(m):              # L z' = b
        for k in range(i):
            z[i] -= A[i, k] * z[k]
        z[i] /= A[i, i]
    for i in range(m - 1, -1, -1):  # Lᵀ z = z'
        for k in range(i + 1, m):
            z[i] -= A[k, i] * z[k]
        z[i] /= A[i, i]
    return z


@njit(cache=True, error_model="numpy")
def spd_inverse(A, m, out):
    """out[:m, :m] = A⁻¹ for the SPD A[:m, :m] (A is overwritten): Cholesky, then
    L⁻¹ and out = L⁻ᵀL⁻¹, O(m³).  L⁻¹ is built column by column into the rows of
    ``out`` (its transpose), so every inner product reads two rows (the same sums in
    the same order, so the same numbers): 7.2 ms at m = 300 where reading columns
    took 9.3 ms, and a sparse fit of 300 features refreshes H_S⁻¹ about 200 times."""
    _cholesky(A, m)
    for j in range(m):              # column j of L⁻¹ into out[j, j:]
        out[j, j] = 1.0 / A[j, j]
        for i in range(j + 1, m):
            total = 0.0
            for k in range(j, i):
                total -= A[i, k] * out[j, k]
            out[j, i] = total / A[i, i]
    for i in range(m):              # (L⁻ᵀL⁻¹)[i, j] = Σ_k L⁻¹[k, i]·L⁻¹[k, j], into A
        for j in range(i + 1):
            total = 0.0
            for k in range(i, m):
                total += out[i, k] * out[j, k]
            A[i, j] = total
    for i in range(m):
        for j in range(i + 1):
            out[i, j] = A[i, j]
            out[j, i] = A[i, j]
