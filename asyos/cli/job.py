"""What ``asyos run`` and ``asyos server`` share around a run: opening the data (or
the embedded synthetic problem) and writing the results with their context."""

import logging
from dataclasses import dataclass

import numpy as np

from ..core.losses import Loss
from ..core.validate import binary_labels, check_labels
from ..datasets import stream_problem
from ..errors import InputError, warn_zero_labels
from ..io.data import load_features, load_groups, load_labels
from ..io.describe import FeatureShape, describe_features
from ..io.results import check_finite, write_result
from ..solvers.result import FitResult
from ..streams import FeatureStream, InteractionStream

log = logging.getLogger("asyos.run")


@dataclass
class Job:
    """What a run works on, loaded from the arguments (the same on every rank)."""

    stream: FeatureStream | FeatureShape   # a server's: the shape only
    y: np.ndarray
    truth: object          # the synthetic Problem, or None for user data
    s: int | str           # "auto": a path over sizes (-s auto)
    loss: Loss
    source: str
    groups: np.ndarray | None = None   # one label per feature (--groups)
    classes: list | None = None        # classification: [the −1 label, the +1 one]


def map_labels(y, loss: Loss, n_samples: int) -> tuple[np.ndarray, list | None]:
    """(labels checked for ``loss``, the original classes or None).  A
    classification loss takes any two label values ({0, 1}, {1, 2}, {-1, +1}): the
    smaller becomes −1, the larger +1 (``core.validate.binary_labels``, which is also
    their check), before anything is sent to a worker; the classes go into the
    results' config.  Regression labels are checked here because the server carriers
    (``asyos server``, rank 0 under mpiexec) have no library entry below them that
    would; ``fit_os`` checks again, as every public entry does (O(n))."""
    if not loss.is_classification:
        y = check_labels(y, loss, n_samples)
        if not np.any(y):   # a valid fit, all of whose weights are 0: said, not silent
            warn_zero_labels()
        return y, None
    classes, y = binary_labels(y, n_samples)
    return y, [plain_label(c) for c in classes.tolist()]


def plain_label(value):
    """A label as JSON writes it best: 1.0 → 1, 0.5 stays."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def synthetic_problem(args, s: int):
    """(problem, default loss, source) of ``--synthetic`` (regression when none is
    named) with ``s`` true features: the one generator behind ``run``, ``server`` and
    ``worker``, which must agree on it.  The server has no ``--degree``, ``--shuffle``
    or ``--dtype`` (its labels do not depend on them)."""
    if getattr(args, "degree", 1) != 1:
        raise InputError("--degree expands the columns of --data; give --data")
    kind = args.synthetic or "regression"
    problem = stream_problem(kind, p=args.features, s=s, n=args.samples,
                             seed=args.seed, shuffle=getattr(args, "shuffle", False),
                             dtype=getattr(args, "dtype", "float64"))
    default_loss = "squared" if kind == "regression" else "squared_hinge"
    return problem, default_loss, f"synthetic {kind}"


def load_job(args, features: bool = True) -> Job:
    """Open the data (or generate the synthetic problem) and validate the labels.

    ``features`` False (an Asy-OS server): the data file's shape and labels only
    (``io.describe``); its columns are the workers' to read."""
    if args.data is None:
        s = 100 if args.sparsity is None else args.sparsity
        # -s auto looks for the size of the default problem: 100 true features
        truth, default_loss, source = synthetic_problem(args, 100 if s == "auto" else s)
        stream, y = truth.stream, truth.y
    else:
        if args.synthetic:
            raise InputError("give either --data or --synthetic, not both")
        if args.sparsity is None:
            raise InputError("-s/--sparsity is required with --data")
        if features:
            stream, y = load_features(args.data, degree=args.degree,
                                      shuffle=args.shuffle, seed=args.seed,
                                      dtype=args.dtype, label_column=args.label_column)
        else:
            stream, y = describe_features(args.data, degree=args.degree,
                                          label_column=args.label_column)
        if args.labels is not None:
            y = load_labels(args.labels)
        if y is None:
            raise InputError(f"{args.data}: no labels; give --labels")
        s, default_loss, truth, source = args.sparsity, "squared", None, str(args.data)
    loss = Loss.parse(args.loss or default_loss)
    log.info("%s: n = %d, p = %d, s = %s, loss = %s", source, stream.n_samples,
             stream.n_features, s, loss.name.lower())
    groups = None if args.groups is None else load_groups(args.groups)
    y, classes = map_labels(y, loss, stream.n_samples)
    return Job(stream, y, truth, s, loss, source, groups, classes)


def finish(args, result: FitResult, *, source: str, n_samples: int, n_features: int,
           s: int, loss: Loss, truth=None, classes=None) -> FitResult:
    """Add what every results file carries (data, config, truth), and write it; a
    diverged run is an error (exit 2), never a result.  ``classes``: the original
    labels of −1 and +1 (a classification loss), kept as config["classes"]."""
    check_finite(result)
    context = result.context
    context["data"] = {"source": source, "n_samples": n_samples,
                       "n_features": n_features}
    context["config"] = {"s": s, "loss": loss.name.lower(), "epochs": args.epochs,
                         "eta": args.eta, "m": args.m,
                         **{name: getattr(args, name, None) for name in (
                             "standardize", "shuffle", "seed", "orders", "staleness",
                             "window", "batch", "simulate", "delay", "random_delay",
                             "budget", "rule", "ridge", "sweep", "dtype", "degree",
                             "groups",
                             "group_sparsity")}}
    if s == "auto":   # the path over sizes: what picked the size, and how far it went
        context["config"].update(criterion=getattr(args, "criterion", None) or "sic",
                                 max_features=getattr(args, "max_features", None))
    if classes is not None:
        context["config"]["classes"] = list(classes)
    if truth is not None:
        context["truth"] = {"support": truth.support, **truth.evaluate(result.selected)}
    if args.out:
        write_result(args.out, result)
        log.info("wrote %s and its arrays", args.out)
        result.context["written_to"] = str(args.out)   # for the summary, not the file
    return result


def finish_job(args, job: Job, result: FitResult) -> FitResult:
    if isinstance(job.stream, InteractionStream | FeatureShape):
        names = job.stream.names(result.selected)   # "x4*x11" says more than 151
        if names is not None:
            result.context["feature_names"] = names
    return finish(args, result, source=job.source, n_samples=job.stream.n_samples,
                  n_features=job.stream.n_features, s=job.s, loss=job.loss,
                  truth=job.truth, classes=job.classes)

