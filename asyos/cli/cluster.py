"""``asyos server``, ``asyos worker`` and ``asyos keys``: Asy-OS over ZeroMQ.

    python -m asyos.server --bind tcp://127.0.0.1:5555 --labels y.npy -s 64 --workers 4
    python -m asyos.worker --connect tcp://127.0.0.1:5555 --data X.npy --shard 0/4

The server hands each worker its whole configuration; a worker needs only the
endpoint, its data and its shard.  Without --labels / --data both sides use the
synthetic problem of the same -p and --seed.
"""

import argparse
import sys
from pathlib import Path

from ..core.losses import Loss
from ..core.projection import check_groups, group_constraint
from ..core.validate import check_at_least
from ..errors import InputError, PartialRun
from ..io.data import load_features, load_groups, load_labels
from ..io.results import check_new_out
from ..solvers.asy import AsyConfig
from ..solvers.result import FitResult
from .job import finish, map_labels, synthetic_problem
from .options import (
    LOSS_NAMES,
    add_algorithm_arguments,
    add_protocol_arguments,
    apply_blas_threads,
    auto_or_int,
    module_main,
    refuse_auto_sparsity,
)
from .report import report

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5555"


def _timeouts(args):
    from ..transport.zeromq import Timeouts

    values = {name: check_at_least(name.replace("_", "-"), getattr(args, name), 1e-3)
              for name in ("heartbeat_timeout", "replace_timeout", "resend_after",
                           "server_timeout", "heartbeat_every")
              if getattr(args, name, None) is not None}
    return Timeouts(**values)


def _synthetic_group(parser, sparsity: bool) -> None:
    group = parser.add_argument_group("synthetic problem (when no data is given)")
    group.add_argument("--synthetic", choices=["regression", "classification"],
                       default="regression")
    if sparsity:   # n of the synthetic problem depends on s: workers must agree
        group.add_argument("-s", "--sparsity", type=int, default=100)
    group.add_argument("--features", "-p", type=int, default=2000)
    group.add_argument("--samples", "-n", type=int, default=None,
                       help="n of the synthetic problem (default: the paper's "
                       "round(1.2·s·log2 p)); server and workers must agree")
    group.add_argument("--seed", type=int, default=0)


def _common(parser) -> None:
    parser.add_argument("--keys", type=Path, help="CURVE key directory made by "
                        "`asyos keys DIR` (required beyond 127.0.0.1)")
    parser.add_argument("--resend-after", type=float, help="seconds before an "
                        "unanswered message is sent again (default 0.5)")


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bind", default=DEFAULT_ENDPOINT,
                        help=f"ZeroMQ endpoint (default {DEFAULT_ENDPOINT})")
    parser.add_argument("--labels", help="labels y: .npy or one-column text")
    parser.add_argument("-s", "--sparsity", type=auto_or_int, help="feature budget s "
                        "(default 100 for the synthetic problem; required with --labels;"
                        " -s auto is for sequential OS: asyos run)")
    parser.add_argument("--workers", type=int, required=True,
                        help="number of workers (shards) q")
    parser.add_argument("--loss", default=None, help=f"one of {', '.join(LOSS_NAMES)}")
    parser.add_argument("--eta", default="auto")
    parser.add_argument("--m", default="auto")
    add_algorithm_arguments(parser)
    add_protocol_arguments(parser)
    parser.add_argument("--groups", metavar="FILE", help="group-aware Asy-OS: one "
                        "group label per feature (the workers read the same file)")
    parser.add_argument("--group-sparsity", type=int, metavar="S2", help="keep at most "
                        "S2 groups (with --groups); shards are whole groups")
    parser.add_argument("--out", help="write results JSON here")
    parser.add_argument("--force", action="store_true",
                        help="replace the results already at --out")
    parser.add_argument("--quiet", "-q", action="store_true", help="no summary")
    parser.add_argument("--checkpoint", type=Path, help="checkpoint file (.npz)")
    parser.add_argument("--checkpoint-every", type=float, default=30.0,
                        help="seconds between checkpoints (default 30)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run saved in --checkpoint")
    parser.add_argument("--heartbeat-timeout", type=float,
                        help="seconds of silence before a worker is lost (default 10)")
    parser.add_argument("--allow-partial", action="store_true", help="a run that "
                        "lost shards ends with status 0, not 3 (its results are "
                        "marked partial either way)")
    parser.add_argument("--replace-timeout", type=float, help="seconds to wait for "
                        "a replacement of a lost shard before ending without it "
                        "(default 30)")
    _common(parser)
    _synthetic_group(parser, sparsity=False)


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--connect", default=DEFAULT_ENDPOINT,
                        help=f"the server's endpoint (default {DEFAULT_ENDPOINT})")
    parser.add_argument("--data", help="features X (as for `asyos run --data`)")
    parser.add_argument("--shard", required=True, help="T/Q: this worker's shard")
    parser.add_argument("--shuffle", action="store_true",
                        help="seeded random feature order within the shard")
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                        help="storage and compute type of this worker's columns")
    parser.add_argument("--degree", type=int, default=1, choices=[1, 2, 3],
                        help="products of up to DEGREE columns of --data (as for run)")
    parser.add_argument("--groups", metavar="FILE", help="the server's --groups file "
                        "(group-aware runs: this worker's shard is whole groups)")
    parser.add_argument("--heartbeat-every", type=float,
                        help="seconds between heartbeats (default 1)")
    parser.add_argument("--server-timeout", type=float, help="give up after this "
                        "many seconds without a word from the server (default 120)")
    parser.add_argument("--blas-threads", type=int, metavar="K", help="BLAS threads "
                        "of this worker (default 1: the kernels run on one core)")
    _common(parser)
    _synthetic_group(parser, sparsity=True)


def _shard(text: str) -> tuple[int, int]:
    try:
        t, q = (int(v) for v in text.split("/"))
    except ValueError:
        raise InputError(f"--shard must be T/Q, e.g. 0/4, got {text!r}") from None
    if not (q >= 1 and 0 <= t < q):
        raise InputError(f"--shard {text}: need 0 <= T < Q")
    return t, q


def run_server(args) -> FitResult:
    from ..transport.zeromq import ZmqServer
    from ..transport.zeromq.common import (
        new_secret,
        reclaim_secrets,
        run_directory,
        secret_path,
        write_secret,
    )

    # first, before any check can refuse this start: the secret a SIGKILLed server
    # left (often the one this start was meant to resume) goes in any case
    reclaim_secrets(run_directory())
    refuse_auto_sparsity(args.sparsity)
    if args.out:
        check_new_out(args.out, args.force)
    truth = None
    if args.labels is not None:
        if args.sparsity is None:
            raise InputError("-s/--sparsity is required with --labels")
        # the workers read the features; the server knows only the labels' file
        y, s, source = load_labels(args.labels), args.sparsity, \
            f"the labels {args.labels} (features read by the workers)"
        loss = Loss.parse(args.loss or "squared")
    else:
        s = 100 if args.sparsity is None else args.sparsity
        truth, default_loss, source = synthetic_problem(args, s)
        y, loss = truth.y, Loss.parse(args.loss or default_loss)
    # the server sends these labels to its workers: mapped to ±1 here, once
    y, classes = map_labels(y, loss, len(y))
    group_of, s2 = _groups(args.groups, args.group_sparsity,
                           None if truth is None else args.features)
    config = AsyConfig.build(s, args.workers, loss=loss, epochs=args.epochs,
                             eta=args.eta, m=args.m, staleness=args.staleness,
                             window=args.window, batch=args.batch, s2=s2,
                             budget=args.budget, rule=args.rule,
                             ridge=args.ridge, sweep=args.sweep)
    server = ZmqServer(args.bind, y, config, timeouts=_timeouts(args), keys=args.keys,
                       checkpoint=args.checkpoint,
                       checkpoint_every=check_at_least("checkpoint-every",
                                                       args.checkpoint_every, 1e-3),
                       resume=args.resume, record_order=args.record_order,
                       group_of=group_of)
    secret = None
    if args.keys is None:   # loopback: workers prove they can read the run's secret
        secret = secret_path(server.endpoint)
        server.secret = new_secret()   # admitted before any worker can read it
        write_secret(secret, server.secret)
    try:
        if not args.quiet:
            print(f"asyos server on {server.endpoint}: waiting for {args.workers} "
                  "workers", file=sys.stderr, flush=True)
        result = server.serve()
    finally:
        server.close()
        if secret is not None:
            secret.unlink(missing_ok=True)
    result = finish(args, result, source=source, n_samples=len(y),
                    n_features=server.session.server.monitor.n_features, s=s, loss=loss,
                    truth=truth, classes=classes)
    lost = result.asy["lost_shards"]
    if lost:
        message = (f"shards {', '.join(lost)} were lost and not replaced: the results "
                   "use their last acknowledged state and are marked partial")
        if not args.allow_partial:
            raise PartialRun(f"{message} (--allow-partial accepts them)")
        print(f"asyos: warning: {message}", file=sys.stderr)
    return result


def _groups(path, s2, n_features):
    """(group ids, s2) from --groups/--group-sparsity, or (None, None).  The server
    may not know p (its workers hold the data): it takes the labels' count, and the
    workers, which check it against their data, must send the same labels."""
    if path is None and s2 is None:
        return None, None
    labels = None if path is None else load_groups(path)
    p = n_features if n_features is not None or labels is None else labels.size
    return group_constraint(labels, s2, p)


def run_worker(args) -> None:
    from ..transport.zeromq import ServerGone, ZmqWorker
    from ..transport.zeromq.common import is_loopback, secret_path

    t, q = _shard(args.shard)
    if args.keys is None and args.connect.startswith("tcp://") and \
            not is_loopback(args.connect):
        # a server bound beyond this machine admits CURVE clients only
        raise InputError(f"--connect {args.connect} is beyond this machine: give "
                         "--keys DIR (the keys from `asyos keys DIR`, as the server's)")
    apply_blas_threads(args.blas_threads)
    if args.data is None:
        stream = synthetic_problem(args, args.sparsity)[0].stream
    else:
        stream, _ = load_features(args.data, degree=args.degree, shuffle=args.shuffle,
                                  seed=args.seed, dtype=args.dtype)
    if q > stream.n_features:
        raise InputError(f"{q} shards but only {stream.n_features} features")
    group_of = None
    if args.groups is not None:   # s2_t comes from the server, which checks the labels
        group_of, _ = check_groups(load_groups(args.groups), stream.n_features)
    secret = secret_path(args.connect) if args.keys is None and \
        is_loopback(args.connect) else None
    worker = ZmqWorker(args.connect, stream, t, q, secret_file=secret,
                       timeouts=_timeouts(args), keys=args.keys, group_of=group_of)
    try:
        worker.run()
    except ServerGone as exc:
        print(f"asyos: error: shard {t}/{q}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        worker.close()


def add_keys_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", help="where to write the keys")
    parser.add_argument("--force", action="store_true",
                        help="replace keys already in the directory")
    parser.add_argument("--workers", type=int, metavar="Q",
                        help="one key per shard (shard-T.key_secret, accepted for "
                        "shard T only) instead of one client key for all")


def make_keys(args) -> None:
    from ..transport.zeromq import make_keys as create

    if args.workers is not None:
        check_at_least("--workers", args.workers, 1, integer=True)
    directory = create(args.directory, force=args.force, workers=args.workers)
    given = "client.key_secret" if args.workers is None else \
        "shard-T.key_secret (the worker of shard T only)"
    print(f"CURVE keys in {directory}: keep server.key_secret on the server; give "
          f"workers {given} and server.key; the server accepts the public keys in "
          f"{directory / 'clients'}")


def serve(args) -> None:
    result = run_server(args)
    if not args.quiet:
        report(result)


def main_server(argv=None) -> int:
    return module_main(argv, "python -m asyos.server", "Asy-OS server over ZeroMQ",
                       add_server_arguments, "server", serve)


def main_worker(argv=None) -> int:
    return module_main(argv, "python -m asyos.worker", "Asy-OS worker over ZeroMQ",
                       add_worker_arguments, "worker", run_worker)
