"""Microseconds per OS feature step: the compiled kernel against two numpy OS versions.

* straightforward numpy: Algorithm 1 of Yang et al. (KDD 2016) as written (np.append,
  column_stack and np.delete of the kept columns at every step);
* tuned numpy: a preallocated (s+1, n) buffer, BLAS products, slot substitution —
  the same algorithm as the kernel, written as well as numpy allows.

All run the same steps on the same data (n ≈ 1300, s = 100: the paper's p = 2000
protocol), side by side in one process, alternating repetitions so that machine noise
hits all of them.  Reports the median of each and the ratios.

    python benchmarks/os_step.py [--n 1316] [--s 100] [--steps 4000] [--reps 5]
"""

import argparse
import platform
import time

import numpy as np

from asyos.core.kept_set import KeptSet
from asyos.core.losses import Loss


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1316)
    parser.add_argument("--s", type=int, default=100)
    parser.add_argument("--p", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
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
