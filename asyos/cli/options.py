"""Flags every command shares (``--config``, ``-v/--verbose``, the Asy-OS protocol's
flags, ``--blas-threads``) and the parse that applies them: TOML settings first, the
command line over them, then logging."""

import argparse
import logging
import os
import sys
import warnings
from contextlib import contextmanager

from .. import _signals
from ..core.kept_set import ASY_FITTED_EPOCHS, FITTED_EPOCHS, PAPER_EPOCHS, RULES
from ..core.losses import Loss
from ..core.validate import check_at_least
from ..errors import InputError, PartialRun, Terminated
from ..io.config import config_arguments
from ..io.writable import out_of_space
from ..solvers.asy import BUDGETS, PIPELINE, STALENESS_PER_PEER
from ..transport.base import NodeShare, WorkerFailed

log = logging.getLogger("asyos")

LOSS_NAMES = [loss.name.lower() for loss in Loss]


def auto_or_int(text: str):
    """A whole number or 'auto' (argparse reports the error as its usage error)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'auto', got "
                                         f"{text!r}") from None


def refuse_auto_sparsity(sparsity) -> None:
    """Asy-OS (MPI, --simulate, ``asyos server``) takes a number for -s."""
    if sparsity == "auto":
        raise InputError("-s auto runs sequential OS along a path; give a number for "
                         "Asy-OS")


def staleness_value(text: str):
    """--staleness: a whole number, 'auto' or 'none' (no bound)."""
    return None if text.lower() == "none" else auto_or_int(text)


def add_algorithm_arguments(group) -> None:
    """The flags of OS itself, the same for ``asyos run`` and ``asyos server``."""
    group.add_argument("--epochs", type=auto_or_int, default="auto",
                       help="passes over the features ('auto' (default): at most "
                       f"{FITTED_EPOCHS} under the fitted rule, which stops after a pass "
                       "without a swap or growth, or one that lowers the loss by under "
                       "1e-6 of it "
                       f"({ASY_FITTED_EPOCHS} for Asy-OS); {PAPER_EPOCHS} "
                       "under the paper's rule)")
    group.add_argument("--rule", choices=RULES, default="auto",
                       help="substitution rule: fitted (the newcomer's fitted weight "
                       "against the kept feature whose removal costs least), magnitude "
                       "(the paper's: one gradient step, drop the smallest |w|), auto "
                       "(default): fitted, on dense and sparse data")
    group.add_argument("--ridge", type=float, default=None,
                       help="the fitted rule's ridge λ, relative to the largest "
                       "curvature of a column (default: 10/n for classification, "
                       "1e-10 for the squared loss); tune it like abess's alpha")
    group.add_argument("--sweep", type=auto_or_int, default="auto",
                       help="arrivals of the closing sweep that ends the last pass: "
                       "every feature scored against the final residual, the best "
                       "ones not kept offered once more ('auto' (default): s/8, at "
                       "least 8, under the fitted rule when more than one pass runs, "
                       "else none; 0: none)")


def add_protocol_arguments(group) -> None:
    """The Asy-OS protocol's flags, the same for ``asyos run`` under MPI and for
    ``asyos server``: the staleness bound, the pipeline and the budget rule."""
    group.add_argument("--staleness", default="auto", type=staleness_value,
                       metavar="TAU", help="bound τ on the other workers' steps "
                       "between the view a step reads and its push, enforced by the "
                       f"server ('auto' (default): {STALENESS_PER_PEER} pipelines per "
                       "other worker; 'none': no bound)")
    group.add_argument("--window", default="auto", type=auto_or_int,
                       help="pushes a worker may have in flight while it keeps "
                       f"stepping ('auto': {PIPELINE['window']}, less on small "
                       "problems or a small τ)")
    group.add_argument("--batch", default="auto", type=auto_or_int,
                       help=f"OS steps summed into one push ('auto': "
                       f"{PIPELINE['batch']}, more on large p or where the workers' "
                       "timed step is cheap, less on small problems or a small τ)")
    group.add_argument("--budget", choices=BUDGETS, default="auto",
                       help="adaptive: the server re-grants budgets from a global |w| "
                       "threshold; fixed: s/q features per worker (the paper); auto "
                       "(default): adaptive, fixed with --groups or one worker")
    group.add_argument("--record-order", action="store_true",
                       help="keep the (worker, feature) order of every push in the "
                       "results")


def blas_threads(value: int | None) -> int | None:
    """--blas-threads, checked (None: the transport's default share of the node)."""
    return None if value is None else check_at_least("blas-threads", value, 1,
                                                     integer=True)


def apply_blas_threads(value: int | None) -> None:
    """--blas-threads for a process that runs alone (sequential OS, a ZeroMQ worker);
    None means 1: the OS kernels run on one core, and a BLAS pool spread over every
    core collapsed on a busy machine (docs/benchmarks.md)."""
    NodeShare.of(1, blas_threads(value) or 1).apply()



def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="TOML file of settings whose "
                        "keys are this command's flags (sparsity = 64, epochs = 3); "
                        "flags on the command line override it")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="log what happens to stderr (logging level INFO)")


def _config_path(argv: list[str]) -> str | None:
    """The value of the last ``--config`` in ``argv``, read before parsing so that the
    file can supply flags argparse requires."""
    path = None
    for i, token in enumerate(argv):
        if token == "--":
            break
        if token == "--config" and i + 1 < len(argv):
            path = argv[i + 1]
        elif token.startswith("--config="):
            path = token.split("=", 1)[1]
    return path


def parse(parser: argparse.ArgumentParser, argv, command: str,
          subparser: argparse.ArgumentParser | None = None,
          at: int = 0) -> argparse.Namespace:
    """Parse ``argv`` with the settings of its ``--config`` file inserted at position
    ``at`` (just after the subcommand's name); ``subparser`` owns the flags."""
    argv = list(sys.argv[1:] if argv is None else argv)
    path = _config_path(argv[at:])
    if path is not None:
        owner = subparser or parser
        try:
            settings = config_arguments(owner, path, command)
        except InputError as exc:   # one line and status 2, as guarded() reports
            owner.exit(2, f"{owner.prog}: error: {exc}\n")
        argv = argv[:at] + settings + argv[at:]
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        stream=sys.stderr,
                        format="asyos %(asctime)s %(levelname)s %(message)s")
    if path is not None:
        log.info("settings from %s", path)
    return args


@contextmanager
def one_line_warnings():
    """Warnings formatted by ``one_line_warning`` inside, as before outside
    (``catch_warnings`` does not restore ``formatwarning``)."""
    previous = warnings.formatwarning
    warnings.formatwarning = one_line_warning
    try:
        yield
    finally:
        warnings.formatwarning = previous


def one_line_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as the CLI shows it: what and why, not the line that said it."""
    return f"asyos: warning: {message}\n"


def guarded(action) -> int:
    """Run ``action``; bad input → one line on stderr and exit status 2; a run that
    lost shards → one line and status 3; ^C → one line and status 130 (the process
    ends here: ``_signals.leave``).  Warnings show as one line too."""
    try:
        with one_line_warnings():
            action()
    except InputError as exc:
        print(f"asyos: error: {exc}", file=sys.stderr)
        return 2
    except PartialRun as exc:
        print(f"asyos: error: {exc}", file=sys.stderr)
        return 3
    except WorkerFailed as exc:   # a worker process's error, reported by the server
        print(f"asyos: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except MemoryError as exc:   # e.g. a -p far beyond this machine
        print(f"asyos: error: not enough memory for this problem ({exc})",
              file=sys.stderr)
        return 2
    except Terminated:   # SIGTERM, where a command turns it into this
        _signals.taken()
        try:
            print("asyos: terminated", file=sys.stderr, flush=True)
        except (OSError, ValueError):   # stderr closed or gone
            pass
        return _signals.leave(_signals.TERMINATED)
    except KeyboardInterrupt:   # one line, then the end (``_signals.leave``)
        _signals.taken()
        _signals.say_interrupted()
        return _signals.leave(_signals.INTERRUPTED)
    except BrokenPipeError:  # e.g. piped into `head`: stop quietly, like other tools
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        if _signals.interrupting():
            _signals.taken()
            _signals.say_interrupted()
            return _signals.leave(_signals.INTERRUPTED)
        if not out_of_space(exc):
            raise
        # a writer that did not name its file (each one should, io/writable.py)
        where = f"cannot write {exc.filename}: " if exc.filename else ""
        print(f"asyos: error: {where}no space left on device ({exc.strerror})",
              file=sys.stderr)
        return 2
    except Exception:
        if not _signals.interrupting():
            raise
        _signals.taken()   # an error the interrupt caused (``interrupting``)
        _signals.say_interrupted()
        return _signals.leave(_signals.INTERRUPTED)
    return 0


def module_main(argv, prog: str, description: str, add_arguments, command: str,
                action) -> int:
    """A ``python -m asyos.X`` entry point: the subcommand's own flags plus
    ``--config``/``--verbose``, then ``action(args)`` under ``guarded``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_arguments(parser)
    add_common(parser)
    args = parse(parser, argv, command)
    return guarded(lambda: action(args))


class ProgressBar:
    """A tqdm bar on stderr that appears at its first update: the wait before it
    (numba compiling kernels on a first run, announced on its own line) would
    otherwise show as 0 % with an ETA of many minutes.  ``quiet``: no bar at all."""

    def __init__(self, quiet: bool, **options):
        self.quiet, self.options, self._bar = quiet, options, None

    def update(self, k: int) -> None:
        if self.quiet:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(file=sys.stderr, mininterval=0.2, **self.options)
        self._bar.update(k)

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, kind, error, trace) -> None:
        """Close the bar.  A run that ended before its cap of passes (``epochs``
        'auto' stops once a pass changes nothing) ends at 100 % of what it did and
        says that its total was a cap; a run cut short by ^C or an error stays
        where it stopped and says so."""
        bar = self._bar
        if bar is None:
            return
        if kind is not None:
            bar.set_postfix_str("interrupted" if issubclass(kind, KeyboardInterrupt)
                                else "stopped by an error", refresh=False)
        elif bar.total and bar.n < bar.total:
            bar.set_postfix_str(f"done before the cap of {bar.total}", refresh=False)
            bar.total = bar.n
        bar.close()
