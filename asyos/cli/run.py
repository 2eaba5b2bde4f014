"""``asyos run`` / ``python -m asyos.run``: select features from data or a synthetic problem.

With no ``--data`` it runs the embedded default: the paper's synthetic regression
protocol (spec §5.1: p = 2000, s = 100, n = ⌈1.2·s·log2 p⌉, noise sd 0.1) whose true
support is known, and prints the recall.
"""

import argparse
import sys
import time

import numpy as np

from ..core.losses import Loss
from ..datasets import make_classification, make_regression
from ..errors import InputError
from ..io.data import load_features, load_labels
from ..io.results import write_result
from ..metrics import evaluate
from ..solvers.sequential import fit_os
from ..streams import ArrayStream

LOSS_NAMES = [loss.name.lower() for loss in Loss]


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("data (default: the paper's synthetic problem)")
    data.add_argument("--data", help="features: (n, p) .npy (C or feature-major "
                      "Fortran order), .csv/.txt/.tsv, or .svm/.svmlight/.libsvm")
    data.add_argument("--labels", help="labels: .npy or one-column text "
                      "(svmlight files carry their own)")
    data.add_argument("--synthetic", choices=["regression", "classification"],
                      help="generate the paper's problem (default when no --data)")
    data.add_argument("--features", "-p", type=int, default=2000,
                      help="p of the synthetic problem (default 2000)")
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
    out = parser.add_argument_group("output")
    out.add_argument("--out", help="write results JSON here")
    out.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def _problem(args):
    """(stream, y, truth-or-None, default loss) from the arguments."""
    if args.data is None:
        kind = args.synthetic or "regression"
        s = 100 if args.sparsity is None else args.sparsity
        if kind == "regression":
            problem = make_regression(p=args.features, s=s, seed=args.seed)
        else:
            problem = make_classification(p=args.features, s=s, seed=args.seed)
        stream = ArrayStream(problem.X, shuffle=args.shuffle, seed=args.seed)
        default_loss = "squared" if kind == "regression" else "squared_hinge"
        return stream, problem.y, problem, s, default_loss, f"synthetic {kind}"
    if args.synthetic:
        raise InputError("give either --data or --synthetic, not both")
    if args.sparsity is None:
        raise InputError("-s/--sparsity is required with --data")
    stream, y = load_features(args.data, shuffle=args.shuffle, seed=args.seed)
    if args.labels is not None:
        y = load_labels(args.labels)
    if y is None:
        raise InputError(f"{args.data}: no labels; give --labels")
    return stream, y, None, args.sparsity, "squared", str(args.data)


def run(args) -> dict:
    stream, y, truth, s, default_loss, source = _problem(args)
    loss = Loss.parse(args.loss or default_loss)
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=stream.n_features * args.epochs, unit="feature",
                   desc="OS", file=sys.stderr, mininterval=0.2)
    try:
        result = fit_os(stream, y, s, loss=loss, eta=args.eta, m=args.m,
                        epochs=args.epochs, standardize=args.standardize,
                        progress=bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()
    payload = {
        "selected": result.selected, "weights": result.weights,
        "objective_per_epoch": result.objective,
        "substitutions_per_epoch": result.substitutions,
        "eta": result.eta, "m": result.m, "n_steps": result.n_steps,
        "timings": {"seconds": result.seconds,
                    "us_per_step": 1e6 * result.seconds / max(result.n_steps, 1)},
        "memory": {"kept_set_bytes": result.kept_bytes},
        "data": {"source": source, "n_samples": stream.n_samples,
                 "n_features": stream.n_features},
        "config": {"s": s, "loss": loss.name.lower(), "epochs": args.epochs,
                   "eta": args.eta, "m": args.m, "standardize": args.standardize,
                   "shuffle": args.shuffle, "seed": args.seed},
    }
    if result.scale is not None:
        payload["standardization"] = {"mean": result.mean, "scale": result.scale}
    if truth is not None:
        payload["truth"] = {"support": truth.support,
                            **evaluate(truth, result.selected)}
    if args.out:
        write_result(args.out, payload)
    return payload


def report(payload: dict, out=sys.stdout) -> None:
    """Human-readable summary on stdout."""
    selected = np.asarray(payload["selected"])
    config = payload["config"]
    print(f"OS on {payload['data']['source']}: n = {payload['data']['n_samples']}, "
          f"p = {payload['data']['n_features']}, s = {config['s']}, "
          f"loss = {config['loss']}, epochs = {config['epochs']}", file=out)
    print(f"objective per epoch: "
          + ", ".join(f"{v:.6g}" for v in payload["objective_per_epoch"]), file=out)
    print(f"step size eta = {payload['eta']:.4g}, m = {payload['m']:.4g}; "
          f"{payload['timings']['us_per_step']:.1f} us per feature step", file=out)
    if "truth" in payload:
        truth = payload["truth"]
        extra = {k: v for k, v in truth.items() if k not in ("support", "recall")}
        print(f"recall of the true support: {truth['recall']:.3f}  "
              + "  ".join(f"{k} = {v:.4g}" for k, v in extra.items()), file=out)
    print(f"selected {selected.size} features: "
          + " ".join(str(j) for j in selected), file=out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asyos.run",
                                     description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    return guarded(lambda: report(run(args)))


def guarded(action) -> int:
    """Run ``action``; bad input → one line on stderr and exit status 2."""
    try:
        action()
    except InputError as exc:
        print(f"asyos: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("asyos: interrupted", file=sys.stderr)
        return 130
    return 0
