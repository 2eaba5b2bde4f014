"""CSCFileStream: a .csc directory read by memory map gives exactly what SparseStream
gives on the same matrix (blocks, CSC blocks, shards, shuffles, fits), refuses a
corrupt directory with one InputError naming it, and holds O(p) + one block."""

import json
import subprocess
import sys
import textwrap
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from loopback import run_on_loopback

from asyos import load_result
from asyos.cli.run import main as run_main
from asyos.errors import InputError
from asyos.io.data import load_features, load_labels
from asyos.solvers.sequential import fit_os
from asyos.streams import CSCFileStream, SparseStream, as_stream, save_csc

ROOT = Path(__file__).resolve().parents[2]
GUARD = 120   # hang guard, not a speed assertion


def _matrix(n=30, p=70, density=0.15, seed=0):
    X = sp.random(n, p, density=density, format="csc", random_state=seed)
    X.data = np.round(X.data * 4 - 2, 3)        # signs, and values the text keeps
    X = X.tolil()
    X[:, 5] = 0.0                                # an empty column
    X[:, 9] = 1.5                                # a full one
    return X.tocsc()


def _pair(tmp_path, X, **options):
    save_csc(tmp_path / "X.csc", X)
    return CSCFileStream(tmp_path / "X.csc", **options), SparseStream(X, **options)


def _same_csc_blocks(a, b):
    pairs = list(zip(a, b, strict=True))
    for (ia, ca), (ib, cb) in pairs:
        np.testing.assert_array_equal(ia, ib)
        for field in ("indptr", "rows", "vals"):
            x, y = getattr(ca, field), getattr(cb, field)
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)
        assert ca.n_samples == cb.n_samples
    return len(pairs)


@pytest.fixture(params=["whole", "by block"])
def reading(request, monkeypatch):
    """A small directory read whole when opened, and the same read by ``pread`` a
    block at a time, as a directory above ``WHOLE_BYTES`` is."""
    import asyos.streams.csc_file as csc_file

    if request.param == "by block":
        monkeypatch.setattr(csc_file, "WHOLE_BYTES", 0)
    return request.param


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_blocks_shards_and_columns_equal_the_sparse_streams(tmp_path, shuffle, dtype,
                                                            reading):
    X = _matrix()
    disk, memory = _pair(tmp_path, X, block_size=8, shuffle=shuffle, seed=4,
                         dtype=dtype)
    assert disk.sparse and (disk.n_samples, disk.n_features) == X.shape
    for epoch in (0, 1):
        assert _same_csc_blocks(disk.step_blocks(epoch), memory.step_blocks(epoch)) == 9
        for (ia, da), (ib, db) in zip(disk.blocks(epoch), memory.blocks(epoch),
                                      strict=True):
            np.testing.assert_array_equal(ia, ib)
            np.testing.assert_array_equal(da, db)
            assert da.dtype == np.dtype(dtype) and da.flags.c_contiguous
        for t in range(3):
            _same_csc_blocks(disk.shard(3, t).step_blocks(epoch),
                             memory.shard(3, t).step_blocks(epoch))
    picks = np.array([69, 0, 5, 5, 9, 33])
    np.testing.assert_array_equal(disk.columns(picks), memory.columns(picks))
    assert disk.columns([]).shape == (0, 30)
    with pytest.raises(InputError, match="feature 70"):
        disk.columns([1, 70])
    assert type(disk.kept_set(4)) is type(memory.kept_set(4))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 7), p=st.integers(1, 25), density=st.floats(0, 1),
       block=st.integers(1, 9), shuffle=st.booleans(), seed=st.integers(0, 9),
       q=st.integers(1, 4), int64=st.booleans())
def test_property_the_file_stream_yields_the_sparse_streams_blocks(
        tmp_path_factory, n, p, density, block, shuffle, seed, q, int64):
    folder = tmp_path_factory.mktemp("csc")
    X = sp.random(n, p, density=density, format="csc", random_state=seed)
    save_csc(folder / "X.csc", X)
    if int64:   # the layout allows int64 row indices too
        path = folder / "X.csc" / "indices.npy"
        np.save(path, np.load(path).astype(np.int64))
    options = {"block_size": block, "shuffle": shuffle, "seed": seed}
    disk = CSCFileStream(folder / "X.csc", **options)
    memory = SparseStream(X, **options)
    _same_csc_blocks(disk.step_blocks(seed), memory.step_blocks(seed))
    t = seed % q
    _same_csc_blocks(disk.shard(q, t).step_blocks(1), memory.shard(q, t).step_blocks(1))
    np.testing.assert_array_equal(disk.columns(np.arange(p)), X.toarray().T)


@pytest.mark.parametrize("options", [{}, {"shuffle": True, "seed": 2},
                                     {"rule": "fitted"}, {"dtype": "float32"}])
def test_fit_os_on_the_file_is_the_fit_on_the_matrix(tmp_path, options, reading):
    rng = np.random.default_rng(3)
    X = _matrix(n=80, p=300, density=0.08, seed=1)
    y = X[:, [3, 50, 120]] @ np.array([2.0, -1.5, 1.0]) + 0.01 * rng.standard_normal(80)
    stream_options = {k: v for k, v in options.items() if k != "rule"}
    fit_options = {k: v for k, v in options.items() if k == "rule"}
    disk, memory = _pair(tmp_path, X, block_size=32, **stream_options)
    from_disk = fit_os(disk, y, 5, epochs=2, **fit_options)
    in_memory = fit_os(memory, y, 5, epochs=2, **fit_options)
    np.testing.assert_array_equal(from_disk.selected, in_memory.selected)
    np.testing.assert_array_equal(from_disk.weights, in_memory.weights)
    assert from_disk.objective == in_memory.objective


def test_labels_travel_with_the_directory(tmp_path):
    X, y = _matrix(), np.arange(30.0)
    save_csc(tmp_path / "with.csc", X, y)
    save_csc(tmp_path / "without.csc", X)
    stream, labels = load_features(tmp_path / "with.csc", block_size=7)
    assert isinstance(stream, CSCFileStream) and stream.block_size == 7
    np.testing.assert_array_equal(labels, y)
    np.testing.assert_array_equal(load_labels(tmp_path / "with.csc"), y)
    assert load_features(tmp_path / "without.csc")[1] is None
    with pytest.raises(InputError, match="no labels.npy"):
        load_labels(tmp_path / "without.csc")
    assert isinstance(as_stream(str(tmp_path / "with.csc")), CSCFileStream)
    with pytest.raises(InputError, match="label column"):
        load_features(tmp_path / "with.csc", label_column=0)


def _corrupt(folder: Path, case: str) -> str:
    """Break the .csc directory ``folder`` the way ``case`` says; the expected
    message."""
    meta = json.loads((folder / "meta.json").read_text())
    indptr = np.load(folder / "indptr.npy")
    if case.startswith("missing "):
        (folder / case.split()[1]).unlink()
        return f"no {case.split()[1]}"
    if case == "meta not json":
        (folder / "meta.json").write_text("{not json")
        return "not readable JSON"
    edits = {"meta format": ("format", "scipy"), "meta version": ("version", 2),
             "meta dtype": ("dtype", "int8"), "meta n": ("n_samples", -1),
             "meta nnz": ("nnz", meta["nnz"] + 1)}
    if case in edits:
        key, value = edits[case]
        (folder / "meta.json").write_text(json.dumps({**meta, key: value}))
        return {"meta format": "format", "meta version": "version 2",
                "meta dtype": "dtype must be float32 or float64",
                "meta n": "n_samples must be", "meta nnz": "says nnz = "}[case]
    if case == "indptr length":
        np.save(folder / "indptr.npy", indptr[:-1])
        return "indptr.npy: shape"
    if case == "indptr decreasing":
        indptr[3], indptr[4] = indptr[4], indptr[3] - 1
        np.save(folder / "indptr.npy", indptr)
        return "decreases at feature"
    if case == "indptr end":
        indptr[-1] -= 1
        np.save(folder / "indptr.npy", indptr)
        return "ends at"
    if case == "data dtype":
        np.save(folder / "data.npy", np.load(folder / "data.npy").astype(np.float32))
        return "data.npy: dtype float32"
    if case == "data truncated":
        raw = (folder / "data.npy").read_bytes()
        (folder / "data.npy").write_bytes(raw[:-8])
        return "truncated"
    if case == "not npy":
        (folder / "indices.npy").write_bytes(b"garbage")
        return "not a readable .npy"
    raise AssertionError(case)


CASES = ["missing meta.json", "missing indptr.npy", "missing indices.npy",
         "missing data.npy", "meta not json", "meta format", "meta version",
         "meta dtype", "meta n", "meta nnz", "indptr length", "indptr decreasing",
         "indptr end", "data dtype", "data truncated", "not npy"]


@pytest.mark.parametrize("case", CASES)
def test_a_corrupt_directory_is_refused_on_open_naming_it(tmp_path, case):
    save_csc(tmp_path / "X.csc", _matrix())
    expected = _corrupt(tmp_path / "X.csc", case)
    with pytest.raises(InputError, match="X.csc") as info:
        CSCFileStream(tmp_path / "X.csc")
    assert expected in str(info.value)


@pytest.mark.parametrize("whole", [True, False])
def test_bad_rows_nan_and_bad_paths_are_refused(tmp_path, monkeypatch, whole):
    """Bad row indices are refused when a small directory is opened (it is read
    whole and checked once), or at the block that holds them (``WHOLE_BYTES`` 0)."""
    import asyos.streams.csc_file as csc_file

    if not whole:
        monkeypatch.setattr(csc_file, "WHOLE_BYTES", 0)
    X = _matrix()
    save_csc(tmp_path / "X.csc", X)
    rows = np.load(tmp_path / "X.csc" / "indices.npy")
    start = X.indptr[9]                            # feature 9: every row
    rows[start], rows[start + 1] = rows[start + 1], rows[start]
    np.save(tmp_path / "X.csc" / "indices.npy", rows)
    with pytest.raises(InputError, match="feature 9 are not strictly ascending"):
        list(CSCFileStream(tmp_path / "X.csc", block_size=4).step_blocks())
    rows[start] = 30
    np.save(tmp_path / "X.csc" / "indices.npy", rows)
    with pytest.raises(InputError, match="feature 9 has row index 30, outside 0..29"):
        CSCFileStream(tmp_path / "X.csc", shuffle=True).columns([9])
    X = X.tolil()
    X[4, 33] = np.nan
    save_csc(tmp_path / "nan.csc", X.tocsc())
    stream = CSCFileStream(tmp_path / "nan.csc", block_size=4)
    for read in (lambda: list(stream.step_blocks()), lambda: list(stream.blocks())):
        with pytest.raises(InputError, match="feature 33 contains NaN or inf"):
            read()
    with pytest.raises(InputError, match="no such directory"):
        CSCFileStream(tmp_path / "missing.csc")
    (tmp_path / "file.csc").write_text("x")
    with pytest.raises(InputError, match="must be a directory"):
        CSCFileStream(tmp_path / "file.csc")
    with pytest.raises(InputError, match="not a .csc directory"):
        save_csc(tmp_path / "file.csc", X.tocsc())


def test_an_empty_matrix_and_an_empty_column_stream(tmp_path):
    save_csc(tmp_path / "zero.csc", sp.csc_matrix((4, 6)))
    stream = CSCFileStream(tmp_path / "zero.csc", block_size=4)
    assert stream.nnz == 0
    blocks = list(stream.step_blocks())
    assert [len(c) for _, c in blocks] == [4, 2] and all(c.nnz == 0 for _, c in blocks)
    np.testing.assert_array_equal(stream.columns([5, 0]), np.zeros((2, 4)))


def test_run_reads_a_csc_directory_sequentially_and_simulated(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = _matrix(n=120, p=200, density=0.1, seed=2)
    y = X[:, [3, 7, 40]] @ np.array([2.0, -2.0, 1.5]) + 0.01 * rng.standard_normal(120)
    save_csc(tmp_path / "X.csc", X, y)
    assert run_main(["--data", str(tmp_path / "X.csc"), "-s", "5", "--quiet",
                     "--out", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "selected 5 features" in out
    expected = fit_os(SparseStream(X), y, 5)
    np.testing.assert_array_equal(load_result(tmp_path / "r.json").selected,
                                  expected.selected)
    assert run_main(["--data", str(tmp_path / "X.csc"), "-s", "5", "--simulate", "2",
                     "--quiet"]) == 0
    assert "selected" in capsys.readouterr().out
    assert run_main(["--data", str(tmp_path / "missing.csc"), "-s", "5",
                     "--quiet"]) == 2
    assert "missing.csc: no such directory" in capsys.readouterr().err


def test_zeromq_workers_read_their_shards_of_a_csc_directory(tmp_path):
    rng = np.random.default_rng(1)
    X = _matrix(n=150, p=240, density=0.1, seed=3)
    y = X[:, [2, 11, 60]] @ np.array([2.0, -2.0, 1.5]) + 0.01 * rng.standard_normal(150)
    save_csc(tmp_path / "X.csc", X, y)
    run_on_loopback(2, ["--labels", tmp_path / "X.csc", "-s", 6, "--epochs", 3,
                        "--quiet", "--out", tmp_path / "z.json"],
                    ["--data", tmp_path / "X.csc"])
    result = load_result(tmp_path / "z.json")
    assert result.asy["transport"] == "zeromq" and result.data["n_features"] == 240
    assert result.asy["u_check_max_abs_diff"] < 1e-9
    # Asy-OS's selection depends on the timing: the strong features, not all of them
    found = {2, 11, 60} & set(result.selected.tolist())
    assert len(found) >= 2 and result.objective < 0.25 * np.mean(y ** 2), (found,
                                                                          result.objective)


# Peak RSS from VmHWM (see test_streams.py: ru_maxrss carries the parent's peak).
MEMORY_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from asyos.streams import CSCFileStream

    def peak_kib():
        with open("/proc/self/status") as f:
            return int(next(line for line in f if line.startswith("VmHWM")).split()[1])

    stream = CSCFileStream(sys.argv[1], shuffle=sys.argv[3] == "1", block_size=64)
    next(iter(stream.step_blocks()))
    before = peak_kib()
    total = 0
    if sys.argv[2] == "map":   # control: the same reads through a plain memory map
        rows = np.load(sys.argv[1] + "/indices.npy", mmap_mode="r")
        vals = np.load(sys.argv[1] + "/data.npy", mmap_mode="r")
        for start in range(0, len(rows), 64_000):
            total += np.array(rows[start:start + 64_000]).size
            total += np.array(vals[start:start + 64_000]).size
    else:
        for _, block in stream.step_blocks():
            total += block.nnz
    print((peak_kib() - before) / 1024)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="reads /proc/self/status")
def test_csc_stream_memory_does_not_grow_with_nnz(tmp_path):
    """8·10⁶ nonzeros (96 MB on disk) in blocks of 64 columns of ~1000 rows."""
    n, p = 1000, 8000
    folder = tmp_path / "big.csc"
    folder.mkdir()
    np.save(folder / "indptr.npy", np.arange(0, n * p + 1, n, dtype=np.int64))
    np.save(folder / "indices.npy", np.tile(np.arange(n, dtype=np.int32), p))
    np.save(folder / "data.npy", np.full(n * p, 1.5))
    (folder / "meta.json").write_text(json.dumps(
        {"format": "asyos-csc", "version": 1, "n_samples": n, "n_features": p,
         "nnz": n * p, "dtype": "float64"}))

    def grown_mb(mode, shuffle="0"):
        done = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(folder), mode,
                               shuffle], capture_output=True, text=True, timeout=GUARD,
                              cwd=ROOT, check=True)
        return float(done.stdout.split()[-1])

    assert grown_mb("drop") < 30
    assert grown_mb("drop", shuffle="1") < 30
    assert grown_mb("map") > 60   # a memory map's pages would accumulate


def test_shards_of_shards_of_a_sparse_stream_hand_out_csc_blocks(tmp_path):
    X = _matrix(n=20, p=60, density=0.3, seed=4)
    save_csc(tmp_path / "X.csc", X)
    for stream in (SparseStream(X, block_size=4), CSCFileStream(tmp_path / "X.csc",
                                                                 block_size=4)):
        inner = stream.shard(3, 1).shard(2, 1)
        got = [(index, block.toarray()) for index, block in inner.step_blocks(0)]
        indices = np.concatenate([index for index, _ in got])
        np.testing.assert_array_equal(indices, np.arange(60)[1::3][1::2])
        for index, block in got:
            np.testing.assert_array_equal(stream.columns(index), block)


@settings(max_examples=40, deadline=None)
@given(p=st.integers(1, 50), block=st.integers(1, 9), seed=st.integers(0, 5),
       shards=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 3)), max_size=2))
def test_orders_made_a_piece_at_a_time_are_the_orders(p, block, seed, shards):
    """order_chunks (what step_blocks reads) is order(), and a shuffled order of a
    range (a stream, shards of it) is the one the whole index list used to give:
    base[default_rng([seed, epoch]).permutation(len(base))]."""
    X = sp.random(3, p, density=0.5, format="csc", random_state=seed)
    for shuffle in (False, True):
        stream = SparseStream(X, block_size=block, shuffle=shuffle, seed=seed)
        base = np.arange(p)
        for q, t in shards:
            stream, base = stream.shard(q, t % q), base[t % q::q]
            if stream.n_features == 0:
                return
        assert stream.n_features == len(base) and stream._runs() is not None
        np.testing.assert_array_equal(stream.feature_indices(), base)
        for epoch in (0, 2):
            expected = base[np.random.default_rng([seed, epoch]).permutation(
                len(base))] if shuffle else base
            np.testing.assert_array_equal(stream.order(epoch), expected)
            pieces = list(stream.order_chunks(epoch, block))
            assert all(piece.dtype == np.int64 for piece in pieces)
            assert [len(piece) for piece in pieces[:-1]] == [block] * (len(pieces) - 1)
            np.testing.assert_array_equal(np.concatenate(pieces), expected)
            got = [index for index, _ in stream.step_blocks(epoch)]
            np.testing.assert_array_equal(np.concatenate(got), expected)
        held = stream._holds(np.arange(-1, p + 1))
        np.testing.assert_array_equal(np.flatnonzero(held) - 1, base)


def test_a_wide_file_stream_holds_no_order_and_no_indptr(tmp_path, monkeypatch):
    """p = 10⁶ mostly empty columns: a pass over the step blocks never holds the
    int64 order or indptr (8 MB each); a shuffled one holds an int32 permutation
    (4 MB), not the int64 order and its copies (24 MB).  (Read by block, as a
    directory above ``WHOLE_BYTES`` is: this one, 8 MB, would be read whole.)"""
    import tracemalloc

    import asyos.streams.csc_file as csc_file

    monkeypatch.setattr(csc_file, "WHOLE_BYTES", 0)

    n, p = 50, 1_000_000
    rng = np.random.default_rng(0)
    X = sp.csc_matrix((rng.standard_normal(400), (rng.integers(0, n, 400),
                                                  rng.integers(0, p, 400))),
                      shape=(n, p))
    save_csc(tmp_path / "X.csc", X)

    def peak_mb(shuffle: bool, blocks: int | None) -> float:
        stream = CSCFileStream(tmp_path / "X.csc", block_size=1024, shuffle=shuffle,
                               seed=1)
        tracemalloc.start()
        try:
            seen = sum(block.nnz for _, block in islice(stream.step_blocks(1), blocks))
            peak = tracemalloc.get_traced_memory()[1] / 1e6
        finally:
            tracemalloc.stop()
        assert seen == X.nnz or blocks is not None
        return peak

    assert peak_mb(False, None) < 2   # before: 8 MB, np.arange(p)
    # (the first blocks: a shuffled block's scattered reads are slow under tracemalloc)
    assert peak_mb(True, 40) < 7      # before: 24 MB: order, permutation, base[it]


def test_sparse_streams_size_their_blocks_by_nonzeros_and_decide_alike(tmp_path):
    """Where no ``block_size`` is named, a sparse stream of short columns (text) reads
    thousands of columns a block, one of long columns 256 as every stream does, and
    a named one is kept; the block size changes no decision of a fit."""
    from asyos import fit_os
    from asyos.errors import InputError
    from asyos.streams.sparse import BLOCK_COLUMNS, columns_per_block

    text = sp.random(300, 20_000, density=0.002, format="csc", random_state=3)
    text.data[:] = 1.0
    long = sp.random(50_000, 40, density=0.5, format="csc", random_state=4)
    assert SparseStream(text).block_size == BLOCK_COLUMNS
    assert SparseStream(long).block_size == 256
    assert SparseStream(text, block_size=64).block_size == 64
    save_csc(tmp_path / "t.csc", text)
    assert CSCFileStream(tmp_path / "t.csc").block_size == BLOCK_COLUMNS
    assert 256 <= columns_per_block(5, 0) <= BLOCK_COLUMNS
    with pytest.raises(InputError, match="block_size"):
        SparseStream(text, block_size=0)
    y = np.asarray(text[:, :40].sum(axis=1)).ravel() > 0.05
    fits = [fit_os(SparseStream(text, block_size=size), np.where(y, 1, -1), 20,
                   loss="logistic", intercept=True)
            for size in (None, 256, 100)]
    assert fits[0].substitutions_per_epoch[0] > 0
    for other in fits[1:]:
        assert np.array_equal(fits[0].selected, other.selected)
        assert np.array_equal(fits[0].weights, other.weights)
        assert fits[0].intercept == other.intercept
