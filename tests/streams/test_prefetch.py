"""Read-ahead of blocks in a background thread: same blocks, errors, clean stops."""

import threading
import time

import numpy as np
import pytest

from asyos.errors import InputError
from asyos.solvers.sequential import fit_os
from asyos.streams import ArrayStream, NpyStream, Standardized, base
from asyos.streams.prefetch import prefetch


def _threads() -> int:
    return sum(t.name == "asyos-prefetch" for t in threading.enumerate())


@pytest.fixture
def reads_ahead_always(monkeypatch):
    """Every pass reads ahead, small in-memory ones too (``READ_AHEAD_BYTES``)."""
    monkeypatch.setattr(base, "READ_AHEAD_BYTES", 0)


def test_a_small_pass_from_memory_is_read_in_the_caller(monkeypatch):
    """A thread costs more than the reads it would hide on a pass of at most
    ``READ_AHEAD_BYTES`` from memory; a larger one, a file's and a flag's False
    keep their read-ahead."""
    X = np.zeros((20, 300))
    stream = ArrayStream(X, block_size=16)
    assert not stream.reads_ahead() and not stream.shard(2, 1).reads_ahead()
    assert not Standardized(stream).reads_ahead()
    monkeypatch.setattr(base, "READ_AHEAD_BYTES", X.nbytes - 1)
    assert stream.reads_ahead() and Standardized(stream).reads_ahead()
    assert not stream.shard(2, 1).reads_ahead()   # half of X: small enough
    stream.prefetch = False
    assert not stream.reads_ahead()


def test_prefetched_blocks_are_the_blocks(tmp_path, reads_ahead_always):
    X = np.random.default_rng(0).standard_normal((30, 1000))
    np.save(tmp_path / "X.npy", np.asfortranarray(X))
    for stream in (ArrayStream(X, block_size=64, shuffle=True, seed=2),
                   NpyStream(tmp_path / "X.npy", block_size=64)):
        plain = ArrayStream(X, block_size=64, shuffle=stream.shuffle, seed=stream.seed)
        plain.prefetch = False
        for epoch in (0, 1):
            got, want = list(stream.blocks(epoch)), list(plain.blocks(epoch))
            assert len(got) == len(want) == 16
            for (i, b), (j, c) in zip(got, want, strict=True):
                np.testing.assert_array_equal(i, j)
                np.testing.assert_array_equal(b, c)


def test_a_run_is_the_same_with_and_without_prefetch(reads_ahead_always):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((80, 600))
    y = X[:, :5] @ rng.standard_normal(5)
    ahead, inline = ArrayStream(X, block_size=32), ArrayStream(X, block_size=32)
    inline.prefetch = False
    a, b = fit_os(ahead, y, 10), fit_os(inline, y, 10)
    np.testing.assert_array_equal(a.selected, b.selected)
    np.testing.assert_array_equal(a.weights, b.weights)


@pytest.mark.parametrize("sparse", [False, True])
def test_a_shard_reads_ahead_as_its_own_flag_says(sparse, reads_ahead_always):
    """A shard starts with its parent's setting (an in-memory scipy matrix reads in
    the caller unless told otherwise); a carrier sets a worker's shard alone
    (``NodeShare.reading``), dense or sparse, and the parent keeps its own."""
    import scipy.sparse as sp

    from asyos.streams import as_stream

    X = np.random.default_rng(3).standard_normal((20, 300))
    parent = as_stream(sp.csc_matrix(X) if sparse else X)
    parent.block_size = 16
    assert parent.prefetch is not sparse
    parent.prefetch = True
    assert parent.shard(2, 1).prefetch
    parent.prefetch = False
    assert not parent.shard(2, 1).prefetch
    parent.prefetch = True
    shard = parent.shard(2, 1)
    for reads_ahead in (True, False):
        shard.prefetch = reads_ahead
        blocks = iter(shard.step_blocks(0))
        next(blocks)
        assert (_threads() > 0) is reads_ahead
        blocks.close()
        assert _wait_for_no_threads()
    assert parent.prefetch


def test_a_bad_column_raises_in_the_consumer_at_its_block(reads_ahead_always):
    X = np.ones((5, 100))
    X[2, 70] = np.nan
    seen = []
    with pytest.raises(InputError, match="feature 70"):
        for index, _ in ArrayStream(X, block_size=32).blocks(0):
            seen.append(int(index[0]))
    assert seen == [0, 32]              # the blocks before the bad one came through
    assert _wait_for_no_threads()


def test_stopping_early_stops_the_reader():
    produced = []

    def slow():
        for k in range(1000):
            produced.append(k)
            yield k

    items = prefetch(slow(), depth=2)
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()
    assert _wait_for_no_threads()
    assert len(produced) <= 3 + 2 + 1   # read ahead by the depth only


def _wait_for_no_threads(timeout=5.0) -> bool:
    deadline = time.monotonic() + timeout
    while _threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    return _threads() == 0
