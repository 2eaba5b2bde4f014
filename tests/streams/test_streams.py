"""Feature streams: exact columns, ordering, shards, NaN checks, npy files, memory."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos.core.shards import shard_size
from asyos.errors import InputError
from asyos.streams import (
    ArrayStream,
    FeatureStream,
    GeneratorStream,
    NpyStream,
    SparseStream,
    Standardized,
    as_stream,
    save_feature_major,
)

N, P = 5, 23


def _X(n=N, p=P, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, p))
    X[:, 2 % p] = 0.0  # an all-zero column (sparse: nothing stored)
    return X


def _make(kind, X, tmp_path, **kw):
    """A stream of kind ``kind`` over the dense matrix X."""
    if kind == "dense_c":
        return ArrayStream(np.ascontiguousarray(X), **kw)
    if kind == "dense_f":
        return ArrayStream(np.asfortranarray(X), **kw)
    if kind == "sparse":
        return SparseStream(sp.csr_matrix(X), **kw)
    if kind == "npy_f":
        save_feature_major(tmp_path / "f.npy", X)
        return NpyStream(tmp_path / "f.npy", **kw)
    if kind == "npy_c":
        np.save(tmp_path / "c.npy", np.ascontiguousarray(X))
        return NpyStream(tmp_path / "c.npy", **kw)
    if kind == "npy_f32":
        save_feature_major(tmp_path / "f32.npy", X.astype(np.float32))
        return NpyStream(tmp_path / "f32.npy", **kw)
    if kind == "generator":
        return GeneratorStream(lambda: iter(X.T), X.shape[0], **kw)
    if kind == "generator_pairs":
        return GeneratorStream(lambda: ((j, list(X[:, j])) for j in range(X.shape[1])),
                               X.shape[0], X.shape[1], **kw)
    raise AssertionError(kind)


KINDS = ["dense_c", "dense_f", "sparse", "npy_f", "npy_c", "npy_f32", "generator",
         "generator_pairs"]
SHUFFLABLE = [k for k in KINDS if not k.startswith("generator")]


def _collect(stream, epoch=0):
    """All (indices, rows) of one epoch, checking the block contract on the way."""
    indices, rows = [], []
    for index, block in stream.blocks(epoch):
        assert index.dtype == np.int64 and index.ndim == 1
        assert block.dtype == np.float64 and block.flags.c_contiguous
        assert block.shape == (len(index), stream.n_samples) and len(index) >= 1
        assert len(index) <= stream.block_size
        indices.append(index)
        rows.append(block)
    if not indices:
        return np.zeros(0, np.int64), np.zeros((0, stream.n_samples))
    return np.concatenate(indices), np.concatenate(rows)


def _expected(X, kind):
    return X.astype(np.float32).astype(np.float64) if kind == "npy_f32" else X


@pytest.mark.parametrize(("kind", "shuffle"), [(k, False) for k in KINDS]
                         + [(k, True) for k in SHUFFLABLE])
def test_every_stream_yields_exactly_the_columns_of_X(kind, shuffle, tmp_path):
    X = _X()
    stream = _make(kind, X, tmp_path, block_size=7, shuffle=shuffle, seed=1)
    Xe = _expected(X, kind)
    for epoch in (0, 1):
        index, rows = _collect(stream, epoch)
        np.testing.assert_array_equal(np.sort(index), np.arange(P))
        if not shuffle:
            np.testing.assert_array_equal(index, np.arange(P))
        np.testing.assert_array_equal(rows, Xe[:, index].T)
    assert (stream.n_samples, stream.n_features) == (N, P)
    np.testing.assert_array_equal(stream.feature_indices(), np.arange(P))
    picks = np.array([22, 0, 7, 7, 3])
    cols = stream.columns(picks)
    assert cols.dtype == np.float64 and cols.flags.c_contiguous
    np.testing.assert_array_equal(cols, Xe[:, picks].T)
    assert stream.columns([]).shape == (0, N)
    with pytest.raises(InputError, match="feature 23"):
        stream.columns([1, 23])


def test_shuffle_is_a_permutation_fixed_by_seed_and_epoch():
    X = _X(p=300)
    a, b = (ArrayStream(X, block_size=32, shuffle=True, seed=5) for _ in range(2))
    orders = [_collect(a, e)[0] for e in range(3)]
    for e, order in enumerate(orders):
        np.testing.assert_array_equal(np.sort(order), np.arange(300))
        np.testing.assert_array_equal(order, _collect(b, e)[0])
        np.testing.assert_array_equal(order, a.order(e))
        expected = np.random.default_rng([5, e]).permutation(300)
        np.testing.assert_array_equal(order, expected)
    assert not np.array_equal(orders[0], orders[1])
    assert not np.array_equal(orders[1], orders[2])
    other = ArrayStream(X, shuffle=True, seed=6)
    assert not np.array_equal(other.order(0), orders[0])
    np.testing.assert_array_equal(ArrayStream(X).order(3), np.arange(300))


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 40), q=st.integers(1, 5), block_size=st.integers(1, 9),
       shuffle=st.booleans(), seed=st.integers(0, 3))
def test_shards_are_disjoint_cover_everything_and_hold_the_right_columns(
        p, q, block_size, shuffle, seed):
    X = _X(n=3, p=p, seed=seed)
    stream = ArrayStream(X, block_size=block_size, shuffle=shuffle, seed=seed)
    seen = []
    for t in range(q):
        shard = stream.shard(q, t)
        np.testing.assert_array_equal(shard.feature_indices(), np.arange(p)[t::q])
        assert shard.n_features == len(range(t, p, q)) and shard.n_samples == 3
        index, rows = _collect(shard, epoch=seed)
        np.testing.assert_array_equal(np.sort(index), np.arange(p)[t::q])
        np.testing.assert_array_equal(rows, X[:, index].T)
        seen.append(index)
    everything = np.concatenate(seen)
    assert len(everything) == p
    np.testing.assert_array_equal(np.sort(everything), np.arange(p))


def _pieces(p: int, q: int, t: int, piece: int) -> np.ndarray:
    """Shard t of q of 0..p-1 written out: the pieces t, t + q, … of ``piece``."""
    return np.arange(p)[(np.arange(p) // piece) % q == t]


@settings(max_examples=80, deadline=None)
@given(p=st.integers(1, 5000), q=st.integers(1, 12), seed=st.integers(0, 3),
       shuffle=st.booleans(), data=st.data())
def test_large_shards_are_pieces_of_adjacent_features_dealt_in_turn(
        p, q, seed, shuffle, data):
    """Pieces of p // (64 q) adjacent features, at most 256 and at least one (every
    q-th feature on small problems), dealt to the workers in turn: disjoint, covering,
    within a piece of each other in size, the sizes the server expects
    (``shard_size``), and shards of shards the same way."""
    piece = max(1, min(256, p // (64 * q)))
    stream = ArrayStream(np.zeros((1, p)), block_size=data.draw(st.integers(1, 300)),
                         shuffle=shuffle, seed=seed)
    sizes = []
    for t in range(q):
        shard = stream.shard(q, t)
        expected = _pieces(p, q, t, piece)
        np.testing.assert_array_equal(shard.feature_indices(), expected)
        assert shard.n_features == expected.size == shard_size(p, q, t)
        index = np.concatenate([i for i, _ in shard.blocks(seed)] + [np.zeros(0, int)])
        np.testing.assert_array_equal(np.sort(index), expected)
        probe = np.array([-1, 0, p - 1, p, *expected[:3], *expected[-3:]])
        np.testing.assert_array_equal(shard._holds(probe), np.isin(probe, expected))
        sizes.append(expected.size)
    assert max(sizes) - min(sizes) <= piece and sum(sizes) == p
    outer, inner = data.draw(st.integers(0, q - 1)), data.draw(st.integers(1, 4))
    parent = _pieces(p, q, outer, piece)
    sub = stream.shard(q, outer).shard(inner, inner - 1)
    expected = parent[_pieces(parent.size, inner, inner - 1,
                              max(1, min(256, parent.size // (64 * inner))))]
    np.testing.assert_array_equal(sub.feature_indices(), expected)
    np.testing.assert_array_equal(np.sort(sub.order(1)), expected)


@pytest.mark.parametrize("kind", KINDS)
def test_shards_of_every_kind(kind, tmp_path):
    X = _X()
    stream = _make(kind, X, tmp_path, block_size=2)
    Xe = _expected(X, kind)
    parts = [_collect(stream.shard(3, t)) for t in range(3)]
    for t, (index, rows) in enumerate(parts):
        np.testing.assert_array_equal(index, np.arange(P)[t::3])
        np.testing.assert_array_equal(rows, Xe[:, index].T)
    inner = stream.shard(2, 1).shard(3, 2)  # a shard of a shard
    index, rows = _collect(inner)
    np.testing.assert_array_equal(index, np.arange(P)[1::2][2::3])
    np.testing.assert_array_equal(rows, Xe[:, index].T)
    np.testing.assert_array_equal(inner.columns([17, 5]), Xe[:, [17, 5]].T)
    with pytest.raises(InputError, match="feature 4"):
        stream.shard(3, 0).columns([3, 4])


@pytest.mark.parametrize("short", [False, True])
def test_a_shard_of_a_feature_major_file_reads_a_block_at_a_time(short, monkeypatch,
                                                                 tmp_path):
    """Every q-th column of a block in one ``preadv`` (the gaps into scratch), not
    one system call a column; a short read (a signal) reads them again by runs.
    Shuffled shards and gaps too wide to read through still read right."""
    from asyos.streams import npy

    X = _X(n=40, p=300)
    save_feature_major(tmp_path / "f.npy", X)
    calls, real = [], os.preadv

    def preadv(fd, buffers, where):
        got = real(fd, buffers, where)
        calls.append(len(buffers))
        return got - 1 if short and len(buffers) > 1 else got

    monkeypatch.setattr(npy.os, "preadv", preadv)
    for q, shuffle in ((2, False), (3, True), (7, False)):
        stream = NpyStream(tmp_path / "f.npy", block_size=32, shuffle=shuffle, seed=1)
        monkeypatch.setattr(npy, "GAP_BYTES", 5 * 40 * 8)   # gaps of ≤ 5 columns
        for t in range(q):
            shard = stream.shard(q, t)
            shard.prefetch = False
            calls.clear()
            for index, block in shard.blocks(1):
                np.testing.assert_array_equal(block, X[:, index].T)
            if q == 2 and not short:   # one call per block of 32 columns
                assert len(calls) == -(-len(range(t, 300, 2)) // 32)
                assert min(calls) > 16   # the pieces and the gaps between them
            if q == 7:                 # gaps of 6 columns: a call per column
                assert max(calls) == 1


def test_a_large_shard_of_a_feature_major_file_reads_only_its_own_columns(
        monkeypatch, tmp_path):
    """On a large problem a shard is pieces of adjacent columns (8 here), so a worker
    reads its pieces and skips the others' (wider than ``GAP_BYTES``): half the file
    at q = 2.  Every second column read every column of the file, the others' into
    scratch (a fifth of a worker's time at the paper's size on two cores)."""
    from asyos.streams import npy

    X = _X(n=40, p=1024)
    save_feature_major(tmp_path / "f.npy", X)
    read, real = [], os.preadv

    def preadv(fd, buffers, where):
        got = real(fd, buffers, where)
        read.append(got)
        return got

    monkeypatch.setattr(npy.os, "preadv", preadv)
    monkeypatch.setattr(npy, "GAP_BYTES", 5 * 40 * 8)   # gaps of ≤ 5 columns
    for t in range(2):
        shard = NpyStream(tmp_path / "f.npy", block_size=64).shard(2, t)
        shard.prefetch = False
        read.clear()
        for index, block in shard.blocks(0):
            np.testing.assert_array_equal(block, X[:, index].T)
        assert sum(read) == 512 * 40 * 8   # its 512 columns, nothing between them
        assert len(read) == 512 // 8       # one call per piece


def test_shuffled_shard_shuffles_within_itself_and_bad_shards_are_refused():
    stream = ArrayStream(_X(p=50), shuffle=True, seed=2)
    shard = stream.shard(4, 3)
    orders = [_collect(shard, e)[0] for e in range(2)]
    for order in orders:
        np.testing.assert_array_equal(np.sort(order), np.arange(50)[3::4])
    assert not np.array_equal(orders[0], orders[1])
    empty = ArrayStream(_X(p=2)).shard(5, 4)
    assert empty.n_features == 0 and _collect(empty)[0].size == 0
    for q, t in [(0, 0), (3, 3), (3, -1), (2.0, 1), (True, 0)]:
        with pytest.raises(InputError):
            stream.shard(q, t)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("kind", KINDS)
def test_nan_or_inf_names_the_global_feature(kind, bad, tmp_path):
    X = _X(p=20)
    X[3, 7] = bad
    stream = _make(kind, X, tmp_path, block_size=4)
    yielded = []
    with pytest.raises(InputError, match=r"^feature 7 contains NaN or inf$"):
        for index, _ in stream.blocks():
            yielded.extend(index.tolist())
    assert yielded == [0, 1, 2, 3]  # the bad block itself is never yielded
    with pytest.raises(InputError, match="feature 7 "):
        _collect(stream.shard(3, 1))
    assert _collect(stream.shard(3, 0))[0].size == 7  # the other shards are fine
    with pytest.raises(InputError, match="feature 7 "):
        stream.columns([7])


def test_shuffled_stream_names_the_first_bad_feature():
    X = _X(p=20)
    X[0, [7, 11]] = np.nan
    stream = ArrayStream(X, block_size=20, shuffle=True, seed=0)
    first = next(int(j) for j in stream.order(0) if j in (7, 11))
    with pytest.raises(InputError, match=f"feature {first} "):
        _collect(stream)


def _truncated(path):
    np.save(path, np.ones((4, 6)))
    data = path.read_bytes()
    path.write_bytes(data[:-8])


@pytest.mark.parametrize("case, message", [
    ("int8", "int8"), ("object", "object"), ("one_d", "2-D"), ("three_d", "2-D"),
    ("empty", "at least one"), ("truncated", "truncated"), ("garbage", "npy"),
    ("missing", "npy"),
])
def test_bad_npy_files_are_refused_with_the_path(case, message, tmp_path):
    path = tmp_path / f"{case}.npy"
    if case == "int8":
        np.save(path, np.ones((3, 4), np.int8))
    elif case == "object":
        np.save(path, np.array([[1.0, "a"]], dtype=object), allow_pickle=True)
    elif case == "one_d":
        np.save(path, np.ones(5))
    elif case == "three_d":
        np.save(path, np.ones((2, 3, 4)))
    elif case == "empty":
        np.save(path, np.ones((0, 4)))
    elif case == "truncated":
        _truncated(path)
    elif case == "garbage":
        path.write_text("not a numpy file at all")
    with pytest.raises(InputError, match=message) as info:
        NpyStream(path)
    assert str(path) in str(info.value)


def test_npy_reopened_by_path_and_as_stream_dispatches(tmp_path):
    X = _X()
    save_feature_major(tmp_path / "x.npy", X)
    stream = NpyStream(str(tmp_path / "x.npy"), block_size=4, shuffle=True, seed=3)
    assert stream.fortran_order
    # each MPI rank opens the file itself: same path, same order, same columns
    clone = NpyStream(str(tmp_path / "x.npy"), block_size=4, shuffle=True,
                      seed=3).shard(2, 1)
    twin = stream.shard(2, 1)
    np.testing.assert_array_equal(_collect(clone, 2)[0], _collect(twin, 2)[0])
    np.testing.assert_array_equal(_collect(clone)[1], _collect(twin)[1])
    assert isinstance(as_stream(X), ArrayStream)
    assert isinstance(as_stream(X.tolist()), ArrayStream)
    assert isinstance(as_stream(sp.csc_matrix(X)), SparseStream)
    assert isinstance(as_stream(tmp_path / "x.npy", block_size=3), NpyStream)
    assert isinstance(as_stream(str(tmp_path / "x.npy")), NpyStream)
    assert as_stream(stream) is stream
    for bad in [tmp_path / "x.csv", 3.0, {"a": 1}]:
        with pytest.raises(InputError):
            as_stream(bad)
    with pytest.raises(InputError):
        as_stream(stream, shuffle=False)
    assert issubclass(GeneratorStream, FeatureStream)


@pytest.mark.parametrize("X, what", [
    (np.ones(4), "2-D"), (np.ones((0, 3)), "at least one"),
    (np.ones((3, 0)), "at least one"),
    (np.array([["a"]]), "numbers"),
])
def test_array_stream_validates_its_input(X, what):
    with pytest.raises(InputError, match=what):
        ArrayStream(X)
    with pytest.raises(InputError):
        ArrayStream(np.ones((2, 2)), block_size=0)
    with pytest.raises(InputError):
        ArrayStream(np.ones((2, 2)), seed=-1)


def test_generator_stream_rules():
    X = _X()
    with pytest.raises(InputError, match="shuffle"):
        GeneratorStream(lambda: iter(X.T), N, shuffle=True)
    stream = GeneratorStream(lambda: iter(X.T), N)
    assert stream.n_features is None  # unknown until the first complete pass
    _collect(stream)
    assert stream.n_features == P
    # (index, column) pairs with arbitrary global indices
    ids = np.arange(P) * 10 + 3
    pairs = GeneratorStream(lambda: zip(ids.tolist(), X.T, strict=True), N,
                            block_size=4)
    np.testing.assert_array_equal(pairs.feature_indices(), ids)
    index, rows = _collect(pairs.shard(2, 1))
    np.testing.assert_array_equal(index, ids[1::2])
    np.testing.assert_array_equal(rows, X[:, 1::2].T)
    np.testing.assert_array_equal(pairs.columns([13, 3]), X[:, [1, 0]].T)
    with pytest.raises(InputError, match="feature 4"):
        pairs.columns([4])
    short = [X[:, j] if j != 4 else X[:-1, j] for j in range(P)]
    with pytest.raises(InputError, match="feature 4 has shape"):
        _collect(GeneratorStream(lambda: iter(short), N))
    with pytest.raises(InputError, match="expected n_features=24"):
        _collect(GeneratorStream(lambda: iter(X.T), N, n_features=24))
    with pytest.raises(InputError, match="twice"):
        _collect(GeneratorStream(lambda: iter([(1, X[:, 0]), (1, X[:, 1])]), N))


def test_standardized_streams_are_centred_and_scaled():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((30, 12)) * rng.uniform(0.1, 50, 12)
    X += rng.uniform(-9, 9, 12)
    X[:, 4] = 0.1  # exactly constant (round-off must not be blown up)
    stream = Standardized(ArrayStream(X, block_size=5, shuffle=True, seed=1))
    index, Z = _collect(stream, epoch=1)
    live = index != 4
    np.testing.assert_allclose(Z[live].mean(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose((Z[live] ** 2).sum(axis=1) / 30, 1, rtol=1e-12)
    assert np.all(Z[~live] == 0)
    np.testing.assert_allclose(stream.columns(index), Z, atol=1e-12)
    mean, scale = stream.stats(index)
    np.testing.assert_allclose((X[:, index] - mean) / scale, Z.T, atol=1e-12)
    np.testing.assert_allclose(mean[live], X[:, index[live]].mean(axis=0))
    np.testing.assert_allclose(scale[live], X[:, index[live]].std(axis=0))
    assert np.all(scale > 0) and np.all(np.isfinite(scale))
    shard = stream.shard(3, 2)
    assert isinstance(shard, Standardized)
    s_index, s_Z = _collect(shard)
    np.testing.assert_array_equal(np.sort(s_index), np.arange(12)[2::3])
    np.testing.assert_allclose(s_Z, stream.columns(s_index), atol=1e-12)
    assert (stream.n_samples, stream.n_features) == (30, 12)
    gen = Standardized(GeneratorStream(lambda: iter(X.T), 30))
    np.testing.assert_allclose(_collect(gen)[1], stream.columns(np.arange(12)),
                               atol=1e-12)


# Peak RSS is read from VmHWM, not getrusage's ru_maxrss: Linux carries the parent's
# peak through fork+exec into the child's ru_maxrss, so under a large pytest process
# ru_maxrss would not move at all (the control below then fails).  VmHWM is per
# address space and starts afresh at exec.
MEMORY_SCRIPT = textwrap.dedent("""
    import sys
    from asyos.streams import NpyStream

    def peak_kib():
        with open("/proc/self/status") as f:
            return int(next(line for line in f if line.startswith("VmHWM")).split()[1])

    import numpy as np

    stream = NpyStream(sys.argv[1], shuffle=sys.argv[3] == "1")
    blocks = stream.blocks()
    if sys.argv[2] == "map":  # control: a plain memory map's pages accumulate
        X = np.load(sys.argv[1], mmap_mode="r")
        blocks = ((None, np.array(X[:, j:j + 256].T))
                  for j in range(0, X.shape[1], 256))
    next(stream.blocks())
    before = peak_kib()
    total = 0.0
    for _, block in blocks:
        total += block[0, 0]
    print((peak_kib() - before) / 1024)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="reads /proc/self/status")
def test_npy_stream_memory_does_not_grow_with_p(tmp_path):
    path = tmp_path / "big.npy"
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64,
                                    shape=(64, 200_000), fortran_order=True)
    out[:] = 1.5  # ~100 MB on disk, all pages real
    out.flush()
    del out
    root = str(Path(__file__).resolve().parents[2])

    def grown_mb(mode, shuffle="0"):
        done = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(path), mode,
                               shuffle], capture_output=True, text=True, timeout=60,
                              cwd=root, check=True)
        return float(done.stdout.split()[-1])

    assert grown_mb("stream") < 30
    assert grown_mb("stream", shuffle="1") < 30
    assert grown_mb("map") > 60  # read through a memory map the pages would stay


@pytest.mark.parametrize("kind", SHUFFLABLE)
def test_a_reordered_stream_is_the_same_data_in_a_seeded_order(kind, tmp_path):
    X = _X()
    stream = _make(kind, X, tmp_path, block_size=4)
    Xe = _expected(X, kind)
    again = stream.reordered(3)
    orders = []
    for epoch in (0, 1):
        index, rows = _collect(again, epoch)
        np.testing.assert_array_equal(np.sort(index), np.arange(P))
        np.testing.assert_array_equal(rows, Xe[:, index].T)
        np.testing.assert_array_equal(index, stream.reordered(3).order(epoch))
        orders.append(index)
    assert not np.array_equal(orders[0], orders[1])           # fresh each epoch
    assert not np.array_equal(orders[0], np.arange(P))         # not the stream's own
    assert not np.array_equal(orders[0], stream.reordered(4).order(0))
    np.testing.assert_array_equal(_collect(stream)[0], np.arange(P))   # untouched
    if stream.sparse:   # what the kept sets read: CSC blocks, in the new order
        seen = np.concatenate([index for index, _ in again.step_blocks(0)])
        np.testing.assert_array_equal(seen, orders[0])


def test_a_standardized_stream_reorders_its_standardized_columns():
    X = _X()
    stream = Standardized(ArrayStream(X, block_size=4))
    index, rows = _collect(stream.reordered(1))
    np.testing.assert_allclose(rows, stream.columns(index))
    assert not np.array_equal(index, np.arange(P))


@pytest.mark.parametrize("kind", ["dense_c", "sparse", "npy_f", "generator"])
def test_a_subset_holds_only_its_features_in_the_streams_order(kind, tmp_path):
    X = _X()
    stream = _make(kind, X, tmp_path, block_size=2)
    Xe = _expected(X, kind)
    subset = stream.subset([17, 3, 9, 3])
    index, rows = _collect(subset)
    np.testing.assert_array_equal(index, [3, 9, 17])
    np.testing.assert_array_equal(rows, Xe[:, [3, 9, 17]].T)
    assert subset.n_features == 3 and subset.n_samples == N
    with pytest.raises(InputError, match="feature 4 is not in this stream"):
        subset.columns([3, 4])
    with pytest.raises(InputError, match="feature 23"):
        stream.subset([1, 23])


def test_a_generator_stream_refuses_another_order_through_any_wrapper():
    stream = _make("generator", _X(), None)
    for wrapped in (stream, Standardized(stream), stream.shard(2, 1),
                    stream.subset([1, 2])):
        assert not wrapped.reorderable
        with pytest.raises(InputError, match="cannot be visited in another order"):
            wrapped.reordered(1)
    assert ArrayStream(_X()).reorderable and Standardized(ArrayStream(_X())).reorderable
