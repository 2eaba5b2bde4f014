"""Asy-OS against sequential OS on one machine, every carrier side by side in one run.

Each repetition runs the same commands a user would (``python -m asyos.run``):
sequential OS, Asy-OS with ``--workers q`` (shared memory, no server process) and,
with ``--mpi``, ``mpiexec -n q+1`` (a server rank), on one regression problem written
once in the feature-major layout.  Every other repetition reverses the order (the
machine is shared and the second of two runs is often the faster).  For each run:
the time to reach the threshold (1.05 x the objective sequential OS ends at, read
from each run's trace: the time inside the solver), the wall time of the whole
command, the final objective, recall, the largest staleness against its bound and the
Σ-invariant error.  Reported per carrier: the median and the worst repetition of
T_sequential / T_carrier ("never": the run ended above the threshold), and the
medians of the workers' time outside their kernels per step ("µs/step"), of it
blocked for a view or credit ("waited"), and of the time the server's process spent
serving ("serve s").

    python benchmarks/one_machine.py [--n 2000] [--p 8192] [--s 256] [--workers 1 2]
                                     [--repeat 5] [--epochs 3] [--mpi] [--mpi-messages]
                                     [--seeds 0]
                                     [--pipeline auto:auto 2:16]
                                     [--staleness auto 128] [--runs]
    python benchmarks/one_machine.py --scale /tmp/asyos-scale --n 1000 --p 1000000 \
                                     -s 100 --epochs 1 --repeat 5 --workers 2
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from asyos.datasets import make_regression

NEVER = float("inf")


def run(command: list, out: Path) -> dict:
    start = time.perf_counter()
    proc = subprocess.run(command + ["--quiet", "--force", "--out", str(out)],
                          capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stderr}")
    result = json.loads(out.read_text())
    result["wall"] = wall
    return result


def time_to(result: dict, threshold: float) -> float:
    for seconds, value in zip(result["trace"]["seconds"], result["trace"]["objective"]):
        if value <= threshold:
            return seconds
    return NEVER


def bytes_per_push(asy: dict) -> float:
    """Bytes the server rank sent and received per push (MPI), else NaN."""
    traffic = asy.get("server_bytes")
    if not traffic or not traffic["pushes"]:
        return float("nan")
    return (traffic["sent"] + traffic["received"]) / traffic["pushes"]


def per_step(asy: dict, field: str) -> float:
    """The workers' ``field`` seconds per feature step, in µs (NaN for sequential
    OS): "communicate_seconds", their time outside the kernel, or "wait_seconds",
    the part of it blocked for a view or credit."""
    workers = asy.get("workers") or []
    steps = sum(w.get("steps", 0) for w in workers)
    if not steps:
        return float("nan")
    return 1e6 * sum(w.get(field, 0.0) for w in workers) / steps


def problem_files(args, seed: int, tmp: Path) -> tuple:
    """(data, labels, true support, extra flags) of one problem: ``make_regression``
    written feature-major, or with ``--scale`` scale.py's dense file (float32)."""
    if args.scale:
        from scale import write_design  # benchmarks/scale.py, beside this script

        path = Path(args.scale) / f"X_{args.n}x{args.p}_float32.npy"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_design(path, args.n, args.p, np.float32)
        return path, Path(str(path) + ".y.npy"), {0, args.p // 2}, ["--dtype",
                                                                   "float32"]
    problem = make_regression(p=args.p, s=args.s, n=args.n, seed=seed)
    np.save(tmp / "X.npy", np.asfortranarray(problem.X))
    np.save(tmp / "y.npy", problem.y)
    return tmp / "X.npy", tmp / "y.npy", set(problem.support.tolist()), []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--p", type=int, default=8192)
    parser.add_argument("--s", type=int, default=256)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0],
                        help="problems (one per seed), each with --repeat repetitions")
    parser.add_argument("--mpi", action="store_true", help="also mpiexec -n q+1")
    parser.add_argument("--mpi-messages", action="store_true", help="also mpiexec -n "
                        "q+1 --ranks-per-node 1: every n-vector in a message, not "
                        "through the node's shared window")
    parser.add_argument("--pipeline", nargs="+", default=["auto:auto"],
                        metavar="WINDOW:BATCH", help="pipelines to run each Asy-OS "
                        "command with, for each q (asyos run --window/--batch)")
    parser.add_argument("--staleness", nargs="+", default=["auto"], metavar="TAU",
                        help="bounds to run each Asy-OS command with (asyos run "
                        "--staleness; 'auto': the default)")
    parser.add_argument("--scale", metavar="DIR", help="instead: scale.py's dense "
                        "problem from disk (--n x --p float32 in DIR, written once; "
                        "y = x_0 - 2 x_{p/2} + noise), e.g. --n 1000 --p 1000000 "
                        "-s 100 --epochs 1")
    parser.add_argument("-s", dest="s_flag", type=int, help="same as --s")
    parser.add_argument("--runs", action="store_true", help="also a line per run as "
                        "it ends (seed, repetition, speedup, final objective over "
                        "sequential OS's, recall gap): which runs make the worst")
    args = parser.parse_args()
    args.s = args.s_flag or args.s
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
    rows: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for seed in args.seeds:
            data, labels, support, extra = problem_files(args, seed, tmp)
            job = [sys.executable, "-m", "asyos.run", "--data", str(data),
                   "--labels", str(labels), "-s", str(args.s), "--epochs",
                   str(args.epochs), *extra]
            commands = {"sequential": job}
            for q in args.workers:
                for tau in args.staleness:
                    bound = ["--staleness", tau]
                    tag = "" if tau == "auto" else f" τ={tau}"
                    for pipeline in args.pipeline:
                        window, batch = pipeline.split(":")
                        shape = "" if pipeline == "auto:auto" else f" {pipeline}"
                        flags = ["--window", window, "--batch", batch, *bound]
                        commands[f"--workers {q}{shape}{tag}"] = \
                            job + ["--workers", str(q), *flags]
                        if args.mpi:
                            commands[f"mpiexec -n {q + 1}{shape}{tag}"] = [
                                mpiexec, "-n", str(q + 1), *job, *flags]
                    if args.mpi_messages:
                        commands[f"mpiexec -n {q + 1} messages{tag}"] = [
                            mpiexec, "-n", str(q + 1), *job, "--ranks-per-node", "1",
                            *bound]
            for rep in range(args.repeat):
                names = list(commands)[::-1 if rep % 2 else 1]
                results = {name: run(commands[name], tmp / "r.json") for name in names}
                seq = results["sequential"]
                threshold = 1.05 * seq["objective"]
                t_seq = time_to(seq, threshold)
                for name, result in results.items():
                    asy = result.get("asy") or {}
                    stale = asy.get("staleness", {})
                    rows.setdefault(name, []).append({
                        "speedup": t_seq / time_to(result, threshold),
                        "wall": seq["wall"] / result["wall"],
                        "objective": result["objective"] / seq["objective"],
                        "recall": len(support & set(result["selected"])) / len(support),
                        "recall_gap": (len(support & set(seq["selected"])) -
                                       len(support & set(result["selected"]))) /
                        len(support),
                        "stale": (stale.get("max", 0), stale.get("bound", 0)),
                        "u_check": asy.get("u_check_max_abs_diff", 0.0) /
                        max(1.0, np.abs(result["objective"])),
                        "bytes": bytes_per_push(asy),
                        "communicate": per_step(asy, "communicate_seconds"),
                        "waited": per_step(asy, "wait_seconds"),
                        # the server's process's time serving (shared memory: worker
                        # 0's own core), in seconds
                        "serving": asy.get("server_seconds", float("nan")),
                    })
                    if args.runs:
                        row = rows[name][-1]
                        print(f"seed {seed} run {rep} {name:>22}: speedup "
                              f"{row['speedup']:.2f}, objective {row['objective']:.4f}"
                              f", recall gap {row['recall_gap']:.3f}", flush=True)
    print(f"n = {args.n}, p = {args.p}, s = {args.s}, {args.epochs} epochs, seeds "
          f"{args.seeds}, {args.repeat} repetitions each (order alternating); "
          "threshold 1.05 x sequential OS's final objective")
    print(f"{'run':>22} {'speedup median':>15} {'worst':>6} {'wall median':>12} "
          f"{'worst':>6} {'objective':>10} {'recall':>7} {'gap mean/worst':>15} "
          f"{'max stale/bound':>16} {'Σ-check':>8} {'B/push':>7} {'µs/step':>8} "
          f"{'waited':>7} {'serve s':>8}")
    for name, values in rows.items():
        speed = np.array([v["speedup"] for v in values])
        wall = np.array([v["wall"] for v in values])
        gaps = np.array([v["recall_gap"] for v in values])
        # the run nearest its own bound (the automatic one follows the timed step)
        stale = max((v["stale"] for v in values),
                    key=lambda pair: pair[0] / pair[1] if pair[1] else 0.0)
        print(f"{name:>22} {np.median(speed):15.2f} {speed.min():6.2f} "
              f"{np.median(wall):12.2f} {wall.min():6.2f} "
              f"{np.median([v['objective'] for v in values]):10.4f} "
              f"{np.mean([v['recall'] for v in values]):7.3f} "
              f"{gaps.mean():7.3f}/{gaps.max():.3f} "
              f"{stale[0]:>8}/{stale[1]!s:<7} "
              f"{max(v['u_check'] for v in values):8.1e} "
              f"{np.median([v['bytes'] for v in values]):7.0f} "
              f"{np.median([v['communicate'] for v in values]):8.1f} "
              f"{np.median([v['waited'] for v in values]):7.1f} "
              f"{np.median([v['serving'] for v in values]):8.3f}")


if __name__ == "__main__":
    main()
