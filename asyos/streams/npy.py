"""A stream over an (n, p) ``.npy`` file, read a block at a time without loading it.

Two layouts are accepted.  The *feature-major* layout is a Fortran-order (n, p) file
(``save_feature_major``): each column is one contiguous run of n values on disk, so a
block is one sequential read.  An ordinary C-order file works too, but every column
is strided across all n rows: it is gathered from a memory map a cache line of the
block at a time (``array.gather_columns``); at the paper's size a pass over the file
takes a third longer than feature-major, one over a worker's shard twice as long.

Resident memory must not grow with p.  A feature-major block is read with ``pread``
into an array of the stream's own (``streams.pool``), so the file's pages stay in the
OS page cache (cheap to reread) and never count in this process's RSS.  A C-order file
is read through a memory map, and after copying a block the range just read is
dropped with ``madvise(MADV_DONTNEED)``.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from ..errors import InputError
from .array import check_design_shape, gather_columns, gathers, warm_gather
from .base import FeatureStream

_PAGE = mmap.PAGESIZE
_FAULT_AROUND = 1 << 16   # Linux's default fault_around_bytes
GAP_BYTES = 1 << 15   # a gap this small is read and dropped rather than skipped by a
#                       system call more (docs/benchmarks.md, "Reading a shard")
_IOV_MAX = 1024       # buffers in one preadv (Linux's IOV_MAX)


def save_feature_major(path, X) -> None:
    """Write an (n, p) array as a Fortran-order ``.npy`` (the fast NpyStream layout)."""
    np.save(path, np.asfortranarray(X))


def _check_size(path: Path, f, expected: int) -> None:
    size = os.fstat(f.fileno()).st_size
    if size != expected:
        raise InputError(f"{path}: file has {size} bytes but its header needs "
                         f"{expected} (truncated or corrupt)")


def map_file(path: Path, expected: int) -> mmap.mmap:
    """A read-only memory map of ``path``, whose size must be ``expected`` bytes (its
    header's promise), or InputError naming the path."""
    try:
        with open(path, "rb") as f:
            _check_size(path, f, expected)
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise InputError(f"{path}: cannot map the file ({exc})") from None


def open_sized(path: Path, expected: int):
    """``path`` opened unbuffered for ``read_exactly``; its size must be ``expected``
    bytes (its header's promise), or InputError naming the path."""
    try:
        f = open(path, "rb", buffering=0)   # kept open by its reader
    except OSError as exc:
        raise InputError(f"{path}: cannot open the file ({exc})") from None
    try:
        _check_size(path, f, expected)
    except InputError:
        f.close()
        raise
    return f


def read_exactly(f, view: memoryview, where: int, path) -> None:
    """Fill ``view`` with the bytes of ``f`` from ``where`` on, by pread: the pages
    stay in the page cache and never count in this process's resident memory (a
    memory map's would, and on kernels with large page-cache folios a fault maps far
    more than was read)."""
    done = 0
    while done < len(view):   # pread may return short (signals, large reads)
        got = os.preadv(f.fileno(), [view[done:]], where + done)
        if got <= 0:
            raise InputError(f"{path}: the file ended early (truncated while open?)")
        done += got


def advise(mm: mmap.mmap, option, start: int, stop: int) -> None:
    """madvise(option) on [start, stop) of ``mm``, start rounded down to a page boundary
    (the kernel rounds the length up); a no-op where the platform lacks it."""
    if option is None or not hasattr(mm, "madvise"):
        return
    start -= start % _PAGE
    stop = min(stop, len(mm))
    if stop > start:
        mm.madvise(option, start, stop - start)


def drop_pages(mm: mmap.mmap, start: int, stop: int) -> None:
    """Unmap the pages of [start, stop) just copied; the page cache keeps them, so a
    reread is cheap (and a shared writable map's changes stay in the file).

    A read fault maps the cached pages of the whole aligned window around it
    ("fault-around", 64 KiB), some before the range just read, so the range is
    widened by that much on both sides: with small blocks (a CSC block can be a few
    KiB) those strays would otherwise add up to most of the file."""
    advise(mm, getattr(mmap, "MADV_DONTNEED", None), max(0, start - _FAULT_AROUND),
           stop + _FAULT_AROUND)


def _read_header(path: Path) -> tuple[tuple, bool, np.dtype, int]:
    """(shape, fortran_order, dtype, data offset) of a .npy file, or InputError."""
    try:
        with open(path, "rb") as f:
            version = npy_format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = npy_format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = npy_format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            return shape, fortran, dtype, f.tell()
    except (OSError, ValueError, EOFError, SyntaxError) as exc:
        raise InputError(f"{path}: not a readable .npy file ({exc})") from None


class NpyStream(FeatureStream):
    """Columns of an (n, p) float32/float64 ``.npy`` file, by memory map.

    The header is parsed and the file size checked against it up front, so a wrong
    dtype, a non-2-D or empty array, or a truncated file fails at once with an
    InputError naming the path.  Blocks are in the stream's ``dtype`` (float64 by
    default) whatever the file's float type: a float32 file read as float32 is not copied
    twice.
    """

    def __init__(self, path, *, block_size: int = 256, shuffle: bool = False,
                 seed: int = 0, dtype="float64"):
        super().__init__(block_size=block_size, shuffle=shuffle, seed=seed,
                         dtype=dtype)
        self.path = Path(path)
        shape, self.fortran_order, dtype, self._offset = _read_header(self.path)
        if dtype.kind != "f" or dtype.itemsize not in (4, 8):
            raise InputError(f"{self.path}: dtype {dtype} is not float32 or float64")
        try:
            self.n_samples, self.n_features = check_design_shape(shape, "the array")
        except InputError as exc:
            raise InputError(f"{self.path}: {exc}") from None
        self._dtype = dtype
        self._column_bytes = self.n_samples * dtype.itemsize
        self._open()

    def _open(self) -> None:
        n, p, path = self.n_samples, self.n_features, self.path
        expected = self._offset + n * p * self._dtype.itemsize
        if self.fortran_order:   # read by pread
            self._file = open_sized(path, expected)   # closed when collected
            # where a stretch's gaps are read to (never looked at: threads share it)
            self._skip = memoryview(bytearray(self._gap_columns * self._column_bytes))
            if not self.shuffle and hasattr(os, "posix_fadvise"):
                os.posix_fadvise(self._file.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            return
        self._mm = map_file(path, expected)
        data = np.frombuffer(self._mm, self._dtype, count=n * p, offset=self._offset)
        self._data = data.reshape(n, p)
        if gathers(self._data):
            warm_gather(self._data)

    def _read(self, indices: np.ndarray) -> np.ndarray:
        if self.fortran_order:
            return self._read_columns(indices)
        if gathers(self._data):   # X's rows, a cache line of the block at a time
            block = self._empty_block(len(indices), self._dtype)
            gather_columns(self._data, np.asarray(indices, np.int64), block)
        else:   # (another byte order) a copy, strided over all n rows
            block = self._data[:, indices].T
        item, p = self._dtype.itemsize, self.n_features
        lo, hi = int(indices.min()), int(indices.max()) + 1
        drop_pages(self._mm, self._offset + lo * item,
                   self._offset + ((self.n_samples - 1) * p + hi) * item)
        return block

    def _read_columns(self, indices: np.ndarray) -> np.ndarray:
        """Feature-major: each stretch of runs of adjacent columns whose gaps are
        under ``GAP_BYTES`` is one ``preadv``, the columns straight into the block and
        the gaps into a scratch buffer.  A small problem's shard (every q-th column)
        then costs one system call a block, not one a column (which made reading most
        of a worker's time on cheap steps); a large one's pieces are runs of adjacent
        columns, one call each.  The runs are found by numpy, so a block costs a
        Python iteration per run, not per column.  Not a memory map: its pages would
        count in this process's resident memory until dropped (and read-ahead maps
        more than was read), while pread leaves them in the page cache only, so RSS
        stays at one block (and the scratch buffer)."""
        block = self._empty_block(len(indices), self._dtype)
        if not len(indices):
            return block
        view = memoryview(block).cast("B")
        indices = np.asarray(indices, np.int64)
        breaks = np.flatnonzero(np.diff(indices) != 1) + 1   # runs: [starts, stops)
        gaps = (indices[breaks] - indices[breaks - 1] - 1).tolist()   # between runs
        starts, stops = [0] + breaks.tolist(), breaks.tolist() + [len(indices)]
        first, widest = 0, self._gap_columns
        for k in range(1, len(starts) + 1):   # a stretch: runs [first, k)
            if k == len(starts) or k - first == _IOV_MAX // 2 or \
                    not 0 <= gaps[k - 1] <= widest:
                self._read_stretch(view, indices, starts[first:k], stops[first:k])
                first = k
        return block

    @property
    def _gap_columns(self) -> int:
        return GAP_BYTES // self._column_bytes

    def _read_stretch(self, view: memoryview, indices: np.ndarray, starts: list,
                      stops: list) -> None:
        """The runs ``indices[starts[k]:stops[k]]`` (each of adjacent columns, in
        increasing order with small gaps between them) into their rows of the block
        ``view``: one ``preadv``; a short read (a signal) reads them again one run at
        a time."""
        size = self._column_bytes
        where = [self._offset + int(indices[a]) * size for a in starts]
        if len(starts) > 1:
            skip = self._skip
            buffers = []
            for k, (a, b) in enumerate(zip(starts, stops)):
                if k:   # the columns between the previous run and this one
                    buffers.append(skip[:where[k] - where[k - 1] - (a - starts[k - 1])
                                        * size])
                buffers.append(view[a * size:b * size])
            if os.preadv(self._file.fileno(), buffers, where[0]) == \
                    where[-1] - where[0] + (stops[-1] - starts[-1]) * size:
                return
        for a, b, at in zip(starts, stops, where):
            read_exactly(self._file, view[a * size:b * size], at, self.path)
