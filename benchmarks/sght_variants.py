"""SGHT's four step schemes side by side (Xiang, Yang & Ye, KDD 2014, Algorithms 1-2;
FISTA and FISTA-C with the momentum restart of O'Donoghue & Candès 2015 and the
monotone step of Beck & Teboulle 2009, MFISTA).

The paper's simulation, case 1 (its Section 5.3): X ∈ ℝ^{100×200} standard normal,
20 groups of 10, groups 0-5 active with 3 equal nonzeros each (value ±U[1, 10]),
s1 = 18, s2 = 6, from w = 0.  ``noiseless``: y = Xw̄, solved to tol = 1e-12; recovered
means the exact support and ‖w − w̄‖ ≤ 1e-5‖w̄‖.  ``noisy``: y = Xw̄ + N(0, 1), the
default tol = 1e-6; "objective" is f(w)/min over the four variants − 1 on the same
seed, recovered means the exact support.  Per variant: mean and worst over the seeds;
milliseconds on whatever machine runs it (the solves are short: indicative only).

    python benchmarks/sght_variants.py [--seeds 10]
"""

import argparse
import time

import numpy as np

from asyos.sght.solver import VARIANTS, sght_solve


def problem(seed, noise):
    """The generator of tests/sght/test_sght.py (``grouped_problem``)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((100, 200))
    groups = np.repeat(np.arange(20), 10)
    w = np.zeros(200)
    for g in range(6):
        value = rng.uniform(1, 10)
        w[g * 10 + rng.choice(10, 3, replace=False)] = value * rng.choice([-1, 1])
    return X, X @ w + noise * rng.standard_normal(100), groups, w


def run(seeds, noise, tol):
    rows = {v: {"iterations": [], "seconds": [], "objective": [], "error": [],
                "recovered": []} for v in VARIANTS}
    for seed in range(seeds):
        X, y, groups, w = problem(seed, noise)
        finals = {}
        for variant in VARIANTS:
            start = time.perf_counter()
            path = sght_solve(X, y, 18, groups, 6, variant=variant, tol=tol)
            row = rows[variant]
            row["seconds"].append(time.perf_counter() - start)
            row["iterations"].append(path.n_iter)
            error = float(np.linalg.norm(path.w - w) / np.linalg.norm(w))
            row["error"].append(error)
            row["recovered"].append(
                np.array_equal(np.flatnonzero(path.w), np.flatnonzero(w))
                and (noise > 0 or error <= 1e-5))
            finals[variant] = path.objective[-1]
        best = min(finals.values())
        for variant in VARIANTS:
            rows[variant]["objective"].append(
                finals[variant] if noise == 0 else finals[variant] / best - 1.0)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    X, y, groups, _ = problem(0, 0.0)
    for variant in VARIANTS:                          # compile outside the timing
        sght_solve(X, y, 18, groups, 6, variant=variant, max_iter=3)
    print("| case | variant | iterations mean / worst | ms mean / worst "
          "| objective mean / worst | ‖w − w̄‖/‖w̄‖ worst | recovered |")
    print("|---|---|---|---|---|---|---|")
    for case, noise, tol in (("noiseless", 0.0, 1e-12), ("noisy", 1.0, 1e-6)):
        rows = run(args.seeds, noise, tol)
        for variant, row in rows.items():
            it, ms = np.array(row["iterations"]), 1e3 * np.array(row["seconds"])
            obj = np.array(row["objective"])
            print(f"| {case} | {variant} | {it.mean():.1f} / {it.max()} "
                  f"| {ms.mean():.1f} / {ms.max():.1f} "
                  f"| {obj.mean():.2g} / {obj.max():.2g} "
                  f"| {max(row['error']):.1e} "
                  f"| {sum(row['recovered'])} / {args.seeds} |")


if __name__ == "__main__":
    main()
