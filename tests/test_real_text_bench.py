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
