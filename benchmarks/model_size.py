"""The model size chosen for the user: how long ``n_features_to_select="auto"`` takes
against one fit at the true size, and what it finds.

Side by side in one process, per seed and in alternating order: the regressor with
``n_features_to_select="auto"`` (sic, the default search), the same with the size
given (``s``, the truth), and ``solvers.path.fit_path`` with ``search="grid"`` and
``search="refine"`` on the same data.  Reports the time ratios to the one fit (median
and worst over the seeds) and recall (mean and worst).

    python benchmarks/model_size.py [--p 2000] [--s 100] [--seeds 0 1 2 3 4 5 6 7]
"""

import argparse
import time
import warnings

import numpy as np

from asyos import OnlineSubstitutionRegressor
from asyos.datasets import make_regression
from asyos.metrics import recall
from asyos.solvers.path import fit_path


def _timed(make):
    start = time.perf_counter()
    value = make()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--p", type=int, default=2000)
    parser.add_argument("--s", type=int, default=100)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    args = parser.parse_args()
    warm = make_regression(p=200, s=5, seed=99)   # compile or load the kernels first
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        OnlineSubstitutionRegressor(n_features_to_select="auto").fit(warm.X, warm.y)
    rows = []
    print(f"{'seed':>4} {'one fit':>8} {'auto':>6} {'ratio':>6} {'chosen':>6} "
          f"{'recall':>6} {'one':>5} {'grid/refine':>12}", flush=True)
    for k, seed in enumerate(args.seeds):
        problem = make_regression(p=args.p, s=args.s, seed=seed)
        X, y = problem.X, problem.y
        runs = {
            "one": lambda: OnlineSubstitutionRegressor(
                n_features_to_select=args.s).fit(X, y),
            "auto": lambda: OnlineSubstitutionRegressor(
                n_features_to_select="auto").fit(X, y),
            "grid": lambda: fit_path(X, y, search="grid"),
            "refine": lambda: fit_path(X, y, search="refine"),
        }
        order = list(runs) if k % 2 == 0 else list(reversed(runs))
        done = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in order:
                done[name] = _timed(runs[name])
        (one, one_s), (auto, auto_s) = done["one"], done["auto"]
        found = recall(np.flatnonzero(auto.support_), problem.support)
        baseline = recall(np.flatnonzero(one.support_), problem.support)
        grid_over_refine = done["grid"][1] / done["refine"][1]
        rows.append((auto_s / one_s, found, baseline, grid_over_refine))
        print(f"{seed:>4} {one_s:>7.2f}s {auto_s:>5.2f}s {auto_s / one_s:>5.2f}x "
              f"{int(auto.support_.sum()):>6} {found:>6.2f} {baseline:>5.2f} "
              f"{grid_over_refine:>11.2f}x", flush=True)
    table = np.array(rows)
    print(f"auto / one fit: median {np.median(table[:, 0]):.2f}x, worst "
          f"{table[:, 0].max():.2f}x; recall mean {table[:, 1].mean():.3f}, worst "
          f"{table[:, 1].min():.2f} (one fit at s: mean {table[:, 2].mean():.3f}); "
          f"grid / refine: median {np.median(table[:, 3]):.2f}x")


if __name__ == "__main__":
    main()
