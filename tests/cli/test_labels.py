"""Classification labels on the command line: any two values ({0, 1}, {1, 2}, ±1) are
mapped to ±1 before the run (the smaller to −1), recorded as config["classes"], and
select exactly what ±1 labels select; three values stop with one line, status 2."""

import json
import subprocess
import sys

import numpy as np
import pytest
from loopback import asyos, free_port, run_on_loopback

from asyos import load_result
from asyos.cli.main import main as asyos_main
from asyos.cli.run import main

GUARD = 120   # hang guard, not a speed assertion


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 30))
    margin = X[:, 3] - 2 * X[:, 7] + 0.3 * rng.standard_normal(60)
    signs = np.where(margin > 0, 1.0, -1.0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "pm.npy", signs)
    np.save(tmp_path / "01.npy", (signs > 0).astype(np.int64))
    np.savetxt(tmp_path / "12.txt", np.where(signs > 0, 2.0, 1.0))
    np.save(tmp_path / "three.npy", np.arange(60) % 3)
    return tmp_path


def _run(data, labels, capsys, *flags):
    out = data / f"{labels}.json"
    assert main(["--data", str(data / "X.npy"), "--labels", str(data / labels), "-s",
                 "2", "--epochs", "3", "--quiet", "--out", str(out), *flags]) == 0
    return json.loads(out.read_text()), capsys.readouterr().out


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_zero_one_and_one_two_labels_select_as_plus_minus_one(data, capsys, loss):
    reference, text = _run(data, "pm.npy", capsys, "--loss", loss)
    assert reference["config"]["classes"] == [-1, 1]
    assert "labels:" not in text      # ±1 already: nothing to say
    assert reference["selected"] == [3, 7]
    for labels, classes in (("01.npy", [0, 1]), ("12.txt", [1, 2])):
        result, text = _run(data, labels, capsys, "--loss", loss)
        assert result["config"]["classes"] == classes
        assert f"labels: {classes[0]} → -1, {classes[1]} → +1" in text
        assert result["selected"] == reference["selected"]
        assert result["weights"] == reference["weights"]
        assert result["objective_per_epoch"] == reference["objective_per_epoch"]
    # asyos inspect shows the mapping from the results file
    assert asyos_main(["inspect", str(data / "01.npy.json")]) == 0
    assert "0 → -1, 1 → +1" in capsys.readouterr().out


def test_the_simulator_maps_the_labels_too(data, capsys):
    reference, _ = _run(data, "pm.npy", capsys, "--loss", "logistic", "--simulate", "2")
    result, _ = _run(data, "01.npy", capsys, "--loss", "logistic", "--simulate", "2")
    assert result["config"]["classes"] == [0, 1]
    assert result["selected"] == reference["selected"]
    assert result["weights"] == reference["weights"]


def test_the_squared_loss_keeps_the_labels_as_they_are(data, capsys):
    result, _ = _run(data, "01.npy", capsys)
    assert "classes" not in result["config"]
    # y in {0, 1} regressed as numbers, not mapped: another objective than ±1's
    mapped, _ = _run(data, "pm.npy", capsys)
    assert result["objective_per_epoch"] != mapped["objective_per_epoch"]


def test_three_label_values_exit_2_with_one_line(data):
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--data",
                           str(data / "X.npy"), "--labels", str(data / "three.npy"),
                           "-s", "2", "--loss", "logistic", "--quiet"],
                          capture_output=True, text=True, timeout=GUARD)
    assert proc.returncode == 2
    assert proc.stderr == ("asyos: error: a classification loss needs labels of "
                           "exactly 2 distinct values (mapped to -1 and +1), got 3: "
                           "0, 1, 2\n")
    assert proc.stdout == ""


def test_one_label_value_exits_2(data, capsys):
    np.save(data / "ones.npy", np.ones(60))
    assert main(["--data", str(data / "X.npy"), "--labels", str(data / "ones.npy"),
                 "-s", "2", "--loss", "squared_hinge", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "exactly 2 distinct values" in err and "got 1: 1" in err


def test_the_zeromq_server_maps_the_labels_it_sends_its_workers(data):
    out = data / "z.json"
    run_on_loopback(2, ["--labels", data / "12.txt", "-s", 2, "--loss", "logistic",
                        "--epochs", 3, "--quiet", "--out", out],
                    ["--data", data / "X.npy"])
    result = load_result(out)
    assert result.config["classes"] == [1, 2]
    # the workers fit ±1 labels: the strongest feature is found and the loss is well
    # below log 2 = 0.69, the loss of w = 0 (the exact selection is Asy-OS's timing)
    assert 7 in result.selected.tolist()
    assert result.objective < 0.45, result.objective
    # three values: the server stops before it binds, one line, status 2
    proc = asyos("server", "--bind", f"tcp://127.0.0.1:{free_port()}", "--labels",
                  data / "three.npy", "-s", 2, "--workers", 2, "--loss", "logistic")
    _, err = proc.communicate(timeout=GUARD)
    assert proc.returncode == 2 and err.count("\n") == 1 and "got 3: 0, 1, 2" in err
