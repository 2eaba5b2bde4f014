"""A C-ordered X, in memory or in a ``.npy`` file, is read by ``gather_columns``, a
cache line of the block at a time."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos.streams import ArrayStream
from asyos.streams.array import gather_columns


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), p=st.integers(1, 30), dtype=st.sampled_from(
    [np.float64, np.float32]), data=st.data())
def test_gathered_columns_are_the_columns(n, p, dtype, data):
    X = np.random.default_rng(n * 31 + p).standard_normal((n, p)).astype(dtype)
    indices = np.array(data.draw(st.lists(st.integers(0, p - 1), max_size=12)),
                       np.int64)   # any order, repeats allowed
    out = np.full((indices.size, n), np.nan, dtype)
    gather_columns(X, indices, out)
    np.testing.assert_array_equal(out, X[:, indices].T)


def test_every_layout_of_X_gives_the_same_blocks():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((37, 21))
    frozen = X.copy()
    frozen.flags.writeable = False
    layouts = {"C": X, "F": np.asfortranarray(X), "read-only C": frozen,
               "strided": np.repeat(X, 2, axis=1)[:, ::2], "float32 C":
               X.astype(np.float32), "integers": (10 * X).astype(np.int64)}
    for name, design in layouts.items():
        stream = ArrayStream(design, block_size=5, shuffle=True, seed=3)
        expected = np.asarray(design, np.float64)
        for index, block in stream.blocks(1):
            np.testing.assert_array_equal(block, expected[:, index].T, err_msg=name)


def test_a_small_c_ordered_x_is_copied_once_and_a_large_one_gathered_in_place():
    """At most ``SMALL_COPY_BYTES`` a C-ordered X is read from one Fortran copy (a
    small fit reads every column several times); above, X is kept by reference and
    its blocks are gathered, with the same columns either way."""
    from asyos.streams.array import SMALL_COPY_BYTES

    rng = np.random.default_rng(1)
    for n, p in ((50, 40), (SMALL_COPY_BYTES // 8 // 300 + 1, 300)):
        X = rng.standard_normal((n, p))
        stream = ArrayStream(X, block_size=64)
        assert np.shares_memory(stream._XT, X) == (X.nbytes > SMALL_COPY_BYTES)
        for index, block in stream.blocks(0):
            np.testing.assert_array_equal(block, X[:, index].T)


def test_a_c_ordered_file_in_either_byte_order_gives_the_columns(tmp_path):
    """A C-order ``.npy`` is gathered from its memory map (read-only: a signature of
    its own); one in the other byte order, which the kernels do not take, is read as
    before."""
    from asyos.streams import NpyStream

    X = np.random.default_rng(1).standard_normal((19, 23))
    for name, design in {"native": X, "swapped": X.astype(X.dtype.newbyteorder())
                         }.items():
        np.save(tmp_path / f"{name}.npy", design)
        stream = NpyStream(tmp_path / f"{name}.npy", block_size=6)
        for index, block in stream.shard(2, 1).blocks(0):
            np.testing.assert_array_equal(block, X[:, index].T, err_msg=name)
        np.testing.assert_array_equal(stream.columns([22, 0, 5]), X[:, [22, 0, 5]].T)
