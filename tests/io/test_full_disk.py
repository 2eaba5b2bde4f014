"""A full disk: every writer says so in one line ("asyos: error: cannot write FILE:
no space left on device ..."), exits 2, and leaves no file that reads as valid (the
previous result, where there was one, stays whole; no temporary file or folder).

Each test mounts a small tmpfs (root only; CI runs as root), fills it, and runs the
real command line into it."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from asyos import load_result
from asyos.errors import InputError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def disk(tmp_path):
    """A 1 MB tmpfs, unmounted at the end whatever happens."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs",
                           str(mount)], capture_output=True, text=True)
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(disk: Path) -> None:
    """Take every free block of ``disk``."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    assert os.statvfs(disk).f_bavail == 0


def asyos(*args, module="asyos", cwd=None):
    return subprocess.run([sys.executable, "-m", module, *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


def refused(proc, name) -> str:
    """The one error line of a command the full disk refused (a first run on a
    machine may say on stderr that it compiles kernels: those lines are logging)."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines()
             if "compil" not in line]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("asyos: error: ") and "no space left on device" in \
        lines[0] and str(name) in lines[0], lines[0]
    return lines[0]


def left(disk: Path) -> list[str]:
    return sorted(p.name for p in disk.iterdir() if p.name != "filler")


def test_a_full_disk_keeps_the_previous_result_whole(disk):
    out = disk / "r.json"
    run = ("-p", "200", "-s", "5", "--quiet", "--out", out)
    first = asyos(*run, module="asyos.run")
    assert first.returncode == 0, first.stderr
    before = load_result(out)
    files = left(disk)
    fill(disk)
    refused(asyos(*run, "--force", "--seed", "1", module="asyos.run"), out)
    assert left(disk) == files   # no temporary file, no arrays of the failed run
    again = load_result(out)
    np.testing.assert_array_equal(again.selected, before.selected)
    np.testing.assert_array_equal(again.weights, before.weights)


def test_a_full_disk_writes_no_result_at_all(disk):
    fill(disk)
    refused(asyos("-p", "200", "-s", "5", "--quiet", "--out", disk / "r.json",
                  module="asyos.run"), disk / "r.json")
    assert left(disk) == []


@pytest.mark.parametrize("output", ["X.csc", "X.npy"])
def test_convert_on_a_full_disk_leaves_nothing(disk, tmp_path, output):
    source = tmp_path / "small.svm"
    source.write_text("1 1:0.5 2:1.0\n-1 3:2\n0 2:4\n")
    fill(disk)
    refused(asyos("convert", source, disk / output, "--labels-out", disk / "y.npy",
                  "-q"), disk / output)
    assert left(disk) == []   # no .tmp-PID folder, no .tmp file


@pytest.mark.parametrize("data", ["X.npy", "X.csc", "train.svm"])
def test_make_on_a_full_disk_leaves_nothing(disk, data):
    """``asyos make`` wrote X.npy through a memory map of a sparse file: on a full
    disk it died of SIGBUS (exit 135) and left a 21 MB X.npy, a valid header over
    holes that read as zeros."""
    labels = [disk / "y.npy"] if data != "train.svm" else []
    refused(asyos("make", disk / data, *labels), disk / data)
    assert left(disk) == []


def test_make_leaves_no_data_without_its_labels(disk):
    """Room for X.npy (32 KB) but not for y.npy: neither is left (a later run would read
    another problem's labels, or none)."""
    fill(disk)
    os.truncate(disk / "filler", os.path.getsize(disk / "filler") - (32 << 10))
    refused(asyos("make", "-p", "100", "-s", "5", disk / "X.npy", disk / "y.npy"),
            disk / "y.npy")
    assert left(disk) == []


def test_keys_on_a_full_disk_leave_no_key(disk):
    fill(disk)
    refused(asyos("keys", disk / "keys"), disk / "keys")
    assert left(disk) == []


def test_a_checkpoint_on_a_full_disk_keeps_the_previous_one(disk):
    from asyos.transport.zeromq.server import ZmqServer

    path = disk / "ck.npz"
    server = SimpleNamespace(checkpoint_path=path, session=SimpleNamespace(
        checkpoint_due=True, snapshot=lambda: {"u": np.arange(4.0)}))
    ZmqServer.save_checkpoint(server)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    fill(disk)
    server.session.snapshot = lambda: {"u": np.random.default_rng(0).random(1 << 16)}
    with pytest.raises(InputError, match="no space left on device.*previous "
                                         "checkpoint"):
        ZmqServer.save_checkpoint(server)
    assert left(disk) == ["ck.npz"]
    with np.load(path) as saved:
        np.testing.assert_array_equal(saved["u"], np.arange(4.0))



def test_plot_on_a_full_disk_leaves_no_half_png(disk, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.json"
    made = asyos("-p", "200", "-s", "5", "--quiet", "--out", out, module="asyos.run")
    assert made.returncode == 0, made.stderr
    fill(disk)
    refused(asyos("plot", out, "--out", disk / "r.png"), disk / "r.png")
    assert left(disk) == []
