"""FGM experiments (after Tan, Tsang & Wang 2014, Section 8): accuracy against
selected features.

``fgm-synthetic``: the paper's linear synthetic study (its Section 8.2), reduced (X
i.i.d. N(0,1), 30 true weights uniform in [−1, 1], y = sign(Xw*), 4,096 test points):
test accuracy and true features recovered vs features selected for FGM, OS and the
L1 squared-hinge SVM (LIBLINEAR); and exact vs inexact inner solves (objective vs APG
iterations, as in its Section 8.2.1).

``fgm-poly``: data that ships with scikit-learn (digits one-vs-one pairs, breast
cancer) in the degree-2 space of ``InteractionStream``: base features scaled to [0, 1]
on the training half (as the paper's LIBSVM data; standardizing instead gives the
products of rarely-nonzero pixels huge norms, and FGM's raw scores c_j² then favour
them), then their products.  FGM searches the space implicitly and fits a bias
(FGM-SHIFT), OS streams it (asyos's OS has no intercept), L1-SVM gets the explicitly
expanded matrix and LIBLINEAR's bias.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..fgm.cutting_plane import check_fgm, fgm
from ..io.writable import save_figure
from ..solvers.sequential import fit_os
from ..streams import InteractionStream
from . import plot
from .runner import Unit, format_table, run_units, summarize, write_csv
from .sweeps import ExperimentResult

__all__ = ["fgm_poly", "fgm_synthetic"]

FGM_B, FGM_C = 5, 10.0             # our synthetic setting; B = 2 for fgm-poly
METRICS = ("accuracy", "recovered", "n_selected", "seconds")
SETTINGS = {False: {"m": 4096, "reps": 5, "ks": [10, 20, 30, 40, 50, 60, 80, 100],
                    "poly_ks": [2, 4, 6, 10, 15, 20, 30, 40, 60], "poly_reps": 5},
            True: {"m": 2048, "reps": 2, "ks": [10, 30, 50],
                   "poly_ks": [2, 5, 10, 20, 40], "poly_reps": 2}}
PAIRS = ((3, 8), (1, 7), (4, 9))


def _sign(v):
    return np.where(v >= 0, 1.0, -1.0)


def _l1_svm_path(X, y, max_nnz: int, fit_intercept: bool = False, steps: int = 60):
    """(nnz, coef, intercept, seconds) along LIBLINEAR's L1 squared-hinge path from
    C₀ = 1/(2‖Xᵀy‖∞) (w = 0 is optimal there without a bias) up by 1.25× per step."""
    from sklearn.svm import LinearSVC

    C = 1.0 / (2.0 * np.max(np.abs(X.T @ y)))
    out = []
    for _ in range(steps):
        C *= 1.25
        start = time.perf_counter()
        model = LinearSVC(penalty="l1", loss="squared_hinge", dual=False, C=C,
                          fit_intercept=fit_intercept, tol=1e-4,
                          max_iter=5000).fit(X, y)
        coef = model.coef_.ravel()
        nnz = int(np.count_nonzero(coef))
        if nnz:
            out.append((nnz, coef, float(np.ravel(model.intercept_)[0]),
                        time.perf_counter() - start))
        if nnz >= max_nnz:
            break
    return out


def _fgm(space, y, k, *, B, C, **options):
    start = time.perf_counter()
    res = fgm(space, y, loss="squared_hinge", B=B, C=C, n_select=k, tol=0.0,
              **options)
    return res, time.perf_counter() - start


def _os(source, y, k):
    start = time.perf_counter()
    res = fit_os(source, y, k, loss="squared_hinge", epochs=2, rule="magnitude")
    return res, time.perf_counter() - start


# ------------------------------------------------------------------------- synthetic
def unit_synthetic(*, rep: int, seed: int, m: int, ks: list) -> list:
    rng = np.random.default_rng([seed, rep])
    n, n_test, k_true = 1024, 4096, 30
    w = np.zeros(m)
    support = rng.choice(m, k_true, replace=False)
    w[support] = rng.uniform(-1.0, 1.0, k_true)
    X, Xt = rng.standard_normal((n, m)), rng.standard_normal((n_test, m))
    y, yt = _sign(X @ w), _sign(Xt @ w)
    rows = []

    def row(method, selected, weights, seconds, **extra):
        acc = float(np.mean(_sign(Xt[:, selected] @ weights) == yt))
        rows.append(dict(experiment="fgm-synthetic", rep=rep, m=m, method=method,
                         n_selected=int(len(selected)), accuracy=acc,
                         recovered=int(np.isin(selected, support).sum()),
                         seconds=seconds, **extra))

    space, yy, _ = check_fgm(X, y, "squared_hinge", None)
    for k in ks:
        res, sec = _fgm(space, yy, k, B=FGM_B, C=FGM_C)
        row(f"FGM (B = {FGM_B})", res.selected, res.weights, sec, k=k)
        res, sec = _os(X, y, k)
        row("OS", res.selected, res.weights, sec, k=k)
    for nnz, coef, _, sec in _l1_svm_path(X, y, max(ks)):
        sel = np.flatnonzero(coef)
        row("L1-SVM (liblinear)", sel, coef[sel], sec, k=nnz)
    if rep == 0:   # exact (ε_in = 1e-6) vs inexact (1e-3) inner solves
        for eps, cap in ((1e-3, 20), (1e-6, 2000)):
            res = fgm(space, yy, loss="squared_hinge", B=FGM_B, C=FGM_C,
                      max_activations=10, tol=0.0, inner_tol=eps, max_inner=cap)
            for t, (F, iters) in enumerate(zip(res.objective[1:],
                                               np.cumsum(res.apg_iterations))):
                rows.append(dict(experiment="fgm-inexact", rep=rep, m=m,
                                 method=f"ε_in = {eps:g}", activation=t + 1,
                                 apg_iterations=int(iters),
                                 relative_objective=F / res.objective[0]))
    return rows


# ----------------------------------------------------------------------- polynomial
def _dataset(name: str):
    from sklearn.datasets import load_breast_cancer, load_digits

    if name == "breast cancer":
        data = load_breast_cancer()
        return data.data, np.where(data.target == 1, 1.0, -1.0)
    a, b = (int(v) for v in name.split()[1].split("v"))
    data = load_digits()
    keep = np.isin(data.target, (a, b))
    return data.data[keep], np.where(data.target[keep] == b, 1.0, -1.0)


def unit_poly(*, dataset: str, rep: int, seed: int, ks: list) -> list:
    from sklearn.model_selection import train_test_split

    X, y = _dataset(dataset)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, stratify=y,
                                          random_state=seed * 1000 + rep)
    low, high = Xtr.min(axis=0), Xtr.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    Xtr, Xte = (Xtr - low) / span, (Xte - low) / span
    train, test = InteractionStream(Xtr, 2), InteractionStream(Xte, 2)
    rows = []

    def row(method, selected, weights, seconds, k, bias=0.0):
        pred = _sign(test.columns(selected).T @ weights + bias)
        rows.append(dict(experiment="fgm-poly", dataset=dataset, rep=rep,
                         method=method, k=k, n_selected=int(len(selected)),
                         accuracy=float(np.mean(pred == yte)), seconds=seconds,
                         n_features=train.n_features, n_train=len(ytr)))

    space, yy, _ = check_fgm(Xtr, ytr, "squared_hinge", None, degree=2)
    for k in ks:
        res, sec = _fgm(space, yy, k, B=2, C=FGM_C, fit_intercept=True)
        row("FGM (implicit degree 2)", res.selected, res.weights, sec, k,
            res.intercept)
        res, sec = _os(train, ytr, k)
        row("OS (InteractionStream)", res.selected, res.weights, sec, k)
    start = time.perf_counter()
    expanded = train.columns(train.feature_indices()).T
    expand = time.perf_counter() - start
    for nnz, coef, bias, sec in _l1_svm_path(expanded, ytr, max(ks), True):
        sel = np.flatnonzero(coef)
        row("L1-SVM (explicit expansion)", sel, coef[sel], sec + expand, nnz, bias)
    return rows


# ---------------------------------------------------------------------------- fronts
def _save(fig, plt, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)   # whole or not at all
    plt.close(fig)
    return path


def _finish(name, rows, out, summary_keys, draw) -> ExperimentResult:
    out = Path(out)
    main = [r for r in rows if r["experiment"] == name]
    summary = summarize(main, summary_keys, METRICS)
    files = [write_csv(out / f"{name}.csv", rows), draw(out / f"{name}.png", rows)]
    return ExperimentResult(name, rows, summary,
                            format_table(summary, summary_keys, METRICS), files)


def _curves(ax, rows, key, metric):
    """One line per method: the metric against the number of selected features
    (mean over repetitions at each budget k; L1-SVM points are its C path)."""
    for i, method in enumerate(dict.fromkeys(r["method"] for r in rows)):
        mine = [r for r in rows if r["method"] == method]
        if method.startswith("L1"):
            pts = sorted((r["n_selected"], r[metric]) for r in mine)
            ax.plot(*zip(*pts), ".", color=f"C{i}", alpha=0.5, label=method)
            continue
        ks = sorted({r[key] for r in mine})
        xs = [np.mean([r["n_selected"] for r in mine if r[key] == k]) for k in ks]
        ys = [np.mean([r[metric] for r in mine if r[key] == k]) for k in ks]
        ax.plot(xs, ys, "-o", color=f"C{i}", markersize=4, label=method)
    ax.grid(alpha=0.3)


def _draw_synthetic(path, rows):
    plt = plot.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    main = [r for r in rows if r["experiment"] == "fgm-synthetic"]
    for ax, metric, label in ((axes[0], "accuracy", "test accuracy"),
                              (axes[1], "recovered", "true features recovered (of 30)")):
        _curves(ax, main, "k", metric)
        ax.set_xlabel("selected features")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    ax = axes[2]
    for i, method in enumerate(dict.fromkeys(r["method"] for r in rows
                                             if r["experiment"] == "fgm-inexact")):
        pts = [r for r in rows if r["method"] == method]
        ax.plot([r["apg_iterations"] for r in pts],
                [r["relative_objective"] for r in pts], "-o", color=f"C{i}",
                markersize=4, label=method)
    ax.set_xscale("log")
    ax.set_xlabel("cumulative APG iterations (one point per activation)")
    ax.set_ylabel("F_t / F_0")
    ax.set_title("exact vs inexact subproblems (rep 0)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    m = main[0]["m"]
    fig.suptitle(f"FGM synthetic study (n = 1024, m = {m}, 30 true features, "
                 f"B = {FGM_B}, C = {FGM_C:g}; mean over repetitions)", fontsize=11)
    fig.tight_layout()
    return _save(fig, plt, path)


def _draw_poly(path, rows):
    plt = plot.pyplot()
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(4.3 * len(names), 4),
                             squeeze=False)
    for ax, name in zip(axes[0], names):
        mine = [r for r in rows if r["dataset"] == name]
        _curves(ax, mine, "k", "accuracy")
        ax.set_xscale("log")
        ax.set_xlabel("selected degree-2 features")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"{name} (p = {mine[0]['n_features']}, n_train = "
                     f"{mine[0]['n_train']})", fontsize=10)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"degree-2 selection: FGM (B = 2, C = {FGM_C:g}) vs OS vs L1-SVM, "
                 "mean over repetitions", fontsize=11)
    fig.tight_layout()
    return _save(fig, plt, path)


def fgm_synthetic(out, *, reps=None, seed=0, jobs=1, quick=False,
                  progress=True) -> ExperimentResult:
    conf = SETTINGS[bool(quick)]
    units = [Unit(unit_synthetic, dict(rep=r, seed=seed, m=conf["m"], ks=conf["ks"]))
             for r in range(reps or conf["reps"])]
    rows = run_units(units, jobs, desc="fgm-synthetic", progress=progress)
    return _finish("fgm-synthetic", rows, out, ("method", "k"), _draw_synthetic)


def fgm_poly(out, *, reps=None, seed=0, jobs=1, quick=False,
             progress=True) -> ExperimentResult:
    conf = SETTINGS[bool(quick)]
    names = [f"digits {a}v{b}" for a, b in PAIRS] + ["breast cancer"]
    units = [Unit(unit_poly, dict(dataset=d, rep=r, seed=seed, ks=conf["poly_ks"]))
             for d in names for r in range(reps or conf["poly_reps"])]
    rows = run_units(units, jobs, desc="fgm-poly", progress=progress)
    return _finish("fgm-poly", rows, out, ("dataset", "method", "k"), _draw_poly)
