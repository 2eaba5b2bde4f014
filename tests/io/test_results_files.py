"""The results files are one unit, written only for a finite result, to an ``--out``
checked before any work."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from asyos import load_result
from asyos.errors import InputError
from asyos.io import results
from asyos.io.results import check_out, write_result
from asyos.solvers.result import FitResult


def _result(weights, objective=1.0) -> FitResult:
    weights = np.asarray(weights, dtype=np.float64)
    return FitResult(selected=np.arange(weights.size), weights=weights,
                     objective=objective, objective_per_epoch=[objective])


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "asyos.run", "-p", "300", "-s", "10",
                           "--quiet", *args], capture_output=True, text=True,
                          timeout=120)


def test_a_second_write_replaces_the_first_as_one_unit(tmp_path):
    out = tmp_path / "r.json"
    write_result(out, _result([1.0, 2.0]))
    write_result(out, _result([3.0, 4.0, 5.0]))
    npz = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".npz")
    assert npz == [json.loads(out.read_text())["arrays"]]   # the old arrays are gone
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["r.json", *npz])
    np.testing.assert_array_equal(load_result(out).weights, [3.0, 4.0, 5.0])


def test_an_interrupted_write_leaves_the_previous_result_whole(tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    write_result(out, _result([1.0, 2.0]))
    before = sorted(p.name for p in tmp_path.iterdir())
    real = results.replace_file

    def interrupted(path, data, **options):
        if path.suffix == ".json":
            raise KeyboardInterrupt   # SIGINT between the arrays and the JSON
        real(path, data, **options)

    monkeypatch.setattr(results, "replace_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_result(out, _result([7.0, 8.0, 9.0]))
    assert sorted(p.name for p in tmp_path.iterdir()) == before   # nothing left over
    np.testing.assert_array_equal(load_result(out).weights, [1.0, 2.0])


def test_arrays_of_another_run_are_refused(tmp_path):
    out = tmp_path / "r.json"
    write_result(out, _result([1.0, 2.0]))
    npz = tmp_path / json.loads(out.read_text())["arrays"]
    other = tmp_path / "other.json"
    write_result(other, _result([5.0, 6.0]))
    npz.write_bytes((tmp_path / json.loads(other.read_text())["arrays"]).read_bytes())
    with pytest.raises(InputError, match="does not belong to"):
        load_result(out)


@pytest.mark.parametrize("weights, objective", [([1.0, np.nan], 1.0),
                                                ([1.0, 2.0], float("inf"))])
def test_a_diverged_run_is_never_written(tmp_path, weights, objective):
    out = tmp_path / "r.json"
    with pytest.raises(InputError, match="diverged"):
        write_result(out, _result(weights, objective))
    assert list(tmp_path.iterdir()) == []


def test_out_is_checked_before_any_work(tmp_path):
    (tmp_path / "dir").mkdir()
    with pytest.raises(InputError, match="does not exist"):
        check_out(tmp_path / "missing" / "r.json")
    with pytest.raises(InputError, match="is a directory"):
        check_out(tmp_path / "dir")
    with pytest.raises(InputError, match="JSON"):
        check_out(tmp_path / "r.npz")
    for out, message in ((tmp_path / "missing" / "r.json", "does not exist"),
                         (tmp_path / "dir", "is a directory")):
        start = time.monotonic()
        proc = _cli("-p", "200000", "--out", str(out))   # minutes of work if it ran
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and message in proc.stderr
        assert time.monotonic() - start < 60
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]
    assert list((tmp_path / "dir").iterdir()) == []


def test_what_a_killed_write_left_is_reclaimed_by_the_next(tmp_path):
    """A write killed midway leaves a temporary file of a dead process and, between
    the arrays and the JSON, an arrays file no JSON names: the next write to the same
    path removes both, and keeps a live process's temporary file and other results."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    out = tmp_path / "r.json"
    write_result(out, _result(np.array([1.0, 2.0])))
    dead_tmp = tmp_path / f".r.json.{gone.pid}.tmp"
    live_tmp = tmp_path / f".r.json.{os.getppid()}.tmp"
    orphan = tmp_path / "r.0123456789abcdef.npz"
    other = tmp_path / "r.v2.0123456789abcdef.npz"
    for path in (dead_tmp, live_tmp, orphan, other):
        path.write_bytes(b"left behind")
    write_result(out, _result(np.array([3.0, 4.0])))
    assert not dead_tmp.exists() and not orphan.exists()
    assert live_tmp.exists() and other.exists()
    assert load_result(out).weights.tolist() == [3.0, 4.0]
    assert len(list(tmp_path.glob("r.*.npz"))) == 2   # its arrays, and r.v2's
