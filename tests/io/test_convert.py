"""asyos convert: every input format to the feature-major .npy or the sparse .csc
layout, in bounded memory."""

import json
import subprocess
import sys

import numpy as np
import pytest

from asyos.errors import InputError
from asyos.io import convert as convert_module
from asyos.io.convert import convert
from asyos.solvers.sequential import fit_os
from asyos.streams import CSCFileStream, NpyStream

TIMEOUT = 120


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((40, 130))
    X[np.abs(X) < 0.8] = 0.0            # zeros, so the svmlight files are sparse
    X[:, 0] = X[:, -1] = 1.5            # first and last indices present
    return X, np.where(rng.standard_normal(40) > 0, 1.0, -1.0)


def _write(path, X, y):
    suffix = path.suffix
    if suffix == ".npy":
        np.save(path, X)
    elif suffix in (".csv", ".tsv"):
        np.savetxt(path, np.column_stack([y, X]), delimiter="\t" if suffix == ".tsv"
                   else ",", fmt="%.17g")
    else:
        from sklearn.datasets import dump_svmlight_file
        dump_svmlight_file(X, y, str(path), zero_based=path.stem.endswith("zero"))


@pytest.mark.parametrize("name", ["X.npy", "X.csv", "X.tsv", "X_zero.svm", "X_one.svm"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_format_round_trips_to_the_same_columns(tmp_path, data, name, dtype):
    X, y = data
    source = tmp_path / name
    _write(source, X, y)
    text = source.suffix in (".csv", ".tsv")
    info = convert(source, tmp_path / "out.npy", dtype=dtype, block_bytes=40 * 8 * 7,
                   labels_out=tmp_path / "y.npy", label_column=0 if text else None)
    out = np.load(tmp_path / "out.npy")
    assert out.flags.f_contiguous and out.dtype == np.dtype(dtype)
    assert (info["n_samples"], info["n_features"]) == X.shape
    np.testing.assert_allclose(out, X, rtol=1e-6 if dtype == "float32" else 1e-15)
    if source.suffix != ".npy":
        np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), y)
    stream = NpyStream(tmp_path / "out.npy")            # what --data reads
    np.testing.assert_allclose(stream.columns([0, 77, 129]), X[:, [0, 77, 129]].T,
                               rtol=1e-6)


def test_the_converted_file_selects_what_the_array_selects(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 200))
    y = X[:, [3, 50, 120]] @ np.array([2.0, -1.5, 1.0])
    np.save(tmp_path / "rows.npy", X)                  # C order, the usual layout
    convert(tmp_path / "rows.npy", tmp_path / "cols.npy", block_bytes=60 * 8 * 13)
    from_file = fit_os(NpyStream(tmp_path / "cols.npy"), y, 5)
    in_memory = fit_os(X, y, 5)
    np.testing.assert_array_equal(from_file.selected, in_memory.selected)
    np.testing.assert_array_equal(from_file.weights, in_memory.weights)


def test_nan_and_bad_arguments_are_refused(tmp_path):
    X = np.ones((5, 4))
    X[2, 3] = np.nan
    np.save(tmp_path / "nan.npy", X)
    with pytest.raises(InputError, match="feature 3 contains NaN"):
        convert(tmp_path / "nan.npy", tmp_path / "out.npy")
    assert not (tmp_path / "out.npy").exists()
    with pytest.raises(InputError, match="must be a .npy"):
        convert(tmp_path / "nan.npy", tmp_path / "out.csv")
    with pytest.raises(InputError, match="overwrite"):
        convert(tmp_path / "nan.npy", tmp_path / "nan.npy")
    with pytest.raises(InputError, match="float32 or float64"):
        convert(tmp_path / "nan.npy", tmp_path / "o.npy", dtype="int8")
    with pytest.raises(InputError, match="label-column"):
        convert(tmp_path / "nan.npy", tmp_path / "o.npy", label_column=0)


def test_cli_converts_with_a_progress_bar_and_exits_2_on_bad_input(tmp_path, data):
    X, y = data
    _write(tmp_path / "X.csv", X, y)
    proc = subprocess.run([sys.executable, "-m", "asyos.convert", str(tmp_path / "X.csv"),
                           str(tmp_path / "out.npy"), "--label-column", "0",
                           "--labels-out", str(tmp_path / "y.npy"), "--dtype", "float32"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert "n = 40, p = 130, float32" in proc.stdout
    assert np.load(tmp_path / "out.npy").dtype == np.float32
    proc = subprocess.run([sys.executable, "-m", "asyos.convert", str(tmp_path / "nope.csv"),
                           str(tmp_path / "o.npy")], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 2 and "no such file" in proc.stderr


PEAK_RSS = """
import json, resource, sys
from asyos.io.convert import convert
convert(sys.argv[1], sys.argv[2], block_bytes=8 << 20)
print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024))
"""


def test_converting_a_large_file_stays_in_bounded_memory(tmp_path):
    """A 192 MB C-order file converted with 8 MiB blocks: the process never holds it."""
    n, p = 120, 200_000
    rows = np.lib.format.open_memmap(tmp_path / "rows.npy", mode="w+", dtype=np.float64,
                                     shape=(n, p))
    for first in range(0, n, 20):
        rows[first:first + 20] = np.random.default_rng(first).standard_normal((20, p))
    rows.flush()
    del rows
    baseline = subprocess.run([sys.executable, "-c", "import json, resource; "
                               "import asyos.io.convert; print(resource.getrusage("
                               "resource.RUSAGE_SELF).ru_maxrss // 1024)"],
                              capture_output=True, text=True, timeout=TIMEOUT)
    proc = subprocess.run([sys.executable, "-c", PEAK_RSS, str(tmp_path / "rows.npy"),
                           str(tmp_path / "cols.npy")], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    grew = json.loads(proc.stdout) - int(baseline.stdout)
    assert grew < 80, f"converting grew the peak RSS by {grew} MiB (file: 192 MB)"
    out = np.load(tmp_path / "cols.npy", mmap_mode="r")
    assert out.shape == (n, p) and out.flags.f_contiguous
    check = np.load(tmp_path / "rows.npy", mmap_mode="r")
    np.testing.assert_array_equal(out[:, [0, 99_999, p - 1]], check[:, [0, 99_999, p - 1]])


# -- the sparse layout: .csc directories ----------------------------------------------

def _csc_matrix(path):
    """The matrix and labels of a .csc directory, through the stream that reads it."""
    stream = CSCFileStream(path)
    return stream.columns(np.arange(stream.n_features)).T, stream.labels()


@pytest.mark.parametrize("name", ["X_zero.svm", "X_one.svm"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_svmlight_to_csc_is_what_scikit_learn_reads(tmp_path, data, monkeypatch, name,
                                                    dtype):
    """Chunks of 300 bytes (many per pass) and segments of 600 bytes of output."""
    from sklearn.datasets import load_svmlight_file

    monkeypatch.setattr(convert_module, "SVMLIGHT_BYTES", 300)
    X, y = data
    _write(tmp_path / name, X, y)
    info = convert(tmp_path / name, tmp_path / "out", dtype=dtype, block_bytes=600,
                   labels_out=tmp_path / "y.npy")
    assert info["output"] == str(tmp_path / "out.csc") and info["layout"] == "sparse"
    assert info["nnz"] == np.count_nonzero(X) and info["labels"] == str(tmp_path /
                                                                         "y.npy")
    expected, labels = load_svmlight_file(str(tmp_path / name), dtype=np.float64)
    assert (info["n_samples"], info["n_features"]) == expected.shape == X.shape
    out, inside = _csc_matrix(tmp_path / "out.csc")
    np.testing.assert_array_equal(out, expected.toarray().astype(dtype))
    np.testing.assert_array_equal(inside, labels)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), labels)
    folder = tmp_path / "out.csc"
    assert sorted(p.name for p in folder.iterdir()) == [
        "data.npy", "indices.npy", "indptr.npy", "labels.npy", "meta.json"]
    assert np.load(folder / "indices.npy").dtype == np.int32
    assert np.load(folder / "data.npy").dtype == np.dtype(dtype)
    assert json.loads((folder / "meta.json").read_text()) == {
        "format": "asyos-csc", "version": 1, "n_samples": 40, "n_features": 130,
        "nnz": info["nnz"], "dtype": dtype}


@pytest.mark.parametrize("name", ["X.csv", "X.tsv", "X.npy"])
def test_tables_and_arrays_to_csc_equal_the_dense_matrix(tmp_path, data, name):
    X, y = data
    _write(tmp_path / name, X, y)
    text = name != "X.npy"
    info = convert(tmp_path / name, tmp_path / "X.csc", block_bytes=40 * 8 * 7,
                   label_column=0 if text else None)
    assert info["layout"] == "sparse"
    assert info["density"] == np.count_nonzero(X) / X.size
    out, labels = _csc_matrix(tmp_path / "X.csc")
    np.testing.assert_array_equal(out, X)
    if text:
        np.testing.assert_array_equal(labels, y)
    else:
        assert labels is None
    # and back: .csc → the feature-major .npy, its labels on the way
    info = convert(tmp_path / "X.csc", tmp_path / "back", labels_out=tmp_path / "y.npy")
    assert info["output"] == str(tmp_path / "back.npy") and info["layout"] == "dense"
    back = np.load(tmp_path / "back.npy")
    assert back.flags.f_contiguous
    np.testing.assert_array_equal(back, X)
    assert (tmp_path / "y.npy").exists() == text


def test_the_layout_follows_the_name_or_the_data(tmp_path, data):
    X, y = data                                     # 43 % nonzero: dense under auto
    _write(tmp_path / "X.csv", X, y)
    _write(tmp_path / "X_one.svm", X, y)
    sparse = np.zeros((30, 50))
    sparse[::7, ::3] = 2.0                          # 5 % nonzero
    np.save(tmp_path / "S.npy", sparse)
    assert convert(tmp_path / "X.csv", tmp_path / "a")["output"] == \
        str(tmp_path / "a.npy")
    assert convert(tmp_path / "S.npy", tmp_path / "b")["output"] == \
        str(tmp_path / "b.csc")
    assert convert(tmp_path / "X_one.svm", tmp_path / "c")["layout"] == "sparse"
    assert convert(tmp_path / "X.csv", tmp_path / "d", layout="sparse")["output"] == \
        str(tmp_path / "d.csc")
    assert convert(tmp_path / "S.npy", tmp_path / "e.npy")["layout"] == "dense"
    assert convert(tmp_path / "X_one.svm", tmp_path / "f.npy")["density"] < 0.5
    with pytest.raises(InputError, match="--layout sparse writes a .csc directory"):
        convert(tmp_path / "X.csv", tmp_path / "g.npy", layout="sparse")
    with pytest.raises(InputError, match="--layout dense writes a .npy file"):
        convert(tmp_path / "X.csv", tmp_path / "g.csc", layout="dense")
    with pytest.raises(InputError, match="layout must be one of"):
        convert(tmp_path / "X.csv", tmp_path / "g", layout="csr")
    with pytest.raises(InputError, match="already a .csc directory"):
        convert(tmp_path / "b.csc", tmp_path / "h.csc")
    with pytest.raises(InputError, match="overwrite"):
        convert(tmp_path / "b.csc", tmp_path / "b")
    before = sorted(p.name for p in tmp_path.iterdir())
    np.testing.assert_array_equal(_csc_matrix(tmp_path / "b.csc")[0], sparse)
    with pytest.raises(InputError, match="b.csc exists; give --force to replace it"):
        convert(tmp_path / "X_one.svm", tmp_path / "b.csc")
    np.testing.assert_array_equal(_csc_matrix(tmp_path / "b.csc")[0], sparse)
    with pytest.raises(InputError, match="a.npy exists; give --force"):
        convert(tmp_path / "X.csv", tmp_path / "a.npy")
    with pytest.raises(InputError, match="y.npy exists; give --force"):
        np.save(tmp_path / "y.npy", y)
        convert(tmp_path / "X_one.svm", tmp_path / "z.csc",
                labels_out=tmp_path / "y.npy")
    (tmp_path / "y.npy").unlink()
    convert(tmp_path / "X_one.svm", tmp_path / "b.csc", replace=True)   # a .csc, forced
    np.testing.assert_allclose(_csc_matrix(tmp_path / "b.csc")[0], X, rtol=1e-15)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("name, text, message", [
    ("bad.csv", "1,2,3\n4,5\n", "columns"),
    ("bad.csv", "1,2,x\n", "as numbers"),
    ("bad.csv", "", "empty"),
    ("bad.svm", "1 1:2 3:4\n-1 2:x\n", "line 2 is not svmlight"),
    ("bad.svm", "1 1:2 3:4\n1 3:1 2:1\n", "line 2 is not svmlight"),
    ("bad.svm", "1 1:2\n# note\n-1 2:1 7:nan\n",
     "feature 6 contains NaN or inf \\(sample 1\\)"),
    ("bad.svm", "1 0:2\n-1 2:inf\n", "feature 2 contains NaN or inf"),
    ("bad.svm", "", "empty"),
    ("bad.svm", "# only a comment\n", "no data rows"),
])
def test_bad_text_is_refused_and_leaves_nothing(tmp_path, name, text, message):
    source = tmp_path / name
    source.write_text(text)
    outputs = ("out.npy",) if name.endswith(".csv") else ("out.csc", "out.npy")
    for output in outputs:
        with pytest.raises(InputError, match=message):
            convert(source, tmp_path / output)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_a_bad_line_is_found_in_a_later_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(convert_module, "SVMLIGHT_BYTES", 64)
    lines = [f"{k % 2} {k + 1}:{k}.5 {k + 3}:1" for k in range(200)]
    lines[137] = "1 4:1 5;2"
    (tmp_path / "d.svm").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="line 138 is not svmlight .*'1 4:1 5;2'"):
        convert(tmp_path / "d.svm", tmp_path / "d.csc")
    assert not (tmp_path / "d.csc").exists()


def test_bad_outputs_are_refused_before_any_work(tmp_path, data):
    X, y = data
    _write(tmp_path / "X.csv", X, y)
    (tmp_path / "taken.csc").mkdir()
    (tmp_path / "taken.csc" / "mine.txt").write_text("keep me")
    with pytest.raises(InputError, match="not a .csc directory; not replacing"):
        convert(tmp_path / "X.csv", tmp_path / "taken.csc")
    assert (tmp_path / "taken.csc" / "mine.txt").read_text() == "keep me"
    with pytest.raises(InputError, match="no such directory"):
        convert(tmp_path / "X.csv", tmp_path / "nowhere" / "X.csc")
    (tmp_path / "folder.npy").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        convert(tmp_path / "X.csv", tmp_path / "folder.npy")
    nan = np.ones((6, 4))
    nan[2, 1] = np.inf
    np.savetxt(tmp_path / "nan.csv", nan, delimiter=",")
    with pytest.raises(InputError, match="feature 1 contains NaN or inf"):
        convert(tmp_path / "nan.csv", tmp_path / "nan.csc")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.csv", "folder.npy",
                                                          "nan.csv", "taken.csc"]


def test_cli_writes_csc_and_exits_2_on_bad_input(tmp_path, data):
    X, y = data
    _write(tmp_path / "X_one.svm", X, y)
    proc = subprocess.run([sys.executable, "-m", "asyos", "convert",
                           str(tmp_path / "X_one.svm"), str(tmp_path / "X")],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {tmp_path / 'X.csc'}: n = 40, p = 130, float64, sparse columns, " \
        f"{np.count_nonzero(X)} nonzeros" in proc.stdout
    sparse = np.zeros((30, 50))
    sparse[::7, ::3] = 2.0                          # 5 % nonzero
    _write(tmp_path / "S_one.svm", sparse, np.ones(30))
    proc = subprocess.run([sys.executable, "-m", "asyos.convert",
                           str(tmp_path / "S_one.svm"), str(tmp_path / "S.npy")],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0 and "feature-major" in proc.stdout
    assert "note: only 5.78% of the values are nonzero; a .csc output would hold " \
        "just those" in proc.stderr
    for args, message in [(["X.csc", "X.csc"], "must not overwrite the input"),
                          (["X_one.svm", "Y.npy", "--layout", "sparse"], "--layout"),
                          (["missing.svm", "Y.csc"], "no such file")]:
        proc = subprocess.run([sys.executable, "-m", "asyos.convert",
                               *(str(tmp_path / a) if "." in a else a for a in args)],
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr


PEAK_RSS_SPARSE = """
import sys
import numpy as np
import sklearn.datasets
from asyos.io import convert as c

def peak_mib():
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmHWM"))
        return int(line.split()[1]) >> 10

before = peak_mib()
if len(sys.argv) > 1:
    c.convert(sys.argv[1], sys.argv[2], block_bytes=8 << 20)
print(peak_mib() - before)
"""


def _svmlight_strata(path, n, p, per_row):
    """n rows of per_row sorted distinct indices (one per stratum of p // per_row
    columns), one-digit values: a large svmlight file written in a second."""
    rng = np.random.default_rng(0)
    width = p // per_row
    words = np.arange(per_row) * width + rng.integers(0, width, (n, per_row)) + 1
    cells = np.empty((n, per_row, 10), np.uint8)
    cells[..., 0], cells[..., 7], cells[..., 9] = ord(" "), ord(":"), ord("5")
    cells[..., 1:7] = ord("0") + (words[..., None] // 10 ** np.arange(5, -1, -1)) % 10
    cells[..., 8] = ord("1") + rng.integers(0, 9, (n, per_row))
    lines = np.empty((n, per_row * 10 + 2), np.uint8)
    lines[:, 0], lines[:, -1] = ord("1"), ord("\n")
    lines[:, 1:-1] = cells.reshape(n, -1)
    path.write_bytes(lines.tobytes())
    return words


def _peak_growth(source, target) -> int:
    """MiB the peak RSS of a fresh process grows by while converting (PEAK_RSS_SPARSE)."""
    proc = subprocess.run([sys.executable, "-c", PEAK_RSS_SPARSE, str(source),
                           str(target)], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="reads /proc/self/status")
def test_svmlight_to_csc_memory_does_not_grow_with_nnz(tmp_path):
    """5·10⁶ nonzeros (50 MB of text, 60 MB of output; dense it would be 8 GB)
    converted with 8 MiB blocks: the process holds chunks and segments, not the
    matrix."""
    n, p = 10_000, 100_000
    words = _svmlight_strata(tmp_path / "t.svm", n, p, 500)
    grew = _peak_growth(tmp_path / "t.svm", tmp_path / "t.csc")
    assert grew < 60, f"converting grew the peak RSS by {grew} MiB (output: 60 MB)"
    stream = CSCFileStream(tmp_path / "t.csc")
    assert (stream.n_samples, stream.n_features, stream.nnz) == (n, p, n * 500)
    rows = np.flatnonzero((words == 201).any(axis=1))   # one-based index 201
    np.testing.assert_array_equal(np.flatnonzero(stream.columns([200])[0]), rows)


def test_svmlight_to_dense_densifies_a_few_rows_at_a_time(tmp_path):
    """400 rows × 50,000 columns (160 MB dense) in one svmlight chunk: written with
    8 MiB blocks, never densified whole."""
    words = _svmlight_strata(tmp_path / "t.svm", 400, 50_000, 20)
    grew = _peak_growth(tmp_path / "t.svm", tmp_path / "t.npy")
    assert grew < 60, f"converting grew the peak RSS by {grew} MiB (dense: 160 MB)"
    out = np.load(tmp_path / "t.npy", mmap_mode="r")
    assert out.shape == (400, words.max()) and out.flags.f_contiguous
    np.testing.assert_array_equal(np.flatnonzero(out[:, 100]),
                                  np.flatnonzero((words == 101).any(axis=1)))


def test_a_wide_svmlight_file_converts_with_one_narrow_counter_per_column(tmp_path):
    """p = 2·10⁶ columns, 10⁴ nonzeros: the conversion's working arrays (traced by
    tracemalloc) are one int32 count per column (8 MB) and a chunk, not int64
    counts, indptr, cursors and bincounts of p (50 MB before)."""
    import tracemalloc

    n, p = 2000, 2_000_000
    rng = np.random.default_rng(0)
    cols = np.sort(rng.choice(np.arange(1, p), (n, 5)), axis=1)
    cols[7, -1] = p                                  # one-based, the last column used
    lines = [f"{i % 2} " + " ".join(f"{c}:{1 + i % 7}" for c in row)
             for i, row in enumerate(cols)]
    (tmp_path / "t.svm").write_text("\n".join(lines) + "\n")
    convert(tmp_path / "t.svm", tmp_path / "warm.csc")   # imports, caches
    tracemalloc.start()
    try:
        info = convert(tmp_path / "t.svm", tmp_path / "t.csc")
        peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    assert (info["n_samples"], info["n_features"]) == (n, p)
    assert peak < 12, f"converting traced {peak:.1f} MB (the counts alone: 8 MB)"
    indptr = np.load(tmp_path / "t.csc" / "indptr.npy", mmap_mode="r")
    assert indptr.dtype == np.int32 and indptr.shape == (p + 1,)
    stream = CSCFileStream(tmp_path / "t.csc")
    for row in (0, 7, n - 1):
        for j in cols[row] - 1:
            assert stream.columns([j])[0, row] == 1 + row % 7


@pytest.mark.parametrize("name", ["X_zero.svm", "X_one.svm", "X.csv", "X.npy"])
def test_counts_past_int32_switch_to_int64(tmp_path, data, monkeypatch, name):
    """nnz beyond int32 (made small here): the counts and indptr.npy become int64;
    the matrix is the same."""
    monkeypatch.setattr(convert_module, "INT32_MAX", 50)
    monkeypatch.setattr(convert_module, "SVMLIGHT_BYTES", 300)
    X, y = data
    _write(tmp_path / name, X, y)
    convert(tmp_path / name, tmp_path / "X.csc", block_bytes=600,
            label_column=0 if name == "X.csv" else None)
    assert np.load(tmp_path / "X.csc" / "indptr.npy").dtype == np.int64
    np.testing.assert_allclose(_csc_matrix(tmp_path / "X.csc")[0], X, rtol=1e-15)


@pytest.mark.parametrize("shift", [1, -1])
def test_a_column_that_changed_between_the_passes_is_refused(tmp_path, data,
                                                            monkeypatch, shift):
    """Pass 2 finding more (or fewer) entries in a column than pass 1 counted, the
    total unchanged: refused once the cursors are checked, nothing left behind."""
    X, y = data
    _write(tmp_path / "X_one.svm", X, y)
    count = convert_module._Job.count

    def miscount(self):
        result = count(self)
        result.tally[1 + 3] += shift      # column 3 and column 4 trade one entry
        result.tally[1 + 4] -= shift
        return result

    monkeypatch.setattr(convert_module._Job, "count", miscount)
    with pytest.raises(InputError, match="changed while converting"):
        convert(tmp_path / "X_one.svm", tmp_path / "X.csc")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X_one.svm"]


@pytest.mark.parametrize("output", ["X.npy", "X"])
def test_labels_are_never_dropped_by_a_dense_output(tmp_path, output):
    """A .npy holds features only: the labels of a csv's label column go beside it
    when no --labels-out is given, and the summary says where."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((30, 4)), np.arange(30.0)
    np.savetxt(tmp_path / "d.csv", np.column_stack([X[:, :2], y, X[:, 2:]]),
               delimiter=",")
    info = convert(tmp_path / "d.csv", tmp_path / output, label_column=2,
                   layout="dense")
    assert info["labels"] == str(tmp_path / "X.labels.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "X.labels.npy"), y)
    np.testing.assert_allclose(np.load(tmp_path / "X.npy"), X)
