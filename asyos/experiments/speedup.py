"""Fig. 3 of Yang, Fujimaki, Kusumura & Liu (KDD 2016, Section 5.3): training error
vs time and speedup of real runs, beside a speedup predicted by the virtual-clock
simulator (docs/algorithms.md, "Asy-OS: staleness and budgets").

Protocol: n = 1000, p = 8192, s = 64 (regression) or 32 (classification), 2 scans.  The
problem of each repetition is drawn once (``asyos.datasets``, n = 1000 exactly), saved
feature-major as .npy, and every run of that repetition reads the same file:
``python -m asyos.run`` (sequential OS, the single-worker baseline) and Asy-OS for
q = 1..Q, one after the other: ``python -m asyos.run --workers q`` (``carrier``
"shared": q processes on this machine, no server process) or ``mpiexec -n q+1 python
-m asyos.run`` ("mpi": rank 0 the server, q workers).  Workers own static shards: feature j goes to worker
j mod q (``FeatureStream.shard``), with budgets s_t = s // q + [t < s mod q].

Speedup at a threshold: threshold = 1.05 × the final training objective of sequential
OS, a level that means "as good as sequential OS"; T = the first time a run's trace
(plus its final point) reaches it, interpolated linearly between trace points;
speedup_q = T_sequential / T_q, and 0 for a run that never reaches it (said in the
table, never hidden by a looser threshold).  The virtual-clock model is validated where
it can be: its predicted speedup at each measured q beside the measured one, with the
relative error in the rows (``model_error``).  The training error is the objective of the loss
(1/(2n))‖Xw − y‖² for regression, the mean squared hinge for classification.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io.results import load_result
from ..metrics import evaluate
from ..solvers.simulator import fit_simulated
from . import plot, runner
from .sweeps import LOSS, TASKS, ExperimentResult, make_problem

__all__ = ["speedup", "speedups", "time_to_threshold", "threshold_of",
           "fit_cost_model", "predict_speedup", "PARTITION", "RunFailed",
           "mpiexec_path"]

PARTITION = "static shards: feature j -> worker j mod q; budgets s_t = s//q + [t < s%q]"
THRESHOLD_FACTOR = 1.05
MODEL_WORKERS = (1, 2, 4, 8, 16, 32)
SPARSITY = {"regression": 64, "classification": 32}
CARRIERS = {"shared": "Asy-OS (shared memory)", "mpi": "Asy-OS (MPI)"}
METRICS = ("speedup", "predicted_speedup", "model_error", "t_threshold", "recall",
           "recovery_error", "test_error", "final_objective", "seconds",
           "staleness_mean")


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
def fit_cost_model(runs: list[dict], n: int, s: int) -> tuple[float, float]:
    """Fit (a, c_comm) of the virtual clock from measured runs.

    Model: one worker iteration on a worker holding |S(t)| columns costs
        T_iter = a · n · (|S(t)| + 2) + c_comm   seconds,
    a per feature step and per kept column (the OS step reads |S(t)| kept columns,
    the new one and the residual: n·(|S(t)| + 2) multiply-adds), and c_comm per
    push, amortised per step (real runs batch several steps into one push).
    With |S(t)| ≈ s_t (the worker's budget, full after its first s_t steps):
        a      = Σ_r compute_r / Σ_r steps_r · n · (s_r + 2)    over the sequential
                 run (s_r = s, compute = us_per_step · steps) and every MPI worker
                 (s_r = its budget, compute = its compute_seconds);
        c_comm = Σ communicate_seconds / Σ steps               over the MPI workers.
    ``runs`` are results (sequential ones have no ``asy``).
    """
    work = compute = comm = comm_steps = 0.0
    for result in runs:
        if result.asy is None:
            steps = result.n_steps
            compute += result.seconds
            work += steps * n * (s + 2)
            continue
        for worker in result.asy["workers"]:
            compute += worker["compute_seconds"]
            work += worker["steps"] * n * (worker["budget"] + 2)
            comm += worker["communicate_seconds"]
            comm_steps += worker["steps"]
    if work <= 0:
        raise InputError("no measured steps to fit the cost model on")
    return compute / work, (comm / comm_steps if comm_steps else 0.0)


def predict_speedup(X, y, s: int, a: float, c_comm: float, *, loss: str,
                    epochs: int = 2, workers=MODEL_WORKERS) -> list[dict]:
    """Virtual-clock speedups: sequential OS costs a·n·(s+2) per step (q = 1, no
    communication); Asy-OS with q workers a·n·(|S(t)|+2) + c_comm per worker step,
    workers running concurrently (``fit_simulated(..., clock=(a, c_comm))``).
    Threshold and speedup as for the measured runs, on virtual time."""
    runs = {0: fit_simulated(X, y, s, 1, clock=(a, 0.0), loss=loss, epochs=epochs,
                             rule="magnitude")}
    for q in workers:
        if q <= s:
            runs[q] = fit_simulated(X, y, s, q, clock=(a, c_comm), loss=loss,
                                    epochs=epochs, rule="magnitude")
    threshold, times, gains = speedups(
        {q: _trace(r, "virtual_seconds") for q, r in runs.items()}, 0)
    return [{"workers": q, "t_threshold": times[q], "threshold": threshold,
             "speedup": gains[q], "final_objective": r.objective,
             "staleness_mean": r.asy["staleness"]["mean"],
             "staleness_max": r.asy["staleness"]["max"]}
            for q, r in runs.items() if q > 0]


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
               str(epochs), "--seed", str(seed), "--rule", "magnitude"]
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
            carrier="shared") -> ExperimentResult:
    """Fig. 3: measured and predicted (virtual clock) speedup vs workers.

    Runs are timed, so they run one at a time whatever ``jobs`` says.  ``s`` None:
    64 for regression, 32 for classification; ``p`` None: 8192 (4096 with quick).
    ``carrier``: "shared" (``--workers q``, no server process) or "mpi".
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
        a, c_comm = fit_cost_model(results, n, sizes[task])
        problem = _problem(task, p, n, sizes[task], runner.problem_seed(seed, 0))
        predicted = predict_speedup(problem.X, problem.y, sizes[task], a, c_comm,
                                    loss=LOSS[task], epochs=epochs,
                                    workers=model_workers)
        for entry in predicted:
            rows.append({"experiment": "speedup", "kind": "predicted", "task": task,
                         "p": p, "n": n, "s": sizes[task], "epochs": epochs,
                         "method": "Asy-OS (virtual clock)", "rep": 0, "seed": seed,
                         "partition": PARTITION, **entry, "model_a": a,
                         "model_c_comm": c_comm})
        by_q = {e["workers"]: e["speedup"] for e in predicted}
        for row in mine:   # the model beside each measured point it predicts
            q = row["workers"]
            if row["method"] == CARRIERS[carrier] and q in by_q and \
                    row["speedup"] > 0:
                row["predicted_speedup"] = by_q[q]
                row["model_error"] = by_q[q] / row["speedup"] - 1.0
        figure[task] = _figure_data(mine, results, predicted)
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


def _figure_data(rows: list[dict], results: list, predicted: list[dict]) -> dict:
    first = [(row, res) for row, res in zip(rows, results) if row["rep"] == 0]
    traces = {("sequential" if res.asy is None else f"q = {row['workers']}"):
              _trace(res) for row, res in first}
    staleness = {f"q = {row['workers']}": res.asy["staleness"]["histogram"]
                 for row, res in first if res.asy is not None}
    qs = sorted({r["workers"] for r in rows if r["method"] == "Asy-OS (MPI)"})
    measured = runner.summarize([r for r in rows if r["method"] == "Asy-OS (MPI)"],
                         ("workers",), ("speedup",))
    by_q = {e["workers"]: e for e in measured}
    return {"traces": traces, "threshold": first[0][0]["threshold"],
            "measured": (qs, [by_q[q]["speedup"] for q in qs],
                         [by_q[q]["speedup_se"] for q in qs]),
            "predicted": ([e["workers"] for e in predicted],
                          [e["speedup"] for e in predicted]),
            "staleness": staleness}
