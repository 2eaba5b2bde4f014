"""Small fits: the fixed cost of ``OnlineSubstitutionRegressor.fit`` against OMP.

Grid searches and cross-validation fit many small problems, where what a fit costs
beside its kernel decides.  Whole ``fit`` calls, side by side in one run (the
estimators take turns, one call each per round, so a busy machine slows them alike):
OS at its defaults (``fit_intercept=False`` and ``True``), scikit-learn's
``OrthogonalMatchingPursuit(n_nonzero_coefs=k)`` and abess's ``LinearRegression``
(skipped with a note when abess is not installed), on Gaussian designs with 10 true
features, k = 10.  Then the OS fit (``fit_intercept=False``) split into the kernel's
own time (the fitted rule's ``fitted_block`` calls, timed around each call) and the
rest.  Kernels are compiled or loaded from numba's cache before any timing.

    python benchmarks/small_fits.py [--repeats 200]

Reported: median and interquartile range of the wall time per fit, in ms, and the
ratio of the medians to OMP's (the headline).
"""

import argparse
import time

import numpy as np
from sklearn.linear_model import OrthogonalMatchingPursuit

import asyos.core.kept_set as kept_set_module
from asyos import OnlineSubstitutionRegressor

SIZES = ((200, 500), (500, 1000))
K = 10


def problem(n: int, p: int, seed: int = 0):
    """A Gaussian design, 10 true features of weight ±1, noise sd 0.1."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    w = np.zeros(p)
    w[rng.choice(p, K, replace=False)] = rng.choice([-1.0, 1.0], K)
    return X, X @ w + 0.1 * rng.standard_normal(n)


def estimators() -> dict:
    found = {"OS (fit_intercept=False)": OnlineSubstitutionRegressor(
                 K, fit_intercept=False),
             "OS (fit_intercept=True)": OnlineSubstitutionRegressor(K),
             "OMP": OrthogonalMatchingPursuit(n_nonzero_coefs=K)}
    try:
        from abess import LinearRegression
    except ImportError:
        print("abess is not installed: its row is skipped")
    else:
        found["abess"] = LinearRegression(support_size=K)
    return found


def side_by_side(X, y, repeats: int) -> dict:
    """Seconds per fit of each estimator, taking turns."""
    models = estimators()
    for model in models.values():   # compile or load the kernels; warm caches
        model.fit(X, y)
    times = {name: [] for name in models}
    for _ in range(repeats):
        for name, model in models.items():
            start = time.perf_counter()
            model.fit(X, y)
            times[name].append(time.perf_counter() - start)
    return times


def breakdown(X, y, repeats: int) -> tuple[list, list]:
    """(whole fit, kernel) seconds of each OS fit (fit_intercept=False): the kernel
    is every ``fitted_block`` call, timed around the call."""
    kernel = kept_set_module.fitted_block
    spent = [0.0]

    def timed(*args):
        start = time.perf_counter()
        try:
            return kernel(*args)
        finally:
            spent[0] += time.perf_counter() - start

    model = OnlineSubstitutionRegressor(K, fit_intercept=False)
    model.fit(X, y)
    whole, inside = [], []
    kept_set_module.fitted_block = timed
    try:
        for _ in range(repeats):
            spent[0] = 0.0
            start = time.perf_counter()
            model.fit(X, y)
            whole.append(time.perf_counter() - start)
            inside.append(spent[0])
    finally:
        kept_set_module.fitted_block = kernel
    return whole, inside


def ms(values) -> str:
    q1, median, q3 = np.percentile(np.asarray(values) * 1e3, [25, 50, 75])
    return f"{median:7.2f} ms (IQR {q1:6.2f}-{q3:6.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    for n, p in SIZES:
        X, y = problem(n, p)
        times = side_by_side(X, y, args.repeats)
        omp = np.median(times["OMP"])
        print(f"\nn = {n}, p = {p}, k = {K}: {args.repeats} fits each, taking turns")
        for name, values in times.items():
            print(f"  {name:25s} {ms(values)}   {np.median(values) / omp:5.2f}x OMP")
        whole, inside = breakdown(X, y, args.repeats)
        rest = np.subtract(whole, inside)
        print(f"  OS (fit_intercept=False) breakdown, {args.repeats} fits:")
        print(f"    whole fit                 {ms(whole)}")
        print(f"    kernel (fitted_block)     {ms(inside)}")
        print(f"    the rest                  {ms(rest)}")


if __name__ == "__main__":
    main()
