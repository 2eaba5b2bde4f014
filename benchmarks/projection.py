"""Seconds per bi-level projection (SGHT's DP: Xiang, Yang & Ye, KDD 2014, Algorithms
3-4) as p and s1 grow.

Three things run side by side on the same v ~ N(0, 1) (our choice), alternating
repetitions so that machine noise hits all of them; medians are reported:

* ``asyos.bilevel_projection`` (numba DP + argmax recovery, label handling included);
* a vectorised numpy DP (the same recurrence and tie rule as the loop version), the
  reference it was checked against: the ratio is the speedup of the compiled DP;
* soft thresholding of the same v, the convex counterpart the paper compares with.

Scenario 1 of the paper (|G| = 100, s2 = 20% of |G|, s1 = 5·s2, p growing) and a
sweep of s1 at p = 10⁶ (s2 = 20).

    python benchmarks/projection.py [--reps 3] [--quick]
"""

import argparse
import platform
import time

import numpy as np

from asyos import bilevel_projection


def numpy_dp(v, groups, s1, s2):
    """The DP of Algorithms 3-4, vectorised over the budgets: (x, W*)."""
    G = len(groups)
    order = [g[np.argsort(-np.abs(v[g]), kind="stable")] for g in groups]
    T = np.zeros((G + 1, s2 + 1, s1 + 1))
    P = np.zeros((G + 1, s2 + 1, s1 + 1), np.int64)
    for i in range(1, G + 1):
        ch = np.cumsum(v[order[i - 1]] ** 2)
        T[i] = T[i - 1]
        for t in range(1, min(s1, len(ch)) + 1):
            cand = T[i - 1, :-1, :s1 + 1 - t] + ch[t - 1]
            better = cand > T[i, 1:, t:]
            T[i, 1:, t:] = np.where(better, cand, T[i, 1:, t:])
            P[i, 1:, t:] = np.where(better, t, P[i, 1:, t:])
    cnt, j, k = np.zeros(G, np.int64), s2, s1
    for i in range(G, 0, -1):
        cnt[i - 1] = P[i, j, k]
        if cnt[i - 1]:
            j, k = j - 1, k - cnt[i - 1]
    x = np.zeros_like(v)
    for i in range(G):
        idx = order[i][:cnt[i]]
        x[idx] = v[idx]
    return x, T[G, s2, s1]


def measure(p, n_groups, s1, s2, reps, rng):
    v = rng.standard_normal(p)
    labels = rng.integers(0, n_groups, p)
    lists = [np.flatnonzero(labels == g) for g in range(n_groups)]
    bilevel_projection(v[:100], labels[:100], 2, 2)           # compiled before timing
    times = {"numba DP": [], "numpy DP": [], "soft threshold": []}
    for _ in range(reps):
        start = time.perf_counter()
        x = bilevel_projection(v, labels, s1, s2)
        times["numba DP"].append(time.perf_counter() - start)
        start = time.perf_counter()
        x_ref, best = numpy_dp(v, lists, s1, s2)
        times["numpy DP"].append(time.perf_counter() - start)
        start = time.perf_counter()
        np.sign(v) * np.maximum(np.abs(v) - 1.0, 0.0)
        times["soft threshold"].append(time.perf_counter() - start)
        assert abs(float(x @ x) - best) <= 1e-9 * best, "the two DPs disagree"
    return {name: float(np.median(t)) for name, t in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="p up to 10^5 only")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    ps = [10**4, 10**5] if args.quick else [10**4, 10**5, 10**6]
    rows = [(p, 100, 100, 20) for p in ps]                     # scenario 1, s2 = 20%
    rows += [(ps[-1], 100, s1, 20) for s1 in (50, 200, 400)]  # s1 sweep
    print(f"# {platform.processor() or platform.machine()}, numpy {np.__version__}, "
          f"reps {args.reps} (medians)")
    print(f"{'p':>9} {'|G|':>4} {'s1':>4} {'s2':>3} {'numba DP s':>11} "
          f"{'numpy DP s':>11} {'numpy/numba':>11} {'soft thr. s':>11} "
          f"{'DP/soft':>8}")
    for p, n_groups, s1, s2 in rows:
        t = measure(p, n_groups, s1, s2, args.reps, rng)
        print(f"{p:>9} {n_groups:>4} {s1:>4} {s2:>3} {t['numba DP']:>11.4f} "
              f"{t['numpy DP']:>11.4f} {t['numpy DP'] / t['numba DP']:>11.1f} "
              f"{t['soft threshold']:>11.4f} "
              f"{t['numba DP'] / t['soft threshold']:>8.1f}")


if __name__ == "__main__":
    main()
