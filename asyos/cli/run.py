"""``asyos run`` / ``python -m asyos.run``: select features from data or a synthetic problem.

With no ``--data`` it runs the embedded default: the paper's synthetic regression
protocol (Yang et al., KDD 2016, Section 5: p = 2000, s = 100, n = round(1.2·s·log2 p),
noise sd 0.1) whose true support is known, and prints the recall.  Its design is
generated column by column (``datasets.stream_problem``), so no process ever holds X:
an MPI worker generates only its shard, and the server only the s true columns it
needs to make y.
"""

import argparse
import logging
import signal

from .. import _signals
from ..core.kept_set import resolve_epochs, resolve_rule
from ..core.projection import group_constraint
from ..core.sweep import sweep_rounds, sweep_size
from ..core.validate import check_at_least
from ..errors import InputError, PartialRun, Terminated, raise_terminated
from ..io.results import check_new_out
from ..solvers.asy import AsyConfig
from ..solvers.path import CRITERIA, fit_path
from ..solvers.result import FitResult
from ..solvers.voting import fit_os_voted, most_steps, resolve_orders
from ..transport.base import launched_by_mpi
from .job import finish_job, load_job
from .options import (
    LOSS_NAMES,
    ProgressBar,
    add_algorithm_arguments,
    add_protocol_arguments,
    apply_blas_threads,
    auto_or_int,
    blas_threads,
    module_main,
    refuse_auto_sparsity,
)
from .report import report

log = logging.getLogger("asyos.run")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("data (default: the paper's synthetic problem)")
    data.add_argument("--data", help="features: (n, p) .npy (C or feature-major "
                      "Fortran), .csv/.txt/.tsv, .svm/.svmlight/.libsvm, .csc, or an "
                      "HDF5 dataset file.h5[:NAME] (default NAME X)")
    data.add_argument("--labels", help="labels: .npy, one-column text, svmlight, or "
                      "file.h5[:NAME] (default y); svmlight and HDF5 data with a y "
                      "dataset carry their own")
    data.add_argument("--label-column", type=int, metavar="K", help="the labels are "
                      "column K (0-based, -1 = last) of the csv/tsv/txt --data")
    data.add_argument("--synthetic", choices=["regression", "classification"],
                      help="generate the paper's problem (default when no --data)")
    data.add_argument("--degree", type=int, default=1, choices=[1, 2, 3],
                      help="select among all products of up to DEGREE columns of --data, "
                      "generated on the fly (2: d + d(d+1)/2 features)")
    data.add_argument("--features", "-p", type=int, default=2000,
                      help="p of the synthetic problem (default 2000)")
    data.add_argument("--samples", "-n", type=int, default=None,
                      help="n of the synthetic problem (default: the paper's "
                      "round(1.2·s·log2 p))")
    algo = parser.add_argument_group("algorithm")
    algo.add_argument("-s", "--sparsity", type=auto_or_int, help="feature budget s "
                      "(default 100 for the synthetic problem; required with --data), "
                      "or 'auto': sequential OS along a path of sizes, warm-started, "
                      "and the size --criterion picks")
    algo.add_argument("--criterion", choices=CRITERIA, help="with -s auto: the "
                      "information criterion that picks the size (sic (default): "
                      "abess's special IC; ebic: the extended BIC)")
    algo.add_argument("--max-features", type=int, metavar="K", help="with -s auto: "
                      "the largest size on the path (default n / (log log n · log p), "
                      "at most p; the path has at most 20 sizes from 1 to K)")
    algo.add_argument("--loss", default=None, help=f"one of {', '.join(LOSS_NAMES)} "
                      "(default squared; squared_hinge for synthetic classification)")
    algo.add_argument("--eta", default="auto", help="step size, or 'auto' (default)")
    algo.add_argument("--m", default="auto", help="block factor ≥ 1, or 'auto'")
    add_algorithm_arguments(algo)
    algo.add_argument("--standardize", action="store_true",
                      help="centre and scale each feature as it arrives")
    algo.add_argument("--shuffle", action="store_true",
                      help="seeded random feature order in each epoch")
    algo.add_argument("--orders", type=auto_or_int, default="auto",
                      help="sequential OS in this many feature orders, 3 passes each, "
                      "the s features kept most often chosen by a vote and refit "
                      "('auto' (default): up to 8 for a classification loss, "
                      "stopping after two where the second keeps 85%% of the first's "
                      "features, 1 otherwise; 1: one run)")
    algo.add_argument("--seed", type=int, default=0, help="seed of data and order")
    algo.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                      help="storage and compute type of the feature columns (float32: "
                      "half the memory; sums still in float64)")
    algo.add_argument("--groups", metavar="FILE", help="group-aware OS: one group label "
                      "per feature (.npy, or text with one label per line)")
    algo.add_argument("--group-sparsity", type=int, metavar="S2", help="keep at most S2 "
                      "groups (with --groups; Asy-OS: shards are whole groups)")
    asy = parser.add_argument_group("Asy-OS (--workers Q on this machine, or under "
                                    "mpirun -n q+1)")
    asy.add_argument("--workers", type=int, metavar="Q", help="run Asy-OS with Q "
                     "worker processes on this machine, sharing u_C in memory (no "
                     "server process, no mpiexec)")
    add_protocol_arguments(asy)
    asy.add_argument("--blas-threads", type=int, metavar="K", help="BLAS threads per "
                     "process (default 1; under mpirun, the node's cores shared "
                     "among its ranks)")
    asy.add_argument("--ranks-per-node", type=int, metavar="K", help="under mpirun: "
                     "the ranks that share u_C with the server's rank through an MPI-3 "
                     "shared window instead of messages are those on its machine "
                     "(default), or among its group of K consecutive ranks (1: every "
                     "vector in messages)")
    asy.add_argument("--leaders", action="store_true", help="under mpirun: the lowest "
                     "rank of every other node (of 2 or more ranks) relays its node's "
                     "workers, their pushes summed and u_C sent once per node, so the "
                     "server's messages grow with nodes, not workers")
    asy.add_argument("--heartbeat-timeout", type=float, metavar="SECONDS",
                     help="under mpirun: a rank silent this long with its work "
                     "unfinished (a cut link, a stalled host) ends the job with "
                     "status 3 (default 10)")
    sim = parser.add_argument_group("Asy-OS simulated in one process (no MPI)")
    sim.add_argument("--simulate", type=int, metavar="Q", help="run Q virtual workers "
                     "over the server state machine, with simulated staleness")
    sim.add_argument("--delay", type=int, metavar="TAU", help="each step reads u_C as "
                     "it was TAU updates ago (default: Q, the paper's setting)")
    sim.add_argument("--random-delay", action="store_true",
                     help="draw each step's delay uniformly from 0..TAU (seeded)")
    out = parser.add_argument_group("output")
    out.add_argument("--out", help="write results JSON here")
    out.add_argument("--force", action="store_true",
                     help="replace the results already at --out")
    out.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def check_path_flags(args) -> None:
    """The flags of the path over s (-s auto) go together, and with sequential OS."""
    if args.sparsity != "auto":
        for flag in ("criterion", "max_features"):
            if getattr(args, flag) is not None:
                raise InputError(f"--{flag.replace('_', '-')} goes with -s auto (a path "
                                 "over model sizes)")
        return
    for flag, default in (("eta", "auto"), ("m", "auto"), ("groups", None),
                          ("group_sparsity", None)):
        if getattr(args, flag) != default:
            raise InputError(f"-s auto runs OS along a path with its default step "
                             f"size and no groups; --{flag.replace('_', '-')} goes with "
                             "a number for -s")


def run_path(args, job) -> FitResult:
    """-s auto: sequential OS along a warm-started path of sizes (``fit_path``); the
    result is the chosen size's fit, with the path in ``context["size_path"]``."""
    p = job.stream.n_features
    largest = args.max_features
    if largest is not None and not 1 <= largest <= p:
        raise InputError(f"--max-features must be between 1 and the number of "
                         f"features p = {p}, got {largest}")
    with ProgressBar(args.quiet, unit="feature", desc="OS path") as bar:
        path = fit_path(job.stream, job.y, loss=job.loss,
                        criterion=args.criterion or "sic",
                        max_features=largest, epochs=args.epochs,
                        rule=args.rule, ridge=args.ridge,
                        standardize=args.standardize, progress=bar.update)
    result = path.best
    result.context["size_path"] = {**path.summary(), "seconds": path.seconds,
                                   "n_steps": sum(f.n_steps for f in path.fits)}
    return finish_job(args, job, result)


def refuse_orders(args, why: str) -> None:
    """--orders N > 1 where one order runs: Asy-OS, -s auto, --groups."""
    if args.orders != "auto":
        check_at_least("orders", args.orders, 1, integer=True)
        if args.orders > 1:
            raise InputError(f"--orders {args.orders} {why}")


def run_sequential(args) -> FitResult:
    job = load_job(args)
    if args.sparsity == "auto":
        refuse_orders(args, "takes a number for -s")
        return run_path(args, job)
    if job.groups is not None:
        refuse_orders(args, "counts features: it does not take --groups")
    orders, agreement = resolve_orders(args.orders, job.loss, job.groups is not None
                                       or not job.stream.reorderable)
    rule = resolve_rule(args.rule)
    total = most_steps(job.stream.n_features, job.s, orders, args.epochs, rule,
                       min(sweep_size(args.sweep, job.s, rule,
                                      resolve_epochs(args.epochs, rule)),
                           job.stream.n_features))
    with ProgressBar(args.quiet, unit="feature", desc="OS" if orders == 1 else
                     f"OS in {'up to ' if agreement else ''}{orders} orders",
                     total=total) as bar:
        result = fit_os_voted(job.stream, job.y, job.s, orders=orders,
                              agreement=agreement, seed=args.seed,
                              loss=job.loss, eta=args.eta, m=args.m,
                              epochs=args.epochs, standardize=args.standardize,
                              progress=bar.update, groups=job.groups,
                              s2=args.group_sparsity, rule=args.rule,
                              ridge=args.ridge, sweep=args.sweep,
                              blas_threads=None)   # run() applied
    return finish_job(args, job, result)


def asy_config(args, job, q: int, n_features: int, s2) -> AsyConfig:
    """The Asy-OS configuration the flags ask for, for q workers on p features: one
    mapping for every real carrier (shared memory, MPI)."""
    return AsyConfig.build(job.s, q, loss=job.loss, epochs=args.epochs, eta=args.eta,
                           m=args.m, staleness=args.staleness, window=args.window,
                           batch=args.batch, n_features=n_features, s2=s2,
                           budget=args.budget, rule=args.rule, ridge=args.ridge,
                           sweep=args.sweep)


def run_mpi(args) -> FitResult | None:
    """Asy-OS under mpirun: rank 0 serves, the other ranks work (transport.mpi)."""
    # mpiexec forwards SIGTERM to every rank: each ends as on ^C, in its own words
    # (after the job's run, while rank 0 writes the results, through ``guarded``)
    signal.signal(signal.SIGTERM, raise_terminated)
    from mpi4py import MPI

    from ..transport import mpi as transport

    if args.standardize:
        raise InputError("--standardize is not supported under MPI yet")
    job = None
    s2 = None

    def open_job(features: bool):
        nonlocal job, s2
        if args.out and MPI.COMM_WORLD.Get_rank() == 0:   # the server writes them
            check_new_out(args.out, args.force)
        job = load_job(args, features=features)
        group_of, s2 = group_constraint(job.groups, args.group_sparsity,
                                        job.stream.n_features) or (None, None)
        return job.stream, job.y, group_of

    def config_factory(q, n_features):
        return asy_config(args, job, q, n_features, s2)

    try:
        # ^C and SIGTERM reach every rank (mpiexec forwards them): each aborts the job
        # at once with 130 or 143, rank 0 saying so (aborting_on_signals)
        with transport.aborting_on_signals(MPI.COMM_WORLD):
            refuse_auto_sparsity(args.sparsity)   # rank 0 alone says so
            check_path_flags(args)
            ranks_per_node = args.ranks_per_node if args.ranks_per_node is None else \
                check_at_least("ranks-per-node", args.ranks_per_node, 1, integer=True)
            timeout = transport.HEARTBEAT_TIMEOUT if args.heartbeat_timeout is None \
                else check_at_least("heartbeat-timeout", args.heartbeat_timeout, 1e-3)
            result = transport.run(MPI.COMM_WORLD, open_job, config_factory,
                                    record_order=args.record_order,
                                    threads=blas_threads(args.blas_threads),
                                    ranks_per_node=ranks_per_node,
                                    leaders=args.leaders, timeout=timeout)
    except KeyboardInterrupt as exc:
        # the same for a signal before the handlers (Terminated: SIGTERM).  Ranks that
        # exit on their own race mpiexec, which kills the slower ones (the job's status
        # is then 9): one MPI_Abort ends the job with 130 (143), rank 0 says so
        _signals.taken()
        code = transport.TERMINATED if isinstance(exc, Terminated) else \
            transport.INTERRUPTED
        rank = MPI.COMM_WORLD.Get_rank()
        transport.abort(MPI.COMM_WORLD, code,
                        transport.SIGNALLED[code] if rank == 0 else None)
    except InputError as exc:
        # Every rank knows; rank 0 alone reports, then aborts the job with status 2
        # (a plain non-zero exit makes mpiexec kill the others and report a signal).
        if MPI.COMM_WORLD.Get_rank() == 0:
            transport.abort(MPI.COMM_WORLD, 2, str(exc))
        transport.release_job_files()   # this rank's node, if rank 0 is on another
        MPI.COMM_WORLD.Barrier()  # wait to be aborted by rank 0
        raise
    return None if result is None else finish_job(args, job, result)


def run_on_this_machine(args, backend: str, q: int) -> FitResult:
    """Asy-OS with Q workers on this machine: ``--workers Q`` (backend "shared") or
    ``--simulate Q`` ("simulated"), through ``transport.backends``."""
    from ..transport.backends import fit_asy, refuse_options

    if args.standardize:
        raise InputError(f"--standardize is not supported with {_spell('backend', backend)}"
                         " yet")
    refuse_options(backend, {name: value for name, value in (
        ("staleness", args.staleness), ("window", args.window), ("batch", args.batch),
        ("delay", args.delay), ("random_delay", args.random_delay or None))
        if value not in ("auto", None)}, _spell)
    q = check_at_least("workers" if backend == "shared" else "simulate", q, 1,
                       integer=True)
    job = load_job(args)
    rule = resolve_rule(args.rule)
    epochs = resolve_epochs(args.epochs, rule, asy=True)
    p = job.stream.n_features   # each worker's passes, then its closing sweep
    swept = q * sweep_rounds(q) * min(sweep_size(args.sweep, job.s, rule, epochs),
                                      p // q)
    with ProgressBar(args.quiet or backend == "simulated", unit="feature",
                     desc=f"Asy-OS, {q} workers", total=p * epochs + swept) as bar:
        fitted = fit_asy(backend, job.stream, job.y, job.s, q, loss=job.loss,
                         epochs=args.epochs, eta=args.eta, m=args.m, rule=args.rule,
                         ridge=args.ridge, budget=args.budget, sweep=args.sweep,
                         groups=job.groups,
                         s2=args.group_sparsity, staleness=args.staleness,
                         window=args.window, batch=args.batch, delay=args.delay,
                         random_delay=args.random_delay, seed=args.seed,
                         record_order=args.record_order, progress=bar.update,
                         allow_partial=True)
    result = finish_job(args, job, fitted)
    lost = result.asy.get("lost_shards")   # the simulator loses no worker
    if lost:
        raise PartialRun(f"workers {', '.join(lost)} died; the results use their last "
                         "pushed state and are marked partial")
    return result


def _spell(name: str, value) -> str:
    """An option or a backend as this command's user types it."""
    if name == "backend":
        return {"shared": "--workers Q", "simulated": "--simulate Q",
                "zeromq": "asyos server"}[value]
    return "--" + name.replace("_", "-")


def run(args) -> FitResult | None:
    if args.workers is not None and (args.simulate is not None or launched_by_mpi()):
        raise InputError("--workers Q starts its own worker processes: give it without "
                         "mpirun and without --simulate")
    if args.budget != "auto" and args.simulate is None and args.workers is None and \
            not launched_by_mpi():
        raise InputError(f"--budget {args.budget} shares s among Asy-OS workers: run "
                         "with --workers Q, under mpiexec, or simulate them with "
                         "--simulate Q")
    if args.simulate is not None or args.delay is not None or args.random_delay:
        if args.simulate is None:
            raise InputError("--delay and --random-delay go with --simulate Q")
        if launched_by_mpi():
            raise InputError("--simulate runs in one process; start it without mpirun")
    if launched_by_mpi():
        refuse_orders(args, "is for a sequential run, not Asy-OS")
        return run_mpi(args)
    if args.ranks_per_node is not None or args.leaders:
        raise InputError(f"{'--leaders' if args.leaders else '--ranks-per-node'} "
                         "groups MPI ranks: run under mpiexec")
    if args.heartbeat_timeout is not None:
        raise InputError("--heartbeat-timeout is MPI's liveness: run under mpiexec "
                         "(ZeroMQ's: asyos server --heartbeat-timeout)")
    if args.simulate is not None or args.workers is not None:   # Asy-OS
        refuse_auto_sparsity(args.sparsity)
        refuse_orders(args, "is for a sequential run, not Asy-OS")
    else:
        for flag in ("staleness", "window", "batch"):
            if getattr(args, flag) != "auto":
                raise InputError(f"--{flag} sets Asy-OS's pipeline: give it with "
                                 "--workers Q, under mpiexec, or to asyos server")
    check_path_flags(args)
    if args.out:
        check_new_out(args.out, args.force)
    apply_blas_threads(args.blas_threads)
    if args.simulate is not None:
        return run_on_this_machine(args, "simulated", args.simulate)
    if args.workers is not None:
        return run_on_this_machine(args, "shared", args.workers)
    return run_sequential(args)


def main(argv=None) -> int:
    return module_main(argv, "python -m asyos.run", __doc__.split("\n\n")[0],
                       add_run_arguments, "run", lambda args: report(run(args)))
