"""Fig. 3 of Yang, Fujimaki, Kusumura & Liu (KDD 2016, Section 5.3): training error
vs time and speedup of real runs, beside the speedup and the time predicted by the
virtual-clock cost model (docs/algorithms.md, "The cost model").

Protocol: n = 1000, p = 8192, s = 64 (regression) or 32 (classification), 2 scans (all
four can be changed).  The problem of each repetition is drawn once
(``asyos.datasets``), saved feature-major as .npy, and every run of that repetition
reads the same file: ``python -m asyos.run`` (sequential OS, the single-worker
baseline) and Asy-OS for q = 1..Q, one after the other: ``python -m asyos.run
--workers q`` (``carrier`` "shared": q processes on this machine, no server process)
or ``mpiexec -n q+1 python -m asyos.run`` ("mpi": rank 0 the server, q workers), all
with their defaults (the fitted rule, adaptive budgets, the bound on).  Worker t
owns shard t (``solvers.asy.worker_shard``).

Speedup at a threshold: threshold = 1.05 × the final training objective of sequential
OS, a level that means "as good as sequential OS"; T = the first time a run's trace
(plus its final point) reaches it, interpolated linearly between trace points;
speedup_q = T_sequential / T_q, and 0 for a run that never reaches it (said in the
table, never hidden by a looser threshold).  The cost model is fitted on the measured
runs (``fit_cost_model``) and simulates each measured q on the first repetition's
problem: its time beside the measured one (``wall_error``) and its speedup beside
the measured one (``model_error``), then its prediction for a cluster of machines
(the paper's 6 × 2), the latency and bandwidth between them as parameters.  The
training error is the objective of the loss (1/(2n))‖Xw − y‖² for regression, the
mean squared hinge for classification.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from ..errors import InputError
from ..io.results import load_result
from ..metrics import evaluate
from ..solvers.asy import AsyConfig
from ..solvers.simulator import Clock, fit_simulated
from . import plot, runner
from .sweeps import LOSS, TASKS, ExperimentResult, make_problem

__all__ = ["speedup", "speedups", "time_to_threshold", "threshold_of",
           "fit_cost_model", "predict_speedup", "PARTITION", "RunFailed",
           "mpiexec_path"]

PARTITION = "static shards: feature j -> worker j mod q; adaptive budgets"
THRESHOLD_FACTOR = 1.05
MODEL_WORKERS = (1, 2, 4, 8, 16, 32)
SPARSITY = {"regression": 64, "classification": 32}
CARRIERS = {"shared": "Asy-OS (shared memory)", "mpi": "Asy-OS (MPI)"}
METRICS = ("speedup", "predicted_speedup", "model_error", "seconds",
           "predicted_seconds", "wall_error", "t_threshold", "recall",
           "recovery_error", "test_error", "final_objective", "staleness_mean")
CLUSTER = (6, 2)        # the paper's cluster: 6 machines of 2 workers
LATENCY = 50e-6         # seconds one way between machines (a 10 Gb/s Ethernet's MPI)
BANDWIDTH = 1.25e9      # bytes per second of the server's link (10 Gb/s)


def mpiexec_path() -> Path:
    """The mpiexec installed next to this Python (the ``mpich`` wheel's)."""
    return Path(sys.executable).parent / "mpiexec"


# ------------------------------------------------------------------ threshold and time
def threshold_of(baseline_final: float, factor: float = THRESHOLD_FACTOR) -> float:
    """factor × the baseline's (sequential OS's) final objective."""
    baseline_final = float(baseline_final)
    if not np.isfinite(baseline_final):
        raise InputError(f"need a finite final objective, got {baseline_final}")
    return factor * baseline_final


def time_to_threshold(seconds, objective, threshold: float) -> float:
    """First time the trace (seconds[i], objective[i]) reaches ``threshold``, linearly
    interpolated between the last point above it and the first at or below it; the
    first point's time if it starts below; inf if it never gets there."""
    t = np.asarray(seconds, dtype=float)
    v = np.asarray(objective, dtype=float)
    if t.shape != v.shape or t.ndim != 1:
        raise InputError("seconds and objective must be 1-D and of the same length")
    below = np.flatnonzero(v <= threshold)
    if below.size == 0:
        return float("inf")
    i = int(below[0])
    if i == 0:
        return float(t[0])
    t0, t1, v0, v1 = t[i - 1], t[i], v[i - 1], v[i]
    return float(t0 + (v0 - threshold) / (v0 - v1) * (t1 - t0))


def speedups(traces: dict, baseline, factor: float = THRESHOLD_FACTOR):
    """Threshold, time to it and speedup of every run.

    ``traces`` maps a run to its (seconds, objective) trace, closed by its final
    point; threshold = ``factor`` × the baseline's final objective; time = first
    time at or below it (``time_to_threshold``); speedup = time[baseline] / time[run]
    (0 for a run that never gets there).  Returns (threshold, times, speedups), the
    last two keyed like ``traces``.
    """
    threshold = threshold_of(traces[baseline][1][-1], factor)
    times = {k: time_to_threshold(*trace, threshold) for k, trace in traces.items()}
    return threshold, times, {k: times[baseline] / times[k] for k in times}


def _trace(result: dict, clock: str = "seconds") -> tuple[list, list]:
    """The objective trace of a run's result, closed by its final point."""
    trace = result.trace
    seconds, objective = list(trace[clock]), list(trace["objective"])
    end = result.virtual_seconds if clock == "virtual_seconds" else result.seconds
    if not seconds or end > seconds[-1]:
        seconds.append(end)
        objective.append(result.objective)
    return seconds, objective


# ------------------------------------------------------------------ the cost model
def fit_cost_model(runs: list, n: int, s: int, *, host: bool) -> Clock:
    """The virtual clock's costs (``solvers.simulator.Clock``) from measured runs.

    * step and column: the weighted least-squares line of a step's kernel time
      against n·(|S| + 2) over every Asy-OS worker (|S| = its budget; without any,
      sequential OS's whole time per step at |S| = s), weighted by steps: flat
      when the line falls (a step's fixed work outweighs the products at this
      size), through the origin (the paper's a·n·(|S| + 2)) when it would give a
      step a negative fixed cost or the budgets are all one;
    * swap: from sequential OS's passes (``_passes``: the first passes substitute
      the most and cost the most), which also place the line: its value at
      |S| = s is then a steady step's time;
    * push: a worker's time outside its kernel per push (the worker loop's Python,
      reading blocks, sending, reading views), less its time blocked for a view or
      credit (``wait_seconds``: the clock makes its own waits) and, for worker 0
      when ``host``, its time serving (its run's time less its kernel's and the
      server's);
    * serve: the server's time per push (``asy["server_seconds"]``);
    * host: the server runs on worker 0's core (the shared-memory carrier).
    Per-push costs: a run's steps per push is its own (``steps_per_push``).
    ``runs`` are results (sequential ones have no ``asy``).
    """
    x, cost, weight, alone = [], [], [], []
    push = pushed = serve = served = 0.0
    for result in runs:
        if result.asy is None:
            alone.append((n * (s + 2), result.seconds / max(result.n_steps, 1),
                          result.n_steps))
            continue
        for t, worker in enumerate(result.asy["workers"]):
            if not worker["steps"]:
                continue
            x.append(n * (worker["budget"] + 2))
            cost.append(worker["compute_seconds"] / worker["steps"])
            weight.append(worker["steps"])
            if host and t == 0:
                push += result.asy["wall_seconds"] - worker["compute_seconds"] - \
                    result.asy["server_seconds"]
            else:
                push += worker["communicate_seconds"] + worker["read_seconds"] - \
                    worker.get("wait_seconds", 0.0)
            pushed += worker["pushes"]
        if "server_seconds" in result.asy:
            serve += result.asy["server_seconds"]
            served += sum(w["pushes"] for w in result.asy["workers"])
    if not weight and alone:
        x, cost, weight = (list(v) for v in zip(*alone))
    if not weight or sum(weight) <= 0:
        raise InputError("no measured steps to fit the cost model on")
    step, column = _step_line(*(np.asarray(v, dtype=float) for v in (x, cost, weight)))
    swap = 0.0
    passes = [fit for fit in map(_passes, (r for r in runs if r.asy is None)) if fit]
    if passes:   # a steady step at |S| = s and a swap, from sequential OS's passes
        steady, swap = np.mean(passes, axis=0)
        step = steady - column * n * (s + 2)
        if step < 0:
            step, column = 0.0, steady / (n * (s + 2))
    return Clock(step=float(step), column=float(column), swap=float(swap),
                 push=push / pushed if pushed else 0.0,
                 serve=serve / served if served else 0.0, host=host)


def _passes(result) -> tuple[float, float] | None:
    """(seconds per step, seconds per substitution) of sequential OS: the least
    squares (non-negative) of each pass's time, read from its trace, against its
    steps and its substitutions; None without a trace or with fewer than two
    passes."""
    subs = np.asarray(result.substitutions_per_epoch or [], dtype=float)
    trace = result.trace or {}
    if subs.size < 2 or len(trace.get("steps", ())) < 2:
        return None
    per_pass = result.n_steps / subs.size
    ends = np.interp(per_pass * np.arange(subs.size + 1), trace["steps"],
                     trace["seconds"])
    ends[-1] = max(ends[-1], result.seconds)
    design = np.column_stack([np.full(subs.size, per_pass), subs])
    (steady, swap), _ = nnls(design, np.diff(ends))
    return (steady, swap) if steady > 0 else None


def _step_line(x, cost, weight) -> tuple[float, float]:
    """(step, column) of ``fit_cost_model``'s line through (x, cost)."""
    mean = float(np.sum(weight * cost) / np.sum(weight))
    if np.ptp(x) > 0:
        design = np.column_stack([np.ones_like(x), x]) * np.sqrt(weight)[:, None]
        step, column = np.linalg.lstsq(design, cost * np.sqrt(weight), rcond=None)[0]
        if column <= 0:
            return mean, 0.0
        if step >= 0:
            return float(step), float(column)
    return 0.0, float(np.sum(weight * x * cost) / np.sum(weight * x * x))


def steps_per_push(result) -> float:
    """A measured Asy-OS run's mean steps per push (its pushes adapt, up to the
    pipeline's batch)."""
    workers = result.asy["workers"]
    return sum(w["steps"] for w in workers) / max(sum(w["pushes"] for w in workers), 1)


def timed_step(results) -> float | None:
    """The step the measured Asy-OS runs sized their pipeline for (their median
    ``step_seconds``; None where none was timed)."""
    steps = [r.asy["step_seconds"] for r in results
             if r.asy is not None and r.asy.get("step_seconds")]
    return float(np.median(steps)) if steps else None


def _clock_for(clock: Clock, q: int, s: int, p: int, remote: int = 0,
               batch: float | None = None, step_seconds: float | None = None
               ) -> Clock:
    """``clock`` for q workers as a real run configures them: the credit window of
    the automatic pipeline (sized for p and a step of ``step_seconds``, as timed by
    the measured runs), ``batch`` steps per push (None: the pipeline's largest) and
    ``remote`` workers on other machines."""
    config = AsyConfig.build(s, q, n_features=p).for_step(step_seconds or 0.0)
    return replace(clock, batch=batch or config.batch, remote=remote,
                   window=config.depth if q > 1 else 0)


def predict_speedup(X, y, s: int, clock: Clock, baseline, *, loss: str,
                    epochs: int = 2, workers=MODEL_WORKERS, remote=None,
                    batches=None, step_seconds=None) -> list[dict]:
    """Virtual-clock speedups and times of Asy-OS with q workers paying ``clock``'s
    costs (``fit_cost_model``), with the pipeline a real run of q workers gets (for
    a step of ``step_seconds``: ``timed_step``), ``batches[q]`` steps per push
    (default: the pipeline's batch) and ``remote(q)`` workers on other machines,
    against ``baseline``: the measured trace (seconds, objective) of sequential OS on
    the same data.  Threshold and speedup as for the measured runs."""
    p, batches = X.shape[1], batches or {}
    runs = {q: fit_simulated(X, y, s, q, loss=loss, epochs=epochs,
                             clock=_clock_for(clock, q, s, p,
                                              remote(q) if remote else 0,
                                              batches.get(q), step_seconds))
            for q in workers if q <= s}
    traces = {q: _trace(r, "virtual_seconds") for q, r in runs.items()}
    threshold, times, gains = speedups({0: baseline, **traces}, 0)
    return [{"workers": q, "t_threshold": times[q], "threshold": threshold,
             "speedup": gains[q], "final_objective": r.objective,
             "seconds": r.virtual_seconds,
             "wall_speedup": baseline[0][-1] / r.virtual_seconds,
             "staleness_mean": r.asy["staleness"]["mean"],
             "staleness_max": r.asy["staleness"]["max"]}
            for q, r in runs.items()]


# ------------------------------------------------------------------ real runs
def _problem(task: str, p: int, n: int, s: int, seed):
    return make_problem(task, p, s, seed, n=n)


class RunFailed(RuntimeError):
    """A timed run exited non-zero or ran past its timeout."""


def _launch(command: list, out: Path, timeout: float) -> dict:
    # Not inside another MPI job; one BLAS thread per process unless the user says.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "PMIX_"))}
    for name in runner.BLAS_ENV:
        env.setdefault(name, "1")
    try:
        proc = subprocess.run([*command, "--quiet", "--force", "--out", str(out)],
                              env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise RunFailed(f"{' '.join(command)} ran past {timeout:g} s") from exc
    if proc.returncode != 0:
        raise RunFailed(f"{' '.join(command)} failed ({proc.returncode}):\n"
                           f"{proc.stderr[-2000:]}")
    return load_result(out)


def unit_speedup(*, task, p, n, s, rep, seed, max_workers, epochs, timeout,
                 run_dir, carrier="shared") -> list:
    """One repetition: sequential OS, then Asy-OS for q = 1..max_workers over
    ``carrier``, one problem."""
    problem = _problem(task, p, n, s, runner.problem_seed(seed, rep))
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        X_path, y_path = Path(tmp) / "X.npy", Path(tmp) / "y.npy"
        np.save(X_path, np.asfortranarray(problem.X))   # feature-major: column reads
        np.save(y_path, problem.y)
        job = [sys.executable, "-m", "asyos.run", "--data", str(X_path), "--labels",
               str(y_path), "-s", str(s), "--loss", LOSS[task], "--epochs",
               str(epochs), "--seed", str(seed)]
        runs = {}
        for q in range(0, max_workers + 1):
            out = run_dir / f"{task}-rep{rep}-{'seq' if q == 0 else f'q{q}'}.json"
            if q == 0:
                command = job
            elif carrier == "mpi":
                command = [str(mpiexec_path()), "-n", str(q + 1), *job]
            else:
                command = [*job, "--workers", str(q)]
            runs[q] = (_launch(command, out, timeout), out)
    threshold, times, gains = speedups({q: _trace(r) for q, (r, _) in runs.items()}, 0)
    rows = []
    for q, (result, out) in runs.items():
        row = {"experiment": "speedup", "kind": "measured", "task": task, "p": p,
               "n": n, "s": s, "epochs": epochs, "workers": max(q, 1),
               "method": "OS (sequential)" if q == 0 else CARRIERS[carrier],
               "rep": rep, "seed": seed, "partition": PARTITION,
               **evaluate(problem, result.selected),
               "final_objective": result.objective,
               "seconds": result.seconds, "threshold": threshold,
               "t_threshold": times[q], "speedup": gains[q],
               "result_file": str(out)}
        if q:
            workers = result.asy["workers"]
            steps = sum(w["steps"] for w in workers)
            row.update(staleness_mean=result.asy["staleness"]["mean"],
                       staleness_max=result.asy["staleness"]["max"],
                       compute_us_per_step=1e6 * sum(w["compute_seconds"]
                                                     for w in workers) / steps,
                       comm_us_per_step=1e6 * sum(w["communicate_seconds"]
                                                  for w in workers) / steps)
        else:
            row["compute_us_per_step"] = 1e6 * result.seconds / max(result.n_steps, 1)
        rows.append(row)
    return rows


def speedup(out, *, tasks=TASKS, max_workers=None, reps=None, seed=0, quick=False,
            p=None, n=1000, s=None, epochs=2, timeout=600.0,
            model_workers=MODEL_WORKERS, progress=True, jobs=1,
            carrier="shared", cluster=CLUSTER, latency=LATENCY,
            bandwidth=BANDWIDTH) -> ExperimentResult:
    """Fig. 3: measured and predicted (virtual clock) speedup vs workers.

    Runs are timed, so they run one at a time whatever ``jobs`` says.  ``s`` None:
    64 for regression, 32 for classification; ``p`` None: 8192 (4096 with quick).
    ``carrier``: "shared" (``--workers q``, no server process) or "mpi".
    ``cluster`` (machines, workers per machine) or None: also the model's
    prediction for that cluster, the server's machine sharing memory with its
    workers and the others ``latency`` seconds away over a link of ``bandwidth``
    bytes per second (docs/algorithms.md, "The cost model").
    """
    if carrier not in CARRIERS:
        raise InputError(f"carrier must be one of {', '.join(CARRIERS)}, got "
                         f"{carrier!r}")
    if carrier == "mpi" and not mpiexec_path().exists():
        raise InputError(f"speedup needs mpiexec, not found at {mpiexec_path()}")
    tasks = [tasks] if isinstance(tasks, str) else list(tasks)
    if any(t not in TASKS for t in tasks):
        raise InputError(f"unknown task in {tasks}; expected some of {TASKS}")
    max_workers = min(os.cpu_count() or 1, 4) if max_workers is None else max_workers
    if max_workers < 1:
        raise InputError(f"max-workers must be >= 1, got {max_workers}")
    reps = (2 if quick else 10) if reps is None else reps   # the paper: 10
    if reps < 1:
        raise InputError(f"reps must be >= 1, got {reps}")
    p = (4096 if quick else 8192) if p is None else p
    out = Path(out)
    sizes = {t: SPARSITY[t] if s is None else s for t in tasks}
    units = [runner.Unit(unit_speedup, dict(task=t, p=p, n=n, s=sizes[t], rep=r, seed=seed,
                                     max_workers=max_workers, epochs=epochs,
                                     timeout=timeout, carrier=carrier,
                                     run_dir=str(out / "speedup-runs")))
             for t in tasks for r in range(reps)]
    rows = runner.run_units(units, 1, desc="speedup", progress=progress)
    figure = {}
    for task in tasks:
        mine = [r for r in rows if r["task"] == task]
        results = [load_result(r["result_file"]) for r in mine]
        clock = fit_cost_model(results, n, sizes[task], host=carrier == "shared")
        problem = _problem(task, p, n, sizes[task], runner.problem_seed(seed, 0))
        model = dict(loss=LOSS[task], epochs=epochs, step_seconds=timed_step(results))
        batches = {}   # the measured steps per push of each q, over its runs
        for row, result in zip(mine, results):
            if result.asy is not None:
                batches.setdefault(row["workers"], []).append(steps_per_push(result))
        sequential = next(_trace(result) for row, result in zip(mine, results)
                          if row["rep"] == 0 and result.asy is None)
        model["baseline"] = sequential   # measured, on the problem simulated
        predicted = predict_speedup(problem.X, problem.y, sizes[task], clock,
                                    workers=model_workers, **model,
                                    batches={q: float(np.mean(b))
                                             for q, b in batches.items()})
        parameters = {"model_step": clock.step, "model_column": clock.column,
                      "model_swap": clock.swap, "model_push": clock.push,
                      "model_serve": clock.serve}
        for entry in predicted:
            rows.append({"experiment": "speedup", "kind": "predicted", "task": task,
                         "p": p, "n": n, "s": sizes[task], "epochs": epochs,
                         "method": "Asy-OS (virtual clock)", "rep": 0, "seed": seed,
                         "partition": PARTITION, **entry, **parameters})
        figure[task] = {}
        if cluster is not None:
            machines, per_machine = cluster
            remote = replace(clock, host=False, latency=latency, bandwidth=bandwidth)
            for entry in predict_speedup(
                    problem.X, problem.y, sizes[task], remote,
                    workers=(machines * per_machine,),
                    remote=lambda q: q - per_machine, **model):
                rows.append({"experiment": "speedup", "kind": "predicted",
                             "task": task, "p": p, "n": n, "s": sizes[task],
                             "epochs": epochs, "method": f"Asy-OS (virtual clock, "
                             f"{machines} machines x {per_machine})", "rep": 0,
                             "seed": seed, "partition": PARTITION, **entry,
                             **parameters, "latency": latency,
                             "bandwidth": bandwidth})
                figure[task]["cluster"] = (
                    entry["workers"], entry["speedup"],
                    f"{machines} machines x {per_machine} (model: "
                    f"{1e6 * latency:g} µs, {8e-9 * bandwidth:g} Gb/s)")
        by_q = {e["workers"]: e for e in predicted}
        for row in mine:   # the model beside each measured point it predicts
            q = row["workers"]
            if row["method"] != CARRIERS[carrier] or q not in by_q:
                continue
            row["predicted_seconds"] = by_q[q]["seconds"]
            row["wall_error"] = by_q[q]["seconds"] / row["seconds"] - 1.0
            if row["speedup"] > 0:
                row["predicted_speedup"] = by_q[q]["speedup"]
                row["model_error"] = by_q[q]["speedup"] / row["speedup"] - 1.0
        figure[task].update(_figure_data(mine, results, predicted, CARRIERS[carrier]))
    keys = ("task", "kind", "method", "workers")
    summary = runner.summarize(rows, keys, METRICS)
    files = [runner.write_csv(out / "speedup.csv", rows)]
    files.append(plot.plot_speedup(
        out / "speedup.png", figure,
        title=f"{CARRIERS[carrier]}: n = {n}, p = {p}, s = "
              f"{'/'.join(str(sizes[t]) for t in tasks)}, {epochs} scans, {reps} reps; "
              f"threshold = {THRESHOLD_FACTOR} × sequential OS's final objective\n"
              f"{PARTITION}"))
    table = runner.format_table(summary, keys, METRICS)
    return ExperimentResult("speedup", rows, summary, table, files)


def _figure_data(rows: list[dict], results: list, predicted: list[dict],
                 method: str) -> dict:
    first = [(row, res) for row, res in zip(rows, results) if row["rep"] == 0]
    traces = {("sequential" if res.asy is None else f"q = {row['workers']}"):
              _trace(res) for row, res in first}
    staleness = {f"q = {row['workers']}": res.asy["staleness"]["histogram"]
                 for row, res in first if res.asy is not None}
    qs = sorted({r["workers"] for r in rows if r["method"] == method})
    measured = runner.summarize([r for r in rows if r["method"] == method],
                                ("workers",), ("speedup",))
    by_q = {e["workers"]: e for e in measured}
    return {"traces": traces, "threshold": first[0][0]["threshold"],
            "measured": (qs, [by_q[q]["speedup"] for q in qs],
                         [by_q[q]["speedup_se"] for q in qs]),
            "predicted": ([e["workers"] for e in predicted],
                          [e["speedup"] for e in predicted]),
            "staleness": staleness}
