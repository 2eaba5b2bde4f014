"""The vote's later orders over the first order's contenders against over every
feature (``asyos.solvers.voting``): the default classifier
``OnlineSubstitutionClassifier(s)`` as a user fits it, once with the vote's default
(``contenders_per_s=CONTENDERS``) and once with ``contenders_per_s=None`` (or another
count, ``--versus``; or the default field with another number of orders,
``--versus default --orders N``), side by side on the same seeds in one run.

Problems (recall of the true support):
  d2048    the paper's classification protocol, ``make_classification(p=2048, s=32)``;
  d5000    the same at p = 5000, s = 100;
  rare     planted rare words as labels: ``make_rare_words(p=20_000, n=2000,
           planted=20, rate=0.01, noise=0.5)``, y = 1 above the median of its
           regression target (about 20 rows per planted word: hard);
  zipf     ``make_bag_of_words(p=20_000, n=1000, words=200, informative=20)``, the same
           labels.
Reported: mean and worst recall of each, the paired difference (contenders minus
the other field) with its standard error, and the seconds per fit of each.

    python benchmarks/vote_contenders.py [--problems d2048 d5000 rare zipf]
        [--seeds 12] [--first-seed 200] [--versus all|default|N] [--orders N]
"""

import argparse
import functools
import time

import numpy as np


def problem(name, seed):
    from asyos.datasets import make_bag_of_words, make_classification, make_rare_words
    if name in ("d2048", "d5000"):
        p, s = (2048, 32) if name == "d2048" else (5000, 100)
        made = make_classification(p=p, s=s, seed=seed)
        return made.X, made.y, made.support, s
    if name == "rare":
        made = make_rare_words(p=20_000, n=2000, planted=20, rate=0.01, noise=0.5,
                               seed=seed)
    else:
        made = make_bag_of_words(p=20_000, n=1000, words=200, informative=20,
                                 seed=seed)
    return made.X, np.where(made.y > np.median(made.y), 1, 0), made.support, 20


def fit(X, y, s, field, orders="auto"):
    """The default classifier's selection and seconds, its vote's later orders over
    ``field`` (``contenders_per_s``: a count, None for every feature, or False for
    the default), with ``orders`` (``n_orders``)."""
    import asyos.estimators.os as front
    from asyos import OnlineSubstitutionClassifier
    from asyos.solvers import voting
    front.fit_os_voted = voting.fit_os_voted if field is False else \
        functools.partial(voting.fit_os_voted, contenders_per_s=field)
    start = time.perf_counter()
    model = OnlineSubstitutionClassifier(n_features_to_select=s, n_orders=orders
                                         ).fit(X, y)
    return np.flatnonzero(model.coef_.ravel()), time.perf_counter() - start


def main():
    from asyos.metrics import recall
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=["d2048", "d5000", "rare",
                                                          "zipf"])
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--first-seed", type=int, default=200)
    parser.add_argument("--versus", default="all",
                        help="the other field: all (every feature), default or a "
                             "contenders_per_s")
    parser.add_argument("--orders", default="auto",
                        help="the other run's n_orders (default: the default's)")
    args = parser.parse_args()
    other = {"all": None, "default": False}.get(args.versus) if \
        args.versus in ("all", "default") else int(args.versus)
    orders = args.orders if args.orders == "auto" else int(args.orders)
    label = {None: "every feature", False: "default field"}.get(
        other, f"{other}·s contenders")
    if orders != "auto":
        label += f", {orders} orders"
    X, y, _, s = problem("d2048", 0)
    fit(X, y, s, False)   # compile or load the kernels, untimed
    print(f"| problem | seeds | default: recall (worst) | {label}: recall "
          f"(worst) | default − {label} | s/fit default | s/fit {label} | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.problems:
        got = {True: [], False: []}
        secs = {True: [], False: []}
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            X, y, support, s = problem(name, seed)
            for every in (False, True):   # side by side, the same seed
                selected, seconds = fit(X, y, s, other, orders) if every else \
                    fit(X, y, s, False)
                got[every].append(recall(selected, support))
                secs[every].append(seconds)
        c, e = np.array(got[False]), np.array(got[True])
        d = c - e
        print(f"| {name} | {args.seeds} | {c.mean():.3f} ({c.min():.3f}) | "
              f"{e.mean():.3f} ({e.min():.3f}) | {d.mean():+.3f} ± "
              f"{d.std(ddof=1) / np.sqrt(d.size):.3f} | {np.mean(secs[False]):.3f} | "
              f"{np.mean(secs[True]):.3f} | {np.mean(secs[True]) / np.mean(secs[False]):.1f}× |",
              flush=True)


if __name__ == "__main__":
    main()
