"""How much sequential OS's final objective depends on the order of the features.

The speedup benchmarks (``one_machine.py``, ``speedup.py``) time each run to 1.05 x
the objective sequential OS ends at.  This script runs sequential OS on the same
problem with its features in other orders (random permutations of the columns) and
reports, per seed, each order's final objective over the first order's, and its
recall: after a fixed number of passes the ratio is far from 1, after the passes run
until one changes nothing (``--epochs auto``) it is 1.

    python benchmarks/order_noise.py [--n 2000] [--p 8192] [--s 256]
                                     [--seeds 0 1 2 3] [--orders 4] [--epochs 3 auto]
                                     [--sweep auto 0]

``--sweep``: the closing sweep's arrivals (``fit_os``'s ``sweep``; 0: none), each
value a table of its own.
"""

import argparse
import itertools

import numpy as np

from asyos.datasets import make_regression
from asyos.metrics import recall
from asyos.solvers.sequential import fit_os
from asyos.streams import ArrayStream


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--p", type=int, default=8192)
    parser.add_argument("--s", type=int, default=256)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--orders", type=int, default=4,
                        help="orders per seed: the data's own, then random ones")
    parser.add_argument("--epochs", nargs="+", default=["3", "auto"])
    parser.add_argument("--sweep", nargs="+", default=["auto", "0"])
    args = parser.parse_args()
    for sweep, epochs in itertools.product(args.sweep, args.epochs):
        passes = epochs if epochs == "auto" else int(epochs)
        arrivals = sweep if sweep == "auto" else int(sweep)
        print(f"n = {args.n}, p = {args.p}, s = {args.s}, epochs = {epochs}, sweep = "
              f"{sweep}: final objective over the first order's (recall, passes run)")
        missed = 0
        for seed in args.seeds:
            data = make_regression(p=args.p, s=args.s, n=args.n, seed=seed)
            rng = np.random.default_rng(1000 + seed)
            cells, first = [], None
            for order in range(args.orders):
                perm = np.arange(args.p) if order == 0 else rng.permutation(args.p)
                fit = fit_os(ArrayStream(np.asfortranarray(data.X[:, perm])), data.y,
                             args.s, epochs=passes, sweep=arrivals)
                first = fit.objective if first is None else first
                ratio = fit.objective / first
                missed += order > 0 and ratio > 1.05
                found = recall(perm[fit.selected], data.support)
                cells.append(f"{ratio:5.2f} ({found:.3f}, "
                             f"{len(fit.objective_per_epoch)})")
            print(f"  seed {seed}: " + "  ".join(cells))
        print(f"  {missed} of {len(args.seeds) * (args.orders - 1)} other orders end "
              "above 1.05 x the first order's objective")


if __name__ == "__main__":
    main()
