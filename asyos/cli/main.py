"""The ``asyos`` console script: one entry, subcommands with consistent flags.

Every subcommand takes ``--config FILE`` (TOML whose keys are its flags; the command
line overrides it) and ``-v/--verbose`` (logging to stderr); bad flags exit with status
2 and argparse's message, bad input with status 2 and one line.
"""

import argparse
import sys

from .. import experiments
from .._version import PROTOCOL_VERSION, __version__
from . import cluster, convert, make, results
from . import run as run_command
from .options import add_common, guarded, parse


def build_parser() -> tuple[argparse.ArgumentParser, dict]:
    """The top-level parser and its subparsers by name."""
    parser = argparse.ArgumentParser(prog="asyos", description="Online Substitution "
                                     "feature selection in O(n·s) memory")
    parser.add_argument("--version", action="version", version=f"asyos {__version__} "
                        f"(wire protocol {PROTOCOL_VERSION})")
    commands = parser.add_subparsers(dest="command", required=True)
    subcommands = {
        "run": ("select features: sequential OS, Asy-OS under mpirun, or simulated",
                run_command.add_run_arguments),
        "server": ("Asy-OS server over ZeroMQ (python -m asyos.server)",
                   cluster.add_server_arguments),
        "worker": ("Asy-OS worker over ZeroMQ (python -m asyos.worker)",
                   cluster.add_worker_arguments),
        "keys": ("make CURVE keys for a server bound beyond 127.0.0.1",
                 cluster.add_keys_arguments),
        "convert": ("row-major data to the feature-major .npy or the sparse .csc "
                    "(bounded memory)",
                    convert.add_convert_arguments),
        "make": ("write the synthetic problem with a known answer to files (X.npy "
                 "y.npy, data.csv, train.svm, X.csc)", make.add_make_arguments),
        "experiments": ("the paper's experiments (python -m asyos.experiments)",
                        experiments.add_arguments),
        "plot": ("draw a results JSON: objective vs steps and time, per-worker "
                 "progress, staleness histogram (PNG)", results.add_plot_arguments),
        "inspect": ("print a results JSON as a readable summary table",
                    results.add_inspect_arguments),
    }
    subparsers = {}
    for name, (text, add_arguments) in subcommands.items():
        subparsers[name] = commands.add_parser(name, help=text, description=text)
        add_arguments(subparsers[name])
        add_common(subparsers[name])
    return parser, subparsers


def main(argv=None) -> int:
    parser, subparsers = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    at = next((i for i, token in enumerate(argv) if not token.startswith("-")), None)
    command = argv[at] if at is not None else None
    if command in subparsers:
        args = parse(parser, argv, command, subparsers[command], at + 1)
    else:
        args = parser.parse_args(argv)   # -h, or an unknown command: argparse says so
    if args.command == "experiments":
        return experiments.run(args)
    actions = {
        "run": lambda: run_command.report(run_command.run(args)),
        "server": lambda: cluster.serve(args),
        "worker": lambda: cluster.run_worker(args),
        "keys": lambda: cluster.make_keys(args),
        "convert": lambda: convert.run_convert(args),
        "make": lambda: make.run_make(args),
        "plot": lambda: results.run_plot(args),
        "inspect": lambda: results.run_inspect(args),
    }
    return guarded(actions[args.command])


if __name__ == "__main__":
    sys.exit(main())
