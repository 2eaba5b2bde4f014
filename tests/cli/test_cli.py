"""The CLI as a user meets it: real processes, exit status 2 and one line on bad input."""

import json
import subprocess
import sys

import numpy as np
import pytest

from asyos.cli.run import main

TIMEOUT = 120  # hang guard, not a speed assertion


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "asyos.run", *args], capture_output=True,
                          text=True, timeout=TIMEOUT)


def test_default_job_runs_the_synthetic_problem_and_writes_results(tmp_path):
    out = tmp_path / "results.json"
    proc = _cli("-p", "400", "-s", "20", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "recall of the true support" in proc.stdout
    assert "selected 20 features" in proc.stdout
    assert "OS" in proc.stderr  # the progress bar
    result = json.loads(out.read_text())
    assert len(result["selected"]) == len(result["weights"]) == 20
    assert result["truth"]["recall"] >= 0.8
    # the fitted rule: passes until one without a swap (at most 10)
    assert 2 <= len(result["objective_per_epoch"]) <= 10
    assert result["substitutions_per_epoch"][-1] == 0
    assert result["config"]["s"] == 20 and result["config"]["rule"] == "auto"
    assert result["config"]["s"] == 20 and result["config"]["loss"] == "squared"
    assert {"asyos", "numpy", "numba", "python"} <= set(result["versions"])
    assert result["timings"]["seconds"] > 0 and result["schema_version"] == 2


def test_quiet_classification_and_console_script(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "asyos.cli.main", "run", "--quiet",
                           "--synthetic", "classification", "-p", "300", "-s", "10",
                           "--loss", "logistic"], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "test_error" in proc.stdout and "loss = logistic" in proc.stdout


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 30))
    y = X[:, 3] - 2 * X[:, 7]
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Xf.npy", np.asfortranarray(X))
    np.save(tmp_path / "y.npy", y)
    np.savetxt(tmp_path / "X.csv", X, delimiter=",")
    np.save(tmp_path / "signs.npy", np.sign(y))
    return tmp_path


@pytest.mark.parametrize("name", ["X.npy", "Xf.npy", "X.csv"])
def test_every_format_selects_the_true_features(data, name, capsys):
    assert main(["--data", str(data / name), "--labels", str(data / "y.npy"),
                 "-s", "2", "--epochs", "5", "--quiet"]) == 0
    assert "selected 2 features: 3 7" in capsys.readouterr().out


def test_svmlight_carries_its_labels(data, capsys):
    from sklearn.datasets import dump_svmlight_file

    X = np.load(data / "X.npy")
    dump_svmlight_file(X, np.load(data / "signs.npy"), str(data / "d.svm"))
    assert main(["--data", str(data / "d.svm"), "-s", "3", "--loss", "squared_hinge",
                 "--quiet"]) == 0
    assert "selected 3 features" in capsys.readouterr().out


def _fails(capsys, argv, expected):
    assert main(argv + ["--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("asyos: error: ") and expected in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_input_exits_2_with_one_line(data, capsys, tmp_path):
    X, y = str(data / "X.npy"), str(data / "y.npy")
    short = tmp_path / "short.npy"
    np.save(short, np.zeros(39))
    _fails(capsys, ["--data", X, "--labels", str(short), "-s", "2"], "n = 39")
    nan = np.load(X)
    nan[3, 17] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    _fails(capsys, ["--data", str(tmp_path / "nan.npy"), "--labels", y, "-s", "2"],
           "feature 17 contains NaN or inf")
    _fails(capsys, ["--data", X, "--labels", y, "-s", "0"], "s must be at least 1")
    _fails(capsys, ["--data", X, "--labels", y, "-s", "31"], "p = 30")
    _fails(capsys, ["--data", X, "--labels", y, "-s", "2", "--loss", "squared_hinge"],
           "needs labels of exactly 2 distinct values (mapped to -1 and +1), got 40: ")
    _fails(capsys, ["--data", X, "--labels", y, "-s", "2", "--loss", "huber"],
           "unknown loss 'huber'")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    _fails(capsys, ["--data", str(empty), "--labels", y, "-s", "2"], "file is empty")
    garbage = tmp_path / "garbage.npy"
    garbage.write_bytes(b"not a numpy file at all")
    _fails(capsys, ["--data", str(garbage), "--labels", y, "-s", "2"], "garbage.npy")
    _fails(capsys, ["--data", str(tmp_path / "missing.npy"), "--labels", y, "-s", "2"],
           "no such file")
    _fails(capsys, ["--data", X, "-s", "2"], "give --labels")
    _fails(capsys, ["--data", X, "--labels", y], "-s/--sparsity is required")
    for unwritable in ("/proc", "/sys"):   # root may "access" them, but not write
        _fails(capsys, ["--data", X, "--labels", y, "-s", "2", "--out",
                        f"{unwritable}/r.json"],
               f"directory {unwritable} is not writable")
    np.save(tmp_path / "one.npy", np.load(X)[:1])
    np.save(tmp_path / "y1.npy", np.load(y)[:1])
    _fails(capsys, ["--data", str(tmp_path / "one.npy"), "--labels",
                    str(tmp_path / "y1.npy"), "-s", "2"], "one sample is too few")


def test_bad_input_in_a_real_process_has_no_traceback(data):
    proc = _cli("--data", str(data / "X.npy"), "--labels", str(data / "y.npy"),
                "-s", "99", "--quiet")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("asyos: error: s must be at most the number of "
                                   "features p = 30, got 99")


def test_a_warning_is_one_line(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 8))
    X[:, 2] = 1.0
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", X[:, 0] + 5.0)
    proc = _cli("--data", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
                "-s", "2", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("asyos: warning: selected constant column(s) [2] ")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_argument_errors_exit_2():
    proc = _cli("--epochs", "two")
    assert proc.returncode == 2 and \
        "--epochs: expected a whole number or 'auto', got 'two'" in proc.stderr
    proc = _cli("--rule", "largest")
    assert proc.returncode == 2 and "--rule: invalid choice: 'largest'" in proc.stderr


def test_shuffle_and_standardize_flags(data, tmp_path, capsys):
    X = np.load(data / "X.npy") * np.linspace(0.5, 20, 30) + 5.0
    np.save(tmp_path / "scaled.npy", X)
    out = tmp_path / "r.json"
    assert main(["--data", str(tmp_path / "scaled.npy"), "--labels",
                 str(data / "y.npy"), "-s", "2", "--epochs", "5", "--standardize",
                 "--shuffle", "--seed", "3", "--quiet", "--out", str(out)]) == 0
    assert "selected 2 features: 3 7" in capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["config"]["shuffle"] and result["config"]["standardize"]
    np.testing.assert_allclose(result["standardization"]["mean"],
                               X[:, [3, 7]].mean(axis=0))


def test_the_summary_says_where_the_results_went(tmp_path):
    out = tmp_path / "r.json"
    proc = _cli("-p", "200", "-n", "80", "-s", "4", "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"results in {out} " in proc.stdout and out.is_file()
    assert "written_to" not in out.read_text()


@pytest.mark.parametrize("rule, said", [
    ("fitted", "no step size (the fitted rule solves for its weights)"),
    ("magnitude", "step size eta = ")])
def test_the_summary_shows_a_step_size_only_where_there_is_one(rule, said):
    proc = _cli("-p", "200", "-n", "80", "-s", "4", "--quiet", "--rule", rule)
    assert proc.returncode == 0, proc.stderr
    assert said in proc.stdout and "eta = 0," not in proc.stdout


def test_a_classification_run_votes_over_orders_and_says_so(data, capsys, tmp_path):
    """Sequential classification runs the estimators' default, up to 8 feature
    orders and a vote, stopping after two that agree (as these do); --orders 8 runs
    all 8 and --orders 1 one; the inspector and the results file agree."""
    out = tmp_path / "r.json"
    assert main(["--data", str(data / "X.npy"), "--labels", str(data / "signs.npy"),
                 "-s", "2", "--loss", "logistic", "--quiet", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "vote: 2 of at most 8 (the second kept 100% of the first's features) " \
        "feature orders of 3 passes" in said
    assert "selected 2 features: 3 7" in said
    vote = json.loads(out.read_text())["vote"]
    assert vote["orders"] == 2 and len(vote["objectives"]) == 2
    assert vote["most_orders"] == 8 and vote["agreement"] == 1
    assert main(["--data", str(data / "X.npy"), "--labels", str(data / "signs.npy"),
                 "-s", "2", "--loss", "logistic", "--quiet", "--orders", "8"]) == 0
    assert "vote: 8 feature orders of 3 passes" in capsys.readouterr().out
    assert main(["--data", str(data / "X.npy"), "--labels", str(data / "signs.npy"),
                 "-s", "2", "--loss", "logistic", "--quiet", "--orders", "1"]) == 0
    assert "vote:" not in capsys.readouterr().out
    assert main(["--data", str(data / "X.npy"), "--labels", str(data / "y.npy"),
                 "-s", "2", "--quiet", "--orders", "3"]) == 0   # any loss, if asked
    assert "vote: 3 feature orders" in capsys.readouterr().out


def test_version_names_the_package_and_the_wire_protocol(capsys):
    from asyos import PROTOCOL_VERSION, __version__
    from asyos.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == \
        f"asyos {__version__} (wire protocol {PROTOCOL_VERSION})"


def test_every_subcommand_prints_its_help():
    """argparse formats help lazily: a stray % in a help text only fails here."""
    from asyos.cli.main import build_parser

    _, subparsers = build_parser()
    for name, parser in subparsers.items():
        assert name in parser.format_help()


def test_the_cli_formats_warnings_as_one_line_only_while_it_runs():
    import warnings

    from asyos.cli.options import guarded

    before = warnings.formatwarning
    assert guarded(lambda: warnings.warn("said")) == 0
    assert warnings.formatwarning is before


def test_sigterm_and_interrupt_end_a_command_with_one_line_and_143_or_130(capsys):
    """``errors.Terminated`` (what ``raise_terminated`` makes of SIGTERM, under
    mpiexec) is a KeyboardInterrupt, so it ends cleanly wherever ^C does, but the
    front says it in its own words and status."""
    import signal

    from asyos.cli.options import guarded
    from asyos.errors import Terminated, raise_terminated

    def interrupt():
        raise KeyboardInterrupt

    def terminate():
        raise Terminated

    assert guarded(interrupt) == 130
    assert capsys.readouterr().err == "asyos: interrupted\n"
    assert guarded(terminate) == 143
    assert capsys.readouterr().err == "asyos: terminated\n"
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        with pytest.raises(Terminated):
            raise_terminated(signal.SIGTERM, None)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN   # once only
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("flags, said", [
    (["--simulate", "2", "--staleness", "3"], "--staleness is for --workers Q or "
     "asyos server; with --simulate Q the simulator's delay τ is --delay"),
    (["--simulate", "2", "--window", "2"], "--window is for --workers Q; with "
     "--simulate Q the simulator's delay τ is --delay"),
    (["--workers", "2", "--random-delay"], "--delay and --random-delay go with "
     "--simulate Q"),
])
def test_an_option_its_backend_does_not_take_is_refused_in_the_cli_spelling(
        flags, said, capsys):
    assert main(["-p", "200", "-s", "5", "--quiet", *flags]) == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("carrier", [[], ["--workers", "2"], ["--simulate", "2"]],
                         ids=["sequential", "shared", "simulated"])
def test_a_selected_constant_column_is_warned_about_on_every_carrier(
        tmp_path, carrier):
    """A constant column stands in for the missing intercept: sequential OS and Asy-OS
    both say so (exit 0: the arithmetic is valid)."""
    from asyos.errors import DegenerateWarning

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 24))
    X[:, 3] = 1.0
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", 2 * X[:, 3] + X[:, 5] + 0.01 * rng.standard_normal(60))
    with pytest.warns(DegenerateWarning, match=r"constant column\(s\) \[3\] with a "
                      "nonzero weight"):
        assert main(["--data", str(tmp_path / "X.npy"), "--labels",
                     str(tmp_path / "y.npy"), "-s", "3", "--quiet", *carrier]) == 0


def test_results_at_out_are_replaced_only_with_force(tmp_path):
    """A finished run's results are not replaced by accident: an existing --out is
    refused before any work (exit 2), and replaced with --force."""
    out = tmp_path / "r.json"
    assert main(["-p", "40", "-s", "3", "--quiet", "--out", str(out)]) == 0
    first = out.read_text()
    assert main(["-p", "40", "-s", "4", "--quiet", "--out", str(out)]) == 2
    assert out.read_text() == first
    assert main(["-p", "40", "-s", "4", "--quiet", "--out", str(out), "--force"]) == 0
    assert json.loads(out.read_text())["config"]["s"] == 4
