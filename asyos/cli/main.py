"""The ``asyos`` console script: one entry, subcommands with consistent flags."""

import argparse
import sys

from .. import experiments
from . import cluster, convert
from . import run as run_command


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="asyos", description="Online Substitution "
                                     "feature selection in O(n·s) memory")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="select features (sequential OS)")
    run_command.add_run_arguments(run_parser)
    cluster.add_server_arguments(commands.add_parser(
        "server", help="Asy-OS server over ZeroMQ (python -m asyos.server)"))
    cluster.add_worker_arguments(commands.add_parser(
        "worker", help="Asy-OS worker over ZeroMQ (python -m asyos.worker)"))
    keys = commands.add_parser("keys", help="make CURVE keys for a server bound "
                               "beyond 127.0.0.1")
    keys.add_argument("directory", help="where to write the keys")
    convert.add_convert_arguments(commands.add_parser(
        "convert", help="row-major data to the feature-major .npy (bounded memory)"))
    experiments.add_arguments(commands.add_parser(
        "experiments", help="the paper's experiments (python -m asyos.experiments)"))
    args = parser.parse_args(argv)
    if args.command == "convert":
        return run_command.guarded(lambda: convert.run_convert(args))
    if args.command == "experiments":
        return experiments.run(args)
    if args.command == "run":
        return run_command.guarded(lambda: run_command.report(run_command.run(args)))
    if args.command == "server":
        return run_command.guarded(lambda: cluster.serve(args))
    if args.command == "worker":
        return run_command.guarded(lambda: cluster.run_worker(args))
    return run_command.guarded(lambda: cluster.make_keys(args))


if __name__ == "__main__":
    sys.exit(main())
