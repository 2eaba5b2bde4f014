"""``asyos run`` / ``python -m asyos.run``: select features from data or a synthetic problem.

With no ``--data`` it runs the embedded default: the paper's synthetic regression
protocol (spec §5.1: p = 2000, s = 100, n = round(1.2·s·log2 p), noise sd 0.1) whose true
support is known, and prints the recall.  Its design is generated column by column
(``datasets.stream_problem``), so no process ever holds X: an MPI worker generates only
its shard, and the server only the s true columns it needs to make y.
"""

import argparse
import logging
import os
import sys
from dataclasses import dataclass

import numpy as np

from ..core.losses import Loss
from ..core.projection import group_constraint
from ..core.validate import check_at_least, check_labels
from ..datasets import stream_problem
from ..errors import InputError
from ..io.data import load_features, load_groups, load_labels
from ..io.results import write_result
from ..solvers.asy import BUDGETS, PIPELINE, STALENESS_PER_PEER, AsyConfig
from ..solvers.result import FitResult
from ..solvers.sequential import fit_os
from ..streams import FeatureStream, InteractionStream
from ..transport.base import NodeShare
from .options import module_main

LOSS_NAMES = [loss.name.lower() for loss in Loss]
log = logging.getLogger("asyos.run")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("data (default: the paper's synthetic problem)")
    data.add_argument("--data", help="features: (n, p) .npy (C or feature-major "
                      "Fortran order), .csv/.txt/.tsv, .svm/.svmlight/.libsvm, or an "
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
    algo.add_argument("-s", "--sparsity", type=int, help="feature budget s "
                      "(default 100 for the synthetic problem; required with --data)")
    algo.add_argument("--loss", default=None, help=f"one of {', '.join(LOSS_NAMES)} "
                      "(default squared; squared_hinge for synthetic classification)")
    algo.add_argument("--epochs", type=int, default=2, help="passes over the features")
    algo.add_argument("--eta", default="auto", help="step size, or 'auto' (default)")
    algo.add_argument("--m", default="auto", help="block factor ≥ 1, or 'auto'")
    algo.add_argument("--standardize", action="store_true",
                      help="centre and scale each feature as it arrives")
    algo.add_argument("--shuffle", action="store_true",
                      help="seeded random feature order in each epoch")
    algo.add_argument("--seed", type=int, default=0, help="seed of data and order")
    algo.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                      help="storage and compute type of the feature columns (float32: "
                      "half the memory; sums still in float64)")
    algo.add_argument("--groups", metavar="FILE", help="group-aware OS: one group label "
                      "per feature (.npy, or text with one label per line)")
    algo.add_argument("--group-sparsity", type=int, metavar="S2", help="keep at most S2 "
                      "groups (with --groups; Asy-OS: shards are whole groups)")
    asy = parser.add_argument_group("Asy-OS (under mpirun -n q+1)")
    asy.add_argument("--staleness", default="auto", type=staleness_value, metavar="TAU",
                     help="bound τ on the other workers' steps between the view a step "
                     "reads and its push, enforced by the server ('auto' (default): "
                     f"{STALENESS_PER_PEER} pipelines per other worker; 'none': no "
                     "bound)")
    asy.add_argument("--window", default="auto", type=auto_or_int,
                     help="pushes a worker may have in flight while it keeps stepping "
                     f"('auto': {PIPELINE['window']}, less on small problems or a "
                     "small τ)")
    asy.add_argument("--batch", default="auto", type=auto_or_int,
                     help=f"OS steps summed into one push ('auto': {PIPELINE['batch']}, "
                     "less on small problems or a small τ)")
    asy.add_argument("--record-order", action="store_true",
                     help="keep the (worker, feature) order of every push in the results")
    asy.add_argument("--budget", choices=BUDGETS, default="auto",
                     help="adaptive: the server re-grants budgets from a global |w| "
                     "threshold; fixed: s/q features per worker (the paper); auto "
                     "(default): adaptive, fixed with --groups (also with --simulate)")
    asy.add_argument("--blas-threads", type=int, metavar="K", help="BLAS threads per "
                     "process (default: all cores; under mpirun, the node's cores "
                     "shared among its ranks)")
    sim = parser.add_argument_group("Asy-OS simulated in one process (no MPI)")
    sim.add_argument("--simulate", type=int, metavar="Q", help="run Q virtual workers "
                     "over the server state machine, with simulated staleness")
    sim.add_argument("--delay", type=int, metavar="TAU", help="each step reads u_C as "
                     "it was TAU updates ago (default: Q, the paper's setting)")
    sim.add_argument("--random-delay", action="store_true",
                     help="draw each step's delay uniformly from 0..TAU (seeded)")
    out = parser.add_argument_group("output")
    out.add_argument("--out", help="write results JSON here")
    out.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


@dataclass
class Job:
    """What a run works on, loaded from the arguments (the same on every rank)."""

    stream: FeatureStream
    y: np.ndarray
    truth: object          # the synthetic Problem, or None for user data
    s: int
    loss: Loss
    source: str
    groups: np.ndarray | None = None   # one label per feature (--groups)


def load_job(args) -> Job:
    """Open the data (or generate the synthetic problem) and validate the labels."""
    if args.data is None:
        if args.degree != 1:
            raise InputError("--degree expands the columns of --data; give --data")
        kind = args.synthetic or "regression"
        s = 100 if args.sparsity is None else args.sparsity
        problem = stream_problem(kind, p=args.features, s=s, n=args.samples,
                                 seed=args.seed, shuffle=args.shuffle, dtype=args.dtype)
        stream = problem.stream
        default_loss = "squared" if kind == "regression" else "squared_hinge"
        y, truth, source = problem.y, problem, f"synthetic {kind}"
    else:
        if args.synthetic:
            raise InputError("give either --data or --synthetic, not both")
        if args.sparsity is None:
            raise InputError("-s/--sparsity is required with --data")
        stream, y = load_features(args.data, degree=args.degree, shuffle=args.shuffle,
                                  seed=args.seed, dtype=args.dtype,
                                  label_column=args.label_column)
        if args.labels is not None:
            y = load_labels(args.labels)
        if y is None:
            raise InputError(f"{args.data}: no labels; give --labels")
        s, default_loss, truth, source = args.sparsity, "squared", None, str(args.data)
    loss = Loss.parse(args.loss or default_loss)
    log.info("%s: n = %d, p = %d, s = %d, loss = %s", source, stream.n_samples,
             stream.n_features, s, loss.name.lower())
    groups = None if args.groups is None else load_groups(args.groups)
    return Job(stream, check_labels(y, loss, stream.n_samples), truth, s, loss, source,
               groups)


def auto_or_int(text: str):
    return text if text == "auto" else int(text)


def staleness_value(text: str):
    """--staleness: a whole number, 'auto' or 'none' (no bound)."""
    return None if text.lower() == "none" else auto_or_int(text)


def finish(args, result: FitResult, *, source: str, n_samples: int, n_features: int,
           s: int, loss: Loss, truth=None) -> FitResult:
    """Add what every results file carries (data, config, truth), and write it."""
    context = result.context
    context["data"] = {"source": source, "n_samples": n_samples,
                       "n_features": n_features}
    context["config"] = {"s": s, "loss": loss.name.lower(), "epochs": args.epochs,
                         "eta": args.eta, "m": args.m,
                         **{name: getattr(args, name, None) for name in (
                             "standardize", "shuffle", "seed", "staleness", "window",
                             "batch", "simulate", "delay", "random_delay", "budget", "dtype",
                             "degree", "groups", "group_sparsity")}}
    if truth is not None:
        context["truth"] = {"support": truth.support, **truth.evaluate(result.selected)}
    if args.out:
        write_result(args.out, result)
        log.info("wrote %s and its arrays", args.out)
    return result


def _finish(args, job: Job, result: FitResult) -> FitResult:
    if isinstance(job.stream, InteractionStream):   # "x4*x11" says more than 151
        result.context["feature_names"] = job.stream.names(result.selected)
    return finish(args, result, source=job.source, n_samples=job.stream.n_samples,
                  n_features=job.stream.n_features, s=job.s, loss=job.loss,
                  truth=job.truth)


def run_sequential(args) -> FitResult:
    job = load_job(args)
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=job.stream.n_features * args.epochs, unit="feature",
                   desc="OS", file=sys.stderr, mininterval=0.2)
    try:
        result = fit_os(job.stream, job.y, job.s, loss=job.loss, eta=args.eta,
                        m=args.m, epochs=args.epochs, standardize=args.standardize,
                        progress=bar.update if bar else None, groups=job.groups,
                        s2=args.group_sparsity)
    finally:
        if bar is not None:
            bar.close()
    return _finish(args, job, result)


def run_mpi(args) -> FitResult | None:
    """Asy-OS under mpirun: rank 0 serves, the other ranks work (transport.mpi)."""
    from mpi4py import MPI

    from ..transport import mpi as transport

    if args.standardize:
        raise InputError("--standardize is not supported under MPI yet")
    job = None
    s2 = None

    def open_job():
        nonlocal job, s2
        job = load_job(args)
        group_of, s2 = group_constraint(job.groups, args.group_sparsity,
                                        job.stream.n_features) or (None, None)
        return job.stream, job.y, group_of

    def config_factory(q, n_features):
        return AsyConfig.build(job.s, q, loss=job.loss, epochs=args.epochs,
                               eta=args.eta, m=args.m, staleness=args.staleness,
                               window=args.window, batch=args.batch,
                               n_features=n_features, s2=s2, budget=args.budget)

    try:
        result = transport.run(MPI.COMM_WORLD, open_job, config_factory,
                                record_order=args.record_order,
                                threads=blas_threads(args.blas_threads))
    except InputError as exc:
        # Every rank knows; rank 0 alone reports, then aborts the job with status 2
        # (a plain non-zero exit makes mpiexec kill the others and report a signal).
        if MPI.COMM_WORLD.Get_rank() == 0:
            transport.abort(MPI.COMM_WORLD, 2, str(exc))
        MPI.COMM_WORLD.Barrier()  # wait to be aborted by rank 0
        raise
    return None if result is None else _finish(args, job, result)


def blas_threads(value: int | None) -> int | None:
    """--blas-threads, checked (None: the transport's default share of the node)."""
    return None if value is None else check_at_least("blas-threads", value, 1,
                                                     integer=True)


def apply_blas_threads(value: int | None) -> None:
    """--blas-threads for a process that runs alone (sequential OS, a ZeroMQ worker);
    None leaves the BLAS default (every core)."""
    threads = blas_threads(value)
    if threads is not None:
        NodeShare.of(1, threads).apply()


def run_simulated(args) -> FitResult:
    """Asy-OS with --simulate Q virtual workers in this process (solvers.simulator)."""
    from ..solvers.simulator import fit_simulated

    if args.standardize:
        raise InputError("--standardize is not supported with --simulate yet")
    for name in ("staleness", "window", "batch"):
        if getattr(args, name) != "auto":
            raise InputError(f"--{name} is for real runs; --simulate sets the staleness "
                             "with --delay")
    job = load_job(args)
    result = fit_simulated(job.stream, job.y, job.s, args.simulate, delay=args.delay,
                            random_delay=args.random_delay, budget=args.budget,
                            loss=job.loss,
                            epochs=args.epochs, eta=args.eta, m=args.m, seed=args.seed,
                            record_order=args.record_order, groups=job.groups,
                            s2=args.group_sparsity)
    return _finish(args, job, result)


def under_mpi() -> bool:
    """True when started by mpiexec/mpirun with more than one process."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE"):
        value = os.environ.get(name)
        if value and value.isdigit() and int(value) > 1:
            return True
    return False


def run(args) -> FitResult | None:
    if args.budget != "auto" and args.simulate is None and not under_mpi():
        raise InputError(f"--budget {args.budget} shares s among Asy-OS workers: run "
                         "under mpiexec, or simulate them with --simulate Q")
    if args.simulate is not None or args.delay is not None or args.random_delay:
        if args.simulate is None:
            raise InputError("--delay and --random-delay go with --simulate Q")
        if under_mpi():
            raise InputError("--simulate runs in one process; start it without mpirun")
    if under_mpi():
        return run_mpi(args)
    apply_blas_threads(args.blas_threads)
    if args.simulate is not None:
        return run_simulated(args)
    return run_sequential(args)


def report(result: FitResult | None, out=None) -> None:
    """Human-readable summary on stdout (nothing on MPI worker ranks)."""
    if result is None:
        return
    out = sys.stdout if out is None else out
    config, data = result.config, result.data
    print(f"OS on {data['source']}: n = {data['n_samples']}, "
          f"p = {data['n_features']}, s = {config['s']}, "
          f"loss = {config['loss']}, epochs = {config['epochs']}", file=out)
    print("objective per epoch: "
          + ", ".join(f"{v:.6g}" for v in result.objective_per_epoch)
          + f" (final {result.objective:.6g})", file=out)
    if result.asy is not None:
        asy = result.asy
        stale = asy["staleness"]
        simulated = asy.get("transport") == "simulator"
        limit = f"delay {config.get('delay') or asy['n_workers']}" + \
            (", random" if config.get("random_delay") else "") if simulated \
            else f"bound {stale.get('bound')}"
        budgets = asy["budgets"] if asy.get("budget") != "adaptive" else \
            f"adaptive (kept at the end {[w['kept'] for w in asy['workers']]})"
        if "group_budgets" in asy:
            budgets = f"{budgets}, group budgets {asy['group_budgets']} " \
                f"({asy['groups_kept']} groups kept)"
        print(f"Asy-OS{' (simulated)' if simulated else ''}: {asy['n_workers']} workers, "
              f"budgets {budgets}; staleness max {stale['max']} mean "
              f"{stale['mean']:.2f} ({limit}); |u_C - sum X_S w_S| = "
              f"{asy['u_check_max_abs_diff']:.2e}", file=out)
    print(f"step size eta = {result.eta:.4g}, m = {result.m:.4g}; "
          f"{1e6 * result.seconds / max(result.n_steps, 1):.1f} us per feature step",
          file=out)
    truth = result.context.get("truth")
    if truth:
        extra = {k: v for k, v in truth.items() if k not in ("support", "recall")}
        print(f"recall of the true support: {truth['recall']:.3f}  "
              + "  ".join(f"{k} = {v:.4g}" for k, v in extra.items()), file=out)
    names = result.context.get("feature_names") or [str(j) for j in result.selected]
    print(f"selected {result.selected.size} features: " + " ".join(names), file=out)


def main(argv=None) -> int:
    return module_main(argv, "python -m asyos.run", __doc__.split("\n\n")[0],
                       add_run_arguments, "run", lambda args: report(run(args)))
