"""``-s auto``: sequential OS along a path of model sizes from the command line, the
path in the results (and in ``inspect``), its figure in ``plot``, and the refusals."""

import json
import subprocess
import sys

import numpy as np
import pytest

from asyos import load_result
from asyos.cli.main import main as asyos_main
from asyos.cli.run import main
from asyos.metrics import recall

GUARD = 120   # hang guard, not a speed assertion
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """200 samples, 600 features, 8 of them true (the size sic and ebic find)."""
    d = tmp_path_factory.mktemp("path")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 600))
    support = np.sort(rng.choice(600, 8, replace=False))
    y = X[:, support] @ rng.choice([-1.0, 1.0], 8) + 0.5 * rng.standard_normal(200)
    np.save(d / "X.npy", X)
    np.save(d / "y.npy", y)
    return d, support


def _args(data, *extra):
    d, _ = data
    return ["--data", str(d / "X.npy"), "--labels", str(d / "y.npy"), *extra]


@pytest.fixture(scope="module")
def path_run(data, tmp_path_factory):
    """One `-s auto --max-features 15` run, its stdout and its results file."""
    out = tmp_path_factory.mktemp("out") / "r.json"
    capture = subprocess.run([sys.executable, "-m", "asyos.run",
                              *_args(data, "-s", "auto", "--max-features", "15",
                                     "--out", str(out))],
                             check=False, capture_output=True, text=True, timeout=GUARD)
    return capture, out


def test_s_auto_writes_the_chosen_fit_with_its_path(data, path_run):
    proc, out = path_run
    _, support = data
    assert proc.returncode == 0, proc.stderr
    assert "model size: s = 8 chosen by sic over 1..15 (15 sizes)" in proc.stdout
    assert "s = auto, loss = squared" in proc.stdout
    assert "selected 8 features" in proc.stdout
    assert "OS path" in proc.stderr   # the progress bar
    document = json.loads(out.read_text())
    path = document["size_path"]
    assert path["sizes"] == list(range(1, 16)) and path["chosen"] == 8
    assert path["criterion"] == "sic" and len(path["values"]) == 15
    assert len(path["objective"]) == len(path["selected"]) == 15
    assert [len(s) for s in path["selected"]] == path["sizes"]
    assert path["n_steps"] >= 15 * 600 and path["seconds"] > 0
    # the result is the chosen size's fit
    assert document["selected"] == path["selected"][7]
    assert recall(np.array(document["selected"]), support) == 1.0
    assert document["objective"] == pytest.approx(path["objective"][7])
    assert document["config"]["s"] == "auto"
    assert document["config"]["criterion"] == "sic"
    assert document["config"]["max_features"] == 15


def test_the_path_round_trips_and_inspect_shows_it(path_run, capsys):
    _, out = path_run
    loaded = load_result(out)
    assert loaded.context["size_path"] == json.loads(out.read_text())["size_path"]
    assert loaded.context["path"] == out   # the file the result came from
    assert asyos_main(["inspect", str(out), "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert "model size" in text and "s = 8 chosen by sic over 1..15" in text
    assert "s = auto" in text


def test_plot_draws_the_path_beside_the_run(path_run, tmp_path, capsys):
    _, out = path_run
    png = tmp_path / "r.png"
    assert asyos_main(["plot", str(out), "--out", str(png)]) == 0
    figure = tmp_path / "r-path.png"
    assert f"wrote {figure}" in capsys.readouterr().out
    for image in (png, figure):
        content = image.read_bytes()
        assert content.startswith(PNG) and len(content) > 10_000


def test_plot_of_a_run_without_a_path_draws_one_figure(data, tmp_path, capsys):
    out = tmp_path / "fixed.json"
    assert main(_args(data, "-s", "8", "--quiet", "--out", str(out))) == 0
    assert "model size" not in capsys.readouterr().out
    assert "size_path" not in json.loads(out.read_text())
    assert asyos_main(["plot", str(out)]) == 0
    assert (tmp_path / "fixed.png").is_file()
    assert not (tmp_path / "fixed-path.png").exists()


def test_ebic_and_a_toml_config(data, tmp_path, capsys):
    (tmp_path / "run.toml").write_text('sparsity = "auto"\ncriterion = "ebic"\n'
                                       'max-features = 12\nquiet = true\n')
    assert main(_args(data, "--config", str(tmp_path / "run.toml"))) == 0
    assert "model size: s = 8 chosen by ebic over 1..12 (12 sizes)" in \
        capsys.readouterr().out


def test_the_synthetic_default_reports_its_recall(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "-p", "400", "-s",
                           "auto", "--quiet", "--out", str(out)],
                          check=False, capture_output=True, text=True, timeout=GUARD)
    assert proc.returncode == 0, proc.stderr
    assert "recall of the true support" in proc.stdout
    # the doubling search, past abess's default largest size (below the 100 true)
    assert "chosen by sic: OS at s = 8..128 doubling, refined by backward " \
        "elimination" in proc.stdout
    document = json.loads(out.read_text())
    assert document["truth"]["recall"] >= 0.9
    assert 90 <= document["size_path"]["chosen"] <= 130


def test_a_size_at_the_end_of_the_path_says_so(data, capsys):
    assert main(_args(data, "-s", "auto", "--max-features", "4", "--quiet")) == 0
    assert ("s = 4 chosen by sic over 1..4 (4 sizes); the largest on the path: a "
            "larger --max-features may fit better") in capsys.readouterr().out


def _fails(capsys, call, argv, expected):
    assert call(argv) == 2
    err = capsys.readouterr().err
    assert err == f"asyos: error: {expected}\n"


ASY = "-s auto runs sequential OS along a path; give a number for Asy-OS"


def test_refusals_exit_2_with_one_line(data, capsys):
    _fails(capsys, main, _args(data, "-s", "8", "--criterion", "ebic"),
           "--criterion goes with -s auto (a path over model sizes)")
    _fails(capsys, main, _args(data, "-s", "8", "--max-features", "10"),
           "--max-features goes with -s auto (a path over model sizes)")
    _fails(capsys, main, ["-p", "300", "--max-features", "10"],
           "--max-features goes with -s auto (a path over model sizes)")
    _fails(capsys, main, _args(data, "-s", "auto", "--simulate", "2"), ASY)
    _fails(capsys, asyos_main, ["server", "--workers", "2", "-s", "auto"], ASY)
    _fails(capsys, main, _args(data, "-s", "auto", "--eta", "0.1"),
           "-s auto runs OS along a path with its default step size and no groups; "
           "--eta goes with a number for -s")
    for bad in ("0", "601"):
        _fails(capsys, main, _args(data, "-s", "auto", "--max-features", bad),
               "--max-features must be between 1 and the number of features "
               f"p = 600, got {bad}")


def test_s_takes_a_number_or_auto():
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "-s", "many"],
                          check=False, capture_output=True, text=True, timeout=GUARD)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == ("python -m asyos.run: error: argument "
                                            "-s/--sparsity: expected a whole number "
                                            "or 'auto', got 'many'")
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--criterion", "aic"],
                          check=False, capture_output=True, text=True, timeout=GUARD)
    assert proc.returncode == 2 and "--criterion: invalid choice: 'aic'" in proc.stderr


MPI_RANK_0 = """
import sys
import asyos.cli.run as run
from asyos.transport import mpi

def abort(comm, code, message):   # rank 0's abort, without ending an MPI job
    print(f"asyos: error: {message}", file=sys.stderr)
    sys.exit(code)

run.launched_by_mpi = lambda: True
mpi.abort = abort
sys.exit(run.main(["-p", "300", "-s", "auto", "--quiet"]))
"""


def test_s_auto_is_refused_under_mpi():
    """Rank 0's side of an `mpiexec -n 3 python -m asyos.run -s auto` (a singleton
    MPI process standing in for the job)."""
    pytest.importorskip("mpi4py")
    proc = subprocess.run([sys.executable, "-c", MPI_RANK_0], check=False, capture_output=True,
                          text=True, timeout=GUARD)
    assert proc.returncode == 2
    assert proc.stderr == f"asyos: error: {ASY}\n"
