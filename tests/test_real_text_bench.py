"""benchmarks/real_text.py's corpus builder on a handful of installed man pages (and on
roff written here), and benchmarks/real_regression.py's on package records written
here, so that the benchmarks do not rot."""

import gzip
import sys
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load

real_text = load("real_text")
sys.modules["real_text"] = real_text   # real_regression imports it by that name
real_regression = load("real_regression")

STANZAS = """Package: tiny
Installed-Size: 120
Depends: libc6 (>= 2.34), libfoo-1.2 | libbar
Description: a tiny tool
 Its long description, one line.
 .
 A second paragraph.
Tag: role::program, use::editing
Section: utils

Package: nosize
Description: a record without Installed-Size

Package: tiny
Installed-Size: 999
Description: the same name again (another architecture)
"""


def test_package_records_become_documents_and_sizes(tmp_path):
    (tmp_path / "x_Packages").write_text(STANZAS)
    docs, y = real_regression.packages([tmp_path / "x_Packages"])
    assert len(docs) == 1 and y[0] == pytest.approx(np.log1p(120))
    words = docs[0].split()
    assert words[:3] == ["a", "tiny", "tool"] and "paragraph." not in words
    assert {"section_utils", "role_program", "use_editing", "dep_libc6",
            "dep_libfoo_1_2"} <= set(words)
    (tmp_path / "x_Packages.gz").write_bytes(gzip.compress(STANZAS.encode()))
    assert real_regression.packages([tmp_path / "x_Packages.gz"])[0] == docs


def test_page_text_keeps_name_and_description_only():
    roff = "\n".join([
        '.\\" a comment', '.TH LS 1', '.SH NAME', r'ls \- list directory contents',
        '.SH SYNOPSIS', '.B ls', '[\\fIOPTION\\fR]', '.SH "DESCRIPTION"', '.PP',
        r'List \fBinformation\fR about the \(lqFILEs\(rq.', '.IX Header "x"',
        '.SH SEE ALSO', 'dir(1)'])
    assert real_text.page_text(roff) == \
        "ls - list directory contents List information about the FILEs ."
    mdoc = ".Dd x\n.Sh NAME\n.Nm cat\n.Nd concatenate\n.Sh DESCRIPTION\nReads files."
    assert real_text.page_text(mdoc) == "cat concatenate Reads files."


def test_man_pages_skips_links_and_redirects(tmp_path):
    (tmp_path / "man3").mkdir()
    with gzip.open(tmp_path / "man3" / "a.3.gz", "wt") as f:
        f.write(".SH NAME\na \\- b\n.SH DESCRIPTION\nThe c function.\n")
    with gzip.open(tmp_path / "man3" / "b.3.gz", "wt") as f:
        f.write(".so man3/a.3\n")
    (tmp_path / "man3" / "c.3.gz").symlink_to("a.3.gz")
    assert real_text.man_pages(tmp_path) == [("3", "a.3.gz", "a - b The c function.")]
    assert real_text.check_pages(tmp_path) == "no pages in section(s) 1, 2, 8"


def test_corpus_of_installed_pages():
    why = real_text.check_pages()
    if why:
        pytest.skip(f"{why}; {real_text.NEEDS}")
    docs = real_text.man_pages(limit=15)
    assert {d[0] for d in docs} >= {"1", "3", "8"}
    assert all(d[2].strip() for d in docs)
    for task in real_text.TASKS:
        keep, y = real_text.task_labels(docs, task)
        X = real_text.features([docs[i][2] for i in keep])
        assert X.format == "csc" and X.shape[0] == len(y) == len(keep)
        assert 0 < y.sum() < len(y) and set(np.unique(X.data)) == {1.0}


FAKE_ASYOS = '''
import numpy as np


class OnlineSubstitutionClassifier:
    """A stand-in: it scores by the first column."""

    def __init__(self, n_features_to_select, **options):
        self.k = n_features_to_select

    def fit(self, X, y):
        self.coef_ = np.zeros(X.shape[1])
        self.coef_[0] = 1.0
        return self

    def decision_function(self, X):
        return np.asarray(X[:, 0].todense()).ravel()
'''


def test_versus_runs_a_row_from_the_other_checkout(tmp_path):
    """``--versus``: a child given a checkout imports asyos from there (its result
    names the package it used), and one given none imports this one's."""
    import scipy.sparse as sp
    other = tmp_path / "other"
    (other / "asyos").mkdir(parents=True)
    (other / "asyos" / "__init__.py").write_text(FAKE_ASYOS)
    rng = np.random.default_rng(0)
    X = sp.random(40, 30, density=0.2, format="csc", random_state=0)
    y = (rng.random(40) > 0.5).astype(np.int64)
    y[:2] = [0, 1]
    sp.save_npz(tmp_path / "X.npz", X)
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "train.npy", np.arange(0, 40, 2))
    np.save(tmp_path / "test.npy", np.arange(1, 40, 2))
    job = {"method": "os", "k": 3, "X": str(tmp_path / "X.npz"),
           "y": str(tmp_path / "y.npy"), "train": str(tmp_path / "train.npy"),
           "test": str(tmp_path / "test.npy"), "folder": str(tmp_path / "f"),
           "root": str(other)}
    script = str(Path(__file__).parents[1] / "benchmarks" / "real_text.py")
    result = real_text.run_child(job, timeout=120, script=script)
    assert result.get("asyos") == str((other / "asyos").resolve()), result
    del job["root"]
    result = real_text.run_child(job, timeout=300, script=script)
    assert "failed" not in result, result
    assert Path(result["asyos"]) == (Path(__file__).parents[1] / "asyos").resolve()
