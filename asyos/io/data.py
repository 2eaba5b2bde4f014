"""Read features and labels from files into streams, with errors that name the file.

Formats (by extension): ``.npy`` — an (n, p) array, either an ordinary C-order file or
the feature-major (Fortran-order) layout, read by memory map; ``.csv``/``.txt`` — a
dense (n, p) table; ``.svm``/``.svmlight``/``.libsvm`` — sparse rows with their labels
(needs the ``io`` extra: scikit-learn).
"""

from pathlib import Path

import numpy as np

from ..errors import InputError
from ..streams import (
    ArrayStream,
    FeatureStream,
    InteractionStream,
    NpyStream,
    SparseStream,
)

SVMLIGHT_SUFFIXES = {".svm", ".svmlight", ".libsvm"}
TEXT_SUFFIXES = {".csv", ".txt", ".tsv"}


def _existing(path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: file is empty")
    return path


def _load_text(path: Path) -> np.ndarray:
    delimiter = "\t" if path.suffix == ".tsv" else ","
    try:
        table = np.loadtxt(path, delimiter=delimiter, ndmin=2, dtype=np.float64)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read as a numeric table ({exc})") from None
    if table.size == 0:
        raise InputError(f"{path}: no data rows")
    return table


def load_features(path, *, degree: int = 1,
                  **stream_options) -> tuple[FeatureStream, np.ndarray | None]:
    """Open ``path`` as a feature stream; also return labels when the format has them.

    ``stream_options`` (block_size, shuffle, seed, dtype) go to the stream.  ``degree``
    2 or 3: the stream of all products of up to that many of the file's columns
    (``InteractionStream``, generated on the fly; the file's d columns are held).
    """
    if degree != 1:
        base, labels = load_features(path)
        return InteractionStream(base, degree, **stream_options), labels
    path = _existing(path)
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return NpyStream(path, **stream_options), None
    if suffix in TEXT_SUFFIXES:
        return ArrayStream(_load_text(path), **stream_options), None
    if suffix in SVMLIGHT_SUFFIXES:
        try:
            from sklearn.datasets import load_svmlight_file
        except ImportError:
            raise InputError(f"{path}: reading svmlight needs scikit-learn "
                             "(pip install 'asyos[io]')") from None
        try:
            X, y = load_svmlight_file(str(path), dtype=np.float64)
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot read as svmlight ({exc})") from None
        return SparseStream(X, **stream_options), np.asarray(y, dtype=np.float64)
    raise InputError(f"{path}: unknown data format {suffix!r}; expected .npy, .csv, "
                     ".txt, .tsv, .svm, .svmlight or .libsvm")


def load_labels(path) -> np.ndarray:
    """Labels from ``.npy`` (never unpickled) or a one-column text file."""
    path = _existing(path)
    if path.suffix.lower() == ".npy":
        try:
            y = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise InputError(f"{path}: cannot read labels ({exc})") from None
    else:
        y = _load_text(path)
    y = np.asarray(y)
    if y.ndim == 2 and 1 in y.shape:
        y = y.ravel()
    if y.ndim != 1:
        raise InputError(f"{path}: labels must be one column, got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.number):
        raise InputError(f"{path}: labels are not numeric (dtype {y.dtype})")
    return y.astype(np.float64)


def load_groups(path) -> np.ndarray:
    """Group labels, one per feature (issue 8): ``.npy`` (integers or strings, never
    unpickled) or a text file with one label per line (kept as strings)."""
    path = _existing(path)
    try:
        if path.suffix.lower() == ".npy":
            labels = np.load(path, allow_pickle=False)
        else:
            labels = np.loadtxt(path, dtype=str, ndmin=1, comments="#")
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read group labels ({exc})") from None
    if labels.ndim != 1:
        raise InputError(f"{path}: group labels must be one column, got shape "
                         f"{labels.shape}")
    return labels
