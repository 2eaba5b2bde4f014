"""Figs. 1 and 2 of Yang, Fujimaki, Kusumura & Liu (KDD 2016): recall and error vs p,
vs epochs, vs workers (the paper's Section 5).

Each sweep is a list of ``runner.Unit``s, one per (task, p, repetition): a unit draws
the paper's problem once (``asyos.datasets``, n = paper_n(s, p), σ = 0.1, seed
[seed, rep]), runs its methods on it, and scores each selection with
``asyos.metrics.evaluate`` (refit, recall, recovery or test error, as in the paper).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..datasets import make_classification, make_regression
from ..errors import InputError
from ..metrics import evaluate
from ..solvers.sequential import fit_os
from ..solvers.simulator import fit_simulated
from . import plot
from .comparators import METHODS
from .runner import (
    ERROR_COLUMN,
    Unit,
    format_table,
    problem_seed,
    run_units,
    summarize,
    write_csv,
)

__all__ = ["TASKS", "LOSS", "ONLINE", "SETTINGS", "ExperimentResult", "vs_p",
           "vs_epochs", "vs_workers", "make_problem", "method_table"]

TASKS = ("regression", "classification")
LOSS = {"regression": "squared", "classification": "squared_hinge"}
# The online baselines of METHODS: they read the features as a stream, like OS.
ONLINE = ("Grafting", "L1 coordinate descent", "L0 coordinate descent")
METRICS = ("recall", "recovery_error", "test_error", "seconds")

# Paper protocol (its Section 5) and the few-minute --quick version.
SETTINGS = {
    False: {"s": 100, "reps": 30,
            "vs-p": {"regression": list(range(2000, 6001, 500)),
                     "classification": list(range(1000, 5001, 500))},
            "curves": {"regression": [2000, 4000, 6000],
                       "classification": [1000, 3000, 5000]},
            "epochs": [1, 2, 3, 4, 5], "workers": [1, 2, 5, 10, 20]},
    True: {"s": 30, "reps": 3,
           "vs-p": {"regression": [1000, 2000, 3000],
                    "classification": [1000, 3000, 5000]},
           "curves": {"regression": [1000, 3000], "classification": [1000, 5000]},
           "epochs": [1, 2, 3], "workers": [1, 2, 5, 10, 20]},
}


@dataclass
class ExperimentResult:
    """What an experiment produced: its rows (the CSV), the summary and the files."""

    name: str
    rows: list
    summary: list
    table: str
    files: list


def make_problem(task: str, p: int, s: int, seed, n: int | None = None):
    """The paper's synthetic problem (its Section 5); n None: paper_n(s, p)."""
    if task == "regression":
        return make_regression(p=p, s=s, n=n, noise=0.1, seed=seed)
    if task == "classification":
        return make_classification(p=p, s=s, n=n, seed=seed)
    raise InputError(f"unknown task {task!r}; expected regression or classification")


def _os(X, y, s, *, loss, epochs):
    return fit_os(X, y, s, loss=loss, epochs=epochs, rule="magnitude")


def method_table(task: str, names: Sequence[str] | None = None) -> dict:
    """Legend name → f(X, y, s, *, loss, epochs): OS, the paper's baselines and the
    installed third-party comparators (which ignore loss and epochs).

    ``names``: only these, among those that apply to ``task`` (a comparator for the
    other task is skipped); a name no task knows is an error.
    """
    from .comparators import COMPARATORS, available_comparators

    table: dict[str, Callable] = {"OS": _os, **METHODS}
    for name, fit in available_comparators(task).items():
        table.setdefault(name, _comparator(fit))
    if names is None:
        return table
    known = {"OS", *METHODS, *COMPARATORS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(f"unknown method(s) {unknown}; available: {sorted(known)}")
    return {n: table[n] for n in names if n in table}


def _comparator(fit):
    def call(X, y, s, *, loss, epochs):
        return fit(X, y, s)
    return call


def selection(result, s: int) -> np.ndarray:
    """The selected indices of a method's result (Selection, FitResult or plain
    indices), cut to the s largest |w| when it kept more (the paper's protocol)."""
    get = lambda key: getattr(result, key, None)   # noqa: E731
    selected = get("selected") if get("selected") is not None else result
    selected = np.asarray(selected, dtype=np.int64).ravel()
    if selected.size > s:
        weights = get("weights")
        if weights is None or np.size(weights) != selected.size:
            raise RuntimeError(f"a method selected {selected.size} > s = {s} features "
                               "and gave no weights to rank them")
        selected = selected[np.argsort(-np.abs(np.asarray(weights)), kind="stable")[:s]]
    return np.sort(selected)


def _score(base: dict, problem, fit: Callable[[], object], s: int) -> tuple:
    """Run ``fit`` (timed), score its selection; a crash becomes a row with NaN
    metrics and the message in "failure", so one method cannot sink a long sweep."""
    row = dict(base)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fit()
    except InputError:
        raise
    except Exception as exc:  # reported in the CSV and in the summary
        row.update(recall=np.nan, **{ERROR_COLUMN[problem.task]: np.nan},
                   seconds=time.perf_counter() - start,
                   failure=f"{type(exc).__name__}: {exc}")
        return row, None
    row["seconds"] = time.perf_counter() - start
    if caught:  # e.g. a solver's ConvergenceWarning: kept with the run, not printed
        row["warnings"] = "; ".join(sorted({f"{w.category.__name__}: {w.message}"
                                            for w in caught}))[:300]
    chosen = selection(result, s)
    row["n_selected"] = int(chosen.size)
    row.update(evaluate(problem, chosen))
    return row, result


def _base(experiment, task, problem, s, rep, seed, **extra) -> dict:
    return {"experiment": experiment, "task": task, "p": problem.n_features,
            "n": problem.n_samples, "s": s, **extra, "rep": rep, "seed": seed}


# ---------------------------------------------------------------------------- units
def unit_methods(*, experiment, task, p, s, rep, seed, epochs_list, names) -> list:
    """One problem, every method in ``names`` at every epoch count in ``epochs_list``
    (batch methods, which ignore epochs, run once and are labelled with the first)."""
    problem = make_problem(task, p, s, problem_seed(seed, rep))
    table = method_table(task, names)
    rows = []
    for name, fit in table.items():
        counts = epochs_list if name == "OS" or name in ONLINE else epochs_list[:1]
        for epochs in counts:
            row, _ = _score(_base(experiment, task, problem, s, rep, seed,
                                  epochs=epochs, method=name), problem,
                            lambda: fit(problem.X, problem.y, s, loss=LOSS[task],
                                        epochs=epochs), s)
            rows.append(row)
    return rows


# (budget rule, delay): the paper's setting first; τ = 0 separates the cost of
# staleness from the cost of the budgets; "adaptive" is the server's global |w|
# threshold (docs/algorithms.md, "Asy-OS: staleness and budgets").
VARIANTS = (("fixed", "q"), ("fixed", 0), ("adaptive", "q"), ("adaptive", 0))


def variant_name(budget_rule: str, delay) -> str:
    return f"{budget_rule} budgets, τ = {delay}"


def unit_workers(*, task, p, s, rep, seed, workers, epochs, variants=VARIANTS) -> list:
    """One problem, simulated Asy-OS for each q in ``workers`` and each (budget rule,
    delay) variant; delay "q" is the paper's τ_max = q."""
    problem = make_problem(task, p, s, problem_seed(seed, rep))
    rows = []
    for q, (budget_rule, delay) in ((q, v) for q in workers for v in variants):
        row, result = _score(
            _base("vs-workers", task, problem, s, rep, seed, epochs=epochs,
                  workers=q, method=variant_name(budget_rule, delay)), problem,
            lambda: fit_simulated(problem.X, problem.y, s, q, loss=LOSS[task],
                                  delay=q if delay == "q" else delay,
                                  budget=budget_rule,
                                  epochs=epochs, seed=rep, rule="magnitude"), s)
        if result is not None:
            stale = result.asy["staleness"]
            row.update(staleness_max=stale["max"], staleness_mean=stale["mean"],
                       staleness_histogram=" ".join(str(int(c))
                                                    for c in stale["histogram"]))
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------- sweeps
def _resolve(quick: bool, tasks, ps, s, reps, key: str) -> tuple[dict, int, int]:
    defaults = SETTINGS[bool(quick)]
    tasks = [tasks] if isinstance(tasks, str) else list(tasks)
    for task in tasks:
        if task not in TASKS:
            raise InputError(f"unknown task {task!r}; expected one of {TASKS}")
    if ps is None:
        ps = {t: defaults[key][t] for t in tasks}
    elif not isinstance(ps, dict):
        ps = {t: list(ps) for t in tasks}
    s = defaults["s"] if s is None else int(s)
    reps = defaults["reps"] if reps is None else int(reps)
    if reps < 1:
        raise InputError(f"reps must be >= 1, got {reps}")
    return ps, s, reps


def _finish(name, units, out, jobs, progress, keys, *, x, curve, label, xlabel,
            title) -> ExperimentResult:
    rows = run_units(units, jobs, desc=name, progress=progress)
    out = Path(out)
    files = [write_csv(out / f"{name}.csv", rows)]
    summary = summarize(rows, keys, METRICS)
    files.append(plot.plot_curves(out / f"{name}.png", summary, x=x, curve=curve,
                                  label=label, xlabel=xlabel, title=title))
    table = format_table(summary, keys, METRICS)
    warned = sorted({r["method"] for r in rows if r.get("warnings")})
    if warned:
        table += (f"\nwarnings (see the 'warnings' column) from: {', '.join(warned)}")
    failures = [r for r in rows if r.get("failure")]
    if failures:
        table += f"\n{len(failures)} run(s) failed (see the 'failure' column): " + \
            "; ".join(sorted({f"{r['method']}: {r['failure']}" for r in failures}))
    return ExperimentResult(name, rows, summary, table, files)


def vs_p(out, *, tasks=TASKS, ps=None, s=None, reps=None, seed=0, jobs=1,
         quick=False, epochs=2, methods=None, progress=True) -> ExperimentResult:
    """Left column of Figs. 1–2: every method at ``epochs`` scans, against p."""
    ps, s, reps = _resolve(quick, tasks, ps, s, reps, "vs-p")
    units = [Unit(unit_methods, dict(experiment="vs-p", task=t, p=p, s=s, rep=r,
                                     seed=seed, epochs_list=[epochs], names=methods))
             for t in ps for p in ps[t] for r in range(reps)]
    return _finish("vs-p", units, out, jobs, progress, ("task", "p", "method"),
                   x="p", curve=lambda e: e["method"], label=str,
                   xlabel="number of features p",
                   title=f"recall and error vs p (s = {s}, n = 1.2 s log2 p, "
                         f"{epochs} scans, {reps} reps, mean ± SE)")


def vs_epochs(out, *, tasks=TASKS, ps=None, s=None, reps=None, seed=0, jobs=1,
              quick=False, epochs=None, methods=None,
              progress=True) -> ExperimentResult:
    """Middle column: OS and the online baselines against the number of scans, one
    curve per (method, p)."""
    ps, s, reps = _resolve(quick, tasks, ps, s, reps, "curves")
    epochs = list(SETTINGS[bool(quick)]["epochs"] if epochs is None else epochs)
    if methods is None:
        methods = ["OS", *(m for m in ONLINE if m in METHODS)]
    units = [Unit(unit_methods, dict(experiment="vs-epochs", task=t, p=p, s=s, rep=r,
                                     seed=seed, epochs_list=epochs, names=methods))
             for t in ps for p in ps[t] for r in range(reps)]
    return _finish("vs-epochs", units, out, jobs, progress,
                   ("task", "p", "method", "epochs"), x="epochs",
                   curve=lambda e: (e["method"], e["p"]),
                   label=lambda k: f"{k[0]}, p = {k[1]}", xlabel="scans (epochs)",
                   title=f"recall and error vs scans (s = {s}, {reps} reps, "
                         "mean ± SE)")


def vs_workers(out, *, tasks=TASKS, ps=None, s=None, reps=None, seed=0, jobs=1,
               quick=False, workers=None, epochs=2, variants=VARIANTS,
               progress=True) -> ExperimentResult:
    """Right column: simulated Asy-OS (``fit_simulated``, staleness "others",
    round-robin) against q, one curve per (variant, p): fixed or adaptive budgets,
    τ = q (the paper) or τ = 0; plus the staleness histogram of repetition 0 at the
    smallest p for each q (``vs-workers-staleness.png``)."""
    ps, s, reps = _resolve(quick, tasks, ps, s, reps, "curves")
    workers = list(SETTINGS[bool(quick)]["workers"] if workers is None else workers)
    units = [Unit(unit_workers, dict(task=t, p=p, s=s, rep=r, seed=seed,
                                     workers=workers, epochs=epochs,
                                     variants=tuple(variants)))
             for t in ps for p in ps[t] for r in range(reps)]
    result = _finish("vs-workers", units, out, jobs, progress,
                     ("task", "p", "method", "workers"), x="workers",
                     curve=lambda e: (e["method"], e["p"]),
                     label=lambda key: f"{key[0]}, p = {key[1]}",
                     xlabel="workers q",
                     title=f"simulated Asy-OS vs workers (s = {s}, {epochs} scans, "
                           f"{reps} reps, mean ± SE)")
    panels = {}
    for row in result.rows:
        if row["rep"] == 0 and row["p"] == min(ps[row["task"]]) and \
                row["method"] == variant_name(*variants[0]) and \
                "staleness_histogram" in row:
            counts = [int(c) for c in row["staleness_histogram"].split()]
            panels[(f"{row['task']} p={row['p']}", f"q = {row['workers']}")] = counts
    if panels:
        result.files.append(plot.plot_histograms(
            Path(out) / "vs-workers-staleness.png", panels,
            title="staleness of every push (rep 0), simulated with τ_max = q"))
    return result
