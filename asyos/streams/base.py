"""The feature stream: columns of X, feature by feature, in blocks.

OS touches one feature at a time, so the solver never needs X in memory: a
stream hands it blocks of columns, each block a C-contiguous (b, n) array (float64, or
float32 with ``dtype="float32"``) whose
row k is column ``indices[k]`` of X.  Ordering (optionally a per-epoch shuffle),
chunking, sharding and the NaN/inf check live here once; a subclass only says how to
read a set of columns (``_read``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from ..core.kept_set import KeptSet
from ..core.validate import check_int
from ..errors import InputError
from .pool import BlockPool
from .prefetch import prefetch
from .runs import Runs

Block = tuple[np.ndarray, np.ndarray]


DTYPES = (np.dtype(np.float64), np.dtype(np.float32))

# A pass that gathers at most this many bytes from memory is read in the caller: a
# read-ahead thread, started, fed and joined every pass, costs more there than the
# reads it hides (at 200 × 500 float64, 1.4 ms of a 4.3 ms fit; at 1000 × 4000 it
# saves a third: docs/benchmarks.md, "Small fits: the fixed cost against OMP").
READ_AHEAD_BYTES = 4 << 20


def check_dtype(dtype) -> np.dtype:
    """The storage and compute type of the columns: float64 or float32 (half the
    memory; the kernel accumulates in float64)."""
    try:
        value = np.dtype(dtype)
    except TypeError:
        value = None
    if value not in DTYPES:
        raise InputError(f"dtype must be float64 or float32, got {dtype!r}")
    return value


def batch_columns(pairs: Iterable[tuple[int, np.ndarray]],
                  size: int) -> Iterator[Block]:
    """Group a stream of (index, column) pairs into raw (indices, block) batches.

    For sources that can only be read in order (generators): the batches have the same
    shape as those ``FeatureStream._raw_blocks`` yields for random-access sources.
    """
    index: list[int] = []
    cols: list[np.ndarray] = []
    for j, col in pairs:
        index.append(j)
        cols.append(col)
        if len(index) == size:
            yield np.asarray(index, np.int64), np.stack(cols)
            index, cols = [], []
    if index:
        yield np.asarray(index, np.int64), np.stack(cols)


def _order_chunks(order: np.ndarray, size: int,
                  runs: Runs | None) -> Iterator[np.ndarray]:
    """Pieces of ``order``: positions in ``runs`` (a permutation), or the indices
    themselves (None)."""
    for first in range(0, len(order), size):
        piece = order[first:first + size]
        yield runs.at(piece) if runs is not None else piece.astype(np.int64, copy=False)


class FeatureStream:
    """Yields the columns of an (n_samples, n_features) design X feature by feature.

    Parameters
    ----------
    block_size : columns per block (default 256): large enough to amortise the Python
        overhead per block, small enough that a block of n·b doubles stays in cache.
    shuffle : visit the features in a fresh random order every epoch, drawn from
        ``np.random.default_rng([seed, epoch])`` so every run (and every MPI worker)
        sees the same order for the same (seed, epoch).
    seed : non-negative int.

    Subclasses set ``n_samples`` and ``n_features`` and implement ``_read``.
    """

    n_samples: int
    n_features: int
    sparse = False   # True: ``step_blocks`` yields CSCBlocks (``SparseStream``)
    reorderable = True   # False: its order is its source's (``reordered`` refuses)
    in_memory = False   # True: a read is a gather from memory (``ArrayStream``)

    def __init__(self, *, block_size: int = 256, shuffle: bool = False, seed: int = 0,
                 dtype="float64"):
        self.block_size = check_int("block_size", block_size, 1)
        self.dtype = check_dtype(dtype)
        self.prefetch = True   # read ahead in a thread; False: read in the caller
        if not isinstance(shuffle, (bool, np.bool_)):
            raise InputError(f"shuffle must be True or False, got {shuffle!r}")
        self.shuffle = bool(shuffle)
        self.seed = check_int("seed", seed, 0)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(n_samples={self.n_samples}, "
                f"n_features={self.n_features}, block_size={self.block_size}, "
                f"shuffle={self.shuffle}, seed={self.seed})")

    # -- what subclasses provide ------------------------------------------------------
    def _read(self, indices: np.ndarray) -> np.ndarray:
        """(len(indices), n) block of the columns with these GLOBAL indices."""
        raise NotImplementedError

    def feature_indices(self) -> np.ndarray:
        """The int64 global indices this stream yields, in base (epoch) order."""
        return np.arange(self.n_features, dtype=np.int64)

    def _runs(self) -> Runs | None:
        """``feature_indices()`` as runs of consecutive indices (a plain stream: 0..p-1;
        a shard of one: its pieces), else None.  Orders of runs are made a block at a
        time, or from a narrow permutation, instead of holding the O(p) int64 indices
        (80 MB at p = 10⁷) and copies of them."""
        if type(self).feature_indices is not FeatureStream.feature_indices:
            return None
        return Runs.range(self.n_features)

    def _holds(self, indices: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``indices`` this stream holds (range check here)."""
        return (indices >= 0) & (indices < self.n_features)

    def _raw_blocks(self, order: np.ndarray, block_size: int) -> Iterator[Block]:
        """(indices, block) batches of ``order`` (sequential sources override)."""
        for start in range(0, len(order), block_size):
            index = order[start:start + block_size]
            yield index, self._read(index)

    # -- the interface ----------------------------------------------------------------
    def order(self, epoch: int = 0) -> np.ndarray:
        """The global indices in the order ``blocks(epoch)`` yields them."""
        epoch = check_int("epoch", epoch, 0)
        runs = self._runs()
        if runs is not None and self.shuffle:
            return runs.at(self._permutation(epoch))
        base = self.feature_indices()
        if not self.shuffle:
            return base
        return base[np.random.default_rng([self.seed, epoch]).permutation(len(base))]

    def _permutation(self, epoch: int) -> np.ndarray:
        """``default_rng([seed, epoch]).permutation(len)`` of this stream's features,
        as int32 when they fit (the same shuffle: the draws do not depend on the
        type), half the memory of the int64 one."""
        size = self.n_features
        order = np.arange(size, dtype=np.int32 if size < 2**31 else np.int64)
        np.random.default_rng([self.seed, epoch]).shuffle(order)   # in place
        return order

    def order_chunks(self, epoch: int, block_size: int) -> Iterator[np.ndarray]:
        """``order(epoch)`` as consecutive int64 pieces of ``block_size`` indices.

        An unshuffled stream over runs (``_runs``) never holds its order: each piece
        is made as it is needed; a shuffled one holds one int32 permutation.
        """
        epoch = check_int("epoch", epoch, 0)
        block_size = check_int("block_size", block_size, 1)
        runs = self._runs()
        if runs is not None and not self.shuffle:
            return runs.chunks(block_size)
        order = self._permutation(epoch) if runs is not None else self.order(epoch)
        return _order_chunks(order, block_size, runs)

    def blocks(self, epoch: int = 0) -> Iterator[Block]:
        """Yield (indices int64 (b,), block C-contiguous (b, n) of ``self.dtype``).

        ``block[k]`` is column ``indices[k]`` of X.  A block holding NaN or inf raises
        InputError naming the global index of the first bad column, before it is
        yielded (a NaN would otherwise silently poison every later weight).  With
        ``prefetch`` (the default) the next block is read while this one is used.
        """
        raw = self._raw_blocks(self.order(epoch), self.block_size)
        finished = ((index, self._finish(index, block)) for index, block in raw)
        yield from prefetch(finished) if self.reads_ahead() else finished

    def column_scores(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(features, |x_jᵀg| / ‖x_j‖) for every feature at once where the stream
        holds its columns in memory in a form one product reads (the closing sweep's
        and the greedy opening's scores); None: read them a block at a time."""
        return None

    def reads_ahead(self) -> bool:
        """Whether ``blocks`` reads the next block in a thread: as ``prefetch``
        says, except for a pass gathering at most ``READ_AHEAD_BYTES`` from memory."""
        return self.prefetch and not (self.in_memory and self.n_samples *
                                      self.n_features * self.dtype.itemsize <=
                                      READ_AHEAD_BYTES)

    def kept_set(self, capacity: int):
        """An empty kept set that reads this stream's ``step_blocks``: dense columns
        here; a sparse stream's keeps only the nonzeros (cost ∝ nnz)."""
        return KeptSet(self.n_samples, capacity, self.dtype)

    def step_blocks(self, epoch: int = 0) -> Iterator:
        """The blocks of ``blocks(epoch)`` in the form ``kept_set`` reads them:
        dense here, ``CSCBlock``s for a sparse stream."""
        return self.blocks(epoch)

    def columns(self, indices) -> np.ndarray:
        """(len, n) C-contiguous columns (``self.dtype``) by global index (random access).

        For refits and final reports, not for the pass itself; an index this stream
        does not hold raises InputError.
        """
        index = self._check_indices(indices)
        if len(index) == 0:
            return np.zeros((0, self.n_samples))
        return self._finish(index, self._read(index))

    def shard(self, q: int, t: int) -> FeatureStream:
        """Shard t of q of this stream's ``feature_indices()``: the pieces t, t + q,
        t + 2q, … of ``core.shards.shard_piece`` consecutive features each (pieces of
        one on small problems: every q-th feature).

        Shards are disjoint and cover every feature once; a shard keeps this stream's
        block_size, shuffle and seed, and a shuffled shard shuffles within itself.
        Shards of shards work the same way.
        """
        q = check_int("q (number of shards)", q, 1)
        t = check_int("t (shard index)", t, 0, q)
        return Shard(self, q, t)

    def reordered(self, seed: int) -> FeatureStream:
        """The same features, visited in a fresh random order every epoch drawn from
        ``seed`` (whatever this stream's own order): one more order of the same data,
        read through this stream (``solvers.voting`` runs OS over several)."""
        if not self.reorderable:
            raise InputError("this stream's order is its source's (a generator's): it "
                             "cannot be visited in another order")
        return Reordered(self, check_int("seed", seed, 0))

    def subset(self, indices) -> FeatureStream:
        """Only the features ``indices`` (global, held by this stream), in this
        stream's order, read through it: a refit on a chosen support."""
        return Subset(self, np.unique(self._check_indices(indices)))

    # -- helpers shared by every subclass ---------------------------------------------
    def _empty_block(self, size: int, dtype=None) -> np.ndarray:
        """An uninitialised (size, n) array for a block to be read into: one used
        again once nothing holds it (``streams.pool``), so reading a block does not
        also fault in fresh memory."""
        pool = self.__dict__.get("_pool") or self.__dict__.setdefault("_pool",
                                                                      BlockPool())
        return pool.empty((size, self.n_samples), self.dtype if dtype is None else dtype)

    def _check_indices(self, indices) -> np.ndarray:
        index = np.atleast_1d(np.asarray(indices))
        if index.ndim != 1 or (index.size and index.dtype.kind not in "iu"):
            raise InputError(f"feature indices must be a 1-D integer array, "
                             f"got {index.dtype} with shape {index.shape}")
        index = index.astype(np.int64, copy=False)
        held = self._holds(index)
        if not np.all(held):
            bad = int(index[np.argmin(held)])
            raise InputError(f"feature {bad} is not in this stream")
        return index

    def _finish(self, indices: np.ndarray, raw) -> np.ndarray:
        """Make ``raw`` a C-contiguous (b, n) block of ``self.dtype``; reject NaN/inf."""
        block = np.ascontiguousarray(raw, dtype=self.dtype)
        if block.shape != (len(indices), self.n_samples):
            raise InputError(f"block for features {indices[:3].tolist()}... has shape "
                             f"{block.shape}, expected ({len(indices)}, "
                             f"{self.n_samples})")
        finite = np.isfinite(block, out=self._empty_block(len(block), bool))
        bad = ~finite.all(axis=1)
        if bad.any():
            raise InputError(f"feature {int(indices[np.argmax(bad)])} contains NaN "
                             "or inf")
        return block


class Shard(FeatureStream):
    """Shard t of q of ``parent.feature_indices()`` (``FeatureStream.shard``), read
    through the parent.

    One generic wrapper for every source: reads go to the parent's ``_read`` (random
    access) or ``_raw_blocks`` (sequential sources filter while iterating).  The index
    list is computed on first use, so making a shard is free.
    """

    def __init__(self, parent: FeatureStream, q: int, t: int):
        super().__init__(block_size=parent.block_size, shuffle=parent.shuffle,
                         seed=parent.seed, dtype=parent.dtype)
        self.parent, self.q, self.t = parent, q, t
        self.prefetch = parent.prefetch   # a carrier may set its own (``NodeShare``)
        self._index: np.ndarray | None = None
        self._pieces: Runs | None = None

    @property
    def n_samples(self) -> int:
        return self.parent.n_samples

    @property
    def n_features(self) -> int:
        runs = self._runs()
        if runs is not None:
            return runs.size
        return len(self.feature_indices())

    def feature_indices(self) -> np.ndarray:
        runs = self._runs()
        if runs is not None:
            return runs.indices()
        if self._index is None:
            base = self.parent.feature_indices()
            self._index = np.ascontiguousarray(
                base[Runs.range(len(base)).shard(self.q, self.t).indices()])
        return self._index.copy()

    def _runs(self) -> Runs | None:
        """The pieces of a parent's runs are runs (no O(p) index list held)."""
        if type(self).feature_indices is not Shard.feature_indices:
            return None
        if self._pieces is None:
            runs = self.parent._runs()
            if runs is None:
                return None
            self._pieces = runs.shard(self.q, self.t)
        return self._pieces

    def _holds(self, indices: np.ndarray) -> np.ndarray:
        runs = self._runs()
        if runs is not None:
            return runs.holds(indices)
        return np.isin(indices, self.feature_indices())

    def _read(self, indices: np.ndarray) -> np.ndarray:
        return self.parent._read(indices)

    def kept_set(self, capacity: int):
        return self.parent.kept_set(capacity)

    def step_blocks(self, epoch: int = 0) -> Iterator:
        if self.parent.sparse:
            return self.csc_blocks_of(self.order_chunks(epoch, self.block_size))
        return self.blocks(epoch)

    def csc_blocks_in(self, order: np.ndarray, block_size: int) -> Iterator:
        """A sparse parent's CSC blocks of ``order`` (shards of shards too)."""
        return self.parent.csc_blocks_in(order, block_size)

    def csc_blocks_of(self, chunks: Iterable[np.ndarray],
                      read_ahead: bool | None = None) -> Iterator:
        """A sparse parent's CSC blocks of the index pieces ``chunks``, read ahead
        as this shard's ``prefetch`` says (unless ``read_ahead`` is given)."""
        return self.parent.csc_blocks_of(
            chunks, self.prefetch if read_ahead is None else read_ahead)

    @property
    def sparse(self) -> bool:
        return self.parent.sparse

    @property
    def reorderable(self) -> bool:
        return self.parent.reorderable

    @property
    def in_memory(self) -> bool:
        return self.parent.in_memory

    def _raw_blocks(self, order: np.ndarray, block_size: int) -> Iterator[Block]:
        return self.parent._raw_blocks(order, block_size)


class GroupShard(Shard):
    """The features of ``parent`` whose group worker t owns: ``owner[feature] == t``
    (group-aware Asy-OS: a shard is a set of whole groups)."""

    def __init__(self, parent: FeatureStream, owner: np.ndarray, t: int):
        super().__init__(parent, 1, t)
        self.owner = owner

    def feature_indices(self) -> np.ndarray:
        if self._index is None:
            base = self.parent.feature_indices()
            self._index = np.ascontiguousarray(base[self.owner[base] == self.t])
        return self._index.copy()


class Reordered(Shard):
    """Every feature of ``parent``, in a fresh random order each epoch drawn from
    ``seed`` (``FeatureStream.reordered``)."""

    def __init__(self, parent: FeatureStream, seed: int):
        super().__init__(parent, 1, 0)
        self.shuffle, self.seed = True, seed

    def column_scores(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        return self.parent.column_scores(g)   # the same features: order aside


class Subset(Shard):
    """The features ``indices`` (sorted, unique, global) of ``parent``
    (``FeatureStream.subset``)."""

    def __init__(self, parent: FeatureStream, indices: np.ndarray):
        super().__init__(parent, 1, 0)
        self._index = np.ascontiguousarray(indices, dtype=np.int64)

    def feature_indices(self) -> np.ndarray:
        if self.parent._runs() is not None:   # runs increase: their order is sorted
            return self._index.copy()          # (and its O(p) indices are not made)
        order = self.parent.feature_indices()
        return np.ascontiguousarray(order[np.isin(order, self._index)])
