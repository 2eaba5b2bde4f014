"""Model selection in the SGHT Table 3 experiment: the one-standard-error rule, the
extended BIC, and the ``selections`` option of the experiment."""

import math

import numpy as np
import pytest

from asyos.errors import InputError
from asyos.experiments import sght


def test_one_se_picks_the_sparsest_point_within_one_se():
    # 4 grid values × 5 folds; the least mean is row 2 (mean 1.0, fold SD 0.5,
    # SE = 0.5/√5 ≈ 0.2236): rows 1 (1.2) and 2 are within, rows 0 (2.0) and 3
    # (1.3) are not.
    errors = np.array([[2.0] * 5,
                       [1.2] * 5,
                       [1.0 - 0.5 * d for d in (-1.0, 1.0, 0.0, 1.0, -1.0)],
                       [1.3] * 5])
    se = errors[2].std(ddof=1) / math.sqrt(5)
    assert errors[1].mean() <= errors[2].mean() + se < errors[3].mean()
    keys = [(0,), (1,), (2,), (3,)]
    assert sght.one_se_index(errors, keys) == 1
    # the sparsest is whichever ``keys`` says, not the grid order
    assert sght.one_se_index(errors, [(5,), (3,), (1,), (0,)]) == 2
    # no spread over the folds: only the least mean qualifies
    flat = np.array([[2.0] * 5, [1.2] * 5, [1.0] * 5])
    assert sght.one_se_index(flat, [(0,), (1,), (2,)]) == 2


def test_one_se_ties_in_sparsity_go_to_the_lower_error():
    errors = np.array([[1.05] * 5, [1.0, 1.2, 0.8, 1.1, 0.9], [1.01] * 5])
    assert sght.one_se_index(errors, [(1,), (2,), (1,)]) == 2


def test_complexity_orders_pairs_by_groups_then_features_and_lambda_downward():
    grid = sght.grids(quick=False)["pairs"]
    ordered = sorted(grid, key=lambda v: sght.complexity("SGHT", v))
    assert ordered[:3] == [(4, 2), (8, 2), (12, 2)]
    assert ordered[5] == (8, 4)
    assert sght.complexity("sgLasso", 1.0) < sght.complexity("sgLasso", 0.1)
    assert sght.complexity("OMP", 6) < sght.complexity("OMP", 12)


def test_ebic_prefers_the_true_support_and_refuses_saturated_ones():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 200))
    truth = np.zeros(200)
    truth[:5] = 3.0
    y = X @ truth + rng.standard_normal(100)
    extra = truth.copy()
    extra[5:40] = 1e-3                  # a superset: the refit ignores the values
    assert sght.ebic(X, y, truth) < sght.ebic(X, y, extra)
    assert sght.ebic(X, y, truth) < sght.ebic(X, y, truth * (np.arange(200) < 3))
    assert sght.ebic(X, y, np.ones(200)) == math.inf
    assert math.isfinite(sght.ebic(X, y, np.zeros(200)))


def test_every_rule_is_scored_from_one_cv_table():
    rows = sght.run_case(1, 0, 0, quick=True, only=("gOMP", "sgLasso"),
                         selections=("cv", "1se", "ebic"))
    assert [(r["method"], r["select"]) for r in rows] == [
        ("gOMP", "cv"), ("gOMP", "1se"), ("gOMP", "ebic"),
        ("sgLasso", "cv"), ("sgLasso", "1se"), ("sgLasso", "ebic")]
    by = {(r["method"], r["select"]): r for r in rows}
    grid = sght.grids(True)
    for method, values in (("gOMP", grid["groups"]), ("sgLasso", grid["lambdas"])):
        cv, one_se = by[method, "cv"], by[method, "1se"]
        assert cv["param"] in map(str, values)
        # the one-SE choice is never less sparse than the plain CV choice
        index = {str(v): sght.complexity(method, v) for v in values}
        assert index[one_se["param"]] <= index[cv["param"]]
    for row in rows:
        assert row["grp_NO"] - row["grp_FP"] + row["grp_FN"] == 6
        assert row["feat_NO"] - row["feat_FP"] + row["feat_FN"] == 18


def test_sght_table_writes_the_rule_column(tmp_path):
    result = sght.sght_table(tmp_path, reps=1, quick=True, progress=False,
                             methods_only=["gOMP"], selections=["1se", "ebic"])
    assert {(e["case"], e["select"]) for e in result.summary} == {
        (1, "1se"), (1, "ebic"), (2, "1se"), (2, "ebic")}
    assert "select" in (tmp_path / "sght.csv").read_text().splitlines()[0]
    with pytest.raises(InputError, match="selections"):
        sght.sght_table(tmp_path, reps=1, quick=True, progress=False,
                        methods_only=["gOMP"], selections=["aic"])


def test_cli_passes_the_rules(tmp_path, capsys):
    from asyos.experiments.cli import main

    main(["sght", "--quick", "--reps", "1", "--methods", "gOMP", "--select",
          "cv,1se", "--no-progress", "--out", str(tmp_path)])
    header, *body = (tmp_path / "sght.csv").read_text().splitlines()
    assert "select" in header and len(body) == 4


def test_bilevel_ebic_counts_groups():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((100, 40))
    groups = np.repeat(np.arange(4), 10)
    y = rng.standard_normal(100)
    w = np.zeros(40)
    w[[0, 1, 2]] = 1.0                     # 3 features in 1 of 4 groups
    gamma = 1.0 - math.log(100) / (2.0 * math.log(40))
    plain, bilevel = sght.ebic(X, y, w), sght.ebic(X, y, w, groups)
    # log C(4, 1) + log C(10, 3) in place of log C(40, 3)
    assert bilevel - plain == pytest.approx(
        2.0 * gamma * (math.log(4) + math.log(120) - math.log(9880)))
    spread = np.zeros(40)
    spread[[0, 10, 20]] = 1.0              # the same 3 features' count in 3 groups
    assert sght.ebic(X, y, spread, groups) - sght.ebic(X, y, spread) == \
        pytest.approx(2.0 * gamma * (math.log(4) + math.log(4060) - math.log(9880)))


def test_information_criteria_alone_skip_the_cv():
    rows = sght.run_case(2, 0, 0, quick=True, only=("gOMP",),
                         selections=("gebic", "ebic"))
    assert [r["select"] for r in rows] == ["gebic", "ebic"]
    assert all(r["grp_NO"] - r["grp_FP"] + r["grp_FN"] == 6 for r in rows)


def test_the_paper_baselines_run_and_are_scored():
    rows = sght.run_case(1, 0, 0, quick=True, only=("frac(1,2)", "frac(2,1)", "DC"),
                         selections=("cv", "1se"))
    assert [r["method"] for r in rows] == ["frac(1,2)"] * 2 + ["frac(2,1)"] * 2 + \
        ["DC"] * 2
    grid = sght.grids(True)
    for row in rows:
        assert row["grp_NO"] - row["grp_FP"] + row["grp_FN"] == 6
        assert row["feat_NO"] - row["feat_FP"] + row["feat_FN"] == 18
        values = grid["pairs"] if row["method"] == "DC" else grid["fractions"]
        assert row["param"] in map(str, values)
    # λ grids are sparsest at the largest λ, as for sgLasso
    assert sght.complexity("frac(2,1)", 1e2) < sght.complexity("frac(2,1)", 1e-8)


def test_cli_method_names_keep_their_commas(tmp_path):
    from asyos.experiments.cli import _method_names, main

    assert _method_names("SGHT (4 starts), frac(1,2),DC") == [
        "SGHT (4 starts)", "frac(1,2)", "DC"]
    with pytest.raises(InputError, match="unknown method frac"):
        sght.sght_table(tmp_path, reps=1, quick=True, progress=False,
                        methods_only=["frac"])
    assert main(["sght", "--quick", "--reps", "1", "--methods", "frac(2,1)",
                 "--no-progress", "--out", str(tmp_path)]) == 0
    header, *body = (tmp_path / "sght.csv").read_text().splitlines()
    assert len(body) == 2 and all("frac(2,1)" in line for line in body)
