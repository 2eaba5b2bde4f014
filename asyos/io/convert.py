"""Row-major data (.npy, csv/tsv/txt, svmlight) → a column layout OS streams from disk.

OS reads a column at a time, so on disk each feature should be one contiguous run.
Two layouts, chosen by the output's name (or ``layout``):

* **dense**, ``X.npy``: a Fortran-order (n, p) ``.npy`` (``NpyStream``'s fast layout);
* **sparse**, ``X.csc``: a directory of CSC arrays (``streams/csc_file.py``), whose
  size is the nonzeros, not n·p (text with millions of words).

Converting must not need the whole matrix in memory (p may be ~ 10⁶, nnz ~ 10⁸):

* dense: text and svmlight inputs are parsed in chunks of rows into a temporary file
  of raw C-order rows next to the output (a sparse chunk is densified a few rows at a
  time, ``block_bytes`` at most); then the C-order matrix is read by memory map a block
  of columns at a time and each block is appended to the output as contiguous
  columns, the pages just read dropped, so resident memory stays at one block;
* sparse, from text or svmlight: two passes over the text.  Pass 1 counts the
  nonzeros of every column (and n, p, the labels, the index base); the counts give
  ``indptr``, and ``indices``/``data`` are created at their final size and written by
  memory map.  Pass 2 scatters each chunk's (row, value) pairs to per-column cursors;
  rows arrive in increasing order, so every column comes out sorted.  The pages
  written are released after every chunk (``madvise``; the page cache keeps the
  changes), so memory is one chunk plus one counter per column, whatever nnz is:
  a single (p + 1,) array, int32 while nnz < 2³¹ (40 MB at p = 10⁷), that holds
  the counts, becomes ``indptr`` in place (written to disk a slice at a time) and
  then the cursors.  Only numpy runs here: no compiled kernel is loaded (numba's
  first load alone costs ~50 MB of resident memory).  From a ``.npy``: two passes
  over blocks of columns (count, then append).

Everything is written under a temporary name next to the output and renamed into
place at the end, so a failed conversion leaves nothing half-written.  Labels, when
the input has them (svmlight, or a ``label_column`` of a csv), are written to
``labels_out`` and, for a ``.csc`` output, into the directory as ``labels.npy``.
"""

from __future__ import annotations

import io
import json
import mmap
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from ..errors import InputError
from ..streams.csc_file import (
    CSC_SUFFIX,
    CSCFileStream,
    check_replaceable,
    csc_meta,
    install,
    is_csc,
    read_labels,
)
from ..streams.npy import _read_header, drop_pages
from .formats import (
    SVMLIGHT_SUFFIXES,
    TEXT_SUFFIXES,
    check_width,
    existing,
    svmlight_reader,
)
from .writable import remove, reserve, save_npy, space_checked

DTYPES = {"float64": np.float64, "float32": np.float32}
LAYOUTS = ("auto", "dense", "sparse")
BLOCK_BYTES = 64 << 20      # one block of columns (all rows) in memory at a time
ROWS_PER_CHUNK = 4096       # rows of text parsed at a time (fewer for wide tables)
SVMLIGHT_BYTES = 1 << 20    # svmlight text parsed at a time (parsing it holds
                            # several times that: 4 MiB cost 30 MB more at peak)
STRIDED_BYTES = 8 << 20     # rows of a C-order .npy mapped at a time
SPARSE_BELOW = 0.1          # layout "auto": sparse when nnz / (n·p) is below this
_SLICE = 1 << 18            # indptr entries summed, written or checked at a time
SUFFIXES = {".npy": "dense", CSC_SUFFIX: "sparse"}
COUNT_BYTES = 16            # the count's memory per feature: its tally (int32, or
                            # int64 beyond 2³¹ nonzeros) and the copy a resize makes
PARSE_WIDTH = 1 << 62       # scikit-learn's n_features while parsing: no bound
                            # (it allocates nothing per feature); ``check_width``
                            # bounds p, naming the line

Progress = Callable[[str, "int | None", str], Callable[[int], None]]


def convert(source, output, *, dtype="float64", layout="auto", labels_out=None,
            label_column=None, block_bytes: int = BLOCK_BYTES,
            progress: Progress | None = None, replace: bool = False) -> dict:
    """Write ``source`` in a column layout at ``output``.

    ``layout``: "dense" (a Fortran-order ``.npy``), "sparse" (a ``.csc`` directory) or
    "auto".  An output named ``*.npy`` or ``*.csc`` says its layout itself ("auto"
    follows it; a contradicting ``layout`` is an InputError); a name without a suffix
    gets the suffix of the layout chosen: the given one, or under "auto" sparse for
    svmlight input or when under 10 % of the values are nonzero (counted in a first
    pass), dense otherwise; any other suffix is an InputError.  ``dtype``: "float64"
    or "float32" storage.  ``labels_out``: where to write the labels the input
    carries (svmlight; csv with ``label_column``, whose column is then not a feature;
    a ``.csc`` directory's); a ``.npy`` output whose input carries labels gets them
    beside it, as ``NAME.labels.npy``, when it is not given.
    ``progress(stage, total, unit)``: called as each pass starts, returns the
    function told how many units were done.  ``replace``: write over outputs that
    exist (else they are refused before any work; a directory that is not a ``.csc``
    is never replaced).  Returns {"n_samples", "n_features",
    "dtype", "layout", "nnz", "density", "output", "labels"} (nnz and density None
    where not counted).
    """
    if dtype not in DTYPES:
        raise InputError(f"dtype must be float32 or float64, got {dtype!r}")
    if layout not in LAYOUTS:
        raise InputError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    source, kind = _source(source)
    output = Path(output)
    if label_column is not None and kind != "text":
        raise InputError("--label-column is for csv/tsv/txt inputs")
    chosen = _layout_of(output, layout)
    if source.resolve() in {_named(output, way).resolve() for way in LAYOUTS[1:]}:
        raise InputError(f"{output}: the output must not overwrite the input")
    _check_folder(output)
    if labels_out is not None:
        _check_new(Path(labels_out), replace)
    job = _Job(source, kind, np.dtype(DTYPES[dtype]), label_column, block_bytes,
               progress)
    job.replace = replace
    job.labels_beside = labels_out is None and (kind in ("svmlight", "csc") or
                                                label_column is not None)
    try:
        with space_checked(output):   # a full disk: what it wrote is removed
            info = job.run(output, chosen)
    except OSError as exc:
        raise InputError(f"converting {source} to {output} failed: {exc}") from None
    labels = job.labels
    if labels is not None and labels_out is None and info["layout"] == "dense":
        # a .npy holds the features only: the labels go beside it, never dropped
        written = Path(info["output"])
        labels_out = written.with_name(written.stem + ".labels.npy")
    if labels is not None and labels_out is not None:
        try:
            save_npy(labels_out, labels)
        except BaseException:   # the command failed: its output goes with it
            remove(info["output"])
            raise
    return {**info, "dtype": dtype,
            "labels": None if labels is None or labels_out is None else str(labels_out)}


def _source(path) -> tuple[Path, str]:
    """(path, kind) of an input: "npy", "text", "svmlight" or "csc" (a directory)."""
    if is_csc(path):
        CSCFileStream(path)   # checks the directory
        return Path(path), "csc"
    path = existing(path)
    suffix = path.suffix.lower()
    for kind, suffixes in (("npy", {".npy"}), ("text", TEXT_SUFFIXES),
                           ("svmlight", SVMLIGHT_SUFFIXES)):
        if suffix in suffixes:
            return path, kind
    raise InputError(f"{path}: unknown format {suffix!r}; expected .npy, .csv, .tsv, "
                     ".txt, .svm, .svmlight, .libsvm or a .csc directory")


def _layout_of(output: Path, layout: str) -> str | None:
    """The layout the output's name or ``layout`` fixes; None: decide from the data."""
    named = SUFFIXES.get(output.suffix.lower())
    if named is None and output.suffix:
        raise InputError(f"{output}: the output must be a .npy file or a .csc "
                         "directory (or a name without a suffix: --layout picks it)")
    if named is not None and layout not in ("auto", named):
        raise InputError(f"{output}: --layout {layout} writes a "
                         f"{'.csc directory' if layout == 'sparse' else '.npy file'}, "
                         f"not a {output.suffix} (name the output accordingly)")
    return named or (None if layout == "auto" else layout)


def _named(output: Path, layout: str) -> Path:
    """``output``, with the suffix of ``layout`` appended when it has none."""
    if output.suffix.lower() in SUFFIXES:
        return output
    return output.with_name(output.name + (".npy" if layout == "dense" else CSC_SUFFIX))


def _check_folder(output: Path) -> None:
    """Refuse at once an output that cannot be written (before any pass)."""
    folder = output.parent
    if not folder.is_dir():
        raise InputError(f"{output}: no such directory {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{output}: cannot write in {folder} (permission denied)")


def _check_target(output: Path, layout: str, replace: bool,
                  labels_beside: bool) -> None:
    """Refuse an output path that must not be replaced by this layout, or that exists
    when ``replace`` is not given (with the ``NAME.labels.npy`` a dense output writes
    beside it when ``labels_beside``)."""
    if layout == "sparse":
        check_replaceable(output)
    elif output.is_dir():
        raise InputError(f"{output}: is a directory")
    _check_new(output, replace)
    if layout == "dense" and labels_beside:
        _check_new(output.with_name(output.stem + ".labels.npy"), replace)


def _check_new(path: Path, replace: bool) -> None:
    if not replace and (path.exists() or path.is_symlink()):
        raise InputError(f"{path} exists; give --force to replace it")


# -- the passes ---------------------------------------------------------------------

INT32_MAX = 2**31 - 1


@dataclass
class _Count:
    """What pass 1 learns: n, p, nnz and the nonzeros of every column.

    ``tally`` (p + 1,): ``tally[0]`` = 0, ``tally[1 + j]`` = the nonzeros of feature
    j, int32 while nnz fits (half the memory of int64: 40 MB at p = 10⁷), int64
    beyond.  It is the conversion's one O(p) array: the writer turns it in place
    into each column's cursor (``_CSCWriter``).
    """

    n: int
    tally: np.ndarray
    nnz: int

    @property
    def p(self) -> int:
        return max(len(self.tally) - 1, 0)

    def density(self) -> float:
        return self.nnz / (self.n * self.p)


class _Job:
    """One conversion: the source, its passes, the labels it found."""

    def __init__(self, source: Path, kind: str, dtype: np.dtype, label_column,
                 block_bytes: int, progress: Progress | None):
        self.source, self.kind, self.dtype = source, kind, dtype
        self.label_column, self.block_bytes = label_column, block_bytes
        self.progress = progress
        self.labels: np.ndarray | None = None
        self.base = 0   # svmlight: 1 for one-based indices
        self.replace, self.labels_beside = False, False   # set by ``convert``

    def bar(self, stage: str, total: int | None, unit: str) -> Callable[[int], None]:
        if self.progress is None:
            return lambda k: None
        return self.progress(stage, total, unit)

    def run(self, output: Path, chosen: str | None) -> dict:
        if chosen is None and self.kind in ("svmlight", "csc"):
            chosen = "sparse" if self.kind == "svmlight" else "dense"
        if chosen == "sparse" and self.kind == "csc":
            raise InputError(f"{self.source}: already a .csc directory")
        if chosen is not None:
            _check_target(_named(output, chosen), chosen, self.replace,
                          self.labels_beside)
        count = None
        if chosen != "dense" or self.kind == "svmlight":   # svmlight: p, the base
            count = self.count()
        if chosen is None:
            chosen = "sparse" if count.density() < SPARSE_BELOW else "dense"
            _check_target(_named(output, chosen), chosen, self.replace,
                          self.labels_beside)
        output = _named(output, chosen)
        if chosen == "sparse":
            self.write_sparse(output, count)
            n, p = count.n, count.p
        else:
            n, p = self.write_dense(output, count)
        return {"n_samples": n, "n_features": p, "layout": chosen,
                "nnz": None if count is None else count.nnz,
                "density": None if count is None else count.density(),
                "output": str(output)}

    # -- sources ----------------------------------------------------------------------
    def row_chunks(self, stage: str) -> Iterator[tuple]:
        """(rowptr, cols, vals, labels, width) of the next rows of the text: a CSR
        piece, its labels (or None) and, for a table, its width p (else None)."""
        tick = self.bar(stage, self.source.stat().st_size, "B")
        if self.kind == "svmlight":
            for X, y in _svmlight_chunks(self.source, tick):
                yield X.indptr, X.indices - self.base, X.data, y, None
            return
        for chunk, y in _text_chunks(self.source, self.label_column,
                                     self.block_bytes, tick):
            nonzero = chunk != 0
            rowptr = np.zeros(chunk.shape[0] + 1, np.int64)
            np.cumsum(nonzero.sum(axis=1), out=rowptr[1:])
            rows, cols = np.nonzero(nonzero)
            yield rowptr, cols, chunk[rows, cols], y, chunk.shape[1]

    def npy_blocks(self, stage: str) -> Iterator[tuple[int, np.ndarray]]:
        """(first, (k, n) block) of the columns of the .npy input, in order."""
        layout = _npy_layout(self.source)
        n, p = layout[2]
        return _npy_blocks(layout, self.width(n), self.bar(stage, p, "feature"))

    def width(self, n: int) -> int:
        return max(1, self.block_bytes // max(n * 8, 1))

    # -- pass 1 -----------------------------------------------------------------------
    def count(self) -> _Count:
        """Pass 1: n, p and the nonzeros of every column; the labels; the first
        NaN/inf is refused naming its feature."""
        if self.kind == "npy":
            n, p = _npy_layout(self.source)[2]
            tally = np.zeros(p + 1, np.int32 if n * p <= INT32_MAX else np.int64)
            for first, block in self.npy_blocks("count"):
                _check_finite(self.source, first, block)
                tally[1 + first:1 + first + len(block)] = np.count_nonzero(block,
                                                                           axis=1)
            return _Count(n, tally, int(tally.sum(dtype=np.int64)))
        # file column c is counted in tally[1 + c]; grown in place as columns appear
        tally, nnz, n, lowest, labels = np.zeros(1, np.int32), 0, 0, None, []
        bad = None
        for rowptr, cols, vals, y, width in self.row_chunks("count"):
            need = width or 0
            if cols.size:
                low, high = int(cols.min()), int(cols.max())
                if low < 0:
                    raise InputError(f"{self.source}: negative feature index {low}")
                lowest = low if lowest is None else min(lowest, low)
                need = max(need, high + 1)
            if need + 1 > len(tally):
                if self.kind == "svmlight":   # before p entries are allocated
                    at = int(np.argmax(cols))
                    row = n + int(np.searchsorted(rowptr, at, side="right")) - 1
                    check_width(self.source, row, need, COUNT_BYTES)
                tally.resize(need + 1, refcheck=False)   # zero-filled, no copy kept
            if tally.dtype == np.int32 and nnz + cols.size > INT32_MAX:
                tally = tally.astype(np.int64)
            _tally(cols, tally)
            nnz += cols.size
            finite = np.isfinite(vals)
            if bad is None and not finite.all():
                at = int(np.argmin(finite))
                row = int(np.searchsorted(rowptr, at, side="right")) - 1
                bad = (n + row, int(cols[at]))
            n += len(rowptr) - 1
            if y is not None:
                labels.append(y)
        if self.kind == "svmlight":
            # zero- or one-based as scikit-learn's "auto" decides for a whole file;
            # one-based: file column 0 is empty, so tally[1:] starts with its 0
            self.base = 0 if lowest == 0 else 1
            tally = tally[self.base:]
        count = _Count(n, tally, nnz)
        if n == 0 or count.p == 0:
            raise InputError(f"{self.source}: no data rows")
        if bad is not None:
            raise InputError(f"{self.source}: feature {bad[1] - self.base} contains "
                             f"NaN or inf (sample {bad[0]})")
        self.labels = np.concatenate(labels) if labels else None
        return count

    # -- pass 2 -----------------------------------------------------------------------
    def write_sparse(self, output: Path, count: _Count) -> None:
        with _CSCWriter(output, count, self.dtype, self.labels,
                        self.block_bytes) as out:
            if self.kind == "npy":
                for _, block in self.npy_blocks("write"):
                    columns, rows = np.nonzero(block)
                    out.append(rows, block[columns, rows])
                return
            row = 0
            for rowptr, cols, vals, _, _ in self.row_chunks("write"):
                out.scatter(rowptr, cols, vals, row, self.source)
                row += len(rowptr) - 1

    def write_dense(self, output: Path, count: _Count | None) -> tuple[int, int]:
        if self.kind == "npy":
            layout = _npy_layout(self.source)
            n, p = layout[2]
            return _write_dense(self.npy_blocks("write"), n, p, output, self.dtype,
                                self.source)
        if self.kind == "csc":
            stream = CSCFileStream(self.source, dtype=self.dtype)
            self.labels = read_labels(self.source)
            n, p = stream.n_samples, stream.n_features
            blocks = _stream_blocks(stream, self.width(n),
                                    self.bar("write", p, "feature"))
            return _write_dense(blocks, n, p, output, self.dtype, self.source)
        temporary = output.with_name(output.name + ".rows.tmp")
        try:
            n, p = self.rows_file(temporary, None if count is None else count.p)
            layout = (temporary, 0, (n, p), False, np.dtype(np.float64))
            blocks = _npy_blocks(layout, self.width(n), self.bar("columns", p,
                                                                  "feature"))
            return _write_dense(blocks, n, p, output, self.dtype, self.source)
        finally:
            temporary.unlink(missing_ok=True)

    def rows_file(self, temporary: Path, p: int | None) -> tuple[int, int]:
        """The text as raw C-order float64 rows (densified ``block_bytes`` at a time),
        its labels on the way; ``p``: known from pass 1 (svmlight)."""
        n, labels = 0, []
        with open(temporary, "wb") as out:
            for rowptr, cols, vals, y, width in self.row_chunks("rows"):
                p = p or width
                if cols.size and (cols.min() < 0 or cols.max() >= p):
                    raise InputError(f"{self.source}: changed while converting")
                step = max(1, self.block_bytes // (8 * p))
                for first in range(0, len(rowptr) - 1, step):
                    last = min(first + step, len(rowptr) - 1)
                    lo, hi = rowptr[first], rowptr[last]
                    piece = np.zeros((last - first, p))
                    piece[np.repeat(np.arange(last - first),
                                    np.diff(rowptr[first:last + 1])),
                          cols[lo:hi]] = vals[lo:hi]
                    out.write(piece.tobytes())
                n += len(rowptr) - 1
                if y is not None:
                    labels.append(y)
        if n == 0 or not p:
            raise InputError(f"{self.source}: no data rows")
        self.labels = np.concatenate(labels) if labels else None
        return n, p


# -- readers ------------------------------------------------------------------------

def _text_chunks(source: Path, label_column, block_bytes: int,
                 tick) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    """(rows float64 (k, p), labels or None) of a csv/tsv/txt table, ``block_bytes``
    of rows at a time (at most ROWS_PER_CHUNK)."""
    delimiter = "\t" if source.suffix.lower() == ".tsv" else ","
    n, p = 0, None
    try:
        with open(source, encoding="utf-8") as f:
            first = f.readline()
            width = first.count(delimiter) + 1
            rows = max(1, min(ROWS_PER_CHUNK, block_bytes // (8 * width)))
            pending = [first] if first else []
            while True:
                lines = pending + list(islice(f, rows - len(pending)))
                pending = []
                if not lines:
                    break
                tick(sum(len(line) for line in lines))
                try:
                    chunk = np.loadtxt(lines, delimiter=delimiter, ndmin=2,
                                       dtype=np.float64)
                except ValueError as exc:
                    raise InputError(f"{source}: cannot read row {n + 1}.. as numbers "
                                     f"({exc})") from None
                if chunk.size == 0:
                    continue
                labels = None
                if label_column is not None:
                    if not -chunk.shape[1] <= label_column < chunk.shape[1]:
                        raise InputError(f"{source}: no column {label_column} (the "
                                         f"table has {chunk.shape[1]})")
                    labels = chunk[:, label_column].copy()
                    chunk = np.delete(chunk, label_column, axis=1)
                if p is None:
                    p = chunk.shape[1]
                elif chunk.shape[1] != p:
                    raise InputError(f"{source}: rows after {n} have {chunk.shape[1]} "
                                     f"columns, the first ones {p}")
                n += chunk.shape[0]
                yield chunk, labels
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not a text file ({exc})") from None


def _svmlight_chunks(source: Path, tick) -> Iterator:
    """(CSR rows with the file's own indices, labels) of an svmlight file, about
    SVMLIGHT_BYTES of whole lines at a time (``_line_spans``)."""
    load = svmlight_reader()
    for start, stop, offset, length in _line_spans(source):
        try:
            X, y = load(str(source), offset=offset, length=length, n_features=PARSE_WIDTH,
                        zero_based=True, dtype=np.float64)
        except (ValueError, OverflowError, UnicodeDecodeError) as exc:
            raise InputError(_svmlight_error(source, start, stop, load, exc)) from None
        tick(stop - start)
        yield X, np.asarray(y, dtype=np.float64)


def _line_spans(source: Path) -> Iterator[tuple[int, int, int, int]]:
    """(start, stop, offset, length): the bytes [start, stop) hold whole lines, about
    SVMLIGHT_BYTES of them, and scikit-learn's ``offset``/``length`` that read exactly
    those lines.  (Its own byte chunks repeat a line longer than a chunk: every chunk
    starting inside it skips to the same next line.)  scikit-learn drops the line
    holding ``offset`` and stops after the first line ending past offset + length, so
    offset = start − 1 (the newline before ``start``) and length = stop − 1 − offset;
    the last span reads to the end."""
    size = source.stat().st_size
    with open(source, "rb") as f:
        start = 0
        while start < size:
            f.seek(start + max(SVMLIGHT_BYTES, 2) - 1)
            f.readline()
            stop = min(f.tell(), size)
            offset = max(start - 1, 0)
            yield start, stop, offset, (stop - 1 - offset if stop < size else -1)
            start = stop


def _svmlight_error(source: Path, start: int, stop: int, load, exc) -> str:
    """The message for lines [start, stop) scikit-learn refused: the first bad line,
    found by halving them (each line is parsed on its own)."""
    with open(source, "rb") as f:
        f.seek(start)
        lines = f.read(stop - start).splitlines(keepends=True)

    def fails(part) -> bool:
        try:
            load(io.BytesIO(b"".join(part)), n_features=PARSE_WIDTH, zero_based=True)
        except (ValueError, OverflowError, UnicodeDecodeError):
            return True
        return False

    lo, hi = 0, len(lines)
    if not lines or not fails(lines):
        return f"{source}: cannot read as svmlight ({exc})"
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if fails(lines[lo:middle]):
            hi = middle
        else:
            lo = middle
    line = _newlines_before(source, start) + lo + 1
    text = lines[lo].decode("utf-8", "replace").strip()
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{source}: line {line} is not svmlight ({exc}): {text!r}"


def _newlines_before(source: Path, stop: int) -> int:
    count = 0
    with open(source, "rb") as f:
        while f.tell() < stop:
            count += f.read(min(16 << 20, stop - f.tell())).count(b"\n")
    return count


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


def _npy_blocks(layout, width: int, tick) -> Iterator[tuple[int, np.ndarray]]:
    """(first, (k, n) float64 copy) of the columns of the (n, p) matrix ``layout``, by
    memory map, the pages read dropped after every block."""
    rows, offset, (n, p), fortran, source_dtype = layout
    with open(rows, "rb") as f_in:
        mm = mmap.mmap(f_in.fileno(), 0, access=mmap.ACCESS_READ)
    data = None
    try:
        data = np.frombuffer(mm, source_dtype, count=n * p, offset=offset)
        data = data.reshape((p, n) if fortran else (n, p))
        row_bytes = p * source_dtype.itemsize
        rows = max(1, STRIDED_BYTES // row_bytes)
        for first in range(0, p, width):
            last = min(first + width, p)
            if fortran:
                block = np.array(data[first:last], dtype=np.float64, order="C")
                drop_pages(mm, 0, len(mm))   # the page cache keeps them
            else:
                # a strided read maps whole pages (large folios: far more) of every
                # row it touches, so the rows are copied and released a band at a time
                block = np.empty((last - first, n))
                for top in range(0, n, rows):
                    bottom = min(top + rows, n)
                    block[:, top:bottom] = data[top:bottom, first:last].T
                    drop_pages(mm, offset + top * row_bytes,
                               offset + bottom * row_bytes)
            tick(last - first)
            yield first, block
    finally:
        data = None   # no view may outlive the mapping
        mm.close()


def _stream_blocks(stream, width: int, tick) -> Iterator[tuple[int, np.ndarray]]:
    """(first, (k, n) block) of a stream's columns, in index order."""
    for first in range(0, stream.n_features, width):
        last = min(first + width, stream.n_features)
        block = stream.columns(np.arange(first, last))
        tick(last - first)
        yield first, block


def _check_finite(source, first: int, block: np.ndarray) -> None:
    finite = np.isfinite(block).all(axis=1)
    if not finite.all():
        raise InputError(f"{source}: feature {first + int(np.argmin(finite))} contains "
                         "NaN or inf")


# -- writers ------------------------------------------------------------------------

def _write_dense(blocks, n: int, p: int, output: Path, dtype: np.dtype,
                 source, named=None) -> tuple[int, int]:
    """Append the column blocks to a Fortran-order (n, p) ``.npy`` at ``output``
    (under a temporary name until the last one); a full disk is the InputError
    naming ``named`` (default ``output``)."""
    tmp = output.with_name(output.name + ".tmp")
    try:
        with space_checked(named or output), open(tmp, "wb") as out:
            npy_format.write_array_header_2_0(
                out, {"descr": npy_format.dtype_to_descr(dtype), "fortran_order": True,
                      "shape": (n, p)})
            # the whole file's blocks first: a full disk is found before any work
            reserve(out, out.tell() + n * p * dtype.itemsize)
            for first, block in blocks:
                _check_finite(source, first, block)
                out.write(np.ascontiguousarray(block, dtype=dtype).tobytes())
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()
    os.replace(tmp, output)
    return n, p


def _tally(cols: np.ndarray, tally: np.ndarray) -> None:
    """Count the entries of column c in tally[1 + c] (pass 1; 0 ≤ c checked).

    numpy only: the conversion loads no compiled kernel (numba's first load alone
    costs some 50 MB of resident memory)."""
    if cols.size:
        seen, times = np.unique(cols, return_counts=True)
        tally[seen + 1] += times.astype(tally.dtype, copy=False)


def _accumulate(tally: np.ndarray) -> None:
    """Running sums of ``tally`` in place, a slice at a time (no O(p) temporary):
    the counts tally[1 + j] become indptr."""
    carry = 0
    for first in range(0, len(tally), _SLICE):
        piece = tally[first:first + _SLICE]
        np.cumsum(piece, dtype=piece.dtype, out=piece)
        if carry:
            piece += carry
        carry = int(piece[-1])


def _place(cols, rows, vals, cursor, size: int, rows_out, vals_out) -> bool:
    """Each entry (sorted by column, rows ascending within one) to its column's
    cursor, which moves past it; False if one would fall past the end (the input
    changed since it was counted; a column that overflows into the next is found at
    the end, its cursor then differing from indptr)."""
    if not cols.size:
        return True
    new = np.empty(len(cols), bool)
    new[0] = True
    np.not_equal(cols[1:], cols[:-1], out=new[1:])
    heads = np.flatnonzero(new)                   # each column's first entry here
    rank = np.arange(len(cols)) - np.repeat(heads, np.diff(np.r_[heads, len(cols)]))
    at = cursor[cols] + rank
    if at.max() >= size:
        return False
    rows_out[at] = rows
    vals_out[at] = vals
    cursor[cols[heads]] += np.diff(np.r_[heads, len(cols)]).astype(cursor.dtype)
    return True


class _Output:
    """A 1-D ``.npy`` of ``length`` entries created at its final size and mapped for
    writing (``array``); ``release`` unmaps the pages of entries already written."""

    def __init__(self, path: Path, dtype: np.dtype, length: int):
        with open(path, "wb+") as f:
            npy_format.write_array_header_1_0(
                f, {"descr": npy_format.dtype_to_descr(dtype), "fortran_order": False,
                    "shape": (length,)})
            self.offset, self.item = f.tell(), dtype.itemsize
            f.truncate(self.offset + length * dtype.itemsize)
            # blocks allocated now: a store into a map of holes on a full disk is
            # a SIGBUS (io/writable.py), an allocation that fails is an ENOSPC
            reserve(f, self.offset + length * dtype.itemsize)
            self.mm = mmap.mmap(f.fileno(), 0) if length else None
        self.array = np.frombuffer(self.mm, dtype, count=length, offset=self.offset) \
            if length else np.zeros(0, dtype)

    def release(self, start: int, stop: int) -> None:
        if self.mm is not None:
            drop_pages(self.mm, self.offset + start * self.item,
                       self.offset + stop * self.item)

    def close(self, flush: bool) -> None:
        self.array = None   # no view may outlive the map
        if self.mm is not None:
            if flush:
                self.mm.flush()
            self.mm.close()
            self.mm = None


def _write_indptr(path: Path, indptr: np.ndarray) -> tuple:
    """Write ``indptr.npy`` a slice at a time, int32 when nnz fits (the reader takes
    int32 or int64), else int64.  Returns (path, offset of the data, dtype) to read
    it back."""
    dtype = np.dtype(np.int32 if indptr[-1] <= INT32_MAX else np.int64)
    with open(path, "wb") as out:
        npy_format.write_array_header_1_0(
            out, {"descr": npy_format.dtype_to_descr(dtype), "fortran_order": False,
                  "shape": (len(indptr),)})
        offset = out.tell()
        for first in range(0, len(indptr), _SLICE):
            out.write(indptr[first:first + _SLICE].astype(dtype, copy=False).data)
    return path, offset, dtype


def _cursors_at_ends(cursor: np.ndarray, path: Path, offset: int,
                     dtype: np.dtype) -> bool:
    """Whether every column's cursor reached the next one's start (indptr[j + 1],
    read back a slice at a time): each column got exactly what was counted."""
    with open(path, "rb") as f:
        for first in range(0, len(cursor), _SLICE):
            f.seek(offset + (first + 1) * dtype.itemsize)
            ends = np.fromfile(f, dtype, count=min(_SLICE, len(cursor) - first))
            if not np.array_equal(cursor[first:first + len(ends)], ends):
                return False
    return True


class _CSCWriter:
    """A ``.csc`` directory being written under a temporary name: ``scatter`` rows
    (in increasing order) or ``append`` whole columns (in order); leaving the
    ``with`` block normally checks every column is full and renames it into place,
    an exception removes it.

    Resident memory stays bounded whatever nnz: a chunk of rows is sorted by column
    and written a segment of columns at a time (``segment_bytes`` of output), the
    pages of each segment released once it is written.  The one O(p) array is the
    count's tally, made ``indptr`` in place and written to ``indptr.npy``; then its
    first p entries are the columns' cursors, each moved past the entries placed in
    its column, and checked at the end against ``indptr.npy`` read back a slice at a
    time (cursor j at indptr[j + 1]: every column holds what was counted).
    """

    def __init__(self, output: Path, count: _Count, dtype: np.dtype, labels,
                 segment_bytes: int):
        self.output, self.count, self.dtype, self.labels = output, count, dtype, labels
        self.segment_bytes = segment_bytes
        self.temporary = output.with_name(f"{output.name}.tmp-{os.getpid()}")
        self.files: list[_Output] = []

    def __enter__(self) -> _CSCWriter:
        shutil.rmtree(self.temporary, ignore_errors=True)
        self.temporary.mkdir()
        try:
            return self._start()
        except BaseException:   # ``__exit__`` runs only once ``__enter__`` returned
            self._discard()
            raise

    def _start(self) -> _CSCWriter:
        count = self.count
        index_dtype = np.dtype(np.int32 if count.n <= INT32_MAX else np.int64)
        # segments of columns holding about segment_bytes of output each
        per_entry = index_dtype.itemsize + self.dtype.itemsize
        step = max(1, self.segment_bytes // per_entry)
        indptr = count.tally
        _accumulate(indptr)
        inner = np.searchsorted(indptr, np.arange(step, count.nnz, step,
                                                  dtype=indptr.dtype),
                                side="right") - 1
        self.cuts = np.unique(np.r_[0, inner, count.p])
        self.offsets = indptr[self.cuts].astype(np.int64)
        self.indptr = _write_indptr(self.temporary / "indptr.npy", indptr)
        self.cursor = indptr[:-1]
        self.filled, self.appended = 0, False
        self.files = [_Output(self.temporary / "indices.npy", index_dtype, count.nnz),
                      _Output(self.temporary / "data.npy", self.dtype, count.nnz)]
        return self

    def scatter(self, rowptr, cols, vals, first_row: int, source) -> None:
        """Rows first_row.. (a CSR piece) to their columns."""
        if cols.size and (cols.min() < 0 or cols.max() >= self.count.p):
            raise InputError(f"{source}: changed while converting")
        rows = np.repeat(np.arange(first_row, first_row + len(rowptr) - 1),
                         np.diff(rowptr))
        order = np.argsort(cols, kind="stable")   # rows stay ascending per column
        cols, rows, vals = cols[order], rows[order], vals[order]
        bounds = np.searchsorted(cols, self.cuts)
        indices, data = (f.array for f in self.files)
        for segment in range(len(self.cuts) - 1):
            lo, hi = bounds[segment], bounds[segment + 1]
            if lo == hi:
                continue
            if not _place(cols[lo:hi], rows[lo:hi], vals[lo:hi], self.cursor,
                          self.count.nnz, indices, data):
                raise InputError(f"{source}: changed while converting")
            for f in self.files:
                f.release(self.offsets[segment], self.offsets[segment + 1])

    def append(self, rows: np.ndarray, vals: np.ndarray) -> None:
        """The next whole columns' entries, in order."""
        start, stop = self.filled, self.filled + len(rows)
        if stop > self.count.nnz:
            raise InputError(f"{self.output}: the input changed while converting")
        for f, values in zip(self.files, (rows, vals), strict=True):
            f.array[start:stop] = values
            f.release(start, stop)
        self.filled, self.appended = stop, True

    def __exit__(self, kind, error, trace) -> None:
        try:
            if kind is None:
                self._finish()
                return
        except BaseException:
            self._discard()
            raise
        self._discard()

    def _finish(self) -> None:
        full = self.filled == self.count.nnz if self.appended else \
            _cursors_at_ends(self.cursor, *self.indptr)
        if not full:
            raise InputError(f"{self.output}: the input changed while converting")
        for f in self.files:
            f.close(flush=True)
        count = self.count
        if self.labels is not None:
            np.save(self.temporary / "labels.npy", self.labels, allow_pickle=False)
        (self.temporary / "meta.json").write_text(json.dumps(
            csc_meta(count.n, count.p, count.nnz, self.dtype)))
        install(self.temporary, self.output)

    def _discard(self) -> None:
        for f in self.files:
            f.close(flush=False)
        shutil.rmtree(self.temporary, ignore_errors=True)


def count_rows(source: Path, label_column=None) -> tuple[int, int, np.ndarray | None]:
    """(n, p, labels or None) of a csv/tsv/txt or svmlight file in one pass of
    bounded memory (the conversion's count): what an Asy-OS server needs of a data
    file, without holding its values."""
    kind = "svmlight" if source.suffix.lower() in SVMLIGHT_SUFFIXES else "text"
    job = _Job(source, kind, np.dtype(np.float64), label_column, BLOCK_BYTES, None)
    count = job.count()
    return count.n, count.p, job.labels
