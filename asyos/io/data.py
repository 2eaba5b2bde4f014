"""Read features and labels from files into streams, with errors that name the file.

Formats (by extension): ``.npy`` — an (n, p) array, either an ordinary C-order file or
the feature-major (Fortran-order) layout, read by memory map; ``.csv``/``.txt`` — a
dense (n, p) table, optionally with the labels in one of its columns;
``.svm``/``.svmlight``/``.libsvm`` — sparse rows with their labels (needs the ``io``
extra: scikit-learn); ``.h5``/``.hdf5`` — a 2-D dataset, named ``file.h5:NAME``
(default ``X`` for features, ``y`` for labels; needs the ``hdf5`` extra: h5py);
``.csc`` — a directory holding a sparse matrix by columns (``asyos convert`` writes
it; ``streams/csc_file.py``), read by memory map, with its labels when it has them.
Labels can come from any of these.
"""

import warnings
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..streams import (
    ArrayStream,
    CSCFileStream,
    FeatureStream,
    HDF5Stream,
    InteractionStream,
    NpyStream,
    SparseStream,
)
from ..streams.csc_file import CSC_SUFFIX, is_csc, read_labels
from ..streams.hdf5 import open_dataset
from .convert import count_rows
from .formats import (
    FORMATS,
    HDF5_SUFFIXES,
    SVMLIGHT_SUFFIXES,
    TEXT_SUFFIXES,
    check_width,
    existing,
    svmlight_reader,
)


def split_hdf5(path, default: str) -> tuple[Path, str | None]:
    """``file.h5:NAME`` → (file.h5, NAME); another path → (path, None); ``file.h5``
    alone names ``default``."""
    text = str(path)
    head, sep, name = text.rpartition(":")
    if sep and Path(head).suffix.lower() in HDF5_SUFFIXES:
        return Path(head), name
    if Path(text).suffix.lower() in HDF5_SUFFIXES:
        return Path(text), default
    return Path(text), None


def _load_text(path: Path) -> np.ndarray:
    delimiter = "\t" if path.suffix == ".tsv" else ","
    try:
        with warnings.catch_warnings():   # an empty table is reported below, once
            warnings.simplefilter("ignore", UserWarning)
            table = np.loadtxt(path, delimiter=delimiter, ndmin=2, dtype=np.float64)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read as a numeric table ({exc})") from None
    if table.size == 0:
        raise InputError(f"{path}: no data rows")
    return table


def _label_column(table: np.ndarray, column: int, path) -> tuple[np.ndarray, np.ndarray]:
    """(the table without column ``column``, that column); -1 is the last."""
    width = table.shape[1]
    if isinstance(column, bool) or not isinstance(column, int) or \
            not -width <= column < width:
        raise InputError(f"{path}: no label column {column!r} (the table has {width} "
                         "columns; 0-based, -1 = last)")
    return np.delete(table, column, axis=1), table[:, column]


# the memory per feature of a loaded svmlight file and a run on it: the CSC copy's
# indptr (int64) and the run's per-feature arrays (its order, statistics, scores)
LOADED_BYTES = 32


def _load_svmlight(path: Path):
    load_svmlight_file = svmlight_reader()
    try:
        X, y = load_svmlight_file(str(path), dtype=np.float64)   # O(nnz), rows
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read as svmlight ({exc})") from None
    if X.nnz:   # its width, checked before the CSC copy allocates p entries
        at = int(np.argmax(X.indices))
        row = int(np.searchsorted(X.indptr, at, side="right")) - 1
        check_width(path, row, X.shape[1], LOADED_BYTES)
    return X, np.asarray(y, dtype=np.float64)


def _hdf5_labels(path: Path, name: str) -> np.ndarray:
    """The dataset ``name`` of the HDF5 file ``path``, read whole (labels are n)."""
    handle, dataset = open_dataset(path, name)
    with handle:
        return np.asarray(dataset[()])


def _open(path, dataset: str, label_column) -> tuple[Path, str | None, str]:
    """(existing path, HDF5 dataset name or None, lower-case suffix); a label column
    is only for text tables; a ``.csc`` directory is checked when it is opened."""
    path, dataset = split_hdf5(path, dataset)
    if is_csc(path):
        path, suffix = Path(path), CSC_SUFFIX
    else:
        path = existing(path)
        suffix = path.suffix.lower()
    if label_column is not None and suffix not in TEXT_SUFFIXES:
        raise InputError(f"{path}: a label column is for csv/tsv/txt files")
    return path, dataset, suffix


def load_features(path, *, degree: int = 1, label_column: int | None = None,
                  **stream_options) -> tuple[FeatureStream, np.ndarray | None]:
    """Open ``path`` as a feature stream; also return labels when the format has them.

    ``stream_options`` (block_size, shuffle, seed, dtype) go to the stream.  ``degree``
    2 or 3: the stream of all products of up to that many of the file's columns
    (``InteractionStream``, generated on the fly; the file's d columns are held).
    ``label_column``: a csv/tsv/txt column holding the labels (not a feature).  An
    HDF5 file ``file.h5[:NAME]`` returns its dataset ``y`` as labels when it has one,
    a ``.csc`` directory its ``labels.npy``.
    """
    if degree != 1:
        base, labels = load_features(path, label_column=label_column)
        return InteractionStream(base, degree, **stream_options), labels
    path, dataset, suffix = _open(path, "X", label_column)
    if suffix == ".npy":
        return NpyStream(path, **stream_options), None
    if suffix == CSC_SUFFIX:
        stream = CSCFileStream(path, **stream_options)
        return stream, stream.labels()
    if suffix in TEXT_SUFFIXES:
        table, labels = _load_text(path), None
        if label_column is not None:
            table, labels = _label_column(table, label_column, path)
        return ArrayStream(table, **stream_options), labels
    if suffix in SVMLIGHT_SUFFIXES:
        X, y = _load_svmlight(path)
        return SparseStream(X, **stream_options), y
    if suffix in HDF5_SUFFIXES:
        stream = HDF5Stream(path, dataset, **stream_options)
        labels = _hdf5_labels(path, "y") if stream.holds_dataset("y") else None
        return stream, labels
    raise InputError(f"{path}: unknown data format {suffix!r}; expected {FORMATS}")


def load_labels(path, *, column: int | None = None) -> np.ndarray:
    """Labels from ``.npy`` (never unpickled), a text file (one column, or the given
    ``column``), the labels of an svmlight file or of a ``.csc`` directory, or an
    HDF5 dataset (``file.h5[:NAME]``, default ``y``)."""
    path, dataset, suffix = _open(path, "y", column)
    if suffix == ".npy":
        try:
            y = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise InputError(f"{path}: cannot read labels ({exc})") from None
    elif suffix in SVMLIGHT_SUFFIXES or (suffix in TEXT_SUFFIXES and column is not None):
        y = count_rows(path, column)[2]   # one bounded pass: the values are not kept
    elif suffix == CSC_SUFFIX:
        y = read_labels(path)
        if y is None:
            raise InputError(f"{path}: this .csc directory holds no labels.npy")
    elif suffix in HDF5_SUFFIXES:
        y = _hdf5_labels(path, dataset)
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
    """Group labels, one per feature (for group-aware OS): ``.npy`` (integers or
    strings, never unpickled) or a text file with one label per line (kept as
    strings)."""
    path = existing(path)
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
