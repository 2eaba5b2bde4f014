"""^C at random moments of a ``python -m asyos.run --workers 3`` run's first 5 s.

Each try starts the run (tests/interrupts.py: p = 40000, s = 200, 60 passes, so no
run ends before its signal), sends SIGINT to its process group as ^C does, at a
seeded moment drawn uniformly from the first 5 s, or as soon as its first worker
exists (the second is being forked), and counts it as held when the run ended
within 5 s with exit status 130 and the one line "asyos: interrupted" on stderr,
leaving no process and nothing in /dev/shm.  Contexts: ``normal`` (as from a
terminal) and ``ignored`` (SIGINT inherited ignored, as a job started with
``cmd &`` by a non-interactive script).  The phase is where the signal landed:
start-up (no worker forked yet: imports, reading, compiling, warming up), forking,
running.  docs/benchmarks.md, "^C at any moment of a --workers run".

    python benchmarks/interrupts.py [--tries 50] [--at-fork 20]
                                    [--contexts normal ignored] [--root DIR]

``--root`` runs the asyos found there (a checkout of another commit) with this
interpreter.  A full run first fills the kernel cache, so no try compiles.
"""

import argparse
import collections
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from interrupts import interrupt  # noqa: E402


def _why(outcome) -> str:
    if outcome.status is None:
        return "still running"
    if outcome.left:
        return f"{len(outcome.left)} left"
    if outcome.status != 130:
        return f"status {outcome.status}"
    if outcome.shm:
        return "/dev/shm"
    return "stderr"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=50)
    parser.add_argument("--at-fork", type=int, default=20)
    parser.add_argument("--contexts", nargs="+", default=["normal", "ignored"])
    parser.add_argument("--root", default=str(ROOT))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "asyos.run", "--workers", "3", "-p", "2000",
                    "-s", "20", "--quiet"], cwd=args.root, check=True,
                   capture_output=True)
    rng = random.Random(args.seed)
    rows = []
    start = time.monotonic()
    for context in args.contexts:
        for moments, tries in (("uniform 0-5 s", args.tries),
                               ("first fork", args.at_fork)):
            outcomes = [interrupt(context, rng.uniform(0.0, 5.0),
                                  at_fork=moments == "first fork", root=args.root)
                        for _ in range(tries)]
            phases = collections.Counter(o.phase for o in outcomes)
            failed = collections.Counter(_why(o) for o in outcomes if not o.holds)
            if args.verbose:
                for o in outcomes:
                    if not o.holds:
                        print(f"  {context} {o.moment:.2f} s {o.phase}: {_why(o)} "
                              f"{o.stderr[-300:]!r}", file=sys.stderr)
            rows.append((context, moments, tries, sum(o.holds for o in outcomes),
                         " ".join(f"{k} {v}" for k, v in sorted(phases.items())),
                         ", ".join(f"{k} {v}" for k, v in failed.most_common()),
                         max(o.seconds for o in outcomes if o.status is not None)
                         if any(o.status is not None for o in outcomes) else None))
    print(f"{'context':8} {'moment':14} {'tries':>5} {'held':>5}  {'slowest':>7}  "
          f"{'phases':32} failures")
    for context, moments, tries, held, phases, failed, slowest in rows:
        shown = f"{slowest:6.2f}s" if slowest is not None else "      -"
        print(f"{context:8} {moments:14} {tries:5d} {held:5d}  {shown}  "
              f"{phases:32} {failed or '-'}")
    print(f"({time.monotonic() - start:.0f} s; slowest: of the tries that ended, "
          "seconds from the signal to the end)")


if __name__ == "__main__":
    main()
