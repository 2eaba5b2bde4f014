"""Recall of Asy-OS against sequential OS, over many seeds: simulated, or over MPI.

The paper's regression protocol for Asy-OS (n = 1000, p = 8192, s = 64, X iid N(0, 1),
noise sd 0.1: ``asyos.datasets.make_regression``), the paper's staleness τ = q
(``fit_simulated(..., delay=q)``).  For every seed, sequential OS (``asyos.fit_os``)
and, for every q and budget rule, simulated Asy-OS run on the same data; the table
gives, per scan count, q and rule, the mean and worst recall of the true support over
the seeds and the mean and worst gap to sequential OS on the same seed (negative:
Asy-OS found fewer true features).  "target" says whether the mean gap is within 0.05
and the worst within 0.10.

    python benchmarks/asy_quality.py [--seeds 8] [--q 2 4 8 11] [--epochs 2 3]
                                     [--budgets fixed adaptive] [--quick] [--csv F]
                                     [--carrier simulated|mpi]
                                     [--rule auto|fitted|magnitude]

``--carrier mpi`` runs every Asy-OS fit as ``mpiexec -n q+1 python -m asyos.run`` at
its default pipeline and staleness bound (the data written once per seed) instead of
the simulator: the interleaving is whatever the machine gives.

One simulated fit takes 1-6 s on this machine (sequential OS under a second), so the
default run (8 seeds, 4 q, 2 rules, 2 scan counts) takes about 8-10 minutes on one
core; ``--quick`` (p = 2048, s = 32, 3 seeds, q = 4 and 8, 2 scans) under a minute.
"""

import argparse
import csv
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import asyos
from asyos.datasets import make_regression
from asyos.metrics import recall
from asyos.solvers.simulator import fit_simulated


def mpi_fit(tmp: Path, s, q, budget, epochs, rule) -> np.ndarray:
    """The features Asy-OS over ``q`` MPI workers selects on the data in ``tmp``."""
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
    out = tmp / "result.json"
    command = [mpiexec, "-n", str(q + 1), sys.executable, "-m", "asyos.run", "--data",
               str(tmp / "X.npy"), "--labels", str(tmp / "y.npy"), "-s", str(s),
               "--epochs", str(epochs), "--budget", budget, "--rule", rule, "--quiet",
               "--out", str(out), "--force"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stderr}")
    return np.asarray(json.loads(out.read_text())["selected"])


def measure(p, s, n, seeds, qs, epochs_list, budgets, progress=True,
            carrier="simulated", rule="auto") -> list[dict]:
    """One row per (seed, scans, method, q): recall and seconds."""
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="asy-quality-"))
    for seed in seeds:
        problem = make_regression(p=p, s=s, n=n, seed=seed)
        if carrier == "mpi":
            np.save(tmp / "X.npy", np.asfortranarray(problem.X))
            np.save(tmp / "y.npy", problem.y)
        for epochs in epochs_list:
            start = time.perf_counter()
            result = asyos.fit_os(problem.X, problem.y, s=s, epochs=epochs, rule=rule)
            rows.append({"seed": seed, "epochs": epochs, "budget": "sequential", "q": 1,
                         "recall": recall(result.selected, problem.support),
                         "seconds": time.perf_counter() - start})
            for q in qs:
                for budget in budgets:
                    start = time.perf_counter()
                    if carrier == "mpi":
                        selected = mpi_fit(tmp, s, q, budget, epochs, rule)
                    else:
                        selected = fit_simulated(problem.X, problem.y, s, q, delay=q,
                                                 budget=budget, epochs=epochs,
                                                 rule=rule).selected
                    rows.append({"seed": seed, "epochs": epochs, "budget": budget, "q": q,
                                 "recall": recall(selected, problem.support),
                                 "seconds": time.perf_counter() - start})
            if progress:
                done = [r for r in rows if r["seed"] == seed and r["epochs"] == epochs]
                print(f"seed {seed}, {epochs} scans: " + ", ".join(
                    f"{r['budget']}{'' if r['q'] == 1 else ' q=' + str(r['q'])} "
                    f"{r['recall']:.3f}" for r in done), flush=True)
    shutil.rmtree(tmp)
    return rows


def summarise(rows, mean_tol=0.05, worst_tol=0.10) -> list[dict]:
    """Per (scans, q, rule): mean/worst recall and mean/worst gap to sequential OS."""
    sequential = {(r["seed"], r["epochs"]): r["recall"] for r in rows
                  if r["budget"] == "sequential"}
    keys = sorted({(r["epochs"], r["q"], r["budget"]) for r in rows
                   if r["budget"] != "sequential"})
    summary = []
    for epochs, q, budget in keys:
        group = [r for r in rows if (r["epochs"], r["q"], r["budget"]) ==
                 (epochs, q, budget)]
        recalls = np.array([r["recall"] for r in group])
        gaps = np.array([r["recall"] - sequential[r["seed"], epochs] for r in group])
        seq = np.array([sequential[r["seed"], epochs] for r in group])
        summary.append({
            "epochs": epochs, "q": q, "budget": budget, "seeds": len(group),
            "sequential": seq.mean(), "mean": recalls.mean(), "worst": recalls.min(),
            "mean_gap": gaps.mean(), "worst_gap": gaps.min(),
            "seconds": np.mean([r["seconds"] for r in group]),
            "target": bool(gaps.mean() >= -mean_tol and gaps.min() >= -worst_tol)})
    return summary


def table(summary) -> str:
    lines = ["| scans | q | budget | sequential | mean recall | worst seed | mean gap | "
             "worst gap | target | s/fit |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for e in summary:
        lines.append(f"| {e['epochs']} | {e['q']} | {e['budget']} | "
                     f"{e['sequential']:.3f} | {e['mean']:.3f} | {e['worst']:.3f} | "
                     f"{e['mean_gap']:+.3f} | {e['worst_gap']:+.3f} | "
                     f"{'met' if e['target'] else 'missed'} | {e['seconds']:.1f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds 0..N-1 (default 8; --quick: 3)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--q", type=int, nargs="+", default=None,
                        help="workers (default 2 4 8 11; --quick: 4 8)")
    parser.add_argument("--epochs", type=int, nargs="+", default=None,
                        help="scan counts (default 2 3; --quick: 2)")
    parser.add_argument("--budgets", nargs="+", default=["fixed", "adaptive"],
                        choices=["fixed", "adaptive"])
    parser.add_argument("--p", type=int, default=None, help="default 8192 (quick 2048)")
    parser.add_argument("--s", type=int, default=None, help="default 64 (quick 32)")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--quick", action="store_true",
                        help="p = 2048, s = 32, 3 seeds, q = 4 8, 2 scans")
    parser.add_argument("--csv", help="write every run (seed, scans, rule, q, recall)")
    parser.add_argument("--quiet", action="store_true", help="no per-seed lines")
    parser.add_argument("--rule", choices=["auto", "fitted", "magnitude"],
                        default="auto", help="the substitution rule of every fit "
                        "(sequential OS's fitted rule stops early: scans are a cap)")
    parser.add_argument("--carrier", choices=["simulated", "mpi"], default="simulated",
                        help="simulated Asy-OS with tau = q, or real MPI ranks")
    args = parser.parse_args(argv)
    quick = args.quick
    p = args.p or (2048 if quick else 8192)
    s = args.s or (32 if quick else 64)
    seeds = range(args.first_seed, args.first_seed + (args.seeds or (3 if quick else 8)))
    qs = args.q or ([4, 8] if quick else [2, 4, 8, 11])
    epochs_list = args.epochs or ([2] if quick else [2, 3])
    print(f"regression n = {args.n}, p = {p}, s = {s}, {args.carrier}"
          f"{', τ = q' if args.carrier == 'simulated' else ''}, seeds "
          f"{seeds.start}..{seeds.stop - 1}, q = {qs}, scans {epochs_list}", flush=True)
    start = time.perf_counter()
    rows = measure(p, s, args.n, seeds, qs, epochs_list, args.budgets,
                   progress=not args.quiet, carrier=args.carrier, rule=args.rule)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    print()
    print(table(summarise(rows)))
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
