"""Figures of the experiments (matplotlib, Agg backend): mean ± standard error.

matplotlib is an optional dependency (the ``plot`` and ``experiments`` extras), imported
only when a figure is drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import InputError
from ..io.writable import save_figure
from .runner import ERROR_COLUMN

__all__ = ["plot_curves", "plot_histograms", "plot_speedup", "METRIC_LABELS"]

METRIC_LABELS = {"recall": "feature selection recall",
                 "recovery_error": "normalised recovery error",
                 "test_error": "classification test error"}
TASK_ORDER = ("regression", "classification")
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">")


def pyplot():
    """matplotlib.pyplot on the Agg backend, or an InputError saying what to install."""
    try:
        import matplotlib
    except ImportError as exc:
        raise InputError("drawing needs matplotlib: in a checkout, .venv/bin/pip "
                         "install -e '.[plot]' ('.[experiments]' for the paper's "
                         "experiments)") from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _unique(values) -> list:
    out = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _styles(keys: Sequence) -> dict:
    """Colour and marker per curve; for (a, b) pairs colour by a, line style by b."""
    colours = [f"C{i}" for i in range(10)]
    if keys and all(isinstance(k, tuple) and len(k) == 2 for k in keys):
        firsts, seconds = _unique(k[0] for k in keys), _unique(k[1] for k in keys)
        return {k: {"color": colours[firsts.index(k[0]) % 10],
                    "marker": MARKERS[firsts.index(k[0]) % len(MARKERS)],
                    "linestyle": LINESTYLES[seconds.index(k[1]) % len(LINESTYLES)]}
                for k in keys}
    return {k: {"color": colours[i % 10], "marker": MARKERS[i % len(MARKERS)],
                "linestyle": "-"} for i, k in enumerate(keys)}


def plot_curves(path: Path, summary: Sequence[dict], *, x: str,
                curve: Callable[[dict], object], label: Callable[[object], str],
                xlabel: str, title: str, log_x: bool = False) -> Path:
    """One row of panels per task, one panel per metric (recall, then the task's
    error), one curve per ``curve(entry)`` value: mean with ± SE error bars."""
    plt = pyplot()
    tasks = [t for t in TASK_ORDER if any(e["task"] == t for e in summary)]
    fig, axes = plt.subplots(len(tasks), 2, figsize=(13, 3.8 * len(tasks)),
                             squeeze=False)
    styles = _styles(_unique(curve(e) for e in summary))  # same style in every row
    for row, task in enumerate(tasks):
        entries = [e for e in summary if e["task"] == task]
        keys = _unique(curve(e) for e in entries)
        for col, metric in enumerate(("recall", ERROR_COLUMN[task])):
            ax = axes[row][col]
            for key in keys:
                points = sorted((e for e in entries if curve(e) == key and metric in e),
                                key=lambda e: e[x])
                if not points:
                    continue
                ax.errorbar([e[x] for e in points], [e[metric] for e in points],
                            yerr=[e[metric + "_se"] for e in points], capsize=3,
                            markersize=4, label=label(key), **styles[key])
            if log_x:
                ax.set_xscale("log")
            xs = sorted({e[x] for e in entries})
            if len(xs) <= 10:
                ax.set_xticks(xs)
                ax.set_xticklabels([str(v) for v in xs])
            ax.set_xlabel(xlabel)
            ax.set_ylabel(METRIC_LABELS[metric])
            ax.set_title(f"{task}: {METRIC_LABELS[metric]}", fontsize=10)
            ax.grid(alpha=0.3)
        axes[row][1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_histograms(path: Path, panels: dict, *, title: str) -> Path:
    """Staleness histograms: ``panels`` maps (row label, panel title) to the counts
    of staleness 0, 1, 2, …; one row of panels per row label."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    rows = _unique(k[0] for k in panels)
    cols = max(sum(1 for k in panels if k[0] == r) for r in rows)
    fig, axes = plt.subplots(len(rows), cols, figsize=(2.6 * cols + 1, 2.6 * len(rows)),
                             squeeze=False)
    for i, row in enumerate(rows):
        mine = [k for k in panels if k[0] == row]
        for j in range(cols):
            ax = axes[i][j]
            if j >= len(mine):
                ax.axis("off")
                continue
            counts = list(panels[mine[j]]) or [0]
            ax.bar(range(len(counts)), counts, width=0.9, color=f"C{j % 10}")
            ax.set_xlim(-0.6, max(len(counts), 2) - 0.4)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_title(f"{row}: {mine[j][1]}", fontsize=9)
            ax.set_xlabel("staleness (pushes)")
            if j == 0:
                ax.set_ylabel("pushes")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_speedup(path: Path, tasks: dict, *, title: str) -> Path:
    """Fig. 3: per task, objective vs time per run, speedup vs q (with y = q and the
    dashed virtual-clock prediction), and the staleness histograms.

    ``tasks[task]`` = {"traces": {label: (seconds, objective)}, "threshold": float,
    "measured": (qs, mean, se), "predicted": (qs, speedups) or None,
    "staleness": {label: counts}, "cluster": (q, speedup, label) or absent}.
    """
    plt = pyplot()
    names = [t for t in TASK_ORDER if t in tasks]
    fig, axes = plt.subplots(len(names), 3, figsize=(15, 4 * len(names)), squeeze=False)
    for row, task in enumerate(names):
        info = tasks[task]
        ax = axes[row][0]
        for i, (label, (seconds, objective)) in enumerate(info["traces"].items()):
            ax.plot(seconds, objective, color=f"C{i % 10}", label=label)
        ax.axhline(info["threshold"], color="k", linestyle=":", linewidth=1,
                   label="threshold")
        ax.set_yscale("log")
        ax.set_xlabel("wall-clock seconds")
        ax.set_ylabel("training objective (log)" if task == "regression"
                      else "training squared hinge (log)")
        ax.set_title(f"{task}: training error vs time (rep 0)", fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)

        ax = axes[row][1]
        qs, mean, se = info["measured"]
        top = max([*qs, 1])
        if info.get("predicted"):
            pq, ps = info["predicted"]
            top = max(top, *pq)
            ax.plot(pq, ps, "C1--", marker="s", label="predicted (virtual clock)")
        if info.get("cluster"):
            cq, cs, label = info["cluster"]
            top = max(top, cq)
            ax.plot([cq], [cs], "C3*", markersize=12, label=label)
        ax.plot([1, top], [1, top], color="0.5", linewidth=1, label="y = q")
        ax.errorbar(qs, mean, yerr=se, color="C0", marker="o", capsize=3,
                    label="measured")
        ax.set_xlabel("workers q")
        ax.set_ylabel("speedup T_seq / T_q")
        ax.set_title(f"{task}: speedup at threshold", fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)

        ax = axes[row][2]
        for i, (label, counts) in enumerate(info["staleness"].items()):
            counts = list(counts) or [0]
            total = max(sum(counts), 1)
            ax.plot(range(len(counts)), [c / total for c in counts],
                    drawstyle="steps-mid", marker="." if len(counts) < 30 else None,
                    color=f"C{i % 10}",
                    label=label)
        ax.set_xlabel("staleness (pushes between pull and push)")
        ax.set_ylabel("fraction of pushes")
        ax.set_title(f"{task}: staleness (rep 0)", fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _save(fig, plt, path)


def _save(fig, plt, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)   # whole or not at all
    plt.close(fig)
    return path
