"""Block arrays used again (``streams.pool``): never one that anything still holds."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos.streams import ArrayStream, GaussianStream, NpyStream
from asyos.streams.npy import save_feature_major
from asyos.streams.pool import BlockPool


def test_an_array_comes_back_once_nothing_holds_it():
    pool = BlockPool()
    first = pool.empty((4, 3), np.float64)
    held = pool.empty((4, 3), np.float64)
    assert held is not first                       # the first is still held
    address = first.__array_interface__["data"][0]
    del first
    again = pool.empty((4, 3), np.float64)
    assert again.__array_interface__["data"][0] == address
    assert pool.empty((4, 3), np.float32).dtype == np.float32   # another type: new
    assert pool.empty((5, 3), np.float64).shape == (5, 3)


def test_a_view_keeps_its_base_from_being_handed_out():
    pool = BlockPool()
    block = pool.empty((4, 3), np.float64)
    block[:] = 7.0
    row = block[1]
    del block
    other = pool.empty((4, 3), np.float64)
    other[:] = -1.0
    np.testing.assert_array_equal(row, 7.0)


def test_the_pool_holds_few_arrays_and_few_bytes():
    pool = BlockPool()
    held = [pool.empty((4, 3), np.float64) for _ in range(2 * BlockPool.ARRAYS)]
    assert len(pool.arrays) == BlockPool.ARRAYS
    assert len({id(a) for a in held}) == len(held)
    big = pool.empty((BlockPool.BYTES // 8 + 1,), np.float64)
    assert all(a is not big for a in pool.arrays)   # over the bytes: never kept
    del held, big
    assert sum(a.nbytes for a in pool.arrays) <= BlockPool.BYTES


def test_each_thread_has_its_own_pool():
    pool = BlockPool()
    mine = pool.empty((4, 3), np.float64)
    address = mine.__array_interface__["data"][0]
    del mine
    seen = []
    thread = threading.Thread(target=lambda: seen.append(
        pool.empty((4, 3), np.float64).__array_interface__["data"][0]))
    thread.start()
    thread.join()
    assert len(pool.arrays) == 1                    # the other thread's is its own
    assert pool.empty((4, 3), np.float64).__array_interface__["data"][0] == address


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 7)), max_size=40))
def test_what_is_held_is_never_written_over(moves):
    """Take arrays (marking each) and drop some, in any order: every array still
    held keeps its mark."""
    pool, held, mark = BlockPool(), [], 0
    for take, which in moves:
        if take or not held:
            mark += 1
            array = pool.empty((2, 3), np.float64)
            array[:] = mark
            held.append((mark, array if which % 2 else array[1:]))  # or a view
        else:
            held.pop(which % len(held))
        for value, array in held:
            np.testing.assert_array_equal(array, value)


@pytest.mark.parametrize("kind", ["npy", "array", "array_c", "gaussian"])
@pytest.mark.parametrize("prefetch", [False, True])
def test_a_reader_that_keeps_every_block_gets_them_all_intact(kind, prefetch,
                                                              tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 40))
    if kind == "npy":
        save_feature_major(tmp_path / "X.npy", X)
        stream = NpyStream(tmp_path / "X.npy", block_size=4)
    elif kind.startswith("array"):   # Fortran order: Xᵀ's rows; C order: X's
        stream = ArrayStream(np.asfortranarray(X) if kind == "array" else X,
                             block_size=4)
    else:
        stream = GaussianStream(30, 40, block_size=4)
        X = stream.columns(np.arange(40)).T
    stream.prefetch = prefetch
    kept = list(stream.blocks())                       # every block held at once
    rows = [block[0] for _, block in stream.shard(2, 1).blocks()]   # views only
    for index, block in kept:
        np.testing.assert_array_equal(block, X[:, index].T)
    np.testing.assert_array_equal(np.array(rows),
                                  X[:, stream.shard(2, 1).order()[::4]].T)
