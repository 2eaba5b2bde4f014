"""The FGM experiments (``python -m asyos.experiments fgm-synthetic|fgm-poly``), run on
tiny settings: the CLI hook, the files, and that the rows say what they should."""

import csv

import numpy as np
import pytest

from asyos.experiments import fgm as experiment
from asyos.experiments.cli import main


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(experiment.SETTINGS, True, {
        "m": 300, "reps": 1, "ks": [5, 15], "poly_ks": [2, 6], "poly_reps": 1})
    monkeypatch.setattr(experiment, "PAIRS", ((3, 8),))


def _rows(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


def test_synthetic_command_writes_rows_and_figure(tiny, tmp_path):
    assert main(["fgm-synthetic", "--quick", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    rows = _rows(tmp_path / "fgm-synthetic.csv")
    assert (tmp_path / "fgm-synthetic.png").stat().st_size > 0
    fgm = [r for r in rows if r["method"].startswith("FGM")]
    assert [int(r["n_selected"]) for r in fgm] == [5, 15]
    assert all(int(r["recovered"]) <= int(r["n_selected"]) for r in rows
               if r["experiment"] == "fgm-synthetic")
    assert float(fgm[-1]["accuracy"]) > 0.75
    assert {"OS", "L1-SVM (liblinear)"} <= {r["method"] for r in rows}
    inexact = [r for r in rows if r["experiment"] == "fgm-inexact"]
    for eps in ("ε_in = 0.001", "ε_in = 1e-06"):
        objective = [float(r["relative_objective"]) for r in inexact
                     if r["method"] == eps]
        assert len(objective) >= 2 and np.all(np.diff(objective) <= 1e-12)


def test_poly_command_compares_three_methods_in_one_space(tiny, tmp_path):
    assert main(["fgm-poly", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    rows = _rows(tmp_path / "fgm-poly.csv")
    assert {r["dataset"] for r in rows} == {"digits 3v8", "breast cancer"}
    assert {r["n_features"] for r in rows if r["dataset"] == "breast cancer"} == \
        {str(30 + 30 * 31 // 2)}
    for dataset in ("digits 3v8", "breast cancer"):
        best = max(float(r["accuracy"]) for r in rows if r["dataset"] == dataset
                   and r["method"].startswith("FGM"))
        assert best > 0.9
    assert len({r["method"] for r in rows}) == 3
