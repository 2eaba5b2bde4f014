"""What a new user waits for: the first run on a fresh install, and the first mpiexec.

numba compiles the kernels a run needs on its first call and caches them on disk
(``__pycache__`` next to the sources, or ``NUMBA_CACHE_DIR``), so the first run on a
machine waits for the compiler and later runs load the cache.  This script runs, each
in a fresh process with an empty cache directory of its own:

* the README's first command, ``python -m asyos.run`` (the embedded synthetic problem,
  default settings), cold then warm (the same cache, now filled);
* ``mpiexec -n Q python -m asyos.run`` cold then warm, where each set of kernels is
  compiled by one worker of a node (the local block by one, the budget cut by
  another) and the others load what they cached;
* the README's ZeroMQ recipe (``asyos server`` and two ``asyos worker``, started
  together on the files ``asyos make`` writes), cold then warm;
* a first sparse run (rare words, a ``.csc`` directory) on a cache the README's
  first run filled, then again: what sparse data adds to a machine's first hour;
* with ``--kernels``, the compile time of each kernel the first run compiles (numba's
  compile events), to see where the wait goes.

    python benchmarks/first_run.py [--mpi 3] [--no-zeromq] [--no-sparse] [--kernels]

Seconds are wall clock of the whole process (imports, compile, run, report).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMPILE_TIMER = r"""
import collections, time
from numba.core import event

spent, stack = collections.defaultdict(float), []   # s compiling each asyos kernel

class Timer(event.Listener):
    def on_start(self, ev):
        stack.append(time.perf_counter())

    def on_end(self, ev):
        took = time.perf_counter() - stack.pop()
        dispatcher = ev.data.get("dispatcher")
        name = getattr(getattr(dispatcher, "py_func", None), "__qualname__", "?")
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "")
        if module.startswith("asyos"):   # inclusive of what it calls
            spent[f"{module}.{name}"] += took

event.register("numba:compile", Timer())
"""   # a script's prelude: numba's compile events, timed per kernel

KERNELS = COMPILE_TIMER + r"""
from asyos.cli.run import main
main(["--quiet"])
for name, took in sorted(spent.items(), key=lambda kv: -kv[1]):
    print(f"{took:7.2f} s  {name}")
"""


def timed(command, cache: str) -> tuple[float, int]:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    env = {k: v for k, v in env.items() if not k.startswith(("PMI_", "PMIX_"))}
    start = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - start, proc.stderr.count("compiling kernels")


def sparse_after_dense(python: list) -> None:
    """A rare-words problem as a ``.csc`` directory, run on a cache the README's run
    filled (it compiles the sparse kernels only), then warm."""
    from asyos.datasets import make_rare_words
    from asyos.streams import save_csc

    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as data:
        text = make_rare_words(p=20_000, n=2_000, seed=0)
        save_csc(os.path.join(data, "X.csc"), text.X, text.y)
        timed(python, cache)   # the README's first run fills the cache
        command = [*python, "--data", os.path.join(data, "X.csc"), "-s", "10"]
        cold, said = timed(command, cache)
        warm, _ = timed(command, cache)
    print(f"{'sparse run after the README run':38s} first run {cold:6.1f} s "
          f"(announced {said}x), then {warm:5.1f} s")


ZMQ_TOML = """sparsity = 64
[server]
labels = "y.npy"
workers = 2
out = "zmq-results.json"     # an existing results file is kept (--force replaces it)
[worker]
data = "X.npy"
"""   # the README's ZeroMQ recipe, verbatim


def zeromq_recipe(asyos: list) -> None:
    """The README's ZeroMQ recipe: ``asyos server`` and two ``asyos worker`` started
    together on the files ``asyos make`` writes, cold then warm."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as work:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        subprocess.run([*asyos, "make", "X.npy", "y.npy"], cwd=work, env=env,
                       check=True, capture_output=True)
        with open(os.path.join(work, "zmq.toml"), "w") as toml:
            toml.write(ZMQ_TOML)
        seconds, said = [], 0
        for _ in range(2):
            for old in Path(work).glob("zmq-results*"):   # the warm run writes anew
                old.unlink()
            start = time.perf_counter()
            procs = [subprocess.Popen([*asyos, *role, "--config", "zmq.toml"], cwd=work,
                                      env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True)
                     for role in (["server"], ["worker", "--shard", "0/2"],
                                  ["worker", "--shard", "1/2"])]
            for proc in procs:
                _, err = proc.communicate(timeout=1800)
                if proc.returncode != 0:
                    sys.exit(f"{' '.join(proc.args)} failed:\n{err[-2000:]}")
                said += err.count("compiling kernels") if not seconds else 0
            seconds.append(time.perf_counter() - start)
    name = "ZeroMQ: asyos server + 2 asyos worker"
    print(f"{name:38s} first run {seconds[0]:6.1f} s (announced {said}x), "
          f"then {seconds[1]:5.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpi", type=int, default=3, metavar="Q",
                        help="ranks of the mpiexec case (0: skip it)")
    parser.add_argument("--no-zeromq", action="store_true",
                        help="skip the README's ZeroMQ recipe")
    parser.add_argument("--no-sparse", action="store_true",
                        help="skip the first sparse run")
    parser.add_argument("--kernels", action="store_true",
                        help="also list the compile time of each kernel")
    args = parser.parse_args()
    python = [sys.executable, "-m", "asyos.run", "--quiet"]
    cases = [("python -m asyos.run", python)]
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or \
        shutil.which("mpiexec")
    if args.mpi and mpiexec:
        cases.append((f"mpiexec -n {args.mpi} python -m asyos.run",
                      [mpiexec, "-n", str(args.mpi), *python]))
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    for name, command in cases:
        with tempfile.TemporaryDirectory() as cache:
            cold, said = timed(command, cache)
            warm, _ = timed(command, cache)
        print(f"{name:38s} first run {cold:6.1f} s (announced {said}x), "
              f"then {warm:5.1f} s")
    if not args.no_zeromq:
        zeromq_recipe([sys.executable, "-m", "asyos"])
    if not args.no_sparse:
        sparse_after_dense(python)
    if args.kernels:
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "NUMBA_CACHE_DIR": cache}
            proc = subprocess.run([sys.executable, "-c", KERNELS], env=env,
                                  capture_output=True, text=True, timeout=1800)
        print("compile time per kernel (inclusive of the kernels it calls):")
        for line in proc.stdout.splitlines():
            if " s  asyos." in line:   # the kernels' lines, not the run's report
                print(line)


if __name__ == "__main__":
    main()
