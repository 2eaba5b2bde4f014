"""Large k: OS's training fit against OMP's where k grows past the true support.

A correlated Gaussian design (AR(1) columns, correlation ρ = 0.5 between neighbours),
n = 1000, p = 5000, 25 true features of weight ±(1..2) and noise sd 1.  At each k
up to p/10: the training MSE of ``OnlineSubstitutionRegressor(k,
fit_intercept=False)`` at its defaults, and of scikit-learn's
``OrthogonalMatchingPursuit(n_nonzero_coefs=k)``, side by side on the same problem,
with whole-fit wall seconds.  OMP's forward greedy order is the yardstick: past the
true support every further feature fits noise, and the best k-subset is the one
that fits most of it.

    python benchmarks/large_k.py [--seeds 5] [--ks 25,50,100,166,250,333,500]

Reported per k: the ratio OS MSE / OMP MSE (mean and worst seed) and the seconds.
"""

import argparse
import time

import numpy as np
from sklearn.linear_model import OrthogonalMatchingPursuit

from asyos import OnlineSubstitutionRegressor

N, P, TRUE, RHO = 1000, 5000, 25, 0.5


def problem(seed: int, n: int = N, p: int = P):
    """AR(1) columns: x_j = ρ x_{j-1} + √(1-ρ²) z_j, so corr(x_i, x_j) = ρ^|i-j|."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, p))
    X = np.empty_like(Z)
    X[:, 0] = Z[:, 0]
    for j in range(1, p):
        X[:, j] = RHO * X[:, j - 1] + np.sqrt(1 - RHO ** 2) * Z[:, j]
    w = np.zeros(p)
    support = rng.choice(p, TRUE, replace=False)
    w[support] = rng.choice([-1.0, 1.0], TRUE) * (1 + rng.random(TRUE))
    return X, X @ w + rng.standard_normal(n)


def mse(model, X, y) -> float:
    return float(np.mean((y - model.predict(X)) ** 2))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--ks", default="25,50,100,166,250,333,500")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    OnlineSubstitutionRegressor(5, fit_intercept=False).fit(*problem(0, 200, 300))
    ratios = {k: [] for k in ks}
    seconds = {k: {"OS": [], "OMP": []} for k in ks}
    for seed in range(args.seeds):
        X, y = problem(seed)
        for k in ks:
            fitted = {}
            for name, model in (("OS", OnlineSubstitutionRegressor(
                                    k, fit_intercept=False)),
                                ("OMP", OrthogonalMatchingPursuit(
                                    n_nonzero_coefs=k, fit_intercept=False))):
                start = time.perf_counter()
                model.fit(X, y)
                seconds[k][name].append(time.perf_counter() - start)
                fitted[name] = mse(model, X, y)
            ratios[k].append(fitted["OS"] / fitted["OMP"])
            print(f"seed {seed} k {k}: OS MSE {fitted['OS']:.4f}, OMP {fitted['OMP']:.4f}"
                  f" (ratio {ratios[k][-1]:.3f}); seconds OS {seconds[k]['OS'][-1]:.2f}"
                  f", OMP {seconds[k]['OMP'][-1]:.2f}", flush=True)
    print(f"\nn = {N}, p = {P}, rho = {RHO}, {TRUE} true features, {args.seeds} seeds")
    print("| k | OS MSE / OMP MSE, mean | worst | OS s | OMP s |")
    print("|---|---|---|---|---|")
    for k in ks:
        print(f"| {k} | {np.mean(ratios[k]):.3f} | {np.max(ratios[k]):.3f} | "
              f"{np.median(seconds[k]['OS']):.2f} | {np.median(seconds[k]['OMP']):.2f} |")


if __name__ == "__main__":
    main()
