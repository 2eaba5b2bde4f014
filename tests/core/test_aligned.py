"""The kernels' buffers start on a cache line."""

import numpy as np
import pytest

from asyos.core.aligned import LINE, aligned_zeros
from asyos.core.kept_set import FittedKeptSet, KeptSet


@pytest.mark.parametrize("shape", [(7,), (3, 5), (65, 1000)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_aligned_zeros(shape, dtype):
    for _ in range(4):   # numpy's own allocations land on several offsets
        a = aligned_zeros(shape, dtype)
        assert a.ctypes.data % LINE == 0
        assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous
        assert a.flags.writeable and not a.any()


@pytest.mark.parametrize("make", [lambda: KeptSet(100, 8, np.float32),
                                  lambda: FittedKeptSet(100, 8, 1e-10)])
def test_kept_set_buffers_are_aligned(make):
    kept = make()
    for buffer in (kept.cols, kept.contribution, kept._g):
        assert buffer.ctypes.data % LINE == 0
