"""``python -m asyos.experiments NAME`` (or ``asyos experiments NAME``): the figures.

Every run writes ``OUT/NAME.csv`` (one row per setting, method and repetition, with the
metrics and seconds) and ``OUT/NAME.png`` (mean ± standard error across repetitions),
and prints a summary table.
"""

import argparse
import re
import sys
import time

from .. import _signals
from ..errors import InputError

EXPERIMENTS = {
    "vs-p": "recall and error vs p, every method, 2 scans (Figs. 1-2, left)",
    "vs-epochs": "recall and error vs scans 1..5, OS and the online baselines (middle)",
    "vs-workers": "simulated Asy-OS, recall and error vs workers q, tau = q (right)",
    "speedup": "real runs (--carrier shared or mpi): error vs time, speedup vs q, "
               "and the virtual-clock model (Fig. 3)",
    "fgm-synthetic": "FGM vs OS vs L1-SVM on the FGM paper's synthetic study "
                     "(accuracy, recovery vs features; exact vs inexact solves)",
    "fgm-poly": "FGM vs OS vs L1-SVM in degree-2 spaces of digits pairs and breast "
                "cancer (accuracy vs features)",
    "sght": "SGHT paper's simulation (Table 3): group/feature selection counts of SGHT, "
            "group-aware OS and the baselines (--quick: half grids, 3 repetitions)",
}


def _method_names(text: str) -> list[str]:
    """Comma-separated legend names; a comma inside parentheses, as in
    'frac(1,2)', belongs to the name."""
    return [m.strip() for m in re.split(r",(?![^(]*\))", text) if m.strip()]


def _at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value
    return parse


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def _cluster(text: str) -> tuple[int, int] | None:
    """'6x2': 6 machines of 2 workers; '0x0': none."""
    match = re.fullmatch(r"(\d+)x(\d+)", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"expected MACHINESxWORKERS such as 6x2, "
                                         f"got {text!r}")
    machines, per_machine = int(match[1]), int(match[2])
    if machines == per_machine == 0:
        return None
    if machines < 1 or per_machine < 1:
        raise argparse.ArgumentTypeError(f"need at least one machine of one worker, "
                                         f"got {text!r}")
    return machines, per_machine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", choices=list(EXPERIMENTS),
                        help="; ".join(f"{k}: {v}" for k, v in EXPERIMENTS.items()))
    parser.add_argument("--quick", action="store_true", help="a few-minute version: "
                        "s = 30 instead of 100, 2-3 values of p up to 3000 "
                        "(regression) or 5000, scans 1-3, 3 repetitions; speedup: "
                        "p = 4096, 2 repetitions")
    parser.add_argument("--reps", type=_at_least(1), default=None, help="repetitions "
                        "per setting (default 30 as in the paper, 3 with --quick; "
                        "speedup: 10, 2 with --quick)")
    parser.add_argument("--out", default="experiment-results",
                        help="output directory (default ./experiment-results)")
    parser.add_argument("--seed", type=_at_least(0), default=0,
                        help="base seed; repetition r draws its problem with [seed, r]")
    parser.add_argument("--jobs", type=_at_least(1), default=1,
                        help="repetitions run in a pool of this many processes "
                        "(default 1; speedup always runs one at a time)")
    parser.add_argument("--task", choices=["regression", "classification", "both"],
                        default="both", help="which problem (default both)")
    parser.add_argument("--max-workers", type=_at_least(1), default=None,
                        help="speedup: Asy-OS runs for q = 1..Q workers "
                        "(default min(cpu count, 4))")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="speedup: seconds allowed to each run (default 600)")
    parser.add_argument("--carrier", choices=["shared", "mpi"], default="shared",
                        help="speedup: Asy-OS with --workers q on this machine "
                        "(shared, default) or under mpiexec -n q+1 (mpi)")
    parser.add_argument("--n", type=_at_least(2), default=None,
                        help="speedup: samples (default 1000, the paper's)")
    parser.add_argument("--p", type=_at_least(2), default=None,
                        help="speedup: features (default 8192; 4096 with --quick)")
    parser.add_argument("-s", type=_at_least(1), default=None,
                        help="speedup: features to keep (default 64 in regression, "
                        "32 in classification)")
    parser.add_argument("--epochs", type=_at_least(1), default=None,
                        help="speedup: passes over the features (default 2, the "
                        "paper's)")
    parser.add_argument("--cluster", type=_cluster, default=(),
                        metavar="MxW", help="speedup: the cost model's prediction "
                        "for M machines of W workers (default 6x2, the paper's; "
                        "0x0: none)")
    parser.add_argument("--latency", type=_positive, default=None, metavar="US",
                        help="speedup: one-way latency between machines in the "
                        "prediction, µs (default 50)")
    parser.add_argument("--bandwidth", type=_positive, default=None, metavar="GBITS",
                        help="speedup: the server's link in the prediction, Gb/s "
                        "(default 10)")
    parser.add_argument("--methods", type=_method_names, default=None,
                        help="vs-p, vs-epochs, sght: only these methods, "
                        "comma-separated legend names (e.g. 'OS,Proj-GD,LASSO' or "
                        "'SGHT,DC,frac(1,2)'; default: all)")
    parser.add_argument("--select", type=lambda text: [m.strip() for m in
                        text.split(",") if m.strip()], default=["cv"],
                        help="sght: model-selection rules, comma-separated, from "
                        "cv (least CV error), 1se (one-standard-error rule), ebic "
                        "(extended BIC of the refit), gebic (its bi-level form; "
                        "default: cv)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar")


def run(args) -> int:
    """Run the experiment named by ``args``; bad input → message and status 2."""
    from . import fgm, sght, speedup, sweeps

    tasks = sweeps.TASKS if args.task == "both" else (args.task,)
    common = dict(tasks=tasks, reps=args.reps, seed=args.seed, jobs=args.jobs,
                  quick=args.quick, progress=not args.no_progress)
    start = time.perf_counter()
    try:
        given = [flag for flag, value in (("--n", args.n), ("--p", args.p),
                                          ("-s", args.s), ("--epochs", args.epochs),
                                          ("--latency", args.latency),
                                          ("--bandwidth", args.bandwidth))
                 if value is not None] + (["--cluster"] if args.cluster != () else [])
        if given and args.name != "speedup":
            raise InputError(f"{', '.join(given)}: for speedup only")
        if args.name == "sght":
            result = sght.sght_table(args.out, reps=args.reps, seed=args.seed,
                                     jobs=args.jobs, quick=args.quick,
                                     progress=not args.no_progress,
                                     methods_only=args.methods,
                                     selections=args.select)
        elif args.name == "speedup":
            if args.jobs > 1:
                print("asyos experiments: speedup times its runs, so it runs them one "
                      "at a time (--jobs ignored)", file=sys.stderr)
            sizes = {k: v for k, v in dict(n=args.n, p=args.p, s=args.s,
                                           epochs=args.epochs).items()
                     if v is not None}
            if args.cluster != ():   # given (None: no prediction)
                sizes["cluster"] = args.cluster
            if args.latency is not None:
                sizes["latency"] = 1e-6 * args.latency
            if args.bandwidth is not None:
                sizes["bandwidth"] = 1e9 / 8 * args.bandwidth
            result = speedup.speedup(args.out, max_workers=args.max_workers,
                                     timeout=args.timeout, carrier=args.carrier,
                                     **sizes, **common)
        elif args.name in ("fgm-synthetic", "fgm-poly"):
            function = fgm.fgm_synthetic if args.name == "fgm-synthetic" else \
                fgm.fgm_poly
            result = function(args.out, reps=args.reps, seed=args.seed,
                              jobs=args.jobs, quick=args.quick,
                              progress=not args.no_progress)
        else:
            function = {"vs-p": sweeps.vs_p, "vs-epochs": sweeps.vs_epochs,
                        "vs-workers": sweeps.vs_workers}[args.name]
            if args.methods is not None:
                if args.name == "vs-workers":
                    raise InputError("--methods is for vs-p and vs-epochs")
                common["methods"] = args.methods
            result = function(args.out, **common)
    except InputError as exc:
        print(f"asyos experiments: error: {exc}", file=sys.stderr)
        return 2
    except speedup.RunFailed as exc:
        print(f"asyos experiments: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        _signals.taken()
        print("asyos experiments: interrupted", file=sys.stderr)
        return _signals.leave(_signals.INTERRUPTED)
    print(result.table)
    print(f"{args.name}: {len(result.rows)} rows in "
          f"{time.perf_counter() - start:.1f} s; wrote "
          + ", ".join(str(f) for f in result.files))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asyos.experiments",
                                     description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
