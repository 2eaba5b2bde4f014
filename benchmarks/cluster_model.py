"""The cost model's prediction for a cluster, over a grid of latency and bandwidth.

Reads the runs of one ``python -m asyos.experiments speedup`` (its
``OUT/speedup-runs``), fits the cost model on them as the experiment does
(``asyos.experiments.speedup.fit_cost_model``), and simulates Asy-OS on MACHINES
machines of WORKERS workers each (the server's machine shares memory with its
workers; the others reach it over the network) for every latency and bandwidth asked,
on the first repetition's problem and against its measured sequential run
(docs/algorithms.md, "The cost model").

    python benchmarks/cluster_model.py OUT [--cluster 6x2] [--latency 10 50 200]
                                           [--bandwidth 1 10 100] [--task regression]

``--workers Q`` asks instead what Q workers on this machine would gain if a push cost
its worker and the server a fraction of what was measured (``--scale``), with pushes
of ``--batch`` steps: what a leaner carrier would have to reach.
"""

import argparse
import csv
import json
import re
from dataclasses import replace
from pathlib import Path

from asyos.experiments import runner
from asyos.experiments import speedup as sp
from asyos.experiments.sweeps import LOSS, make_problem
from asyos.io.results import load_result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the experiment's --out directory")
    parser.add_argument("--cluster", default="6x2", help="MACHINESxWORKERS")
    parser.add_argument("--latency", type=float, nargs="+", default=[10, 50, 200],
                        help="one-way latencies, µs")
    parser.add_argument("--bandwidth", type=float, nargs="+", default=[1, 10, 100],
                        help="the server's link, Gb/s")
    parser.add_argument("--task", default="regression")
    parser.add_argument("--workers", type=int, help="instead: Q workers on this "
                        "machine, with the per-push costs scaled")
    parser.add_argument("--scale", type=float, nargs="+", default=[1, 0.5, 0.25, 0.1],
                        help="with --workers: factors on the push and serve costs")
    parser.add_argument("--batch", type=int, nargs="+", default=[16, 64],
                        help="with --workers: steps per push")
    args = parser.parse_args()
    machines, per_machine = (int(v) for v in
                             re.fullmatch(r"(\d+)x(\d+)", args.cluster).groups())
    rows = _rows(args.out / "speedup.csv", args.task)
    first = rows[0]
    n, p, s, epochs, seed = (int(first[k]) for k in ("n", "p", "s", "epochs", "seed"))
    results = [load_result(row["result_file"]) for row in rows]
    host = any(r.asy and r.asy.get("transport") == "shared" for r in results)
    clock = sp.fit_cost_model(results, n, s, host=host)
    problem = make_problem(args.task, p, s, runner.problem_seed(seed, 0), n=n)
    baseline = next(sp._trace(r) for row, r in zip(rows, results)
                    if int(row["rep"]) == 0 and r.asy is None)
    step = sp.timed_step(results)   # the runs' pipeline was sized for it
    print(f"{args.task}, n = {n}, p = {p}, s = {s}, {epochs} passes; fitted: "
          f"step {1e6 * clock.step:.2f} µs + {1e9 * clock.column:.3f} ns·n·(|S|+2), "
          f"swap {1e6 * clock.swap:.0f} µs, push {1e6 * clock.push:.0f} µs, "
          f"serve {1e6 * clock.serve:.0f} µs")
    if args.workers:
        return what_if(args, clock, problem, s, epochs, baseline, step)
    print(f"{machines} machines x {per_machine} workers: speedup at 1.05 x sequential "
          f"OS's final objective (wall-time ratio)")
    print("latency µs | " + " | ".join(f"{b:g} Gb/s" for b in args.bandwidth))
    table = {}
    for latency in args.latency:
        cells = []
        for bandwidth in args.bandwidth:
            remote = replace(clock, host=False, latency=1e-6 * latency,
                                bandwidth=1e9 / 8 * bandwidth)
            entry, = sp.predict_speedup(
                problem.X, problem.y, s, remote, loss=LOSS[args.task], epochs=epochs,
                workers=(machines * per_machine,),
                remote=lambda q: q - per_machine, baseline=baseline,
                step_seconds=step)
            cells.append(f"{entry['speedup']:.2f} ({entry['wall_speedup']:.2f})")
            table[f"{latency:g} us, {bandwidth:g} Gb/s"] = entry
        print(f"{latency:g} | " + " | ".join(cells))
    print(json.dumps({k: round(v["speedup"], 3) for k, v in table.items()}))


def what_if(args, clock, problem, s: int, epochs: int, baseline, step) -> None:
    print(f"{args.workers} workers on this machine: speedup at 1.05 x sequential OS's "
          f"final objective (wall-time ratio), push and serve costs scaled")
    print("scale | " + " | ".join(f"pushes of {b}" for b in args.batch))
    for factor in args.scale:
        cells = []
        for batch in args.batch:
            scaled = replace(clock, push=factor * clock.push, serve=factor * clock.serve)
            entry, = sp.predict_speedup(
                problem.X, problem.y, s, scaled, loss=LOSS[args.task], epochs=epochs,
                workers=(args.workers,), batches={args.workers: batch},
                baseline=baseline, step_seconds=step)
            cells.append(f"{entry['speedup']:.2f} ({entry['wall_speedup']:.2f})")
        print(f"{factor:g} | " + " | ".join(cells))


def _rows(path: Path, task: str) -> list[dict]:
    with open(path, newline="") as handle:
        return [row for row in csv.DictReader(handle)
                if row["kind"] == "measured" and row["task"] == task]


if __name__ == "__main__":
    main()
