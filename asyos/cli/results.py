"""``asyos plot`` and ``asyos inspect``: look at a results JSON (schema 1 or 2).

``plot`` draws four panels to a PNG (matplotlib, Agg backend, imported only here):
the objective against steps and against time (virtual time for a virtual-clock
simulation), the steps each Asy-OS worker took, and the histogram of the staleness of
every push; for a ``-s auto`` run, also the path over model sizes (the criterion with
the chosen s marked, and the objective, against s) to ``<name>-path.png`` beside it.  ``inspect`` prints the run as a two-column table and the selected
features by |weight|.
"""

import argparse
import logging
from pathlib import Path

import numpy as np

from ..experiments.plot import pyplot
from ..io.results import load_result
from ..solvers.result import FitResult
from .report import label_mapping, size_path_line

log = logging.getLogger("asyos.results")


def add_plot_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", help="results JSON written by --out")
    parser.add_argument("--out", help="the PNG to write (default: the results path "
                        "with suffix .png)")
    parser.add_argument("--dpi", type=int, default=120, help="resolution (default 120)")


def add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", help="results JSON written by --out")
    parser.add_argument("--top", type=int, default=20, help="list this many selected "
                        "features, largest |weight| first (default 20; 0: all)")


def _title(result: FitResult) -> str:
    data, config = result.data, result.config
    s = config.get("s", "?")
    if s == "auto" and result.context.get("size_path"):
        s = f"auto → {result.context['size_path']['chosen']}"
    return (f"{data.get('source', '?')}: n = {data.get('n_samples', '?')}, "
            f"p = {data.get('n_features', '?')}, s = {s}, "
            f"loss = {config.get('loss', '?')}")


def run_plot(args) -> Path:
    result = load_result(args.results)
    out = Path(args.out) if args.out else Path(args.results).with_suffix(".png")
    plt = pyplot()
    trace, asy = result.trace, result.asy
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    (steps_ax, time_ax), (workers_ax, stale_ax) = axes
    # a delay-mode simulation records virtual time 0 throughout: wall time then
    clock = "virtual_seconds" if result.virtual_seconds else "seconds"
    for ax, x, label in ((steps_ax, "steps", "feature steps"),
                         (time_ax, clock, clock.replace("_", " "))):
        if trace.get(x):
            ax.plot(trace[x], trace["objective"], color="C0")
            ax.set_yscale("log" if min(trace["objective"]) > 0 else "linear")
        ax.set(xlabel=label, ylabel="objective", title=f"objective vs {label}")
        ax.grid(alpha=0.3)
    if asy:
        workers = asy["workers"]
        ax = workers_ax
        ax.bar(range(len(workers)), [w["steps"] for w in workers], color="C1")
        for t, w in enumerate(workers):
            ax.annotate(f"kept {w['kept']}", (t, w["steps"]), ha="center",
                        va="bottom", fontsize=8)
        ax.set(xlabel="worker", ylabel="steps", xticks=range(len(workers)),
               title=f"per-worker progress ({asy['n_workers']} workers)")
        histogram = asy["staleness"].get("histogram") or [0]
        stale_ax.bar(range(len(histogram)), histogram, color="C2")
        stale_ax.xaxis.get_major_locator().set_params(integer=True)
        stale_ax.set(xlabel="staleness (updates between pull and push)",
                     ylabel="pushes", title=f"staleness: max {asy['staleness']['max']}, "
                     f"mean {asy['staleness']['mean']:.2f}")
    else:
        for ax in (workers_ax, stale_ax):
            ax.text(0.5, 0.5, "sequential OS: one worker, no staleness",
                    ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
    fig.suptitle(_title(result))
    fig.tight_layout()
    fig.savefig(out, dpi=args.dpi)
    plt.close(fig)
    print(f"wrote {out}")
    if result.context.get("size_path"):
        print(f"wrote {plot_size_path(plt, result, path_png(out), args.dpi)}")
    return out


def path_png(out: Path) -> Path:
    """Where the path figure of a -s auto run goes: ``r.png`` → ``r-path.png``."""
    return out.with_name(f"{out.stem}-path{out.suffix or '.png'}")


def plot_size_path(plt, result: FitResult, out: Path, dpi: int) -> Path:
    """A -s auto run's path: the criterion against s with the chosen s marked, above
    the objective against s."""
    path = result.context["size_path"]
    sizes, chosen = path["sizes"], path["chosen"]
    fig, (crit_ax, obj_ax) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True)
    crit_ax.plot(sizes, path["values"], marker="o", color="C0")
    if chosen in sizes:
        crit_ax.plot([chosen], [path["values"][sizes.index(chosen)]], marker="*",
                     markersize=16, color="C3", linestyle="none",
                     label=f"chosen s = {chosen}")
        crit_ax.legend()
    crit_ax.set(ylabel=path["criterion"], title=f"{path['criterion']} along the path "
                "(lower is better)")
    objective = path["objective"]
    obj_ax.plot(sizes, objective, marker="o", color="C1")
    if min(objective) > 0:
        obj_ax.set_yscale("log")
    obj_ax.set(xlabel="model size s", ylabel="objective", title="objective vs s")
    for ax in (crit_ax, obj_ax):
        ax.axvline(chosen, color="C3", alpha=0.4, linestyle="--")
        ax.grid(alpha=0.3)
    fig.suptitle(_title(result))
    fig.tight_layout()
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


def _table(rows: list[tuple[str, str]]) -> str:
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in rows)


def _numbers(values, digits: int = 6) -> str:
    return ", ".join(f"{v:.{digits}g}" for v in values)


def summary(result: FitResult, top: int = 20) -> str:
    """The run as a readable table, then its selected features by |weight|."""
    context, config = result.context, result.config
    rows = [("results", f"{context.get('path', '?')} (schema "
                        f"{context.get('schema_version', '?')}, asyos "
                        f"{context.get('versions', {}).get('asyos', '?')})"),
            ("data", _title(result)),
            ("epochs", str(config.get("epochs", "?")))]
    if label_mapping(config):
        rows.append(("labels", label_mapping(config)))
    if size_path_line(context):
        rows.append(("model size", size_path_line(context)))
    if result.objective_per_epoch:
        rows.append(("objective per epoch", _numbers(result.objective_per_epoch)))
    if np.isfinite(result.objective):
        rows.append(("final objective", f"{result.objective:.6g}"))
    if result.n_steps:
        rows.append(("time", f"{result.seconds:.3g} s, {result.n_steps} steps, "
                             f"{1e6 * result.seconds / result.n_steps:.3g} us per step"))
    rows.append(("step size", f"eta = {result.eta:.4g}, m = {result.m:.4g}"))
    asy = result.asy
    if asy:
        stale = asy["staleness"]
        rows += [("Asy-OS", f"{asy['n_workers']} workers ({asy.get('transport', '?')}),"
                            f" budgets {asy['budgets']}"),
                 ("steps per worker", ", ".join(str(w["steps"]) for w in asy["workers"])),
                 ("staleness", f"max {stale['max']}, mean {stale['mean']:.3g}"),
                 ("u check", f"{asy['u_check_max_abs_diff']:.2e}")]
    truth = context.get("truth")
    if truth:
        rows.append(("vs the true support", ", ".join(
            f"{k} = {v:.4g}" for k, v in truth.items() if k != "support")))
    rows.append(("selected", f"{result.selected.size} features"))
    order = np.argsort(-np.abs(result.weights), kind="stable")
    shown = order if top <= 0 else order[:top]
    names = context.get("feature_names") or [str(j) for j in result.selected]
    lines = [_table(rows), "", f"{'rank':>4}  {'feature':>10}  {'weight':>14}"]
    lines += [f"{rank + 1:>4}  {names[k]:>10}  {result.weights[k]:>14.6g}"
              for rank, k in enumerate(shown)]
    if len(shown) < len(order):
        lines.append(f"  ... {len(order) - len(shown)} more (--top 0 lists all)")
    return "\n".join(lines)


def run_inspect(args) -> None:
    print(summary(load_result(args.results), args.top))
