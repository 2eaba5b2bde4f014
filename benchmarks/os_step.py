"""Microseconds per OS feature step: the compiled kernel against two numpy OS versions.

* straightforward numpy: Algorithm 1 of Yang et al. (KDD 2016) as written (np.append,
  column_stack and np.delete of the kept columns at every step);
* tuned numpy: a preallocated (s+1, n) buffer, BLAS products, slot substitution —
  the same algorithm as the kernel, written as well as numpy allows.

All run the same steps on the same data (n ≈ 1300, s = 100: the paper's p = 2000
protocol), side by side in one process, alternating repetitions so that machine noise
hits all of them.  Reports the median of each and the ratios.

    python benchmarks/os_step.py [--n 1316] [--s 100] [--steps 4000] [--reps 5]

``--whole-run`` times whole runs instead, on the paper's regression with n = 1000,
p = 8192, s = 64 and 3 passes: ``asyos.fit_os`` (the paper's rule, and the fitted
rule) against a plain numba kernel that runs the paper's rule as one fused loop per
step over a pre-transposed X (no stream, no BLAS, no safeguard) — the floor a
hand-written kernel reaches.

    python benchmarks/os_step.py --whole-run [--reps 7]
"""

import argparse
import platform
import time

import numpy as np
from numba import njit

from asyos import fit_os
from asyos.core.kept_set import KeptSet
from asyos.core.losses import Loss
from asyos.datasets import make_regression


def straightforward_numpy(XT, y, s, eta, m, steps):
    """Algorithm 1 as written: the kept columns are re-stacked at every step."""
    n, p = XT.shape[1], XT.shape[0]
    S, W, XS = [], np.zeros(0), np.zeros((n, 0))
    start = time.perf_counter()
    for t in range(steps):
        j = t % p
        xj = XT[j]
        u = XS @ W
        g = (u - y) / n
        gS = XS.T @ g
        if j in S:
            step = np.full(len(S), eta / m)
            step[S.index(j)] = eta
            W = W - step * gS
        else:
            W = np.append(W - (eta / m) * gS, -eta * (xj @ g))
            S.append(j)
            XS = np.column_stack([XS, xj])
            if len(S) > s:
                a = np.abs(W)
                k = len(S) - 1 if a[-1] <= a.min() else int(np.argmin(a))
                del S[k]
                W = np.delete(W, k)
                XS = np.delete(XS, k, axis=1)
    return (time.perf_counter() - start) / steps, set(S)


class TunedNumpyOS:
    """OS as one would write it in numpy: preallocated buffer, BLAS products."""

    def __init__(self, n, s):
        self.s = s
        self.cols = np.zeros((s + 1, n))
        self.index = np.full(s + 1, -1)
        self.weights = np.zeros(s + 1)
        self.size = 0
        self.u = np.zeros(n)

    def step(self, j, x, y, eta, m):
        k = self.size
        g = (self.u - y) / y.shape[0]
        hits = np.flatnonzero(self.index[:k] == j)
        steps = np.full(k, eta / m)
        if hits.size:
            steps[hits[0]] = eta
        self.weights[:k] -= steps * (self.cols[:k] @ g)
        if not hits.size:
            self.cols[k] = x
            self.index[k] = j
            self.weights[k] = -eta * (x @ g)
            k += 1
            if k > self.s:
                a = np.abs(self.weights[:k])
                d = self.s if a[self.s] <= a.min() else int(np.argmin(a))
                self.cols[d], self.index[d], self.weights[d] = (
                    self.cols[self.s], self.index[self.s], self.weights[self.s])
                k = self.s
        self.size = k
        self.u = self.weights[:k] @ self.cols[:k]


def time_compiled(XT, y, s, eta, m, steps):
    kept = KeptSet(XT.shape[1], s)
    p = XT.shape[0]
    index = np.arange(steps) % p
    start = time.perf_counter()
    kept.run_block(index, XT[index], y, Loss.SQUARED, m,
                   np.array([eta, 0.0, 0.0, 0.0, 1.0, np.inf, 0.0]))
    return (time.perf_counter() - start) / steps, kept


def time_numpy(XT, y, s, eta, m, steps):
    model = TunedNumpyOS(XT.shape[1], s)
    p = XT.shape[0]
    start = time.perf_counter()
    for t in range(steps):
        j = t % p
        model.step(j, XT[j], y, eta, m)
    return (time.perf_counter() - start) / steps, model


@njit(cache=True, fastmath=True)
def fused_os(XT, y, s, eta, m, epochs):
    """The paper's rule on (p, n) columns, written as one fused loop per step:
    g, x_jᵀg, X_Sᵀg with the weights' step, the drop, u = X_S w_S."""
    p, n = XT.shape
    cols = np.zeros((s + 1, n))
    index = np.full(s + 1, -1)
    w = np.zeros(s + 1)
    u, g = np.zeros(n), np.empty(n)
    size = 0
    for _ in range(epochs):
        for j in range(p):
            x = XT[j]
            xg, pos = 0.0, -1
            for r in range(n):
                g[r] = (u[r] - y[r]) / n
                xg += x[r] * g[r]
            for k in range(size):
                if index[k] == j:
                    pos = k
            for k in range(size):
                gs = 0.0
                for r in range(n):
                    gs += cols[k, r] * g[r]
                w[k] -= (eta if k == pos else eta / m) * gs
            if pos < 0:
                cols[size] = x
                index[size], w[size] = j, -eta * xg
                size += 1
                if size > s:
                    d = s
                    for k in range(s):
                        if abs(w[k]) < abs(w[d]):
                            d = k
                    cols[d], index[d], w[d] = cols[s], index[s], w[s]
                    size = s
            u[:] = 0.0
            for k in range(size):
                for r in range(n):
                    u[r] += w[k] * cols[k, r]
    return index[:size].copy(), w[:size].copy()


def whole_run(reps: int) -> None:
    problem = make_regression(p=8192, s=64, n=1000, seed=0)
    X = np.asfortranarray(problem.X)   # feature-major, as a converted file
    XT, y = X.T, problem.y
    paper = fit_os(X, y, 64, rule="magnitude", epochs=3)
    eta, m = paper.eta, paper.m   # the fused loop runs at asyos's η and m
    XT = np.ascontiguousarray(XT)
    fused_os(XT, y, 64, eta, m, 1)   # compile (or load the cache) first
    fit_os(X, y, 64, epochs=3)
    times = {"fused loop": [], "kernel alone": [], "fit_os, paper's rule": [],
             "fit_os, fitted rule": []}
    support = set(problem.support.tolist())
    recall = {}
    for _ in range(reps):
        start = time.perf_counter()
        index, _ = fused_os(XT, y, 64, eta, m, 3)
        times["fused loop"].append(time.perf_counter() - start)
        recall["fused loop"] = len(set(index.tolist()) & support) / 64
        # the compiled kernel alone, same η and m, one block: no stream, no safeguard
        kept, state = KeptSet(1000, 64), np.array([eta, 0.0, 0.0, 0.0, 1.0, np.inf, 0.0])
        start = time.perf_counter()
        for _ in range(3):
            kept.run_block(np.arange(8192), XT, y, Loss.SQUARED, m, state)
        times["kernel alone"].append(time.perf_counter() - start)
        recall["kernel alone"] = len(set(kept.selected()[0].tolist()) & support) / 64
        for name, rule in (("fit_os, paper's rule", "magnitude"),
                           ("fit_os, fitted rule", "fitted")):
            start = time.perf_counter()
            result = fit_os(X, y, 64, rule=rule, epochs=3)
            times[name].append(time.perf_counter() - start)
            recall[name] = len(set(result.selected.tolist()) & support) / 64
    floor = np.array(times["fused loop"])
    print(f"n = 1000, p = 8192, s = 64, 3 passes; median of {reps} runs, and the "
          f"time over the fused loop's in the same repetition: median (range)")
    for name, values in times.items():
        ratio = np.array(values) / floor
        print(f"{name:22s}: {np.median(values):6.3f} s  "
              f"{np.median(ratio):.2f}x ({ratio.min():.2f}-{ratio.max():.2f}) "
              f"the fused loop  recall {recall[name]:.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1316, help="samples (default: the "
                        "paper's round(1.2·s·log2 p) at the defaults)")
    parser.add_argument("--s", type=int, default=100, help="kept-set size")
    parser.add_argument("--p", type=int, default=2000, help="features")
    parser.add_argument("--steps", type=int, default=4000, help="OS steps timed per "
                        "repetition")
    parser.add_argument("--reps", type=int, default=5, help="repetitions; the "
                        "median is reported")
    parser.add_argument("--whole-run", action="store_true",
                        help="whole fit_os runs against a fused-loop kernel")
    args = parser.parse_args()
    if args.whole_run:
        return whole_run(args.reps)
    rng = np.random.default_rng(0)
    XT = rng.standard_normal((args.p, args.n))
    w = np.zeros(args.p)
    w[rng.choice(args.p, args.s, replace=False)] = rng.standard_normal(args.s)
    y = XT.T @ w + 0.1 * rng.standard_normal(args.n)
    eta, m = 0.5, 1.0
    time_compiled(XT, y, args.s, eta, m, 10)  # compile (or load the cache) first
    compiled, tuned, plain = [], [], []
    for _ in range(args.reps):
        t, kept = time_compiled(XT, y, args.s, eta, m, args.steps)
        compiled.append(t)
        t, model = time_numpy(XT, y, args.s, eta, m, args.steps)
        tuned.append(t)
        t, straight = straightforward_numpy(XT, y, args.s, eta, m, args.steps)
        plain.append(t)
    chosen = set(kept.index[: kept.size].tolist())
    same = chosen == set(model.index[: model.size].tolist()) == straight
    c, tn, p = (np.median(v) * 1e6 for v in (compiled, tuned, plain))
    print(f"machine: {platform.machine()} {platform.processor() or ''} "
          f"numpy {np.__version__}")
    print(f"n = {args.n}, s = {args.s}, {args.steps} steps x {args.reps} reps "
          f"(same selection: {same})")
    print(f"compiled OS             : {c:8.1f} us/step")
    print(f"tuned numpy OS          : {tn:8.1f} us/step  ({tn / c:.2f}x the compiled)")
    print(f"straightforward numpy OS: {p:8.1f} us/step  ({p / c:.2f}x the compiled)")


if __name__ == "__main__":
    main()
