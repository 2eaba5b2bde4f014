"""Run time and compile time of the kernels whose arguments are grouped into named
structures (``sparse_steps``, ``os_local``, ``saif_cd``), for two source trees side by
side: the code as it is and another checkout of the package (e.g. ``git worktree add
/tmp/before <commit>``).

Every measurement is a fresh process that imports ``asyos`` from one tree
(``PYTHONPATH``), each round running both trees back to back so that a noisy machine
slows both alike; the table reports the fastest round of each and the median over the
rounds of each round's ratio.

* run time: each workload through the kept sets' and the path's own entry points
  (``SparseKeptSet.run_block``, ``KeptSet.run_block``/``run_local``, ``solve_path``),
  so the Python-side packing of the structures and numba's dispatch are counted, on
  a filled cache; calls on empty blocks time that fixed cost alone, and a simulated
  Asy-OS run (one step per call) shows what it weighs in a whole run;
* compile time: each kernel's first call in a process with an empty
  ``NUMBA_CACHE_DIR`` (numba's compile events, inclusive of what the kernel calls:
  ``os_block`` compiles the OS step both drivers share, so ``os_local`` finds it
  done), the fastest of ``--compiles`` processes per tree;
* cache: a second process on that cache must compile none of them (loaded from disk).

    python benchmarks/kernel_arguments.py --before /tmp/before [--after /tmp/after]
        [--rounds 5] [--repeats 3] [--compiles 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from first_run import COMPILE_TIMER  # benchmarks/ is the script's directory

KERNELS = ("sparse_steps", "os_block", "os_local", "saif_cd")

PROBE = COMPILE_TIMER + r"""
import json, sys

import numpy as np
from asyos.core.kept_set import KeptSet, SparseKeptSet
from asyos.core.losses import Loss
from asyos.core.sparse_step import CSCBlock
from asyos.lasso.path import make_design, solve_path
from asyos.solvers.simulator import fit_simulated

repeats = int(sys.argv[1])
rng = np.random.default_rng(0)


def sparse_blocks(n, p, b, density):
    dense = rng.standard_normal((p, n)) * (rng.random((p, n)) < density)
    return [(np.arange(k, k + b), CSCBlock.from_dense(dense[k:k + b]))
            for k in range(0, p, b)]


def sparse_pass(n, s, blocks):
    y = rng.standard_normal(n)
    def run():
        kept = SparseKeptSet(n, s)
        state = np.array([1e-2, 0.0, 0.0, 0.0, 1.0, np.inf, 0.0])
        for index, block in blocks:
            kept.run_block(index, block, y, Loss.SQUARED, 1.0, state)
    return run


def dense_pass(n, s, p, b):
    X, y = rng.standard_normal((p, n)), rng.standard_normal(n)
    def run():
        kept = KeptSet(n, s)
        state = np.array([1e-2, 0.0, 0.0, 0.0, 1.0, np.inf, 0.0])
        for k in range(0, p, b):
            kept.run_block(np.arange(k, k + b), X[k:k + b], y, Loss.SQUARED, 1.0,
                           state)
    return run


def dense_local(n, s, p, b):
    X, y = rng.standard_normal((p, n)), rng.standard_normal(n)
    def run():
        kept, u = KeptSet(n, s), np.zeros(n)
        for k in range(0, p, b):
            kept.run_local(np.arange(k, k + b), X[k:k + b], u, y, Loss.SQUARED,
                           1e-2 / n, 1.0)
    return run


def empty_calls(kept, block, calls=5000):   # a call's fixed cost: packing, dispatch
    n = kept.n_samples
    index, u, y = np.zeros(0, np.int64), np.zeros(n), np.zeros(n)
    def run():
        for _ in range(calls):
            kept.run_local(index, block, u, y, Loss.SQUARED, 0.1, 1.0)
    return run


def simulated(n, p, s, q):
    X = rng.standard_normal((n, p))
    y = X[:, :s].sum(axis=1)
    return lambda: fit_simulated(X, y, s, q, epochs=1, rule="magnitude")


def saif_path(n, p):
    X = rng.standard_normal((n, p))
    y = X[:, :8] @ rng.uniform(1, 2, 8) + 0.1 * rng.standard_normal(n)
    design = make_design(X)
    lams = design.lam_max(y) * np.geomspace(0.9, 0.02, 10)
    return lambda: solve_path(design, y, lams, 1e-8, "saif")


WORK = {   # n, s, p, columns per block (8: a worker's default batch)
    "sparse_steps, n 20000, s 64, 256-column blocks":
        sparse_pass(20000, 64, sparse_blocks(20000, 2048, 256, 0.01)),
    "sparse_steps, n 2000, s 16, 8-column blocks":
        sparse_pass(2000, 16, sparse_blocks(2000, 2048, 8, 0.02)),
    "os_block, n 2000, s 32, 256-column blocks": dense_pass(2000, 32, 2048, 256),
    "os_local, n 2000, s 32, 8-column blocks": dense_local(2000, 32, 1024, 8),
    "os_local, n 200, s 8, 1-column blocks": dense_local(200, 8, 2048, 1),
    "saif_cd, n 300, p 5000, 10 λ": saif_path(300, 5000),
    "os_local, 5000 calls on 0 columns": empty_calls(KeptSet(100, 4),
                                                     np.zeros((0, 100))),
    "sparse_steps, 5000 calls on 0 columns": empty_calls(
        SparseKeptSet(100, 4), CSCBlock.from_dense(np.zeros((0, 100)))),
    "simulated Asy-OS (os_local), q 3, n 200, p 2000, s 8":
        simulated(200, 2000, 8, 3),
}
times = {}
for name, run in WORK.items():
    run()   # compiles, or loads the cache
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    times[name] = best
compiled = {name.rsplit(".", 1)[-1]: took for name, took in spent.items()
            if name.rsplit(".", 1)[-1] in ("sparse_steps", "os_block", "os_local",
                                            "saif_cd")}
print(json.dumps({"compiled": compiled, "run": times}))
"""


def probe(tree: str, cache: str, repeats: int) -> dict:
    env = {**os.environ, "PYTHONPATH": tree, "NUMBA_CACHE_DIR": cache}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(repeats)], env=env,
                          capture_output=True, text=True, timeout=1800,
                          cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the other source tree")
    parser.add_argument("--after", default=str(Path(__file__).resolve().parents[1]),
                        help="the tree measured against it (default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compiles", type=int, default=3,
                        help="empty-cache compilations per tree")
    args = parser.parse_args()
    trees = {"before": str(Path(args.before).resolve()),
             "after": str(Path(args.after).resolve())}
    with tempfile.TemporaryDirectory() as tmp:
        caches = {label: os.path.join(tmp, label) for label in trees}
        compile_times = {label: {} for label in trees}
        for attempt in range(args.compiles):
            for label, tree in trees.items():   # an empty cache each time
                cache = os.path.join(tmp, f"{label}-{attempt}")
                for name, took in probe(tree, cache, 0)["compiled"].items():
                    compile_times[label][name] = min(
                        compile_times[label].get(name, took), took)
        cached = {}
        for label, tree in trees.items():   # fill the cache, then load it
            probe(tree, caches[label], 0)
            cached[label] = probe(tree, caches[label], 0)["compiled"]
        rounds = [{label: probe(tree, caches[label], args.repeats)["run"]
                   for label, tree in trees.items()} for _ in range(args.rounds)]
    print("| run time | before (fastest) | after (fastest) | after/before: fastest, "
          "median of the rounds' |")
    print("|---|---:|---:|---:|")
    for name in rounds[0]["before"]:
        b, a = (min(r[label][name] for r in rounds) for label in trees)
        paired = statistics.median(r["after"][name] / r["before"][name] for r in rounds)
        print(f"| {name} | {b * 1e3:.1f} ms | {a * 1e3:.1f} ms | {a / b:.3f}, "
              f"{paired:.3f} |")
    print("\n| compile time, empty cache (fastest) | before | after | after/before |")
    print("|---|---:|---:|---:|")
    for name in KERNELS:
        b, a = compile_times["before"][name], compile_times["after"][name]
        print(f"| {name} | {b:.2f} s | {a:.2f} s | {a / b:.3f} |")
    b, a = (sum(compile_times[label][name] for name in KERNELS) for label in trees)
    print(f"| the four | {b:.2f} s | {a:.2f} s | {a / b:.3f} |")
    for label in trees:
        print(f"\n{label}: kernels compiled by a second process on the filled cache: "
              f"{sorted(cached[label]) or 'none (all loaded)'}")


if __name__ == "__main__":
    main()
