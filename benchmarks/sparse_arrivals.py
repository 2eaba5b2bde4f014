"""The sparse fitted rule's arrivals before and after gathering b = X_SᵀDx_j on the
kept columns that share a row with the newcomer (docs/algorithms.md, "Sparse
columns"): whole fits, seconds side by side in one run, each checkout in its own
process (imports and numba compilation untimed: a tiny fit first).

Problems (X scipy CSC, binary or as made):
  rare      ``make_rare_words(p=100_000, n=5_000)``: 18 uniform words a row and 10
            planted rare words;
  zipf      a Zipf text-like matrix: n = 5000 documents of Poisson(100) draws from
            p = 10⁵ words, word of rank r drawn with probability ∝ 1/(r + 10),
            binary; y = X w* + N(0, 0.1²) with w* = ±2 on 20 words of ranks 100-2000.
Fits: ``OnlineSubstitutionRegressor(k, n_orders=1)`` on y and
``OnlineSubstitutionClassifier(k, n_orders=1)`` on sign(y − median y), both with
their intercept (the default), k ∈ {10, 100, 300}; ``epochs=1`` rows time the first
pass alone, where the kept set changes most.  ``differ``: features one checkout
selected and the other did not; ``Δ objective``: the relative difference of the last
pass's objective (columns of equal cost, e.g. one-nonzero words in one row, are ties
that rounding breaks either way).

    python benchmarks/sparse_arrivals.py --before /tmp/before [--after .]
        [--problems rare zipf] [--ks 10 100 300]

``--before``: a checkout of the previous commit (``git worktree add /tmp/before
HEAD~1``), imported through PYTHONPATH with this environment's packages.
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
import scipy.sparse as sp
import asyos
from asyos.datasets import make_rare_words

name, estimator, k, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
epochs = "auto" if epochs == "auto" else int(epochs)

def zipf(n=5000, p=100_000, words=100.0, seed=0):
    rng = np.random.default_rng(seed)
    prob = 1.0 / (np.arange(p) + 10.0)
    prob /= prob.sum()
    rank = rng.permutation(p)   # frequent words anywhere in 0..p-1
    lengths = rng.poisson(words, n)
    cols = rank[rng.choice(p, lengths.sum(), p=prob)]
    rows = np.repeat(np.arange(n), lengths)
    X = sp.csc_matrix((np.ones(cols.size), (rows, cols)), shape=(n, p))
    X.data[:] = 1.0
    w = np.zeros(p)
    w[rank[rng.choice(np.arange(100, 2000), 20, replace=False)]] = \
        rng.choice([-2.0, 2.0], 20)
    return X, X @ w + 0.1 * rng.standard_normal(n)

if name == "rare":
    problem = make_rare_words(p=100_000, n=5_000, seed=0)
    X, y = problem.X, problem.y
else:
    X, y = zipf()
kind = asyos.OnlineSubstitutionRegressor if estimator == "regressor" else \
    asyos.OnlineSubstitutionClassifier
if estimator == "classifier":
    y = np.where(y > np.median(y), 1, -1)
small = sp.random(50, 40, density=0.2, format="csc", random_state=0)
kind(3, n_orders=1).fit(small, y[:50])   # imports, compilation
start = time.perf_counter()
model = kind(k, n_orders=1, epochs=epochs).fit(X, y)
seconds = time.perf_counter() - start
history = model.history_[0] if isinstance(model.history_, list) else model.history_
print(json.dumps({"seconds": seconds,
                  "selected": np.flatnonzero(model.support_).tolist(),
                  "objective": history["objective_per_epoch"][-1]}))
"""


def timed(root, problem, estimator, k, epochs):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
    out = subprocess.run([sys.executable, "-c", CHILD, problem, estimator, str(k),
                          str(epochs)], env=env, capture_output=True, text=True,
                         cwd="/tmp", check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", default=".")
    parser.add_argument("--problems", nargs="+", default=["rare", "zipf"])
    parser.add_argument("--ks", nargs="+", type=int, default=[10, 100, 300])
    parser.add_argument("--estimators", nargs="+", default=["regressor", "classifier"])
    parser.add_argument("--epochs", nargs="+", default=["auto", "1"])
    args = parser.parse_args()
    print("| problem | fit | k | epochs | before s | after s | before ÷ after | "
          "differ | Δ objective |")
    print("|---|---|---|---|---|---|---|---|---|")
    for problem in args.problems:
        for estimator in args.estimators:
            for k in args.ks:
                for epochs in args.epochs:
                    old = timed(args.before, problem, estimator, k, epochs)
                    new = timed(args.after, problem, estimator, k, epochs)
                    differ = len(set(old["selected"]) ^ set(new["selected"]))
                    change = abs(new["objective"] / old["objective"] - 1.0)
                    print(f"| {problem} | {estimator} | {k} | {epochs} | "
                          f"{old['seconds']:.2f} | {new['seconds']:.2f} | "
                          f"{old['seconds'] / new['seconds']:.1f}× | {differ} | "
                          f"{change:.0e} |", flush=True)


if __name__ == "__main__":
    main()
