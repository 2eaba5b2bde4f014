"""``asyos plot`` and ``asyos inspect``: look at a results JSON (schema 1 or 2).

``plot`` draws the panels that have data to a PNG (matplotlib, Agg backend, imported
only here): the objective against steps and against time (virtual time for a
virtual-clock simulation), and for Asy-OS the steps each worker took and the histogram
of the staleness of every step (counts on a log axis, log-spaced bins for a long tail,
the bound τ as a line); for a ``-s auto`` run, also the path over model sizes (the
criterion with the chosen s marked, and the objective, against s) to
``<name>-path.png`` beside it.  ``inspect`` prints the run, its carrier named, as a
two-column table and the selected features by |weight|.
"""

import argparse
import logging
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..experiments.plot import pyplot
from ..io.results import load_result
from ..io.writable import save_figure
from ..solvers.result import FitResult
from .report import kept_at_the_end, label_mapping, size_path_line, step_size_text

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


# The carrier each results file records (FitResult.asy["transport"]), as we name it
CARRIERS = {"mpi": "mpi", "zeromq": "zeromq", "simulator": "simulated",
            "loopback": "loopback", "shared": "shared memory"}
INTEGER_BINS = 64   # staleness up to this many values: one bar per value


def carrier(result: FitResult) -> str:
    """What carried the run: sequential, shared memory, mpi, zeromq, simulated or
    loopback; a file
    that does not record it (an early schema-2 one) gets its carrier inferred from
    the keys only that carrier writes, marked so."""
    asy = result.asy
    if not asy:
        return "sequential"
    transport = asy.get("transport")
    if transport:
        return CARRIERS.get(transport, str(transport))
    if result.config.get("simulate") or result.virtual_seconds is not None:
        guess = "simulated"
    elif "lost_shards" in asy:
        guess = "zeromq"
    else:
        guess = "mpi"
    return f"{guess} (inferred)"


def staleness_bins(histogram) -> tuple[np.ndarray, np.ndarray, bool]:
    """The bins of a staleness histogram (counts of staleness 0, 1, 2, ...):
    ``(edges, counts, log_x)``.  Bin i holds the staleness values
    ``edges[i] <= k < edges[i + 1]``; the bins run from 0 to the largest staleness
    seen.  Up to INTEGER_BINS values, one bin per value; a longer tail gets bins whose
    widths grow geometrically (about 12 a decade, one per value at the start), meant
    for a logarithmic x axis, so that neither the mass at small staleness nor the tail
    disappears."""
    counts = np.asarray(histogram, dtype=np.int64)
    nonzero = np.flatnonzero(counts)
    top = int(nonzero[-1]) + 1 if nonzero.size else 1   # one past the largest staleness
    counts = np.pad(counts[:top], (0, max(top - counts.size, 0)))
    if top <= INTEGER_BINS:
        return np.arange(top + 1), counts, False
    per_decade = 12
    inner = np.geomspace(1, top, int(np.ceil(per_decade * np.log10(top))) + 1)
    edges = np.unique(np.concatenate([[0, 1], np.round(inner).astype(np.int64), [top]]))
    return edges, np.add.reduceat(counts, edges[:-1]), True


def draw_staleness(ax, staleness: dict, *, bounded: bool = True):
    """The staleness histogram of a run on ``ax``: counts on a log axis, bins from
    :func:`staleness_bins`, and the bound τ as a vertical line when the run had one
    (``bounded``: a real carrier, whose ``bound`` None means no bound)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    edges, counts, log_x = staleness_bins(staleness.get("histogram") or [])
    bound = staleness.get("bound")
    if log_x:   # bin [a, b) spans a..b on a log(1 + x)-like axis
        ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="C2",
               edgecolor="white", linewidth=0.3)
        ax.set_xscale("symlog", linthresh=1, linscale=0.4)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
        left, right = 0, edges[-1] * 1.15
        line = None if bound is None else bound + 1   # the edge after staleness τ
    else:       # one bar per staleness value, centred on it
        ax.bar(edges[:-1], counts, width=0.8, color="C2")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        left, right = -0.6, edges[-1] - 0.4
        line = None if bound is None else bound + 0.5   # between τ and τ + 1
    title = f"staleness: max {staleness['max']}, mean {staleness['mean']:.2f}"
    if line is not None and line <= 2 * max(right, 1):   # τ near the data: draw it
        ax.axvline(line, color="C3", linestyle="--", linewidth=1.2,
                   label=f"bound τ = {bound}")
        ax.legend(fontsize=8, loc="best")
        right = max(right, line + (0.5 if not log_x else 0.1 * line))
    elif bound is not None:
        title += f", bound τ = {bound}"
    elif bounded:
        title += ", no bound"
    ax.set_xlim(left, right)
    ax.set_yscale("log")
    ax.set_ylim(0.6, max(int(counts.max()), 1) * 2.5)
    ax.set(xlabel="staleness (other workers' steps between view and push)"
           + (", log scale" if log_x else ""),
           ylabel="steps" + (" per bin" if log_x else "") + " (log scale)", title=title)
    ax.grid(alpha=0.3, axis="y")
    return ax


def _panels(result: FitResult) -> list:
    """The panels that have data, each a function drawing one on an Axes: the
    objective against steps and against time (from the trace), then for Asy-OS
    the per-worker progress and the staleness histogram."""
    trace, asy = result.trace or {}, result.asy
    # a delay-mode simulation records virtual time 0 throughout: wall time then
    clock = "virtual_seconds" if result.virtual_seconds else "seconds"
    panels = []
    for x, label in (("steps", "feature steps"), (clock, clock.replace("_", " "))):
        if trace.get(x) and trace.get("objective"):
            def objective(ax, x=x, label=label):
                ax.plot(trace[x], trace["objective"], color="C0")
                ax.set_yscale("log" if min(trace["objective"]) > 0 else "linear")
                ax.set(xlabel=label, ylabel="objective", title=f"objective vs {label}")
                ax.grid(alpha=0.3)
            panels.append(objective)
    if asy and asy.get("workers"):
        def workers(ax):
            shown = asy["workers"]
            ax.bar(range(len(shown)), [w["steps"] for w in shown], color="C1")
            if len(shown) <= 16:
                for t, w in enumerate(shown):
                    ax.annotate(f"kept {w['kept']}", (t, w["steps"]), ha="center",
                                va="bottom", fontsize=8)
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.set(xlabel="worker", ylabel="steps", title=f"per-worker progress "
                   f"({asy['n_workers']} workers, {carrier(result)})")
        panels.append(workers)
    if asy and any(asy.get("staleness", {}).get("histogram") or []):
        panels.append(lambda ax: draw_staleness(
            ax, asy["staleness"], bounded=asy.get("transport") != "simulator"
            and "bound" in asy["staleness"]))
    return panels


def plot_figure(plt, result: FitResult):
    """The figure of ``asyos plot``: only the panels that have data, one row of up
    to three, two rows of two for four; the figure's size follows."""
    panels = _panels(result)
    if not panels:
        raise InputError("the results hold no trace and no Asy-OS record: nothing "
                         "to plot")
    rows, cols = (2, 2) if len(panels) == 4 else (1, len(panels))
    fig, axes = plt.subplots(rows, cols, figsize=(0.7 + 5.4 * cols, 0.9 + 3.5 * rows),
                             squeeze=False)
    for draw, ax in zip(panels, axes.flat):
        draw(ax)
    fig.suptitle(_title(result))
    fig.tight_layout()
    return fig


def run_plot(args) -> Path:
    result = load_result(args.results)
    out = Path(args.out) if args.out else Path(args.results).with_suffix(".png")
    plt = pyplot()
    fig = plot_figure(plt, result)
    save_figure(fig, out, dpi=args.dpi)   # a full disk: one line, no half PNG
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
    save_figure(fig, out, dpi=dpi)
    plt.close(fig)
    return out


def _table(rows: list[tuple[str, str]]) -> str:
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in rows)


def _numbers(values, digits: int = 6) -> str:
    return ", ".join(f"{v:.{digits}g}" for v in values)


def _bound(asy: dict) -> str:
    """", bound τ = 16" or ", no bound" for a real carrier; "" for the simulator,
    whose delay is its own setting."""
    if asy.get("transport") == "simulator" or "bound" not in asy["staleness"]:
        return ""
    bound = asy["staleness"].get("bound")
    return ", no bound" if bound is None else f", bound τ = {bound}"


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
    rows.append(("step size", step_size_text(result).removeprefix("step size ")))
    asy = result.asy
    if not asy:
        rows.append(("carrier", "sequential (one process)"))
    if asy:
        stale = asy["staleness"]
        budgets = f"budgets {asy['budgets']}" if asy.get("budget") != "adaptive" else \
            f"budgets adaptive (first {asy['budgets']}, {kept_at_the_end(asy)})"
        rows += [("Asy-OS", f"{asy['n_workers']} workers ({carrier(result)}), "
                            f"{budgets}"),
                 ("steps per worker", ", ".join(str(w["steps"]) for w in asy["workers"])),
                 ("staleness", f"max {stale['max']}, mean {stale['mean']:.3g}"
                               + _bound(asy)),
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
