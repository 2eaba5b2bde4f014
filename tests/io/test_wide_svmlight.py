"""An svmlight feature index sets p for the whole file, and every reader holds arrays
of p entries: an index far beyond what the memory (or the file) can hold is refused,
naming its line and the index, before any of them is allocated.  It was killed by
the OOM killer at 22.5 GB, with no message, for one line holding index 2·10⁹."""

import resource
import subprocess
import sys

import pytest

LIMIT = 4 << 30   # the address space each command may use here


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def asyos(*args, cwd):
    return subprocess.run([sys.executable, "-m", "asyos", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=_limited)


def one_line(proc) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "compil" not in line]
    assert len(lines) == 1 and lines[0].startswith("asyos: error: "), proc.stderr
    return lines[0]


@pytest.mark.parametrize("command", [
    ("convert", "big.svm", "X.csc", "--labels-out", "y.npy", "-q"),
    ("convert", "big.svm", "X.npy", "-q"),
    ("run", "--data", "big.svm", "-s", "1", "--quiet"),
])
def test_an_index_of_two_billion_is_refused_naming_its_line(tmp_path, command):
    (tmp_path / "big.svm").write_text("# made by hand\n1 1:0.5 3:1\n\n"
                                      "-1 3:2 2000000000:1.0\n0 2:1\n")
    line = one_line(asyos(*command, cwd=tmp_path))
    assert "big.svm: line 4: feature index 2000000000 implies p = 2,000,000," in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.svm"]


def test_an_index_far_beyond_the_files_size_is_refused(tmp_path):
    """10⁸ features (1.6 GB of counts) from a 30-byte file: a typo, not data, even
    where the memory would hold them."""
    (tmp_path / "wide.svm").write_text("1 1:0.5 100000000:1\n-1 3:2\n")
    line = one_line(asyos("convert", "wide.svm", "X.csc", "-q", cwd=tmp_path))
    assert "wide.svm: line 1: feature index 100000000 implies p = " in line


def test_a_wide_sparse_file_still_converts(tmp_path):
    """p = 10⁷ with a few nonzeros: the count's one O(p) array, well inside 4 GB."""
    rows = [f"{i % 2} {i + 1}:1 {10**7 - i}:2" for i in range(50)]
    (tmp_path / "wide.svm").write_text("\n".join(rows) + "\n")
    proc = asyos("convert", "wide.svm", "X.csc", "--labels-out", "y.npy", "-q",
                 cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "p = 10000000" in proc.stdout and "100 nonzeros" in proc.stdout
