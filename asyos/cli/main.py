"""The ``asyos`` console script: one entry, subcommands with consistent flags."""

import argparse
import sys

from . import run as run_command


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="asyos", description="Online Substitution "
                                     "feature selection in O(n·s) memory")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="select features (sequential OS)")
    run_command.add_run_arguments(run_parser)
    args = parser.parse_args(argv)
    if args.command == "run":
        return run_command.guarded(lambda: run_command.report(run_command.run(args)))
    return 2


if __name__ == "__main__":
    sys.exit(main())
