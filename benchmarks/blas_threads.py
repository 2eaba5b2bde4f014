"""BLAS threads for sequential OS: the default (1) against every core, idle and loaded.

The OS kernels run on one core; what BLAS still does in a run (refits, the fitted
rule's occasional products) is small, and a BLAS pool spread over every core spins
and waits for its threads when other processes hold the cores.  Each configuration
runs ``asyos run`` on the synthetic regression (n = 2000, p = 4000, s = 256) in its own
process, side by side, once on an idle machine and once while ``--load`` busy-loop
processes (default: one per core) hold the cores.

    python benchmarks/blas_threads.py [--reps 3]

Reported: microseconds per feature step (the run's own timing), median of the reps.
"""

import argparse
import multiprocessing
import os
import re
import subprocess
import sys

import numpy as np


def spin(stop) -> None:
    while not stop.is_set():
        sum(range(10_000))


def step_us(rule: str, threads: int) -> float:
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "-p", "4000", "-n", "2000",
                           "-s", "256", "--rule", rule, "--epochs", "2", "--quiet",
                           "--blas-threads", str(threads)],
                          capture_output=True, text=True, timeout=1800, check=True)
    return float(re.search(r"([\d.]+) us per feature step", proc.stdout).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--load", type=int, default=os.cpu_count())
    args = parser.parse_args()
    cores = os.cpu_count()
    print(f"{cores} cores; load: {args.load} busy processes")
    for state in ("idle", "loaded"):
        stop, spinners = multiprocessing.Event(), []
        if state == "loaded":
            spinners = [multiprocessing.Process(target=spin, args=(stop,))
                        for _ in range(args.load)]
            for process in spinners:
                process.start()
        try:
            for rule in ("magnitude", "fitted"):
                times = {threads: [] for threads in (1, cores)}
                for _ in range(args.reps):
                    for threads in times:
                        times[threads].append(step_us(rule, threads))
                one, every = (np.median(times[t]) for t in (1, cores))
                print(f"{state:6s} {rule:9s}: 1 thread {one:8.1f} us/step, "
                      f"{cores} threads {every:8.1f} us/step ({every / one:.2f}x)")
        finally:
            stop.set()
            for process in spinners:
                process.join()


if __name__ == "__main__":
    main()
