"""Block arrays used again once nothing holds them.

A stream reads each block into a new (b, n) array.  A new array of a few MiB is new
memory: glibc serves it by ``mmap`` (or from a heap it trims back as soon as the block
is freed), and the kernel then faults in and zeroes every page of it.  At the paper's
size that cost as much as reading the block (docs/benchmarks.md, "Blocks used again").
A pool hands an array of its own out again once nothing else refers to it: its reader
dropped the block, and no view of it survives (a view holds its base).  Each thread
has its own pool, so the thread that reads ahead and one that reads columns at random
never share an array.
"""

import sys
import threading

import numpy as np


def _references(arrays: list, k: int) -> int:
    return sys.getrefcount(arrays[k])


_HELD_BY_POOL = _references([np.empty(0)], 0)   # an array only its pool holds


class BlockPool(threading.local):
    """At most ``ARRAYS`` arrays of at most ``BYTES`` in all, per thread: memory of
    the order of the blocks a reader has in flight anyway, never more."""

    ARRAYS = 3
    BYTES = 32 << 20

    def __init__(self):
        self.arrays: list[np.ndarray] = []

    def empty(self, shape: tuple, dtype) -> np.ndarray:
        """An uninitialised array of ``shape`` and ``dtype``: one of the pool's that
        nothing else holds, else a new one (kept where the pool has room, in place
        of one of another shape if need be)."""
        arrays, dtype = self.arrays, np.dtype(dtype)
        spare = None
        for k in range(len(arrays)):
            if _references(arrays, k) <= _HELD_BY_POOL:
                if arrays[k].shape == shape and arrays[k].dtype == dtype:
                    return arrays[k]
                spare = k
        array = np.empty(shape, dtype)
        held = sum(a.nbytes for a in arrays)
        if len(arrays) < self.ARRAYS and held + array.nbytes <= self.BYTES:
            arrays.append(array)
        elif spare is not None and held - arrays[spare].nbytes + array.nbytes <= \
                self.BYTES:
            arrays[spare] = array
        return array
