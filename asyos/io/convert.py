"""Row-major data (.npy, csv/tsv/txt, svmlight) → the feature-major ``.npy`` layout.

OS reads a column at a time, so on disk each feature should be one contiguous run of n
values: a Fortran-order (n, p) ``.npy`` (``NpyStream``'s fast layout).  Converting must
not need the whole matrix in memory (p may be ~ 10⁶), so it is an out-of-core
transpose in bounded memory:

1. text and svmlight inputs are parsed in chunks of rows into a temporary file of raw
   C-order rows next to the output (a sequential write);
2. the C-order matrix is read by memory map a block of columns at a time, all n rows
   of them, and each block is appended to the output as contiguous columns; the pages
   just read are dropped, so resident memory stays at one block (``block_bytes``).

Labels, when the input has them (svmlight, or a ``label_column`` of a csv), are written
to a separate ``.npy``.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from ..errors import InputError
from ..streams.npy import _read_header
from .data import SVMLIGHT_SUFFIXES, TEXT_SUFFIXES, _existing

DTYPES = {"float64": np.float64, "float32": np.float32}
BLOCK_BYTES = 64 << 20      # one block of columns (all rows) in memory at a time
ROWS_PER_CHUNK = 4096       # rows of text parsed at a time


def convert(source, output, *, dtype="float64", labels_out=None, label_column=None,
            block_bytes: int = BLOCK_BYTES, progress=None) -> dict:
    """Write ``source`` as a feature-major (Fortran-order) ``.npy`` at ``output``.

    ``dtype``: "float64" or "float32" storage.  ``labels_out``: where to write the
    labels the input carries (svmlight; csv with ``label_column``, whose column is then
    not a feature).  ``progress(k)``: told after every k columns written.  Returns
    {"n_samples", "n_features", "dtype", "output", "labels"}.
    """
    source, output = _existing(source), Path(output)
    if dtype not in DTYPES:
        raise InputError(f"dtype must be float32 or float64, got {dtype!r}")
    if output.suffix.lower() != ".npy":
        raise InputError(f"{output}: the output must be a .npy file")
    if output.resolve() == source.resolve():
        raise InputError(f"{output}: the output must not overwrite the input")
    suffix = source.suffix.lower()
    if label_column is not None and suffix not in TEXT_SUFFIXES:
        raise InputError("--label-column is for csv/tsv/txt inputs")
    labels = None
    temporary = output.with_name(output.name + ".rows.tmp")
    try:
        if suffix == ".npy":
            layout = _npy_layout(source)
        elif suffix in TEXT_SUFFIXES:
            layout, labels = _text_to_rows(source, temporary, label_column)
        elif suffix in SVMLIGHT_SUFFIXES:
            layout, labels = _svmlight_to_rows(source, temporary)
        else:
            raise InputError(f"{source}: unknown format {suffix!r}; expected .npy, .csv, "
                             ".tsv, .txt, .svm, .svmlight or .libsvm")
        n, p = _transpose(layout, output, np.dtype(DTYPES[dtype]), block_bytes,
                          progress)
    finally:
        temporary.unlink(missing_ok=True)
    if labels is not None and labels_out is not None:
        np.save(labels_out, labels)
    return {"n_samples": n, "n_features": p, "dtype": dtype, "output": str(output),
            "labels": None if labels is None or labels_out is None else str(labels_out)}


def _npy_layout(path: Path) -> tuple:
    """(path, offset, (n, p), fortran, dtype) of a 2-D numeric .npy, checked."""
    shape, fortran, dtype, offset = _read_header(path)
    if len(shape) != 2 or 0 in shape:
        raise InputError(f"{path}: expected a nonempty 2-D array, got shape {shape}")
    if dtype.kind not in "fiub":
        raise InputError(f"{path}: dtype {dtype} is not numeric")
    expected = offset + shape[0] * shape[1] * dtype.itemsize
    if path.stat().st_size != expected:
        raise InputError(f"{path}: file has {path.stat().st_size} bytes but its header "
                         f"needs {expected} (truncated or corrupt)")
    return path, offset, shape, fortran, dtype


def _transpose(layout, output: Path, dtype: np.dtype, block_bytes: int,
               progress) -> tuple[int, int]:
    """Copy the (n, p) matrix stored as ``layout`` to ``output`` in Fortran order, a
    block of columns at a time (bounded memory whatever p)."""
    rows, offset, (n, p), fortran, source_dtype = layout
    width = max(1, block_bytes // max(n * 8, 1))
    tmp = output.with_name(output.name + ".tmp")
    with open(rows, "rb") as f_in, open(tmp, "wb") as out:
        mm = mmap.mmap(f_in.fileno(), 0, access=mmap.ACCESS_READ)
        data = block = None
        try:
            data = np.frombuffer(mm, source_dtype, count=n * p, offset=offset)
            data = data.reshape((p, n) if fortran else (n, p))
            npy_format.write_array_header_2_0(
                out, {"descr": npy_format.dtype_to_descr(dtype), "fortran_order": True,
                      "shape": (n, p)})
            for first in range(0, p, width):
                last = min(first + width, p)
                block = data[first:last] if fortran else data[:, first:last].T
                block = np.array(block, dtype=dtype, order="C")   # (k, n): a copy
                if not np.all(np.isfinite(block)):
                    bad = first + int(np.argmax(~np.isfinite(block).all(axis=1)))
                    raise InputError(f"{rows}: feature {bad} contains NaN or inf")
                out.write(block.tobytes())
                if hasattr(mm, "madvise"):
                    mm.madvise(mmap.MADV_DONTNEED)   # the page cache keeps them
                if progress is not None:
                    progress(last - first)
            out.flush()
            os.fsync(out.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        finally:
            data = block = None   # no view may outlive the mapping
            mm.close()
    os.replace(tmp, output)
    return n, p


def _text_to_rows(source: Path, temporary: Path, label_column) -> tuple:
    """Parse a csv/tsv/txt table in chunks of rows into raw C-order float64 rows;
    returns (layout, labels or None)."""
    delimiter = "\t" if source.suffix.lower() == ".tsv" else ","
    labels, n, p = [], 0, None
    with open(source, encoding="utf-8") as f, open(temporary, "wb") as out:
        while True:
            lines = [line for _, line in zip(range(ROWS_PER_CHUNK), f)]
            if not lines:
                break
            try:
                chunk = np.loadtxt(lines, delimiter=delimiter, ndmin=2, dtype=np.float64)
            except ValueError as exc:
                raise InputError(f"{source}: cannot read row {n + 1}.. as numbers "
                                 f"({exc})") from None
            if chunk.size == 0:
                continue
            if label_column is not None:
                if not -chunk.shape[1] <= label_column < chunk.shape[1]:
                    raise InputError(f"{source}: no column {label_column} (the table has "
                                     f"{chunk.shape[1]})")
                labels.append(chunk[:, label_column].copy())
                chunk = np.delete(chunk, label_column, axis=1)
            if p is None:
                p = chunk.shape[1]
            elif chunk.shape[1] != p:
                raise InputError(f"{source}: rows after {n} have {chunk.shape[1]} "
                                 f"columns, the first ones {p}")
            out.write(chunk.tobytes())
            n += chunk.shape[0]
    if n == 0 or not p:
        raise InputError(f"{source}: no data rows")
    layout = (temporary, 0, (n, p), False, np.dtype(np.float64))
    return layout, np.concatenate(labels) if labels else None


def _svmlight_to_rows(source: Path, temporary: Path) -> tuple:
    """Read svmlight rows in byte chunks (scikit-learn's offset/length) into raw
    C-order float64 rows; returns (layout, labels)."""
    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError:
        raise InputError(f"{source}: reading svmlight needs scikit-learn "
                         "(pip install 'asyos[io]')") from None
    size, chunk_bytes = source.stat().st_size, 16 << 20
    n, labels, lowest, highest = 0, [], None, -1

    def chunks(**options):
        for offset in range(0, size, chunk_bytes):
            yield load_svmlight_file(str(source), offset=offset, length=chunk_bytes,
                                     dtype=np.float64, **options)

    try:
        # first pass: the index range (zero- or one-based, as sklearn's "auto" decides
        # for a whole file), one chunk in memory at a time
        for X, _ in chunks(n_features=1 << 30, zero_based=True):
            if X.nnz:
                lowest = min(X.indices.min(), lowest if lowest is not None else 1 << 30)
                highest = max(highest, int(X.indices.max()))
        zero_based = bool(lowest == 0)   # sklearn tests `is False`
        p = highest + (1 if zero_based else 0)
        with open(temporary, "wb") as out:
            # sklearn checks n_features against the raw indices, before shifting them
            for X, y in chunks(n_features=highest + 1, zero_based=zero_based):
                out.write(np.ascontiguousarray(X[:, :p].toarray()).tobytes())
                labels.append(y)
                n += X.shape[0]
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{source}: cannot read as svmlight ({exc})") from None
    if n == 0 or p == 0:
        raise InputError(f"{source}: no data rows")
    return (temporary, 0, (n, p), False, np.dtype(np.float64)), np.concatenate(labels)
