"""Symmetric positive definite systems in numba: the fitted rule's H_S⁻¹ is rebuilt
from scratch with these (``fitted_step.refactor``, ``sparse_fitted``), and a group's
cost of dropping solved (``fitted_step``'s group moves).

The inverse calls LAPACK's Cholesky routines (``dpotrf``, ``dpotri``) from SciPy's
``cython_lapack`` as external symbols: blocked, they are 3.5× faster than a loop at
s = 100 and 7× at s = 300, where a sparse fit refreshes H_S⁻¹ hundreds of times
(docs/benchmarks.md, "LAPACK's inverse, a refused step remembered, one
exponential").  Not ``np.linalg``: numba compiles its LAPACK bindings for seconds on
a first run.  The symbols are named, not embedded as addresses, so the kernels that
call them stay in numba's cache; each process registers them on import.  The small
solve, and a factorisation that LAPACK finds not positive definite (rounding), stay
hand-written.
"""

import llvmlite.binding as llvm
import numpy as np
from numba import njit, types
from numba.extending import get_cython_function_address


def _lapack(name: str):
    """LAPACK's ``name`` (uplo, n, a, lda, info: all by pointer) as an external
    function of numba's, under a symbol of our own."""
    symbol = f"asyos_lapack_{name}"
    llvm.add_symbol(symbol, get_cython_function_address("scipy.linalg.cython_lapack",
                                                        name))
    return types.ExternalFunction(symbol, types.void(*(types.voidptr,) * 5))


_dpotrf = _lapack("dpotrf")
_dpotri = _lapack("dpotri")
_LOWER = ord("L")


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
    """out[:m, :m] = A⁻¹ for the SPD A[:m, :m] (A is read, and may be overwritten),
    by LAPACK in ``out`` itself: a C-ordered symmetric block is its own Fortran
    transpose, so Fortran's lower triangle is C's upper one, which ``dpotri``
    leaves the inverse in and the loop below mirrors."""
    if m == 0:
        return
    for i in range(m):
        for j in range(m):
            out[i, j] = A[i, j]
    ints = np.empty(3, np.int32)   # n, lda, info
    ints[0], ints[1], ints[2] = m, out.shape[1], 0
    uplo = np.empty(1, np.uint8)
    uplo[0] = _LOWER
    _dpotrf(uplo.ctypes, ints[0:].ctypes, out.ctypes, ints[1:].ctypes, ints[2:].ctypes)
    if ints[2] == 0:
        _dpotri(uplo.ctypes, ints[0:].ctypes, out.ctypes, ints[1:].ctypes,
                ints[2:].ctypes)
    if ints[2] != 0:   # not positive definite to LAPACK: rounding, a pivot ≤ 0
        _loop_inverse(A, m, out)
        return
    for i in range(m):
        for j in range(i + 1, m):
            out[j, i] = out[i, j]


@njit(cache=True, error_model="numpy")
def _loop_inverse(A, m, out):
    """``spd_inverse`` by loops, with ``_cholesky``'s smallest positive pivot where
    rounding made one ≤ 0 (A is overwritten): L⁻¹ column by column into the rows of
    ``out`` (its transpose), then out = L⁻ᵀL⁻¹, O(m³)."""
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
