"""The bi-level projection (the DP of Xiang, Yang & Ye, KDD 2014, Algorithms 3-4)
against brute force and its own facts (their Lemma 1 and Proposition 1)."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_os import brute_force

from asyos import InputError, bilevel_projection
from asyos.core.projection import bilevel_keep, bilevel_keep_compact, dp_budgets


@st.composite
def cases(draw):
    """Up to 12 features in up to 5 groups, labels in any order; integer values
    (ties, zeros) as often as real ones; every (s1, s2) up to p+1 and G+1."""
    p = draw(st.integers(1, 12))
    n_groups = draw(st.integers(1, 5))
    groups = draw(st.lists(st.integers(0, n_groups - 1), min_size=p, max_size=p))
    if draw(st.booleans()):
        v = draw(st.lists(st.integers(-3, 3), min_size=p, max_size=p))
    else:
        v = draw(st.lists(st.floats(-10, 10, allow_nan=False), min_size=p, max_size=p))
    s1 = draw(st.integers(0, p + 1))
    s2 = draw(st.integers(0, len(set(groups)) + 1))
    return np.array(v, dtype=float), np.array(groups), s1, s2


@settings(max_examples=300, deadline=None)
@given(cases())
def test_dp_equals_brute_force_and_output_is_a_feasible_projection(case):
    v, groups, s1, s2 = case
    x = bilevel_projection(v, groups, s1, s2)
    assert np.all((x == 0) | (x == v))                       # x_i ∈ {0, v_i}
    assert np.count_nonzero(x) <= s1
    assert len(set(groups[x != 0])) <= s2
    assert np.sum(x ** 2) == pytest.approx(brute_force(v, groups, s1, s2), abs=1e-9)
    # within each group the kept entries are its largest |v|
    for g in set(groups):
        inside = np.abs(v[groups == g])
        kept = x[groups == g] != 0
        if kept.any() and (~kept).any():
            assert inside[kept].min() >= inside[~kept].max()


@pytest.mark.parametrize("s1, s2, expected", [
    (3, 1, [0, 0, 0, 2, 2, 2]),    # beats "top features first" (9)
    (1, 1, [3, 0, 0, 0, 0, 0]),    # beats "largest-norm group first" (4)
    (2, 2, [3, 0, 0, 2, 0, 0]),
    (4, 2, [3, 0, 0, 2, 2, 2]),
])
def test_hand_examples_where_greedy_orders_fail(s1, s2, expected):
    v = np.array([3.0, 0, 0, 2, 2, 2])
    np.testing.assert_array_equal(bilevel_projection(v, [0, 0, 0, 1, 1, 1], s1, s2),
                                  expected)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), p=st.integers(1, 60), n_groups=st.integers(1, 8))
def test_lemma_1_special_cases_and_invariance_to_group_order(seed, p, n_groups):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(p)
    groups = rng.integers(0, n_groups, p)
    G = len(set(groups))
    s1 = int(rng.integers(0, p + 1))
    w2 = np.sort(v ** 2)[::-1]
    # s2 ≥ |G|: plain top-s1 hard thresholding
    assert np.sum(bilevel_projection(v, groups, s1, G) ** 2) == pytest.approx(
        w2[:s1].sum())
    # s1 ≥ p: the top-s2 groups by ℓ2 norm
    s2 = int(rng.integers(0, G + 1))
    norms = np.sort([np.sum(v[groups == g] ** 2) for g in set(groups)])[::-1]
    assert np.sum(bilevel_projection(v, groups, p, s2) ** 2) == pytest.approx(
        norms[:s2].sum())
    np.testing.assert_array_equal(bilevel_projection(v, groups, p, G), v)
    assert not bilevel_projection(v, groups, 0, G).any()
    assert not bilevel_projection(v, groups, p, 0).any()
    # renaming (reordering) the groups does not change the optimal value
    relabel = rng.permutation(n_groups)[groups]
    s2 = int(rng.integers(0, G + 1))
    assert np.sum(bilevel_projection(v, relabel, s1, s2) ** 2) == pytest.approx(
        np.sum(bilevel_projection(v, groups, s1, s2) ** 2))


def test_string_labels_are_groups_too():
    v = np.array([1.0, 5.0, 4.0, 2.0])
    x = bilevel_projection(v, ["a", "b", "b", "a"], 2, 1)
    np.testing.assert_array_equal(x, [0, 5, 4, 0])


@pytest.mark.parametrize("v, groups, s1, s2, message", [
    ([1.0, 2.0], [0], 1, 1, "one label per feature"),
    ([1.0, np.nan], [0, 1], 1, 1, "NaN"),
    ([[1.0, 2.0]], [0, 1], 1, 1, "vector"),
    ([1.0, 2.0], [0.0, np.nan], 1, 1, "group label"),
    ([1.0, 2.0], [0.5, 1.0], 1, 1, "group label"),
    ([1.0, 2.0], [0, 1], -1, 1, "s1"),
    ([1.0, 2.0], [0, 1], 1, 1.5, "s2"),
    ([1.0, 2.0], [0, 1], True, 1, "s1"),
])
def test_bad_input_raises_input_error(v, groups, s1, s2, message):
    with pytest.raises(InputError, match=message):
        bilevel_projection(v, groups, s1, s2)


def _unclamped_dp(v, labels, s1, s2):
    """The DP as it ran before s2 was clamped to min(s2, s1, G): the full
    G·(s2+1)·(s1+1) table, on ``bilevel_keep``'s order.  Returns (keep, W*)."""
    from asyos.core.projection import _sgss_counts
    by_size = np.argsort(-np.abs(v), kind="mergesort")
    grouped = by_size[np.argsort(labels[by_size], kind="mergesort")]
    sorted_labels = labels[grouped]
    starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
    starts = np.r_[starts, len(v)].astype(np.int64) if len(v) else np.zeros(1, np.int64)
    n_groups = len(starts) - 1
    cnt, total = _sgss_counts(v[grouped] ** 2, starts, min(s1, len(v)),
                              min(s2, n_groups))
    keep = np.zeros(len(v), dtype=bool)
    for g in range(n_groups):
        keep[grouped[starts[g]:starts[g] + cnt[g]]] = True
    return keep, total


@settings(max_examples=300, deadline=None)
@given(cases(), st.integers(0, 4))
def test_clamping_s2_changes_nothing_but_the_table(case, extra):
    """s2 > min(s1, G) binds nothing: with s2 = s1 + extra the support equals that of
    s2 = s1, and both kernels equal, bit for bit (support and W*), the DP run on the
    whole unclamped table."""
    v, groups, s1, s2 = case
    labels = np.unique(groups, return_inverse=True)[1].astype(np.int64)
    n_groups = int(labels.max()) + 1
    for budget in (s2, s1 + extra, n_groups + extra):
        reference, best = _unclamped_dp(v, labels, s1, budget)
        keep = np.zeros(len(v), dtype=np.bool_)
        assert bilevel_keep(v, labels, s1, budget, keep) == best
        np.testing.assert_array_equal(keep, reference)
        assert bilevel_keep_compact(v, labels, n_groups, s1, budget, keep) == best
        np.testing.assert_array_equal(keep, reference)
    np.testing.assert_array_equal(bilevel_projection(v, groups, s1, s1 + extra),
                                  bilevel_projection(v, groups, s1, s1))


def test_dp_budgets_clamp_s2_to_s1_and_the_number_of_groups():
    assert dp_budgets(5000, 5000, 10, 2500) == (10, 10)    # groups=None, default s2
    assert dp_budgets(20, 200, 100, 50) == (100, 20)
    assert dp_budgets(20, 30, 100, 5) == (30, 5)           # s1 ≤ the candidates
    assert dp_budgets(20, 200, 0, 5) == (0, 0)
