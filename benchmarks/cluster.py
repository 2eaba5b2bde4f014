"""Asy-OS over MPI across emulated hosts, and the cost model's network terms checked
against it.

Three hosts (network namespaces on one machine, tests/emulated_cluster.py): the
server's rank alone on host 0, on a core of its own (``taskset``), and one worker on
each of hosts 1 and 2, on the other cores; every push and view crosses a shaped
link (``--rate``, Gb/s each way) and a user-space relay that holds each packet
``--latency`` µs one way.  For each seed the paper's problem (n = 1000, p = 8192,
s = 64, regression, 2 passes) is drawn once and read from the same file by every
run: sequential OS on this machine, then ``mpiexec`` on the hosts at every latency
and rate, each ``--repeat`` times (the order reversed every other time; a row
holds the medians).  A row: the run's own solver seconds and when its passes ended
(before the closing sweeps, the final reports and the refit), the share of the
workers' time outside their kernels (and of that, blocked for a view or credit),
the mean staleness, the worst recall, and the cost model's prediction of both
times (docs/algorithms.md, "The cost model").

The model is fitted on each seed's sequential runs and its runs at zero latency
and the highest rate (the step, column, swap, push and serve costs), then simulates
every configuration with only the latency and bandwidth changed: what it gets
right or wrong at the other latencies and rates is its network terms.  An error is
the predicted seconds over the measured, less one; the summary gives the mean and
the worst over the seeds.

    python benchmarks/cluster.py [--seeds 0 1 2] [--latency 0 100 1000] [--rate 1 10]
                                 [--repeat 2] [--p 8192] [--n 1000] [--s 64]
                                 [--epochs 2] [--out DIR [--replay]]

``--out`` keeps every run's result there (``asyos inspect`` reads them), and with
``--replay`` the model is fitted and reported on them again, nothing run.  Needs
root (namespaces, tc, a TUN device), like the emulated-cluster tests.
"""

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))   # the emulated hosts the tests use
from emulated_cluster import emulated_cluster  # noqa: E402

from asyos.experiments import runner  # noqa: E402
from asyos.experiments import speedup as sp  # noqa: E402
from asyos.experiments.sweeps import make_problem  # noqa: E402
from asyos.io.results import load_result  # noqa: E402
from asyos.metrics import evaluate  # noqa: E402
from asyos.solvers.simulator import fit_simulated  # noqa: E402

COUNTS = [1, 1, 1]   # the server alone on host 0, a worker on each other host
GUARD = 600          # seconds: a run that takes longer has hung


def host_cpus(hosts: int) -> list:
    """The server's host on a core of its own, as on a cluster, and the workers'
    hosts on the others (on two cores they share the second one: each worker's
    kernel time then holds the other's slices, which the model fits as a slower
    step, so that its network terms are what the other configurations test)."""
    cores = sorted(os.sched_getaffinity(0))
    rest = cores[1:] or cores
    return [str(cores[0])] + [str(rest[(i - 1) % len(rest)]) for i in range(1, hosts)]


def worker_shares(result) -> tuple[float, float]:
    """(communicating, waiting) as shares of the workers' time, summed over them:
    time outside the kernel, and of it the time blocked for a view or credit."""
    workers = result.asy["workers"]
    total = sum(w["compute_seconds"] + w["read_seconds"] + w["communicate_seconds"]
                for w in workers)
    outside = sum(w["communicate_seconds"] for w in workers)
    waiting = sum(w.get("wait_seconds", 0.0) for w in workers)
    return outside / total, waiting / total


def passes_seconds(trace: dict, clock: str, steps: int) -> float:
    """When a run's trace reached ``steps`` (the passes' steps, epochs × p): the
    end of its passes, before the closing sweeps, the final reports and the refit."""
    return float(np.interp(steps, trace["steps"], trace[clock]))


def modelled(problem, s: int, clock, q: int, batch: float, *, latency: float,
             rate: float, epochs: int, step: float | None) -> tuple[float, float]:
    """The cost model's (solver seconds, seconds to the end of the passes) for q
    workers pushing ``batch`` steps at a time: ``clock`` with the link's latency
    (seconds, one way) and rate (bits/s), every worker remote."""
    p = problem.X.shape[1]
    remote = replace(clock, host=False, latency=latency, bandwidth=rate / 8)
    simulated = fit_simulated(
        problem.X, problem.y, s, q, loss="squared", epochs=epochs,
        clock=sp._clock_for(remote, q, s, p, remote=q, batch=batch,
                            step_seconds=step))
    return simulated.virtual_seconds, passes_seconds(simulated.trace,
                                                     "virtual_seconds", epochs * p)


def run_seed(seed: int, args, directory: Path) -> list[dict]:
    """One seed's problem: sequential OS, then Asy-OS on the emulated hosts at every
    latency and rate, ``args.repeat`` times (the order of the configurations
    reversed every other time); a row per configuration, with the medians of its
    runs and the model's prediction beside them."""
    problem = make_problem("regression", args.p, args.s, runner.problem_seed(seed, 0),
                           n=args.n)
    X_path, y_path = directory / f"X{seed}.npy", directory / f"y{seed}.npy"
    np.save(X_path, np.asfortranarray(problem.X))
    np.save(y_path, problem.y)
    job = [sys.executable, "-m", "asyos.run", "--data", str(X_path), "--labels",
           str(y_path), "-s", str(args.s), "--epochs", str(args.epochs), "--seed",
           str(seed)]
    configurations = [(latency, rate) for rate in sorted(args.rate, reverse=True)
                      for latency in args.latency]
    sequential, runs = [], {configuration: [] for configuration in configurations}
    for repeat in range(args.repeat):
        out = directory / f"seq{seed}-{repeat}.json"
        sequential.append(load_result(out) if args.replay else
                          sp._launch(job, out, GUARD))
        for latency, rate in configurations[::-1 if repeat % 2 else 1]:
            out = directory / f"asy{seed}-{latency:g}us-{rate:g}G-{repeat}.json"
            if args.replay:
                runs[latency, rate].append(load_result(out))
                continue
            with emulated_cluster(len(COUNTS), rate=rate * 1e9, delay=latency * 1e-6,
                                  cpus=host_cpus(len(COUNTS))) as cluster:
                runs[latency, rate].append(
                    sp._launch(cluster.mpiexec(COUNTS, job), out, GUARD))
    base = runs[configurations[0]]   # zero latency (the lowest), the highest rate
    clock = sp.fit_cost_model(sequential + base, args.n, args.s, host=False)
    step = sp.timed_step(base)
    # the base runs' pushes for every configuration: only the network changes
    batch = statistics.fmean(sp.steps_per_push(result) for result in base)
    rows = []
    for (latency, rate), results in runs.items():
        shares = [worker_shares(result) for result in results]
        model, model_passes = modelled(
            problem, args.s, clock, results[0].asy["n_workers"], batch,
            latency=latency * 1e-6, rate=rate * 1e9, epochs=args.epochs, step=step)
        seconds = statistics.median(result.seconds for result in results)
        passes = statistics.median(passes_seconds(result.trace, "seconds",
                                                  args.epochs * args.p)
                                   for result in results)
        rows.append({"seed": seed, "latency": latency, "rate": rate,
                     "seconds": seconds, "passes": passes,
                     "sequential": statistics.median(r.seconds for r in sequential),
                     "outside": statistics.fmean(share[0] for share in shares),
                     "waiting": statistics.fmean(share[1] for share in shares),
                     "staleness": statistics.fmean(r.asy["staleness"]["mean"]
                                                   for r in results),
                     "recall": min(evaluate(problem, r.selected)["recall"]
                                   for r in results),
                     "sequential_recall": evaluate(problem,
                                                   sequential[0].selected)["recall"],
                     "predicted": model, "error": model / seconds - 1.0,
                     "predicted_passes": model_passes,
                     "passes_error": model_passes / passes - 1.0})
    return rows


def summary(rows: list[dict]) -> list[str]:
    """A markdown table: per latency and rate, the means over the seeds, and the
    model's errors on the passes and on the whole run (mean, and the worst seed's
    by magnitude)."""
    lines = ["| latency µs | rate Gb/s | seconds (passes) | sequential | outside "
             "kernel | of it blocked | staleness | recall (sequential) | model: "
             "passes | error mean / worst | model: run | error mean / worst |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    configurations = sorted({(r["latency"], r["rate"]) for r in rows},
                            key=lambda c: (-c[1], c[0]))
    for latency, rate in configurations:
        mine = [r for r in rows if (r["latency"], r["rate"]) == (latency, rate)]

        def mean(key, mine=mine):
            return statistics.fmean(r[key] for r in mine)

        def errors(key, mine=mine):
            worst = max((r[key] for r in mine), key=abs)
            return f"{100 * mean(key):+.0f} % / {100 * worst:+.0f} %"

        lines.append(
            f"| {latency:g} | {rate:g} | {mean('seconds'):.2f} "
            f"({mean('passes'):.2f}) | {mean('sequential'):.2f} | "
            f"{100 * mean('outside'):.0f} % | {100 * mean('waiting'):.0f} % | "
            f"{mean('staleness'):.1f} | {mean('recall'):.3f} "
            f"({mean('sequential_recall'):.3f}) | {mean('predicted_passes'):.2f} | "
            f"{errors('passes_error')} | {mean('predicted'):.2f} | "
            f"{errors('error')} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--latency", type=float, nargs="+", default=[0, 100, 1000],
                        help="one-way latencies, µs")
    parser.add_argument("--rate", type=float, nargs="+", default=[1, 10],
                        help="each link's rate, Gb/s")
    parser.add_argument("--p", type=int, default=8192)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--s", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2,
                        help="runs of each configuration (their medians)")
    parser.add_argument("--out", type=Path, help="keep the runs' results here")
    parser.add_argument("--replay", action="store_true", help="run nothing: fit and "
                        "report on the results an earlier run kept in --out")
    args = parser.parse_args()
    if args.replay and args.out is None:
        parser.error("--replay reads the results kept in --out DIR")
    rows = []
    with tempfile.TemporaryDirectory(prefix="asyos-cluster-bench-") as tmp:
        directory = args.out or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        for seed in args.seeds:
            rows += run_seed(seed, args, directory)
            for row in rows[len(rows) - len(args.latency) * len(args.rate):]:
                print(f"seed {row['seed']}, {row['latency']:g} µs, {row['rate']:g} "
                      f"Gb/s: {row['seconds']:.2f} s, passes {row['passes']:.2f} s "
                      f"(sequential {row['sequential']:.2f} s); model: passes "
                      f"{row['predicted_passes']:.2f} s "
                      f"({100 * row['passes_error']:+.0f} %), run "
                      f"{row['predicted']:.2f} s ({100 * row['error']:+.0f} %), "
                      f"staleness "
                      f"{row['staleness']:.1f}, recall {row['recall']:.3f}",
                      flush=True)
    print("\n".join(summary(rows)))


if __name__ == "__main__":
    main()
