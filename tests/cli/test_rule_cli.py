"""--rule and --ridge on the command line: the substitution rule and its ridge reach
the run and its results; a ridge that is not a positive number exits 2."""

import json

import numpy as np
import pytest

from asyos.cli.run import main
from asyos.solvers.voting import fit_os_voted


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((80, 40))
    y = np.where(X[:, 5] - X[:, 9] + 0.3 * rng.standard_normal(80) > 0, 1.0, -1.0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    return tmp_path, X, y


@pytest.mark.parametrize("flags, expected", [
    ([], dict(rule="auto")),
    (["--rule", "magnitude"], dict(rule="magnitude")),
    (["--ridge", "0.5"], dict(rule="auto", ridge=0.5)),
    (["--simulate", "2", "--ridge", "0.5"], None),
])
def test_the_rule_and_ridge_reach_the_run(data, capsys, flags, expected):
    tmp, X, y = data
    out = tmp / "r.json"
    assert main(["--data", str(tmp / "X.npy"), "--labels", str(tmp / "y.npy"), "-s",
                 "3", "--loss", "logistic", "--quiet", "--out", str(out), *flags]) == 0
    result = json.loads(out.read_text())
    assert result["config"]["rule"] == (flags[1] if "--rule" in flags else "auto")
    assert result["config"]["ridge"] == (0.5 if "--ridge" in flags else None)
    assert result["config"]["orders"] == "auto"
    if expected is not None:   # the sequential run is the estimators' default: 8 orders
        direct = fit_os_voted(X, y, 3, orders=8, loss="logistic", **expected)
        assert result["selected"] == direct.selected.tolist()
        np.testing.assert_allclose(result["weights"], direct.weights, rtol=1e-12)


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_a_ridge_that_is_not_positive_exits_2(data, capsys, value):
    tmp, _, _ = data
    assert main(["--data", str(tmp / "X.npy"), "--labels", str(tmp / "y.npy"), "-s",
                 "3", "--loss", "logistic", "--quiet", "--ridge", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ridge must be a finite number > 0" in err
