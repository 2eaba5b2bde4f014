"""``asyos make``: the embedded problem as files, in every format ``--data`` reads."""

import json

import numpy as np
import pytest

from asyos.cli.main import main
from asyos.datasets import stream_problem


def test_the_files_hold_the_embedded_problem_and_select_what_it_selects(tmp_path,
                                                                        capsys):
    X, y, truth = (tmp_path / name for name in ("X.npy", "y.npy", "truth.npy"))
    assert main(["make", str(X), str(y), "-p", "300", "-s", "10", "--seed", "3",
                 "--support", str(truth)]) == 0
    assert "n = 99, p = 300, 10 true features" in capsys.readouterr().out
    problem = stream_problem("regression", p=300, s=10, seed=3)
    data = np.load(X)
    assert data.flags.f_contiguous and data.shape == (99, 300)
    np.testing.assert_array_equal(data, problem.stream.columns(np.arange(300)).T)
    np.testing.assert_array_equal(np.load(y), problem.y)
    np.testing.assert_array_equal(np.load(truth), np.sort(problem.support))
    results = {}
    for name, data_flags in (("embedded", []),
                             ("files", ["--data", str(X), "--labels", str(y)])):
        out = tmp_path / f"{name}.json"
        assert main(["run", "-p", "300", "-s", "10", "--seed", "3", "--quiet",
                     "--out", str(out), *data_flags]) == 0
        results[name] = json.loads(out.read_text())
    assert results["files"]["selected"] == results["embedded"]["selected"]


def _selected(tmp_path, *flags) -> list:
    out = tmp_path / "r.json"
    assert main(["run", *flags, "--quiet", "--force", "--out", str(out)]) == 0
    return json.loads(out.read_text())["selected"]


@pytest.mark.parametrize("files, read", [
    (["data.csv"], ["--data", "data.csv", "--label-column", "0"]),
    (["train.svm"], ["--data", "train.svm"]),
    (["X.csc", "y.npy"], ["--data", "X.csc", "--labels", "y.npy"]),
])
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_every_format_reads_back_as_the_embedded_problem(tmp_path, monkeypatch, files,
                                                         read, task):
    monkeypatch.chdir(tmp_path)
    sizes = ["-s", "5", "-n", "200"]
    assert main(["make", *files, "-p", "60", *sizes, "--synthetic", task]) == 0
    loss = ["--loss", "squared" if task == "regression" else "squared_hinge"]
    assert _selected(tmp_path, *read, "-s", "5", *loss) == \
        _selected(tmp_path, "--synthetic", task, "-p", "60", *sizes, *loss)


@pytest.mark.parametrize("args, message", [
    (["X.txt"], "give a .npy, .csc, .csv or .svm name"),
    (["X.npy"], "hold no labels: give a labels file too"),
    (["X.npy", "y.csv"], "labels are written as .npy"),
    (["X.npy", "y.npy", "-p", "0"], "p"),
])
def test_bad_requests_exit_2_with_one_line(tmp_path, monkeypatch, capsys, args,
                                          message):
    monkeypatch.chdir(tmp_path)
    assert main(["make", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_an_existing_file_is_kept_unless_forced(tmp_path, capsys):
    X, y = tmp_path / "X.npy", tmp_path / "y.npy"
    y.write_text("mine")
    assert main(["make", str(X), str(y), "-p", "50", "-s", "5"]) == 2
    assert f"{y} exists; give --force" in capsys.readouterr().err
    assert y.read_text() == "mine" and not X.exists()
    assert main(["make", str(X), str(y), "-p", "50", "-s", "5", "--force"]) == 0
    assert np.load(y).shape == (np.load(X).shape[0],)


def test_plot_without_matplotlib_names_the_extra_of_a_checkout(monkeypatch):
    import builtins

    from asyos.errors import InputError
    from asyos.experiments.plot import pyplot

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(InputError, match=r"pip install -e '\.\[plot\]'"):
        pyplot()
