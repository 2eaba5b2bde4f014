"""asyos convert: every input format to the feature-major layout, in bounded memory."""

import json
import subprocess
import sys

import numpy as np
import pytest

from asyos.errors import InputError
from asyos.io.convert import convert
from asyos.solvers.sequential import fit_os
from asyos.streams import NpyStream

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


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_text("1,2,3\n4,5\n"), "columns"),
    (lambda p: p.write_text("1,2,x\n"), "as numbers"),
    (lambda p: p.write_text(""), "empty"),
])
def test_bad_text_is_refused_and_leaves_nothing(tmp_path, make, message):
    source = tmp_path / "bad.csv"
    make(source)
    with pytest.raises(InputError, match=message):
        convert(source, tmp_path / "out.npy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


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
