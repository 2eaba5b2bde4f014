"""Buffers for the kernels' vectorised loops: zeros that start on a cache line."""

import numpy as np

LINE = 64   # bytes: a cache line, and one AVX-512 vector


def aligned_zeros(shape, dtype=np.float64) -> np.ndarray:
    """Zeros in C order whose first element starts a ``LINE``-byte boundary.

    The OS step's loops over the kept columns, u and dL/du (``os_step``) then load
    whole cache lines, and so does every row of a (capacity+1, n) column buffer when
    n·itemsize is a multiple of ``LINE``.  numpy aligns to 16 bytes only: with the
    loads split across lines the paper's-rule kernel took 1.3–1.4× the time of the
    same loops on aligned buffers (docs/benchmarks.md, "A whole run against a
    fused-loop kernel")."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.zeros(nbytes + LINE, np.uint8)
    start = -raw.ctypes.data % LINE
    return raw[start:start + nbytes].view(dtype).reshape(shape)
