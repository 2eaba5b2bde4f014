"""``asyos make``: write the synthetic problem with a known answer to files.

The same problem ``asyos run`` runs when given no data (the paper's regression or
classification, same sizes and seed), as a user's files would hold it: a feature-major
``.npy`` or ``.csc`` with its labels beside it, or rows of text (csv with the labels in
column 0, svmlight with the labels first).  Every example in the docs that reads
``X.npy``, ``y.npy``, ``data.csv`` or ``train.svm`` runs on a fresh machine after it,
and ``asyos run --data X.npy --labels y.npy -s 100`` selects what the embedded default
selects.
"""

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ..datasets import stream_problem
from ..errors import InputError
from ..io.convert import _write_dense, convert
from ..io.writable import remove, replace_file, save_npy, writable

FORMATS = {".npy": "npy", ".csc": "csc", ".csv": "csv", ".svm": "svmlight",
           ".svmlight": "svmlight", ".libsvm": "svmlight"}


def add_make_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", help="the features: X.npy (dense, feature-major), "
                        "X.csc (sparse columns, a directory), data.csv (rows; the "
                        "labels in column 0) or train.svm (svmlight: labels first)")
    parser.add_argument("labels", nargs="?", help="the labels (.npy); required with "
                        ".npy and .csc data, which hold none")
    parser.add_argument("--synthetic", choices=["regression", "classification"],
                        default="regression", help="the paper's problem (default "
                        "regression)")
    parser.add_argument("--features", "-p", type=int, default=2000,
                        help="p (default 2000)")
    parser.add_argument("--sparsity", "-s", type=int, default=100,
                        help="true features (default 100)")
    parser.add_argument("--samples", "-n", type=int, default=None,
                        help="n (default: the paper's round(1.2·s·log2 p))")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0, as "
                        "asyos run)")
    parser.add_argument("--support", metavar="FILE", help="also write the true "
                        "support (sorted feature indices, .npy)")
    parser.add_argument("--force", action="store_true",
                        help="replace files that exist")


def run_make(args) -> dict:
    data = Path(args.data)
    kind = FORMATS.get(data.suffix.lower())
    if kind is None:
        raise InputError(f"{data}: give a .npy, .csc, .csv or .svm name")
    if kind in ("npy", "csc") and args.labels is None:
        raise InputError(f"{data.suffix} data hold no labels: give a labels file too "
                         "(e.g. asyos make X.npy y.npy)")
    if args.labels is not None and Path(args.labels).suffix.lower() != ".npy":
        raise InputError(f"{args.labels}: labels are written as .npy")
    outputs = [data] + [Path(path) for path in (args.labels, args.support) if path]
    for path in outputs:
        if path.exists() and not args.force:
            raise InputError(f"{path} exists; give --force to replace it")
        if not writable(path.parent):
            raise InputError(f"{path}: cannot write in {path.parent}")
    problem = stream_problem(args.synthetic, p=args.features, s=args.sparsity,
                             n=args.samples, seed=args.seed)
    stream, y = problem.stream, problem.y
    if kind in ("npy", "csc"):
        _write_npy_or_csc(stream, data, kind, args.force)
    else:
        _write_text(stream, y, data, kind)
    try:   # a failure (a full disk) leaves none of the files: they go together
        if args.labels is not None:
            save_npy(args.labels, y)
        if args.support is not None:
            save_npy(args.support, np.sort(problem.support))
    except BaseException:
        for path in outputs:
            remove(path)
        raise
    names = [str(path) for path in outputs]
    written = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1
                           else names)
    print(f"wrote {written}: the synthetic {args.synthetic} problem, n = "
          f"{stream.n_samples}, p = {stream.n_features}, {len(problem.support)} true "
          f"features (seed {args.seed})")
    return {"n_samples": stream.n_samples, "n_features": stream.n_features}


def _write_npy_or_csc(stream, data: Path, kind: str, force: bool) -> None:
    """The columns into a feature-major .npy, written in order a block of columns at
    a time under a temporary name with its space allocated first (never through a
    memory map of a sparse file, whose stores on a full disk are a SIGBUS:
    io/writable.py); a .csc is converted from it, in a temporary folder removed
    whatever happens."""
    folder = None if kind == "npy" else Path(tempfile.mkdtemp(dir=data.parent))
    try:
        target = data if folder is None else folder / "X.npy"
        _write_dense(_in_order(stream), stream.n_samples, stream.n_features, target,
                     np.dtype(np.float64), data, named=data)
        if folder is not None:
            convert(str(target), str(data), layout="sparse", replace=force)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _in_order(stream):
    """(first, (k, n) block) of the stream's columns, which come in index order."""
    at = 0
    for index, block in stream.blocks():
        if index.size and not (index[0] == at and
                               np.array_equal(index, np.arange(at, at + index.size))):
            raise RuntimeError("the synthetic stream's blocks are out of order")
        yield at, block
        at += index.size


def _write_text(stream, y: np.ndarray, data: Path, kind: str) -> None:
    """Rows of text: csv (the label, then the p values) or svmlight (the label, then
    one-based index:value pairs).  Rows need every column: X is held whole (n·p),
    which text files of a size worth writing allow."""
    X = stream.columns(np.arange(stream.n_features)).T

    def rows(out) -> None:
        for label, row in zip(y, X):
            if kind == "csv":
                line = ",".join([f"{label:.17g}"] + [f"{v:.17g}" for v in row])
            else:
                line = f"{label:.17g} " + " ".join(f"{j + 1}:{row[j]:.17g}"
                                                   for j in np.flatnonzero(row))
            out.write((line + "\n").encode())

    replace_file(data, rows)
