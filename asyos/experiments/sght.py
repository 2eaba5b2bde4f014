"""The SGHT paper's simulation (Xiang, Yang & Ye, KDD 2014, Section 5.3 and Table 3):
bi-level and group selection.

y = A x̄ + ε with A ∈ ℝ^{100×200} standard normal, 20 groups of 10, groups 0-5 active:
case 1 (bi-level) puts each active group's value on 3 random positions (18 features),
case 2 (group) on all 10 (60 features).  Our choices where the paper is silent: a
group's value is ±U[1, 5] (random sign), ε ~ N(0, 2²), a 1000-sample test set.  Each
method is tuned by 5-fold cross-validation on the training data (validation MSE of its
own prediction) over the paper's grids, then scored on the groups and features it
selects (NO = selected, FP, FN) and its test MSE; ``seconds`` includes the CV.

The methods: SGHT from w = 0 (the paper's), SGHT from four starts keeping the run
with the least training objective ("SGHT (4 starts)": 0, X⁺y, ridge, Xᵀy/n; see
``sght.solver.start_point``) and DC (Xiang, Wang & Ye 2015, ``baselines.dc``;
truncation level τ = ``DC_TAU``, ours) over the paper's 25 (s1, s2) pairs; the
fractional models
frac(1,2) and frac(2,1) (our reconstruction, ``baselines.fractional``) over the
paper's 5 values of λ in [1e-8, 1e2]; OMP, Proj-GD, gOMP over their budgets; sgLasso
(ours, α = 0.5) over λ/λ_max; group-aware OS over the pairs.

Model selection (``selections``), all from one CV table and one full-data fit per
grid value:
  "cv"    the least mean validation MSE (the paper's rule);
  "1se"   the one-standard-error rule (Hastie, Tibshirani & Friedman, The Elements of
          Statistical Learning, 2nd ed. 2009, Section 7.10): the sparsest grid value
          whose mean CV error is within one standard error (over the folds) of the
          least;
  "ebic"  the extended BIC of Chen & Chen (Biometrika 2008, eq. (2)),
          n·log(RSS/n) + k·log n + 2γ·log C(p, k), on the least-squares refit of the
          full-data fit's support (k features), with γ = 1 − 1/(2κ), p = n^κ (their
          Section 3); a support of n or more features scores +∞;
  "gebic" ours: the same with the bi-level model count, log C(G, g) + log C(m, k)
          for k features in g of the G groups (m: the features of those g groups),
          in place of log C(p, k) — Chen & Chen's prior spread over the (g, k)
          classes, so a spurious group costs more than a spurious feature.
"Sparsest" orders a method's grid by ``complexity``: (s2, s1) for the bi-level pairs,
the budget for OMP, Proj-GD and gOMP, −λ for sgLasso and the fractional models.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from ..baselines import fit_iht
from ..baselines.dc import fit_dc
from ..baselines.fractional import fit_frac
from ..baselines.group import (
    fit_gomp,
    fit_omp,
    fit_sparse_group_lasso,
    sparse_group_lambda_max,
)
from ..errors import InputError
from ..sght.solver import STARTS, fit_sght
from ..solvers.sequential import fit_os
from . import plot
from .runner import Unit, format_table, problem_seed, run_units, summarize, write_csv
from .sweeps import ExperimentResult

CASES = {1: "bi-level (6 groups, 18 features)", 2: "group (6 groups, 60 features)"}
N, P, GROUP_SIZE, ACTIVE, NOISE, N_TEST, FOLDS = 100, 200, 10, 6, 2.0, 1000, 5
SELECTIONS = ("cv", "1se", "ebic", "gebic")
PENALTIES = ("sgLasso", "frac(1,2)", "frac(2,1)")   # grids over λ, not budgets
DC_TAU = 0.1   # DC's truncation level τ (ours: a tenth of the least true |x̄_j|)
METRICS = ("grp_NO", "grp_FP", "grp_FN", "feat_NO", "feat_FP", "feat_FN", "test_mse",
           "seconds")


def grids(quick: bool) -> dict:
    """The paper's grids (its Section 5.3); --quick keeps every other value."""
    s2 = [2, 4, 6, 8, 10]
    pairs = [(k * s, s) for s in s2 for k in (2, 4, 6, 8, 10)]  # s1 ∈ {2..10}·s2
    grid = {"pairs": pairs, "features": list(range(6, 61, 6)), "groups": s2,
            "lambdas": list(np.geomspace(1.0, 1e-3, 6)),
            "fractions": list(np.geomspace(1e-8, 1e2, 5))}
    if quick:
        grid = {name: values[::2] for name, values in grid.items()}
    return grid


def make_case(case: int, seed) -> tuple:
    """(X, y, X_test, y_test, groups, x̄) of the simulation for ``case`` 1 or 2."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(P // GROUP_SIZE), GROUP_SIZE)
    w = np.zeros(P)
    for g in range(ACTIVE):
        where = rng.choice(GROUP_SIZE, 3, replace=False) if case == 1 else \
            np.arange(GROUP_SIZE)
        w[g * GROUP_SIZE + where] = rng.uniform(1, 5) * rng.choice([-1.0, 1.0])
    X, X_test = rng.standard_normal((N, P)), rng.standard_normal((N_TEST, P))
    y = X @ w + NOISE * rng.standard_normal(N)
    y_test = X_test @ w + NOISE * rng.standard_normal(N_TEST)
    return X, y, X_test, y_test, groups, w


def _group_os(X, y, groups, s1, s2):
    result = fit_os(X, y, s1, groups=groups, s2=s2, epochs=3, rule="magnitude")
    w = np.zeros(X.shape[1])
    w[result.selected] = result.weights
    return w


def _weights(selection, p: int) -> np.ndarray:
    w = np.zeros(p)
    w[selection.selected] = selection.weights
    return w


def methods(groups, grid: dict) -> dict:
    """name → (fit(X, y, param) → w, parameter grid)."""
    def sgl(X, y, ratio):
        lam = ratio * sparse_group_lambda_max(X, y, groups)
        return _weights(fit_sparse_group_lasso(X, y, groups, lam, max_iter=500,
                                               tol=1e-5), X.shape[1])
    return {
        "SGHT": (lambda X, y, a: _weights(fit_sght(X, y, a[0], groups, a[1]),
                                          X.shape[1]), grid["pairs"]),
        "SGHT (4 starts)": (lambda X, y, a: _weights(
            fit_sght(X, y, a[0], groups, a[1], starts=STARTS), X.shape[1]),
            grid["pairs"]),
        "group OS": (lambda X, y, a: _group_os(X, y, groups, *a), grid["pairs"]),
        "Proj-GD": (lambda X, y, k: _weights(fit_iht(X, y, k), X.shape[1]),
                    grid["features"]),
        "OMP": (lambda X, y, k: _weights(fit_omp(X, y, k), X.shape[1]),
                grid["features"]),
        "gOMP": (lambda X, y, k: _weights(fit_gomp(X, y, groups, k), X.shape[1]),
                 grid["groups"]),
        "sgLasso": (sgl, grid["lambdas"]),
        "frac(1,2)": (lambda X, y, lam: _weights(fit_frac(X, y, groups, lam, 1),
                                                 X.shape[1]), grid["fractions"]),
        "frac(2,1)": (lambda X, y, lam: _weights(fit_frac(X, y, groups, lam, 2),
                                                 X.shape[1]), grid["fractions"]),
        "DC": (lambda X, y, a: _weights(fit_dc(X, y, a[0], groups, a[1], tau=DC_TAU),
                                        X.shape[1]), grid["pairs"]),
    }


def complexity(name: str, value) -> tuple:
    """The sort key of ``value`` in ``name``'s grid: smaller is sparser."""
    if name in PENALTIES:
        return (-float(value),)
    if isinstance(value, tuple):           # (s1, s2): fewer groups first
        return (value[1], value[0])
    return (value,)


def cv_errors(fit, grid, X, y, seed) -> np.ndarray:
    """Validation MSE of every grid value on each of ``FOLDS`` folds: (len(grid),
    FOLDS)."""
    folds = np.array_split(np.random.default_rng(seed).permutation(len(y)), FOLDS)
    errors = np.empty((len(grid), len(folds)))
    for i, value in enumerate(grid):
        for f, held in enumerate(folds):
            train = np.setdiff1d(np.arange(len(y)), held)
            w = fit(X[train], y[train], value)
            errors[i, f] = float(np.mean((X[held] @ w - y[held]) ** 2))
    return errors


def cross_validate(fit, grid, X, y, seed) -> object:
    """The grid value with the least mean validation MSE over ``FOLDS`` folds."""
    return grid[int(np.argmin(cv_errors(fit, grid, X, y, seed).mean(axis=1)))]


def one_se_index(errors, keys) -> int:
    """The one-standard-error rule: among the grid values whose mean CV error is at
    most the least mean plus that point's standard error (fold SD / √folds), the one
    with the smallest ``keys`` entry (ties: the lower mean error)."""
    errors = np.asarray(errors, dtype=float)
    mean = errors.mean(axis=1)
    best = int(np.argmin(mean))
    folds = errors.shape[1]
    se = float(errors[best].std(ddof=1) / math.sqrt(folds)) if folds > 1 else 0.0
    within = np.flatnonzero(mean <= mean[best] + se)
    return int(min(within, key=lambda i: (keys[i], mean[i])))


def _log_comb(a: int, b: int) -> float:
    return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)


def ebic(X, y, w, groups=None) -> float:
    """Chen & Chen's (2008) extended BIC of the least-squares refit on w's support;
    with ``groups`` (each feature's label) the bi-level count log C(G, g) +
    log C(m, k) replaces log C(p, k) (ours; see the module docstring)."""
    n, p = X.shape
    support = np.flatnonzero(w)
    k = support.size
    if k >= n:
        return math.inf
    if k:
        coef = np.linalg.lstsq(X[:, support], y, rcond=None)[0]
        rss = float(np.sum((y - X[:, support] @ coef) ** 2))
    else:
        rss = float(y @ y)
    gamma = max(0.0, 1.0 - math.log(n) / (2.0 * math.log(p)))
    if groups is None:
        log_comb = _log_comb(p, k)
    else:
        labels, sizes = np.unique(groups, return_counts=True)
        chosen = np.isin(labels, groups[support])
        log_comb = _log_comb(labels.size, int(chosen.sum())) + \
            _log_comb(int(sizes[chosen].sum()), k)
    return n * math.log(max(rss, np.finfo(float).tiny) / n) + k * math.log(n) \
        + 2.0 * gamma * log_comb


def run_case(case: int, rep: int, seed: int, quick: bool,
             only: tuple | None = None,
             selections: tuple = ("cv",)) -> list[dict]:
    """One repetition of one case: every method tuned (once per model-selection
    rule in ``selections``, all from the same CV table), fitted and scored."""
    X, y, X_test, y_test, groups, truth = make_case(case, problem_seed(seed, rep))
    true_groups, true_features = set(groups[truth != 0]), set(np.flatnonzero(truth))
    rows = []
    for name, (fit, grid) in methods(groups, grids(quick)).items():
        if only is not None and name not in only:
            continue
        start = time.perf_counter()
        errors = cv_errors(fit, grid, X, y, problem_seed(seed, rep)) \
            if {"cv", "1se"} & set(selections) else None
        cv_seconds = time.perf_counter() - start
        full: dict[int, tuple] = {}        # grid index → (w, seconds of its fit)

        def fitted(i):
            if i not in full:
                begin = time.perf_counter()
                w = fit(X, y, grid[i])
                full[i] = (w, time.perf_counter() - begin)
            return full[i]

        scores = {rule: [ebic(X, y, fitted(i)[0], groups if rule == "gebic" else None)
                         for i in range(len(grid))]
                  for rule in ("ebic", "gebic") if rule in selections}
        for rule in selections:
            if rule == "cv":
                index, seconds = int(np.argmin(errors.mean(axis=1))), cv_seconds
            elif rule == "1se":
                index = one_se_index(errors, [complexity(name, v) for v in grid])
                seconds = cv_seconds
            else:
                # an IC needs no CV: its time is the full-data fits'
                index = int(np.argmin(scores[rule]))
                seconds = sum(t for _, t in full.values())
            w, fit_seconds = fitted(index)
            if rule not in scores:
                seconds += fit_seconds
            chosen = set(np.flatnonzero(w))
            chosen_groups = set(groups[list(chosen)]) if chosen else set()
            rows.append({
                "case": case, "method": name, "select": rule, "rep": rep,
                "param": str(grid[index]),
                "grp_NO": len(chosen_groups), "grp_FP": len(chosen_groups - true_groups),
                "grp_FN": len(true_groups - chosen_groups), "feat_NO": len(chosen),
                "feat_FP": len(chosen - true_features),
                "feat_FN": len(true_features - chosen),
                "test_mse": float(np.mean((X_test @ w - y_test) ** 2)),
                "seconds": seconds})
    return rows


def sght_table(out, *, reps: int | None = None, seed: int = 0, jobs: int = 1,
               quick: bool = False, progress: bool = True,
               methods_only=None, selections=("cv",)) -> ExperimentResult:
    """Table 3 of the paper for both cases: CSV, PNG and the summary table.
    ``selections``: the model-selection rules to report (any of ``SELECTIONS``);
    each method's rows carry the rule in ``select``."""
    reps = reps or (3 if quick else 10)
    only = tuple(methods_only) if methods_only else None
    known = methods(np.zeros(P, dtype=np.int64), grids(quick))
    unknown = [name for name in only or () if name not in known]
    if unknown:
        raise InputError(f"unknown method {', '.join(unknown)}; the methods are "
                         f"{', '.join(known)}")
    selections = tuple(selections)
    bad = [rule for rule in selections if rule not in SELECTIONS]
    if not selections or bad:
        raise InputError(f"selections must be among {', '.join(SELECTIONS)}, got "
                         f"{', '.join(map(str, bad)) or 'none'}")
    units = [Unit(run_case, dict(case=case, rep=rep, seed=seed, quick=quick, only=only,
                                 selections=selections))
             for case in CASES for rep in range(reps)]
    rows = run_units(units, jobs, desc="sght", progress=progress)
    keys = ("case", "method", "select")
    summary = summarize(rows, keys, METRICS)
    out = Path(out)
    files = [write_csv(out / "sght.csv", rows), _plot(out / "sght.png", summary)]
    return ExperimentResult("sght", rows, summary,
                            format_table(summary, keys, METRICS), files)


def _plot(path: Path, summary: list[dict]) -> Path:
    """Per case: group and feature false positives / negatives per method (bars)."""
    plt = plot.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.8))
    bars = ("grp_FP", "grp_FN", "feat_FP", "feat_FN")
    for ax, case in zip(axes, CASES):
        entries = [e for e in summary if e["case"] == case]
        x = np.arange(len(entries))
        for i, metric in enumerate(bars):
            ax.bar(x + (i - 1.5) * 0.2, [e[metric] for e in entries], 0.2,
                   yerr=[e[metric + "_se"] for e in entries], label=metric)
        ax.set_xticks(x, [e["method"] if e.get("select", "cv") == "cv" else
                          f"{e['method']} ({e['select']})" for e in entries],
                      rotation=35, ha="right")
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_title(f"case {case}: {CASES[case]}")
    axes[0].set_ylabel("count (mean ± SE)")
    axes[1].legend()
    fig.tight_layout()
    return plot._save(fig, plt, path)
