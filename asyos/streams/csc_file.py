"""A stream over a sparse matrix stored by columns on disk: the ``.csc`` directory.

Layout (``asyos convert`` writes it; ``save_csc`` writes one from memory)::

    data.csc/
        meta.json     {"format": "asyos-csc", "version": 1, "n_samples": n,
                       "n_features": p, "nnz": nnz, "dtype": "float64"}
        indptr.npy    int64 or int32 (p + 1,): column j is entries
                      indptr[j]:indptr[j+1] (``asyos convert`` writes int32 when
                      nnz < 2³¹, ``save_csc`` int64; both read alike)
        indices.npy   int32 or int64 (nnz,): row indices, ascending within a column
        data.npy      float32 or float64 (nnz,): the values
        labels.npy    (n,) labels, when the input had them (optional)

The ``.npy`` files are uncompressed, so a block of columns is read straight from
them with ``pread``, like ``NpyStream``'s feature-major file: a contiguous range of
columns is one read per file (``indptr``, ``indices``, ``data``); a shuffled or
sharded block reads its columns' entries in runs of near ones and gathers them.  The
pages read stay in the page cache, never in this process's resident memory, which
is one block whatever nnz and p are: ``indptr`` too is read a block's slice at a time
(and checked a slice at a time when the directory is opened), and an unshuffled
stream makes its feature order a block at a time (``FeatureStream.order_chunks``),
never the O(p) index list.  (A memory map with the pages dropped behind
each block kept a quarter of ``data.npy`` resident on a kernel whose page cache
maps large folios: a fault maps the whole folio, partly outside the range dropped.)
The sizes, ``indptr`` and the dtypes are checked when the directory is opened; the
row indices of each block as it is read (a bad row index must never reach the
compiled kernel).

A directory of at most ``WHOLE_BYTES`` (64 MiB: a few million nonzeros) is instead
read whole when it is opened, its row indices checked once, and sliced in memory as
``SparseStream`` slices a scipy matrix.  There a shuffled order (each of the vote's
orders) and a closing sweep would otherwise cost one ``pread`` per run of scattered
columns, about 400 a block: 10 of the 13 s of `asyos run` on a 7 MB man-page corpus
(docs/results.md, "Real text: man pages").
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from .._files import space_checked
from ..errors import InputError
from .array import check_design_shape
from .npy import _read_header, open_sized, read_exactly
from .sparse import CSCColumns, columns_per_block, slice_columns

CSC_SUFFIX = ".csc"
FORMAT, VERSION = "asyos-csc", 1
FILES = ("meta.json", "indptr.npy", "indices.npy", "data.npy")
_CHECKED = 1 << 18   # indptr entries checked at a time when a directory is opened
WHOLE_BYTES = 64 << 20   # a directory this small is read whole when opened
_GAP = 1 << 12       # bytes: spans this close are read in one run (a page: reading
                     # more costs more than a call; a gathered block reads at most
                     # its columns' entries plus a page per column)


def is_csc(path) -> bool:
    """Whether ``path`` names a ``.csc`` directory (by its suffix)."""
    return Path(str(path)).suffix.lower() == CSC_SUFFIX


def csc_meta(n: int, p: int, nnz: int, dtype) -> dict:
    return {"format": FORMAT, "version": VERSION, "n_samples": int(n),
            "n_features": int(p), "nnz": int(nnz), "dtype": np.dtype(dtype).name}


def install(temporary: Path, final: Path) -> None:
    """Move the finished directory ``temporary`` to ``final``, replacing an earlier
    ``.csc`` directory there (``check_replaceable`` said it may be replaced)."""
    old = None
    if final.exists():
        old = final.with_name(f"{final.name}.old-{os.getpid()}")
        os.rename(final, old)
    os.rename(temporary, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def check_replaceable(final: Path) -> None:
    """InputError unless ``final`` is absent, an empty directory or a ``.csc``
    directory (never delete what asyos did not write)."""
    if not final.exists() and not final.is_symlink():
        return
    if final.is_dir() and not final.is_symlink() and (
            not any(final.iterdir()) or (final / "meta.json").is_file()):
        return
    raise InputError(f"{final}: exists and is not a .csc directory; not replacing it")


def save_csc(path, X, y=None, *, dtype="float64") -> Path:
    """Write an in-memory (n, p) matrix (scipy.sparse or dense) as a ``.csc``
    directory, with labels ``y`` when given."""
    import scipy.sparse as sp

    final = Path(path)
    if not is_csc(final):
        raise InputError(f"{final}: a .csc directory's name ends in .csc")
    check_replaceable(final)
    X = sp.csc_matrix(X, dtype=np.dtype(dtype))
    X.sum_duplicates()
    X.sort_indices()
    n, p = check_design_shape(X.shape, "X")
    temporary = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir()
    try:   # a full disk: one line naming the directory, the folder removed
        with space_checked(final, temporary):
            _write_arrays(temporary, X, y, n, p, dtype)
        install(temporary, final)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return final


def _write_arrays(temporary: Path, X, y, n: int, p: int, dtype) -> None:
    """The arrays and meta.json of a ``.csc`` directory into ``temporary``."""
    np.save(temporary / "indptr.npy", X.indptr.astype(np.int64))
    np.save(temporary / "indices.npy",
            X.indices.astype(np.int32 if n < 2**31 else np.int64))
    np.save(temporary / "data.npy", X.data)
    if y is not None:
        np.save(temporary / "labels.npy", np.asarray(y))
    (temporary / "meta.json").write_text(json.dumps(csc_meta(n, p, X.nnz, dtype)))


def _meta(path: Path) -> dict:
    """meta.json of the directory ``path``, checked."""
    if not path.is_dir():
        raise InputError(f"{path}: no such directory" if not path.exists() else
                         f"{path}: a .csc input must be a directory")
    for name in FILES:
        if not (path / name).is_file():
            raise InputError(f"{path}: not a .csc directory (no {name})")
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: meta.json is not readable JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(f"{path}: meta.json does not say format {FORMAT!r}")
    if meta.get("version") != VERSION:
        raise InputError(f"{path}: .csc version {meta.get('version')!r}; this asyos "
                         f"reads version {VERSION}")
    for key in ("n_samples", "n_features", "nnz"):
        value = meta.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"{path}: meta.json {key} must be a whole number ≥ 0, "
                             f"got {value!r}")
    if meta.get("dtype") not in ("float32", "float64"):
        raise InputError(f"{path}: meta.json dtype must be float32 or float64, got "
                         f"{meta.get('dtype')!r}")
    return meta


class _Entries:
    """One 1-D ``.npy`` of the directory (its length and dtype checked), read by
    ``pread``."""

    def __init__(self, path: Path, length: int, kinds: tuple[str, ...]):
        shape, _, self.dtype, self.offset = _read_header(path)
        if self.dtype.str.lstrip("<|=") not in kinds:
            raise InputError(f"{path}: dtype {self.dtype} is not one of "
                             f"{', '.join(kinds)}")
        if shape != (length,):
            raise InputError(f"{path}: shape {shape}, expected ({length},) from "
                             "meta.json")
        self.path, self.item = path, self.dtype.itemsize
        self.file = open_sized(path, self.offset + length * self.item)

    def read(self, start: int, stop: int) -> np.ndarray:
        """Entries [start, stop), one read."""
        out = np.empty(stop - start, self.dtype)
        read_exactly(self.file, memoryview(out).cast("B"),
                     self.offset + start * self.item, self.path)
        return out

    def gather(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """The entries [starts[k], stops[k]) one after the other (any order, overlaps
        allowed), read a run of spans less than ``_GAP`` apart at a time."""
        order = np.argsort(starts, kind="stable")
        first, last = starts[order], np.maximum.accumulate(stops[order])
        cut = np.flatnonzero(first[1:] > last[:-1] + _GAP // self.item) + 1
        heads, tails = np.r_[0, cut], np.r_[cut, len(first)] - 1
        lo, hi = first[heads], last[tails]
        at = np.zeros(len(lo) + 1, np.int64)
        np.cumsum(hi - lo, out=at[1:])
        runs = np.empty(at[-1], self.dtype)
        view = memoryview(runs).cast("B")
        for run in np.flatnonzero(hi > lo).tolist():   # empty columns: nothing to read
            read_exactly(self.file, view[at[run] * self.item:at[run + 1] * self.item],
                         self.offset + int(lo[run]) * self.item, self.path)
        run_of = np.repeat(np.arange(len(lo)), tails - heads + 1)
        base = np.empty(len(starts), np.int64)   # span k's first entry in ``runs``
        base[order] = at[:-1][run_of] + first - lo[run_of]
        lengths = stops - starts
        ends = np.cumsum(lengths)
        return runs[np.repeat(base - ends + lengths, lengths) + np.arange(
            ends[-1] if len(ends) else 0)]


def _open_indptr(path: Path, meta: dict) -> _Entries:
    """indptr.npy of the directory ``path``, checked against meta ``_CHECKED`` entries
    at a time (never held whole)."""
    p, nnz = meta["n_features"], meta["nnz"]
    indptr = _Entries(path / "indptr.npy", p + 1, ("i8", "i4"))
    first, end = indptr.read(0, 1)[0], indptr.read(p, p + 1)[0]
    if first != 0:
        raise InputError(f"{path}: indptr.npy must start at 0, got {first}")
    for start in range(0, p, _CHECKED):
        falls = np.diff(indptr.read(start, min(start + _CHECKED, p) + 1)) < 0
        if falls.any():
            raise InputError(f"{path}: indptr.npy decreases at feature "
                             f"{start + int(np.argmax(falls))} (it must be "
                             "non-decreasing)")
    if end != nnz:
        raise InputError(f"{path}: indptr.npy ends at {end}, but meta.json says "
                         f"nnz = {nnz}")
    return indptr


def read_labels(path) -> np.ndarray | None:
    """labels.npy of the ``.csc`` directory ``path``, or None when it has none."""
    path = Path(path)
    meta = _meta(path)
    if not (path / "labels.npy").is_file():
        return None
    try:
        y = np.load(path / "labels.npy", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise InputError(f"{path / 'labels.npy'}: cannot read labels ({exc})") from None
    if y.shape != (meta["n_samples"],):
        raise InputError(f"{path / 'labels.npy'}: shape {y.shape}, expected "
                         f"({meta['n_samples']},) labels")
    return y


class CSCFileStream(CSCColumns):
    """Columns of a ``.csc`` directory, read block by block with ``pread`` (or whole,
    up to ``WHOLE_BYTES``).

    The sparse kernel reads it exactly as it reads ``SparseStream`` over the same
    matrix (the same CSC blocks), so the results are the same; resident memory is
    one block, whatever nnz and p are, above ``WHOLE_BYTES``.  ``labels()`` gives the
    directory's labels (None without ``labels.npy``).  ``block_size`` None:
    ``columns_per_block``.
    """

    def __init__(self, path, *, block_size: int | None = None, shuffle: bool = False,
                 seed: int = 0, dtype="float64"):
        super().__init__(block_size=256 if block_size is None else block_size,
                         shuffle=shuffle, seed=seed, dtype=dtype)
        self.path = Path(path)
        meta = _meta(self.path)
        try:
            self.n_samples, self.n_features = check_design_shape(
                (meta["n_samples"], meta["n_features"]), "the matrix")
        except InputError as exc:
            raise InputError(f"{self.path}: {exc}") from None
        self.nnz = meta["nnz"]
        if block_size is None:
            self.block_size = columns_per_block(self.n_features, self.nnz)
        self._indptr = _open_indptr(self.path, meta)
        self._rows = _Entries(self.path / "indices.npy", self.nnz, ("i4", "i8"))
        self._vals = _Entries(self.path / "data.npy", self.nnz,
                              ("f4" if meta["dtype"] == "float32" else "f8",))
        self._whole = self._scipy = None
        size = (self.n_features + 1) * self._indptr.item + self.nnz * (
            self._rows.item + self._vals.item)
        if size <= WHOLE_BYTES:   # read once, checked once; then sliced in memory
            indptr = self._indptr.read(0, self.n_features + 1).astype(np.int64)
            rows = self._rows.read(0, self.nnz)
            self._check_rows(np.arange(self.n_features), indptr, rows)
            self._whole = indptr, rows, self._vals.read(0, self.nnz)
            self.prefetch = False   # as ``SparseStream``'s: a slice is a view

    def labels(self) -> np.ndarray | None:
        return read_labels(self.path)

    def _what(self) -> str:
        return f"{self.path}: "

    def _matrix(self):
        if self._whole is not None and self._scipy is None:
            import scipy.sparse as sp

            indptr, rows, vals = self._whole
            self._scipy = sp.csc_matrix((vals, rows, indptr),
                                        shape=(self.n_samples, self.n_features))
        return self._scipy

    def _slice(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._whole is not None:
            return slice_columns(*self._whole, index)
        indptr = np.zeros(len(index) + 1, np.int64)
        if len(index) and np.all(np.diff(index) == 1):   # a range: one read each
            bounds = self._indptr.read(int(index[0]), int(index[-1]) + 2)
            bounds = bounds.astype(np.int64, copy=False)
            np.subtract(bounds[1:], bounds[0], out=indptr[1:])
            lo, hi = int(bounds[0]), int(bounds[-1])
            rows, vals = self._rows.read(lo, hi), self._vals.read(lo, hi)
        else:                                            # shuffled, a shard: gathers
            bounds = self._indptr.gather(index, index + 2).reshape(-1, 2)
            starts, stops = bounds.astype(np.int64, copy=False).T
            np.cumsum(stops - starts, out=indptr[1:])
            rows = self._rows.gather(starts, stops)
            vals = self._vals.gather(starts, stops)
        self._check_rows(index, indptr, rows)
        return indptr, rows, vals

    def _check_rows(self, index, indptr, rows) -> None:
        """Row indices in [0, n), strictly ascending within each column."""
        if rows.size == 0:
            return
        if rows.min() < 0 or rows.max() >= self.n_samples:
            at = int(np.argmax((rows < 0) | (rows >= self.n_samples)))
            column = np.searchsorted(indptr, at, side="right") - 1
            raise InputError(f"{self.path}: feature {int(index[column])} has row index "
                             f"{int(rows[at])}, outside 0..{self.n_samples - 1}")
        falls = np.diff(rows) <= 0
        boundaries = indptr[1:-1] - 1                 # between columns: no order
        falls[boundaries[(boundaries >= 0) & (boundaries < falls.size)]] = False
        if falls.any():
            column = np.searchsorted(indptr, int(np.argmax(falls)) + 1,
                                     side="right") - 1
            raise InputError(f"{self.path}: the row indices of feature "
                             f"{int(index[column])} are not strictly ascending "
                             "(unsorted or repeated)")
