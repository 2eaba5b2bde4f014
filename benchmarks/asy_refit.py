"""What the server's joint refit does to Asy-OS's final objective, over seeds.

For every seed and q: sequential OS (``asyos.fit_os``) and simulated Asy-OS
(``fit_simulated``, the paper's delay τ = q, the default fitted rule) on the same
data; the table gives, per task and q, Asy-OS's final objective over sequential OS's
before the refit (the objective of u_C, which the run's trace ends at) and after it
(what the run reports: its support fitted jointly, docs/algorithms.md, "The joint
refit"), mean and worst over the seeds, and the recall of both.

    python benchmarks/asy_refit.py [--seeds 0 1 2 3 4] [--q 2 8] [--p 2000] [--s 40]
                                   [--n 500]
"""

import argparse
import warnings

import numpy as np

from asyos.datasets import make_classification, make_regression
from asyos.metrics import recall
from asyos.solvers.sequential import fit_os
from asyos.solvers.simulator import fit_simulated

TASKS = (("regression", make_regression, "squared"),
         ("classification", make_classification, "logistic"))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--q", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--p", type=int, default=2000)
    parser.add_argument("--s", type=int, default=40)
    parser.add_argument("--n", type=int, default=500)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")   # s against n, convergence: not the question here
    print(f"p = {args.p}, s = {args.s}, n = {args.n}, seeds {args.seeds}; objective "
          "over sequential OS's, mean (worst)")
    print(f"{'task':<15} {'q':>3} {'before refit':>17} {'after refit':>17} "
          f"{'recall Asy-OS':>14} {'sequential':>11}")
    for task, make, loss in TASKS:
        for q in args.q:
            rows = []
            for seed in args.seeds:
                problem = make(p=args.p, s=args.s, n=args.n, seed=seed)
                sequential = fit_os(problem.X, problem.y, args.s, loss=loss)
                asy = fit_simulated(problem.X, problem.y, args.s, q, loss=loss)
                rows.append((asy.asy["refit"]["objective_before"] / sequential.objective,
                             asy.objective / sequential.objective,
                             recall(asy.selected, problem.support),
                             recall(sequential.selected, problem.support)))
            r = np.array(rows)
            print(f"{task:<15} {q:>3} {r[:, 0].mean():>8.4f} ({r[:, 0].max():.4f}) "
                  f"{r[:, 1].mean():>8.4f} ({r[:, 1].max():.4f}) {r[:, 2].mean():>14.3f} "
                  f"{r[:, 3].mean():>11.3f}", flush=True)


if __name__ == "__main__":
    main()
