"""Selection quality of OS against the batch selectors, side by side in one run.

Three protocols, each over several seeds (mean and worst seed reported):

* **classification** (Yang et al., KDD 2016, Section 5): X iid N(0, 1), y = sign(Xw*),
  n = 1.2·s·log2 p (``asyos.datasets.make_classification``), at (p, s) = (2048, 32),
  (1000, 100) and (5000, 100).  The classifier a user calls, at its defaults (8
  feature orders and a vote, ``asyos.solvers.voting``) and with one order; recall of
  the true support by OS under the fitted rule
  (logistic and squared hinge; logistic with its ridge, and the loss with the ridge,
  chosen on the held-out set as abess's is) and under the paper's rule, against abess's
  ``LogisticRegression(support_size=s)`` at its defaults and with its ridge ``alpha``
  chosen on the held-out test set of the same size (as a user with a validation set
  would), and the L1-logistic paths of scikit-learn (liblinear) and celer: the first
  point of the path with at least s nonzeros, its s largest |w|.
* **regression** (the paper's Asy-OS size): n = 1000, p = 8192, s = 64, noise 0.1.
  OS (fitted and paper rules, 2 epochs and uncapped) against abess's
  ``LinearRegression(support_size=s)`` and celer's Lasso path.
* **Asy-OS** under the fitted rule in both synthetic protocols: the staleness simulator
  (τ = q, the paper's) at q = 2, 4, 8, its default 2 epochs.
* **breast cancer** (scikit-learn's copy of the Wisconsin data, standardized): 5-fold
  cross-validated accuracy of a logistic regression refit on k = 3 and 5 selected
  features (selection inside each fold, a ``Pipeline``), OS in index order and over
  10 random feature orders (mean and spread), against RFE, SelectKBest and abess.

Seconds are the mean wall time of one fit (after one warm-up fit, so no compilation).
Each OS row is also compared seed by seed with the best peer of its protocol (the
highest mean of abess and the L1 paths): the mean difference and its standard error.

    python benchmarks/selection_quality.py [--seeds 5] [--first-seed 0]
                                           [--only classification ...]
                                           [--sizes P:S ...] [--methods PREFIX ...]
                                           [--quick] [--csv F]

The full run takes about 5 minutes on one core; ``--quick`` (2 seeds, the smaller
classification size only) under a minute.  abess and celer are optional (``pip
install abess celer``); a missing one is reported and skipped.
"""

import argparse
import csv
import time
import warnings

import numpy as np

from asyos.datasets import make_classification, make_regression
from asyos.metrics import recall
from asyos.solvers.sequential import fit_os
from asyos.solvers.simulator import fit_simulated

ASY_WORKERS = (2, 4, 8)


def _timed(fit):
    start = time.perf_counter()
    value = fit()
    return value, time.perf_counter() - start


def _top(coef, s):
    """The s largest |w| (the support when fewer are nonzero)."""
    coef = np.ravel(coef)
    return np.sort(np.argsort(-np.abs(coef), kind="stable")[:s])


def _first_with(path_coefs, s):
    """The first point of a path (coefficients (p, n_points), weakest penalty last)
    with at least s nonzeros, as its s largest |w|."""
    for k in range(path_coefs.shape[1]):
        if np.count_nonzero(path_coefs[:, k]) >= s:
            return _top(path_coefs[:, k], s)
    return _top(path_coefs[:, -1], s)


def held_out(score, pb, decision):
    """The held-out score that picks a tuned model: "accuracy" of the signs of the
    decision values, or "auc", the area under the ROC curve (it ranks the candidates
    by every threshold at once, so it is less coarse than the accuracy of n points)."""
    if score == "auc":
        from sklearn.metrics import roc_auc_score

        return roc_auc_score(pb.y_test, decision)
    return np.mean(np.where(decision >= 0, 1, -1) == pb.y_test)


def _abess(kind, s, alpha=None):
    import abess

    model = getattr(abess, kind)(support_size=[s], **({} if alpha is None else
                                                      {"alpha": alpha}))
    return model


def classification_methods(s):
    """name → fit(problem) → selected indices."""
    from sklearn.svm import l1_min_c

    def os_fit(loss, rule):
        return lambda pb: fit_os(pb.X, pb.y, s, loss=loss, rule=rule, epochs=10
                                 if rule == "fitted" else 3).selected

    def os_tuned(losses, ridges, screen=None, score="accuracy"):
        """OS's loss and ridge picked like abess's alpha: by ``score`` on the held-out
        set (the first of equals, in the order given).  ``screen``: the candidates
        run this many passes only, and the winner is run again to convergence."""
        def fit(pb):
            n, best, chosen = len(pb.y), -np.inf, None
            for loss in losses:
                for ridge in ridges:
                    run = fit_os(pb.X, pb.y, s, loss=loss, ridge=ridge / n,
                                 epochs=screen or "auto")
                    value = held_out(score, pb, pb.X_test[:, run.selected] @ run.weights)
                    if value > best:
                        best, chosen = value, (loss, ridge, run.selected)
            loss, ridge, selected = chosen
            return selected if screen is None else \
                fit_os(pb.X, pb.y, s, loss=loss, ridge=ridge / n).selected
        return fit

    def abess_default(pb):
        return np.flatnonzero(_abess("LogisticRegression", s).fit(pb.X, pb.y > 0).coef_)

    def abess_tuned(score):
        def fit(pb):
            best, chosen = -np.inf, None
            for alpha in (0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0):
                model = _abess("LogisticRegression", s, alpha).fit(pb.X, pb.y > 0)
                value = held_out(score, pb, pb.X_test @ model.coef_ + model.intercept_)
                if value > best:
                    best, chosen = value, np.flatnonzero(model.coef_)
            return chosen
        return fit

    def l1_path(model):
        """Weaken the L1 penalty from where the first feature enters (C = l1_min_c,
        the same for both: min C·Σ log-loss + ‖w‖₁) until s features are in, warm
        starts along the way, as a user of either library would."""
        def fit(pb):
            c0 = l1_min_c(pb.X, pb.y, loss="log")
            coefs = []
            for c in c0 * np.logspace(0, 3, 40):
                model.set_params(C=c).fit(pb.X, pb.y)
                coefs.append(np.ravel(model.coef_).copy())
                if np.count_nonzero(coefs[-1]) >= s:
                    break
            return _first_with(np.array(coefs).T, s)
        return fit

    def sklearn_l1(pb):
        from sklearn.linear_model import LogisticRegression

        return l1_path(LogisticRegression(l1_ratio=1.0, solver="liblinear",
                                          warm_start=True, tol=1e-6,
                                          max_iter=1000))(pb)

    def celer_l1(pb):
        from celer import LogisticRegression

        return l1_path(LogisticRegression(warm_start=True, tol=1e-6))(pb)

    def asy_fit(q):
        return lambda pb: fit_simulated(pb.X, pb.y, s, q, loss="logistic").selected

    def classifier(**params):
        """The estimator a user calls, as they call it."""
        from asyos import OnlineSubstitutionClassifier

        return lambda pb: np.flatnonzero(
            OnlineSubstitutionClassifier(s, **params).fit(pb.X, pb.y).support_)

    return {"OS classifier, defaults (8 orders vote)": classifier(),
            "OS classifier, one order": classifier(n_orders=1),
            "OS fitted (logistic)": os_fit("logistic", "fitted"),
            **{f"Asy-OS fitted (logistic), q = {q}, simulated": asy_fit(q)
               for q in ASY_WORKERS},
            "OS fitted (squared hinge)": os_fit("squared_hinge", "fitted"),
            "OS fitted (logistic), ridge tuned": os_tuned(
                ("logistic",), (1.0, 3.0, 10.0, 30.0, 100.0, 300.0)),
            "OS fitted (logistic), ridge tuned, 3-pass screen": os_tuned(
                ("logistic",), (1.0, 3.0, 10.0, 30.0, 100.0, 300.0), screen=3),
            "OS fitted, loss and ridge tuned": os_tuned(
                ("logistic", "squared_hinge"), (1.0, 3.0, 10.0, 30.0)),
            "OS fitted, loss and ridge tuned, 3-pass screen": os_tuned(
                ("logistic", "squared_hinge"), (1.0, 3.0, 10.0, 30.0), screen=3),
            "OS fitted (logistic), ridge tuned by AUC, 3-pass screen": os_tuned(
                ("logistic",), (1.0, 3.0, 10.0, 30.0, 100.0, 300.0), screen=3,
                score="auc"),
            "OS fitted, loss and ridge tuned by AUC": os_tuned(
                ("logistic", "squared_hinge"), (1.0, 3.0, 10.0, 30.0), score="auc"),
            "OS fitted, loss and ridge tuned by AUC, 3-pass screen": os_tuned(
                ("logistic", "squared_hinge"), (1.0, 3.0, 10.0, 30.0), screen=3,
                score="auc"),
            "OS paper rule (logistic)": os_fit("logistic", "magnitude"),
            "OS paper rule (squared hinge)": os_fit("squared_hinge", "magnitude"),
            "abess default": abess_default,
            "abess ridge tuned": abess_tuned("accuracy"),
            "abess ridge tuned by AUC": abess_tuned("auc"),
            "L1-logistic path (scikit-learn)": sklearn_l1,
            "L1-logistic path (celer)": celer_l1}


def regression_methods(s):
    def os_fit(rule, epochs):
        return lambda pb: fit_os(pb.X, pb.y, s, rule=rule, epochs=epochs).selected

    def abess_fit(pb):
        return np.flatnonzero(_abess("LinearRegression", s).fit(pb.X, pb.y).coef_)

    def celer_lasso(pb):
        from celer import celer_path

        alpha_max = np.max(np.abs(pb.X.T @ pb.y)) / len(pb.y)
        _, coefs, _ = celer_path(pb.X, pb.y, pb="lasso",
                                 alphas=alpha_max * np.logspace(0, -3, 60), tol=1e-6)
        return _first_with(coefs, s)

    def asy_fit(q):
        return lambda pb: fit_simulated(pb.X, pb.y, s, q).selected

    return {"OS fitted, 2 epochs": os_fit("fitted", 2),
            **{f"Asy-OS fitted, q = {q}, simulated": asy_fit(q) for q in ASY_WORKERS},
            "OS fitted, until no swap": os_fit("fitted", 20),
            "OS paper rule, 2 epochs": os_fit("magnitude", 2),
            "OS paper rule, 3 epochs": os_fit("magnitude", 3),
            "abess": abess_fit,
            "Lasso path (celer)": celer_lasso}


def run_synthetic(task, p, s, n, seeds, rows, only=None):
    """``seeds``: the data sets' seeds, a range."""
    make = make_classification if task == "classification" else make_regression
    problems = [make(p, s, n, seed=seed) for seed in seeds]
    methods = (classification_methods if task == "classification"
               else regression_methods)(s)
    if only:
        methods = {name: fit for name, fit in methods.items()
                   if name.startswith(tuple(only))}
    per_seed, first = {}, len(rows)
    for name, fit in methods.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit(problems[0])   # warm-up: compilation and imports are not timed
        except ImportError as exc:
            print(f"  {name}: skipped ({exc})")
            continue
        scores, seconds = [], []
        per_seed[name] = scores
        for pb in problems:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                selected, elapsed = _timed(lambda: fit(pb))
            scores.append(recall(selected, pb.support))
            seconds.append(elapsed)
        error = np.std(scores, ddof=1) / np.sqrt(len(scores)) if len(scores) > 1 \
            else float("nan")
        rows.append({"protocol": f"{task} p={p} s={s} n={problems[0].n_samples}",
                     "method": name, "mean": np.mean(scores), "error": error,
                     "worst": np.min(scores),
                     "seconds": np.mean(seconds),
                     "seeds": f"{seeds.start}-{seeds.stop - 1}"})
        print(f"  {name:34s} recall {np.mean(scores):.3f} ± {error:.3f} "
              f"(worst {np.min(scores):.3f})"
              f"  {np.mean(seconds):6.3f} s", flush=True)
    paired_with_best_peer(per_seed, rows[first:])


PEERS = ("abess", "L1", "Lasso")


def paired_with_best_peer(per_seed, rows):
    """Each OS row against the peer with the best mean, seed by seed: the mean of the
    differences and its standard error (the seeds are shared, so the spread between
    data sets cancels), into the rows and on screen."""
    peers = {name: v for name, v in per_seed.items() if name.startswith(PEERS)}
    if not peers:
        return
    best = max(peers, key=lambda name: np.mean(peers[name]))
    print(f"  paired with the best peer ({best}), mean difference ± standard error:")
    for row in rows:
        if not row["method"].startswith("OS"):
            continue
        diff = np.asarray(per_seed[row["method"]]) - np.asarray(peers[best])
        row["vs_best_peer"] = diff.mean()
        row["standard_error"] = diff.std(ddof=1) / np.sqrt(len(diff)) \
            if len(diff) > 1 else float("nan")
        print(f"    {row['method']:34s} {row['vs_best_peer']:+.3f} ± "
              f"{row['standard_error']:.3f}", flush=True)


def run_breast_cancer(rows, orders=10):
    from sklearn.datasets import load_breast_cancer
    from sklearn.feature_selection import RFE, SelectKBest, f_classif
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from asyos import OnlineSubstitutionSelector

    X, y = load_breast_cancer(return_X_y=True)
    folds = StratifiedKFold(5, shuffle=True, random_state=0)

    def accuracy(selector, X=X):
        pipe = make_pipeline(StandardScaler(), selector,
                             LogisticRegression(max_iter=1000))
        return cross_val_score(pipe, X, y, cv=folds).mean()

    for k in (3, 5):
        print(f" k = {k}", flush=True)

        def os_selector(rule):
            return OnlineSubstitutionSelector(k, loss="logistic", rule=rule, epochs=10)

        results = {"RFE (logistic)": accuracy(RFE(LogisticRegression(max_iter=1000),
                                                  n_features_to_select=k)),
                   "SelectKBest (F test)": accuracy(SelectKBest(f_classif, k=k))}
        for rule in ("fitted", "magnitude"):
            name = f"OS {rule} rule"
            results[f"{name}, index order"] = accuracy(os_selector(rule))
            shuffled = [accuracy(os_selector(rule),
                                 X[:, np.random.default_rng(seed).permutation(X.shape[1])])
                        for seed in range(orders)]
            rows.append({"protocol": f"breast cancer k={k}", "method":
                         f"{name}, {orders} random orders", "mean": np.mean(shuffled),
                         "worst": np.min(shuffled), "seconds": float("nan"),
                         "seeds": orders})
            print(f"  {rows[-1]['method']:34s} accuracy {np.mean(shuffled):.3f} "
                  f"(worst {np.min(shuffled):.3f}, spread "
                  f"{np.max(shuffled) - np.min(shuffled):.3f})", flush=True)
        try:
            results["abess"] = accuracy(_AbessSelector(k))
        except ImportError as exc:
            print(f"  abess: skipped ({exc})")
        for name, value in results.items():
            rows.append({"protocol": f"breast cancer k={k}", "method": name,
                         "mean": value, "worst": value, "seconds": float("nan"),
                         "seeds": 1})
            print(f"  {name:34s} accuracy {value:.3f}", flush=True)


class _AbessSelector:
    """abess's logistic best subset as a scikit-learn selector step."""

    def __init__(self, k):
        self.k = k

    def get_params(self, deep=True):
        return {"k": self.k}

    def set_params(self, **params):
        self.k = params.get("k", self.k)
        return self

    def fit(self, X, y):
        self.support_ = np.flatnonzero(_abess("LogisticRegression", self.k).fit(
            X, y).coef_)
        return self

    def transform(self, X):
        return X[:, self.support_]

    def fit_transform(self, X, y):
        return self.fit(X, y).transform(X)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first data set's seed (seeds not used to design a "
                        "method: e.g. 200)")
    parser.add_argument("--only", nargs="+", choices=("classification", "regression",
                                                      "breast_cancer"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", nargs="+", metavar="P:S",
                        help="classification sizes to run (default 2048:32 1000:100 "
                        "5000:100)")
    parser.add_argument("--methods", nargs="+", metavar="PREFIX",
                        help="run only the methods whose names start with these")
    parser.add_argument("--csv", help="write the rows here")
    args = parser.parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + (2 if args.quick else args.seeds))
    parts = args.only or ("classification", "regression", "breast_cancer")
    rows = []
    if "classification" in parts:
        sizes = [tuple(int(v) for v in size.split(":")) for size in args.sizes] \
            if args.sizes else ((2048, 32),) if args.quick else \
            ((2048, 32), (1000, 100), (5000, 100))
        for p, s in sizes:
            print(f"classification p={p} s={s}, seeds {seeds.start}-{seeds.stop - 1}",
                  flush=True)
            run_synthetic("classification", p, s, None, seeds, rows, args.methods)
    if "regression" in parts and not args.quick:
        print(f"regression n=1000 p=8192 s=64, seeds {seeds.start}-{seeds.stop - 1}",
              flush=True)
        run_synthetic("regression", 8192, 64, 1000, seeds, rows, args.methods)
    if "breast_cancer" in parts:
        print("breast cancer, 5-fold CV accuracy of a logistic refit", flush=True)
        run_breast_cancer(rows, orders=3 if args.quick else 10)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(
                key for row in rows for key in row)))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
