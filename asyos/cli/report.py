"""The human-readable summary of a run, printed by ``asyos run`` and ``asyos server``."""

import sys

from ..solvers.result import FitResult


def kept_at_the_end(asy: dict) -> str:
    """What each Asy-OS worker kept, and how many of those the closing cut dropped
    to leave s (docs/architecture.md, "The closing cut")."""
    text = f"kept at the end {[w.get('kept') for w in asy['workers']]}"
    return text + (f", {asy['cut']} cut to s" if asy.get("cut") else "")


def _pipeline_text(asy: dict) -> str:
    """", pipeline 2 × 128 for a step of 7.5 us": how deep the workers' pipeline
    was, and the step it was sized for where it was timed."""
    if not asy.get("batch"):
        return ""
    step = asy.get("step_seconds")
    return f", pipeline {asy['depth'] // asy['batch']} × {asy['batch']}" + \
        (f" for a step of {1e6 * step:.1f} us" if step else "")


def label_mapping(config: dict) -> str | None:
    """"0 → -1, 1 → +1" for a run whose classification labels were mapped (None when
    there were no classes, or they were -1 and +1 already)."""
    classes = config.get("classes")
    if not classes or list(classes) == [-1, 1]:
        return None
    return f"{classes[0]} → -1, {classes[1]} → +1"


def size_path_line(context: dict) -> str | None:
    """"s = 6 chosen by sic over 1..15 (15 sizes)" for a -s auto run (None
    otherwise), with a hint when the chosen size is the largest on the path; for the
    doubling search, the sizes it fitted and how it refined them."""
    path = context.get("size_path")
    if not path:
        return None
    sizes = path["sizes"]
    if path.get("search") == "refine":
        return (f"s = {path['chosen']} chosen by {path['criterion']}: OS at s = "
                f"{sizes[0]}..{sizes[-1]} doubling, refined by backward elimination "
                f"({len(sizes)} fits)")
    line = (f"s = {path['chosen']} chosen by {path['criterion']} over "
            f"{sizes[0]}..{sizes[-1]} ({len(sizes)} sizes)")
    if path["chosen"] == sizes[-1] and len(sizes) > 1:
        line += "; the largest on the path: a larger --max-features may fit better"
    return line


def step_size_text(result: FitResult) -> str:
    """The step size in force, or why there is none: the fitted rule solves for its
    weights (unless Asy-OS's server shrank a step)."""
    if result.eta > 0:
        return f"step size eta = {result.eta:.4g}, m = {result.m:.4g}"
    return "no step size (the fitted rule solves for its weights)"


def report(result: FitResult | None, out=None) -> None:
    """Human-readable summary on stdout (nothing on MPI worker ranks)."""
    if result is None:
        return
    out = sys.stdout if out is None else out
    config, data = result.config, result.data
    asy = result.asy or {}
    algorithm = "OS" if not asy else \
        f"Asy-OS ({asy.get('transport', '?')}, {asy.get('n_workers', '?')} workers)"
    print(f"{algorithm} on {data['source']}: n = {data['n_samples']}, "
          f"p = {data['n_features']}, s = {config['s']}, "
          f"loss = {config['loss']}, epochs = {config['epochs']}", file=out)
    mapping = label_mapping(config)
    if mapping:
        print(f"labels: {mapping}", file=out)
    size_path = size_path_line(result.context)
    if size_path:
        print(f"model size: {size_path}", file=out)
    vote = result.context.get("vote")
    if vote:
        most = vote.get("most_orders", vote["orders"])
        stopped = f" of at most {most} (the second kept {vote['agreement']:.0%} of " \
            "the first's features)" if most > vote["orders"] else ""
        print(f"vote: {vote['orders']}{stopped} feature orders of "
              f"{vote['passes_per_order']} passes; the selected features were kept by "
              f"{min(vote['votes'])} to "
              f"{max(vote['votes'])} of them, then refit (objective per epoch: the "
              "refit's)", file=out)
    refit = (result.asy or {}).get("refit")
    final = f"refit jointly on the selected features {result.objective:.6g}" if refit \
        else f"final {result.objective:.6g}"
    print("objective per epoch: "
          + ", ".join(f"{v:.6g}" for v in result.objective_per_epoch)
          + f" ({final})", file=out)
    if result.asy is not None:
        asy = result.asy
        stale = asy["staleness"]
        simulated = asy.get("transport") == "simulator"
        limit = f"delay {config.get('delay') or asy['n_workers']}" + \
            (", random" if config.get("random_delay") else "") if simulated \
            else f"bound {stale.get('bound')}{_pipeline_text(asy)}"
        budgets = asy["budgets"] if asy.get("budget") != "adaptive" else \
            f"adaptive ({kept_at_the_end(asy)})"
        if "group_budgets" in asy:
            budgets = f"{budgets}, group budgets {asy['group_budgets']} " \
                f"({asy['groups_kept']} groups kept)"
        print(f"Asy-OS{' (simulated)' if simulated else ''}: {asy['n_workers']} workers, "
              f"budgets {budgets}; staleness max {stale['max']} mean "
              f"{stale['mean']:.2f} ({limit}); |u_C - sum X_S w_S| = "
              f"{asy['u_check_max_abs_diff']:.2e}", file=out)
    per_step = 1e6 * result.seconds / max(result.n_steps, 1)
    print(f"{step_size_text(result)}; {per_step:.1f} us per "
          "feature step", file=out)
    truth = result.context.get("truth")
    if truth:
        extra = {k: v for k, v in truth.items() if k not in ("support", "recall")}
        print(f"recall of the true support: {truth['recall']:.3f}  "
              + "  ".join(f"{k} = {v:.4g}" for k, v in extra.items()), file=out)
    names = result.context.get("feature_names") or [str(j) for j in result.selected]
    print(f"selected {result.selected.size} features: " + " ".join(names), file=out)
    if result.context.get("written_to"):
        print(f"results in {result.context['written_to']} (its arrays in a .npz "
              "beside it; asyos inspect reads both)", file=out)

