"""A stream over columns produced by a Python iterable, one pass per epoch.

For features computed on the fly (expansions, simulations, a database cursor) that are
never materialised as a matrix.  Such a source can only be read in order: no shuffle,
and random access costs a pass.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from numbers import Integral

import numpy as np

from ..core.validate import check_int
from ..errors import InputError
from .base import Block, FeatureStream, batch_columns


def _is_pair(item) -> bool:
    """An (index, column) pair rather than a bare column (which is never a tuple of
    an integer and a 1-D array)."""
    return (isinstance(item, tuple) and len(item) == 2
            and isinstance(item[0], Integral) and not isinstance(item[0], bool)
            and np.ndim(item[1]) == 1)


class GeneratorStream(FeatureStream):
    """Columns from ``factory()``, called afresh for every epoch.

    Parameters
    ----------
    factory : callable returning a new iterable on each call.  Its elements are either
        columns (length ``n_samples``; the k-th one is feature k) or
        ``(index, column)`` pairs (global index ≥ 0, unique), told apart per element.
        It must yield the same features in the same order on every call.
    n_samples : n, the length of every column.
    n_features : p if known.  When None it stays None until the first complete pass
        (``blocks`` run to the end, or ``feature_indices``), which records it.
    block_size, seed : as for every stream; ``shuffle=True`` is refused, since a
        generator's order is its own.

    Notes
    -----
    The first complete pass records the indices (8 bytes per feature) and checks them
    against ``n_features`` and for duplicates; later passes must yield as many.
    ``feature_indices()`` before that, a shard's first use, and every ``columns()``
    call each cost one full pass of the factory: fine for refitting s columns once,
    not for per-step access.  Shards filter the pass, so each worker still runs the
    whole factory but keeps only its columns.
    """

    reorderable = False   # its order is the factory's

    def __init__(self, factory: Callable[[], Iterable], n_samples: int,
                 n_features: int | None = None, *, block_size: int = 256,
                 shuffle: bool = False, seed: int = 0, dtype="float64"):
        super().__init__(block_size=block_size, shuffle=shuffle, seed=seed,
                         dtype=dtype)
        if self.shuffle:
            raise InputError("a generator stream cannot be shuffled (shuffle=True): "
                             "its order is the order the factory yields")
        if not callable(factory):
            raise InputError(f"factory must be callable, got {type(factory).__name__}")
        self._factory = factory
        self.n_samples = check_int("n_samples", n_samples, 1)
        self.n_features = (None if n_features is None
                           else check_int("n_features", n_features, 1))
        self._index: np.ndarray | None = None

    def _pairs(self) -> Iterator[tuple[int, np.ndarray]]:
        """(global index, float64 column) for each element of a fresh factory()."""
        try:
            items = iter(self._factory())
        except TypeError:
            raise InputError("factory() must return an iterable of columns") from None
        for position, item in enumerate(items):
            j, col = (int(item[0]), item[1]) if _is_pair(item) else (position, item)
            if j < 0:
                raise InputError(f"feature index {j} is negative")
            try:
                col = np.asarray(col, dtype=np.float64)
            except (TypeError, ValueError):
                raise InputError(f"feature {j} is not a numeric column") from None
            if col.shape != (self.n_samples,):
                raise InputError(f"feature {j} has shape {col.shape}, expected "
                                 f"({self.n_samples},)")
            yield j, col

    def _pass(self) -> Iterator[tuple[int, np.ndarray]]:
        """``_pairs`` that records the indices on the first complete pass."""
        first = self._index is None
        seen, count = array("q"), 0
        for j, col in self._pairs():
            count += 1
            if first:
                seen.append(j)
            yield j, col
        if first:
            self._record(np.frombuffer(seen, np.int64).copy())
        elif count != len(self._index):
            raise InputError(f"factory yielded {count} features, but "
                             f"{len(self._index)} on its first pass")

    def _record(self, index: np.ndarray) -> None:
        if len(index) == 0:
            raise InputError("factory yielded no features")
        if self.n_features is not None and len(index) != self.n_features:
            raise InputError(f"factory yielded {len(index)} features, expected "
                             f"n_features={self.n_features}")
        values, counts = np.unique(index, return_counts=True)
        if np.any(counts > 1):
            raise InputError(f"feature {int(values[np.argmax(counts > 1)])} is "
                             "yielded twice")
        self._index, self.n_features = index, len(index)

    def feature_indices(self) -> np.ndarray:
        if self._index is None:
            for _ in self._pass():  # one counting pass (see Notes)
                pass
        return self._index.copy()

    def _holds(self, indices: np.ndarray) -> np.ndarray:
        return np.isin(indices, self.feature_indices())

    def blocks(self, epoch: int = 0) -> Iterator[Block]:
        check_int("epoch", epoch, 0)
        for index, raw in batch_columns(self._pass(), self.block_size):
            yield index, self._finish(index, raw)

    def _raw_blocks(self, order: np.ndarray, block_size: int) -> Iterator[Block]:
        # ``order`` is a subsequence of the factory's order (a shard's pieces): keep
        # the matching columns as they go by and stop after the last one.
        wanted = order.tolist()

        def matching():
            pos = 0
            for j, col in self._pass() if wanted else ():
                if j == wanted[pos]:
                    yield j, col
                    pos += 1
                    if pos == len(wanted):
                        return
            if pos < len(wanted):
                raise InputError(f"feature {wanted[pos]} did not come in the order of "
                                 "the first pass; the factory must yield the same "
                                 "features in the same order every epoch")

        return batch_columns(matching(), block_size)

    def _read(self, indices: np.ndarray) -> np.ndarray:
        rows: dict[int, list[int]] = {}
        for k, j in enumerate(indices.tolist()):
            rows.setdefault(j, []).append(k)
        out = np.empty((len(indices), self.n_samples))
        for j, col in self._pass():
            if j in rows:
                out[rows.pop(j)] = col
                if not rows:
                    break
        if rows:
            raise InputError(f"feature {next(iter(rows))} is not in this stream")
        return out
