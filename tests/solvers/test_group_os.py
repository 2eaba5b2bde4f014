"""Group-aware OS: ≤ s1 features in ≤ s2 groups at every step, the exact
bi-level projection on each arrival, and plain OS when s2 = the number of groups."""

import numpy as np
import pytest
import reference_os as ref
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_os import brute_force

from asyos import InputError, fit_os
from asyos.core.kept_set import GroupKeptSet
from asyos.core.losses import Loss
from asyos.core.shards import group_owners
from asyos.solvers.simulator import fit_simulated

LOSSES = ["squared", "squared_hinge", "logistic"]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(3, 20), p=st.integers(2, 24), s1=st.integers(1, 6),
       n_groups=st.integers(1, 5), s2=st.integers(1, 4), loss=st.sampled_from(LOSSES),
       m=st.sampled_from([1.0, 2.5]), seed=st.integers(0, 2**16))
def test_every_step_is_os_step_then_the_exact_bilevel_projection(n, p, s1, n_groups,
                                                                 s2, loss, m, seed):
    X, y = ref.toy_problem(loss, n=n, p=p, s=1, seed=seed)
    groups = np.random.default_rng(seed).integers(0, n_groups, p)
    kept = GroupKeptSet(n, s1, groups, s2)
    eta = 0.5 if loss != "logistic" else 2.0
    order = np.random.default_rng(seed + 1).permutation(p)
    for j in np.concatenate([order, order]):            # two epochs: revisits too
        S, W = kept.index[:kept.size].tolist(), kept.weights[:kept.size].copy()
        S1, W1, _ = ref.os_step(X, y, S, W, int(j), p + 1, eta, m, loss)   # unprojected
        kept.step(j, np.ascontiguousarray(X[:, j]), kept.contribution, y,
                  Loss.parse(loss), eta, m)
        now = dict(zip(kept.index[:kept.size].tolist(), kept.weights[:kept.size]))
        before = dict(zip(S1, W1))
        assert kept.size <= s1 and len(set(groups[list(now)])) <= s2
        assert len(now) == kept.size
        for feature, weight in now.items():            # a sub-vector of the step
            assert weight == pytest.approx(before[feature], rel=1e-12, abs=1e-12)
        best = brute_force(W1, groups[S1], s1, s2) if j not in S else np.sum(W1 ** 2)
        assert sum(w * w for w in now.values()) == pytest.approx(best, rel=1e-9,
                                                                  abs=1e-15)
        u = X[:, kept.index[:kept.size]] @ kept.weights[:kept.size]
        # weights can grow to 1e6 on a tiny n under the squared loss: rounding is relative
        np.testing.assert_allclose(kept.contribution, u, rtol=1e-12,
                                   atol=1e-10 * max(1.0, np.abs(u).max(initial=0.0)))
        np.testing.assert_array_equal(kept.cols[:kept.size],
                                      X[:, kept.index[:kept.size]].T)


@pytest.mark.parametrize("rule", ["magnitude", "fitted"])
@pytest.mark.parametrize("loss", LOSSES)
def test_s2_equal_to_the_number_of_groups_is_plain_os_exactly(loss, rule):
    X, y = ref.toy_problem(loss, n=60, p=150, s=8, seed=5)
    groups = np.random.default_rng(0).integers(0, 12, 150)
    plain = fit_os(X, y, 15, loss=loss, epochs=3, rule=rule)
    grouped = fit_os(X, y, 15, loss=loss, epochs=3, groups=groups, s2=12, rule=rule)
    # the same steps in two kernels compiled apart, whose vectorised sums may round
    # differently in the last bit: the same features, the same swaps, the same weights
    # up to rounding
    np.testing.assert_array_equal(grouped.selected, plain.selected)
    np.testing.assert_allclose(grouped.weights, plain.weights, rtol=1e-12, atol=1e-14)
    assert grouped.objective == pytest.approx(plain.objective, rel=1e-12)
    assert grouped.substitutions_per_epoch == plain.substitutions_per_epoch
    one = fit_simulated(X, y, 15, 1, loss=loss, groups=groups, s2=12, rule=rule)
    np.testing.assert_array_equal(one.selected,
                                  fit_simulated(X, y, 15, 1, loss=loss,
                                                rule=rule).selected)


def test_group_budget_is_kept_and_helps_on_grouped_data():
    rng = np.random.default_rng(1)
    n, p = 80, 400
    X = rng.standard_normal((n, p))
    groups = np.repeat(np.arange(40), 10)
    w = np.zeros(p)
    w[[3, 5, 8, 41, 44, 47, 120, 125, 129]] = 2.0      # 3 features in each of 3 groups
    y = X @ w + 0.5 * rng.standard_normal(n)
    result = fit_os(X, y, 9, groups=groups, s2=3)
    assert set(groups[result.selected]) == {0, 4, 12}


def test_simulated_workers_own_whole_groups_and_budgets_sum_to_s1_s2():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 120))
    y = X[:, :6] @ np.ones(6)
    groups = rng.integers(0, 9, 120)
    owner = group_owners(groups, 9, 3)
    assert set(owner.tolist()) == {0, 1, 2}
    sizes = np.bincount(owner[groups], minlength=3)
    assert sizes.max() - sizes.min() <= np.bincount(groups).max()
    payload = fit_simulated(X, y, 10, 3, groups=groups, s2=5, delay=2, epochs=2)
    assert sum(payload.asy["budgets"]) == 10
    assert sum(payload.asy["group_budgets"]) == 5
    selected = np.asarray(payload.selected)
    assert selected.size <= 10 and len(set(groups[selected])) <= 5
    for t, worker in enumerate(payload.asy["workers"]):
        assert worker["kept"] <= payload.asy["budgets"][t]
    for t in range(3):   # each worker's kept groups are its own and within s2_t
        mine = selected[owner[groups[selected]] == t]
        assert len(set(groups[mine])) <= payload.asy["group_budgets"][t]


@pytest.mark.parametrize("kwargs, message", [
    (dict(groups=np.zeros(30, int)), "go together"),
    (dict(s2=2), "go together"),
    (dict(groups=np.arange(30) % 3, s2=4), "s2 must be in 1..3"),
    (dict(groups=np.arange(29), s2=2), "one label per feature"),
    (dict(groups=np.arange(30) % 3, s2=0), "s2 must be in 1..3"),
])
def test_bad_group_input_raises_before_any_work(kwargs, message):
    X = np.ones((5, 30))
    with pytest.raises(InputError, match=message):
        fit_os(X, np.ones(5), 3, **kwargs)


@pytest.mark.parametrize("q, kwargs, message", [
    (3, dict(s2=2), "group budget of s2 = 2"),
    (2, dict(s2=2, budget="adaptive"), "adaptive"),
])
def test_simulator_refuses_impossible_group_shards(q, kwargs, message):
    X = np.ones((5, 30))
    with pytest.raises(InputError, match=message):
        fit_simulated(X, np.ones(5), 6, q, groups=np.arange(30) % 5, **kwargs)


def test_cli_groups_file_and_group_sparsity(tmp_path, capsys):
    from asyos.cli.run import main

    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 100))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", X[:, [0, 1, 2, 50, 51]] @ np.ones(5))
    (tmp_path / "groups.txt").write_text("\n".join(f"g{j // 10}" for j in range(100)))
    common = ["--data", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
              "-s", "5", "--groups", str(tmp_path / "groups.txt"), "-q"]
    assert main(common + ["--group-sparsity", "2", "--epochs", "3"]) == 0
    chosen = capsys.readouterr().out.splitlines()[-1].split(":")[1].split()
    assert sorted(int(j) for j in chosen) == [0, 1, 2, 50, 51]
    assert main(common) == 2
    assert "go together" in capsys.readouterr().err
    assert main(common[:-3] + ["--groups", str(tmp_path / "missing.txt"),
                               "--group-sparsity", "1", "-q"]) == 2
