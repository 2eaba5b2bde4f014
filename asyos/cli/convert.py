"""``asyos convert`` / ``python -m asyos.convert``: write the feature-major ``.npy``.

Reads .npy (C or Fortran order), csv/tsv/txt or svmlight in bounded memory and writes
the Fortran-order (n, p) ``.npy`` that ``--data`` reads a column at a time.
"""

import argparse
import sys

from ..errors import InputError
from ..io.convert import BLOCK_BYTES, DTYPES, convert
from .options import module_main


def add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", help="row-major data: .npy, .csv/.tsv/.txt, "
                        ".svm/.svmlight/.libsvm")
    parser.add_argument("output", help="the feature-major .npy to write")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float64",
                        help="storage type of the output (default float64)")
    parser.add_argument("--labels-out", help="write the input's labels here (.npy): "
                        "svmlight labels, or the csv column given by --label-column")
    parser.add_argument("--label-column", type=int, help="csv column holding the "
                        "labels (0-based; -1 = last); it is not a feature")
    parser.add_argument("--block-mb", type=int, default=BLOCK_BYTES >> 20,
                        help="memory for one block of columns, in MiB (default "
                        f"{BLOCK_BYTES >> 20})")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def run_convert(args) -> dict:
    if args.block_mb < 1:
        raise InputError(f"--block-mb must be ≥ 1, got {args.block_mb}")
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(unit="feature", desc="convert", file=sys.stderr, mininterval=0.2,
                   delay=0.5)
    try:
        info = convert(args.input, args.output, dtype=args.dtype,
                       labels_out=args.labels_out, label_column=args.label_column,
                       block_bytes=args.block_mb << 20,
                       progress=None if bar is None else bar.update)
    finally:
        if bar is not None:
            bar.close()
    print(f"wrote {info['output']}: n = {info['n_samples']}, p = {info['n_features']}, "
          f"{info['dtype']}, feature-major"
          + (f"; labels in {info['labels']}" if info["labels"] else ""))
    return info


def main(argv=None) -> int:
    return module_main(argv, "python -m asyos.convert", __doc__.split("\n\n")[0],
                       add_convert_arguments, "convert", run_convert)
