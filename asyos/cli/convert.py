"""``asyos convert`` / ``python -m asyos.convert``: write a column layout OS streams.

Reads .npy (C or Fortran order), csv/tsv/txt, svmlight or a .csc directory in
bounded memory and writes the Fortran-order (n, p) ``.npy`` (dense) or the ``.csc``
directory (sparse: CSC arrays) that ``--data`` reads a column at a time.
"""

import argparse
import sys

from ..errors import InputError
from ..io.convert import BLOCK_BYTES, DTYPES, LAYOUTS, SPARSE_BELOW, convert
from .options import module_main


def add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", help="row-major data: .npy, .csv/.tsv/.txt, "
                        ".svm/.svmlight/.libsvm (or a .csc directory, to write a .npy)")
    parser.add_argument("output", help="X.npy (dense, feature-major), X.csc (sparse, "
                        "a directory), or X without a suffix: --layout picks")
    parser.add_argument("--layout", choices=LAYOUTS, default="auto",
                        help="dense (.npy) or sparse (.csc); auto (default): the "
                        "output's suffix, else sparse for svmlight or when under "
                        f"{SPARSE_BELOW:.0%}% of the values are nonzero")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float64",
                        help="storage type of the output (default float64)")
    parser.add_argument("--labels-out", help="write the input's labels here (.npy): "
                        "svmlight labels, or the csv column given by --label-column "
                        "(a .csc output also keeps them inside)")
    parser.add_argument("--label-column", type=int, help="csv column holding the "
                        "labels (0-based; -1 = last); it is not a feature")
    parser.add_argument("--block-mb", type=int, default=BLOCK_BYTES >> 20,
                        help="memory for one block of columns or rows, in MiB "
                        f"(default {BLOCK_BYTES >> 20})")
    parser.add_argument("--force", action="store_true", help="replace outputs that "
                        "exist (a directory that is not a .csc never is)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def run_convert(args) -> dict:
    if args.block_mb < 1:
        raise InputError(f"--block-mb must be ≥ 1, got {args.block_mb}")
    bars = []

    def progress(stage, total, unit):
        """A progress bar per pass (the previous one is closed)."""
        from tqdm import tqdm

        if bars:
            bars[-1].close()
        bars.append(tqdm(total=total, unit=unit, unit_scale=unit == "B",
                         desc=f"convert: {stage}", file=sys.stderr, mininterval=0.2,
                         delay=0.5))
        return bars[-1].update

    try:
        info = convert(args.input, args.output, dtype=args.dtype, layout=args.layout,
                       labels_out=args.labels_out, label_column=args.label_column,
                       block_bytes=args.block_mb << 20, replace=args.force,
                       progress=None if args.quiet else progress)
    finally:
        for bar in bars:
            bar.close()
    what = ("feature-major" if info["layout"] == "dense" else
            f"sparse columns, {info['nnz']} nonzeros")
    print(f"wrote {info['output']}: n = {info['n_samples']}, p = {info['n_features']}, "
          f"{info['dtype']}, {what}"
          + (f"; labels in {info['labels']}" if info["labels"] else ""))
    if info["layout"] == "dense" and info["density"] is not None and \
            info["density"] < SPARSE_BELOW:
        print(f"note: only {info['density']:.2%} of the values are nonzero; a .csc "
              "output would hold just those", file=sys.stderr)
    return info


def main(argv=None) -> int:
    return module_main(argv, "python -m asyos.convert", __doc__.split("\n\n")[0],
                       add_convert_arguments, "convert", run_convert)
